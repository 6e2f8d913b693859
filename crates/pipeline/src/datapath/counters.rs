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
}
