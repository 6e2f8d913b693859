//! OXM match fields (spec 1.3.5 §7.2.3) and the match structure.
//!
//! A match is a list of TLVs kept in the order the controller sent them:
//! controllers compare flow stats with what they installed, so the order is
//! part of the value. Basic-class fields (`0x8000`) are typed; every other
//! class (experimenter `0xffff`, Nicira `0x0000`/`0x0001`, and unknown
//! basic field numbers) is carried opaquely in [`Oxm::Other`] so it
//! round-trips byte for byte.
//!
//! Decoding checks only the wire format (`BAD_MATCH/BAD_LEN`, `BAD_TYPE`,
//! `BAD_MASK`); whether the switch can install a match (duplicates,
//! widths, wildcards, prerequisites) is [`Match::validate`], a separate step.

use crate::error::{BadMatchCode, DecodeError, OfpError};
use crate::wire::{round_up_8, wire_numbers, Reader, Writer};
use serde::Serialize;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// `OFPXMC_OPENFLOW_BASIC`.
pub const OXM_CLASS_OPENFLOW_BASIC: u16 = 0x8000;
/// `OFPXMC_EXPERIMENTER`.
pub const OXM_CLASS_EXPERIMENTER: u16 = 0xffff;
/// `OFPMT_OXM`, the only match type OpenFlow 1.3 allows.
pub const OFPMT_OXM: u16 = 1;

/// `OFPVID_PRESENT`: set in `vlan_vid` when a VLAN tag is present.
pub const OFPVID_PRESENT: u16 = 0x1000;
/// `OFPVID_NONE`: `vlan_vid` value matching packets without a VLAN tag.
pub const OFPVID_NONE: u16 = 0x0000;

wire_numbers! {
    /// `OFPIEH_*` bits of the `ipv6_exthdr` pseudo-field.
    pub mod ipv6_exthdr: u16 {
        NONEXT = 1 << 0, ESP = 1 << 1, AUTH = 1 << 2, DEST = 1 << 3, FRAG = 1 << 4,
        ROUTER = 1 << 5, HOP = 1 << 6, UNREP = 1 << 7, UNSEQ = 1 << 8,
    }
}

/// An Ethernet address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl crate::wire::Field for MacAddr {
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(MacAddr(r.array()?))
    }
    fn write(&self, w: &mut Vec<u8>) {
        w.put_bytes(&self.0);
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in out.iter_mut() {
            let p = parts
                .next()
                .ok_or_else(|| format!("`{s}` is not a MAC address"))?;
            if p.is_empty() || p.len() > 2 {
                return Err(format!("`{s}` is not a MAC address"));
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| format!("`{s}` is not a MAC address"))?;
        }
        if parts.next().is_some() {
            return Err(format!("`{s}` is not a MAC address"));
        }
        Ok(MacAddr(out))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The shape of a field's value on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    U8,
    U16,
    /// 24-bit unsigned (`pbb_isid`), held in a `u32`.
    U24,
    U32,
    U64,
    Mac,
    Ipv4,
    Ipv6,
}

impl ValueKind {
    /// Bytes on the wire.
    #[inline]
    pub fn len(self) -> usize {
        match self {
            ValueKind::U8 => 1,
            ValueKind::U16 => 2,
            ValueKind::U24 => 3,
            ValueKind::U32 | ValueKind::Ipv4 => 4,
            ValueKind::U64 => 8,
            ValueKind::Mac => 6,
            ValueKind::Ipv6 => 16,
        }
    }
}

macro_rules! oxm_fields {
    ($($variant:ident = $id:expr, $name:expr, $kind:ident, $maskable:expr, $bits:expr;)*) => {
        /// The basic-class OXM field types (`OFPXMT_OFB_*`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(rename_all = "snake_case")]
        #[repr(u8)]
        pub enum OxmField { $($variant = $id,)* }

        impl OxmField {
            /// Every field this crate types, in field-number order.
            pub const ALL: &'static [OxmField] = &[$(OxmField::$variant,)*];

            pub fn from_u8(id: u8) -> Option<Self> {
                match id { $($id => Some(OxmField::$variant),)* _ => None }
            }
            /// The OXM name used in flow text and JSON, e.g. `eth_dst`.
            pub fn name(self) -> &'static str {
                match self { $(OxmField::$variant => $name,)* }
            }
            /// The field for an OXM name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name { $($name => Some(OxmField::$variant),)* _ => None }
            }
            /// The shape of the value.
            #[inline]
            pub fn kind(self) -> ValueKind {
                match self { $(OxmField::$variant => ValueKind::$kind,)* }
            }
            /// Whether the spec allows a mask on this field.
            pub fn maskable(self) -> bool {
                match self { $(OxmField::$variant => $maskable,)* }
            }
            /// Number of meaningful bits in the value (e.g. 13 for
            /// `vlan_vid`, 20 for `mpls_label`); higher bits must be zero.
            pub fn bits(self) -> u32 {
                match self { $(OxmField::$variant => $bits,)* }
            }
        }
    };
}

oxm_fields! {
    InPort = 0, "in_port", U32, false, 32;
    InPhyPort = 1, "in_phy_port", U32, false, 32;
    Metadata = 2, "metadata", U64, true, 64;
    EthDst = 3, "eth_dst", Mac, true, 48;
    EthSrc = 4, "eth_src", Mac, true, 48;
    EthType = 5, "eth_type", U16, false, 16;
    VlanVid = 6, "vlan_vid", U16, true, 13;
    VlanPcp = 7, "vlan_pcp", U8, false, 3;
    IpDscp = 8, "ip_dscp", U8, false, 6;
    IpEcn = 9, "ip_ecn", U8, false, 2;
    IpProto = 10, "ip_proto", U8, false, 8;
    Ipv4Src = 11, "ipv4_src", Ipv4, true, 32;
    Ipv4Dst = 12, "ipv4_dst", Ipv4, true, 32;
    TcpSrc = 13, "tcp_src", U16, false, 16;
    TcpDst = 14, "tcp_dst", U16, false, 16;
    UdpSrc = 15, "udp_src", U16, false, 16;
    UdpDst = 16, "udp_dst", U16, false, 16;
    SctpSrc = 17, "sctp_src", U16, false, 16;
    SctpDst = 18, "sctp_dst", U16, false, 16;
    Icmpv4Type = 19, "icmpv4_type", U8, false, 8;
    Icmpv4Code = 20, "icmpv4_code", U8, false, 8;
    ArpOp = 21, "arp_op", U16, false, 16;
    ArpSpa = 22, "arp_spa", Ipv4, true, 32;
    ArpTpa = 23, "arp_tpa", Ipv4, true, 32;
    ArpSha = 24, "arp_sha", Mac, true, 48;
    ArpTha = 25, "arp_tha", Mac, true, 48;
    Ipv6Src = 26, "ipv6_src", Ipv6, true, 128;
    Ipv6Dst = 27, "ipv6_dst", Ipv6, true, 128;
    Ipv6Flabel = 28, "ipv6_flabel", U32, true, 20;
    Icmpv6Type = 29, "icmpv6_type", U8, false, 8;
    Icmpv6Code = 30, "icmpv6_code", U8, false, 8;
    Ipv6NdTarget = 31, "ipv6_nd_target", Ipv6, false, 128;
    Ipv6NdSll = 32, "ipv6_nd_sll", Mac, false, 48;
    Ipv6NdTll = 33, "ipv6_nd_tll", Mac, false, 48;
    MplsLabel = 34, "mpls_label", U32, false, 20;
    MplsTc = 35, "mpls_tc", U8, false, 3;
    MplsBos = 36, "mpls_bos", U8, false, 1;
    PbbIsid = 37, "pbb_isid", U24, true, 24;
    TunnelId = 38, "tunnel_id", U64, true, 64;
    Ipv6Exthdr = 39, "ipv6_exthdr", U16, true, 9;
    // OpenFlow 1.4's PBB_UCA; controllers (os-ken) send it to 1.3 switches.
    PbbUca = 41, "pbb_uca", U8, false, 1;
}

/// A typed field value. Its variant always agrees with its field's
/// [`ValueKind`] (`U24` values are held in `U32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OxmValue {
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    Mac(MacAddr),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
}

impl Serialize for OxmValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OxmValue::U8(v) => s.serialize_u8(*v),
            OxmValue::U16(v) => s.serialize_u16(*v),
            OxmValue::U32(v) => s.serialize_u32(*v),
            OxmValue::U64(v) => s.serialize_u64(*v),
            OxmValue::Mac(v) => v.serialize(s),
            OxmValue::Ipv4(v) => s.collect_str(v),
            OxmValue::Ipv6(v) => s.collect_str(v),
        }
    }
}

/// One OXM TLV.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Oxm {
    /// An `OFPXMC_OPENFLOW_BASIC` field this crate knows.
    Basic {
        field: OxmField,
        value: OxmValue,
        mask: Option<OxmValue>,
    },
    /// Any other TLV, kept opaque: `body` is everything after the 4-byte
    /// OXM header (for class `0xffff` it starts with the experimenter id).
    Other {
        class: u16,
        field: u8,
        hasmask: bool,
        #[serde(serialize_with = "crate::serde_hex")]
        body: Vec<u8>,
    },
}

/// A match: `ofp_match` of type `OFPMT_OXM`, fields in wire order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Match {
    pub fields: Vec<Oxm>,
}

impl ValueKind {
    /// Always false: every value has at least one byte (pairs with `len`).
    pub fn is_empty(self) -> bool {
        false
    }
}

impl OxmValue {
    /// Parses a value of shape `kind` from exactly `kind.len()` big-endian
    /// bytes; `None` when the length is wrong. `U24` yields `OxmValue::U32`.
    pub fn from_bytes(kind: ValueKind, bytes: &[u8]) -> Option<OxmValue> {
        if bytes.len() != kind.len() {
            return None;
        }
        let mut v: u128 = 0;
        for b in bytes {
            v = (v << 8) | u128::from(*b);
        }
        Some(OxmValue::from_u128(kind, v))
    }

    /// Appends the value as `kind.len()` big-endian bytes (`U24` writes 3).
    /// A value wider than `kind` is truncated to its low-order bytes.
    pub fn write(&self, kind: ValueKind, w: &mut Vec<u8>) {
        let bytes = self.to_u128().to_be_bytes();
        let n = kind.len();
        w.extend_from_slice(bytes.get(16 - n..).unwrap_or(&[]));
    }

    /// The value as an unsigned big-endian number (a MAC is its 48 bits, an
    /// IPv6 address its 128 bits). Used for masking and for printing.
    pub fn to_u128(&self) -> u128 {
        match *self {
            OxmValue::U8(v) => v.into(),
            OxmValue::U16(v) => v.into(),
            OxmValue::U32(v) => v.into(),
            OxmValue::U64(v) => v.into(),
            OxmValue::Mac(m) => m.0.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b)),
            OxmValue::Ipv4(a) => u32::from(a).into(),
            OxmValue::Ipv6(a) => u128::from(a),
        }
    }

    /// The value of shape `kind` for a number; bits beyond `kind.len()`
    /// bytes are dropped.
    pub fn from_u128(kind: ValueKind, v: u128) -> OxmValue {
        match kind {
            ValueKind::U8 => OxmValue::U8(v as u8),
            ValueKind::U16 => OxmValue::U16(v as u16),
            ValueKind::U24 => OxmValue::U32((v as u32) & 0x00ff_ffff),
            ValueKind::U32 => OxmValue::U32(v as u32),
            ValueKind::U64 => OxmValue::U64(v as u64),
            ValueKind::Mac => {
                let b = v.to_be_bytes();
                let mut m = [0u8; 6];
                m.copy_from_slice(&b[10..16]);
                OxmValue::Mac(MacAddr(m))
            }
            ValueKind::Ipv4 => OxmValue::Ipv4(Ipv4Addr::from(v as u32)),
            ValueKind::Ipv6 => OxmValue::Ipv6(Ipv6Addr::from(v)),
        }
    }
}

/// The length error of a match (`BAD_MATCH/BAD_LEN`).
const MATCH_BAD_LEN: OfpError = OfpError::BadMatch(BadMatchCode::BadLen);

impl Oxm {
    /// An exact-match basic field.
    pub fn basic(field: OxmField, value: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: None,
        }
    }

    /// A masked basic field.
    pub fn masked(field: OxmField, value: OxmValue, mask: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: Some(mask),
        }
    }

    /// Bytes this TLV takes on the wire, header included.
    pub fn wire_len(&self) -> usize {
        match self {
            Oxm::Basic { field, mask, .. } => {
                let n = field.kind().len();
                4 + if mask.is_some() { 2 * n } else { n }
            }
            Oxm::Other { body, .. } => 4 + body.len().min(255),
        }
    }

    /// Whether the TLV carries a mask.
    pub fn has_mask(&self) -> bool {
        match self {
            Oxm::Basic { mask, .. } => mask.is_some(),
            Oxm::Other { hasmask, .. } => *hasmask,
        }
    }

    /// Decodes one OXM TLV (header and payload).
    ///
    /// Errors: a TLV that overruns the reader, a basic field whose payload
    /// is not its value size (or twice it, masked), and an experimenter TLV
    /// too short for its experimenter id are `BAD_MATCH/BAD_LEN`; a mask on
    /// a field that allows none is `BAD_MATCH/BAD_MASK`.
    pub fn decode(r: &mut Reader) -> Result<Oxm, DecodeError> {
        let start = r.offset();
        let header = r.u32().map_err(|e| e.length_error_as(MATCH_BAD_LEN))?;
        let class = (header >> 16) as u16;
        let field_no = ((header >> 9) & 0x7f) as u8;
        let hasmask = header & 0x100 != 0;
        let len = (header & 0xff) as usize;
        let body = r.bytes(len).map_err(|e| e.length_error_as(MATCH_BAD_LEN))?;
        let known = match class {
            OXM_CLASS_OPENFLOW_BASIC => OxmField::from_u8(field_no),
            _ => None,
        };
        let Some(field) = known else {
            if class == OXM_CLASS_EXPERIMENTER && len < 4 {
                return Err(DecodeError::new(
                    MATCH_BAD_LEN,
                    start,
                    format!("experimenter OXM of {len} bytes has no room for its experimenter id"),
                ));
            }
            return Ok(Oxm::Other {
                class,
                field: field_no,
                hasmask,
                body: body.to_vec(),
            });
        };
        if hasmask && !field.maskable() {
            return Err(DecodeError::new(
                OfpError::BadMatch(BadMatchCode::BadMask),
                start,
                format!("{} cannot be masked", field.name()),
            ));
        }
        let n = field.kind().len();
        let want = if hasmask { 2 * n } else { n };
        if len != want {
            return Err(DecodeError::new(
                MATCH_BAD_LEN,
                start,
                format!("{} payload is {len} bytes, expected {want}", field.name()),
            ));
        }
        let (v, m) = body.split_at(n);
        // Both conversions succeed: the lengths were checked above.
        let value = OxmValue::from_bytes(field.kind(), v);
        let mask = if hasmask {
            OxmValue::from_bytes(field.kind(), m)
        } else {
            None
        };
        match value {
            Some(value) => Ok(Oxm::Basic { field, value, mask }),
            None => Err(DecodeError::new(MATCH_BAD_LEN, start, "bad OXM payload")),
        }
    }

    /// Encodes one OXM TLV. An `Other` body longer than 255 bytes (which no
    /// decoded TLV has) is cut to 255 so the header stays truthful.
    pub fn encode(&self, w: &mut Vec<u8>) {
        match self {
            Oxm::Basic { field, value, mask } => {
                let kind = field.kind();
                w.put_u16(OXM_CLASS_OPENFLOW_BASIC);
                w.put_u8(((*field as u8) << 1) | u8::from(mask.is_some()));
                w.put_u8((self.wire_len() - 4) as u8);
                value.write(kind, w);
                if let Some(m) = mask {
                    m.write(kind, w);
                }
            }
            Oxm::Other {
                class,
                field,
                hasmask,
                body,
            } => {
                let body = body.get(..255).unwrap_or(body);
                w.put_u16(*class);
                w.put_u8(((field & 0x7f) << 1) | u8::from(*hasmask));
                w.put_u8(body.len() as u8);
                w.put_bytes(body);
            }
        }
    }
}

/// Appends the `OFPXMC_OPENFLOW_BASIC` TLV of `field` with `value` and,
/// when given, `mask`, each as the field's width of big-endian bytes (the
/// low bytes of the numbers): the bytes [`Oxm::encode`] writes for
/// `Oxm::Basic` with [`OxmValue::from_u128`] of the same numbers, without
/// building it.
#[inline]
pub fn encode_basic(w: &mut Vec<u8>, field: OxmField, value: u128, mask: Option<u128>) {
    let n = field.kind().len();
    w.put_u16(OXM_CLASS_OPENFLOW_BASIC);
    w.put_u8(((field as u8) << 1) | u8::from(mask.is_some()));
    let len = if mask.is_some() { 2 * n } else { n };
    w.put_u8(len as u8);
    w.extend_from_slice(value.to_be_bytes().get(16 - n..).unwrap_or_default());
    if let Some(m) = mask {
        w.extend_from_slice(m.to_be_bytes().get(16 - n..).unwrap_or_default());
    }
}

crate::wire::codec_field!(Match);

impl Match {
    /// A match over the given fields, in that order.
    pub fn new(fields: Vec<Oxm>) -> Match {
        Match { fields }
    }

    /// The value and mask of the first basic TLV for `field`, if any.
    pub fn get(&self, field: OxmField) -> Option<(OxmValue, Option<OxmValue>)> {
        self.fields.iter().find_map(|o| match o {
            Oxm::Basic {
                field: f,
                value,
                mask,
            } if *f == field => Some((*value, *mask)),
            _ => None,
        })
    }

    /// The `length` field of the encoded `ofp_match`: 4 plus the fields,
    /// padding not included.
    pub fn wire_len(&self) -> usize {
        4 + self.fields.iter().map(Oxm::wire_len).sum::<usize>()
    }

    /// Bytes the encoded match takes, padding included.
    pub fn padded_len(&self) -> usize {
        round_up_8(self.wire_len())
    }

    /// Decodes an `ofp_match` (type, length, fields, padding to 8 bytes).
    ///
    /// A type other than `OFPMT_OXM` is `BAD_MATCH/BAD_TYPE`; a length below
    /// 4, past the end of the reader, missing padding, or a malformed TLV
    /// length is `BAD_MATCH/BAD_LEN`. Padding content is ignored.
    pub fn decode(r: &mut Reader) -> Result<Match, DecodeError> {
        let start = r.offset();
        let typ = r.u16().map_err(|e| e.length_error_as(MATCH_BAD_LEN))?;
        let len = r.u16().map_err(|e| e.length_error_as(MATCH_BAD_LEN))? as usize;
        if typ != OFPMT_OXM {
            return Err(DecodeError::new(
                OfpError::BadMatch(BadMatchCode::BadType),
                start,
                format!("match type {typ} is not OFPMT_OXM"),
            ));
        }
        if len < 4 {
            return Err(DecodeError::new(
                MATCH_BAD_LEN,
                start,
                format!("match length {len} is below 4"),
            ));
        }
        let mut body = r
            .sub(len - 4)
            .map_err(|e| e.length_error_as(MATCH_BAD_LEN))?;
        r.skip(round_up_8(len) - len)
            .map_err(|e| e.length_error_as(MATCH_BAD_LEN))?;
        let mut fields = Vec::new();
        while !body.is_empty() {
            fields.push(Oxm::decode(&mut body)?);
        }
        Ok(Match { fields })
    }

    /// Encodes an `ofp_match` with its padding (zeros).
    pub fn encode(&self, w: &mut Vec<u8>) {
        Match::encode_with(w, |w| {
            for f in &self.fields {
                f.encode(w);
            }
        });
    }

    /// Encodes an `ofp_match` whose OXM TLVs `write_fields` appends (e.g.
    /// with [`Oxm::encode`] or [`encode_basic`]), with its length and
    /// padding: the bytes [`Match::encode`] writes for a match of those
    /// fields, without building the match.
    #[inline]
    pub fn encode_with(w: &mut Vec<u8>, write_fields: impl FnOnce(&mut Vec<u8>)) {
        let start = w.len();
        w.put_u16(OFPMT_OXM);
        w.put_u16(0);
        write_fields(w);
        let len = w.len() - start;
        w.patch_u16(start + 2, u16::try_from(len).unwrap_or(u16::MAX));
        w.pad_to_8(start);
    }
}

impl OxmField {
    /// The largest value whose bits fit the field's width.
    pub fn max_value(self) -> u128 {
        match self.bits() {
            b if b >= 128 => u128::MAX,
            b => (1u128 << b) - 1,
        }
    }

    /// Whether a `set_field` action may write this field. The pipeline
    /// fields `in_port`, `in_phy_port`, `metadata` and the `ipv6_exthdr`
    /// pseudo-field cannot be set (spec 1.3.5 §7.2.3.7).
    pub fn settable(self) -> bool {
        !matches!(
            self,
            OxmField::InPort | OxmField::InPhyPort | OxmField::Metadata | OxmField::Ipv6Exthdr
        )
    }
}

/// Semantic checks, separate from decoding: a match that decodes may still
/// be one the switch must refuse.
impl Match {
    /// The value of `field` if the match pins it exactly: present without a
    /// mask, or with a mask covering every bit of the field.
    fn exact(&self, field: OxmField) -> Option<u128> {
        let (v, m) = self.get(field)?;
        match m {
            Some(m) if m.to_u128() & field.max_value() != field.max_value() => None,
            _ => Some(v.to_u128()),
        }
    }

    fn eth_type_is(&self, types: &[u16]) -> bool {
        self.exact(OxmField::EthType)
            .is_some_and(|t| types.iter().any(|x| u128::from(*x) == t))
    }

    fn ip_proto_is(&self, proto: u8) -> bool {
        self.exact(OxmField::IpProto) == Some(u128::from(proto))
    }

    fn icmpv6_type_in(&self, types: &[u8]) -> bool {
        self.exact(OxmField::Icmpv6Type)
            .is_some_and(|t| types.iter().any(|x| u128::from(*x) == t))
    }

    /// Whether the match satisfies `field`'s prerequisites (spec 1.3.5
    /// §7.2.3.6 and the "Header match fields" table). Prerequisites may
    /// appear anywhere in the match, before or after the field; each must be
    /// matched exactly. Prerequisites of prerequisites are checked when the
    /// prerequisite field itself is checked.
    pub fn prerequisites_met(&self, field: OxmField) -> bool {
        use OxmField as F;
        const IPV4: u16 = 0x0800;
        const IPV6: u16 = 0x86dd;
        match field {
            F::InPhyPort => self.get(F::InPort).is_some(),
            F::VlanPcp => self.get(F::VlanVid).is_some_and(|(v, m)| {
                // The match must require a tag: OFPVID_PRESENT set in both
                // value and mask (an absent mask is all ones).
                let m = m.map_or(u128::MAX, |m| m.to_u128());
                v.to_u128() & m & u128::from(OFPVID_PRESENT) != 0
            }),
            F::IpDscp | F::IpEcn | F::IpProto => self.eth_type_is(&[IPV4, IPV6]),
            F::Ipv4Src | F::Ipv4Dst => self.eth_type_is(&[IPV4]),
            F::TcpSrc | F::TcpDst => self.ip_proto_is(6),
            F::UdpSrc | F::UdpDst => self.ip_proto_is(17),
            F::SctpSrc | F::SctpDst => self.ip_proto_is(132),
            F::Icmpv4Type | F::Icmpv4Code => self.ip_proto_is(1) && self.eth_type_is(&[IPV4]),
            F::ArpOp | F::ArpSpa | F::ArpTpa | F::ArpSha | F::ArpTha => self.eth_type_is(&[0x0806]),
            F::Ipv6Src | F::Ipv6Dst | F::Ipv6Flabel | F::Ipv6Exthdr => self.eth_type_is(&[IPV6]),
            F::Icmpv6Type | F::Icmpv6Code => self.ip_proto_is(58) && self.eth_type_is(&[IPV6]),
            F::Ipv6NdTarget => self.icmpv6_type_in(&[135, 136]),
            F::Ipv6NdSll => self.icmpv6_type_in(&[135]),
            F::Ipv6NdTll => self.icmpv6_type_in(&[136]),
            F::MplsLabel | F::MplsTc | F::MplsBos => self.eth_type_is(&[0x8847, 0x8848]),
            F::PbbIsid | F::PbbUca => self.eth_type_is(&[0x88e7]),
            F::InPort
            | F::Metadata
            | F::EthDst
            | F::EthSrc
            | F::EthType
            | F::VlanVid
            | F::TunnelId => true,
        }
    }

    /// Checks that the switch can install this match (spec 1.3.5 §7.2.3,
    /// §7.4.4.5), returning the first problem as a `BAD_MATCH` error:
    ///
    /// - `BAD_FIELD`: a TLV other than a typed basic field (the switch
    ///   supports no experimenter or Nicira fields);
    /// - `DUP_FIELD`: a field that appears twice;
    /// - `BAD_VALUE`: a value with bits above the field's width (e.g. a
    ///   `vlan_vid` above `0x1fff`);
    /// - `BAD_WILDCARDS`: a value with bits set where its mask is 0;
    /// - `BAD_PREREQ`: a field whose prerequisites are missing, masked, or
    ///   contradicted (see [`Match::prerequisites_met`]).
    ///
    /// Mask bits above the field's width are ignored. The fields are checked
    /// in order for the first four codes, then for prerequisites.
    pub fn validate(&self) -> Result<(), OfpError> {
        let bad = |c| Err(OfpError::BadMatch(c));
        let mut seen: Vec<OxmField> = Vec::with_capacity(self.fields.len());
        for oxm in &self.fields {
            let Oxm::Basic { field, value, mask } = oxm else {
                return bad(BadMatchCode::BadField);
            };
            if seen.contains(field) {
                return bad(BadMatchCode::DupField);
            }
            seen.push(*field);
            let v = value.to_u128();
            if v > field.max_value() {
                return bad(BadMatchCode::BadValue);
            }
            if let Some(m) = mask {
                if v & !m.to_u128() != 0 {
                    return bad(BadMatchCode::BadWildcards);
                }
            }
        }
        for field in seen {
            if !self.prerequisites_met(field) {
                return bad(BadMatchCode::BadPrereq);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_match(bytes: &[u8]) -> Result<Match, DecodeError> {
        Match::decode(&mut Reader::new(bytes))
    }

    #[test]
    fn encode_basic_writes_what_a_built_basic_oxm_writes() {
        let numbers = [
            0u128,
            1,
            0xff,
            0x1234_5678,
            u128::MAX,
            0x0123_4567_89ab_cdef_0011_2233_4455_6677,
        ];
        for &field in OxmField::ALL {
            let kind = field.kind();
            for &v in &numbers {
                for mask in [
                    None,
                    Some(0xf0f0_f0f0_f0f0_f0f0_f0f0_f0f0_f0f0_f0f0u128),
                    Some(1),
                ] {
                    let built = Oxm::Basic {
                        field,
                        value: OxmValue::from_u128(kind, v),
                        mask: mask.map(|m| OxmValue::from_u128(kind, m)),
                    };
                    let mut want = Vec::new();
                    built.encode(&mut want);
                    let mut got = Vec::new();
                    encode_basic(&mut got, field, v, mask);
                    assert_eq!(got, want, "{field:?} {v:#x} {mask:?}");
                }
            }
        }
    }

    fn encoded(m: &Match) -> Vec<u8> {
        let mut w = Vec::new();
        m.encode(&mut w);
        w
    }

    fn match_err(bytes: &[u8]) -> OfpError {
        decode_match(bytes).unwrap_err().error
    }

    #[test]
    fn exact_eth_dst_from_spec_layout() {
        // type=1, length=14, eth_dst (field 3 -> 0x06), len 6, value, 2 pad.
        let b = [
            0x00, 0x01, 0x00, 0x0e, 0x80, 0x00, 0x06, 0x06, 0xf2, 0x0b, 0xa4, 0x7d, 0xf8, 0xea,
            0x00, 0x00,
        ];
        let m = decode_match(&b).unwrap();
        assert_eq!(
            m.fields,
            vec![Oxm::basic(
                OxmField::EthDst,
                OxmValue::Mac(MacAddr([0xf2, 0x0b, 0xa4, 0x7d, 0xf8, 0xea]))
            )]
        );
        assert_eq!(m.wire_len(), 14);
        assert_eq!(m.padded_len(), 16);
        assert_eq!(encoded(&m), b);
    }

    #[test]
    fn masked_fields_keep_order_and_values() {
        let m = Match::new(vec![
            Oxm::basic(OxmField::EthType, OxmValue::U16(0x0800)),
            Oxm::masked(
                OxmField::Ipv4Src,
                OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 0)),
                OxmValue::Ipv4(Ipv4Addr::new(255, 0, 0, 0)),
            ),
            Oxm::masked(
                OxmField::PbbIsid,
                OxmValue::U32(0xabcdef),
                OxmValue::U32(0xff00ff),
            ),
            Oxm::basic(OxmField::InPort, OxmValue::U32(7)),
        ]);
        let b = encoded(&m);
        #[rustfmt::skip]
        let want = [
            0x00, 0x01, 0x00, 0x28,
            0x80, 0x00, 0x0a, 0x02, 0x08, 0x00,
            0x80, 0x00, 0x17, 0x08, 10, 0, 0, 0, 255, 0, 0, 0,
            0x80, 0x00, 0x4b, 0x06, 0xab, 0xcd, 0xef, 0xff, 0x00, 0xff,
            0x80, 0x00, 0x00, 0x04, 0, 0, 0, 7,
        ];
        assert_eq!(b, want);
        assert_eq!(m.wire_len(), 0x28);
        assert_eq!(decode_match(&b).unwrap(), m);
        assert_eq!(
            m.get(OxmField::Ipv4Src),
            Some((
                OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 0)),
                Some(OxmValue::Ipv4(Ipv4Addr::new(255, 0, 0, 0)))
            ))
        );
        assert_eq!(m.get(OxmField::InPort), Some((OxmValue::U32(7), None)));
        assert_eq!(m.get(OxmField::TcpDst), None);
    }

    #[test]
    fn empty_match_is_eight_bytes() {
        let m = Match::default();
        assert_eq!(encoded(&m), [0, 1, 0, 4, 0, 0, 0, 0]);
        assert_eq!(decode_match(&[0, 1, 0, 4, 9, 9, 9, 9]).unwrap(), m);
    }

    #[test]
    fn other_classes_round_trip_opaquely() {
        #[rustfmt::skip]
        let b = [
            0x00, 0x01, 0x00, 0x20,
            // experimenter class, field 5 with mask, len 7: ONF id + 3 bytes
            0xff, 0xff, 0x0b, 0x07, 0x4f, 0x4e, 0x46, 0x00, 0x01, 0x02, 0x03,
            // Nicira class 1, field 0x10, len 4
            0x00, 0x01, 0x20, 0x04, 0xde, 0xad, 0xbe, 0xef,
            // unknown basic field 40, len 5
            0x80, 0x00, 0x50, 0x05, 1, 2, 3, 4, 5,
        ];
        let m = decode_match(&b).unwrap();
        assert_eq!(
            m.fields,
            vec![
                Oxm::Other {
                    class: 0xffff,
                    field: 5,
                    hasmask: true,
                    body: vec![0x4f, 0x4e, 0x46, 0x00, 1, 2, 3]
                },
                Oxm::Other {
                    class: 1,
                    field: 0x10,
                    hasmask: false,
                    body: vec![0xde, 0xad, 0xbe, 0xef]
                },
                Oxm::Other {
                    class: 0x8000,
                    field: 40,
                    hasmask: false,
                    body: vec![1, 2, 3, 4, 5]
                },
            ]
        );
        assert_eq!(encoded(&m), b);
    }

    #[test]
    fn every_truncation_is_a_length_error() {
        let m = Match::new(vec![
            Oxm::basic(OxmField::EthType, OxmValue::U16(0x86dd)),
            Oxm::masked(
                OxmField::Ipv6Src,
                OxmValue::Ipv6(Ipv6Addr::LOCALHOST),
                OxmValue::Ipv6(Ipv6Addr::from(u128::MAX)),
            ),
            Oxm::Other {
                class: 0xffff,
                field: 3,
                hasmask: false,
                body: vec![0, 0, 0x23, 0x20, 9],
            },
        ]);
        let b = encoded(&m);
        for n in 0..b.len() {
            assert_eq!(
                match_err(&b[..n]),
                OfpError::BadMatch(BadMatchCode::BadLen),
                "cut to {n}"
            );
        }
        assert_eq!(decode_match(&b).unwrap(), m);
    }

    #[test]
    fn wrong_type_is_bad_type() {
        assert_eq!(
            match_err(&[0, 0, 0, 4, 0, 0, 0, 0]),
            OfpError::BadMatch(BadMatchCode::BadType)
        );
    }

    #[test]
    fn length_errors_are_bad_match_bad_len() {
        let bad_len = OfpError::BadMatch(BadMatchCode::BadLen);
        // Truncated header.
        assert_eq!(match_err(&[0, 1, 0]), bad_len);
        // Length below 4.
        assert_eq!(match_err(&[0, 1, 0, 3, 0, 0, 0, 0]), bad_len);
        // Length past the buffer.
        assert_eq!(
            match_err(&[0, 1, 0, 12, 0x80, 0, 0, 4, 0, 0, 0, 1]),
            bad_len
        );
        // Padding missing.
        assert_eq!(match_err(&[0, 1, 0, 6, 0x80, 0, 0x0a, 0x02, 0x08]), bad_len);
        // OXM payload overruns the match.
        assert_eq!(
            match_err(&[0, 1, 0, 8, 0x80, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0]),
            bad_len
        );
        // OXM header cut by the match length.
        assert_eq!(match_err(&[0, 1, 0, 6, 0x80, 0, 0, 0]), bad_len);
        // in_port with a 3-byte payload.
        assert_eq!(
            match_err(&[0, 1, 0, 11, 0x80, 0, 0, 3, 0, 0, 1, 0, 0, 0, 0, 0]),
            bad_len
        );
        // masked eth_dst with only 6 payload bytes.
        assert_eq!(
            match_err(&[0, 1, 0, 14, 0x80, 0, 7, 6, 1, 2, 3, 4, 5, 6, 0, 0]),
            bad_len
        );
        // experimenter TLV too short for its id.
        assert_eq!(
            match_err(&[0, 1, 0, 10, 0xff, 0xff, 0, 2, 1, 2, 0, 0]),
            bad_len
        );
    }

    #[test]
    fn mask_on_unmaskable_field_is_bad_mask() {
        // in_port (field 0) with hasmask and 8 bytes.
        let b = [
            0, 1, 0, 16, 0x80, 0, 0x01, 8, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(match_err(&b), OfpError::BadMatch(BadMatchCode::BadMask));
    }

    #[test]
    fn errors_carry_absolute_offsets() {
        let b = [
            0, 1, 0, 16, 0x80, 0, 0x01, 8, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff,
        ];
        let e = decode_match(&b).unwrap_err();
        assert_eq!(e.offset, 4);
    }

    #[test]
    fn value_helpers_agree() {
        let v = OxmValue::from_bytes(ValueKind::U24, &[0x12, 0x34, 0x56]).unwrap();
        assert_eq!(v, OxmValue::U32(0x123456));
        let mut w = Vec::new();
        v.write(ValueKind::U24, &mut w);
        assert_eq!(w, [0x12, 0x34, 0x56]);
        assert_eq!(OxmValue::from_bytes(ValueKind::U24, &[1, 2]), None);
        let mac = OxmValue::from_bytes(ValueKind::Mac, &[1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(mac, OxmValue::Mac(MacAddr([1, 2, 3, 4, 5, 6])));
        assert_eq!(mac.to_u128(), 0x0102_0304_0506);
        assert_eq!(OxmValue::from_u128(ValueKind::Mac, 0x0102_0304_0506), mac);
        let ip6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            OxmValue::from_u128(ValueKind::Ipv6, u128::from(ip6)),
            OxmValue::Ipv6(ip6)
        );
        assert_eq!(
            OxmValue::Ipv4(Ipv4Addr::new(1, 2, 3, 4)).to_u128(),
            0x0102_0304
        );
        assert_eq!(
            OxmValue::from_u128(ValueKind::U8, 0x1ff),
            OxmValue::U8(0xff)
        );
        for kind in [
            ValueKind::U8,
            ValueKind::U16,
            ValueKind::U24,
            ValueKind::U32,
            ValueKind::U64,
            ValueKind::Mac,
            ValueKind::Ipv4,
            ValueKind::Ipv6,
        ] {
            let bytes: Vec<u8> = (1..=kind.len() as u8).collect();
            let v = OxmValue::from_bytes(kind, &bytes).unwrap();
            let mut w = Vec::new();
            v.write(kind, &mut w);
            assert_eq!(w, bytes, "{kind:?}");
            assert_eq!(OxmValue::from_u128(kind, v.to_u128()), v);
        }
    }

    #[test]
    fn oxm_wire_len_matches_encoding() {
        for o in [
            Oxm::basic(OxmField::Ipv6NdTarget, OxmValue::Ipv6(Ipv6Addr::LOCALHOST)),
            Oxm::masked(OxmField::Metadata, OxmValue::U64(1), OxmValue::U64(3)),
            Oxm::Other {
                class: 0xffff,
                field: 1,
                hasmask: false,
                body: vec![0, 0, 0x23, 0x20, 7],
            },
        ] {
            let mut w = Vec::new();
            o.encode(&mut w);
            assert_eq!(w.len(), o.wire_len());
            assert_eq!(Oxm::decode(&mut Reader::new(&w)).unwrap(), o);
        }
    }

    // ---- validation ----

    fn ex(field: OxmField, v: u128) -> Oxm {
        Oxm::basic(field, OxmValue::from_u128(field.kind(), v))
    }

    fn mk(field: OxmField, v: u128, m: u128) -> Oxm {
        let k = field.kind();
        Oxm::masked(field, OxmValue::from_u128(k, v), OxmValue::from_u128(k, m))
    }

    fn check(fields: Vec<Oxm>) -> Result<(), OfpError> {
        Match::new(fields).validate()
    }

    const PREREQ: Result<(), OfpError> = Err(OfpError::BadMatch(BadMatchCode::BadPrereq));

    /// Prerequisites that satisfy each field (test table, from the spec's
    /// "Header match fields" table).
    fn prereqs_for(f: OxmField) -> Vec<Oxm> {
        use OxmField as F;
        let eth = |t| ex(F::EthType, t);
        match f {
            F::InPhyPort => vec![ex(F::InPort, 1)],
            F::VlanPcp => vec![ex(F::VlanVid, 0x1005)],
            F::IpDscp | F::IpEcn | F::IpProto | F::Ipv4Src | F::Ipv4Dst => vec![eth(0x0800)],
            F::TcpSrc | F::TcpDst => vec![eth(0x0800), ex(F::IpProto, 6)],
            F::UdpSrc | F::UdpDst => vec![eth(0x86dd), ex(F::IpProto, 17)],
            F::SctpSrc | F::SctpDst => vec![eth(0x0800), ex(F::IpProto, 132)],
            F::Icmpv4Type | F::Icmpv4Code => vec![eth(0x0800), ex(F::IpProto, 1)],
            F::ArpOp | F::ArpSpa | F::ArpTpa | F::ArpSha | F::ArpTha => vec![eth(0x0806)],
            F::Ipv6Src | F::Ipv6Dst | F::Ipv6Flabel | F::Ipv6Exthdr => vec![eth(0x86dd)],
            F::Icmpv6Type | F::Icmpv6Code => vec![eth(0x86dd), ex(F::IpProto, 58)],
            F::Ipv6NdTarget | F::Ipv6NdSll => {
                vec![eth(0x86dd), ex(F::IpProto, 58), ex(F::Icmpv6Type, 135)]
            }
            F::Ipv6NdTll => vec![eth(0x86dd), ex(F::IpProto, 58), ex(F::Icmpv6Type, 136)],
            F::MplsLabel | F::MplsTc | F::MplsBos => vec![eth(0x8847)],
            F::PbbIsid | F::PbbUca => vec![eth(0x88e7)],
            _ => vec![],
        }
    }

    #[test]
    fn every_field_validates_with_its_prerequisites_and_not_without() {
        for &f in OxmField::ALL {
            let pre = prereqs_for(f);
            let mut fields = vec![ex(f, 1)];
            fields.extend(pre.clone());
            assert_eq!(check(fields.clone()), Ok(()), "{f:?} after its prereqs");
            fields.reverse();
            assert_eq!(check(fields), Ok(()), "{f:?} before its prereqs");
            if !pre.is_empty() {
                assert_eq!(check(vec![ex(f, 1)]), PREREQ, "{f:?} alone");
                // Dropping any one prerequisite breaks the chain.
                for skip in 0..pre.len() {
                    let mut fields = vec![ex(f, 1)];
                    fields.extend(
                        pre.iter()
                            .enumerate()
                            .filter(|(i, _)| *i != skip)
                            .map(|(_, o)| o.clone()),
                    );
                    assert_eq!(check(fields), PREREQ, "{f:?} without prereq {skip}");
                }
            }
        }
    }

    #[test]
    fn contradicting_prerequisites_are_bad_prereq() {
        use OxmField as F;
        // Each case: exact fields whose prerequisites are present but say
        // another protocol.
        let cases: &[&[(OxmField, u128)]] = &[
            &[(F::EthType, 0x86dd), (F::Ipv4Src, 1)],
            &[(F::EthType, 0x0800), (F::Ipv6Flabel, 1)],
            &[(F::EthType, 0x0800), (F::IpProto, 17), (F::TcpDst, 80)],
            &[(F::EthType, 0x86dd), (F::IpProto, 1), (F::Icmpv4Type, 8)],
            &[(F::EthType, 0x0800), (F::IpProto, 58), (F::Icmpv6Type, 8)],
            &[
                (F::EthType, 0x86dd),
                (F::IpProto, 58),
                (F::Icmpv6Type, 135),
                (F::Ipv6NdTll, 1),
            ],
            &[
                (F::EthType, 0x86dd),
                (F::IpProto, 58),
                (F::Icmpv6Type, 128),
                (F::Ipv6NdTarget, 1),
            ],
            &[(F::EthType, 0x0800), (F::MplsTc, 1)],
            &[(F::EthType, 0x8100), (F::PbbIsid, 1)],
            &[(F::EthType, 0x0800), (F::ArpOp, 1)],
        ];
        for case in cases {
            let fields = case.iter().map(|&(f, v)| ex(f, v)).collect();
            assert_eq!(check(fields), PREREQ, "{case:?}");
        }
        // A masked prerequisite does not count (built by hand: eth_type
        // cannot be masked on the wire).
        assert_eq!(
            check(vec![mk(F::EthType, 0x0800, 0xff00), ex(F::Ipv4Src, 1)]),
            PREREQ
        );
    }

    #[test]
    fn vlan_pcp_needs_a_tag() {
        use OxmField as F;
        let pcp = ex(F::VlanPcp, 3);
        assert_eq!(check(vec![ex(F::VlanVid, 0x1000), pcp.clone()]), Ok(()));
        assert_eq!(
            check(vec![pcp.clone(), mk(F::VlanVid, 0x1000, 0x1000)]),
            Ok(())
        );
        assert_eq!(
            check(vec![ex(F::VlanVid, u128::from(OFPVID_NONE)), pcp.clone()]),
            PREREQ
        );
        assert_eq!(check(vec![mk(F::VlanVid, 0, 0), pcp.clone()]), PREREQ);
        assert_eq!(
            check(vec![mk(F::VlanVid, 0x0005, 0x0fff), pcp.clone()]),
            PREREQ
        );
        assert_eq!(check(vec![pcp]), PREREQ);
    }

    #[test]
    fn field_level_errors() {
        use OxmField as F;
        let code = |c| Err(OfpError::BadMatch(c));
        assert_eq!(
            check(vec![ex(F::InPort, 1), ex(F::InPort, 2)]),
            code(BadMatchCode::DupField)
        );
        assert_eq!(
            check(vec![
                ex(F::EthType, 0x0800),
                mk(F::Ipv4Src, 0, 0),
                ex(F::EthType, 0x0800)
            ]),
            code(BadMatchCode::DupField)
        );
        assert_eq!(
            check(vec![Oxm::Other {
                class: 0xffff,
                field: 1,
                hasmask: false,
                body: vec![0, 0, 0x23, 0x20]
            }]),
            code(BadMatchCode::BadField)
        );
        assert_eq!(
            check(vec![
                ex(F::EthType, 0x0800),
                mk(F::Ipv4Src, 0x0a00_0001, 0xff00_0000)
            ]),
            code(BadMatchCode::BadWildcards)
        );
        assert_eq!(
            check(vec![mk(F::EthDst, 0x0100_0000_0000, 0x0100_0000_0000)]),
            Ok(())
        );
        // Values one past each narrow field's width.
        for (f, v) in [
            (F::VlanVid, 0x2000),
            (F::VlanPcp, 8),
            (F::IpDscp, 64),
            (F::IpEcn, 4),
            (F::Ipv6Flabel, 0x10_0000),
            (F::MplsLabel, 0x10_0000),
            (F::MplsTc, 8),
            (F::MplsBos, 2),
            (F::PbbIsid, 0x100_0000),
            (F::Ipv6Exthdr, 0x200),
            (F::PbbUca, 2),
        ] {
            let mut fields = prereqs_for(f);
            let k = f.kind();
            // U24 values are held in a u32, so 0x1000000 is representable.
            let value = match k {
                ValueKind::U24 => OxmValue::U32(v as u32),
                _ => OxmValue::from_u128(k, v),
            };
            fields.push(Oxm::basic(f, value));
            assert_eq!(check(fields.clone()), code(BadMatchCode::BadValue), "{f:?}");
            fields.pop();
            fields.push(Oxm::basic(f, OxmValue::from_u128(k, v - 1)));
            assert_eq!(check(fields), Ok(()), "{f:?} at its maximum");
        }
    }

    #[test]
    fn settable_fields() {
        let not: Vec<_> = OxmField::ALL.iter().filter(|f| !f.settable()).collect();
        assert_eq!(
            not,
            [
                &OxmField::InPort,
                &OxmField::InPhyPort,
                &OxmField::Metadata,
                &OxmField::Ipv6Exthdr
            ]
        );
        assert_eq!(OxmField::VlanVid.max_value(), 0x1fff);
        assert_eq!(OxmField::Ipv6Src.max_value(), u128::MAX);
    }
}
