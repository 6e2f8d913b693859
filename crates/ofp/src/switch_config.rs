//! Switch features and configuration (spec 1.3.5 §7.3.1, §7.3.2):
//! `OFPT_FEATURES_REPLY`, `OFPT_GET_CONFIG_REPLY` and `OFPT_SET_CONFIG`
//! bodies. (The requests have empty bodies.)

use crate::wire::{wire_layout, wire_numbers};
use serde::Serialize;

wire_numbers! {
    /// `OFPC_*` capability bits of [`FeaturesReply::capabilities`].
    pub mod capabilities: u32 {
        FLOW_STATS = 1 << 0, TABLE_STATS = 1 << 1, PORT_STATS = 1 << 2, GROUP_STATS = 1 << 3,
        IP_REASM = 1 << 5, QUEUE_STATS = 1 << 6, PORT_BLOCKED = 1 << 8,
    }
}

wire_numbers! {
    /// `OFPC_FRAG_*` values of [`SwitchConfig::flags`].
    pub mod config_flags: u16 {
        FRAG_NORMAL = 0, FRAG_DROP = 1, FRAG_REASM = 2, FRAG_MASK = 3,
    }
}

/// `ofp_switch_features` (after the header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct FeaturesReply {
    /// Datapath id: the low 48 bits are usually a MAC address.
    pub datapath_id: u64,
    /// Packets the switch can buffer at once.
    pub n_buffers: u32,
    /// Number of flow tables.
    pub n_tables: u8,
    /// Auxiliary connection id (0 on the main connection).
    pub auxiliary_id: u8,
    /// `OFPC_*` bits (see [`capabilities`]).
    pub capabilities: u32,
    /// Reserved; kept as sent.
    pub reserved: u32,
}

wire_layout! {
    FeaturesReply: BODY_LEN = 24, {
        datapath_id, n_buffers, n_tables, auxiliary_id, pad 2, capabilities, reserved,
    }
}

/// `ofp_switch_config` (after the header): the body of GET_CONFIG_REPLY and
/// SET_CONFIG.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct SwitchConfig {
    /// `OFPC_FRAG_*`.
    pub flags: u16,
    /// Bytes of a packet sent to the controller by a table miss.
    pub miss_send_len: u16,
}

wire_layout!(SwitchConfig: BODY_LEN = 4, { flags, miss_send_len });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Reader;

    #[test]
    fn features_reply_layout() {
        let body = [
            0, 0, 0, 0, 0, 0, 0, 1, // datapath_id
            0, 0, 1, 0, // n_buffers
            254, 3, 0xaa, 0xbb, // n_tables, auxiliary_id, pad (ignored)
            0, 0, 0, 0x4f, 0, 0, 0, 0,
        ];
        let f = FeaturesReply::decode(&mut Reader::new(&body)).unwrap();
        assert_eq!(f.datapath_id, 1);
        assert_eq!(f.n_buffers, 256);
        assert_eq!(f.n_tables, 254);
        assert_eq!(f.auxiliary_id, 3);
        assert_eq!(f.capabilities, 0x4f);
        let mut w = Vec::new();
        f.encode(&mut w);
        let mut expect = body;
        expect[14] = 0;
        expect[15] = 0;
        assert_eq!(w, expect);
        assert!(FeaturesReply::decode(&mut Reader::new(&body[..23])).is_err());
    }

    #[test]
    fn switch_config_layout() {
        let c = SwitchConfig::decode(&mut Reader::new(&[0, 2, 0xff, 0xe5])).unwrap();
        assert_eq!(c.flags, config_flags::FRAG_REASM);
        assert_eq!(c.miss_send_len, 0xffe5);
        let mut w = Vec::new();
        c.encode(&mut w);
        assert_eq!(w, [0, 2, 0xff, 0xe5]);
    }
}
