//! Actions (spec 1.3.5 §7.2.5): the [`Action`] type, its byte-exact wire
//! codec, and the argument checks a switch makes before installing one.
//!
//! Every action is a multiple of 8 bytes long; decoding checks the declared
//! length against the type before reading the body, so a malformed action
//! yields `BAD_ACTION/BAD_LEN` (or `BAD_TYPE`, `BAD_SET_*`), never a panic.

use crate::error::{BadActionCode, BadMatchCode, DecodeError, OfpError};
use crate::oxm::Oxm;
use crate::wire::{round_up_8, wire_numbers, Reader, Writer};
use serde::Serialize;

wire_numbers! {
    /// `OFPAT_*` action type numbers.
    pub mod action_type: u16 {
        OUTPUT = 0, COPY_TTL_OUT = 11, COPY_TTL_IN = 12, SET_MPLS_TTL = 15, DEC_MPLS_TTL = 16,
        PUSH_VLAN = 17, POP_VLAN = 18, PUSH_MPLS = 19, POP_MPLS = 20, SET_QUEUE = 21,
        GROUP = 22, SET_NW_TTL = 23, DEC_NW_TTL = 24, SET_FIELD = 25, PUSH_PBB = 26,
        POP_PBB = 27, EXPERIMENTER = 0xffff,
    }
}

/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const OFPCML_NO_BUFFER: u16 = 0xffff;
/// `OFPCML_MAX`: the largest `max_len` that asks for buffering.
pub const OFPCML_MAX: u16 = 0xffe5;

/// One action.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    Output {
        port: u32,
        max_len: u16,
    },
    CopyTtlOut,
    CopyTtlIn,
    SetMplsTtl {
        mpls_ttl: u8,
    },
    DecMplsTtl,
    PushVlan {
        ethertype: u16,
    },
    PopVlan,
    PushMpls {
        ethertype: u16,
    },
    PopMpls {
        ethertype: u16,
    },
    SetQueue {
        queue_id: u32,
    },
    Group {
        group_id: u32,
    },
    SetNwTtl {
        nw_ttl: u8,
    },
    DecNwTtl,
    /// The field is a single OXM TLV without a mask.
    SetField {
        field: Oxm,
    },
    PushPbb {
        ethertype: u16,
    },
    PopPbb,
    /// `OFPAT_EXPERIMENTER`: `data` is everything after the experimenter id,
    /// padding included, so the action round-trips.
    Experimenter {
        experimenter: u32,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

/// The length error of an action (`BAD_ACTION/BAD_LEN`).
const ACTION_BAD_LEN: OfpError = OfpError::BadAction(BadActionCode::BadLen);

crate::wire::codec_field!(Action);

impl Action {
    /// The rank [`Self::action_set_rank`] gives every action that is not a
    /// pop or a push: those run after all of them.
    pub const AFTER_PUSHES: u8 = 4;

    /// Where an action set runs this action among the header changes
    /// (OpenFlow 1.3 §5.10): pops first (0), then the pushes of MPLS (1),
    /// PBB (2) and VLAN (3), then everything else
    /// ([`Self::AFTER_PUSHES`]). Checking a write-actions list in this
    /// order is what lets a set-field of a tag's VID stand before the
    /// push of that tag.
    pub fn action_set_rank(&self) -> u8 {
        match self {
            Action::PopVlan | Action::PopMpls { .. } | Action::PopPbb => 0,
            Action::PushMpls { .. } => 1,
            Action::PushPbb { .. } => 2,
            Action::PushVlan { .. } => 3,
            _ => Self::AFTER_PUSHES,
        }
    }

    /// The `OFPAT_*` type number.
    pub fn type_code(&self) -> u16 {
        use action_type as t;
        match self {
            Action::Output { .. } => t::OUTPUT,
            Action::CopyTtlOut => t::COPY_TTL_OUT,
            Action::CopyTtlIn => t::COPY_TTL_IN,
            Action::SetMplsTtl { .. } => t::SET_MPLS_TTL,
            Action::DecMplsTtl => t::DEC_MPLS_TTL,
            Action::PushVlan { .. } => t::PUSH_VLAN,
            Action::PopVlan => t::POP_VLAN,
            Action::PushMpls { .. } => t::PUSH_MPLS,
            Action::PopMpls { .. } => t::POP_MPLS,
            Action::SetQueue { .. } => t::SET_QUEUE,
            Action::Group { .. } => t::GROUP,
            Action::SetNwTtl { .. } => t::SET_NW_TTL,
            Action::DecNwTtl => t::DEC_NW_TTL,
            Action::SetField { .. } => t::SET_FIELD,
            Action::PushPbb { .. } => t::PUSH_PBB,
            Action::PopPbb => t::POP_PBB,
            Action::Experimenter { .. } => t::EXPERIMENTER,
        }
    }

    /// Bytes this action takes on the wire (always a multiple of 8).
    pub fn wire_len(&self) -> usize {
        match self {
            Action::Output { .. } => 16,
            Action::SetField { field } => round_up_8(4 + field.wire_len()),
            Action::Experimenter { data, .. } => round_up_8(8 + data.len()),
            _ => 8,
        }
    }

    /// Decodes one action.
    ///
    /// A declared length below 8, not a multiple of 8, past the end of the
    /// reader, or wrong for the type is `BAD_ACTION/BAD_LEN`; an unknown type
    /// is `BAD_ACTION/BAD_TYPE`. In `set_field`, an OXM that overruns the
    /// action (or has a wrong length for its field) is `BAD_SET_LEN` and a
    /// masked OXM is `BAD_SET_ARGUMENT`; a non-basic OXM is kept opaque
    /// (see [`Action::validate_set_field`] for the semantic checks).
    pub fn decode(r: &mut Reader) -> Result<Action, DecodeError> {
        use action_type as t;
        let start = r.offset();
        let typ = r.u16().map_err(|e| e.length_error_as(ACTION_BAD_LEN))?;
        let len = r.u16().map_err(|e| e.length_error_as(ACTION_BAD_LEN))? as usize;
        let bad_len = |why: String| DecodeError::new(ACTION_BAD_LEN, start, why);
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad_len(format!(
                "action length {len} is not a positive multiple of 8"
            )));
        }
        let mut b = r
            .sub(len - 4)
            .map_err(|e| e.length_error_as(ACTION_BAD_LEN))?;
        let want = match typ {
            t::OUTPUT => Some(16),
            t::COPY_TTL_OUT
            | t::COPY_TTL_IN
            | t::SET_MPLS_TTL
            | t::DEC_MPLS_TTL
            | t::PUSH_VLAN
            | t::POP_VLAN
            | t::PUSH_MPLS
            | t::POP_MPLS
            | t::SET_QUEUE
            | t::GROUP
            | t::SET_NW_TTL
            | t::DEC_NW_TTL
            | t::PUSH_PBB
            | t::POP_PBB => Some(8),
            t::SET_FIELD | t::EXPERIMENTER => None,
            _ => {
                return Err(DecodeError::new(
                    OfpError::BadAction(BadActionCode::BadType),
                    start,
                    format!("unknown action type {typ}"),
                ))
            }
        };
        if let Some(want) = want {
            if len != want {
                return Err(bad_len(format!(
                    "action type {typ} has length {len}, expected {want}"
                )));
            }
        }
        // Every fixed-size read below fits: the length was checked above.
        let a = (|| -> Result<Action, DecodeError> {
            Ok(match typ {
                t::OUTPUT => {
                    let port = b.u32()?;
                    let max_len = b.u16()?;
                    Action::Output { port, max_len }
                }
                t::COPY_TTL_OUT => Action::CopyTtlOut,
                t::COPY_TTL_IN => Action::CopyTtlIn,
                t::SET_MPLS_TTL => Action::SetMplsTtl { mpls_ttl: b.u8()? },
                t::DEC_MPLS_TTL => Action::DecMplsTtl,
                t::PUSH_VLAN => Action::PushVlan {
                    ethertype: b.u16()?,
                },
                t::POP_VLAN => Action::PopVlan,
                t::PUSH_MPLS => Action::PushMpls {
                    ethertype: b.u16()?,
                },
                t::POP_MPLS => Action::PopMpls {
                    ethertype: b.u16()?,
                },
                t::SET_QUEUE => Action::SetQueue { queue_id: b.u32()? },
                t::GROUP => Action::Group { group_id: b.u32()? },
                t::SET_NW_TTL => Action::SetNwTtl { nw_ttl: b.u8()? },
                t::DEC_NW_TTL => Action::DecNwTtl,
                t::PUSH_PBB => Action::PushPbb {
                    ethertype: b.u16()?,
                },
                t::POP_PBB => Action::PopPbb,
                t::SET_FIELD => Action::SetField {
                    field: decode_set_field(&mut b, start, len)?,
                },
                _ => Action::Experimenter {
                    experimenter: b.u32()?,
                    data: b.rest().to_vec(),
                },
            })
        })()
        .map_err(|e| e.length_error_as(ACTION_BAD_LEN))?;
        Ok(a)
    }

    /// Encodes one action. Padding is written as zeros; an experimenter
    /// action whose data is not a multiple of 8 bytes long is padded too.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        w.put_u16(self.type_code());
        w.put_u16(0);
        match self {
            Action::Output { port, max_len } => {
                w.put_u32(*port);
                w.put_u16(*max_len);
                w.put_zeros(6);
            }
            Action::SetMplsTtl { mpls_ttl: v } | Action::SetNwTtl { nw_ttl: v } => {
                w.put_u8(*v);
                w.put_zeros(3);
            }
            Action::PushVlan { ethertype }
            | Action::PushMpls { ethertype }
            | Action::PopMpls { ethertype }
            | Action::PushPbb { ethertype } => {
                w.put_u16(*ethertype);
                w.put_zeros(2);
            }
            Action::SetQueue { queue_id: v } | Action::Group { group_id: v } => w.put_u32(*v),
            Action::SetField { field } => field.encode(w),
            Action::Experimenter { experimenter, data } => {
                w.put_u32(*experimenter);
                w.put_bytes(data);
            }
            Action::CopyTtlOut
            | Action::CopyTtlIn
            | Action::DecMplsTtl
            | Action::PopVlan
            | Action::DecNwTtl
            | Action::PopPbb => w.put_zeros(4),
        }
        w.pad_to_8(start);
        let len = w.len() - start;
        w.patch_u16(start + 2, u16::try_from(len).unwrap_or(u16::MAX));
    }

    /// Bytes a list of actions takes on the wire.
    pub fn list_wire_len(actions: &[Action]) -> usize {
        actions.iter().map(Action::wire_len).sum()
    }
}

/// Semantic checks, separate from decoding.
impl Action {
    /// Checks the OXM of a `set_field` action (spec 1.3.5 §7.2.5):
    /// an opaque (experimenter/Nicira) TLV or a field that cannot be set
    /// (`in_port`, `in_phy_port`, `metadata`, `ipv6_exthdr`) is
    /// `BAD_ACTION/BAD_SET_TYPE`; a mask, or a value with bits above the
    /// field's width, is `BAD_ACTION/BAD_SET_ARGUMENT`.
    pub fn validate_set_field(field: &Oxm) -> Result<(), OfpError> {
        let bad = |c| Err(OfpError::BadAction(c));
        match field {
            Oxm::Other { .. } => bad(BadActionCode::BadSetType),
            Oxm::Basic { field, .. } if !field.settable() => bad(BadActionCode::BadSetType),
            Oxm::Basic { mask: Some(_), .. } => bad(BadActionCode::BadSetArgument),
            Oxm::Basic { field, value, .. } if value.to_u128() > field.max_value() => {
                bad(BadActionCode::BadSetArgument)
            }
            Oxm::Basic { .. } => Ok(()),
        }
    }

    /// Checks one action's arguments without regard to the switch's ports,
    /// groups or queues:
    ///
    /// - `output` to `OFPP_ANY` or to a number between `OFPP_MAX` and the
    ///   reserved ports is `BAD_OUT_PORT`;
    /// - `group` to a reserved group number (above `OFPG_MAX`) is
    ///   `BAD_OUT_GROUP`;
    /// - `push_vlan` with an ethertype other than 0x8100/0x88a8,
    ///   `push_mpls` other than 0x8847/0x8848 and `push_pbb` other than
    ///   0x88e7 are `BAD_ARGUMENT`;
    /// - `set_field` is checked by [`Action::validate_set_field`].
    pub fn validate(&self) -> Result<(), OfpError> {
        use crate::consts::{group_no, port_no};
        let bad = |c| Err(OfpError::BadAction(c));
        match self {
            Action::Output { port, .. } => {
                if *port == port_no::ANY || (*port > port_no::MAX && *port < port_no::IN_PORT) {
                    bad(BadActionCode::BadOutPort)
                } else {
                    Ok(())
                }
            }
            Action::Group { group_id } if *group_id > group_no::MAX => {
                bad(BadActionCode::BadOutGroup)
            }
            Action::PushVlan { ethertype } if !matches!(ethertype, 0x8100 | 0x88a8) => {
                bad(BadActionCode::BadArgument)
            }
            Action::PushMpls { ethertype } if !matches!(ethertype, 0x8847 | 0x8848) => {
                bad(BadActionCode::BadArgument)
            }
            Action::PushPbb { ethertype } if *ethertype != 0x88e7 => {
                bad(BadActionCode::BadArgument)
            }
            Action::SetField { field } => Action::validate_set_field(field),
            _ => Ok(()),
        }
    }
}

/// Decodes the OXM of a `set_field` action whose body (after the 4-byte
/// action header) is `b` and whose declared length is `len`.
fn decode_set_field(b: &mut Reader, start: usize, len: usize) -> Result<Oxm, DecodeError> {
    let set_len = |why: &str| {
        DecodeError::new(
            OfpError::BadAction(BadActionCode::BadSetLen),
            start,
            format!("set_field: {why}"),
        )
    };
    let Some(&[_, _, type_low, oxm_len]) = b.peek(4) else {
        return Err(set_len("no room for the OXM header"));
    };
    let (hasmask, oxm_len) = (type_low & 1 != 0, usize::from(oxm_len));
    if 4 + oxm_len > b.remaining() {
        return Err(set_len("OXM overruns the action"));
    }
    if hasmask {
        return Err(DecodeError::new(
            OfpError::BadAction(BadActionCode::BadSetArgument),
            start,
            "set_field OXM has a mask",
        ));
    }
    let field = Oxm::decode(b).map_err(|e| match e.error {
        OfpError::BadMatch(BadMatchCode::BadLen) => set_len("OXM length wrong for its field"),
        OfpError::BadMatch(_) => DecodeError::new(
            OfpError::BadAction(BadActionCode::BadSetArgument),
            e.offset,
            e.reason,
        ),
        _ => e,
    })?;
    if round_up_8(4 + field.wire_len()) != len {
        return Err(DecodeError::new(
            ACTION_BAD_LEN,
            start,
            format!(
                "set_field length {len} is not its OXM padded to 8 ({})",
                round_up_8(4 + field.wire_len())
            ),
        ));
    }
    Ok(field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oxm::{MacAddr, OxmField, OxmValue};
    use crate::wire::FieldList;

    fn decode(bytes: &[u8]) -> Result<Action, DecodeError> {
        let mut r = Reader::new(bytes);
        let a = Action::decode(&mut r)?;
        assert!(r.is_empty(), "decode left {} bytes", r.remaining());
        Ok(a)
    }

    fn err(bytes: &[u8]) -> OfpError {
        let mut r = Reader::new(bytes);
        Action::decode(&mut r).unwrap_err().error
    }

    /// Hand-built wire forms (spec 1.3.5 §7.2.5 layouts) and their values.
    #[rustfmt::skip]
    fn vectors() -> Vec<(Vec<u8>, Action)> {
        vec![
            (vec![0, 0, 0, 16, 0, 0, 0, 6, 0xff, 0xff, 0, 0, 0, 0, 0, 0],
             Action::Output { port: 6, max_len: OFPCML_NO_BUFFER }),
            (vec![0, 11, 0, 8, 0, 0, 0, 0], Action::CopyTtlOut),
            (vec![0, 12, 0, 8, 0, 0, 0, 0], Action::CopyTtlIn),
            (vec![0, 15, 0, 8, 10, 0, 0, 0], Action::SetMplsTtl { mpls_ttl: 10 }),
            (vec![0, 16, 0, 8, 0, 0, 0, 0], Action::DecMplsTtl),
            (vec![0, 17, 0, 8, 0x81, 0x00, 0, 0], Action::PushVlan { ethertype: 0x8100 }),
            (vec![0, 18, 0, 8, 0, 0, 0, 0], Action::PopVlan),
            (vec![0, 19, 0, 8, 0x88, 0x47, 0, 0], Action::PushMpls { ethertype: 0x8847 }),
            (vec![0, 20, 0, 8, 0x08, 0x00, 0, 0], Action::PopMpls { ethertype: 0x0800 }),
            (vec![0, 21, 0, 8, 0, 0, 0, 3], Action::SetQueue { queue_id: 3 }),
            (vec![0, 22, 0, 8, 0, 0, 0, 99], Action::Group { group_id: 99 }),
            (vec![0, 23, 0, 8, 64, 0, 0, 0], Action::SetNwTtl { nw_ttl: 64 }),
            (vec![0, 24, 0, 8, 0, 0, 0, 0], Action::DecNwTtl),
            (vec![0, 26, 0, 8, 0x88, 0xe7, 0, 0], Action::PushPbb { ethertype: 0x88e7 }),
            (vec![0, 27, 0, 8, 0, 0, 0, 0], Action::PopPbb),
            (vec![0, 25, 0, 16, 0x80, 0, 0x0c, 2, 0x11, 0x02, 0, 0, 0, 0, 0, 0],
             Action::SetField { field: Oxm::basic(OxmField::VlanVid, OxmValue::U16(0x1102)) }),
            (vec![0, 25, 0, 16, 0x80, 0, 0x08, 6, 1, 2, 3, 4, 5, 6, 0, 0],
             Action::SetField {
                 field: Oxm::basic(OxmField::EthSrc, OxmValue::Mac(MacAddr([1, 2, 3, 4, 5, 6]))),
             }),
            // set_field of exactly 8 bytes: an OXM with no payload.
            (vec![0, 25, 0, 8, 0x00, 0x01, 0x20, 0],
             Action::SetField {
                 field: Oxm::Other { class: 1, field: 0x10, hasmask: false, body: vec![] },
             }),
            // An experimenter OXM inside set_field stays opaque.
            (vec![0, 25, 0, 16, 0xff, 0xff, 0, 7, 0x4f, 0x4e, 0x46, 0, 0x0a, 0, 1, 0],
             Action::SetField {
                 field: Oxm::Other {
                     class: 0xffff, field: 0, hasmask: false,
                     body: vec![0x4f, 0x4e, 0x46, 0, 0x0a, 0, 1],
                 },
             }),
            (vec![0xff, 0xff, 0, 16, 0, 0, 0, 101, 0, 1, 2, 3, 4, 5, 6, 7],
             Action::Experimenter { experimenter: 101, data: vec![0, 1, 2, 3, 4, 5, 6, 7] }),
            (vec![0xff, 0xff, 0, 8, 0, 0, 0x23, 0x20],
             Action::Experimenter { experimenter: 0x2320, data: vec![] }),
        ]
    }

    #[test]
    fn every_action_type_decodes_and_encodes_exactly() {
        for (bytes, action) in vectors() {
            assert_eq!(decode(&bytes).unwrap(), action, "{bytes:?}");
            let mut w = Vec::new();
            action.encode(&mut w);
            assert_eq!(w, bytes, "{action:?}");
            assert_eq!(action.wire_len(), bytes.len());
        }
    }

    #[test]
    fn padding_is_ignored_on_decode_and_zeroed_on_encode() {
        let bytes = [0, 0, 0, 16, 0, 0, 0, 1, 0, 0x80, 9, 9, 9, 9, 9, 9];
        let a = decode(&bytes).unwrap();
        assert_eq!(
            a,
            Action::Output {
                port: 1,
                max_len: 0x80
            }
        );
        let mut w = Vec::new();
        a.encode(&mut w);
        assert_eq!(w, [0, 0, 0, 16, 0, 0, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn every_truncation_is_a_length_error() {
        for (bytes, _) in vectors() {
            for n in 0..bytes.len() {
                let e = Action::decode(&mut Reader::new(&bytes[..n])).unwrap_err();
                assert_eq!(e.error, ACTION_BAD_LEN, "{bytes:?} cut to {n}");
            }
        }
    }

    #[test]
    fn list_consumes_everything_in_order() {
        let mut all = Vec::new();
        let mut want = Vec::new();
        for (bytes, action) in vectors() {
            all.extend_from_slice(&bytes);
            want.push(action);
        }
        let mut r = Reader::new(&all);
        assert_eq!(Action::decode_list(&mut r).unwrap(), want);
        assert!(r.is_empty());
        let mut w = Vec::new();
        Action::encode_list(&want, &mut w);
        assert_eq!(w, all);
        assert_eq!(Action::list_wire_len(&want), all.len());
        assert_eq!(Action::decode_list(&mut Reader::new(&[])).unwrap(), vec![]);
        // Trailing bytes too short for an action header.
        all.extend_from_slice(&[0, 0]);
        assert_eq!(
            Action::decode_list(&mut Reader::new(&all))
                .unwrap_err()
                .error,
            ACTION_BAD_LEN
        );
    }

    #[test]
    fn bad_lengths_are_bad_action_bad_len() {
        // Header cut short.
        assert_eq!(err(&[0, 0, 0]), ACTION_BAD_LEN);
        // Declared length below 8.
        assert_eq!(err(&[0, 11, 0, 4, 0, 0, 0, 0]), ACTION_BAD_LEN);
        assert_eq!(err(&[0, 11, 0, 0, 0, 0, 0, 0]), ACTION_BAD_LEN);
        // Not a multiple of 8.
        assert_eq!(err(&[0, 11, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0]), ACTION_BAD_LEN);
        // Longer than what is left.
        assert_eq!(err(&[0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0]), ACTION_BAD_LEN);
        // Wrong length for the type.
        assert_eq!(err(&[0, 0, 0, 8, 0, 0, 0, 1]), ACTION_BAD_LEN);
        assert_eq!(
            err(&[0, 18, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            ACTION_BAD_LEN
        );
        assert_eq!(
            err(&[0, 22, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            ACTION_BAD_LEN
        );
        // set_field with a whole spare 8 bytes of padding.
        let mut b = vec![0, 25, 0, 24, 0x80, 0, 0x0c, 2, 0x11, 0x02];
        b.resize(24, 0);
        assert_eq!(err(&b), ACTION_BAD_LEN);
    }

    #[test]
    fn unknown_type_is_bad_type() {
        for typ in [1u16, 10, 28, 0xfffe] {
            let [hi, lo] = typ.to_be_bytes();
            assert_eq!(
                err(&[hi, lo, 0, 8, 0, 0, 0, 0]),
                OfpError::BadAction(BadActionCode::BadType),
                "type {typ}"
            );
        }
    }

    #[test]
    fn set_field_errors() {
        let set_len = OfpError::BadAction(BadActionCode::BadSetLen);
        // OXM payload runs past the action.
        assert_eq!(err(&[0, 25, 0, 8, 0x80, 0, 0x0c, 2, 0, 0, 0, 0]), set_len);
        assert_eq!(
            err(&[0, 25, 0, 16, 0x80, 0, 0x08, 20, 1, 2, 3, 4, 5, 6, 0, 0]),
            set_len
        );
        // vlan_vid with 3 payload bytes: wrong length for the field.
        assert_eq!(
            err(&[0, 25, 0, 16, 0x80, 0, 0x0c, 3, 0, 0, 0, 0, 0, 0, 0, 0]),
            set_len
        );
        // Masked OXM.
        assert_eq!(
            err(&[0, 25, 0, 16, 0x80, 0, 0x0d, 4, 0x10, 0, 0x10, 0, 0, 0, 0, 0]),
            OfpError::BadAction(BadActionCode::BadSetArgument)
        );
        // Masked opaque OXM.
        assert_eq!(
            err(&[0, 25, 0, 16, 0xff, 0xff, 0x03, 4, 0, 0, 0x23, 0x20, 0, 0, 0, 0]),
            OfpError::BadAction(BadActionCode::BadSetArgument)
        );
        // An experimenter OXM too short for its experimenter id.
        assert_eq!(
            err(&[0, 25, 0, 16, 0xff, 0xff, 0x00, 2, 0, 0, 0, 0, 0, 0, 0, 0]),
            set_len
        );
        // Masked OXM on a field that cannot be masked.
        assert_eq!(
            err(&[0, 25, 0, 16, 0x80, 0, 0x01, 8, 0, 0, 0, 1, 0, 0, 0, 1]),
            OfpError::BadAction(BadActionCode::BadSetArgument)
        );
    }

    #[test]
    fn set_field_validation() {
        let set = |f: OxmField, v: u128| Oxm::basic(f, OxmValue::from_u128(f.kind(), v));
        let code = |c| Err(OfpError::BadAction(c));
        for f in [
            OxmField::InPort,
            OxmField::InPhyPort,
            OxmField::Metadata,
            OxmField::Ipv6Exthdr,
        ] {
            assert_eq!(
                Action::validate_set_field(&set(f, 1)),
                code(BadActionCode::BadSetType),
                "{f:?}"
            );
        }
        for &f in OxmField::ALL.iter().filter(|f| f.settable()) {
            assert_eq!(Action::validate_set_field(&set(f, 1)), Ok(()), "{f:?}");
            let a = Action::SetField {
                field: set(f, f.max_value()),
            };
            assert_eq!(a.validate(), Ok(()), "{f:?} at its maximum");
        }
        assert_eq!(
            Action::validate_set_field(&Oxm::Other {
                class: 0xffff,
                field: 0,
                hasmask: false,
                body: vec![0x4f, 0x4e, 0x46, 0, 0x0a, 0, 1],
            }),
            code(BadActionCode::BadSetType)
        );
        assert_eq!(
            Action::validate_set_field(&Oxm::masked(
                OxmField::EthDst,
                OxmValue::Mac(MacAddr([1; 6])),
                OxmValue::Mac(MacAddr([0xff; 6]))
            )),
            code(BadActionCode::BadSetArgument)
        );
        for (f, v) in [
            (OxmField::VlanVid, 0x2000),
            (OxmField::VlanPcp, 8),
            (OxmField::IpDscp, 64),
            (OxmField::MplsLabel, 0x10_0000),
        ] {
            assert_eq!(
                Action::SetField { field: set(f, v) }.validate(),
                code(BadActionCode::BadSetArgument),
                "{f:?}"
            );
        }
    }

    #[test]
    fn argument_validation() {
        use crate::consts::{group_no, port_no};
        let code = |c| Err(OfpError::BadAction(c));
        let out = |port| Action::Output { port, max_len: 0 };
        for p in [
            1,
            port_no::MAX,
            port_no::IN_PORT,
            port_no::CONTROLLER,
            port_no::LOCAL,
        ] {
            assert_eq!(out(p).validate(), Ok(()), "{p:#x}");
        }
        for p in [port_no::ANY, port_no::MAX + 1, port_no::IN_PORT - 1] {
            assert_eq!(out(p).validate(), code(BadActionCode::BadOutPort), "{p:#x}");
        }
        assert_eq!(Action::Group { group_id: 5 }.validate(), Ok(()));
        assert_eq!(
            Action::Group {
                group_id: group_no::ALL
            }
            .validate(),
            code(BadActionCode::BadOutGroup)
        );
        assert_eq!(Action::PushVlan { ethertype: 0x88a8 }.validate(), Ok(()));
        assert_eq!(
            Action::PushVlan { ethertype: 0x0800 }.validate(),
            code(BadActionCode::BadArgument)
        );
        assert_eq!(Action::PushMpls { ethertype: 0x8848 }.validate(), Ok(()));
        assert_eq!(
            Action::PushMpls { ethertype: 0x8100 }.validate(),
            code(BadActionCode::BadArgument)
        );
        assert_eq!(
            Action::PushPbb { ethertype: 0x8100 }.validate(),
            code(BadActionCode::BadArgument)
        );
        assert_eq!(Action::PopMpls { ethertype: 0x0800 }.validate(), Ok(()));
        assert_eq!(Action::DecNwTtl.validate(), Ok(()));
    }
}
