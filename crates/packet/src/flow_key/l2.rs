//! The link-layer fields and the IPv4 destination of a frame, read
//! straight from its headers without a [`super::FlowKey`]: what the express path
//! needs for a table keyed on these fields, in a few loads instead of
//! [`super::FlowKey::parse_into`]'s whole key. Each value and presence bit is the
//! one `parse_into` gives (held together by differential tests in
//! [`super`]).

use super::{bit, field, L2_BITS, OFPVID_PRESENT};
use crate::ethernet::ethertype;

/// Presence bits of the fields [`L2Fields`] holds.
pub const L2_FIELDS: u64 = L2_BITS
    | (1 << field::ETH_TYPE)
    | (1 << field::VLAN_VID)
    | (1 << field::VLAN_PCP)
    | (1 << field::MPLS_LABEL)
    | (1 << field::MPLS_TC)
    | (1 << field::MPLS_BOS);

/// The link-layer fields of a frame (Ethernet addresses and type, the
/// outer VLAN tag, the top MPLS label), read straight from the header
/// without parsing further: what a table whose match has only these
/// fields and the ingress port needs, in a few loads instead of
/// [`super::FlowKey::parse_into`]'s whole key. Each value and presence bit is
/// the one `parse_into` gives (the differential test below holds them
/// together); MACs are 48-bit numbers, as [`super::FlowKey::get`] gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct L2Fields {
    /// Presence bits, as [`super::FlowKey::present`] has them for these fields.
    pub present: u64,
    /// Ethernet destination.
    pub eth_dst: u64,
    /// Ethernet source.
    pub eth_src: u64,
    /// EtherType after the VLAN tag.
    pub eth_type: u16,
    /// `OFPVID_PRESENT | vid`, or 0 when untagged.
    pub vlan_vid: u16,
    /// PCP of the tag.
    pub vlan_pcp: u8,
    /// Top MPLS label.
    pub mpls_label: u32,
    /// Its traffic class.
    pub mpls_tc: u8,
    /// Its bottom-of-stack bit.
    pub mpls_bos: u8,
}

impl L2Fields {
    /// The fields of `data`, or `None` for a frame this short parse
    /// leaves to [`super::FlowKey::parse_into`]: shorter than 18 bytes, or with
    /// a second VLAN tag.
    #[inline]
    pub fn parse(data: &[u8]) -> Option<L2Fields> {
        let tag = Self::tag(data)?;
        let h: &[u8; 18] = data.get(..18)?.try_into().ok()?;
        let mac = |o: usize| {
            u64::from_be_bytes([0, 0, h[o], h[o + 1], h[o + 2], h[o + 3], h[o + 4], h[o + 5]])
        };
        let mut f = L2Fields {
            present: L2_BITS | bit(field::ETH_TYPE) | bit(field::VLAN_VID),
            eth_dst: mac(0),
            eth_src: mac(6),
            eth_type: u16::from_be_bytes([h[12], h[13]]),
            ..L2Fields::default()
        };
        if let Some(tci) = tag {
            f.vlan_vid = OFPVID_PRESENT | (tci & 0x0fff);
            f.vlan_pcp = (tci >> 13) as u8;
            f.present |= bit(field::VLAN_PCP);
        }
        let (et, lse) = Self::type_and_label(data, tag.is_some());
        f.eth_type = et;
        if let Some(v) = lse {
            f.mpls_label = v >> 12;
            f.mpls_tc = ((v >> 9) & 7) as u8;
            f.mpls_bos = ((v >> 8) & 1) as u8;
            f.present |= bit(field::MPLS_LABEL) | bit(field::MPLS_TC) | bit(field::MPLS_BOS);
        }
        Some(f)
    }

    /// The EtherType of a frame [`L2Fields::parse`] reads (behind the
    /// outer tag when `tagged`, as [`L2Fields::tag`] tells) and, when it
    /// is MPLS and the frame holds the whole entry, the top label stack
    /// entry.
    #[inline]
    pub fn type_and_label(data: &[u8], tagged: bool) -> (u16, Option<u32>) {
        let l3 = if tagged { 18 } else { 14 };
        let et = match data.get(l3 - 2..l3) {
            Some(&[a, b]) => u16::from_be_bytes([a, b]),
            _ => return (0, None),
        };
        let lse = match data.get(l3..l3 + 4) {
            Some(&[a, b, c, d]) if ethertype::is_mpls(et) => Some(u32::from_be_bytes([a, b, c, d])),
            _ => None,
        };
        (et, lse)
    }

    /// [`L2Fields::type_and_label`] of a frame [`L2Fields::tag`] reads,
    /// tagged or not as it finds; `None` for a frame it declines. An
    /// untagged frame's header is read once.
    #[inline]
    pub fn type_and_label_of(data: &[u8]) -> Option<(u16, Option<u32>)> {
        let h: &[u8; 18] = data.get(..18)?.try_into().ok()?;
        let et = u16::from_be_bytes([h[12], h[13]]);
        if !ethertype::is_vlan(et) {
            let lse =
                ethertype::is_mpls(et).then(|| u32::from_be_bytes([h[14], h[15], h[16], h[17]]));
            return Some((et, lse));
        }
        let tagged = L2Fields::tag(data)?.is_some();
        Some(L2Fields::type_and_label(data, tagged))
    }

    /// The outer VLAN tag's TCI of a frame [`L2Fields::parse`] reads
    /// (`None` inside when untagged); `None` for a frame it declines.
    #[inline]
    pub fn tag(data: &[u8]) -> Option<Option<u16>> {
        let h: &[u8; 18] = data.get(..18)?.try_into().ok()?;
        if !ethertype::is_vlan(u16::from_be_bytes([h[12], h[13]])) {
            return Some(None);
        }
        if ethertype::is_vlan(u16::from_be_bytes([h[16], h[17]])) {
            return None;
        }
        Some(Some(u16::from_be_bytes([h[14], h[15]])))
    }

    /// The value of field `f` (one of [`L2_FIELDS`]; 0 for any other),
    /// whether present or not.
    #[inline]
    pub fn value(&self, f: u8) -> u64 {
        match f {
            field::ETH_DST => self.eth_dst,
            field::ETH_SRC => self.eth_src,
            field::ETH_TYPE => self.eth_type.into(),
            field::VLAN_VID => self.vlan_vid.into(),
            field::VLAN_PCP => self.vlan_pcp.into(),
            field::MPLS_LABEL => self.mpls_label.into(),
            field::MPLS_TC => self.mpls_tc.into(),
            field::MPLS_BOS => self.mpls_bos.into(),
            _ => 0,
        }
    }
}

/// Where the IPv4 header of a frame [`plain_ipv4_dst`] accepts begins.
pub const PLAIN_IPV4_L3: usize = 14;

/// The IPv4 destination of an untagged IPv4 frame whose header
/// [`super::FlowKey::parse_into`] reads (its key then has `eth_type` 0x0800, no
/// VLAN, and `IPV4_SRC` and `IPV4_DST` present), read straight from the
/// header; `None` for any other frame: tagged, another EtherType, shorter
/// than an IPv4 header, or a header `parse_into` calls malformed or
/// truncated. What a table of IPv4 routes needs to look a frame up (the
/// differential test below holds it to `parse_into`).
#[inline]
pub fn plain_ipv4_dst(data: &[u8]) -> Option<u32> {
    let h: &[u8; 34] = data.get(..34)?.try_into().ok()?;
    if u16::from_be_bytes([h[12], h[13]]) != ethertype::IPV4 {
        return None;
    }
    let l3 = PLAIN_IPV4_L3;
    let hl = usize::from(h[l3] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([h[l3 + 2], h[l3 + 3]]));
    if h[l3] >> 4 != 4 || hl < 20 || total < hl || data.len() < l3 + hl {
        return None;
    }
    Some(u32::from_be_bytes([h[30], h[31], h[32], h[33]]))
}
