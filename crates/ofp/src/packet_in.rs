//! `OFPT_PACKET_IN` (spec 1.3.5 §7.4.1): a packet sent to the controller.

use crate::oxm::Match;
use crate::wire::{wire_layout, wire_numbers};
use serde::Serialize;

wire_numbers! {
    /// `OFPR_*` values of [`PacketIn::reason`].
    pub mod packet_in_reason: u8 {
        NO_MATCH = 0, ACTION = 1, INVALID_TTL = 2,
    }
}

/// `ofp_packet_in` (after the header). The reason is kept raw.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct PacketIn {
    /// Buffer id, or `OFP_NO_BUFFER`.
    pub buffer_id: u32,
    /// Length of the frame as received (`data` may be shorter).
    pub total_len: u16,
    /// `OFPR_*`.
    pub reason: u8,
    pub table_id: u8,
    /// Cookie of the flow entry that sent the packet.
    pub cookie: u64,
    /// Pipeline fields (`in_port` first, then others).
    #[serde(rename = "match")]
    pub match_: Match,
    /// The frame (or its first `max_len` / `miss_send_len` bytes).
    #[serde(serialize_with = "crate::serde_hex")]
    pub data: Vec<u8>,
}

impl Default for PacketIn {
    fn default() -> Self {
        PacketIn {
            buffer_id: crate::consts::OFP_NO_BUFFER,
            total_len: 0,
            reason: packet_in_reason::NO_MATCH,
            table_id: 0,
            cookie: 0,
            match_: Match::default(),
            data: Vec::new(),
        }
    }
}

wire_layout!(PacketIn { buffer_id, total_len, reason, table_id, cookie, match_, pad 2, data: rest });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{reencodes, Reader};

    #[test]
    fn layout_with_empty_match() {
        let body = [
            0xff, 0xff, 0xff, 0xff, 0, 60, 1, 3, // buffer_id, total_len, reason, table
            0, 0, 0, 0, 0, 0, 0, 9, // cookie
            0, 1, 0, 4, 0, 0, 0, 0, // empty OXM match
            0, 0, 0xab, 0xcd, // pad, data
        ];
        let p = reencodes(&body, PacketIn::decode, PacketIn::encode);
        assert_eq!(p.total_len, 60);
        assert_eq!(p.reason, packet_in_reason::ACTION);
        assert_eq!(p.table_id, 3);
        assert_eq!(p.cookie, 9);
        assert!(p.match_.fields.is_empty());
        assert_eq!(p.data, [0xab, 0xcd]);
        // The two pad bytes after the match are required.
        assert!(PacketIn::decode(&mut Reader::new(&body[..25])).is_err());
    }
}
