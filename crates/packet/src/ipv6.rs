//! IPv6 header view (RFC 8200) and the extension-header walk that finds the
//! upper-layer protocol and computes OpenFlow's IPV6_EXTHDR pseudo-field
//! (OpenFlow 1.3.5 §7.2.3.8).
//!
//! The walk knows hop-by-hop options (0), routing (43), fragment (44),
//! ESP (50), AH (51), no-next-header (59) and destination options (60).
//! ESP and no-next end it (nothing after them can be read); so does a
//! fragment header with a non-zero offset (what follows is not a header).
//! "Unexpected repeats" (UNREP) and "unexpected sequencing" (UNSEQ) follow
//! RFC 8200 §4.1's recommended order: hop-by-hop first, then destination
//! options, routing, fragment, AH, ESP, destination options; each header at
//! most once except destination options (once before routing, once before
//! the upper layer).

use crate::view::header;
use crate::{be16, put32, Error, Result};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// Next-header values of the extension headers.
pub mod next_header {
    /// Hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing.
    pub const ROUTING: u8 = 43;
    /// Fragment.
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating security payload.
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// No next header.
    pub const NO_NEXT: u8 = 59;
    /// Destination options.
    pub const DEST_OPTS: u8 = 60;
}

/// Bits of the OpenFlow IPV6_EXTHDR pseudo-field.
pub mod exthdr {
    /// "No next header" encountered.
    pub const NONEXT: u16 = 1 << 0;
    /// Encrypted Sec Payload header present.
    pub const ESP: u16 = 1 << 1;
    /// Authentication header present.
    pub const AUTH: u16 = 1 << 2;
    /// 1 or 2 destination options headers present.
    pub const DEST: u16 = 1 << 3;
    /// Fragment header present.
    pub const FRAG: u16 = 1 << 4;
    /// Router header present.
    pub const ROUTER: u16 = 1 << 5;
    /// Hop-by-hop header present.
    pub const HOP: u16 = 1 << 6;
    /// Unexpected repeats encountered.
    pub const UNREP: u16 = 1 << 7;
    /// Unexpected sequencing encountered.
    pub const UNSEQ: u16 = 1 << 8;
}

header! {
    /// A view of an IPv6 header and what follows.
    pub struct Ipv6Packet {
        /// The first word: version, traffic class, flow label.
        [0] ver_tc_flow: u32 {
            /// Version (6).
            [28, 4] version: u8;
            /// Traffic class (DSCP << 2 | ECN).
            [20, 8] traffic_class / set_traffic_class: u8;
            /// DSCP (the high 6 bits of the traffic class).
            [22, 6] dscp: u8;
            /// ECN (the low 2 bits of the traffic class).
            [20, 2] ecn: u8;
            /// Flow label (20 bits).
            [0, 20] flow_label / set_flow_label: u32;
        };
        /// Payload length.
        [4] payload_len / set_payload_len: u16;
        /// First next-header value.
        [NEXT_HEADER_OFFSET = 6] next_header / set_next_header: u8;
        /// Hop limit.
        [HOP_LIMIT_OFFSET = 7] hop_limit / set_hop_limit: u8;
        /// Source address.
        [8] src / set_src: [u8; 16];
        /// Destination address.
        [24] dst / set_dst: [u8; 16];
    }
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Checks the 40-byte header is present and the version is 6.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// The payload, bounded by the payload length and by the buffer.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(b.len());
        &b[HEADER_LEN..end]
    }

    /// Walks the extension headers (see the module comment).
    pub fn walk(&self) -> ExtHeaderWalk {
        let b = self.buffer.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(b.len());
        walk_ext_headers(&b[..end])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, traffic class and flow label at once.
    pub fn set_version_tc_flow(&mut self, tc: u8, flow: u32) {
        let w = (6 << 28) | (u32::from(tc) << 20) | (flow & 0xf_ffff);
        put32(self.buffer.as_mut(), 0, w);
    }
}

/// What the extension-header walk found. Offsets are from the start of the
/// IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExtHeaderWalk {
    /// The last next-header value: the upper-layer protocol, or 50 (ESP) /
    /// 59 (no next header) when the walk stopped there.
    pub protocol: u8,
    /// Offset of the byte holding `protocol` (so a rewrite can change it).
    pub protocol_offset: usize,
    /// Offset of the upper-layer header, when it can be reached: not after
    /// ESP or no-next, not in a non-first fragment, not when truncated.
    pub upper_offset: Option<usize>,
    /// The OpenFlow IPV6_EXTHDR bits.
    pub exthdr: u16,
    /// A fragment header was seen.
    pub fragment: bool,
    /// The fragment header had its M (more fragments) bit set.
    pub more_fragments: bool,
    /// The fragment header had a non-zero offset.
    pub later_fragment: bool,
    /// An extension header ran past the end of the data.
    pub truncated: bool,
    /// Offset of the final destination address when a routing header still
    /// has segments left (RFC 8200 §8.1: the upper-layer pseudo-header uses
    /// it instead of the header's destination). Known for routing types 0
    /// (last address), 2 (home address) and 4 (SRH, first segment-list entry).
    pub final_dst_offset: Option<usize>,
}

// Position of each header in the recommended order (RFC 8200 §4.1).
const RANK_HOP: u8 = 0;
const RANK_DEST1: u8 = 1;
const RANK_ROUTING: u8 = 2;
const RANK_FRAG: u8 = 3;
const RANK_AUTH: u8 = 4;
const RANK_ESP: u8 = 5;
const RANK_DEST2: u8 = 6;

/// Walks the extension headers of an IPv6 datagram. `ip` starts with the
/// IPv6 header and should end where the datagram ends; if it holds fewer
/// than 40 bytes, the result has `truncated` set.
pub fn walk_ext_headers(ip: &[u8]) -> ExtHeaderWalk {
    let mut w = ExtHeaderWalk {
        protocol_offset: NEXT_HEADER_OFFSET,
        ..Default::default()
    };
    let Some(&nh0) = ip.get(NEXT_HEADER_OFFSET) else {
        w.truncated = true;
        return w;
    };
    if ip.len() < HEADER_LEN {
        w.protocol = nh0;
        w.truncated = true;
        return w;
    }
    let mut nh = nh0;
    let mut off = HEADER_LEN;
    let mut count = 0u32; // headers seen so far
    let mut max_rank = 0u8;
    let mut dest_seen = 0u8;
    loop {
        w.protocol = nh;
        let (rank, bit) = match nh {
            next_header::NO_NEXT => {
                w.exthdr |= exthdr::NONEXT;
                return w;
            }
            next_header::HOP_BY_HOP => {
                if count != 0 {
                    w.exthdr |= exthdr::UNSEQ;
                }
                (RANK_HOP, exthdr::HOP)
            }
            next_header::DEST_OPTS => {
                let first = dest_seen == 0 && max_rank < RANK_ROUTING;
                dest_seen += 1;
                if dest_seen > 2 {
                    w.exthdr |= exthdr::UNREP;
                }
                (if first { RANK_DEST1 } else { RANK_DEST2 }, exthdr::DEST)
            }
            next_header::ROUTING => (RANK_ROUTING, exthdr::ROUTER),
            next_header::FRAGMENT => (RANK_FRAG, exthdr::FRAG),
            next_header::AH => (RANK_AUTH, exthdr::AUTH),
            next_header::ESP => (RANK_ESP, exthdr::ESP),
            _ => {
                w.upper_offset = Some(off);
                return w;
            }
        };
        if nh != next_header::DEST_OPTS && w.exthdr & bit != 0 {
            w.exthdr |= exthdr::UNREP;
        }
        if rank < max_rank {
            w.exthdr |= exthdr::UNSEQ;
        }
        max_rank = max_rank.max(rank);
        w.exthdr |= bit;
        count += 1;
        if nh == next_header::ESP {
            // Everything after the SPI and sequence number is encrypted.
            return w;
        }
        let Some(&[next, len_byte]) = ip.get(off..off + 2) else {
            w.truncated = true;
            return w;
        };
        let len = match nh {
            next_header::AH => (usize::from(len_byte) + 2) * 4,
            next_header::FRAGMENT => 8,
            _ => (usize::from(len_byte) + 1) * 8,
        };
        if off + len > ip.len() {
            w.truncated = true;
            return w;
        }
        if nh == next_header::ROUTING && w.final_dst_offset.is_none() {
            // Type and segments left are within the header (len >= 8).
            let (rtype, segs_left) = (ip[off + 2], ip[off + 3]);
            let addrs = usize::from(len_byte) / 2;
            if segs_left > 0 && addrs > 0 {
                w.final_dst_offset = match rtype {
                    0 => Some(off + 8 + 16 * (addrs - 1)),
                    2 | 4 => Some(off + 8),
                    _ => None,
                };
            }
        }
        if nh == next_header::FRAGMENT {
            w.fragment = true;
            // Offset field is checked within bounds above (len 8).
            let fo = be16(ip, off + 2);
            w.more_fragments = fo & 1 != 0;
            if fo & 0xfff8 != 0 {
                w.later_fragment = true;
                w.protocol = next;
                w.protocol_offset = off;
                return w;
            }
        }
        w.protocol_offset = off;
        nh = next;
        off += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip6(nh: u8, ext: &[u8], upper: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 40];
        let mut p = Ipv6Packet::new_unchecked(&mut v[..]);
        p.set_version_tc_flow(0xb8, 0x12345);
        p.set_payload_len((ext.len() + upper.len()) as u16);
        p.set_next_header(nh);
        p.set_hop_limit(64);
        p.set_src([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.set_dst([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        v.extend_from_slice(ext);
        v.extend_from_slice(upper);
        v
    }

    #[test]
    fn fixed_header() {
        let v = ip6(17, &[], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), 17);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src()[15], 1);
        assert_eq!(p.dst()[15], 2);
        assert_eq!(p.payload().len(), 8);
        let w = p.walk();
        assert_eq!(w.protocol, 17);
        assert_eq!(w.upper_offset, Some(40));
        assert_eq!(w.exthdr, 0);
        assert!(Ipv6Packet::new_checked(&v[..39]).is_err());
        let mut bad = v.clone();
        bad[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed
        );
    }

    const HOP: [u8; 8] = [0, 0, 1, 4, 0, 0, 0, 0];

    fn opts(next: u8) -> [u8; 8] {
        let mut h = HOP;
        h[0] = next;
        h
    }

    #[test]
    fn walk_all_kinds() {
        // hop, dest, routing, frag(offset 0), AH, dest, tcp
        let mut ext = Vec::new();
        ext.extend_from_slice(&opts(60)); // hop -> dest
        ext.extend_from_slice(&opts(43)); // dest -> routing
        ext.extend_from_slice(&[44, 0, 0, 0, 0, 0, 0, 0]); // routing -> frag
        ext.extend_from_slice(&[51, 0, 0, 1, 0, 0, 0, 9]); // frag (M=1) -> AH
        ext.extend_from_slice(&[60, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // AH len 12 -> dest
        ext.extend_from_slice(&opts(6)); // dest -> tcp
        let v = ip6(0, &ext, &[0; 20]);
        let w = walk_ext_headers(&v);
        assert_eq!(w.protocol, 6);
        assert_eq!(w.upper_offset, Some(40 + ext.len()));
        assert_eq!(w.protocol_offset, 40 + ext.len() - 8);
        assert_eq!(
            w.exthdr,
            exthdr::HOP | exthdr::DEST | exthdr::ROUTER | exthdr::FRAG | exthdr::AUTH
        );
        assert!(w.fragment && !w.later_fragment && !w.truncated);
    }

    #[test]
    fn walk_special_cases() {
        // no next header
        let w = walk_ext_headers(&ip6(59, &[], &[]));
        assert_eq!(
            (w.protocol, w.exthdr, w.upper_offset),
            (59, exthdr::NONEXT, None)
        );
        // ESP stops the walk
        let w = walk_ext_headers(&ip6(50, &[], &[0; 16]));
        assert_eq!(
            (w.protocol, w.exthdr, w.upper_offset),
            (50, exthdr::ESP, None)
        );
        // later fragment: protocol from the fragment header, no upper layer
        let w = walk_ext_headers(&ip6(44, &[17, 0, 0, 8, 0, 0, 0, 1], &[0; 8]));
        assert_eq!(w.protocol, 17);
        assert_eq!(w.protocol_offset, 40);
        assert!(w.later_fragment);
        assert_eq!(w.upper_offset, None);
        assert_eq!(w.exthdr, exthdr::FRAG);
        // repeated hop-by-hop: UNREP, and hop not first: UNSEQ
        let mut ext = Vec::new();
        ext.extend_from_slice(&opts(0));
        ext.extend_from_slice(&opts(17));
        let w = walk_ext_headers(&ip6(0, &ext, &[0; 8]));
        assert_eq!(w.exthdr, exthdr::HOP | exthdr::UNREP | exthdr::UNSEQ);
        // routing before dest is fine (dest as final); dest, dest, dest: UNREP
        let mut ext = Vec::new();
        ext.extend_from_slice(&opts(60));
        ext.extend_from_slice(&opts(60));
        ext.extend_from_slice(&opts(17));
        let w = walk_ext_headers(&ip6(60, &ext, &[0; 8]));
        assert_eq!(w.exthdr, exthdr::DEST | exthdr::UNREP);
        // fragment before routing: UNSEQ
        let mut ext = Vec::new();
        ext.extend_from_slice(&[43, 0, 0, 0, 0, 0, 0, 0]);
        ext.extend_from_slice(&opts(17));
        let w = walk_ext_headers(&ip6(44, &ext, &[0; 8]));
        assert_eq!(w.exthdr, exthdr::FRAG | exthdr::ROUTER | exthdr::UNSEQ);
        assert_eq!(w.upper_offset, Some(56));
        // AH then dest (final) then udp: in order
        let mut ext = Vec::new();
        ext.extend_from_slice(&[60, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        ext.extend_from_slice(&opts(17));
        let w = walk_ext_headers(&ip6(51, &ext, &[0; 8]));
        assert_eq!(w.exthdr, exthdr::AUTH | exthdr::DEST);
    }

    #[test]
    fn routing_header_final_destination() {
        // Type 0 with two addresses and one segment left: the last one.
        let mut rh = vec![17, 4, 0, 1, 0, 0, 0, 0];
        rh.extend_from_slice(&[0xaa; 16]);
        rh.extend_from_slice(&[0xbb; 16]);
        let w = walk_ext_headers(&ip6(43, &rh, &[0; 8]));
        assert_eq!(w.final_dst_offset, Some(40 + 8 + 16));
        // No segments left: the header's destination is final.
        rh[3] = 0;
        assert_eq!(
            walk_ext_headers(&ip6(43, &rh, &[0; 8])).final_dst_offset,
            None
        );
        // SRH (type 4): segment list[0].
        rh[2] = 4;
        rh[3] = 1;
        assert_eq!(
            walk_ext_headers(&ip6(43, &rh, &[0; 8])).final_dst_offset,
            Some(48)
        );
        // Unknown type: not known.
        rh[2] = 3;
        assert_eq!(
            walk_ext_headers(&ip6(43, &rh, &[0; 8])).final_dst_offset,
            None
        );
    }

    #[test]
    fn walk_truncated_never_panics() {
        let mut ext = Vec::new();
        ext.extend_from_slice(&opts(60));
        ext.extend_from_slice(&[6, 3, 0, 0, 0, 0, 0, 0]);
        ext.extend_from_slice(&[0; 24]);
        let v = ip6(0, &ext, &[0; 20]);
        for n in 0..v.len() {
            let w = walk_ext_headers(&v[..n]);
            if n < 40 + ext.len() {
                assert!(w.truncated, "{n}");
                assert_eq!(w.upper_offset, None);
            } else {
                assert!(!w.truncated);
            }
        }
    }
}
