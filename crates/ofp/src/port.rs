//! `ofp_port` (spec 1.3.5 §7.2.1): the port description carried by
//! PORT_STATUS and the PORT_DESC multipart reply.

use crate::error::{BadRequestCode, DecodeError, OfpError};
use crate::oxm::MacAddr;
use crate::wire::{encode_fixed_str, wire_numbers, Reader, Writer};
use serde::Serialize;

/// A port description.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Port {
    /// Port number.
    pub port_no: u32,
    /// Ethernet address.
    pub hw_addr: MacAddr,
    /// At most 15 bytes; written NUL-padded to 16.
    pub name: String,
    /// `OFPPC_*` bits (see [`port_config`]).
    pub config: u32,
    /// `OFPPS_*` bits (see [`port_state`]).
    pub state: u32,
    /// Current features (`OFPPF_*`).
    pub curr: u32,
    /// Features advertised by the port.
    pub advertised: u32,
    /// Features supported by the port.
    pub supported: u32,
    /// Features advertised by the peer.
    pub peer: u32,
    /// Current bit rate in kbit/s.
    pub curr_speed: u32,
    /// Maximum bit rate in kbit/s.
    pub max_speed: u32,
}

/// Length of the name field (`OFP_MAX_PORT_NAME_LEN`).
pub const OFP_MAX_PORT_NAME_LEN: usize = 16;

wire_numbers! {
    /// `OFPPC_*` bits of [`Port::config`] and `PortMod::config`/`mask`.
    pub mod port_config: u32 {
        PORT_DOWN = 1 << 0, NO_RECV = 1 << 2, NO_FWD = 1 << 5, NO_PACKET_IN = 1 << 6,
    }
}

wire_numbers! {
    /// `OFPPS_*` bits of [`Port::state`].
    pub mod port_state: u32 {
        LINK_DOWN = 1 << 0, BLOCKED = 1 << 1, LIVE = 1 << 2,
    }
}

/// Decodes a NUL-padded name field: the bytes before the first NUL (all of
/// them when there is none). A name that is not UTF-8 is an error
/// (`BAD_REQUEST/BAD_PORT`) rather than a silently altered string, so that
/// whatever decodes re-encodes to the same name.
pub(crate) fn decode_name(r: &Reader, raw: &[u8]) -> Result<String, DecodeError> {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let bytes = raw.get(..end).unwrap_or_default();
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        DecodeError::new(
            OfpError::BadRequest(BadRequestCode::BadPort),
            r.offset().saturating_sub(raw.len()),
            "port name is not UTF-8",
        )
    })
}

crate::wire::codec_field!(Port);

impl Port {
    /// Wire length of `ofp_port`.
    pub const LEN: usize = 64;

    /// Decodes one `ofp_port`.
    pub fn decode(r: &mut Reader) -> Result<Port, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let hw_addr = MacAddr(r.array()?);
        r.skip(2)?;
        let raw = r.bytes(OFP_MAX_PORT_NAME_LEN)?;
        let name = decode_name(r, raw)?;
        Ok(Port {
            port_no,
            hw_addr,
            name,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }

    /// Encodes one `ofp_port`.
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u32(self.port_no);
        w.put_zeros(4);
        w.put_bytes(&self.hw_addr.0);
        w.put_zeros(2);
        encode_fixed_str(&self.name, OFP_MAX_PORT_NAME_LEN, w);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            w.put_u32(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reencodes;

    fn sample() -> Vec<u8> {
        let mut b = vec![
            0, 0, 0, 7, 0, 0, 0, 0, 0xf2, 0x0b, 0xa4, 0xd0, 0x3f, 0x70, 0, 0,
        ];
        let mut name = b"eth0".to_vec();
        name.resize(16, 0);
        b.extend(name);
        for v in 1..=8u32 {
            b.extend(v.to_be_bytes());
        }
        b
    }

    #[test]
    fn layout_and_round_trip() {
        let b = sample();
        assert_eq!(b.len(), Port::LEN);
        let p = reencodes(&b, Port::decode, Port::encode);
        assert_eq!(p.port_no, 7);
        assert_eq!(p.hw_addr.to_string(), "f2:0b:a4:d0:3f:70");
        assert_eq!(p.name, "eth0");
        assert_eq!((p.config, p.state, p.max_speed), (1, 2, 8));
    }

    #[test]
    fn truncated_port_is_an_error() {
        let b = sample();
        assert!(Port::decode(&mut Reader::new(&b[..63])).is_err());
    }

    #[test]
    fn name_without_nul_uses_all_16_bytes() {
        let raw = *b"abcdefghijklmnop";
        let r = Reader::new(&[]);
        assert_eq!(decode_name(&r, &raw).unwrap(), "abcdefghijklmnop");
        let mut w = Vec::new();
        encode_fixed_str("abcdefghijklmnopqrs", 16, &mut w);
        assert_eq!(w, raw);
        // A multi-byte character is never cut in half.
        let mut w = Vec::new();
        encode_fixed_str("abcdefghijklmno\u{e9}", 16, &mut w);
        assert_eq!(&w[..], b"abcdefghijklmno\0");
    }

    #[test]
    fn non_utf8_name_is_bad_port() {
        let mut b = sample();
        b[16] = 0xff;
        let e = Port::decode(&mut Reader::new(&b)).unwrap_err();
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadPort));
        assert_eq!(e.offset, 16);
    }
}
