//! `ofp_port` (spec 1.3.5 §7.2.1): the port description carried by
//! PORT_STATUS and the PORT_DESC multipart reply.

use crate::oxm::MacAddr;
use serde::Serialize;

/// A port description.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Port {
    pub port_no: u32,
    pub hw_addr: MacAddr,
    /// At most 15 bytes; written NUL-padded to 16.
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

// Codec: the bodies are written by the message work (placeholders until then).
impl Port {
    /// Wire length of `ofp_port`.
    pub const LEN: usize = 64;
    /// Decodes one `ofp_port`.
    pub fn decode(_r: &mut crate::wire::Reader) -> Result<Port, crate::DecodeError> {
        unimplemented!("port codec")
    }
    /// Encodes one `ofp_port`.
    pub fn encode(&self, _w: &mut Vec<u8>) {
        unimplemented!("port codec")
    }
}
