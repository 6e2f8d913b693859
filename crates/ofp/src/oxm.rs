//! OXM match fields (spec 1.3.5 §7.2.3) and the match structure.
//!
//! A match is a list of TLVs kept in the order the controller sent them:
//! controllers compare flow stats with what they installed, so the order is
//! part of the value. Basic-class fields (`0x8000`) are typed; every other
//! class (experimenter `0xffff`, Nicira `0x0000`/`0x0001`, and unknown
//! basic field numbers) is carried opaquely in [`Oxm::Other`] so it
//! round-trips byte for byte.

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

/// `OFPIEH_*` bits of the `ipv6_exthdr` pseudo-field.
pub mod ipv6_exthdr {
    pub const NONEXT: u16 = 1 << 0;
    pub const ESP: u16 = 1 << 1;
    pub const AUTH: u16 = 1 << 2;
    pub const DEST: u16 = 1 << 3;
    pub const FRAG: u16 = 1 << 4;
    pub const ROUTER: u16 = 1 << 5;
    pub const HOP: u16 = 1 << 6;
    pub const UNREP: u16 = 1 << 7;
    pub const UNSEQ: u16 = 1 << 8;
}

/// An Ethernet address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

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

// Codec: the bodies are written by the OXM work (placeholders until then).
impl Oxm {
    /// Decodes one OXM TLV (header and payload).
    pub fn decode(_r: &mut crate::wire::Reader) -> Result<Oxm, crate::DecodeError> {
        unimplemented!("oxm codec")
    }
    /// Encodes one OXM TLV.
    pub fn encode(&self, _w: &mut Vec<u8>) {
        unimplemented!("oxm codec")
    }
}

impl Match {
    /// Decodes an `ofp_match` (type, length, fields, padding to 8 bytes).
    pub fn decode(_r: &mut crate::wire::Reader) -> Result<Match, crate::DecodeError> {
        unimplemented!("oxm codec")
    }
    /// Encodes an `ofp_match` with its padding.
    pub fn encode(&self, _w: &mut Vec<u8>) {
        unimplemented!("oxm codec")
    }
}
