//! Per-worker counters as plain data, and how they add up.
//!
//! Every worker writes its own [`Counters`] with plain `+=` (no atomics,
//! no locks, no cache line shared with another worker); the control side
//! takes them, adds them up with [`Counters::merge`], and either reads the
//! sum (ports, queues, drops) or folds it into the control-side tables
//! ([`crate::SwitchState::fold`]: flows, tables, groups, meters, ports).
//! Keys are the control side's ids (flow ids, table numbers, group ids,
//! port numbers, `(port, queue)` pairs, meter ids); a key that no longer
//! exists when folded (the flow was deleted meanwhile) is ignored.
//!
//! A worker hands its counters over every 20 ms (the runtime's
//! `SYNC_EVERY`), up to hundreds of thousands of flows at a time on a busy
//! gateway. Flow hits counted by slot go over as a flat list
//! ([`Counters::by_slot`]: one sequential write per entry hit, no hashing
//! on the worker), which the control side applies by slot; the few hits
//! counted without a slot go into a map keyed with [`FlowIdHasher`] (one
//! multiply, not SipHash). See `pipeline::datapath::counters` for the
//! worker's side.

use crate::model::drops::DropCounters;
use crate::model::flow_entry::FlowId;
use crate::Time;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher of maps keyed by [`FlowId`]: a 128-bit multiply by an odd
/// constant, folded (the high half xor the low half), so both the low
/// bits that pick a bucket and the high bits the table compares first
/// depend on every bit of the id.
///
/// Why not SipHash (std's default): it guards a map against keys chosen
/// to collide, and flow ids are not chosen by anyone outside: the control
/// side numbers entries itself, one after another (`Tables`' `next_id`).
/// SipHash was 2.8 % of a DPDK worker's time plus much of the 7.8 % in
/// `hash_one` when its counters were handed over (issue #34); this is a
/// few cycles. An identity hash would not do: sequential ids have equal
/// high bits, which the standard table uses as each slot's tag.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowIdHasher(u64);

impl FlowIdHasher {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    #[inline]
    fn mix(x: u64) -> u64 {
        let m = u128::from(x) * u128::from(Self::K);
        (m as u64) ^ ((m >> 64) as u64)
    }
}

impl Hasher for FlowIdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Not used by `FlowId` (its `Hash` writes one u64); any other key
        // still hashes every byte.
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(chunk) {
                *d = *s;
            }
            self.write_u64(u64::from_le_bytes(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = Self::mix(self.0 ^ x);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by [`FlowId`] (hashed with [`FlowIdHasher`]).
pub type FlowMap<V> = HashMap<FlowId, V, BuildHasherDefault<FlowIdHasher>>;

/// Counters of one flow entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCounter {
    /// Packets that hit the entry.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The latest hit (restarts the idle timeout).
    pub last_hit: Time,
}

impl FlowCounter {
    /// Adds `packets` hits of `bytes` bytes in all, the latest at
    /// `last_hit`.
    pub fn add(&mut self, packets: u64, bytes: u64, last_hit: Time) {
        self.packets += packets;
        self.bytes += bytes;
        self.last_hit = self.last_hit.max(last_hit);
    }
}

/// What a worker counted for one entry since it last handed its counters
/// over, with where it counted it: the entry's table and its slot there
/// (the slot the control side keeps the entry's counters in too, see
/// `Tables::add_hits_at`). The id says which entry: a slot is reused
/// once its entry is removed, and a worker may still count for the old
/// one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotHits {
    /// The entry.
    pub id: FlowId,
    /// Packets that hit it.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The latest hit.
    pub last_hit: Time,
    /// Its slot in its table.
    pub slot: u32,
    /// Its table.
    pub table: u8,
}

/// Counters of one flow table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableCounter {
    /// Lookups done in the table.
    pub lookups: u64,
    /// Lookups that hit an entry.
    pub matched: u64,
}

/// Counters of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounter {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Received packets dropped (the port is `NO_RECV`).
    pub rx_dropped: u64,
    /// Packets not sent because the port is down, `NO_FWD` or missing.
    pub tx_dropped: u64,
}

impl PortCounter {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &PortCounter) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.rx_dropped += o.rx_dropped;
        self.tx_dropped += o.tx_dropped;
    }
}

/// Counters of one queue of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounter {
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

/// Counters of one group and its buckets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupCounter {
    /// Packets processed by the group (once each, however many buckets).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `(packets, bytes)` per bucket, by bucket index.
    pub buckets: Vec<(u64, u64)>,
}

/// What this worker sent through one meter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeterCounter {
    /// Packets metered.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `(packets, bytes)` per band that applied, by band index.
    pub bands: Vec<(u64, u64)>,
}

/// One worker's counters. See the module comment. Two are equal when
/// they count the same: flow hits compare by flow id, however they were
/// handed over (by slot or not, in one record or several).
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Flow hits counted by slot, one record per entry and hand-over (an
    /// entry may appear more than once: its counts are the sum).
    pub by_slot: Vec<SlotHits>,
    /// Flow hits counted without a slot, by flow id.
    pub flows: FlowMap<FlowCounter>,
    /// By table number.
    pub tables: HashMap<u8, TableCounter>,
    /// By port number.
    pub ports: HashMap<u32, PortCounter>,
    /// By `(port, queue)`.
    pub queues: HashMap<(u32, u32), QueueCounter>,
    /// By group id.
    pub groups: HashMap<u32, GroupCounter>,
    /// By meter id.
    pub meters: HashMap<u32, MeterCounter>,
    /// Drops by cause.
    pub drops: DropCounters,
}

impl PartialEq for Counters {
    fn eq(&self, o: &Counters) -> bool {
        self.tables == o.tables
            && self.ports == o.ports
            && self.queues == o.queues
            && self.groups == o.groups
            && self.meters == o.meters
            && self.drops == o.drops
            && self.by_flow() == o.by_flow()
    }
}

impl Eq for Counters {}

fn add_pairs(into: &mut Vec<(u64, u64)>, from: &[(u64, u64)]) {
    if into.len() < from.len() {
        into.resize(from.len(), (0, 0));
    }
    for (a, b) in into.iter_mut().zip(from) {
        a.0 += b.0;
        a.1 += b.1;
    }
}

fn bump_pair(v: &mut Vec<(u64, u64)>, i: usize, bytes: u64) {
    if v.len() <= i {
        v.resize(i + 1, (0, 0));
    }
    if let Some(p) = v.get_mut(i) {
        p.0 += 1;
        p.1 += bytes;
    }
}

impl Counters {
    /// A flow entry was hit by a packet of `bytes` bytes at `now`.
    pub fn flow_hit(&mut self, id: FlowId, bytes: u64, now: Time) {
        self.add_flow(id, 1, bytes, now);
    }

    /// Flow entry `id` was hit by `packets` packets of `bytes` bytes in
    /// all, the latest at `last_hit`.
    pub fn add_flow(&mut self, id: FlowId, packets: u64, bytes: u64, last_hit: Time) {
        self.flows
            .entry(id)
            .or_default()
            .add(packets, bytes, last_hit);
    }

    /// A lookup in table `t`.
    pub fn table_lookup(&mut self, t: u8, matched: bool) {
        let c = self.tables.entry(t).or_default();
        c.lookups += 1;
        c.matched += u64::from(matched);
    }

    /// The counters of port `p`, created on first use.
    pub fn port(&mut self, p: u32) -> &mut PortCounter {
        self.ports.entry(p).or_default()
    }

    /// A packet of `bytes` bytes was sent on queue `q` of port `p`.
    pub fn queue_tx(&mut self, p: u32, q: u32, bytes: u64) {
        self.queue_tx_many(p, q, 1, bytes);
    }

    /// `packets` packets of `bytes` bytes in all were sent on queue `q`
    /// of port `p`.
    pub fn queue_tx_many(&mut self, p: u32, q: u32, packets: u64, bytes: u64) {
        let c = self.queues.entry((p, q)).or_default();
        c.tx_packets += packets;
        c.tx_bytes += bytes;
    }

    /// A packet of `bytes` bytes was processed by group `g`.
    pub fn group_hit(&mut self, g: u32, bytes: u64) {
        let c = self.groups.entry(g).or_default();
        c.packets += 1;
        c.bytes += bytes;
    }

    /// A packet of `bytes` bytes went through bucket `b` of group `g`.
    pub fn bucket_hit(&mut self, g: u32, b: usize, bytes: u64) {
        bump_pair(&mut self.groups.entry(g).or_default().buckets, b, bytes);
    }

    /// A packet of `bytes` bytes went through meter `m`; `band` is the
    /// band that applied, if any.
    pub fn meter_hit(&mut self, m: u32, band: Option<usize>, bytes: u64) {
        let c = self.meters.entry(m).or_default();
        c.packets += 1;
        c.bytes += bytes;
        if let Some(b) = band {
            bump_pair(&mut c.bands, b, bytes);
        }
    }

    /// Every flow's counts, by flow id: [`Counters::flows`] and
    /// [`Counters::by_slot`] added up (for tests and reports; the control
    /// side folds the list by slot instead).
    pub fn by_flow(&self) -> FlowMap<FlowCounter> {
        let mut m = self.flows.clone();
        for h in &self.by_slot {
            m.entry(h.id)
                .or_default()
                .add(h.packets, h.bytes, h.last_hit);
        }
        m
    }

    /// What these counters hold for entry `id` (both forms added up).
    /// O(flows counted): for a few ids, such as removed entries' late
    /// hits.
    pub fn flow(&self, id: FlowId) -> Option<FlowCounter> {
        let mut found = self.flows.get(&id).copied();
        for h in self.by_slot.iter().filter(|h| h.id == id) {
            found
                .get_or_insert_with(FlowCounter::default)
                .add(h.packets, h.bytes, h.last_hit);
        }
        found
    }

    /// Nothing counted (every map empty, every drop zero).
    pub fn is_empty(&self) -> bool {
        self.by_slot.is_empty()
            && self.flows.is_empty()
            && self.tables.is_empty()
            && self.ports.is_empty()
            && self.queues.is_empty()
            && self.groups.is_empty()
            && self.meters.is_empty()
            && self.drops == DropCounters::default()
    }

    /// Forgets everything counted, keeping each map's room, so that the
    /// next hand-over fills them again without growing them.
    pub fn clear(&mut self) {
        self.by_slot.clear();
        self.flows.clear();
        self.tables.clear();
        self.ports.clear();
        self.queues.clear();
        self.groups.clear();
        self.meters.clear();
        self.drops = DropCounters::default();
    }

    /// Gives the room of `used`'s flow list (a slot's counters the
    /// control side took and folded) back to `self`, the slot the worker
    /// hands over into next, unless that has started a list of its own
    /// meanwhile: the worker's next hand-overs then append without
    /// growing it.
    pub fn give_room_back(&mut self, used: &mut Counters) {
        used.by_slot.clear();
        if self.by_slot.is_empty() && self.by_slot.capacity() < used.by_slot.capacity() {
            std::mem::swap(&mut self.by_slot, &mut used.by_slot);
        }
    }

    /// Adds another worker's counters to these.
    pub fn merge(&mut self, o: &Counters) {
        self.by_slot.extend_from_slice(&o.by_slot);
        if self.flows.is_empty() {
            // A copy of the table (no hashing), reusing this one's room.
            self.flows.clone_from(&o.flows);
        } else {
            for (id, f) in &o.flows {
                self.add_flow(*id, f.packets, f.bytes, f.last_hit);
            }
        }
        self.merge_without_flows(o);
    }

    /// Adds another worker's counters to these, except its flow hits: for
    /// running totals (by table, port, group, meter, drop cause) that
    /// would otherwise keep a record of every flow ever hit.
    pub fn merge_without_flows(&mut self, o: &Counters) {
        for (t, f) in &o.tables {
            let c = self.tables.entry(*t).or_default();
            c.lookups += f.lookups;
            c.matched += f.matched;
        }
        for (p, f) in &o.ports {
            self.ports.entry(*p).or_default().add(f);
        }
        for (q, f) in &o.queues {
            let c = self.queues.entry(*q).or_default();
            c.tx_packets += f.tx_packets;
            c.tx_bytes += f.tx_bytes;
        }
        for (g, f) in &o.groups {
            let c = self.groups.entry(*g).or_default();
            c.packets += f.packets;
            c.bytes += f.bytes;
            add_pairs(&mut c.buckets, &f.buckets);
        }
        for (m, f) in &o.meters {
            let c = self.meters.entry(*m).or_default();
            c.packets += f.packets;
            c.bytes += f.bytes;
            add_pairs(&mut c.bands, &f.bands);
        }
        self.drops.merge(&o.drops);
    }

    /// The sum of several workers' counters.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Counters>) -> Counters {
        let mut total = Counters::default();
        for c in all {
            total.merge(c);
        }
        total
    }

    /// Port statistics (spec §7.3.5.6) for every port these counters have
    /// seen, by port number; durations are left at zero for the caller.
    pub fn port_stats(&self) -> Vec<ofp::stats::PortStats> {
        let mut v: Vec<ofp::stats::PortStats> = self
            .ports
            .iter()
            .map(|(p, c)| ofp::stats::PortStats {
                port_no: *p,
                rx_packets: c.rx_packets,
                tx_packets: c.tx_packets,
                rx_bytes: c.rx_bytes,
                tx_bytes: c.tx_bytes,
                rx_dropped: c.rx_dropped,
                tx_dropped: c.tx_dropped,
                ..Default::default()
            })
            .collect();
        v.sort_by_key(|s| s.port_no);
        v
    }

    /// Queue statistics for every `(port, queue)` seen, sorted.
    pub fn queue_stats(&self) -> Vec<ofp::stats::QueueStats> {
        let mut v: Vec<ofp::stats::QueueStats> = self
            .queues
            .iter()
            .map(|((p, q), c)| ofp::stats::QueueStats {
                port_no: *p,
                queue_id: *q,
                tx_bytes: c.tx_bytes,
                tx_packets: c.tx_packets,
                tx_errors: 0,
                duration_sec: 0,
                duration_nsec: 0,
            })
            .collect();
        v.sort_by_key(|s| (s.port_no, s.queue_id));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_goes_back_only_to_a_slot_without_records() {
        let hit = SlotHits {
            id: FlowId(1),
            packets: 1,
            bytes: 60,
            last_hit: Time(1),
            slot: 0,
            table: 0,
        };
        let mut used = Counters {
            by_slot: vec![hit; 100],
            ..Counters::default()
        };
        let mut slot = Counters::default();
        slot.give_room_back(&mut used);
        assert!(slot.by_slot.is_empty() && slot.by_slot.capacity() >= 100);
        // A slot the worker has handed over into meanwhile keeps its list.
        let mut used = Counters {
            by_slot: vec![hit; 1000],
            ..Counters::default()
        };
        slot.by_slot.push(hit);
        slot.give_room_back(&mut used);
        assert_eq!(slot.by_slot, vec![hit]);
        assert!(used.by_slot.is_empty());
    }

    #[test]
    fn merge_adds_everything_and_keeps_latest_hit() {
        let mut a = Counters::default();
        a.flow_hit(FlowId(1), 100, Time(5));
        a.table_lookup(0, true);
        a.port(1).rx_packets += 1;
        a.queue_tx(2, 1, 60);
        a.group_hit(7, 60);
        a.bucket_hit(7, 1, 60);
        a.meter_hit(3, Some(0), 60);
        a.drops.no_match += 1;
        let mut b = Counters::default();
        b.flow_hit(FlowId(1), 50, Time(9));
        b.flow_hit(FlowId(2), 10, Time(1));
        b.table_lookup(0, false);
        b.port(1).rx_packets += 2;
        b.queue_tx(2, 1, 40);
        b.bucket_hit(7, 0, 40);
        b.bucket_hit(7, 1, 40);
        b.meter_hit(3, None, 40);
        b.drops.no_match += 2;
        let s = Counters::sum([&a, &b]);
        assert_eq!(
            s.flows[&FlowId(1)],
            FlowCounter {
                packets: 2,
                bytes: 150,
                last_hit: Time(9)
            }
        );
        assert_eq!(s.flows[&FlowId(2)].packets, 1);
        assert_eq!(
            s.tables[&0],
            TableCounter {
                lookups: 2,
                matched: 1
            }
        );
        assert_eq!(s.ports[&1].rx_packets, 3);
        assert_eq!(s.queues[&(2, 1)].tx_bytes, 100);
        assert_eq!(s.groups[&7].buckets, vec![(1, 40), (2, 100)]);
        assert_eq!((s.groups[&7].packets, s.groups[&7].bytes), (1, 60));
        assert_eq!(s.meters[&3].packets, 2);
        assert_eq!(s.meters[&3].bands, vec![(1, 60)]);
        assert_eq!(s.drops.no_match, 3);
        assert_eq!(s.port_stats()[0].rx_packets, 3);
        assert_eq!(s.queue_stats()[0].tx_packets, 2);
        assert!(s.drops.named().contains(&("no_match", 3)));
    }
}
