//! The common OpenFlow header (`ofp_header`, spec 1.3.5 §7.1) and the
//! message type numbers (`OFPT_*`) with their spec names.

use crate::consts::OFP_HEADER_LEN;
use crate::error::{BadRequestCode, DecodeError, OfpError};
use crate::wire::{wire_numbers, Reader, Writer};
use serde::Serialize;

wire_numbers! {
    /// `OFPT_*` message type numbers of OpenFlow 1.3.
    pub mod msg_type: u8 {
        HELLO = 0, ERROR = 1, ECHO_REQUEST = 2, ECHO_REPLY = 3, EXPERIMENTER = 4,
        FEATURES_REQUEST = 5, FEATURES_REPLY = 6, GET_CONFIG_REQUEST = 7, GET_CONFIG_REPLY = 8,
        SET_CONFIG = 9, PACKET_IN = 10, FLOW_REMOVED = 11, PORT_STATUS = 12, PACKET_OUT = 13,
        FLOW_MOD = 14, GROUP_MOD = 15, PORT_MOD = 16, TABLE_MOD = 17, MULTIPART_REQUEST = 18,
        MULTIPART_REPLY = 19, BARRIER_REQUEST = 20, BARRIER_REPLY = 21,
        QUEUE_GET_CONFIG_REQUEST = 22, QUEUE_GET_CONFIG_REPLY = 23, ROLE_REQUEST = 24,
        ROLE_REPLY = 25, GET_ASYNC_REQUEST = 26, GET_ASYNC_REPLY = 27, SET_ASYNC = 28,
        METER_MOD = 29,
    }
}

/// The spec's name of a message type without its `OFPT_` prefix, e.g.
/// `FLOW_MOD`; `None` for numbers OpenFlow 1.3 does not define.
pub fn msg_type_name(t: u8) -> Option<&'static str> {
    const NAMES: [&str; 30] = [
        "HELLO",
        "ERROR",
        "ECHO_REQUEST",
        "ECHO_REPLY",
        "EXPERIMENTER",
        "FEATURES_REQUEST",
        "FEATURES_REPLY",
        "GET_CONFIG_REQUEST",
        "GET_CONFIG_REPLY",
        "SET_CONFIG",
        "PACKET_IN",
        "FLOW_REMOVED",
        "PORT_STATUS",
        "PACKET_OUT",
        "FLOW_MOD",
        "GROUP_MOD",
        "PORT_MOD",
        "TABLE_MOD",
        "MULTIPART_REQUEST",
        "MULTIPART_REPLY",
        "BARRIER_REQUEST",
        "BARRIER_REPLY",
        "QUEUE_GET_CONFIG_REQUEST",
        "QUEUE_GET_CONFIG_REPLY",
        "ROLE_REQUEST",
        "ROLE_REPLY",
        "GET_ASYNC_REQUEST",
        "GET_ASYNC_REPLY",
        "SET_ASYNC",
        "METER_MOD",
    ];
    NAMES.get(usize::from(t)).copied()
}

/// `ofp_header`: the first 8 bytes of every message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Header {
    /// Wire version (`0x04` for OpenFlow 1.3).
    pub version: u8,
    /// `OFPT_*` (see [`msg_type`]).
    #[serde(rename = "type")]
    pub msg_type: u8,
    /// Length of the whole message, header included.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// Reads the 8-byte header at the start of `bytes`. Only the header is
    /// looked at: this checks that 8 bytes are there and that the length
    /// field is at least 8, not that the buffer holds `length` bytes.
    pub fn decode(bytes: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(bytes);
        let header = Header {
            version: r.u8()?,
            msg_type: r.u8()?,
            length: r.u16()?,
            xid: r.u32()?,
        };
        if usize::from(header.length) < OFP_HEADER_LEN {
            return Err(DecodeError::new(
                OfpError::BadRequest(BadRequestCode::BadLen),
                2,
                format!("header length {} is less than 8", header.length),
            ));
        }
        Ok(header)
    }

    /// Appends the header.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u8(self.version);
        w.put_u8(self.msg_type);
        w.put_u16(self.length);
        w.put_u32(self.xid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_fields_big_endian() {
        let h = Header::decode(&[4, 14, 0x01, 0x02, 0xde, 0xad, 0xbe, 0xef, 99]).unwrap();
        assert_eq!(
            h,
            Header {
                version: 4,
                msg_type: 14,
                length: 0x0102,
                xid: 0xdead_beef
            }
        );
        let mut w = Vec::new();
        h.encode(&mut w);
        assert_eq!(w, [4, 14, 0x01, 0x02, 0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn short_header_and_small_length_are_bad_len() {
        let bad_len = OfpError::BadRequest(BadRequestCode::BadLen);
        assert_eq!(Header::decode(&[4, 0, 0, 8]).unwrap_err().error, bad_len);
        let e = Header::decode(&[4, 0, 0, 7, 0, 0, 0, 0]).unwrap_err();
        assert_eq!(e.error, bad_len);
        assert_eq!(e.offset, 2);
    }

    #[test]
    fn names_cover_exactly_the_30_types() {
        assert_eq!(msg_type_name(msg_type::HELLO), Some("HELLO"));
        assert_eq!(msg_type_name(msg_type::FLOW_MOD), Some("FLOW_MOD"));
        assert_eq!(msg_type_name(msg_type::METER_MOD), Some("METER_MOD"));
        assert_eq!(msg_type_name(30), None);
    }
}
