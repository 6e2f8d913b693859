//! `OFPT_PORT_STATUS` (spec 1.3.5 §7.4.3) and `OFPT_PORT_MOD` (§7.3.4.5):
//! port change notifications and port configuration.

use crate::oxm::MacAddr;
use crate::port::Port;
use crate::wire::{wire_layout, wire_numbers};
use serde::Serialize;

wire_numbers! {
    /// `OFPPR_*` values of [`PortStatus::reason`].
    pub mod port_reason: u8 {
        ADD = 0, DELETE = 1, MODIFY = 2,
    }
}

/// `ofp_port_status` (after the header). The reason is kept raw.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PortStatus {
    /// `OFPPR_*`.
    pub reason: u8,
    pub desc: Port,
}

wire_layout!(PortStatus: BODY_LEN = 72, { reason, pad 7, desc });

/// `ofp_port_mod` (after the header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct PortMod {
    pub port_no: u32,
    /// Must be the port's address (a sanity check, not a change).
    pub hw_addr: MacAddr,
    /// `OFPPC_*` bits to set, among those in `mask`.
    pub config: u32,
    /// Which `OFPPC_*` bits to change.
    pub mask: u32,
    /// `OFPPF_*` bits to advertise; 0 leaves them unchanged.
    pub advertise: u32,
}

wire_layout! {
    PortMod: BODY_LEN = 32, {
        port_no, pad 4, hw_addr, pad 2, config, mask, advertise, pad 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reencodes;
    use crate::wire::Reader;

    #[test]
    fn port_mod_layout() {
        let body = [
            0, 0, 0, 1, 0, 0, 0, 0, // port_no, pad
            0, 1, 2, 3, 4, 5, 0, 0, // hw_addr, pad
            0, 0, 0, 0x41, 0, 0, 0, 0x61, 0, 0, 0x08, 0, 0, 0, 0, 0,
        ];
        let p = reencodes(&body, PortMod::decode, PortMod::encode);
        assert_eq!(p.port_no, 1);
        assert_eq!(p.hw_addr, MacAddr([0, 1, 2, 3, 4, 5]));
        assert_eq!((p.config, p.mask, p.advertise), (0x41, 0x61, 0x800));
        assert!(PortMod::decode(&mut Reader::new(&body[..31])).is_err());
    }

    #[test]
    fn port_status_layout() {
        let mut body = vec![2, 0, 0, 0, 0, 0, 0, 0];
        let port = Port {
            port_no: 3,
            name: "p3".into(),
            ..Port::default()
        };
        port.encode(&mut body);
        let s = reencodes(&body, PortStatus::decode, PortStatus::encode);
        assert_eq!(s.reason, port_reason::MODIFY);
        assert_eq!(s.desc, port);
    }
}
