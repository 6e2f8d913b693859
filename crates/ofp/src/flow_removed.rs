//! `OFPT_FLOW_REMOVED` (spec 1.3.5 §7.4.2): a flow entry left its table.

use crate::error::DecodeError;
use crate::oxm::Match;
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// `OFPRR_*` values of [`FlowRemoved::reason`].
pub mod flow_removed_reason {
    pub const IDLE_TIMEOUT: u8 = 0;
    pub const HARD_TIMEOUT: u8 = 1;
    pub const DELETE: u8 = 2;
    pub const GROUP_DELETE: u8 = 3;
    pub const METER_DELETE: u8 = 4;
}

/// `ofp_flow_removed` (after the header). The reason is kept raw.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct FlowRemoved {
    /// Cookie of the removed entry.
    pub cookie: u64,
    /// Priority of the removed entry.
    pub priority: u16,
    /// `OFPRR_*`.
    pub reason: u8,
    /// Table the entry was in.
    pub table_id: u8,
    /// Time the entry was alive, seconds part.
    pub duration_sec: u32,
    /// Time the entry was alive beyond `duration_sec`, nanoseconds.
    pub duration_nsec: u32,
    /// Idle timeout from the original flow-mod.
    pub idle_timeout: u16,
    /// Hard timeout from the original flow-mod.
    pub hard_timeout: u16,
    /// Packets the entry matched.
    pub packet_count: u64,
    /// Bytes the entry matched.
    pub byte_count: u64,
    /// Match of the removed entry.
    #[serde(rename = "match")]
    pub match_: Match,
}

impl FlowRemoved {
    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<FlowRemoved, DecodeError> {
        Ok(FlowRemoved {
            cookie: r.u64()?,
            priority: r.u16()?,
            reason: r.u8()?,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            match_: Match::decode(r)?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u64(self.cookie);
        w.put_u16(self.priority);
        w.put_u8(self.reason);
        w.put_u8(self.table_id);
        w.put_u32(self.duration_sec);
        w.put_u32(self.duration_nsec);
        w.put_u16(self.idle_timeout);
        w.put_u16(self.hard_timeout);
        w.put_u64(self.packet_count);
        w.put_u64(self.byte_count);
        self.match_.encode(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_with_empty_match() {
        let mut body = vec![0, 0, 0, 0, 0, 0, 0, 5, 0, 100, 2, 7];
        for v in [10u32, 20] {
            body.extend(v.to_be_bytes());
        }
        body.extend([0, 30, 0, 40]);
        for v in [50u64, 60] {
            body.extend(v.to_be_bytes());
        }
        body.extend([0, 1, 0, 4, 0, 0, 0, 0]);
        let f = FlowRemoved::decode(&mut Reader::new(&body)).unwrap();
        assert_eq!(f.cookie, 5);
        assert_eq!(f.priority, 100);
        assert_eq!(f.reason, flow_removed_reason::DELETE);
        assert_eq!(f.table_id, 7);
        assert_eq!((f.duration_sec, f.duration_nsec), (10, 20));
        assert_eq!((f.idle_timeout, f.hard_timeout), (30, 40));
        assert_eq!((f.packet_count, f.byte_count), (50, 60));
        let mut w = Vec::new();
        f.encode(&mut w);
        assert_eq!(w, body);
        assert!(FlowRemoved::decode(&mut Reader::new(&body[..47])).is_err());
    }
}
