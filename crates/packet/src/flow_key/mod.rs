//! The fast-path parser: extracts a packet's OpenFlow 1.3 match fields into
//! a fixed-size [`FlowKey`] (no allocation, nothing of the payload copied).
//!
//! A field is present (its bit set in [`FlowKey::present`], numbered by OXM
//! field number) only when its OpenFlow 1.3.5 prerequisites hold (spec
//! §7.2.3.7, table 12):
//!
//! - ETH_DST, ETH_SRC, ETH_TYPE: any frame with a full Ethernet header (and
//!   all its VLAN tags). ETH_TYPE is the EtherType after the VLAN tags.
//! - VLAN_VID: always with Ethernet; `OFPVID_NONE` (0) when untagged, else
//!   `OFPVID_PRESENT | vid` of the outermost tag. VLAN_PCP: tagged only.
//!   Tags with TPID 0x8100 and 0x88a8 are skipped.
//! - IP_DSCP, IP_ECN, IP_PROTO: ETH_TYPE 0x0800 or 0x86dd. For IPv6,
//!   IP_PROTO is the protocol after the extension headers (50 for ESP, 59
//!   for no-next). IPV4_SRC/DST: 0x0800. IPV6_SRC/DST/FLABEL, IPV6_EXTHDR:
//!   0x86dd.
//! - TCP/UDP/SCTP ports: IP_PROTO 6/17/132, not a non-first fragment.
//!   ICMPV4_*: 0x0800 and IP_PROTO 1. ICMPV6_*: 0x86dd and IP_PROTO 58.
//! - IPV6_ND_TARGET: ICMPV6_TYPE 135 or 136. IPV6_ND_SLL: 135. IPV6_ND_TLL:
//!   136. When the option is absent the field is present with value zero
//!   (as Open vSwitch does).
//! - ARP_*: ETH_TYPE 0x0806 with Ethernet/IPv4 address sizes.
//! - MPLS_LABEL/TC/BOS: ETH_TYPE 0x8847/0x8848, from the outermost label.
//! - PBB_ISID: ETH_TYPE 0x88e7.
//!
//! IN_PORT, IN_PHY_PORT, METADATA and TUNNEL_ID are not in the packet: the
//! caller fills them (with [`FlowKey::set_metadata_fields`]).
//!
//! Nothing is parsed inside MPLS or PBB (OpenFlow 1.3 has no fields there:
//! pop first, then match in a later table). An 802.3 frame (length field
//! < 0x0600 where the EtherType would be) reports that length as ETH_TYPE.
//!
//! These rules are checked against os-ken's OpenFlow 1.3 switch test
//! vectors (`tests/packet_scapy/test_ryu_vectors.py`) and scapy.
//!
//! A header that is cut short contributes no fields and sets
//! [`flags::TRUNCATED`]; a header whose contents make it unreadable (IPv4
//! IHL < 5, wrong IP version) sets [`flags::MALFORMED`]. Neither ever panics.
//!
//! Offsets of the headers are kept so actions can find them without
//! re-parsing: `l3_offset` is where the header after the EtherType starts
//! (IP, ARP, MPLS or PBB), `l4_offset` the transport header.

use crate::ethernet::ethertype;
use crate::ipv4::protocol;
use crate::{be16, be32, ipv6, mac_at, MacAddr};

mod l2;

pub use l2::{plain_ipv4_dst, L2Fields, L2_FIELDS, PLAIN_IPV4_L3};

/// OpenFlow 1.3 OXM field numbers (class OPENFLOW_BASIC).
pub mod field {
    #![allow(missing_docs)]
    pub const IN_PORT: u8 = 0;
    pub const IN_PHY_PORT: u8 = 1;
    pub const METADATA: u8 = 2;
    pub const ETH_DST: u8 = 3;
    pub const ETH_SRC: u8 = 4;
    pub const ETH_TYPE: u8 = 5;
    pub const VLAN_VID: u8 = 6;
    pub const VLAN_PCP: u8 = 7;
    pub const IP_DSCP: u8 = 8;
    pub const IP_ECN: u8 = 9;
    pub const IP_PROTO: u8 = 10;
    pub const IPV4_SRC: u8 = 11;
    pub const IPV4_DST: u8 = 12;
    pub const TCP_SRC: u8 = 13;
    pub const TCP_DST: u8 = 14;
    pub const UDP_SRC: u8 = 15;
    pub const UDP_DST: u8 = 16;
    pub const SCTP_SRC: u8 = 17;
    pub const SCTP_DST: u8 = 18;
    pub const ICMPV4_TYPE: u8 = 19;
    pub const ICMPV4_CODE: u8 = 20;
    pub const ARP_OP: u8 = 21;
    pub const ARP_SPA: u8 = 22;
    pub const ARP_TPA: u8 = 23;
    pub const ARP_SHA: u8 = 24;
    pub const ARP_THA: u8 = 25;
    pub const IPV6_SRC: u8 = 26;
    pub const IPV6_DST: u8 = 27;
    pub const IPV6_FLABEL: u8 = 28;
    pub const ICMPV6_TYPE: u8 = 29;
    pub const ICMPV6_CODE: u8 = 30;
    pub const IPV6_ND_TARGET: u8 = 31;
    pub const IPV6_ND_SLL: u8 = 32;
    pub const IPV6_ND_TLL: u8 = 33;
    pub const MPLS_LABEL: u8 = 34;
    pub const MPLS_TC: u8 = 35;
    pub const MPLS_BOS: u8 = 36;
    pub const PBB_ISID: u8 = 37;
    pub const TUNNEL_ID: u8 = 38;
    pub const IPV6_EXTHDR: u8 = 39;

    /// Lower-case names as in the OpenFlow spec / ovs-ofctl, by number.
    pub const NAMES: [&str; 40] = [
        "in_port",
        "in_phy_port",
        "metadata",
        "eth_dst",
        "eth_src",
        "eth_type",
        "vlan_vid",
        "vlan_pcp",
        "ip_dscp",
        "ip_ecn",
        "ip_proto",
        "ipv4_src",
        "ipv4_dst",
        "tcp_src",
        "tcp_dst",
        "udp_src",
        "udp_dst",
        "sctp_src",
        "sctp_dst",
        "icmpv4_type",
        "icmpv4_code",
        "arp_op",
        "arp_spa",
        "arp_tpa",
        "arp_sha",
        "arp_tha",
        "ipv6_src",
        "ipv6_dst",
        "ipv6_flabel",
        "icmpv6_type",
        "icmpv6_code",
        "ipv6_nd_target",
        "ipv6_nd_sll",
        "ipv6_nd_tll",
        "mpls_label",
        "mpls_tc",
        "mpls_bos",
        "pbb_isid",
        "tunnel_id",
        "ipv6_exthdr",
    ];
}

/// Bits of [`FlowKey::flags`].
pub mod flags {
    /// Some header was cut short by the end of the packet.
    pub const TRUNCATED: u8 = 1;
    /// Some header had contents that made it unreadable.
    pub const MALFORMED: u8 = 2;
    /// The IP packet is a fragment (first or later).
    pub const FRAGMENT: u8 = 4;
    /// The IP packet is a non-first fragment (no transport header).
    pub const LATER_FRAGMENT: u8 = 8;
    /// The IP packet has more fragments after it (IPv4 MF, IPv6 M).
    pub const MORE_FRAGMENTS: u8 = 16;
}

/// `OFPVID_PRESENT`: set in `vlan_vid` when the packet has a VLAN tag.
pub const OFPVID_PRESENT: u16 = 0x1000;

/// The match fields of one packet plus the header offsets. Values are held
/// as numbers in host order (an IPv4 address 10.0.0.1 is `0x0a000001`);
/// MAC addresses as their 6 wire bytes. Fields not present are zero.
///
/// Equality and hashing look at the match fields only (`present` and the
/// OXM field values): two packets of one flow compare equal even when their
/// lengths, IP options, TTLs or flags differ, so a `FlowKey` can key a flow
/// cache directly.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlowKey {
    /// Bit `n` set when OXM field number `n` is present.
    pub present: u64,
    /// Ingress port (set by the caller).
    pub in_port: u32,
    /// Physical ingress port (set by the caller).
    pub in_phy_port: u32,
    /// Pipeline metadata (set by the caller).
    pub metadata: u64,
    /// Tunnel id (set by the caller).
    pub tunnel_id: u64,
    /// Ethernet destination.
    pub eth_dst: MacAddr,
    /// Ethernet source.
    pub eth_src: MacAddr,
    /// EtherType after the VLAN tags.
    pub eth_type: u16,
    /// `OFPVID_PRESENT | vid` of the outermost tag, or 0 when untagged.
    pub vlan_vid: u16,
    /// PCP of the outermost tag.
    pub vlan_pcp: u8,
    /// IP DSCP (6 bits).
    pub ip_dscp: u8,
    /// IP ECN (2 bits).
    pub ip_ecn: u8,
    /// IP protocol / IPv6 upper-layer next header.
    pub ip_proto: u8,
    /// IPv4 TTL or IPv6 hop limit (not an OXM field; for TTL actions).
    pub ip_ttl: u8,
    /// IPv4 source.
    pub ipv4_src: u32,
    /// IPv4 destination.
    pub ipv4_dst: u32,
    /// TCP, UDP or SCTP source port (see `present` for which).
    pub tp_src: u16,
    /// TCP, UDP or SCTP destination port.
    pub tp_dst: u16,
    /// ICMPv4 or ICMPv6 type.
    pub icmp_type: u8,
    /// ICMPv4 or ICMPv6 code.
    pub icmp_code: u8,
    /// ARP opcode.
    pub arp_op: u16,
    /// ARP sender protocol address.
    pub arp_spa: u32,
    /// ARP target protocol address.
    pub arp_tpa: u32,
    /// ARP sender hardware address.
    pub arp_sha: MacAddr,
    /// ARP target hardware address.
    pub arp_tha: MacAddr,
    /// IPv6 source.
    pub ipv6_src: u128,
    /// IPv6 destination.
    pub ipv6_dst: u128,
    /// IPv6 flow label (20 bits).
    pub ipv6_flabel: u32,
    /// ND target address.
    pub nd_target: u128,
    /// ND source link-layer address option (zero if absent).
    pub nd_sll: MacAddr,
    /// ND target link-layer address option (zero if absent).
    pub nd_tll: MacAddr,
    /// Outermost MPLS label.
    pub mpls_label: u32,
    /// Outermost MPLS traffic class.
    pub mpls_tc: u8,
    /// Outermost MPLS bottom-of-stack bit.
    pub mpls_bos: u8,
    /// Outermost MPLS TTL (not an OXM field; for TTL actions).
    pub mpls_ttl: u8,
    /// PBB I-SID.
    pub pbb_isid: u32,
    /// IPv6 extension-header pseudo-field bits.
    pub ipv6_exthdr: u16,
    /// [`flags`] bits.
    pub flags: u8,
    /// Number of VLAN tags skipped.
    pub vlan_tags: u8,
    /// Offset of the EtherType that follows the VLAN tags (12 + 4 * tags).
    pub ethertype_offset: u32,
    /// Offset of the header after the EtherType (0 when the Ethernet
    /// header itself is incomplete).
    pub l3_offset: u32,
    /// End of the IP datagram within the buffer (min of the IP length and
    /// the buffer), 0 when not IP. Ethernet padding lies beyond it.
    pub l3_end: u32,
    /// Offset of the byte holding IP_PROTO (IPv4 protocol or the last IPv6
    /// next-header), 0 when not IP.
    pub ip_proto_offset: u32,
    /// Offset of the transport header, 0 when none was reached.
    pub l4_offset: u32,
    /// Length of the buffer that was parsed.
    pub packet_len: u32,
    /// Offset of the IPv6 final destination inside a routing header with
    /// segments left (the address the transport pseudo-header uses), 0 when
    /// the IPv6 header's destination is the final one.
    pub ipv6_final_dst_offset: u32,
}

/// Equality and hashing of keys look at the match fields only, listed
/// once here with the fields they leave out. The list is exhaustive: a field
/// added to `FlowKey` without deciding here fails to compile.
macro_rules! match_fields {
    ($($field:ident),*; not $($other:ident),*) => {
        impl PartialEq for FlowKey {
            fn eq(&self, other: &Self) -> bool {
                let FlowKey { $($field: _,)* $($other: _,)* } = self;
                $(self.$field == other.$field)&&*
            }
        }

        impl core::hash::Hash for FlowKey {
            fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
                $(self.$field.hash(state);)*
            }
        }
    };
}

match_fields!(
    present, in_port, in_phy_port, metadata, tunnel_id, eth_dst, eth_src, eth_type, vlan_vid,
    vlan_pcp, ip_dscp, ip_ecn, ip_proto, ipv4_src, ipv4_dst, tp_src, tp_dst, icmp_type,
    icmp_code, arp_op, arp_spa, arp_tpa, arp_sha, arp_tha, ipv6_src, ipv6_dst, ipv6_flabel,
    nd_target, nd_sll, nd_tll, mpls_label, mpls_tc, mpls_bos, pbb_isid, ipv6_exthdr;
    not ip_ttl, mpls_ttl, flags, vlan_tags, ethertype_offset, l3_offset, l3_end,
    ip_proto_offset, l4_offset, packet_len, ipv6_final_dst_offset
);

impl Eq for FlowKey {}

#[inline]
fn bit(f: u8) -> u64 {
    1u64 << f
}

/// The presence bits of `fields`.
const fn bits(fields: &[u8]) -> u64 {
    let mut m = 0;
    let mut i = 0;
    while i < fields.len() {
        m |= 1u64 << fields[i];
        i += 1;
    }
    m
}

const L2_BITS: u64 = (1 << field::ETH_DST) | (1 << field::ETH_SRC);
/// What each parse step marks present.
mod step_bits {
    use super::{bits, field::*};
    pub(super) const METADATA_BITS: u64 = bits(&[IN_PORT, IN_PHY_PORT, METADATA, TUNNEL_ID]);
    pub(super) const ARP_BITS: u64 = bits(&[ARP_OP, ARP_SPA, ARP_TPA, ARP_SHA, ARP_THA]);
    pub(super) const IPV4_BITS: u64 = bits(&[IP_DSCP, IP_ECN, IP_PROTO, IPV4_SRC, IPV4_DST]);
    pub(super) const IPV6_BITS: u64 = bits(&[IP_DSCP, IP_ECN, IPV6_SRC, IPV6_DST, IPV6_FLABEL]);
}
use step_bits::{ARP_BITS, IPV4_BITS, IPV6_BITS, METADATA_BITS};

impl FlowKey {
    /// True when OXM field `f` is present.
    #[inline]
    pub fn has(&self, f: u8) -> bool {
        f < 64 && self.present & bit(f) != 0
    }

    /// True when [`flags::TRUNCATED`] is set.
    pub fn is_truncated(&self) -> bool {
        self.flags & flags::TRUNCATED != 0
    }

    /// Sets the four fields that do not come from the packet and marks
    /// them present.
    pub fn set_metadata_fields(
        &mut self,
        in_port: u32,
        in_phy_port: u32,
        metadata: u64,
        tunnel_id: u64,
    ) {
        self.in_port = in_port;
        self.in_phy_port = in_phy_port;
        self.metadata = metadata;
        self.tunnel_id = tunnel_id;
        self.present |= METADATA_BITS;
    }

    /// The value of OXM field `f` as a number (MACs as 48-bit numbers), or
    /// `None` when absent.
    pub fn get(&self, f: u8) -> Option<u128> {
        if !self.has(f) {
            return None;
        }
        let mac = |m: MacAddr| {
            let mut b = [0u8; 16];
            b[10..].copy_from_slice(&m);
            u128::from_be_bytes(b)
        };
        Some(match f {
            field::IN_PORT => self.in_port.into(),
            field::IN_PHY_PORT => self.in_phy_port.into(),
            field::METADATA => self.metadata.into(),
            field::ETH_DST => mac(self.eth_dst),
            field::ETH_SRC => mac(self.eth_src),
            field::ETH_TYPE => self.eth_type.into(),
            field::VLAN_VID => self.vlan_vid.into(),
            field::VLAN_PCP => self.vlan_pcp.into(),
            field::IP_DSCP => self.ip_dscp.into(),
            field::IP_ECN => self.ip_ecn.into(),
            field::IP_PROTO => self.ip_proto.into(),
            field::IPV4_SRC => self.ipv4_src.into(),
            field::IPV4_DST => self.ipv4_dst.into(),
            field::TCP_SRC | field::UDP_SRC | field::SCTP_SRC => self.tp_src.into(),
            field::TCP_DST | field::UDP_DST | field::SCTP_DST => self.tp_dst.into(),
            field::ICMPV4_TYPE | field::ICMPV6_TYPE => self.icmp_type.into(),
            field::ICMPV4_CODE | field::ICMPV6_CODE => self.icmp_code.into(),
            field::ARP_OP => self.arp_op.into(),
            field::ARP_SPA => self.arp_spa.into(),
            field::ARP_TPA => self.arp_tpa.into(),
            field::ARP_SHA => mac(self.arp_sha),
            field::ARP_THA => mac(self.arp_tha),
            field::IPV6_SRC => self.ipv6_src,
            field::IPV6_DST => self.ipv6_dst,
            field::IPV6_FLABEL => self.ipv6_flabel.into(),
            field::IPV6_ND_TARGET => self.nd_target,
            field::IPV6_ND_SLL => mac(self.nd_sll),
            field::IPV6_ND_TLL => mac(self.nd_tll),
            field::MPLS_LABEL => self.mpls_label.into(),
            field::MPLS_TC => self.mpls_tc.into(),
            field::MPLS_BOS => self.mpls_bos.into(),
            field::PBB_ISID => self.pbb_isid.into(),
            field::TUNNEL_ID => self.tunnel_id.into(),
            field::IPV6_EXTHDR => self.ipv6_exthdr.into(),
            _ => return None,
        })
    }

    /// Updates a key parsed from a frame to describe that frame after a
    /// successful pop_vlan, without parsing again. Only done for a frame
    /// with exactly one tag (the fields then shift by 4 bytes and the VLAN
    /// fields go); returns false, changing nothing, otherwise (the caller
    /// parses again). Equal to parsing the popped frame (property-tested).
    pub fn after_pop_vlan(&mut self) -> bool {
        if self.vlan_tags != 1 || self.ethertype_offset != 16 || self.packet_len < 18 {
            return false;
        }
        let back = |o: &mut u32| {
            if *o != 0 {
                *o -= 4;
            }
        };
        self.vlan_tags = 0;
        self.vlan_vid = 0;
        self.vlan_pcp = 0;
        self.present &= !bit(field::VLAN_PCP);
        self.ethertype_offset = 12;
        back(&mut self.l3_offset);
        back(&mut self.l3_end);
        back(&mut self.ip_proto_offset);
        back(&mut self.l4_offset);
        back(&mut self.ipv6_final_dst_offset);
        self.packet_len -= 4;
        true
    }

    /// Updates a key parsed from a frame to describe that frame after a
    /// successful push_mpls of `ethertype` (see
    /// [`crate::buffer::PacketBuf::push_mpls`]), without parsing again:
    /// parsing stops at an MPLS label, so the new key is the old one's
    /// Ethernet part, the new label's fields, and nothing past them.
    /// Returns false, changing nothing, when the frame had no complete
    /// Ethernet header (push_mpls refuses those). Equal to parsing the new
    /// frame (property-tested); the pipeline fields (in_port, metadata,
    /// tunnel_id) are kept.
    pub fn after_push_mpls(&mut self, ethertype: u16) -> bool {
        if !self.has(field::ETH_TYPE) {
            return false;
        }
        let (label, tc, ttl, bos) = if self.has(field::MPLS_LABEL) {
            (self.mpls_label, self.mpls_tc, self.mpls_ttl, 0)
        } else if self.has(field::IPV4_SRC) || self.has(field::IPV6_SRC) {
            (0, 0, self.ip_ttl, 1)
        } else {
            (0, 0, 0, 1)
        };
        let pipeline = bit(field::IN_PORT)
            | bit(field::IN_PHY_PORT)
            | bit(field::METADATA)
            | bit(field::TUNNEL_ID);
        let l2 = L2_BITS
            | bit(field::ETH_TYPE)
            | bit(field::VLAN_VID)
            | (self.present & bit(field::VLAN_PCP));
        *self = FlowKey {
            present: (self.present & (pipeline | l2))
                | bit(field::MPLS_LABEL)
                | bit(field::MPLS_TC)
                | bit(field::MPLS_BOS),
            in_port: self.in_port,
            in_phy_port: self.in_phy_port,
            metadata: self.metadata,
            tunnel_id: self.tunnel_id,
            eth_dst: self.eth_dst,
            eth_src: self.eth_src,
            eth_type: ethertype,
            vlan_vid: self.vlan_vid,
            vlan_pcp: self.vlan_pcp,
            mpls_label: label,
            mpls_tc: tc,
            mpls_bos: bos,
            mpls_ttl: ttl,
            vlan_tags: self.vlan_tags,
            ethertype_offset: self.ethertype_offset,
            l3_offset: self.ethertype_offset + 2,
            packet_len: self.packet_len + 4,
            ..FlowKey::default()
        };
        true
    }

    /// Parses `data` (an Ethernet frame). Never panics, never allocates.
    pub fn parse(data: &[u8]) -> FlowKey {
        let mut k = FlowKey::default();
        k.parse_into(data);
        k
    }

    /// [`FlowKey::parse`] into `self` (every field is overwritten), so a
    /// caller that keeps a key in place does not copy a new one over it.
    pub fn parse_into(&mut self, data: &[u8]) {
        *self = FlowKey {
            packet_len: data.len().min(u32::MAX as usize) as u32,
            ..FlowKey::default()
        };
        let k = self;
        if data.len() < 14 {
            k.flags |= flags::TRUNCATED;
            return;
        }
        k.eth_dst = mac_at(data, 0);
        k.eth_src = mac_at(data, 6);
        k.present = L2_BITS;
        let mut off = 12usize;
        let mut et = be16(data, 12);
        while ethertype::is_vlan(et) {
            let Some(tag) = data.get(off + 2..off + 6) else {
                k.flags |= flags::TRUNCATED;
                return;
            };
            if k.vlan_tags == 0 {
                let tci = be16(tag, 0);
                k.vlan_vid = OFPVID_PRESENT | (tci & 0x0fff);
                k.vlan_pcp = (tci >> 13) as u8;
                k.present |= bit(field::VLAN_PCP);
            }
            k.vlan_tags = k.vlan_tags.saturating_add(1);
            et = be16(tag, 2);
            off += 4;
        }
        k.eth_type = et;
        k.present |= bit(field::ETH_TYPE) | bit(field::VLAN_VID);
        k.ethertype_offset = off as u32;
        let l3 = off + 2;
        k.l3_offset = l3 as u32;
        let rest = data.get(l3..).unwrap_or(&[]);
        match et {
            ethertype::IPV4 => k.parse_ipv4(data, l3),
            ethertype::IPV6 => k.parse_ipv6(data, l3),
            ethertype::ARP => k.parse_arp(rest),
            ethertype::MPLS | ethertype::MPLS_MC => {
                if let Some(l) = rest.get(..4) {
                    let v = be32(l, 0);
                    k.mpls_label = v >> 12;
                    k.mpls_tc = ((v >> 9) & 7) as u8;
                    k.mpls_bos = ((v >> 8) & 1) as u8;
                    k.mpls_ttl = v as u8;
                    k.present |=
                        bit(field::MPLS_LABEL) | bit(field::MPLS_TC) | bit(field::MPLS_BOS);
                } else {
                    k.flags |= flags::TRUNCATED;
                }
            }
            ethertype::PBB => {
                if let Some(t) = rest.get(..4) {
                    k.pbb_isid = be32(t, 0) & 0x00ff_ffff;
                    k.present |= bit(field::PBB_ISID);
                } else {
                    k.flags |= flags::TRUNCATED;
                }
            }
            _ => {}
        }
    }

    fn parse_arp(&mut self, a: &[u8]) {
        let Some(a) = a.get(..28) else {
            self.flags |= flags::TRUNCATED;
            return;
        };
        if be16(a, 0) != 1 || be16(a, 2) != ethertype::IPV4 || a[4] != 6 || a[5] != 4 {
            self.flags |= flags::MALFORMED;
            return;
        }
        self.arp_op = be16(a, 6);
        self.arp_sha = mac_at(a, 8);
        self.arp_spa = be32(a, 14);
        self.arp_tha = mac_at(a, 18);
        self.arp_tpa = be32(a, 24);
        self.present |= ARP_BITS;
    }

    fn parse_ipv4(&mut self, data: &[u8], l3: usize) {
        let Some(h) = data.get(l3..l3 + 20) else {
            self.flags |= flags::TRUNCATED;
            return;
        };
        let hl = usize::from(h[0] & 0xf) * 4;
        let total = usize::from(be16(h, 2));
        if h[0] >> 4 != 4 || hl < 20 || total < hl {
            self.flags |= flags::MALFORMED;
            return;
        }
        if data.len() < l3 + hl {
            self.flags |= flags::TRUNCATED;
            return;
        }
        self.ip_dscp = h[1] >> 2;
        self.ip_ecn = h[1] & 3;
        self.ip_ttl = h[8];
        self.ip_proto = h[9];
        self.ipv4_src = be32(h, 12);
        self.ipv4_dst = be32(h, 16);
        self.present |= IPV4_BITS;
        self.ip_proto_offset = (l3 + 9) as u32;
        let end = (l3 + total).min(data.len());
        self.l3_end = end as u32;
        if l3 + total > data.len() {
            // The datagram is longer than what we hold.
            self.flags |= flags::TRUNCATED;
        }
        let frag = be16(h, 6);
        if frag & 0x3fff != 0 {
            self.flags |= flags::FRAGMENT;
            if frag & 0x2000 != 0 {
                self.flags |= flags::MORE_FRAGMENTS;
            }
            if frag & 0x1fff != 0 {
                self.flags |= flags::LATER_FRAGMENT;
                return;
            }
        }
        let l4 = l3 + hl;
        self.parse_l4(data, l4, end, false);
    }

    fn parse_ipv6(&mut self, data: &[u8], l3: usize) {
        let Some(h) = data.get(l3..l3 + ipv6::HEADER_LEN) else {
            self.flags |= flags::TRUNCATED;
            return;
        };
        if h[0] >> 4 != 6 {
            self.flags |= flags::MALFORMED;
            return;
        }
        let w0 = be32(h, 0);
        let tc = (w0 >> 20) as u8;
        self.ip_dscp = tc >> 2;
        self.ip_ecn = tc & 3;
        self.ipv6_flabel = w0 & 0xf_ffff;
        self.ip_ttl = h[7];
        let mut a = [0u8; 16];
        a.copy_from_slice(&h[8..24]);
        self.ipv6_src = u128::from_be_bytes(a);
        a.copy_from_slice(&h[24..40]);
        self.ipv6_dst = u128::from_be_bytes(a);
        self.present |= IPV6_BITS;
        let want = l3 + ipv6::HEADER_LEN + usize::from(be16(h, 4));
        if want > data.len() {
            self.flags |= flags::TRUNCATED;
        }
        let end = want.min(data.len());
        self.l3_end = end as u32;
        let w = ipv6::walk_ext_headers(data.get(l3..end).unwrap_or(&[]));
        if w.fragment {
            self.flags |= flags::FRAGMENT;
        }
        if w.later_fragment {
            self.flags |= flags::LATER_FRAGMENT;
        }
        if w.more_fragments {
            self.flags |= flags::MORE_FRAGMENTS;
        }
        if w.truncated {
            self.flags |= flags::TRUNCATED;
            return;
        }
        if let Some(o) = w.final_dst_offset {
            self.ipv6_final_dst_offset = (l3 + o) as u32;
        }
        // IP_PROTO and IPV6_EXTHDR need the whole walk.
        self.ipv6_exthdr = w.exthdr;
        self.ip_proto = w.protocol;
        self.ip_proto_offset = (l3 + w.protocol_offset) as u32;
        self.present |= bit(field::IP_PROTO) | bit(field::IPV6_EXTHDR);
        if let Some(u) = w.upper_offset {
            self.parse_l4(data, l3 + u, end, true);
        }
    }

    fn parse_l4(&mut self, data: &[u8], l4: usize, end: usize, v6: bool) {
        let seg = data.get(l4..end).unwrap_or(&[]);
        let need = match (self.ip_proto, v6) {
            (protocol::TCP, _) => 20,
            (protocol::UDP, _) => 8,
            (protocol::SCTP, _) => 12,
            (protocol::ICMP, false) => 4,
            (protocol::ICMPV6, true) => 4,
            _ => return,
        };
        if seg.len() < need {
            self.flags |= flags::TRUNCATED;
            return;
        }
        self.l4_offset = l4 as u32;
        let (s, d) = match self.ip_proto {
            protocol::TCP => (field::TCP_SRC, field::TCP_DST),
            protocol::UDP => (field::UDP_SRC, field::UDP_DST),
            protocol::SCTP => (field::SCTP_SRC, field::SCTP_DST),
            _ => {
                self.icmp_type = seg[0];
                self.icmp_code = seg[1];
                if v6 {
                    self.present |= bit(field::ICMPV6_TYPE) | bit(field::ICMPV6_CODE);
                    self.parse_nd(seg);
                } else {
                    self.present |= bit(field::ICMPV4_TYPE) | bit(field::ICMPV4_CODE);
                }
                return;
            }
        };
        self.tp_src = be16(seg, 0);
        self.tp_dst = be16(seg, 2);
        self.present |= bit(s) | bit(d);
    }

    fn parse_nd(&mut self, msg: &[u8]) {
        use crate::icmpv6::{msg_type, nd_option, Icmpv6Packet};
        let t = self.icmp_type;
        if t != msg_type::NEIGHBOR_SOLICIT && t != msg_type::NEIGHBOR_ADVERT {
            return;
        }
        let Ok(p) = Icmpv6Packet::new_checked(msg) else {
            return;
        };
        let Some(target) = p.nd_target() else {
            self.flags |= flags::TRUNCATED;
            return;
        };
        self.nd_target = u128::from_be_bytes(target);
        self.present |= bit(field::IPV6_ND_TARGET);
        // An absent option reads as zero, but only when the message is
        // complete: in a cut-short message the option may just be missing.
        let complete = self.flags & flags::TRUNCATED == 0;
        let (opt, f) = if t == msg_type::NEIGHBOR_SOLICIT {
            (nd_option::SOURCE_LL_ADDR, field::IPV6_ND_SLL)
        } else {
            (nd_option::TARGET_LL_ADDR, field::IPV6_ND_TLL)
        };
        let v = match p.nd_lladdr(opt) {
            Some(m) => m,
            None if complete => [0; 6],
            None => return,
        };
        if f == field::IPV6_ND_SLL {
            self.nd_sll = v;
        } else {
            self.nd_tll = v;
        }
        self.present |= bit(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    fn fields(k: &FlowKey) -> Vec<&'static str> {
        (0..40u8)
            .filter(|f| k.has(*f))
            .map(|f| field::NAMES[usize::from(f)])
            .collect()
    }

    #[test]
    fn tcp_over_ipv4() {
        let p = eth_ipv4_tcp();
        let k = FlowKey::parse(&p);
        assert_eq!(
            fields(&k),
            [
                "eth_dst", "eth_src", "eth_type", "vlan_vid", "ip_dscp", "ip_ecn", "ip_proto",
                "ipv4_src", "ipv4_dst", "tcp_src", "tcp_dst"
            ]
        );
        assert_eq!(k.eth_dst, DST_MAC);
        assert_eq!(k.eth_src, SRC_MAC);
        assert_eq!(k.eth_type, 0x0800);
        assert_eq!(k.vlan_vid, 0);
        assert_eq!(k.ip_dscp, 10);
        assert_eq!(k.ip_ecn, 1);
        assert_eq!(k.ip_proto, 6);
        assert_eq!(k.ipv4_src, 0xc0a8_0001);
        assert_eq!(k.ipv4_dst, 0x0a00_0002);
        assert_eq!((k.tp_src, k.tp_dst), (1234, 80));
        assert_eq!(k.l3_offset, 14);
        assert_eq!(k.l4_offset, 34);
        assert_eq!(k.l3_end as usize, p.len());
        assert_eq!(k.flags, 0);
        assert_eq!(k.get(field::TCP_DST), Some(80));
        assert_eq!(k.get(field::UDP_DST), None);
        assert_eq!(k.get(field::ETH_DST), Some(0x0000_0102_0304_0506));
    }

    #[test]
    fn vlan_stack_outermost() {
        let p = with_tags(&eth_ipv4_udp(), &[(0x88a8, 0xa00a), (0x8100, 0x2123)]);
        let k = FlowKey::parse(&p);
        assert_eq!(k.vlan_vid, 0x1000 | 0x00a);
        assert_eq!(k.vlan_pcp, 5);
        assert_eq!(k.vlan_tags, 2);
        assert_eq!(k.eth_type, 0x0800);
        assert_eq!(k.ethertype_offset, 20);
        assert_eq!(k.l3_offset, 22);
        assert!(k.has(field::VLAN_PCP) && k.has(field::UDP_SRC));
        assert_eq!((k.tp_src, k.tp_dst), (5353, 53));
    }

    #[test]
    fn ipv4_fragments_and_protocols() {
        let mut p = eth_ipv4_tcp();
        set_ipv4_frag(&mut p, true, 0);
        let k = FlowKey::parse(&p);
        assert!(k.has(field::TCP_SRC));
        assert_eq!(k.flags, flags::FRAGMENT | flags::MORE_FRAGMENTS);
        set_ipv4_frag(&mut p, false, 8);
        let k = FlowKey::parse(&p);
        assert!(!k.has(field::TCP_SRC) && k.has(field::IP_PROTO));
        assert_eq!(k.flags, flags::FRAGMENT | flags::LATER_FRAGMENT);
        assert_eq!(k.l4_offset, 0);

        let k = FlowKey::parse(&eth_ipv4_icmp());
        assert!(k.has(field::ICMPV4_TYPE) && k.has(field::ICMPV4_CODE));
        assert_eq!((k.icmp_type, k.icmp_code), (8, 0));
        let k = FlowKey::parse(&eth_ipv4_sctp());
        assert!(k.has(field::SCTP_SRC) && k.has(field::SCTP_DST) && !k.has(field::TCP_SRC));
        assert_eq!((k.tp_src, k.tp_dst), (5000, 6000));
        // ICMPv6 under IPv4 is not ICMPv6.
        let mut p = eth_ipv4_icmp();
        p[23] = 58;
        let k = FlowKey::parse(&p);
        assert!(!k.has(field::ICMPV6_TYPE) && !k.has(field::ICMPV4_TYPE));
    }

    #[test]
    fn ipv4_options_and_padding() {
        let p = eth_ipv4_options_udp();
        let k = FlowKey::parse(&p);
        assert_eq!(k.l4_offset, 14 + 24);
        assert!(k.has(field::UDP_SRC));
        // Ethernet padding after the datagram does not count.
        let mut q = eth_ipv4_udp();
        let n = q.len();
        q.extend_from_slice(&[0xee; 10]);
        let k = FlowKey::parse(&q);
        assert_eq!(k.l3_end as usize, n);
        assert_eq!(k.flags, 0);
    }

    #[test]
    fn ipv6_and_nd() {
        let k = FlowKey::parse(&eth_ipv6_tcp());
        assert!(k.has(field::IPV6_SRC) && k.has(field::IPV6_EXTHDR) && k.has(field::TCP_SRC));
        assert_eq!(k.ipv6_flabel, 0xbeef);
        assert_eq!(k.ip_dscp, 46);
        assert_eq!(k.ipv6_src, V6_SRC);
        assert_eq!(k.ipv6_exthdr, 0);
        let k = FlowKey::parse(&eth_ipv6_ns());
        assert_eq!(k.icmp_type, 135);
        assert!(k.has(field::IPV6_ND_TARGET) && k.has(field::IPV6_ND_SLL));
        assert!(!k.has(field::IPV6_ND_TLL));
        assert_eq!(k.nd_target, V6_TARGET);
        assert_eq!(k.nd_sll, SRC_MAC);
        let k = FlowKey::parse(&eth_ipv6_na());
        assert!(k.has(field::IPV6_ND_TLL) && !k.has(field::IPV6_ND_SLL));
        assert_eq!(k.nd_tll, [0x66; 6]);
        let k = FlowKey::parse(&eth_ipv6_exthdr_udp());
        assert_eq!(k.ip_proto, 17);
        assert!(k.has(field::UDP_SRC));
        assert_eq!(
            k.ipv6_exthdr,
            ipv6::exthdr::HOP | ipv6::exthdr::DEST | ipv6::exthdr::ROUTER | ipv6::exthdr::FRAG
        );
        assert_eq!(k.flags, flags::FRAGMENT);
        // Echo request: no ND fields.
        let mut p = eth_ipv6_ns();
        p[54] = 128;
        let k = FlowKey::parse(&p);
        assert!(k.has(field::ICMPV6_TYPE) && !k.has(field::IPV6_ND_TARGET));
    }

    #[test]
    fn arp_mpls_pbb() {
        let k = FlowKey::parse(&eth_arp());
        assert_eq!(
            fields(&k),
            [
                "eth_dst", "eth_src", "eth_type", "vlan_vid", "arp_op", "arp_spa", "arp_tpa",
                "arp_sha", "arp_tha"
            ]
        );
        assert_eq!(k.arp_op, 1);
        assert_eq!(k.arp_spa, 0x0a000001);
        assert_eq!(k.arp_tpa, 0x0a000002);
        assert_eq!(k.arp_sha, SRC_MAC);
        let k = FlowKey::parse(&eth_mpls2_ipv4());
        assert_eq!(
            fields(&k),
            [
                "eth_dst",
                "eth_src",
                "eth_type",
                "vlan_vid",
                "mpls_label",
                "mpls_tc",
                "mpls_bos"
            ]
        );
        assert_eq!(
            (k.mpls_label, k.mpls_tc, k.mpls_bos, k.mpls_ttl),
            (100, 3, 0, 20)
        );
        let k = FlowKey::parse(&eth_pbb());
        assert_eq!(
            fields(&k),
            ["eth_dst", "eth_src", "eth_type", "vlan_vid", "pbb_isid"]
        );
        assert_eq!(k.pbb_isid, 0x0abcde);
    }

    #[test]
    fn equality_is_on_match_fields_only() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let h = |k: &FlowKey| {
            let mut s = DefaultHasher::new();
            k.hash(&mut s);
            s.finish()
        };
        let a = FlowKey::parse(&eth_ipv4_udp());
        // Same flow, another TTL and a longer payload (other l3_end).
        let mut p = eth_ipv4_udp();
        p.extend_from_slice(&[0; 20]);
        crate::ttl::set_nw_ttl(&mut p, 3).unwrap();
        let b = FlowKey::parse(&p);
        assert_ne!((a.l3_end, a.ip_ttl), (b.l3_end, b.ip_ttl));
        assert_eq!(a, b);
        assert_eq!(h(&a), h(&b));
        let mut q = eth_ipv4_udp();
        crate::set_field::set_field(&mut q, &crate::set_field::FieldValue::UdpDst(54)).unwrap();
        let c = FlowKey::parse(&q);
        assert_ne!(a, c);
        let mut d = a;
        d.set_metadata_fields(1, 1, 0, 0);
        assert_ne!(a, d);
    }

    #[test]
    fn key_is_compact() {
        // Fits in four cache lines; a change that grows it should be deliberate.
        let n = std::mem::size_of::<FlowKey>();
        assert!(n <= 256, "{n}");
    }

    #[test]
    fn metadata_fields() {
        let mut k = FlowKey::parse(&eth_arp());
        k.set_metadata_fields(3, 4, 5, 6);
        assert_eq!(k.get(field::IN_PORT), Some(3));
        assert_eq!(k.get(field::IN_PHY_PORT), Some(4));
        assert_eq!(k.get(field::METADATA), Some(5));
        assert_eq!(k.get(field::TUNNEL_ID), Some(6));
    }

    #[test]
    fn every_prefix_of_every_sample() {
        for (name, p) in samples() {
            let full = FlowKey::parse(&p);
            assert_eq!(full.flags & flags::TRUNCATED, 0, "{name}");
            for n in 0..p.len() {
                let k = FlowKey::parse(&p[..n]);
                // A prefix never shows a field the full packet lacks, and
                // what it shows has the same value.
                assert_eq!(k.present & !full.present, 0, "{name} {n}");
                for f in 0..40u8 {
                    if k.has(f) {
                        assert_eq!(k.get(f), full.get(f), "{name} {n} {f}");
                    }
                }
                if k.present != full.present {
                    assert!(k.is_truncated(), "{name} {n}");
                }
            }
        }
    }

    #[test]
    fn malformed_ip() {
        let mut p = eth_ipv4_tcp();
        p[14] = 0x44;
        let k = FlowKey::parse(&p);
        assert_eq!(k.flags, flags::MALFORMED);
        assert!(!k.has(field::IP_PROTO) && k.has(field::ETH_TYPE));
        let mut p = eth_ipv6_tcp();
        p[14] = 0x40;
        assert_eq!(FlowKey::parse(&p).flags, flags::MALFORMED);
    }

    /// The frame of a link-layer shape: `et` at 12, then a tag (`tci`,
    /// `inner`) when `et` is a TPID, then `rest`, cut to `cut` bytes.
    fn l2_frame(et: u16, tci: u16, inner: u16, rest: &[u8], cut: usize) -> Vec<u8> {
        let mut f: Vec<u8> = (1..=12).collect();
        f.extend(et.to_be_bytes());
        if ethertype::is_vlan(et) {
            f.extend(tci.to_be_bytes());
            f.extend(inner.to_be_bytes());
        }
        f.extend_from_slice(rest);
        f.truncate(cut);
        f
    }

    proptest::proptest! {
        /// `L2Fields::parse` gives each of its fields as `parse_into`
        /// does (value and presence), and declines only short frames and
        /// a second VLAN tag.
        #[test]
        fn l2_fields_agree_with_the_full_parse(
            et in proptest::sample::select(vec![0x0800u16, 0x86dd, 0x0806, 0x8100, 0x88a8, 0x8847, 0x8848, 0x88e7, 0x1234]),
            inner in proptest::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x88a8, 0x8847, 0x8848, 0x0000]),
            tci in proptest::prelude::any::<u16>(),
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            cut in 0usize..80,
        ) {
            let frame = l2_frame(et, tci, inner, &rest, cut);
            let k = FlowKey::parse(&frame);
            match L2Fields::parse(&frame) {
                Some(f) => {
                    for fld in (0..64u8).filter(|b| L2_FIELDS & (1 << b) != 0) {
                        let mine = (f.present & (1 << fld) != 0).then(|| u128::from(f.value(fld)));
                        proptest::prop_assert_eq!(k.get(fld), mine, "field {}", fld);
                    }
                }
                None => proptest::prop_assert!(
                    frame.len() < 18 || (ethertype::is_vlan(et) && ethertype::is_vlan(inner))
                ),
            }
            // The one-read form gives what the tag and the two-step read give.
            let two_steps = L2Fields::tag(&frame)
                .map(|tag| L2Fields::type_and_label(&frame, tag.is_some()));
            proptest::prop_assert_eq!(L2Fields::type_and_label_of(&frame), two_steps);
        }
    }

    proptest::proptest! {
        /// `plain_ipv4_dst` answers exactly for the frames whose parsed
        /// key is untagged IPv4 with the addresses present, and gives
        /// the key's destination.
        #[test]
        fn plain_ipv4_dst_agrees_with_the_full_parse(
            et in proptest::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x8847]),
            inner in proptest::sample::select(vec![0x0800u16, 0x86dd]),
            ver_ihl in proptest::sample::select(vec![0x45u8, 0x46, 0x4f, 0x44, 0x40, 0x65, 0x35]),
            total in proptest::sample::select(vec![0u16, 19, 20, 24, 46, 60, 1500]),
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..60),
            cut in 0usize..90,
        ) {
            let mut ip = vec![ver_ihl, 0];
            ip.extend(total.to_be_bytes());
            ip.extend(rest);
            let frame = l2_frame(et, 5, inner, &ip, cut);
            let k = FlowKey::parse(&frame);
            let want = (k.vlan_tags == 0 && k.eth_type == ethertype::IPV4 && k.has(field::IPV4_DST))
                .then_some(k.ipv4_dst);
            proptest::prop_assert_eq!(plain_ipv4_dst(&frame), want);
            if want.is_some() {
                proptest::prop_assert!(k.has(field::IPV4_SRC));
                proptest::prop_assert_eq!(k.l3_offset as usize, PLAIN_IPV4_L3);
            }
        }
    }

    #[test]
    fn l2_fields_of_the_gateway_frames() {
        let tagged = l2_frame(0x8100, 0x6005, 0x0800, &[0x45; 46], 64);
        let f = L2Fields::parse(&tagged).expect("one tag over IPv4");
        assert_eq!((f.vlan_vid, f.vlan_pcp, f.eth_type), (0x1005, 3, 0x0800));
        assert_eq!(f.eth_dst, 0x0102_0304_0506);
        assert_eq!(f.present & (1 << field::MPLS_LABEL), 0);
        let mpls = l2_frame(0x8847, 0, 0, &[0x00, 0x06, 0x41, 0x40], 64);
        let f = L2Fields::parse(&mpls).expect("MPLS");
        assert_eq!(
            (f.vlan_vid, f.eth_type, f.mpls_label, f.mpls_bos),
            (0, 0x8847, 100, 1)
        );
        assert_eq!(f.value(field::MPLS_LABEL), 100);
        // A tag, then too short for the whole label: the label is absent.
        let tagged_mpls = l2_frame(0x8100, 7, 0x8847, &[0, 0x06, 0x41, 0x40], 64);
        assert!(L2Fields::parse(&tagged_mpls).is_some_and(|f| f.mpls_label == 100));
        let f = L2Fields::parse(&tagged_mpls[..21]).expect("21 bytes");
        assert_eq!(f.present & (1 << field::MPLS_LABEL), 0);
        assert_eq!(L2Fields::parse(&tagged[..17]), None);
        let qinq = l2_frame(0x88a8, 5, 0x8100, &[0; 30], 64);
        assert_eq!(L2Fields::parse(&qinq), None, "two tags: the full parse");
    }
}
