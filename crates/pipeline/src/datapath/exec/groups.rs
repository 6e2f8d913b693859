//! Groups (spec §5.6, §6.5): all, select, indirect and fast failover,
//! bucket liveness (watch port and group) and the flow hash that keeps a
//! flow on one select bucket.

use crate::datapath::counters::DropReason;
use crate::datapath::output::TraceEvent;
use ofp::consts::{group_no, port_no};
use ofp::{Action, Bucket, GroupType};
use packet::flow_key::FlowKey;

use super::{Exec, Pkt};

/// A hash of the flow's L2, ARP and 5-tuple fields: the same for every
/// packet of one flow, so a select group keeps a flow on one bucket (ARP
/// addresses count, so ARP conversations spread over the buckets too).
#[inline]
pub(super) fn flow_hash(k: &FlowKey) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    };
    eat(&k.eth_src);
    eat(&k.eth_dst);
    eat(&k.eth_type.to_be_bytes());
    eat(&k.vlan_vid.to_be_bytes());
    eat(&k.ipv4_src.to_be_bytes());
    eat(&k.ipv4_dst.to_be_bytes());
    eat(&k.ipv6_src.to_be_bytes());
    eat(&k.ipv6_dst.to_be_bytes());
    eat(&[k.ip_proto]);
    eat(&k.tp_src.to_be_bytes());
    eat(&k.tp_dst.to_be_bytes());
    eat(&k.mpls_label.to_be_bytes());
    eat(&k.arp_spa.to_be_bytes());
    eat(&k.arp_tpa.to_be_bytes());
    // FNV's low bits are only the parity of the input bytes (the prime is
    // odd); the bucket choice takes a remainder, so mix the high bits down.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

impl Exec<'_> {
    /// Runs group `id` on `pkt`.
    pub fn group(&mut self, mut pkt: Pkt, id: u32, depth: u8) {
        let groups = self.groups;
        let g = match groups.get(id) {
            Some(g) if depth < self.config.max_group_depth => g,
            _ => {
                self.dropped(DropReason::GroupDrop);
                return;
            }
        };
        let len = pkt.buf.len() as u64;
        self.counters.group_hit(id, len);
        match g.group_type {
            GroupType::All => {
                for (i, b) in g.buckets.iter().enumerate() {
                    self.counters.bucket_hit(id, i, len);
                    self.trace(|| TraceEvent::Group {
                        group_id: id,
                        bucket: Some(i),
                    });
                    self.bucket(pkt.clone(), b, depth);
                }
            }
            GroupType::Indirect | GroupType::Select | GroupType::FastFailover => {
                let chosen = match g.group_type {
                    GroupType::Indirect => (!g.buckets.is_empty()).then_some(0),
                    GroupType::Select => {
                        let k = *pkt.key();
                        self.select_bucket(&g.buckets, &k, depth)
                    }
                    _ => g.buckets.iter().position(|b| self.bucket_live(b, depth)),
                };
                self.trace(|| TraceEvent::Group {
                    group_id: id,
                    bucket: chosen,
                });
                match chosen.and_then(|i| g.buckets.get(i).map(|b| (i, b))) {
                    Some((i, b)) => {
                        self.counters.bucket_hit(id, i, len);
                        self.bucket(pkt, b, depth);
                    }
                    None => self.dropped(DropReason::GroupDrop),
                }
            }
        }
    }

    pub(super) fn bucket(&mut self, mut pkt: Pkt, b: &Bucket, depth: u8) {
        for a in &b.actions {
            let r = match a {
                Action::Group { group_id } => {
                    self.trace(|| TraceEvent::Action {
                        action: a.clone(),
                        error: None,
                    });
                    self.group(pkt.clone(), *group_id, depth.saturating_add(1));
                    Ok(())
                }
                _ => self.action(&mut pkt, a, depth),
            };
            if r.is_err() {
                return;
            }
        }
    }

    /// A live bucket chosen by weight from the flow's hash.
    pub(super) fn select_bucket(
        &self,
        buckets: &[Bucket],
        key: &FlowKey,
        depth: u8,
    ) -> Option<usize> {
        let live = |b: &Bucket| b.weight > 0 && self.bucket_live(b, depth);
        let total: u64 = buckets
            .iter()
            .filter(|b| live(b))
            .map(|b| u64::from(b.weight))
            .sum();
        if total == 0 {
            return None;
        }
        let mut pick = flow_hash(key) % total;
        for (i, b) in buckets.iter().enumerate() {
            if !live(b) {
                continue;
            }
            let w = u64::from(b.weight);
            if pick < w {
                return Some(i);
            }
            pick -= w;
        }
        None
    }

    /// Bucket liveness (spec §6.5): its watched port is live and its
    /// watched group has a live bucket. Unwatched counts as live.
    pub fn bucket_live(&self, b: &Bucket, depth: u8) -> bool {
        let port_ok = b.watch_port == port_no::ANY || self.ports.is_live(b.watch_port);
        port_ok && (b.watch_group == group_no::ANY || self.group_live(b.watch_group, depth + 1))
    }

    pub(super) fn group_live(&self, id: u32, depth: u8) -> bool {
        depth < self.config.max_group_depth
            && self
                .groups
                .get(id)
                .is_some_and(|g| g.buckets.iter().any(|b| self.bucket_live(b, depth)))
    }
}

#[cfg(test)]
mod tests {
    use super::flow_hash;
    use packet::flow_key::FlowKey;

    fn arp(spa: [u8; 4], tpa: [u8; 4]) -> FlowKey {
        let mut f = vec![0xff; 6];
        f.extend([0x02, 0, 0, 0, 0, 1, 0x08, 0x06]);
        f.extend([0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend([0x02, 0, 0, 0, 0, 1]);
        f.extend(spa);
        f.extend([0; 6]);
        f.extend(tpa);
        FlowKey::parse(&f)
    }

    #[test]
    fn arp_conversations_spread_over_select_buckets() {
        // The os-ken select-group tests send ARP with random addresses and
        // expect traffic on every bucket.
        let mut buckets = [0u32; 2];
        for i in 0..200u8 {
            let h = flow_hash(&arp([10, 0, i, 1], [10, 1, 0, i]));
            buckets[(h % 2) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| n > 50), "{buckets:?}");
        // And one conversation always hashes the same.
        assert_eq!(
            flow_hash(&arp([10, 0, 0, 1], [10, 0, 0, 2])),
            flow_hash(&arp([10, 0, 0, 1], [10, 0, 0, 2]))
        );
    }
}
