//! Switch features and configuration (spec 1.3.5 §7.3.1, §7.3.2):
//! `OFPT_FEATURES_REPLY`, `OFPT_GET_CONFIG_REPLY` and `OFPT_SET_CONFIG`
//! bodies. (The requests have empty bodies.)

use crate::error::DecodeError;
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// `OFPC_*` capability bits of [`FeaturesReply::capabilities`].
pub mod capabilities {
    pub const FLOW_STATS: u32 = 1 << 0;
    pub const TABLE_STATS: u32 = 1 << 1;
    pub const PORT_STATS: u32 = 1 << 2;
    pub const GROUP_STATS: u32 = 1 << 3;
    pub const IP_REASM: u32 = 1 << 5;
    pub const QUEUE_STATS: u32 = 1 << 6;
    pub const PORT_BLOCKED: u32 = 1 << 8;
}

/// `OFPC_FRAG_*` values of [`SwitchConfig::flags`].
pub mod config_flags {
    pub const FRAG_NORMAL: u16 = 0;
    pub const FRAG_DROP: u16 = 1;
    pub const FRAG_REASM: u16 = 2;
    pub const FRAG_MASK: u16 = 3;
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

impl FeaturesReply {
    /// Body length (the message is 32 bytes).
    pub const BODY_LEN: usize = 24;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<FeaturesReply, DecodeError> {
        let datapath_id = r.u64()?;
        let n_buffers = r.u32()?;
        let n_tables = r.u8()?;
        let auxiliary_id = r.u8()?;
        r.skip(2)?;
        Ok(FeaturesReply {
            datapath_id,
            n_buffers,
            n_tables,
            auxiliary_id,
            capabilities: r.u32()?,
            reserved: r.u32()?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u64(self.datapath_id);
        w.put_u32(self.n_buffers);
        w.put_u8(self.n_tables);
        w.put_u8(self.auxiliary_id);
        w.put_zeros(2);
        w.put_u32(self.capabilities);
        w.put_u32(self.reserved);
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

impl SwitchConfig {
    /// Body length (the message is 12 bytes).
    pub const BODY_LEN: usize = 4;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<SwitchConfig, DecodeError> {
        Ok(SwitchConfig {
            flags: r.u16()?,
            miss_send_len: r.u16()?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u16(self.flags);
        w.put_u16(self.miss_send_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
