//! `OFPT_ERROR` (spec 1.3.5 §7.4.4): the error message, in its standard
//! form and its experimenter form (`type = 0xffff`).
//!
//! The raw type and code numbers are kept so codes this crate does not know
//! round-trip; [`ErrorMsg::error`] gives the typed [`OfpError`] when the
//! pair is one the spec defines.

use crate::error::{DecodeError, OfpError, OFPET_EXPERIMENTER};
use crate::wire::{Reader, Writer};
use serde::Serialize;

/// How many bytes of an offending message an error reply echoes.
pub const ERROR_DATA_MAX: usize = 64;

/// An error message.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum ErrorMsg {
    /// `ofp_error_msg`: `data` is usually the start of the offending
    /// message (or an ASCII text for `HELLO_FAILED`).
    Standard {
        #[serde(rename = "type")]
        err_type: u16,
        code: u16,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
    /// `ofp_error_experimenter_msg` (type `OFPET_EXPERIMENTER`).
    Experimenter {
        exp_type: u16,
        experimenter: u32,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

impl ErrorMsg {
    /// The error a switch sends for a message it could not decode: the
    /// decoder's type and code, echoing at most 64 bytes of `offending`.
    pub fn from_decode_error(e: &DecodeError, offending: &[u8]) -> ErrorMsg {
        ErrorMsg::new(e.error, offending)
    }

    /// A standard error echoing at most 64 bytes of `offending`.
    pub fn new(error: OfpError, offending: &[u8]) -> ErrorMsg {
        let (err_type, code) = error.type_code();
        let n = offending.len().min(ERROR_DATA_MAX);
        ErrorMsg::Standard {
            err_type,
            code,
            data: offending.get(..n).unwrap_or_default().to_vec(),
        }
    }

    /// The typed error, when this is a standard error with a pair the spec
    /// defines.
    pub fn error(&self) -> Option<OfpError> {
        match self {
            ErrorMsg::Standard { err_type, code, .. } => OfpError::from_type_code(*err_type, *code),
            ErrorMsg::Experimenter { .. } => None,
        }
    }

    /// The data field of either form.
    pub fn data(&self) -> &[u8] {
        match self {
            ErrorMsg::Standard { data, .. } | ErrorMsg::Experimenter { data, .. } => data,
        }
    }

    /// Decodes the body.
    pub fn decode(r: &mut Reader) -> Result<ErrorMsg, DecodeError> {
        let err_type = r.u16()?;
        if err_type == OFPET_EXPERIMENTER {
            let exp_type = r.u16()?;
            let experimenter = r.u32()?;
            return Ok(ErrorMsg::Experimenter {
                exp_type,
                experimenter,
                data: r.rest().to_vec(),
            });
        }
        let code = r.u16()?;
        Ok(ErrorMsg::Standard {
            err_type,
            code,
            data: r.rest().to_vec(),
        })
    }

    /// Encodes the body.
    pub fn encode(&self, w: &mut Vec<u8>) {
        match self {
            ErrorMsg::Standard {
                err_type,
                code,
                data,
            } => {
                w.put_u16(*err_type);
                w.put_u16(*code);
                w.put_bytes(data);
            }
            ErrorMsg::Experimenter {
                exp_type,
                experimenter,
                data,
            } => {
                w.put_u16(OFPET_EXPERIMENTER);
                w.put_u16(*exp_type);
                w.put_u32(*experimenter);
                w.put_bytes(data);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{BadActionCode, BadRequestCode};
    use crate::wire::reencodes;

    #[test]
    fn standard_form_is_typed_when_known() {
        let body = [0, 2, 0, 9, b'f', b'u'];
        let e = reencodes(&body, ErrorMsg::decode, ErrorMsg::encode);
        assert_eq!(
            e.error(),
            Some(OfpError::BadAction(BadActionCode::BadOutGroup))
        );
        assert_eq!(e.data(), b"fu");
    }

    #[test]
    fn unknown_codes_round_trip() {
        let body = [0, 1, 0, 99];
        let e = reencodes(&body, ErrorMsg::decode, ErrorMsg::encode);
        assert_eq!(e.error(), None);
    }

    #[test]
    fn experimenter_form() {
        let body = [0xff, 0xff, 0xea, 0x60, 0, 0x0f, 0x42, 0x3f, b'x'];
        let e = reencodes(&body, ErrorMsg::decode, ErrorMsg::encode);
        assert_eq!(
            e,
            ErrorMsg::Experimenter {
                exp_type: 0xea60,
                experimenter: 999_999,
                data: vec![b'x']
            }
        );
        assert!(ErrorMsg::decode(&mut Reader::new(&body[..7])).is_err());
    }

    #[test]
    fn reply_to_decode_error_echoes_64_bytes() {
        let offending = [7u8; 100];
        let de = DecodeError::new(OfpError::BadRequest(BadRequestCode::BadLen), 2, "x");
        let e = ErrorMsg::from_decode_error(&de, &offending);
        assert_eq!(e.error(), Some(de.error));
        assert_eq!(e.data().len(), 64);
    }
}
