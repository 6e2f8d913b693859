//! `OFPT_HELLO` (spec 1.3.5 §7.5.1): the version negotiation message and its
//! hello elements.
//!
//! Elements are kept in wire order. The version-bitmap element (type 1) is
//! decoded into its 32-bit bitmaps; any other element type is carried as
//! opaque bytes so it round-trips. Each element is followed by zero padding
//! to a multiple of 8 bytes, which its `length` field does not count.

use crate::error::{BadRequestCode, DecodeError, OfpError};
use crate::wire::{round_up_8, Reader, Writer};
use serde::Serialize;

/// `OFPHET_VERSIONBITMAP`.
pub const OFPHET_VERSIONBITMAP: u16 = 1;

/// One hello element.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HelloElement {
    /// `OFPHET_VERSIONBITMAP`: bit `v % 32` of `bitmaps[v / 32]` is set when
    /// wire version `v` is supported.
    VersionBitmap { bitmaps: Vec<u32> },
    /// Any other element type; `data` is the body after the 4-byte element
    /// header, padding excluded.
    Unknown {
        elem_type: u16,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

/// A HELLO message. Its header version is kept because HELLO is decoded
/// whatever version the peer speaks: the agent needs it to negotiate.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Hello {
    /// The version in the message header (written back on encode).
    pub version: u8,
    pub elements: Vec<HelloElement>,
}

impl Default for Hello {
    /// A hello for OpenFlow 1.3 offering only version 4.
    fn default() -> Self {
        Hello {
            version: crate::consts::OFP_VERSION,
            elements: vec![HelloElement::VersionBitmap {
                bitmaps: vec![1 << crate::consts::OFP_VERSION],
            }],
        }
    }
}

fn bad_len(r: &Reader, reason: &str) -> DecodeError {
    r.error(OfpError::BadRequest(BadRequestCode::BadLen), reason)
}

impl Hello {
    /// Decodes the elements (everything after the header); `version` is the
    /// header's version.
    pub fn decode(version: u8, r: &mut Reader) -> Result<Hello, DecodeError> {
        let mut elements = Vec::new();
        while !r.is_empty() {
            let start = r.clone();
            let elem_type = r.u16()?;
            let length = usize::from(r.u16()?);
            if length < 4 {
                return Err(bad_len(&start, "hello element length below 4"));
            }
            let mut body = r
                .sub(length - 4)
                .map_err(|_| bad_len(&start, "hello element longer than the message"))?;
            r.skip(round_up_8(length) - length)
                .map_err(|_| bad_len(&start, "hello element padding missing"))?;
            let element = if elem_type == OFPHET_VERSIONBITMAP {
                if body.remaining() % 4 != 0 {
                    return Err(bad_len(&start, "version bitmap not a multiple of 4 bytes"));
                }
                let mut bitmaps = Vec::with_capacity(body.remaining() / 4);
                while !body.is_empty() {
                    bitmaps.push(body.u32()?);
                }
                HelloElement::VersionBitmap { bitmaps }
            } else {
                HelloElement::Unknown {
                    elem_type,
                    data: body.rest().to_vec(),
                }
            };
            elements.push(element);
        }
        Ok(Hello { version, elements })
    }

    /// Encodes the elements (not the header).
    pub fn encode(&self, w: &mut Vec<u8>) {
        for element in &self.elements {
            let start = w.len();
            match element {
                HelloElement::VersionBitmap { bitmaps } => {
                    w.put_u16(OFPHET_VERSIONBITMAP);
                    w.put_u16(0);
                    for b in bitmaps {
                        w.put_u32(*b);
                    }
                }
                HelloElement::Unknown { elem_type, data } => {
                    w.put_u16(*elem_type);
                    w.put_u16(0);
                    w.put_bytes(data);
                }
            }
            let len = w.len() - start;
            w.patch_u16(start + 2, len as u16);
            w.pad_to_8(start);
        }
    }

    /// Every wire version the version-bitmap elements announce, ascending.
    pub fn versions(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for element in &self.elements {
            if let HelloElement::VersionBitmap { bitmaps } = element {
                for (i, b) in bitmaps.iter().enumerate() {
                    for bit in 0..32 {
                        if b & (1 << bit) != 0 {
                            if let Ok(v) = u8::try_from(i * 32 + bit) {
                                out.push(v);
                            }
                        }
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_element_decodes_versions() {
        // One element: type 1, length 8, bitmap 0x4000060e (os-ken's vector).
        let body = [0, 1, 0, 8, 0x40, 0x00, 0x06, 0x0e];
        let h = Hello::decode(4, &mut Reader::new(&body)).unwrap();
        assert_eq!(h.versions(), vec![1, 2, 3, 9, 10, 30]);
        let mut w = Vec::new();
        h.encode(&mut w);
        assert_eq!(w, body);
    }

    #[test]
    fn two_bitmaps_are_padded_and_unknown_elements_kept() {
        let body = [
            0, 1, 0, 12, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0, 0, // bitmap + pad 4
            0, 9, 0, 5, 0xaa, 0, 0, 0, // unknown type 9 with 1 byte + pad 3
        ];
        let h = Hello::decode(4, &mut Reader::new(&body)).unwrap();
        assert_eq!(h.versions(), vec![4, 32]);
        assert_eq!(
            h.elements[1],
            HelloElement::Unknown {
                elem_type: 9,
                data: vec![0xaa]
            }
        );
        let mut w = Vec::new();
        h.encode(&mut w);
        assert_eq!(w, body);
    }

    #[test]
    fn malformed_elements_are_bad_len() {
        let bad = OfpError::BadRequest(BadRequestCode::BadLen);
        for body in [
            &[0u8, 1, 0, 3, 0, 0, 0, 0][..],
            &[0, 1, 0, 16, 0, 0, 0, 0][..],
            &[0, 1, 0, 6, 0, 0, 0, 0][..],
            &[0, 9, 0, 5, 1][..],
            &[0, 1][..],
        ] {
            assert_eq!(
                Hello::decode(4, &mut Reader::new(body)).unwrap_err().error,
                bad,
                "{body:?}"
            );
        }
    }
}
