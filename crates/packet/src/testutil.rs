//! Test helpers: hand-built sample packets of every kind the crate knows,
//! with every checksum computed from scratch.

use crate::fixup::fill_checksums;
use crate::MacAddr;

pub const DST_MAC: MacAddr = [1, 2, 3, 4, 5, 6];
pub const SRC_MAC: MacAddr = [0xa, 0xb, 0xc, 0xd, 0xe, 0xf];
pub const V6_SRC: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
pub const V6_DST: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;
pub const V6_TARGET: u128 = 0xfe80_0000_0000_0000_0000_0000_0000_0077;

pub fn eth(et: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&DST_MAC);
    v.extend_from_slice(&SRC_MAC);
    v.extend_from_slice(&et.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

pub fn ipv4(tos: u8, ttl: u8, proto: u8, src: u32, dst: u32, opts: &[u8], l4: &[u8]) -> Vec<u8> {
    let hl = 20 + opts.len();
    let mut v = vec![0x40 | (hl / 4) as u8, tos];
    v.extend_from_slice(&((hl + l4.len()) as u16).to_be_bytes());
    v.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, ttl, proto, 0, 0]);
    v.extend_from_slice(&src.to_be_bytes());
    v.extend_from_slice(&dst.to_be_bytes());
    v.extend_from_slice(opts);
    v.extend_from_slice(l4);
    v
}

#[allow(clippy::too_many_arguments)]
pub fn ipv6(
    tc: u8,
    fl: u32,
    nh: u8,
    hlim: u8,
    src: u128,
    dst: u128,
    ext: &[u8],
    l4: &[u8],
) -> Vec<u8> {
    let w0: u32 = (6 << 28) | (u32::from(tc) << 20) | fl;
    let mut v = w0.to_be_bytes().to_vec();
    v.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
    v.push(nh);
    v.push(hlim);
    v.extend_from_slice(&src.to_be_bytes());
    v.extend_from_slice(&dst.to_be_bytes());
    v.extend_from_slice(ext);
    v.extend_from_slice(l4);
    v
}

pub fn tcp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sp.to_be_bytes());
    v.extend_from_slice(&dp.to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0x50, 0x12, 0x20, 0x00, 0, 0, 0, 0]);
    v.extend_from_slice(payload);
    v
}

pub fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sp.to_be_bytes());
    v.extend_from_slice(&dp.to_be_bytes());
    v.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    v.extend_from_slice(&[0x11, 0x11]); // non-zero placeholder: filled later
    v.extend_from_slice(payload);
    v
}

pub fn sctp(sp: u16, dp: u16) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sp.to_be_bytes());
    v.extend_from_slice(&dp.to_be_bytes());
    v.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]);
    // DATA chunk: type 0, flags 3, length 20, TSN, stream, seq, PPID, 4 bytes
    v.extend_from_slice(&[
        0, 3, 0, 20, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, b'd', b'a', b't', b'a',
    ]);
    v
}

fn finish(mut v: Vec<u8>) -> Vec<u8> {
    fill_checksums(&mut v);
    v
}

const PAYLOAD: &[u8] = b"hello, fulmar!";

pub fn eth_ipv4_tcp() -> Vec<u8> {
    let l4 = tcp(1234, 80, PAYLOAD);
    finish(eth(
        0x0800,
        &ipv4((10 << 2) | 1, 64, 6, 0xc0a8_0001, 0x0a00_0002, &[], &l4),
    ))
}

pub fn eth_ipv4_udp() -> Vec<u8> {
    let l4 = udp(5353, 53, PAYLOAD);
    finish(eth(
        0x0800,
        &ipv4(0, 64, 17, 0x0a00_0001, 0x0a00_0002, &[], &l4),
    ))
}

pub fn eth_ipv4_udp_nocsum() -> Vec<u8> {
    let mut v = eth_ipv4_udp();
    v[14 + 20 + 6] = 0;
    v[14 + 20 + 7] = 0;
    v
}

pub fn eth_ipv4_options_udp() -> Vec<u8> {
    let l4 = udp(7, 9, PAYLOAD);
    finish(eth(
        0x0800,
        &ipv4(0, 2, 17, 0x0a00_0001, 0x0a00_0002, &[0x94, 4, 0, 0], &l4),
    ))
}

pub fn eth_ipv4_icmp() -> Vec<u8> {
    let mut l4 = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    l4.extend_from_slice(PAYLOAD);
    finish(eth(
        0x0800,
        &ipv4(0, 64, 1, 0x0a00_0001, 0x0a00_0002, &[], &l4),
    ))
}

pub fn eth_ipv4_sctp() -> Vec<u8> {
    finish(eth(
        0x0800,
        &ipv4(0, 64, 132, 0x0a00_0001, 0x0a00_0002, &[], &sctp(5000, 6000)),
    ))
}

pub fn eth_ipv6_tcp() -> Vec<u8> {
    let l4 = tcp(443, 50000, PAYLOAD);
    finish(eth(
        0x86dd,
        &ipv6(0xb8, 0xbeef, 6, 64, V6_SRC, V6_DST, &[], &l4),
    ))
}

pub fn eth_ipv6_udp() -> Vec<u8> {
    let l4 = udp(546, 547, PAYLOAD);
    finish(eth(0x86dd, &ipv6(0, 0, 17, 255, V6_SRC, V6_DST, &[], &l4)))
}

pub fn eth_ipv6_sctp() -> Vec<u8> {
    finish(eth(
        0x86dd,
        &ipv6(0, 1, 132, 64, V6_SRC, V6_DST, &[], &sctp(1, 2)),
    ))
}

pub fn eth_ipv6_ns() -> Vec<u8> {
    let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&V6_TARGET.to_be_bytes());
    m.extend_from_slice(&[1, 1]);
    m.extend_from_slice(&SRC_MAC);
    finish(eth(0x86dd, &ipv6(0, 0, 58, 255, V6_SRC, V6_DST, &[], &m)))
}

pub fn eth_ipv6_na() -> Vec<u8> {
    let mut m = vec![136, 0, 0, 0, 0x60, 0, 0, 0];
    m.extend_from_slice(&V6_TARGET.to_be_bytes());
    m.extend_from_slice(&[2, 1]);
    m.extend_from_slice(&[0x66; 6]);
    finish(eth(0x86dd, &ipv6(0, 0, 58, 255, V6_SRC, V6_DST, &[], &m)))
}

pub fn eth_ipv6_echo() -> Vec<u8> {
    let mut m = vec![128, 0, 0, 0, 0, 1, 0, 1];
    m.extend_from_slice(PAYLOAD);
    finish(eth(0x86dd, &ipv6(0, 0, 58, 64, V6_SRC, V6_DST, &[], &m)))
}

/// hop-by-hop -> dest options -> routing -> atomic fragment -> UDP.
pub fn eth_ipv6_exthdr_udp() -> Vec<u8> {
    let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(&[43, 0, 1, 4, 0, 0, 0, 0]);
    ext.extend_from_slice(&[44, 0, 0, 0, 0, 0, 0, 0]);
    ext.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 7]);
    let l4 = udp(1000, 2000, PAYLOAD);
    finish(eth(0x86dd, &ipv6(0, 0, 0, 64, V6_SRC, V6_DST, &ext, &l4)))
}

/// Routing header type 0 with one segment left (final destination
/// 2001:db8::99) -> UDP: the pseudo-header uses the final destination.
pub fn eth_ipv6_routing_udp() -> Vec<u8> {
    let mut ext = vec![17, 2, 0, 1, 0, 0, 0, 0];
    ext.extend_from_slice(&0x2001_0db8_0000_0000_0000_0000_0000_0099u128.to_be_bytes());
    let l4 = udp(1000, 2000, PAYLOAD);
    finish(eth(0x86dd, &ipv6(0, 0, 43, 64, V6_SRC, V6_DST, &ext, &l4)))
}

pub fn arp_body(op: u16) -> Vec<u8> {
    let mut v = vec![0, 1, 8, 0, 6, 4];
    v.extend_from_slice(&op.to_be_bytes());
    v.extend_from_slice(&SRC_MAC);
    v.extend_from_slice(&[10, 0, 0, 1]);
    v.extend_from_slice(&[0; 6]);
    v.extend_from_slice(&[10, 0, 0, 2]);
    v
}

pub fn eth_arp() -> Vec<u8> {
    eth(0x0806, &arp_body(1))
}

/// `labels` (label stack entries, outermost first) in front of what follows
/// the Ethernet header of `ip`.
fn eth_mpls_over(labels: &[u32], ip: &[u8]) -> Vec<u8> {
    let mut v: Vec<u8> = labels.iter().flat_map(|l| l.to_be_bytes()).collect();
    v.extend_from_slice(&ip[14..]);
    eth(0x8847, &v)
}

/// Two labels (100/tc 3/ttl 20, then 200/bos/ttl 30) over IPv4/UDP.
pub fn eth_mpls2_ipv4() -> Vec<u8> {
    let labels = [(100u32 << 12) | (3 << 9) | 20, (200u32 << 12) | 0x100 | 30];
    eth_mpls_over(&labels, &eth_ipv4_udp())
}

/// One bottom-of-stack label (ttl 9) over IPv4/UDP.
pub fn eth_mpls1_ipv4() -> Vec<u8> {
    eth_mpls_over(&[(16u32 << 12) | 0x100 | 9], &eth_ipv4_udp())
}

/// One bottom-of-stack label (ttl 7) over IPv6/UDP.
pub fn eth_mpls1_ipv6() -> Vec<u8> {
    eth_mpls_over(&[(17u32 << 12) | 0x100 | 7], &eth_ipv6_udp())
}

/// B-DA/B-SA, I-TAG (pcp 3, isid 0x0abcde), C-DA/C-SA, IPv4/UDP.
pub fn eth_pbb() -> Vec<u8> {
    let inner = eth_ipv4_udp();
    let mut v = vec![0x60, 0x0a, 0xbc, 0xde];
    v.extend_from_slice(&[0xc1; 6]);
    v.extend_from_slice(&[0xc2; 6]);
    v.extend_from_slice(&inner[12..]);
    let mut f = eth(0x88e7, &v);
    f[..6].copy_from_slice(&[0xb1; 6]);
    f[6..12].copy_from_slice(&[0xb2; 6]);
    f
}

/// Inserts VLAN tags (outermost first) after the source MAC of `frame`.
pub fn with_tags(frame: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    let mut v = frame[..12].to_vec();
    for (tpid, tci) in tags {
        v.extend_from_slice(&tpid.to_be_bytes());
        v.extend_from_slice(&tci.to_be_bytes());
    }
    v.extend_from_slice(&frame[12..]);
    v
}

/// Sets MF and the fragment offset of an untagged IPv4 frame, fixing the
/// header checksum.
pub fn set_ipv4_frag(p: &mut [u8], mf: bool, offset: u16) {
    let v = (if mf { 0x2000 } else { 0 }) | (offset >> 3);
    p[20..22].copy_from_slice(&v.to_be_bytes());
    fill_checksums(p);
}

/// Every sample, by name.
pub fn samples() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("ipv4_tcp", eth_ipv4_tcp()),
        ("ipv4_udp", eth_ipv4_udp()),
        ("ipv4_udp_nocsum", eth_ipv4_udp_nocsum()),
        ("ipv4_options_udp", eth_ipv4_options_udp()),
        ("ipv4_icmp", eth_ipv4_icmp()),
        ("ipv4_sctp", eth_ipv4_sctp()),
        ("ipv6_tcp", eth_ipv6_tcp()),
        ("ipv6_udp", eth_ipv6_udp()),
        ("ipv6_sctp", eth_ipv6_sctp()),
        ("ipv6_ns", eth_ipv6_ns()),
        ("ipv6_na", eth_ipv6_na()),
        ("ipv6_echo", eth_ipv6_echo()),
        ("ipv6_exthdr_udp", eth_ipv6_exthdr_udp()),
        ("ipv6_routing_udp", eth_ipv6_routing_udp()),
        ("arp", eth_arp()),
        ("mpls2_ipv4", eth_mpls2_ipv4()),
        ("mpls1_ipv4", eth_mpls1_ipv4()),
        ("mpls1_ipv6", eth_mpls1_ipv6()),
        ("pbb", eth_pbb()),
        (
            "vlan_ipv4_tcp",
            with_tags(&eth_ipv4_tcp(), &[(0x8100, 0x6064)]),
        ),
        (
            "qinq_ipv6_udp",
            with_tags(&eth_ipv6_udp(), &[(0x88a8, 0x0010), (0x8100, 0xe020)]),
        ),
        ("vlan_arp", with_tags(&eth_arp(), &[(0x8100, 0x0005)])),
        (
            "vlan_mpls",
            with_tags(&eth_mpls1_ipv4(), &[(0x8100, 0x2007)]),
        ),
    ]
}
