//! Per-worker counters, and how the control side sums them.
//!
//! Design: every pipeline instance ([`super::Datapath`]) is owned by one
//! worker thread and writes its own [`Counters`] with plain `+=` — no
//! atomics, no locks, no cache line shared with another worker on the
//! fast path. The control side reads them by asking each worker for a
//! snapshot (or taking them, leaving zeros) and adding them up with
//! [`Counters::merge`]; the sum is then either read directly (ports,
//! queues, drops) or folded into the control-side tables with
//! [`Counters::fold_into`] (flows, tables, groups), whose multipart answers
//! ([`crate::SwitchState::multipart`]) then report totals.
//!
//! Keys are the control side's ids (flow ids, table numbers, group ids,
//! port numbers, `(port, queue)` pairs, meter ids); a key that no longer
//! exists when folded (the flow was deleted meanwhile) is ignored.
//!
//! On the packet path the flow, table, port and queue-0 counters are
//! bumped in [`HotCounters`] (arrays indexed by entry slot, table number
//! and port number) and moved into `Counters`' maps when a worker's
//! counters are read or taken; the maps are what the control side sees.
//!
//! Meters too: each worker measures with its own share of a meter (see
//! [`super::worker`]), so the per-worker meter counters here are the only
//! record of what the meter saw; [`Counters::fold_into`] adds them to the
//! control-side meter, whose statistics then report the total.
//!
//! Folding is O(keys): one bulk add per flow, table, group and meter
//! ([`crate::Tables::add_hits`], [`crate::Tables::note_lookups`],
//! [`crate::Groups::add_counts`], [`crate::Meters::add_counts`]), never one
//! call per packet.

use crate::model::flow_entry::FlowId;
use crate::SwitchState;
use crate::Time;
use std::collections::HashMap;

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

/// Packets the pipeline dropped, by cause (every drop has a name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounters {
    /// No entry matched and the table has no table-miss entry.
    pub no_match: u64,
    /// A meter band dropped the packet.
    pub meter_drop: u64,
    /// A TTL action found a TTL of 0 or 1 (sent to the controller as well
    /// when the switch config asks for it).
    pub invalid_ttl: u64,
    /// An output to a port that is missing, down or `NO_FWD`.
    pub port_down: u64,
    /// Received on a `NO_RECV` port.
    pub port_no_recv: u64,
    /// Output to `OFPP_NORMAL` (not implemented) or `OFPP_TABLE` outside a
    /// packet-out.
    pub unsupported_output: u64,
    /// An action that could not apply to this packet (pop on a missing
    /// header, set-field without its prerequisite); the action is skipped,
    /// the packet goes on.
    pub action_failed: u64,
    /// A group that does not exist, a group with no live bucket, or a
    /// chain deeper than the bound.
    pub group_drop: u64,
    /// Packet-ins not sent: the ingress port is `NO_PACKET_IN`.
    pub packet_in_blocked: u64,
    /// The pipeline finished with no output (an empty action set); not an
    /// error, counted so traffic is never lost silently.
    pub no_output: u64,
}

impl DropCounters {
    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &DropCounters) {
        self.no_match += o.no_match;
        self.meter_drop += o.meter_drop;
        self.invalid_ttl += o.invalid_ttl;
        self.port_down += o.port_down;
        self.port_no_recv += o.port_no_recv;
        self.unsupported_output += o.unsupported_output;
        self.action_failed += o.action_failed;
        self.group_drop += o.group_drop;
        self.packet_in_blocked += o.packet_in_blocked;
        self.no_output += o.no_output;
    }

    /// `(name, value)` for each counter, for metrics and logs.
    pub fn named(&self) -> [(&'static str, u64); 10] {
        [
            ("no_match", self.no_match),
            ("meter_drop", self.meter_drop),
            ("invalid_ttl", self.invalid_ttl),
            ("port_down", self.port_down),
            ("port_no_recv", self.port_no_recv),
            ("unsupported_output", self.unsupported_output),
            ("action_failed", self.action_failed),
            ("group_drop", self.group_drop),
            ("packet_in_blocked", self.packet_in_blocked),
            ("no_output", self.no_output),
        ]
    }
}

/// A flow counter kept by slot (see [`HotCounters`]).
#[derive(Clone, Copy, Debug)]
struct SlotCounter {
    id: FlowId,
    packets: u64,
    bytes: u64,
    last_hit: Time,
}

impl Default for SlotCounter {
    fn default() -> Self {
        SlotCounter {
            id: FlowId(0),
            packets: 0,
            bytes: 0,
            last_hit: Time(0),
        }
    }
}

/// The counters a worker bumps for every packet, kept where a bump is one
/// indexed add: flow hits by (table, entry slot) in a plain vector per
/// table, table lookups in an array by table number. They move into
/// [`Counters`] (`flows`, `tables`) when the counters are read
/// ([`HotCounters::settle`]): O(flows hit since the last read), not
/// O(slots), thanks to the `touched` list.
///
/// A slot is reused when its entry is removed and another installed; a
/// hit for a different id than the one a slot counts for settles the old
/// id's count first, so nothing is ever attributed to the wrong entry.
///
/// Why: the `HashMap<FlowId, _>` bump this replaces was a SipHash plus
/// two cache misses per packet with 100K flows (13% of the gateway
/// benchmark's time in perf, more with 1M).
#[derive(Clone, Debug, Default)]
pub struct HotCounters {
    flows: Vec<Vec<SlotCounter>>,
    touched: Vec<(u8, u32)>,
    tables: Vec<TableCounter>,
    /// By port number, for ports below [`HOT_PORTS`].
    ports: Vec<PortCounter>,
    /// Queue 0 by port number, for ports below [`HOT_PORTS`].
    queues0: Vec<QueueCounter>,
}

/// Ports numbered below this are counted in [`HotCounters`]' arrays;
/// others (LOCAL, huge numbers) in [`Counters`]' maps directly.
pub const HOT_PORTS: u32 = 4096;

impl HotCounters {
    /// Entry `id` in slot `slot` of table `table` was hit by a packet of
    /// `bytes` bytes at `now`.
    #[inline]
    pub fn flow_hit(
        &mut self,
        c: &mut Counters,
        table: u8,
        slot: u32,
        id: FlowId,
        bytes: u64,
        now: Time,
    ) {
        let t = usize::from(table);
        if self.flows.len() <= t {
            self.flows.resize_with(t + 1, Vec::new);
        }
        let Some(v) = self.flows.get_mut(t) else {
            return;
        };
        let s = slot as usize;
        if v.len() <= s {
            v.resize((s + 1).next_power_of_two().max(64), SlotCounter::default());
        }
        let Some(sc) = v.get_mut(s) else {
            return;
        };
        if sc.packets == 0 {
            sc.id = id;
            self.touched.push((table, slot));
        } else if sc.id != id {
            // The slot was reused: settle the old entry's count.
            let old = std::mem::take(sc);
            c.add_flow(old.id, old.packets, old.bytes, old.last_hit);
            sc.id = id;
        }
        sc.packets += 1;
        sc.bytes += bytes;
        sc.last_hit = sc.last_hit.max(now);
    }

    /// Makes room for the counters of slots `0..n` of table `table` at
    /// once (rather than growing as slots are first hit, which copied the
    /// vector several times during the first second of traffic).
    #[inline]
    pub fn reserve(&mut self, table: u8, n: usize) {
        let t = usize::from(table);
        if self.flows.len() <= t {
            self.flows.resize_with(t + 1, Vec::new);
        }
        if let Some(v) = self.flows.get_mut(t) {
            if v.len() < n {
                v.resize(n, SlotCounter::default());
            }
        }
    }

    /// A lookup in table `t`.
    #[inline]
    pub fn table_lookup(&mut self, t: u8, matched: bool) {
        let i = usize::from(t);
        if self.tables.len() <= i {
            self.tables.resize(256, TableCounter::default());
        }
        if let Some(c) = self.tables.get_mut(i) {
            c.lookups += 1;
            c.matched += u64::from(matched);
        }
    }

    /// The counters of port `p`.
    #[inline]
    pub fn port<'c>(&'c mut self, c: &'c mut Counters, p: u32) -> &'c mut PortCounter {
        if p >= HOT_PORTS {
            return c.port(p);
        }
        let i = p as usize;
        if self.ports.len() <= i {
            self.ports.resize(i + 1, PortCounter::default());
        }
        match self.ports.get_mut(i) {
            Some(pc) => pc,
            None => c.port(p),
        }
    }

    /// A packet of `bytes` bytes was sent on queue `q` of port `p`.
    #[inline]
    pub fn queue_tx(&mut self, c: &mut Counters, p: u32, q: u32, bytes: u64) {
        if q != 0 || p >= HOT_PORTS {
            return c.queue_tx(p, q, bytes);
        }
        let i = p as usize;
        if self.queues0.len() <= i {
            self.queues0.resize(i + 1, QueueCounter::default());
        }
        if let Some(qc) = self.queues0.get_mut(i) {
            qc.tx_packets += 1;
            qc.tx_bytes += bytes;
        }
    }

    /// Hints the CPU to load slot `slot`'s counter of table `table`.
    #[inline]
    pub fn prefetch(&self, table: u8, slot: u32) {
        if let Some(c) = self
            .flows
            .get(usize::from(table))
            .and_then(|v| v.get(slot as usize))
        {
            classifier::prefetch(c);
        }
    }

    /// Moves everything counted here into `c`, leaving zeros (the
    /// vectors keep their size).
    pub fn settle(&mut self, c: &mut Counters) {
        for (t, s) in self.touched.drain(..) {
            let sc = self
                .flows
                .get_mut(usize::from(t))
                .and_then(|v| v.get_mut(s as usize));
            if let Some(sc) = sc {
                let old = std::mem::take(sc);
                if old.packets > 0 {
                    c.add_flow(old.id, old.packets, old.bytes, old.last_hit);
                }
            }
        }
        for (p, pc) in self.ports.iter_mut().enumerate() {
            if *pc != PortCounter::default() {
                c.port(p as u32).add(&std::mem::take(pc));
            }
        }
        for (p, qc) in self.queues0.iter_mut().enumerate() {
            if qc.tx_packets > 0 {
                let d = c.queues.entry((p as u32, 0)).or_default();
                d.tx_packets += qc.tx_packets;
                d.tx_bytes += qc.tx_bytes;
                *qc = QueueCounter::default();
            }
        }
        for (t, tc) in self.tables.iter_mut().enumerate() {
            if tc.lookups > 0 {
                let d = c.tables.entry(t as u8).or_default();
                d.lookups += tc.lookups;
                d.matched += tc.matched;
                *tc = TableCounter::default();
            }
        }
    }
}

/// One worker's counters. See the module comment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// By flow id.
    pub flows: HashMap<FlowId, FlowCounter>,
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
        let c = self.flows.entry(id).or_default();
        c.packets += packets;
        c.bytes += bytes;
        c.last_hit = c.last_hit.max(last_hit);
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
        let c = self.queues.entry((p, q)).or_default();
        c.tx_packets += 1;
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

    /// Adds another worker's counters to these.
    pub fn merge(&mut self, o: &Counters) {
        for (id, f) in &o.flows {
            let c = self.flows.entry(*id).or_default();
            c.packets += f.packets;
            c.bytes += f.bytes;
            c.last_hit = c.last_hit.max(f.last_hit);
        }
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

    /// Adds the flow, table, group and meter counters to the control-side
    /// entries (so flow, aggregate, table, group and meter statistics
    /// report them, and idle timeouts see the last hit). Call it with
    /// counters taken from the workers (`std::mem::take`), so nothing is
    /// added twice. Costs one bulk add per key (flow, table, group,
    /// meter), whatever the number of packets counted.
    ///
    /// Ports and queues are not folded here: see
    /// [`crate::PortTable::fold`] (called by [`crate::SwitchState::fold`]).
    pub fn fold_into(&self, state: &mut SwitchState) {
        for (id, f) in &self.flows {
            state.tables.add_hits(*id, f.packets, f.bytes, f.last_hit);
        }
        for (t, c) in &self.tables {
            state.tables.note_lookups(*t, c.lookups, c.matched);
        }
        for (g, c) in &self.groups {
            state.groups.add_counts(*g, c.packets, c.bytes, &c.buckets);
        }
        for (m, c) in &self.meters {
            state.meters.add_counts(*m, c.packets, c.bytes, &c.bands);
        }
    }

    /// The fold as it was first written: one control-side `note_*` call
    /// per counted packet. The reference [`Counters::fold_into`] is tested
    /// against.
    #[cfg(test)]
    pub(crate) fn fold_per_packet(&self, state: &mut SwitchState) {
        for (id, f) in &self.flows {
            for i in 0..f.packets {
                let bytes = if i == 0 { f.bytes } else { 0 };
                if !state.tables.note_hit(*id, f.last_hit, bytes) {
                    break;
                }
            }
        }
        for (t, c) in &self.tables {
            for i in 0..c.lookups {
                state.tables.note_lookup(*t, i < c.matched);
            }
        }
        for (g, c) in &self.groups {
            for i in 0..c.packets {
                let n = if i == 0 { c.bytes } else { 0 };
                if !state.groups.note_group_hit(*g, n) {
                    break;
                }
            }
            for (b, (packets, bytes)) in c.buckets.iter().enumerate() {
                for i in 0..*packets {
                    let n = if i == 0 { *bytes } else { 0 };
                    if !state.groups.note_bucket_hit(*g, b, n) {
                        break;
                    }
                }
            }
        }
        for (m, c) in &self.meters {
            state.meters.add_counts(*m, c.packets, c.bytes, &c.bands);
        }
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

    /// Folding a trillion counted packets is one add per key (a
    /// per-packet fold would never finish this test).
    #[test]
    fn folding_costs_keys_not_packets() {
        use crate::{GroupsConfig, MetersConfig, TablesConfig};
        let mut s = SwitchState::new(
            TablesConfig {
                n_tables: 2,
                ..TablesConfig::default()
            },
            GroupsConfig::default(),
            MetersConfig::default(),
        );
        let fm = ofp::FlowMod {
            instructions: vec![ofp::Instruction::GotoTable { table_id: 1 }],
            ..ofp::FlowMod::default()
        };
        let id = s.flow_mod(&fm, Time(0)).unwrap().installed.unwrap();
        let mut c = Counters::default();
        let huge = 1_000_000_000_000u64;
        c.flows.insert(
            id,
            FlowCounter {
                packets: huge,
                bytes: huge * 64,
                last_hit: Time(7),
            },
        );
        c.tables.insert(
            0,
            TableCounter {
                lookups: huge,
                matched: huge - 1,
            },
        );
        c.fold_into(&mut s);
        c.fold_into(&mut s);
        let e = s.tables.entry(id).unwrap();
        assert_eq!((e.packet_count, e.byte_count), (2 * huge, 128 * huge));
        assert_eq!(e.last_used, Time(7));
        let t = &s.tables.table_stats()[0];
        assert_eq!((t.lookup_count, t.matched_count), (2 * huge, 2 * huge - 2));
        // Zero packets never moves the last hit; unknown ids are ignored.
        assert!(s.tables.add_hits(id, 0, 0, Time(99)));
        assert_eq!(s.tables.entry(id).unwrap().last_used, Time(7));
        assert!(!s.tables.add_hits(FlowId(999), 1, 1, Time(1)));
        assert!(!s.groups.add_counts(5, 1, 1, &[]));
        assert!(!s.meters.add_counts(5, 1, 1, &[]));
    }

    #[test]
    fn hot_counters_settle_exactly_even_when_a_slot_is_reused() {
        let mut c = Counters::default();
        let mut h = HotCounters::default();
        h.flow_hit(&mut c, 0, 5, FlowId(1), 60, Time(3));
        h.flow_hit(&mut c, 0, 5, FlowId(1), 40, Time(2));
        // Slot 5 now holds another entry.
        h.flow_hit(&mut c, 0, 5, FlowId(9), 70, Time(4));
        h.flow_hit(&mut c, 3, 100_000, FlowId(2), 10, Time(1));
        h.table_lookup(0, true);
        h.table_lookup(0, false);
        h.table_lookup(3, true);
        h.settle(&mut c);
        let f = |c: &Counters, id| c.flows.get(&FlowId(id)).copied();
        assert_eq!(
            f(&c, 1),
            Some(FlowCounter {
                packets: 2,
                bytes: 100,
                last_hit: Time(3)
            })
        );
        assert_eq!(f(&c, 9).map(|x| (x.packets, x.bytes)), Some((1, 70)));
        assert_eq!(f(&c, 2).map(|x| x.packets), Some(1));
        assert_eq!((c.tables[&0].lookups, c.tables[&0].matched), (2, 1));
        assert_eq!(c.tables[&3].matched, 1);
        // Settling again adds nothing.
        let before = c.clone();
        h.settle(&mut c);
        assert_eq!(c, before);
        h.flow_hit(&mut c, 0, 5, FlowId(9), 5, Time(8));
        h.settle(&mut c);
        assert_eq!(f(&c, 9).map(|x| (x.packets, x.bytes)), Some((2, 75)));
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
