//! `OFPT_GET_ASYNC_REPLY` / `OFPT_SET_ASYNC` (spec 1.3.5 §7.3.10): which
//! asynchronous messages a controller wants, per role.

use crate::error::DecodeError;
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// `ofp_async_config` (after the header). Index 0 of each pair applies when
/// the controller is master or equal, index 1 when it is slave; bit `n` of
/// a mask enables reason `n`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct AsyncConfig {
    pub packet_in_mask: [u32; 2],
    pub port_status_mask: [u32; 2],
    pub flow_removed_mask: [u32; 2],
}

impl AsyncConfig {
    /// Body length (the message is 32 bytes).
    pub const BODY_LEN: usize = 24;

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<AsyncConfig, DecodeError> {
        Ok(AsyncConfig {
            packet_in_mask: [r.u32()?, r.u32()?],
            port_status_mask: [r.u32()?, r.u32()?],
            flow_removed_mask: [r.u32()?, r.u32()?],
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        for m in self
            .packet_in_mask
            .iter()
            .chain(&self.port_status_mask)
            .chain(&self.flow_removed_mask)
        {
            w.put_u32(*m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reencodes;

    #[test]
    fn layout_in_spec_order() {
        let body: Vec<u8> = (1..=6u32).flat_map(|v| v.to_be_bytes()).collect();
        let a = reencodes(&body, AsyncConfig::decode, AsyncConfig::encode);
        assert_eq!(a.packet_in_mask, [1, 2]);
        assert_eq!(a.port_status_mask, [3, 4]);
        assert_eq!(a.flow_removed_mask, [5, 6]);
    }
}
