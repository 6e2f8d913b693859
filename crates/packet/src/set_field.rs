//! OpenFlow set_field rewrites for every settable field of OpenFlow 1.3
//! (TUNNEL_ID is pipeline metadata, not packet bytes, and is not here; nor
//! are IN_PORT, IN_PHY_PORT, METADATA and IPV6_EXTHDR, which cannot be set).
//!
//! Every rewrite leaves every checksum right:
//! - IPv4 header checksum: RFC 1624 incremental update of the changed word.
//! - TCP/UDP checksum on an IPv4/IPv6 address change (pseudo-header) or a
//!   port change: incremental. A UDP-over-IPv4 checksum of zero means "no
//!   checksum" and stays zero; an updated UDP checksum of zero is written
//!   as 0xffff.
//! - IP_PROTO: the IPv4 header checksum, and the checksum of the transport
//!   header already there (TCP, UDP, ICMPv6), whose pseudo-header holds the
//!   protocol; the header itself is not reinterpreted. (os-ken's switch test
//!   vectors expect exactly this.)
//! - ICMPv4 (type/code) and ICMPv6 (type/code, addresses in the
//!   pseudo-header, ND target and link-layer options): incremental.
//! - SCTP port: CRC32c recomputed in full over the SCTP packet, when the
//!   whole packet is present (not a fragment of a larger datagram, not
//!   truncated); otherwise the CRC cannot be known and is left as it was.
//!
//! The transport checksum is only touched when the transport header was
//! reached by the parser (so not in non-first fragments, whose transport
//! checksum lives in the first fragment anyway).
//!
//! A rewrite whose OpenFlow prerequisites do not hold in the packet (e.g.
//! setting tcp_src on a UDP packet, vlan_pcp on an untagged frame, or
//! ipv6_nd_sll on an NS without that option) returns
//! [`ActionError::MissingHeader`] and leaves the packet untouched.
//! Values wider than their field are masked to the field width
//! (`VlanVid` accepts the OFPVID_PRESENT bit and ignores it).
//!
//! With an IPv6 routing header that still has segments left, the transport
//! pseudo-header holds the final destination from the routing header, not
//! the IPv6 destination: rewriting IPV6_DST then leaves the transport
//! checksum alone (RFC 8200 §8.1).
//!
//! ETH_TYPE rewrites the EtherType after the VLAN tags (no checksum
//! covers it); what follows is then read as the new type.
//!
//! After ETH_TYPE, IP_PROTO or MPLS_BOS is rewritten, a [`FlowKey`] of the old packet
//! no longer describes it: parse again before using it.

use crate::checksum;
use crate::flow_key::{field, FlowKey};
use crate::icmpv6::{nd_option, Icmpv6Packet};
use crate::ipv4::protocol;
use crate::{be16, be32, put16, put32, ActionError, MacAddr};

/// A field value to write. IP addresses are numbers in host order
/// (10.0.0.1 is `0x0a000001`), as in [`FlowKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValue {
    /// ETH_DST.
    EthDst(MacAddr),
    /// ETH_SRC.
    EthSrc(MacAddr),
    /// ETH_TYPE: the EtherType after the VLAN tags (the one ETH_TYPE
    /// matches). The headers behind it are not changed, only how they are
    /// read.
    EthType(u16),
    /// VLAN_VID of the outer tag (low 12 bits used).
    VlanVid(u16),
    /// VLAN_PCP of the outer tag.
    VlanPcp(u8),
    /// IP_DSCP (IPv4 TOS / IPv6 traffic class, upper 6 bits).
    IpDscp(u8),
    /// IP_ECN (lower 2 bits).
    IpEcn(u8),
    /// IP_PROTO (IPv4 protocol / the last IPv6 next-header).
    IpProto(u8),
    /// IPV4_SRC.
    Ipv4Src(u32),
    /// IPV4_DST.
    Ipv4Dst(u32),
    /// TCP_SRC.
    TcpSrc(u16),
    /// TCP_DST.
    TcpDst(u16),
    /// UDP_SRC.
    UdpSrc(u16),
    /// UDP_DST.
    UdpDst(u16),
    /// SCTP_SRC.
    SctpSrc(u16),
    /// SCTP_DST.
    SctpDst(u16),
    /// ICMPV4_TYPE.
    Icmpv4Type(u8),
    /// ICMPV4_CODE.
    Icmpv4Code(u8),
    /// ARP_OP.
    ArpOp(u16),
    /// ARP_SPA.
    ArpSpa(u32),
    /// ARP_TPA.
    ArpTpa(u32),
    /// ARP_SHA.
    ArpSha(MacAddr),
    /// ARP_THA.
    ArpTha(MacAddr),
    /// IPV6_SRC.
    Ipv6Src(u128),
    /// IPV6_DST.
    Ipv6Dst(u128),
    /// IPV6_FLABEL (low 20 bits).
    Ipv6Flabel(u32),
    /// ICMPV6_TYPE.
    Icmpv6Type(u8),
    /// ICMPV6_CODE.
    Icmpv6Code(u8),
    /// IPV6_ND_TARGET.
    Ipv6NdTarget(u128),
    /// IPV6_ND_SLL (the option must exist).
    Ipv6NdSll(MacAddr),
    /// IPV6_ND_TLL (the option must exist).
    Ipv6NdTll(MacAddr),
    /// MPLS_LABEL of the outer label (low 20 bits).
    MplsLabel(u32),
    /// MPLS_TC of the outer label (low 3 bits).
    MplsTc(u8),
    /// MPLS_BOS of the outer label (low bit).
    MplsBos(u8),
    /// PBB_ISID (low 24 bits).
    PbbIsid(u32),
}

impl FieldValue {
    /// The OXM field number this value sets.
    pub fn oxm_field(&self) -> u8 {
        use FieldValue::*;
        match self {
            EthDst(_) => field::ETH_DST,
            EthSrc(_) => field::ETH_SRC,
            EthType(_) => field::ETH_TYPE,
            VlanVid(_) => field::VLAN_VID,
            VlanPcp(_) => field::VLAN_PCP,
            IpDscp(_) => field::IP_DSCP,
            IpEcn(_) => field::IP_ECN,
            IpProto(_) => field::IP_PROTO,
            Ipv4Src(_) => field::IPV4_SRC,
            Ipv4Dst(_) => field::IPV4_DST,
            TcpSrc(_) => field::TCP_SRC,
            TcpDst(_) => field::TCP_DST,
            UdpSrc(_) => field::UDP_SRC,
            UdpDst(_) => field::UDP_DST,
            SctpSrc(_) => field::SCTP_SRC,
            SctpDst(_) => field::SCTP_DST,
            Icmpv4Type(_) => field::ICMPV4_TYPE,
            Icmpv4Code(_) => field::ICMPV4_CODE,
            ArpOp(_) => field::ARP_OP,
            ArpSpa(_) => field::ARP_SPA,
            ArpTpa(_) => field::ARP_TPA,
            ArpSha(_) => field::ARP_SHA,
            ArpTha(_) => field::ARP_THA,
            Ipv6Src(_) => field::IPV6_SRC,
            Ipv6Dst(_) => field::IPV6_DST,
            Ipv6Flabel(_) => field::IPV6_FLABEL,
            Icmpv6Type(_) => field::ICMPV6_TYPE,
            Icmpv6Code(_) => field::ICMPV6_CODE,
            Ipv6NdTarget(_) => field::IPV6_ND_TARGET,
            Ipv6NdSll(_) => field::IPV6_ND_SLL,
            Ipv6NdTll(_) => field::IPV6_ND_TLL,
            MplsLabel(_) => field::MPLS_LABEL,
            MplsTc(_) => field::MPLS_TC,
            MplsBos(_) => field::MPLS_BOS,
            PbbIsid(_) => field::PBB_ISID,
        }
    }
}

/// Parses `pkt` and applies one set-field.
pub fn set_field(pkt: &mut [u8], v: &FieldValue) -> Result<(), ActionError> {
    let k = FlowKey::parse(pkt);
    set_field_with_key(pkt, &k, v)
}

/// Replaces a 16-bit word at `at` and updates the checksum at `csum`
/// incrementally. `at` must be 16-bit aligned relative to the checksummed
/// region.
fn rewrite16(pkt: &mut [u8], at: usize, new: u16, csum: Option<usize>) {
    let old = be16(pkt, at);
    put16(pkt, at, new);
    if let Some(c) = csum {
        let v = checksum::update16(be16(pkt, c), old, new);
        put16(pkt, c, v);
    }
}

/// Where the transport checksum is, and whether it is a UDP one (zero
/// rule), for a pseudo-header-covered rewrite (addresses, ports).
fn l4_csum(k: &FlowKey, pkt: &[u8], v6: bool) -> Option<(usize, bool)> {
    if k.l4_offset == 0 {
        return None;
    }
    let l4 = k.l4_offset as usize;
    let (off, udp) = match k.ip_proto {
        protocol::TCP if k.has(field::TCP_SRC) => (16, false),
        protocol::UDP if k.has(field::UDP_SRC) => (6, true),
        protocol::ICMPV6 if v6 && k.has(field::ICMPV6_TYPE) => (2, false),
        _ => return None,
    };
    let at = l4 + off;
    if udp && be16(pkt, at) == 0 {
        // UDP without checksum (legal over IPv4; leave IPv6's alone too).
        return None;
    }
    Some((at, udp))
}

/// Applies an RFC 1624 update for `old` -> `new` to the checksum at `at`.
fn fix_l4(pkt: &mut [u8], at: (usize, bool), old: &[u8], new: &[u8]) {
    let (c, udp) = at;
    let mut v = checksum::update_bytes(be16(pkt, c), old, new);
    if udp && v == 0 {
        v = 0xffff;
    }
    put16(pkt, c, v);
}

fn fix_sctp(pkt: &mut [u8], k: &FlowKey) {
    use crate::flow_key::flags;
    let partial = flags::TRUNCATED | flags::MORE_FRAGMENTS | flags::LATER_FRAGMENT;
    if k.flags & partial != 0 {
        return;
    }
    let (l4, end) = (k.l4_offset as usize, k.l3_end as usize);
    if let Ok(mut s) = crate::sctp::SctpPacket::new_checked(&mut pkt[l4..end]) {
        s.fill_checksum();
    }
}

/// Applies one set-field using an already parsed key of this very packet
/// (parsed since its last push, pop or IP_PROTO/MPLS_BOS rewrite). A key of
/// a packet of another length is refused with [`ActionError::Truncated`];
/// one of another packet of the same length cannot make this panic (every
/// offset it holds is within that length) but rewrites the wrong bytes.
pub fn set_field_with_key(pkt: &mut [u8], k: &FlowKey, v: &FieldValue) -> Result<(), ActionError> {
    use FieldValue::*;
    if pkt.len() != k.packet_len as usize {
        return Err(ActionError::Truncated);
    }
    let f = v.oxm_field();
    // VLAN_VID is present on untagged frames too (as OFPVID_NONE), but can
    // only be rewritten in a tag.
    let prereq = if f == field::VLAN_VID {
        k.has(field::VLAN_PCP)
    } else {
        k.has(f)
    };
    if !prereq {
        return Err(ActionError::MissingHeader);
    }
    let l3 = k.l3_offset as usize;
    let l4 = k.l4_offset as usize;
    let v6 = k.has(field::IPV6_SRC);
    match *v {
        EthDst(m) => pkt[0..6].copy_from_slice(&m),
        EthSrc(m) => pkt[6..12].copy_from_slice(&m),
        EthType(t) => put16(pkt, k.ethertype_offset as usize, t),
        VlanVid(vid) => {
            let t = (be16(pkt, 14) & 0xf000) | (vid & 0x0fff);
            put16(pkt, 14, t);
        }
        VlanPcp(p) => {
            let t = (be16(pkt, 14) & 0x1fff) | (u16::from(p & 7) << 13);
            put16(pkt, 14, t);
        }
        IpDscp(_) | IpEcn(_) => {
            let (dscp, ecn) = match *v {
                IpDscp(d) => (d & 0x3f, k.ip_ecn),
                IpEcn(e) => (k.ip_dscp, e & 3),
                _ => unreachable!(),
            };
            let tos = (dscp << 2) | ecn;
            if v6 {
                let w = (be32(pkt, l3) & 0xf00f_ffff) | (u32::from(tos) << 20);
                put32(pkt, l3, w);
            } else {
                let w = (be16(pkt, l3) & 0xff00) | u16::from(tos);
                rewrite16(pkt, l3, w, Some(l3 + 10));
            }
        }
        IpProto(p) => {
            let at = k.ip_proto_offset as usize;
            let old = k.ip_proto;
            if v6 {
                pkt[at] = p;
            } else {
                let w = (be16(pkt, l3 + 8) & 0xff00) | u16::from(p);
                rewrite16(pkt, l3 + 8, w, Some(l3 + 10));
            }
            // The transport header stays where it is; its checksum covers
            // the protocol through the pseudo-header.
            if let Some(cs) = l4_csum(k, pkt, v6) {
                fix_l4(pkt, cs, &[0, old], &[0, p]);
            }
        }
        Ipv4Src(a) | Ipv4Dst(a) => {
            let at = if matches!(v, Ipv4Src(_)) {
                l3 + 12
            } else {
                l3 + 16
            };
            let old = be32(pkt, at).to_be_bytes();
            let new = a.to_be_bytes();
            pkt[at..at + 4].copy_from_slice(&new);
            let c = checksum::update_bytes(be16(pkt, l3 + 10), &old, &new);
            put16(pkt, l3 + 10, c);
            if let Some(cs) = l4_csum(k, pkt, false) {
                fix_l4(pkt, cs, &old, &new);
            }
        }
        TcpSrc(p) | TcpDst(p) | UdpSrc(p) | UdpDst(p) => {
            let at = l4
                + if matches!(v, TcpSrc(_) | UdpSrc(_)) {
                    0
                } else {
                    2
                };
            let old = be16(pkt, at).to_be_bytes();
            put16(pkt, at, p);
            if let Some(cs) = l4_csum(k, pkt, v6) {
                fix_l4(pkt, cs, &old, &p.to_be_bytes());
            }
        }
        SctpSrc(p) | SctpDst(p) => {
            let at = l4 + if matches!(v, SctpSrc(_)) { 0 } else { 2 };
            put16(pkt, at, p);
            fix_sctp(pkt, k);
        }
        Icmpv4Type(t) | Icmpv6Type(t) => rewrite16(
            pkt,
            l4,
            (u16::from(t) << 8) | u16::from(pkt[l4 + 1]),
            Some(l4 + 2),
        ),
        Icmpv4Code(c) | Icmpv6Code(c) => rewrite16(
            pkt,
            l4,
            (u16::from(pkt[l4]) << 8) | u16::from(c),
            Some(l4 + 2),
        ),
        ArpOp(o) => put16(pkt, l3 + 6, o),
        ArpSha(m) => pkt[l3 + 8..l3 + 14].copy_from_slice(&m),
        ArpSpa(a) => put32(pkt, l3 + 14, a),
        ArpTha(m) => pkt[l3 + 18..l3 + 24].copy_from_slice(&m),
        ArpTpa(a) => put32(pkt, l3 + 24, a),
        Ipv6Src(a) | Ipv6Dst(a) => {
            let at = if matches!(v, Ipv6Src(_)) {
                l3 + 8
            } else {
                l3 + 24
            };
            let mut old = [0u8; 16];
            old.copy_from_slice(&pkt[at..at + 16]);
            let new = a.to_be_bytes();
            pkt[at..at + 16].copy_from_slice(&new);
            let in_pseudo = at == l3 + 8 || k.ipv6_final_dst_offset == 0;
            if let Some(cs) = l4_csum(k, pkt, true).filter(|_| in_pseudo) {
                fix_l4(pkt, cs, &old, &new);
            }
        }
        Ipv6Flabel(fl) => {
            let w = (be32(pkt, l3) & 0xfff0_0000) | (fl & 0xf_ffff);
            put32(pkt, l3, w);
        }
        Ipv6NdTarget(a) => {
            let at = l4 + crate::icmpv6::ND_TARGET_OFFSET;
            let mut old = [0u8; 16];
            old.copy_from_slice(&pkt[at..at + 16]);
            let new = a.to_be_bytes();
            pkt[at..at + 16].copy_from_slice(&new);
            fix_l4(pkt, (l4 + 2, false), &old, &new);
        }
        Ipv6NdSll(m) | Ipv6NdTll(m) => {
            let opt = if matches!(v, Ipv6NdSll(_)) {
                nd_option::SOURCE_LL_ADDR
            } else {
                nd_option::TARGET_LL_ADDR
            };
            let end = k.l3_end as usize;
            let o = Icmpv6Packet::new_checked(&pkt[l4..end])
                .ok()
                .and_then(|p| p.nd_lladdr_offset(opt))
                .filter(|o| l4 + o + 6 <= end)
                .ok_or(ActionError::MissingHeader)?;
            let at = l4 + o;
            let mut old = [0u8; 6];
            old.copy_from_slice(&pkt[at..at + 6]);
            pkt[at..at + 6].copy_from_slice(&m);
            fix_l4(pkt, (l4 + 2, false), &old, &m);
        }
        MplsLabel(_) | MplsTc(_) | MplsBos(_) => {
            let mut lse = be32(pkt, l3);
            match *v {
                MplsLabel(x) => lse = (lse & 0xfff) | ((x & 0xf_ffff) << 12),
                MplsTc(x) => lse = (lse & !(7 << 9)) | (u32::from(x & 7) << 9),
                MplsBos(x) => lse = (lse & !0x100) | (u32::from(x & 1) << 8),
                _ => unreachable!(),
            }
            put32(pkt, l3, lse);
        }
        PbbIsid(i) => {
            let t = (be32(pkt, l3) & 0xff00_0000) | (i & 0x00ff_ffff);
            put32(pkt, l3, t);
        }
    }
    Ok(())
}

impl FlowKey {
    /// Updates a key after a successful set-field of `v` on its frame,
    /// without parsing again, for the fields whose rewrite moves nothing
    /// and touches no other field (Ethernet addresses); returns false,
    /// changing nothing, for the others. Equal to parsing the rewritten
    /// frame (property-tested).
    pub fn after_set_field(&mut self, v: &FieldValue) -> bool {
        match v {
            FieldValue::EthDst(m) => self.eth_dst = *m,
            FieldValue::EthSrc(m) => self.eth_src = *m,
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixup::verify_checksums;
    use crate::testutil::*;
    use FieldValue::*;

    /// Applies `v` to `p`, checks the field reads back as `want` (by OXM
    /// number), that every checksum verifies from scratch, and that no other
    /// field changed.
    fn check(p: &[u8], v: FieldValue, want: u128) {
        let mut q = p.to_vec();
        let before = FlowKey::parse(p);
        set_field(&mut q, &v).unwrap_or_else(|e| panic!("{v:?}: {e}"));
        let after = FlowKey::parse(&q);
        let f = v.oxm_field();
        assert_eq!(after.get(f), Some(want), "{v:?}");
        assert_eq!(verify_checksums(&q), Ok(()), "{v:?}");
        assert_eq!(q.len(), p.len());
        for g in 0..40u8 {
            if g != f && f != field::IP_PROTO && f != field::MPLS_BOS {
                assert_eq!(after.get(g), before.get(g), "{v:?} changed field {g}");
            }
        }
    }

    #[test]
    fn ethernet_and_vlan() {
        let p = with_tags(&eth_ipv4_tcp(), &[(0x8100, 0xa064), (0x8100, 0x0010)]);
        check(&p, EthDst([9; 6]), 0x0909_0909_0909);
        check(&p, EthSrc([0xfe; 6]), 0xfefe_fefe_fefe);
        check(&p, VlanVid(0x1abc), 0x1abc);
        check(&p, VlanVid(0x0fff), 0x1fff);
        check(&p, VlanPcp(7), 7);
        check(&p, VlanPcp(0), 0);
        let mut q = eth_ipv4_tcp();
        assert_eq!(
            set_field(&mut q, &VlanVid(5)),
            Err(ActionError::MissingHeader)
        );
        assert_eq!(
            set_field(&mut q, &VlanPcp(5)),
            Err(ActionError::MissingHeader)
        );
        assert_eq!(q, eth_ipv4_tcp());
    }

    /// ETH_TYPE is written where the match reads it: after the VLAN
    /// tags; the rest of the frame is left as it was (os-ken's switch test
    /// `set_field:0x8848->eth_type` on IPv4, IPv6 and ARP frames).
    #[test]
    fn eth_type() {
        let p = eth_ipv4_tcp();
        let mut q = p.clone();
        set_field(&mut q, &EthType(0x8848)).unwrap();
        assert_eq!(be16(&q, 12), 0x8848);
        assert_eq!(q[..12], p[..12]);
        assert_eq!(q[14..], p[14..]);
        assert_eq!(FlowKey::parse(&q).get(field::ETH_TYPE), Some(0x8848));
        let t = with_tags(&p, &[(0x8100, 0x0064)]);
        let mut q = t.clone();
        set_field(&mut q, &EthType(0x86dd)).unwrap();
        assert_eq!(be16(&q, 12), 0x8100, "the tag's TPID stays");
        assert_eq!(be16(&q, 16), 0x86dd);
        assert_eq!(q[18..], t[18..]);
        let mut short = p[..10].to_vec();
        assert_eq!(
            set_field(&mut short, &EthType(0x8848)),
            Err(ActionError::MissingHeader)
        );
    }

    #[test]
    fn ip_common_fields() {
        for p in [
            eth_ipv4_tcp(),
            eth_ipv4_options_udp(),
            eth_ipv6_tcp(),
            eth_ipv6_udp(),
        ] {
            for d in [0u8, 1, 46, 63] {
                check(&p, IpDscp(d), d.into());
            }
            for e in 0u8..4 {
                check(&p, IpEcn(e), e.into());
            }
        }
        let mut p = eth_ipv4_tcp();
        set_field(&mut p, &IpProto(17)).unwrap();
        let k = FlowKey::parse(&p);
        assert_eq!(k.ip_proto, 17);
        assert!(crate::ipv4::Ipv4Packet::new_checked(&p[14..])
            .unwrap()
            .verify_checksum());
        // The TCP checksum now sums right with protocol 17 in the pseudo-header.
        let ph =
            checksum::pseudo_header_v4([192, 168, 0, 1], [10, 0, 0, 2], 17, (p.len() - 34) as u32);
        assert!(checksum::verify(&p[34..], ph));
        let mut q = eth_ipv6_echo();
        set_field(&mut q, &IpProto(6)).unwrap();
        let ph = checksum::pseudo_header_v6(
            &V6_SRC.to_be_bytes(),
            &V6_DST.to_be_bytes(),
            6,
            (q.len() - 54) as u32,
        );
        assert!(checksum::verify(&q[54..], ph));
        let mut p = eth_ipv6_exthdr_udp();
        set_field(&mut p, &IpProto(6)).unwrap();
        let k = FlowKey::parse(&p);
        assert_eq!(k.ip_proto, 6);
        assert_eq!(
            k.ipv6_exthdr,
            FlowKey::parse(&eth_ipv6_exthdr_udp()).ipv6_exthdr
        );
    }

    #[test]
    fn ipv4_addresses_fix_l4() {
        for p in [
            eth_ipv4_tcp(),
            eth_ipv4_udp(),
            eth_ipv4_udp_nocsum(),
            eth_ipv4_icmp(),
            eth_ipv4_sctp(),
            eth_ipv4_options_udp(),
            with_tags(&eth_ipv4_tcp(), &[(0x88a8, 1)]),
        ] {
            for a in [0u32, 0xffff_ffff, 0x0a00_0009, 0xc0a8_0101] {
                check(&p, Ipv4Src(a), a.into());
                check(&p, Ipv4Dst(a), a.into());
            }
        }
        // The zero UDP checksum stays zero.
        let mut p = eth_ipv4_udp_nocsum();
        set_field(&mut p, &Ipv4Src(0x01020304)).unwrap();
        assert_eq!(&p[40..42], &[0, 0]);
    }

    #[test]
    fn udp_checksum_never_becomes_zero() {
        // Search for a source port that makes the updated checksum 0xffff
        // (a computed zero) and check it is written as 0xffff, not 0.
        let p = eth_ipv4_udp();
        let mut hit = false;
        for port in 0..=u16::MAX {
            let mut q = p.clone();
            set_field(&mut q, &UdpSrc(port)).unwrap();
            assert_ne!(&q[40..42], &[0, 0]);
            if q[40..42] == [0xff, 0xff] {
                assert_eq!(verify_checksums(&q), Ok(()));
                hit = true;
            }
        }
        assert!(hit);
    }

    #[test]
    fn transport_ports() {
        for p in [eth_ipv4_tcp(), eth_ipv6_tcp()] {
            for x in [0u16, 1, 80, 65535] {
                check(&p, TcpSrc(x), x.into());
                check(&p, TcpDst(x), x.into());
            }
            let mut q = p.clone();
            assert_eq!(
                set_field(&mut q, &UdpSrc(1)),
                Err(ActionError::MissingHeader)
            );
        }
        for p in [
            eth_ipv4_udp(),
            eth_ipv6_udp(),
            eth_ipv6_exthdr_udp(),
            eth_ipv4_udp_nocsum(),
        ] {
            for x in [0u16, 53, 65535] {
                check(&p, UdpSrc(x), x.into());
                check(&p, UdpDst(x), x.into());
            }
        }
        for p in [eth_ipv4_sctp(), eth_ipv6_sctp()] {
            for x in [0u16, 9, 65535] {
                check(&p, SctpSrc(x), x.into());
                check(&p, SctpDst(x), x.into());
            }
        }
        // Later fragment: no transport header, no port rewrite.
        let mut p = eth_ipv4_tcp();
        set_ipv4_frag(&mut p, false, 64);
        assert_eq!(
            set_field(&mut p, &TcpSrc(1)),
            Err(ActionError::MissingHeader)
        );
    }

    #[test]
    fn icmp() {
        let p = eth_ipv4_icmp();
        for t in [0u8, 3, 8, 255] {
            check(&p, Icmpv4Type(t), t.into());
            check(&p, Icmpv4Code(t), t.into());
        }
        let p = eth_ipv6_echo();
        for t in [1u8, 129, 255] {
            check(&p, Icmpv6Type(t), t.into());
            check(&p, Icmpv6Code(t), t.into());
        }
        let mut q = eth_ipv6_echo();
        assert_eq!(
            set_field(&mut q, &Icmpv4Type(1)),
            Err(ActionError::MissingHeader)
        );
    }

    #[test]
    fn arp() {
        let p = with_tags(&eth_arp(), &[(0x8100, 3)]);
        check(&p, ArpOp(2), 2);
        check(&p, ArpSpa(0x0102_0304), 0x0102_0304);
        check(&p, ArpTpa(0x0506_0708), 0x0506_0708);
        check(&p, ArpSha([7; 6]), 0x0707_0707_0707);
        check(&p, ArpTha([8; 6]), 0x0808_0808_0808);
    }

    #[test]
    fn ipv6_fields() {
        for p in [
            eth_ipv6_tcp(),
            eth_ipv6_udp(),
            eth_ipv6_ns(),
            eth_ipv6_echo(),
            eth_ipv6_sctp(),
            eth_ipv6_exthdr_udp(),
            eth_ipv6_routing_udp(),
        ] {
            for a in [0u128, u128::MAX, 0xfe80 << 112 | 5] {
                check(&p, Ipv6Src(a), a);
                check(&p, Ipv6Dst(a), a);
            }
            check(&p, Ipv6Flabel(0xfffff), 0xfffff);
            check(&p, Ipv6Flabel(0x123456), 0x23456);
        }
    }

    #[test]
    fn neighbor_discovery() {
        let ns = eth_ipv6_ns();
        check(
            &ns,
            Ipv6NdTarget(0x2001 << 112 | 0xabcd),
            0x2001 << 112 | 0xabcd,
        );
        check(&ns, Ipv6NdSll([0x42; 6]), 0x4242_4242_4242);
        let mut q = ns.clone();
        assert_eq!(
            set_field(&mut q, &Ipv6NdTll([1; 6])),
            Err(ActionError::MissingHeader)
        );
        let na = eth_ipv6_na();
        check(&na, Ipv6NdTarget(7), 7);
        check(&na, Ipv6NdTll([0x24; 6]), 0x2424_2424_2424);
        // NS without the SLL option: the field reads as zero but cannot be set.
        let mut bare = ns[..ns.len() - 8].to_vec();
        let pl = u16::from_be_bytes([bare[18], bare[19]]) - 8;
        bare[18..20].copy_from_slice(&pl.to_be_bytes());
        crate::fixup::fill_checksums(&mut bare);
        let k = FlowKey::parse(&bare);
        assert_eq!(k.get(field::IPV6_ND_SLL), Some(0));
        assert_eq!(
            set_field(&mut bare, &Ipv6NdSll([1; 6])),
            Err(ActionError::MissingHeader)
        );
    }

    #[test]
    fn mpls_and_pbb() {
        let m = eth_mpls2_ipv4();
        check(&m, MplsLabel(0xfffff), 0xfffff);
        check(&m, MplsLabel(0), 0);
        check(&m, MplsTc(7), 7);
        check(&m, MplsBos(1), 1);
        let mut q = m.clone();
        set_field(&mut q, &MplsLabel(0x123456)).unwrap();
        let k = FlowKey::parse(&q);
        assert_eq!(
            (k.mpls_label, k.mpls_tc, k.mpls_bos, k.mpls_ttl),
            (0x23456, 3, 0, 20)
        );
        let p = eth_pbb();
        check(&p, PbbIsid(0xffffff), 0xffffff);
        check(&p, PbbIsid(1), 1);
        let mut q = p.clone();
        set_field(&mut q, &PbbIsid(0x42)).unwrap();
        assert_eq!(q[14] & 0xf0, 0x60); // PCP and flags kept
    }

    #[test]
    fn stale_keys_never_panic() {
        // A key from one packet used on another: refused when the length
        // differs, harmless (no panic) when it is the same.
        let all: Vec<Vec<u8>> = samples().into_iter().map(|(_, p)| p).collect();
        for a in &all {
            let k = FlowKey::parse(a);
            for b in &all {
                for v in [
                    TcpSrc(1),
                    Ipv6NdSll([1; 6]),
                    MplsTc(1),
                    Ipv4Dst(1),
                    PbbIsid(1),
                ] {
                    let mut q = b.clone();
                    let r = set_field_with_key(&mut q, &k, &v);
                    if a.len() != b.len() {
                        assert_eq!(r, Err(ActionError::Truncated));
                    }
                }
            }
        }
    }

    #[test]
    fn truncated_prefixes_never_panic() {
        let values = [
            EthDst([1; 6]),
            VlanVid(3),
            IpDscp(3),
            IpProto(3),
            Ipv4Src(3),
            Ipv4Dst(3),
            TcpSrc(3),
            UdpDst(3),
            SctpSrc(3),
            Icmpv4Type(3),
            ArpTha([3; 6]),
            Ipv6Dst(3),
            Ipv6Flabel(3),
            Icmpv6Code(3),
            Ipv6NdTarget(3),
            Ipv6NdSll([3; 6]),
            Ipv6NdTll([3; 6]),
            MplsTc(3),
            PbbIsid(3),
        ];
        for (name, p) in samples() {
            for n in 0..=p.len() {
                for v in &values {
                    let mut q = p[..n].to_vec();
                    if set_field(&mut q, v).is_err() {
                        assert_eq!(q, &p[..n], "{name} {n} {v:?}");
                    }
                }
            }
        }
    }
}
