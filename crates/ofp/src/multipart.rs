//! `OFPT_MULTIPART_REQUEST` and `OFPT_MULTIPART_REPLY` bodies (spec 1.3.5
//! §7.3.5).
//!
//! Placeholder types: the multipart work replaces this file with every
//! request and reply body. The message layer relies only on the two types
//! and their `decode`/`encode` signatures below.

use serde::Serialize;

/// A multipart request: everything after the common OpenFlow header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MultipartRequest {
    /// `OFPMPF_REQ_MORE` etc.
    pub flags: u16,
}

/// A multipart reply: everything after the common OpenFlow header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MultipartReply {
    /// `OFPMPF_REPLY_MORE` etc.
    pub flags: u16,
}

impl MultipartRequest {
    /// Decodes from the first byte after the 8-byte header to the end of
    /// the message.
    pub fn decode(_r: &mut crate::wire::Reader) -> Result<Self, crate::DecodeError> {
        unimplemented!("multipart codec")
    }
    /// Encodes the body (without the 8-byte header).
    pub fn encode(&self, _w: &mut Vec<u8>) {
        unimplemented!("multipart codec")
    }
}

impl MultipartReply {
    /// Decodes from the first byte after the 8-byte header to the end of
    /// the message.
    pub fn decode(_r: &mut crate::wire::Reader) -> Result<Self, crate::DecodeError> {
        unimplemented!("multipart codec")
    }
    /// Encodes the body (without the 8-byte header).
    pub fn encode(&self, _w: &mut Vec<u8>) {
        unimplemented!("multipart codec")
    }
}
