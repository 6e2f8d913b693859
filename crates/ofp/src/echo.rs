//! `OFPT_ECHO_REQUEST` / `OFPT_ECHO_REPLY` (spec 1.3.5 §7.5.2, §7.5.3) and
//! `OFPT_EXPERIMENTER` (§7.5.4): messages whose body is (mostly) opaque.

use crate::wire::wire_layout;
use serde::Serialize;

/// An echo request or reply: arbitrary data the reply returns unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Echo {
    /// Opaque bytes.
    #[serde(serialize_with = "crate::serde_hex")]
    pub data: Vec<u8>,
}

wire_layout!(Echo { data: rest });

/// `ofp_experimenter_header` message: vendor id, vendor-defined type, data.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Experimenter {
    /// Experimenter id (an OUI or ONF-assigned id).
    pub experimenter: u32,
    /// Experimenter-defined type.
    pub exp_type: u32,
    /// Opaque bytes.
    #[serde(serialize_with = "crate::serde_hex")]
    pub data: Vec<u8>,
}

wire_layout!(Experimenter {
    experimenter,
    exp_type,
    data: rest
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{reencodes, Reader};

    #[test]
    fn experimenter_fields_and_data() {
        let body = [0, 0, 0x23, 0x20, 0, 0, 0, 7, b'h', b'i'];
        let e = reencodes(&body, Experimenter::decode, Experimenter::encode);
        assert_eq!(e.experimenter, 0x2320);
        assert_eq!(e.exp_type, 7);
        assert_eq!(e.data, b"hi");
        assert!(Experimenter::decode(&mut Reader::new(&body[..7])).is_err());
    }

    #[test]
    fn echo_keeps_data() {
        let e = reencodes(b"ping", Echo::decode, Echo::encode);
        assert_eq!(e.data, b"ping");
    }
}
