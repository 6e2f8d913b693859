//! The counters a worker bumps for every packet ([`HotCounters`]), kept
//! where a bump is one indexed add, and settled into the plain
//! [`Counters`] the control side reads.

pub use crate::model::counters::*;
pub use crate::model::drops::{DropCounters, DropReason};
use crate::model::flow_entry::FlowId;
use crate::Time;
use packet::huge::HugeVec;

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

impl SlotCounter {
    /// What this counter holds, as the record a hand-over carries for
    /// slot `slot` of table `table`.
    fn hits(self, table: u8, slot: u32) -> SlotHits {
        SlotHits {
            id: self.id,
            packets: self.packets,
            bytes: self.bytes,
            last_hit: self.last_hit,
            slot,
            table,
        }
    }
}

/// Grows table `t`'s flow counters (`flows`, by table) so that slot
/// `s` has one.
#[cold]
fn make_room(
    flows: &mut Vec<HugeVec<SlotCounter>>,
    t: usize,
    s: usize,
) -> Option<&mut SlotCounter> {
    if flows.len() <= t {
        flows.resize_with(t + 1, HugeVec::default);
    }
    let v = flows.get_mut(t)?;
    if v.len() <= s {
        v.grow((s + 1).next_power_of_two().max(64), SlotCounter::default());
    }
    v.get_mut(s)
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
    flows: Vec<HugeVec<SlotCounter>>,
    touched: Vec<(u8, u32)>,
    tables: Vec<TableCounter>,
    /// By port number, for ports below [`HOT_PORTS`].
    ports: Vec<PortCounter>,
    /// Queue 0 by port number, for ports below [`HOT_PORTS`].
    queues0: Vec<QueueCounter>,
}

/// How many flow records ([`Counters::by_slot`]) a worker's hand-over
/// slot may hold before the worker keeps further flow hits to itself
/// until the control side takes the slot: 40 MiB, a second of hand-overs
/// at 50K flows hit every 20 ms. The control side takes it about once a
/// second, and whenever it needs the counters it asks for everything.
pub const HAND_OVER_LIMIT: usize = 1 << 20;

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
        let (t, s) = (usize::from(table), slot as usize);
        let sc = match self.flows.get_mut(t).and_then(|v| v.get_mut(s)) {
            Some(sc) => sc,
            None => match make_room(&mut self.flows, t, s) {
                Some(sc) => sc,
                None => return,
            },
        };
        if sc.packets == 0 {
            sc.id = id;
            self.touched.push((table, slot));
        } else if sc.id != id {
            // The slot was reused: settle the old entry's count.
            c.by_slot.push(std::mem::take(sc).hits(table, slot));
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
            self.flows.resize_with(t + 1, HugeVec::default);
        }
        if let Some(v) = self.flows.get_mut(t) {
            if v.len() < n {
                v.grow(n, SlotCounter::default());
            }
        }
    }

    /// A lookup in table `t`.
    #[inline]
    pub fn table_lookup(&mut self, t: u8, matched: bool) {
        self.table_lookups(t, 1, u64::from(matched));
    }

    /// `lookups` lookups in table `t`, `matched` of them hits.
    #[inline]
    pub fn table_lookups(&mut self, t: u8, lookups: u64, matched: u64) {
        let i = usize::from(t);
        if self.tables.len() <= i {
            self.tables.resize(256, TableCounter::default());
        }
        if let Some(c) = self.tables.get_mut(i) {
            c.lookups += lookups;
            c.matched += matched;
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

    /// One frame of `bytes` bytes was sent on queue 0 of port `p`, when
    /// both counters are in the arrays already (the port was counted
    /// before); `false`, counting nothing, otherwise.
    #[inline]
    pub fn tx_one(&mut self, p: u32, bytes: u64) -> bool {
        let i = p as usize;
        match (self.ports.get_mut(i), self.queues0.get_mut(i)) {
            (Some(pc), Some(qc)) => {
                pc.tx_packets += 1;
                pc.tx_bytes += bytes;
                qc.tx_packets += 1;
                qc.tx_bytes += bytes;
                true
            }
            _ => false,
        }
    }

    /// `packets` packets of `bytes` bytes in all were sent on queue `q`
    /// of port `p`.
    #[inline]
    pub fn queue_tx(&mut self, c: &mut Counters, p: u32, q: u32, packets: u64, bytes: u64) {
        if q != 0 || p >= HOT_PORTS {
            return c.queue_tx_many(p, q, packets, bytes);
        }
        let i = p as usize;
        if self.queues0.len() <= i {
            self.queues0.resize(i + 1, QueueCounter::default());
        }
        if let Some(qc) = self.queues0.get_mut(i) {
            qc.tx_packets += packets;
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

    /// Moves everything counted here into `c` (adding to what it holds),
    /// leaving zeros (the vectors keep their size).
    pub fn settle(&mut self, c: &mut Counters) {
        self.settle_up_to(c, usize::MAX);
    }

    /// [`HotCounters::settle`], except that flow hits go over only while
    /// `c.by_slot` holds fewer than `limit` records; the rest stay here,
    /// exact, for a later call. O(slots hit since the last call): each is
    /// one read of its slot, fetched a few entries ahead, and one record
    /// appended to `c.by_slot` (no hashing: the control side applies the
    /// records by slot).
    pub fn settle_up_to(&mut self, c: &mut Counters, limit: usize) {
        let n = self
            .touched
            .len()
            .min(limit.saturating_sub(c.by_slot.len()));
        c.by_slot.reserve(n);
        // How far ahead slots are fetched: the slots hit are scattered
        // over the table's (100K entries: 3 MB of them).
        const AHEAD: usize = 8;
        for i in 0..n {
            if let Some((t, s)) = self.touched.get(i + AHEAD) {
                self.prefetch(*t, *s);
            }
            let Some((table, slot)) = self.touched.get(i).copied() else {
                break;
            };
            let sc = self
                .flows
                .get_mut(usize::from(table))
                .and_then(|v| v.get_mut(slot as usize));
            if let Some(sc) = sc {
                let old = std::mem::take(sc);
                if old.packets > 0 {
                    c.by_slot.push(old.hits(table, slot));
                }
            }
        }
        self.touched.drain(..n);
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let f = |c: &Counters, id| c.flow(FlowId(id));
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
    fn a_full_slot_keeps_flow_hits_waiting_exactly() {
        let mut h = HotCounters::default();
        let mut scratch = Counters::default();
        for s in 0..10u32 {
            h.flow_hit(&mut scratch, 1, s, FlowId(u64::from(s) + 1), 10, Time(5));
        }
        h.table_lookups(1, 10, 10);
        let mut slot = Counters::default();
        h.settle_up_to(&mut slot, 4);
        // Four records went over; tables and the rest did regardless.
        assert_eq!(slot.by_slot.len(), 4);
        assert_eq!(slot.tables[&1].lookups, 10);
        // A full slot takes no more flows...
        h.flow_hit(&mut scratch, 1, 0, FlowId(1), 10, Time(6));
        h.settle_up_to(&mut slot, 4);
        assert_eq!(slot.by_slot.len(), 4);
        // ...until it is taken: then the rest, the new hit included.
        let first = std::mem::take(&mut slot);
        h.settle_up_to(&mut slot, 100);
        assert_eq!(slot.by_slot.len(), 7);
        let mut all = first;
        all.merge(&slot);
        let by_id = all.by_flow();
        assert_eq!(by_id.len(), 10);
        assert_eq!(by_id[&FlowId(1)].packets, 2);
        assert_eq!(by_id[&FlowId(1)].last_hit, Time(6));
        assert!((2..=10).all(|i| by_id[&FlowId(i)].packets == 1));
        assert!(scratch.is_empty());
        let r = all.by_slot.iter().find(|r| r.id == FlowId(7)).copied();
        assert_eq!(r.map(|r| (r.table, r.slot)), Some((1, 6)));
    }

    /// Every packet is counted once, by flow id, table and port, across
    /// many hand-overs ([`WorkerState::settle_into`] into a slot the
    /// control side empties now and then) while entries are deleted,
    /// added again (a new id, often in the slot just freed), replaced
    /// (the same id kept) and workers restart; and every FLOW_REMOVED,
    /// with the late hits the runtime adds to it from later collections,
    /// counts exactly the removed entry's packets. Deterministic: a
    /// seeded generator picks packets, hand-overs, collections and
    /// table changes.
    #[test]
    fn counters_stay_exact_across_hand_overs_while_entries_come_and_go() {
        use crate::datapath::{BurstOutput, DatapathConfig, PipelineView, Ports, WorkerState};
        use crate::{FlowRemoved, GroupsConfig, MetersConfig, SwitchState, TablesConfig};
        use packet::buffer::PacketBuf;
        use std::collections::HashMap;

        /// The control side's collection, as the runtime's `collect`:
        /// take each slot, add late hits to removed entries' reports,
        /// fold into the state, keep a running total.
        fn collect(
            st: &mut SwitchState,
            slots: &mut [Counters],
            removed: &mut [FlowRemoved],
            total: &mut Counters,
        ) {
            for s in slots.iter_mut() {
                let taken = std::mem::take(s);
                for r in removed.iter_mut() {
                    if let Some(f) = taken.flow(r.id) {
                        r.add_late_hits(f.packets, f.bytes);
                    }
                }
                st.fold(&taken);
                total.merge(&taken);
            }
        }

        const RULES: u8 = 24;
        const LEN: u64 = 60;
        let rule = |k: u8| {
            format!(
                "table=0,priority=10,cookie={k},dl_dst=02:00:00:00:00:{k:02x},\
                 send_flow_rem,actions=output:2"
            )
        };
        let frame = |k: u8| {
            let mut f = vec![2, 0, 0, 0, 0, k, 2, 0, 0, 0, 1, 0, 0x88, 0xb5];
            f.resize(LEN as usize, 0);
            f
        };
        let mut st = SwitchState::new(
            TablesConfig {
                n_tables: 4,
                ..TablesConfig::default()
            },
            GroupsConfig::default(),
            MetersConfig::default(),
        );
        let add = |st: &mut SwitchState, k: u8| {
            let fm = flowtext::parse_flow(&rule(k)).unwrap();
            st.flow_mod(&fm, Time(1)).unwrap().installed.unwrap()
        };
        let (ports, config) = (Ports::with_range(8), DatapathConfig::default());
        // Rule -> the id of its entry now.
        let mut live: HashMap<u8, FlowId> = HashMap::new();
        for k in (0..RULES).filter(|k| k % 3 != 0) {
            live.insert(k, add(&mut st, k));
        }
        let mut sent: HashMap<FlowId, u64> = HashMap::new();
        let (mut packets, mut matched) = (0u64, 0u64);
        let mut workers = [WorkerState::new(0, 2, 0), WorkerState::new(1, 2, 0)];
        let mut slots = [Counters::default(), Counters::default()];
        let mut total = Counters::default();
        let mut removed: Vec<FlowRemoved> = Vec::new();
        let (mut hand_overs, mut replaced, mut restarts) = (0, 0, 0);
        let mut next = crate::test_rng::xorshift();
        let mut out = BurstOutput::default();
        for step in 0..4000u64 {
            let w = next(2) as usize;
            let mut burst = Vec::new();
            let mut hits = 0;
            for _ in 0..1 + next(16) {
                let k = next(u64::from(RULES)) as u8;
                burst.push(PacketBuf::from_slice(&frame(k)));
                if let Some(id) = live.get(&k) {
                    *sent.entry(*id).or_default() += 1;
                    hits += 1;
                }
            }
            packets += burst.len() as u64;
            matched += hits;
            out.clear();
            let view = PipelineView::of(&st, &ports, &config);
            workers[w].process_burst_into(&view, 1, &mut burst, Time(step + 2), &mut out);
            assert_eq!(out.tx.len() as u64, hits, "step {step}");
            match next(16) {
                0..=4 => {
                    workers[w].settle_into(&mut slots[w]);
                    hand_overs += 1;
                }
                // 5: a hand-over that found the slot taken: nothing moves.
                6 | 7 => collect(&mut st, &mut slots, &mut removed, &mut total),
                8 => {
                    let k = next(u64::from(RULES)) as u8;
                    let fm =
                        flowtext::parse_flow_command(&rule(k), ofp::FlowModCommand::DeleteStrict)
                            .unwrap();
                    let o = st.flow_mod(&fm, Time(step + 2)).unwrap();
                    let id = live.remove(&k);
                    assert_eq!(o.deleted, id.into_iter().collect::<Vec<_>>());
                    removed.extend(o.flow_removed);
                }
                9 => {
                    let k = next(u64::from(RULES)) as u8;
                    let was = live.get(&k).copied();
                    let id = add(&mut st, k);
                    if let Some(was) = was {
                        // Replaced: the same entry, id and counters.
                        assert_eq!(id, was);
                        replaced += 1;
                    }
                    live.insert(k, id);
                }
                10 => {
                    // A worker stops (handing everything over, as
                    // `finish` does) and a new one takes its place.
                    workers[w].settle_into(&mut slots[w]);
                    workers[w] = WorkerState::new(w as u32, 2, 0);
                    restarts += 1;
                }
                _ => {}
            }
        }
        for (w, s) in workers.iter_mut().zip(slots.iter_mut()) {
            w.settle_into(s);
        }
        collect(&mut st, &mut slots, &mut removed, &mut total);
        assert!(hand_overs > 1000 && replaced > 10 && restarts > 100);
        assert!(removed.len() > 100, "{}", removed.len());

        // By flow id: every packet, once.
        let got: HashMap<FlowId, u64> = total
            .by_flow()
            .iter()
            .map(|(id, f)| (*id, f.packets))
            .collect();
        assert_eq!(got, sent);
        for (id, f) in &total.by_flow() {
            assert_eq!(f.bytes, f.packets * LEN, "{id:?}");
        }
        assert_eq!(
            total.tables[&0],
            TableCounter {
                lookups: packets,
                matched
            }
        );
        assert_eq!(total.ports[&1].rx_packets, packets);
        assert_eq!(total.ports[&2].tx_packets, matched);
        assert_eq!(total.drops.no_match, packets - matched);
        // Every FLOW_REMOVED counts its entry's packets.
        for r in &removed {
            assert_eq!(r.body.packet_count, sent[&r.id], "{:?}", r.id);
            assert_eq!(r.body.byte_count, sent[&r.id] * LEN);
        }
        // So do the flow statistics of the entries left.
        let stats = st
            .tables
            .flow_stats(&crate::any_flow(), Time(5000))
            .unwrap();
        assert_eq!(stats.len(), live.len());
        for s in &stats {
            let id = live[&(s.cookie as u8)];
            assert_eq!(s.packet_count, sent.get(&id).copied().unwrap_or(0));
        }
    }
}
