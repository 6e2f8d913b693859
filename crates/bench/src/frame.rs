//! Test frames for `fulmar bench`, built byte by byte from their fields
//! (Ethernet, an optional VLAN tag or MPLS label, IPv4, TCP or UDP), with
//! checksums computed from scratch. The same builder produces the input
//! frames and the frames a correct switch must emit, so the smoke check
//! compares the pipeline's output against an independent construction, and
//! a small seeded random-number generator for the workloads.

/// What sits between the Ethernet addresses and the IPv4 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// No tag: EtherType 0x0800.
    None,
    /// An 802.1Q tag (TPID 0x8100, PCP 0) with this VLAN id.
    Vlan(u16),
    /// One MPLS label stack entry (EtherType 0x8847, TC 0, bottom of
    /// stack) with this label and TTL.
    Mpls {
        /// The 20-bit label.
        label: u32,
        /// The label's TTL.
        ttl: u8,
    },
}

/// The fields of a test frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Destination MAC (48 bits).
    pub eth_dst: u64,
    /// Source MAC (48 bits).
    pub eth_src: u64,
    /// Tag after the addresses.
    pub tag: Tag,
    /// IPv4 source.
    pub ip_src: u32,
    /// IPv4 destination.
    pub ip_dst: u32,
    /// IPv4 TTL.
    pub ttl: u8,
    /// IP protocol: 6 (TCP) or 17 (UDP).
    pub proto: u8,
    /// Transport source port.
    pub sport: u16,
    /// Transport destination port.
    pub dport: u16,
}

/// The smallest frame size every scenario's frames fit in (Ethernet,
/// a tag, IPv4 and TCP headers, padded to the Ethernet minimum).
pub const MIN_FRAME: usize = 64;

/// Internet checksum (RFC 1071) of `data`, starting from `sum`.
fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Frame {
    /// The frame's bytes, `size` long (at least [`MIN_FRAME`]; the IPv4
    /// total length covers everything after the Ethernet header and tag).
    pub fn build(&self, size: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(size.max(MIN_FRAME));
        b.extend_from_slice(&self.eth_dst.to_be_bytes()[2..]);
        b.extend_from_slice(&self.eth_src.to_be_bytes()[2..]);
        match self.tag {
            Tag::None => b.extend_from_slice(&0x0800u16.to_be_bytes()),
            Tag::Vlan(vid) => {
                b.extend_from_slice(&0x8100u16.to_be_bytes());
                b.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
                b.extend_from_slice(&0x0800u16.to_be_bytes());
            }
            Tag::Mpls { label, ttl } => {
                b.extend_from_slice(&0x8847u16.to_be_bytes());
                let lse = ((label & 0xf_ffff) << 12) | (1 << 8) | u32::from(ttl);
                b.extend_from_slice(&lse.to_be_bytes());
            }
        }
        let ip_at = b.len();
        let total = size.max(MIN_FRAME) - ip_at;
        let l4_len = total - 20;
        // IPv4 header: version 4, IHL 5, no options.
        b.extend_from_slice(&[0x45, 0]);
        b.extend_from_slice(&(total as u16).to_be_bytes());
        b.extend_from_slice(&[0, 0, 0x40, 0]); // id 0, don't fragment
        b.extend_from_slice(&[self.ttl, self.proto, 0, 0]);
        b.extend_from_slice(&self.ip_src.to_be_bytes());
        b.extend_from_slice(&self.ip_dst.to_be_bytes());
        let c = checksum(0, &b[ip_at..ip_at + 20]);
        b[ip_at + 10..ip_at + 12].copy_from_slice(&c.to_be_bytes());
        let l4_at = b.len();
        b.extend_from_slice(&self.sport.to_be_bytes());
        b.extend_from_slice(&self.dport.to_be_bytes());
        if self.proto == 6 {
            b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]); // seq, ack
            b.extend_from_slice(&[0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]); // ACK, window
        } else {
            b.extend_from_slice(&(l4_len as u16).to_be_bytes());
            b.extend_from_slice(&[0, 0]);
        }
        // Payload: a recognisable pattern.
        let mut i = 0u8;
        while b.len() < size.max(MIN_FRAME) {
            b.push(i);
            i = i.wrapping_add(1);
        }
        // Transport checksum over the pseudo-header and the segment.
        let mut pseudo = 0u32;
        for w in [self.ip_src, self.ip_dst] {
            pseudo += (w >> 16) + (w & 0xffff);
        }
        pseudo += u32::from(self.proto) + l4_len as u32;
        let at = if self.proto == 6 { 16 } else { 6 };
        let mut c = checksum(pseudo, &b[l4_at..]);
        if c == 0 && self.proto == 17 {
            c = 0xffff;
        }
        b[l4_at + at..l4_at + at + 2].copy_from_slice(&c.to_be_bytes());
        b
    }
}

/// A small seeded generator (SplitMix64): the workloads must be the same
/// on every run and need no dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A number in `0..n` (`n > 0`; multiply-shift, bias below 2^-32).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Shuffles `v` (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp() -> Frame {
        Frame {
            eth_dst: 0x0200_0000_0001,
            eth_src: 0x0200_0000_0002,
            tag: Tag::None,
            ip_src: 0x0a00_0001,
            ip_dst: 0x0a00_0002,
            ttl: 64,
            proto: 17,
            sport: 1000,
            dport: 53,
        }
    }

    #[test]
    fn frames_have_the_size_and_valid_checksums() {
        for tag in [
            Tag::None,
            Tag::Vlan(10),
            Tag::Mpls {
                label: 1010,
                ttl: 64,
            },
        ] {
            for proto in [6, 17] {
                for size in [64, 65, 128, 1500] {
                    let f = Frame {
                        tag,
                        proto,
                        ..udp()
                    };
                    let b = f.build(size);
                    assert_eq!(b.len(), size);
                    let ip = if tag == Tag::None { 14 } else { 18 };
                    // A correct header sums to zero with its checksum.
                    assert_eq!(checksum(0, &b[ip..ip + 20]), 0);
                    let l4_len = (size - ip - 20) as u32;
                    let pseudo = 0x0a00 + 1 + 0x0a00 + 2 + u32::from(proto) + l4_len;
                    assert_eq!(checksum(pseudo, &b[ip + 20..]), 0, "{tag:?} {proto} {size}");
                    let total = u16::from_be_bytes([b[ip + 2], b[ip + 3]]);
                    assert_eq!(usize::from(total), size - ip);
                }
            }
        }
    }

    #[test]
    fn tags_are_laid_out_on_the_wire() {
        let v = Frame {
            tag: Tag::Vlan(10),
            ..udp()
        }
        .build(64);
        assert_eq!(&v[12..18], &[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00]);
        let m = Frame {
            tag: Tag::Mpls {
                label: 1010,
                ttl: 63,
            },
            ..udp()
        }
        .build(64);
        // 1010 << 12 | BOS | 63 = 0x003f213f
        assert_eq!(&m[12..18], &[0x88, 0x47, 0x00, 0x3f, 0x21, 0x3f]);
        assert_eq!(&v[18..], &m[18..], "same IPv4 packet behind either tag");
    }

    #[test]
    fn rng_is_seeded_and_bounded() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
        let mut r = Rng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[r.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        let mut v: Vec<u32> = (0..100).collect();
        r.shuffle(&mut v);
        let mut s = v.clone();
        s.sort_unstable();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
        assert_ne!(v, s);
    }
}
