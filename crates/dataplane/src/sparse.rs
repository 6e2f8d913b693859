//! Sparse flows first: a per-reader meter that tells a frame of a light
//! flow (a ping, a DNS query, a TCP handshake) from one of a flood, so that
//! the queues a flood fills can let the light one by.
//!
//! # Why
//!
//! At saturation a bounded queue ([`crate::delay`]) drops what waited too
//! long and a deep one makes everything wait; either way a ping that shares
//! the queue with a flood is treated like a flood frame: lost, or late by
//! the whole backlog. The flows that cause the backlog are few and heavy;
//! the ones that suffer from it send a frame now and then. Telling them
//! apart needs no per-flow state, only a count per hash bucket.
//!
//! # How
//!
//! A [`FlowMeter`] hashes each frame's flow ([`flow_hash`]: the Ethernet
//! addresses, the EtherType behind up to two VLAN tags, the IPv4 or IPv6
//! addresses and protocol, and the L4 ports of TCP, UDP and SCTP when the
//! packet is not a later fragment; read straight from the frame bytes,
//! nothing parsed beyond that) into one of [`BUCKETS`] buckets and counts
//! the frames of each bucket. Every [`WINDOW`] frames all counts halve, so
//! a bucket's count is about twice the frames it had per window lately.
//! A frame is *sparse* when its bucket's count before it is below
//! [`SPARSE_BELOW`]: its flow sent at most about one frame per window of
//! late. A flow with a larger share of the window (each of 16 flows of a
//! flood has 256 frames of every 4,096) is never sparse once its first
//! frames are counted.
//!
//! The meter costs a hash of a few words and a counter increment per frame
//! (no allocation; 2 KiB of counts per reader), and the halving 1,024
//! shifts every 4,096 frames.
//!
//! What sparse frames can take is bounded: a bucket passes at most
//! [`SPARSE_BELOW`] sparse frames per window (its count only grows within
//! one), so never more than `BUCKETS × SPARSE_BELOW` of a window's
//! `WINDOW` frames are sparse, and far fewer in practice: a flood spread
//! over many flows (a new port every frame) fills every bucket with about
//! four frames a window and is heavy. Letting sparse frames by therefore
//! cannot undo the bound on a queue's delay.
//!
//! The accepted worst case is a hash collision: a light flow that shares
//! its bucket with a heavy one is heavy too (with 16 heavy flows about one
//! light flow in 64 is). Nothing else is lost by it: the light flow is
//! treated as it would be without the meter.

/// Buckets in a meter (a power of two).
pub const BUCKETS: usize = 1024;

/// Frames in a window: every `WINDOW` frames the counts halve.
pub const WINDOW: u32 = 4096;

/// A frame is sparse when its bucket counted fewer frames than this before
/// it (after the halvings).
pub const SPARSE_BELOW: u16 = 2;

/// Counts of frames per flow bucket over the last windows.
#[derive(Clone, Debug)]
pub struct FlowMeter {
    counts: Box<[u16; BUCKETS]>,
    /// Frames counted in the current window.
    seen: u32,
}

impl Default for FlowMeter {
    fn default() -> Self {
        FlowMeter {
            counts: Box::new([0; BUCKETS]),
            seen: 0,
        }
    }
}

/// What the meter says of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The flow's bucket, below [`BUCKETS`].
    pub bucket: usize,
    /// Whether the frame is sparse.
    pub sparse: bool,
}

impl FlowMeter {
    /// Counts `frame` (its bytes from the Ethernet header on; a short or
    /// odd frame hashes on what it has) and says whether it is sparse.
    pub fn observe(&mut self, frame: &[u8]) -> Flow {
        let bucket = bucket_of(flow_hash(frame));
        let count = &mut self.counts[bucket];
        let sparse = *count < SPARSE_BELOW;
        *count = count.saturating_add(1);
        self.seen += 1;
        if self.seen >= WINDOW {
            self.seen = 0;
            for c in self.counts.iter_mut() {
                *c >>= 1;
            }
        }
        Flow { bucket, sparse }
    }
}

/// The bucket of a flow hash.
fn bucket_of(hash: u64) -> usize {
    // The high bits of a multiplicative hash are its best mixed.
    (hash >> (64 - BUCKETS.trailing_zeros())) as usize
}

/// An odd constant with well spread bits (the golden ratio's).
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(h: u64, word: u64) -> u64 {
    (h.rotate_left(23) ^ word).wrapping_mul(MIX)
}

/// `n` (at most 8) bytes of `b` from `at` as a number; 0 when they are not
/// all there.
fn word(b: &[u8], at: usize, n: usize) -> u64 {
    match b.get(at..at.saturating_add(n)) {
        Some(s) => s.iter().fold(0, |w, &x| (w << 8) | u64::from(x)),
        None => 0,
    }
}

/// A hash of the flow `frame` belongs to: Ethernet addresses, EtherType
/// (behind up to two VLAN tags), IPv4/IPv6 addresses and protocol, and
/// TCP/UDP/SCTP ports of first fragments.
pub fn flow_hash(frame: &[u8]) -> u64 {
    let b = frame;
    let mut h = mix(0, word(b, 0, 6));
    h = mix(h, word(b, 6, 6));
    let mut l3 = 12;
    let mut ethertype = word(b, l3, 2);
    for _ in 0..2 {
        if matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
            l3 += 4;
            ethertype = word(b, l3, 2);
        }
    }
    l3 += 2;
    h = mix(h, ethertype);
    let (proto, l4) = match ethertype {
        0x0800 => {
            let proto = word(b, l3 + 9, 1);
            h = mix(h, word(b, l3 + 12, 8));
            let later_fragment = word(b, l3 + 6, 2) & 0x1fff != 0;
            let ihl = (word(b, l3, 1) as usize & 0xf) * 4;
            (proto, (!later_fragment).then_some(l3 + ihl))
        }
        0x86dd => {
            let proto = word(b, l3 + 6, 1);
            for i in 0..4 {
                h = mix(h, word(b, l3 + 8 + 8 * i, 8));
            }
            (proto, Some(l3 + 40))
        }
        _ => return h,
    };
    h = mix(h, proto);
    match (proto, l4) {
        (6 | 17 | 132, Some(at)) => mix(h, word(b, at, 4)),
        _ => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP/IPv4 frame from `src_port` to port 9.
    fn udp4(src_port: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
        // IPv4: ihl 5, proto 17, 10.0.0.1 -> 10.0.0.2.
        f.extend_from_slice(&[0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&src_port.to_be_bytes());
        f.extend_from_slice(&[0, 9, 0, 26, 0, 0]);
        f.resize(64, 0);
        f
    }

    /// An ICMP echo request between the same hosts.
    fn ping(seq: u16) -> Vec<u8> {
        let mut f = udp4(0);
        f[14 + 9] = 1;
        f[34..38].copy_from_slice(&[8, 0, 0, 0]);
        f[38..40].copy_from_slice(&seq.to_be_bytes());
        f
    }

    #[test]
    fn the_flow_is_what_is_hashed() {
        // Ports, addresses and protocol make the flow; the payload does not.
        assert_ne!(flow_hash(&udp4(1000)), flow_hash(&udp4(1001)));
        let mut other_dst = udp4(1000);
        other_dst[33] = 3;
        assert_ne!(flow_hash(&udp4(1000)), flow_hash(&other_dst));
        let mut other_payload = udp4(1000);
        other_payload[50] = 0x55;
        assert_eq!(flow_hash(&udp4(1000)), flow_hash(&other_payload));
        // Pings of one session are one flow whatever their sequence.
        assert_eq!(flow_hash(&ping(1)), flow_hash(&ping(2)));
        assert_ne!(flow_hash(&ping(1)), flow_hash(&udp4(0x0800)));
        // A VLAN tag is looked behind.
        let mut tagged = udp4(1000);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        let mut tagged2 = udp4(1001);
        tagged2.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_ne!(flow_hash(&tagged), flow_hash(&tagged2));
        // Later fragments carry no ports: they hash without them.
        let mut frag = udp4(1000);
        frag[14 + 7] = 1;
        let mut frag2 = udp4(1001);
        frag2[14 + 7] = 1;
        assert_eq!(flow_hash(&frag), flow_hash(&frag2));
        // IPv6 ports count too.
        let v6 = |port: u16| {
            let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd];
            f.extend_from_slice(&[0x60, 0, 0, 0, 0, 8, 17, 64]);
            f.extend_from_slice(&[0x20; 32]);
            f.extend_from_slice(&port.to_be_bytes());
            f.extend_from_slice(&[0, 9, 0, 8, 0, 0]);
            f
        };
        assert_ne!(flow_hash(&v6(1)), flow_hash(&v6(2)));
        assert_eq!(flow_hash(&v6(1)), flow_hash(&v6(1)));
        // Short and empty frames hash without a panic.
        let (a, b) = (udp4(1000), v6(1));
        for n in 0..64 {
            let _ = flow_hash(&a[..n.min(a.len())]);
            let _ = flow_hash(&b[..n.min(b.len())]);
        }
    }

    #[test]
    fn a_ping_in_a_flood_is_sparse_and_the_flood_never() {
        let flood: Vec<Vec<u8>> = (0..16).map(|i| udp4(1000 + i)).collect();
        let pinger = ping(0);
        let bucket = |f: &[u8]| bucket_of(flow_hash(f));
        // The worst case is a collision; these flows have none.
        assert!(flood.iter().all(|f| bucket(f) != bucket(&pinger)));
        let mut m = FlowMeter::default();
        // The first frames of a new flow are sparse: nothing is known yet.
        for f in &flood {
            assert!(m.observe(f).sparse);
        }
        let mut pings = 0;
        for i in 0..1_000_000u32 {
            let f = &flood[(i % 16) as usize];
            let v = m.observe(f);
            if i >= 16 {
                assert!(!v.sparse, "flood frame {i} passed as sparse");
            }
            assert_eq!(v.bucket, bucket(f));
            // One ping per 10,000 frames.
            if i % 10_000 == 0 {
                let p = m.observe(&ping(i as u16));
                assert!(p.sparse, "ping {pings} seen as heavy");
                pings += 1;
            }
        }
        assert_eq!(pings, 100);
    }

    #[test]
    fn a_flow_that_speeds_up_stops_being_sparse_and_one_that_slows_down_becomes_sparse() {
        let mut m = FlowMeter::default();
        let light = udp4(7);
        let heavy = udp4(8);
        assert_ne!(bucket_of(flow_hash(&light)), bucket_of(flow_hash(&heavy)));
        let verdicts: Vec<bool> = (0..4).map(|_| m.observe(&light).sparse).collect();
        assert_eq!(verdicts, [true, true, false, false]);
        // After a few windows without it, the flow is light again.
        for _ in 0..3 * WINDOW {
            m.observe(&heavy);
        }
        assert!(m.observe(&light).sparse);
        assert!(!m.observe(&heavy).sparse);
    }

    #[test]
    fn a_flood_over_many_flows_is_heavy() {
        // A flood over many flows (a new source port every frame) fills
        // every bucket: after a few windows hardly a frame is sparse
        // (none with this hash; the test allows 5%).
        let mut m = FlowMeter::default();
        let mut sparse = 0u32;
        let frames = 16 * WINDOW;
        for i in 0..frames {
            let f = udp4(i as u16);
            if m.observe(&f).sparse && i >= 8 * WINDOW {
                sparse += 1;
            }
        }
        assert!(sparse <= 8 * WINDOW / 20, "{sparse} of {}", 8 * WINDOW);
    }
}
