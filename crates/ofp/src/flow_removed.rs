//! `OFPT_FLOW_REMOVED` (spec 1.3.5 §7.4.2): a flow entry left its table.

use crate::oxm::Match;
use crate::wire::{wire_layout, wire_numbers};
use serde::Serialize;

wire_numbers! {
    /// `OFPRR_*` values of [`FlowRemoved::reason`].
    pub mod flow_removed_reason: u8 {
        IDLE_TIMEOUT = 0, HARD_TIMEOUT = 1, DELETE = 2, GROUP_DELETE = 3, METER_DELETE = 4,
    }
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

wire_layout! {
    FlowRemoved {
        cookie, priority, reason, table_id, duration_sec, duration_nsec, idle_timeout, hard_timeout,
        packet_count, byte_count, match_,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reencodes;
    use crate::wire::Reader;

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
        let f = reencodes(&body, FlowRemoved::decode, FlowRemoved::encode);
        assert_eq!(f.cookie, 5);
        assert_eq!(f.priority, 100);
        assert_eq!(f.reason, flow_removed_reason::DELETE);
        assert_eq!(f.table_id, 7);
        assert_eq!((f.duration_sec, f.duration_nsec), (10, 20));
        assert_eq!((f.idle_timeout, f.hard_timeout), (30, 40));
        assert_eq!((f.packet_count, f.byte_count), (50, 60));
        assert!(FlowRemoved::decode(&mut Reader::new(&body[..47])).is_err());
    }
}
