//! Full (from-scratch) checksum computation and verification for a whole
//! packet: the IPv4 header checksum and the TCP, UDP, ICMPv4, ICMPv6 and
//! SCTP checksums, located with the flow-key parser.
//!
//! This is the slow, obviously-right path: rewrites use incremental updates
//! (see [`crate::set_field`]) and the tests check them against this. The
//! transport checksum of a fragment of a larger datagram or a truncated datagram cannot be
//! computed and is left alone (and reported by [`verify_checksums`]). The
//! IPv6 pseudo-header uses the final destination (RFC 8200 §8.1): from a
//! routing header with segments left when there is one.

use crate::checksum;
use crate::ethernet::ethertype;
use crate::flow_key::{flags, FlowKey};
use crate::ipv4::protocol;
use crate::{be16, put16};

/// Why [`verify_checksums`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumError {
    /// The IPv4 header checksum is wrong.
    Ipv4Header,
    /// The transport checksum is wrong.
    Transport,
    /// The transport checksum could not be checked (fragment or truncated).
    Unverifiable,
}

fn pseudo(pkt: &[u8], k: &FlowKey, proto: u8, len: usize) -> u64 {
    let l3 = k.l3_offset as usize;
    if k.eth_type == ethertype::IPV4 {
        let s = [pkt[l3 + 12], pkt[l3 + 13], pkt[l3 + 14], pkt[l3 + 15]];
        let d = [pkt[l3 + 16], pkt[l3 + 17], pkt[l3 + 18], pkt[l3 + 19]];
        checksum::pseudo_header_v4(s, d, proto, len as u32)
    } else {
        let s = crate::addr16_at(pkt, l3 + 8);
        let d = match k.ipv6_final_dst_offset as usize {
            0 => crate::addr16_at(pkt, l3 + 24),
            fin => crate::addr16_at(pkt, fin),
        };
        checksum::pseudo_header_v6(&s, &d, proto, len as u32)
    }
}

/// Where the transport checksum lives and what it covers.
fn transport(k: &FlowKey) -> Option<(usize, usize, u8)> {
    let partial = flags::LATER_FRAGMENT | flags::MORE_FRAGMENTS | flags::TRUNCATED;
    if k.l4_offset == 0 || k.flags & partial != 0 {
        return None;
    }
    let v6 = k.eth_type == ethertype::IPV6;
    let off = match (k.ip_proto, v6) {
        (protocol::TCP, _) => 16,
        (protocol::UDP, _) => 6,
        (protocol::SCTP, _) => 8,
        (protocol::ICMP, false) | (protocol::ICMPV6, true) => 2,
        _ => return None,
    };
    Some((k.l4_offset as usize, off, k.ip_proto))
}

/// Recomputes every checksum of `pkt` from scratch (IPv4 header, then the
/// transport checksum when the whole datagram is present and unfragmented).
/// A UDP-over-IPv4 checksum of zero ("none") is left zero.
pub fn fill_checksums(pkt: &mut [u8]) {
    let k = FlowKey::parse(pkt);
    if k.eth_type == ethertype::IPV4 && k.has(crate::flow_key::field::IPV4_SRC) {
        let l3 = k.l3_offset as usize;
        let hl = usize::from(pkt[l3] & 0xf) * 4;
        put16(pkt, l3 + 10, 0);
        let c = checksum::checksum(&pkt[l3..l3 + hl], 0);
        put16(pkt, l3 + 10, c);
    }
    let Some((l4, off, proto)) = transport(&k) else {
        return;
    };
    let end = k.l3_end as usize;
    let len = end - l4;
    if proto == protocol::SCTP {
        if let Ok(mut s) = crate::sctp::SctpPacket::new_checked(&mut pkt[l4..end]) {
            s.fill_checksum();
        }
        return;
    }
    if proto == protocol::UDP && k.eth_type == ethertype::IPV4 && be16(pkt, l4 + off) == 0 {
        return;
    }
    let ph = if proto == protocol::ICMP {
        0
    } else {
        pseudo(pkt, &k, proto, len)
    };
    put16(pkt, l4 + off, 0);
    let mut c = checksum::checksum(&pkt[l4..end], ph);
    if c == 0 && proto == protocol::UDP {
        c = 0xffff;
    }
    put16(pkt, l4 + off, c);
}

/// Checks every checksum of `pkt` by recomputing it from scratch. Packets
/// that are not IP pass.
pub fn verify_checksums(pkt: &[u8]) -> Result<(), ChecksumError> {
    let k = FlowKey::parse(pkt);
    if k.eth_type == ethertype::IPV4 && k.has(crate::flow_key::field::IPV4_SRC) {
        let l3 = k.l3_offset as usize;
        let hl = usize::from(pkt[l3] & 0xf) * 4;
        if !checksum::verify(&pkt[l3..l3 + hl], 0) {
            return Err(ChecksumError::Ipv4Header);
        }
    }
    if k.eth_type != ethertype::IPV4 && k.eth_type != ethertype::IPV6 {
        return Ok(());
    }
    let Some((l4, off, proto)) = transport(&k) else {
        let partial = flags::LATER_FRAGMENT | flags::MORE_FRAGMENTS | flags::TRUNCATED;
        if k.l4_offset == 0 && k.flags & partial == 0 {
            return Ok(());
        }
        return Err(ChecksumError::Unverifiable);
    };
    let end = k.l3_end as usize;
    let seg = &pkt[l4..end];
    let ok = match proto {
        protocol::SCTP => crate::sctp::SctpPacket::new_checked(seg)
            .map(|s| s.verify_checksum())
            .unwrap_or(false),
        protocol::ICMP => checksum::verify(seg, 0),
        protocol::UDP if k.eth_type == ethertype::IPV4 && be16(pkt, l4 + off) == 0 => true,
        _ => checksum::verify(seg, pseudo(pkt, &k, proto, seg.len())),
    };
    if ok {
        Ok(())
    } else {
        Err(ChecksumError::Transport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn samples_verify_and_corruption_is_caught() {
        for (name, p) in samples() {
            assert_eq!(verify_checksums(&p), Ok(()), "{name}");
            let k = FlowKey::parse(&p);
            if let Some((l4, _, _)) = transport(&k).filter(|_| name != "ipv4_udp_nocsum") {
                let mut q = p.clone();
                let last = k.l3_end as usize - 1;
                q[last] ^= 0x5a;
                assert_eq!(
                    verify_checksums(&q),
                    Err(ChecksumError::Transport),
                    "{name}"
                );
                let _ = l4;
            }
            if k.eth_type == ethertype::IPV4 && k.has(crate::flow_key::field::IPV4_SRC) {
                let mut q = p.clone();
                q[k.l3_offset as usize + 8] ^= 1;
                assert_eq!(
                    verify_checksums(&q),
                    Err(ChecksumError::Ipv4Header),
                    "{name}"
                );
            }
        }
    }
}
