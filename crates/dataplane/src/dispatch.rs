//! RX dispatch: which worker thread gets a received packet.
//!
//! Every key keeps the packets of one flow on one worker, and rings are
//! FIFO, so a flow's packets leave in the order they came in:
//!
//! - [`DispatchKey::Port`]: by input port (all of a port's packets on one
//!   worker);
//! - [`DispatchKey::L2`]: by a hash of the Ethernet addresses and the outer
//!   VLAN id;
//! - [`DispatchKey::FiveTuple`]: by a hash of the IP addresses, IP protocol
//!   and (for unfragmented TCP/UDP/SCTP) the ports; non-IP frames by the L2
//!   hash plus the first MPLS label if any;
//! - priority classes ([`Dispatcher::with_classes`]): the first
//!   [`ClassRule`] that matches sends the packet to its own worker
//!   (delay-sensitive traffic such as DSCP EF, kept off the workers that
//!   carry bulk traffic); other packets are spread by the fallback key over
//!   the workers no rule names.
//!
//! The header walk reads bytes through `get`, so a short or malformed frame
//! only hashes fewer fields; it never panics.

/// What an RX thread hashes to pick a worker (spelled in
/// `crate::settings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DispatchKey {
    /// The input port.
    Port,
    /// Ethernet addresses and outer VLAN id.
    L2,
    /// IP addresses, protocol and L4 ports (L2 for non-IP).
    #[default]
    FiveTuple,
    /// Priority classes ([`Dispatcher::with_classes`]): the first
    /// [`ClassRule`] that matches, else a fallback key. As a key to hash
    /// by (a dispatcher with no rules, or a fallback) it is `FiveTuple`.
    PriorityClass,
}

/// A class of packets given its own worker. Every condition that is
/// `Some` must hold; a rule with no condition matches nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ClassRule {
    /// IP DSCP (IPv4 or IPv6).
    pub ip_dscp: Option<u8>,
    /// Outer VLAN priority.
    pub vlan_pcp: Option<u8>,
    /// IP protocol (IPv6: the first next-header).
    pub ip_proto: Option<u8>,
    /// UDP source port.
    pub udp_src: Option<u16>,
    /// UDP destination port.
    pub udp_dst: Option<u16>,
    /// TCP source port.
    pub tcp_src: Option<u16>,
    /// TCP destination port.
    pub tcp_dst: Option<u16>,
    /// The worker (0-based) the class goes to.
    pub worker: usize,
}

/// Header fields the dispatcher looks at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fields {
    vlan_pcp: Option<u8>,
    dscp: Option<u8>,
    proto: Option<u8>,
    sport: Option<u16>,
    dport: Option<u16>,
    l2_hash: u64,
    l3_hash: Option<u64>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// A small multiplicative hash (good spread, not cryptographic).
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// Final avalanche (MurmurHash3's fmix64), so every input bit moves the
/// worker choice.
fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn hash_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    for c in bytes.chunks(8) {
        let mut w = [0u8; 8];
        if let Some(dst) = w.get_mut(..c.len()) {
            dst.copy_from_slice(c);
        }
        h = mix(h, u64::from_le_bytes(w));
    }
    h
}

fn parse(frame: &[u8]) -> Fields {
    let mut f = Fields::default();
    let mut h = hash_bytes(0x51, frame.get(..12).unwrap_or(frame));
    let mut off = 12;
    let mut ethertype = be16(frame, off);
    while let Some(t @ (0x8100 | 0x88a8)) = ethertype {
        let tci = be16(frame, off + 2).unwrap_or(0);
        if f.vlan_pcp.is_none() {
            f.vlan_pcp = Some((tci >> 13) as u8);
            h = mix(h, u64::from(tci & 0x0fff) | (u64::from(t) << 16));
        }
        off += 4;
        ethertype = be16(frame, off);
    }
    let l3 = off + 2;
    match ethertype {
        Some(0x0800) => {
            let Some(&vihl) = frame.get(l3) else {
                f.l2_hash = h;
                return f;
            };
            let ihl = usize::from(vihl & 0x0f) * 4;
            f.dscp = frame.get(l3 + 1).map(|t| t >> 2);
            f.proto = frame.get(l3 + 9).copied();
            let mut k = hash_bytes(0x4, frame.get(l3 + 12..l3 + 20).unwrap_or(&[]));
            k = mix(k, u64::from(f.proto.unwrap_or(0)));
            let frag = be16(frame, l3 + 6).unwrap_or(0) & 0x3fff;
            if frag == 0 && matches!(f.proto, Some(6 | 17 | 132)) && ihl >= 20 {
                f.sport = be16(frame, l3 + ihl);
                f.dport = be16(frame, l3 + ihl + 2);
            }
            k = mix(
                k,
                (u64::from(f.sport.unwrap_or(0)) << 16) | u64::from(f.dport.unwrap_or(0)),
            );
            f.l3_hash = Some(k);
        }
        Some(0x86dd) => {
            let tc = be16(frame, l3).map(|w| ((w >> 4) & 0xff) as u8);
            f.dscp = tc.map(|t| t >> 2);
            f.proto = frame.get(l3 + 6).copied();
            let mut k = hash_bytes(0x6, frame.get(l3 + 8..l3 + 40).unwrap_or(&[]));
            k = mix(k, u64::from(f.proto.unwrap_or(0)));
            if matches!(f.proto, Some(6 | 17 | 132)) {
                f.sport = be16(frame, l3 + 40);
                f.dport = be16(frame, l3 + 42);
            }
            k = mix(
                k,
                (u64::from(f.sport.unwrap_or(0)) << 16) | u64::from(f.dport.unwrap_or(0)),
            );
            f.l3_hash = Some(k);
        }
        Some(0x8847 | 0x8848) => {
            // The first label (20 bits) joins the L2 hash.
            if let (Some(hi), Some(lo)) = (be16(frame, l3), frame.get(l3 + 2)) {
                h = mix(h, (u64::from(hi) << 4) | u64::from(lo >> 4));
            }
        }
        _ => {}
    }
    f.l2_hash = h;
    f
}

impl ClassRule {
    fn matches(&self, f: &Fields) -> bool {
        let mut any = false;
        let mut check = |want: Option<u16>, got: Option<u16>| match want {
            None => true,
            Some(w) => {
                any = true;
                got == Some(w)
            }
        };
        let tcp = f.proto == Some(6);
        let udp = f.proto == Some(17);
        let ok = check(self.ip_dscp.map(u16::from), f.dscp.map(u16::from))
            & check(self.vlan_pcp.map(u16::from), f.vlan_pcp.map(u16::from))
            & check(self.ip_proto.map(u16::from), f.proto.map(u16::from))
            & check(self.udp_src, f.sport.filter(|_| udp))
            & check(self.udp_dst, f.dport.filter(|_| udp))
            & check(self.tcp_src, f.sport.filter(|_| tcp))
            & check(self.tcp_dst, f.dport.filter(|_| tcp));
        ok && any
    }
}

/// Picks a worker for each packet.
#[derive(Clone, Debug)]
pub struct Dispatcher {
    key: DispatchKey,
    rules: Vec<ClassRule>,
    /// Workers the key spreads over (all, or those no rule names).
    spread: Vec<usize>,
}

impl Dispatcher {
    /// Spreads packets over `workers` workers (at least 1) by `key`.
    pub fn new(key: DispatchKey, workers: usize) -> Dispatcher {
        Dispatcher {
            key,
            rules: Vec::new(),
            spread: (0..workers.max(1)).collect(),
        }
    }

    /// Priority classes: `rules` first (a rule naming a worker
    /// `>= workers` is ignored), then `fallback` over the workers no rule
    /// names (all of them when every worker is named).
    pub fn with_classes(fallback: DispatchKey, workers: usize, rules: Vec<ClassRule>) -> Self {
        let workers = workers.max(1);
        let rules: Vec<ClassRule> = rules.into_iter().filter(|r| r.worker < workers).collect();
        let mut spread: Vec<usize> = (0..workers)
            .filter(|w| !rules.iter().any(|r| r.worker == *w))
            .collect();
        if spread.is_empty() {
            spread = (0..workers).collect();
        }
        Dispatcher {
            key: fallback,
            rules,
            spread,
        }
    }

    /// The worker for a packet received on `in_port`.
    pub fn worker_for(&self, in_port: u32, frame: &[u8]) -> usize {
        if self.spread.len() == 1 && self.rules.is_empty() {
            return self.spread.first().copied().unwrap_or(0);
        }
        let fields =
            (self.key != DispatchKey::Port || !self.rules.is_empty()).then(|| parse(frame));
        if let Some(f) = &fields {
            if let Some(r) = self.rules.iter().find(|r| r.matches(f)) {
                return r.worker;
            }
        }
        let h = match (self.key, &fields) {
            (DispatchKey::Port, _) | (_, None) => mix(0x77, u64::from(in_port)),
            (DispatchKey::L2, Some(f)) => f.l2_hash,
            (DispatchKey::FiveTuple | DispatchKey::PriorityClass, Some(f)) => {
                f.l3_hash.unwrap_or(f.l2_hash)
            }
        };
        let n = self.spread.len().max(1) as u64;
        let i = (fmix(h) % n) as usize;
        self.spread.get(i).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet (optionally VLAN-tagged) + IPv4 + UDP header.
    fn udp4(vlan: Option<(u8, u16)>, dscp: u8, src: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        if let Some((pcp, vid)) = vlan {
            f.extend_from_slice(&[0x81, 0]);
            f.extend_from_slice(&((u16::from(pcp) << 13) | vid).to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00, 0x45, dscp << 2, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&[10, 0, 0, 9]);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    #[test]
    fn one_flow_always_one_worker_and_flows_spread() {
        let d = Dispatcher::new(DispatchKey::FiveTuple, 4);
        let mut seen = [0usize; 4];
        for i in 0..400u16 {
            let f = udp4(None, 0, [10, 0, 0, 1], 1000 + i, 53);
            let w = d.worker_for(1, &f);
            assert_eq!(w, d.worker_for(2, &f), "same flow, same worker");
            seen[w] += 1;
        }
        assert!(seen.iter().all(|&n| n > 40), "spread {seen:?}");
    }

    #[test]
    fn port_and_l2_keys() {
        let d = Dispatcher::new(DispatchKey::Port, 3);
        let f = udp4(None, 0, [1, 2, 3, 4], 1, 2);
        let g = udp4(None, 0, [5, 6, 7, 8], 9, 9);
        assert_eq!(d.worker_for(7, &f), d.worker_for(7, &g));
        let l2 = Dispatcher::new(DispatchKey::L2, 3);
        // Same MACs, different IPs: same worker by L2.
        assert_eq!(l2.worker_for(1, &f), l2.worker_for(2, &g));
    }

    #[test]
    fn priority_class_takes_ef_to_its_worker_and_others_elsewhere() {
        let rule = ClassRule {
            ip_dscp: Some(46),
            worker: 0,
            ..Default::default()
        };
        let d = Dispatcher::with_classes(DispatchKey::FiveTuple, 3, vec![rule]);
        for i in 0..100u16 {
            let ef = udp4(Some((5, 10)), 46, [10, 0, 0, 1], i, 5004);
            assert_eq!(d.worker_for(1, &ef), 0);
            let be = udp4(Some((0, 10)), 0, [10, 0, 0, 1], i, 5004);
            assert_ne!(d.worker_for(1, &be), 0);
        }
        let udp_rule = ClassRule {
            udp_dst: Some(5004),
            worker: 2,
            ..Default::default()
        };
        let d = Dispatcher::with_classes(DispatchKey::FiveTuple, 3, vec![udp_rule]);
        assert_eq!(d.worker_for(1, &udp4(None, 0, [1, 1, 1, 1], 7, 5004)), 2);
        assert_ne!(d.worker_for(1, &udp4(None, 0, [1, 1, 1, 1], 7, 5005)), 2);
        // An empty rule matches nothing.
        let d = Dispatcher::with_classes(DispatchKey::Port, 2, vec![ClassRule::default()]);
        assert_eq!(
            d.worker_for(1, &udp4(None, 0, [1, 1, 1, 1], 7, 5005)),
            d.worker_for(1, &[])
        );
    }

    #[test]
    fn short_and_garbage_frames_do_not_panic() {
        let d = Dispatcher::with_classes(
            DispatchKey::FiveTuple,
            4,
            vec![ClassRule {
                tcp_dst: Some(80),
                worker: 1,
                ..Default::default()
            }],
        );
        let full = udp4(Some((1, 2)), 10, [1, 2, 3, 4], 5, 6);
        for n in 0..full.len() {
            assert!(d.worker_for(1, &full[..n]) < 4);
        }
        for b in 0..=255u8 {
            assert!(d.worker_for(1, &[b; 40]) < 4);
        }
    }
}
