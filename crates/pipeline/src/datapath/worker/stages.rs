//! The general path's stages over a burst ("A burst, stage by stage" in
//! [`super`]'s comment): parse, table 0 by the flow cache and one burst
//! lookup, prefetch, execute, later tables per burst, and the outputs put
//! back in packet order.

use super::{
    received, PipelineView, Scratch, WorkerState, AHEAD, CACHE_BYPASS, CACHE_MAX_BACKOFF,
    CACHE_MIN_HIT_DIV, CACHE_WINDOW,
};
use crate::datapath::counters::{DropReason, HotCounters};
use crate::datapath::exec::{Exec, Pkt};
use crate::datapath::output::BurstOutput;
use crate::Time;
use classifier::{Deps, FlowCache};
use ofp::Instruction;
use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;

impl WorkerState {
    /// [`WorkerState::process_burst_into`] without the express path;
    /// `tunnel_ids`: the packets' received tunnel_ids (empty: all 0);
    /// `rx_counted`: the burst's port counters were bumped already (the
    /// express path hands on what it does not forward).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn general_burst(
        &mut self,
        view: &PipelineView<'_>,
        in_port: u32,
        packets: &mut Vec<PacketBuf>,
        tunnel_ids: &[u64],
        now: Time,
        out: &mut BurstOutput,
        rx_counted: bool,
    ) {
        let drops_before = out.drops;
        let receives = view.ports.receives(in_port);
        let table0 = view.tables.table(0).filter(|_| receives && !view.reference);
        let mut sc = std::mem::take(&mut self.scratch);
        if let Some(t0) = table0 {
            // Parse all, then resolve table 0 for the burst.
            let (mut n, mut bytes) = (0, 0);
            for buf in packets.drain(..) {
                bytes += buf.len() as u64;
                match sc.pkts.get_mut(n) {
                    Some(p) => p.reset(buf, in_port),
                    None => sc.pkts.push(Pkt::new(buf, in_port)),
                }
                n += 1;
            }
            sc.n = n;
            if !tunnel_ids.is_empty() {
                for (p, id) in sc.pkts.iter_mut().zip(tunnel_ids).take(n) {
                    p.set_tunnel_id(*id);
                }
            }
            if !rx_counted {
                let pc = self.hot.port(&mut self.counters, in_port);
                pc.rx_packets += n as u64;
                pc.rx_bytes += bytes;
            }
            self.first_hits(view, t0, &mut sc);
            self.hot.reserve(0, t0.slot_count());
            self.prefetch_hits(t0, &sc.first);
        }
        let mut ex = self.exec(view, out, now);
        if let Some(t0) = table0 {
            sc.later.clear();
            sc.spans.clear();
            sc.base = None;
            sc.acted.clear();
            sc.acted.resize(sc.n, false);
            let first = std::mem::take(&mut sc.first);
            let lean = ex.trace.is_none();
            for (i, hit) in first.iter().enumerate() {
                if let Some(Some(Some(s))) = first.get(i + AHEAD) {
                    prefetch_hit(t0, ex.hot, 0, *s);
                }
                if lean && sc.base.is_none() {
                    if let (Some(Some(s)), Some(pkt)) = (hit, sc.pkts.get_mut(i)) {
                        if let Some(fe) = t0.fast(*s).filter(|f| f.is_final()) {
                            ex.or_no_output(|ex| ex.final_entry(pkt, *s, fe));
                            continue;
                        }
                    }
                }
                Self::stage_call(&mut ex, &mut sc, i, 0, *hit);
            }
            sc.first = first;
            while !sc.later.is_empty() {
                Self::later_stage(&mut ex, &mut sc);
            }
            if let Some((tx0, pin0)) = sc.base {
                Self::restore_order(ex.out, &mut sc, tx0, pin0);
            }
        }
        for (i, buf) in packets.drain(..).enumerate() {
            if let Some(pkt) = received(&mut ex, in_port, receives, buf, tunnel_ids.get(i)) {
                ex.or_no_output(|ex| ex.pipeline(pkt, 0));
            }
        }
        // Packets not sent are dropped now, not when their record is reused.
        for p in sc.pkts.get_mut(..sc.n).unwrap_or_default() {
            p.release();
        }
        sc.n = 0;
        sc.first.clear();
        self.scratch = sc;
        self.counters.drops.merge(&out.drops.since(&drops_before));
    }

    /// Prefetches what executing the burst's table-0 hits reads, in
    /// passes so each pass's loads overlap across the burst instead of
    /// stalling packet by packet: the compiled entries (one line each, see
    /// [`super::fast`]); their flow counters, and for entries that did not
    /// compile the full entries; then those entries' instruction lists;
    /// then their action lists. Only the first `AHEAD` packets' compiled
    /// entries and counters are fetched here; the execute loop fetches the
    /// rest `AHEAD` packets ahead of the one it runs. Issued for the
    /// whole burst at once, the prefetches themselves stalled on full miss
    /// buffers (their samples held 55 % of the gateway benchmark).
    pub(super) fn prefetch_hits(
        &self,
        t0: &crate::tables::FlowTable,
        first: &[Option<Option<u32>>],
    ) {
        let slots = || first.iter().filter_map(|f| f.flatten());
        let general = |s: u32| t0.is_general(s);
        for s in first.iter().take(AHEAD).filter_map(|f| f.flatten()) {
            prefetch_hit(t0, &self.hot, 0, s);
        }
        let mut any_general = false;
        for s in slots() {
            if general(s) {
                any_general = true;
                t0.prefetch_slot(s);
            }
        }
        if !any_general {
            return;
        }
        for s in slots().filter(|s| general(*s)) {
            if let Some(e) = t0.slot(s) {
                if let Some(list) = e.instructions.as_decoded() {
                    classifier::prefetch_all(list);
                }
            }
        }
        for s in slots().filter(|s| general(*s)) {
            let list = t0.slot(s).and_then(|e| e.instructions.as_decoded());
            for i in list.unwrap_or(&[]) {
                if let Instruction::ApplyActions { actions }
                | Instruction::WriteActions { actions } = i
                {
                    classifier::prefetch_all(actions.as_slice());
                }
            }
        }
    }

    /// Runs record `i` of the burst from table `table` (its lookup there
    /// done: `hit`) until it is done or goes on to a later table, which
    /// queues it in `sc.later`. A record done without having emitted or
    /// dropped anything in any stage counts as a NoOutput drop.
    pub(super) fn stage_call(
        ex: &mut Exec<'_>,
        sc: &mut Scratch,
        i: usize,
        table: u8,
        hit: Option<Option<u32>>,
    ) {
        let Some(pkt) = sc.pkts.get_mut(i) else {
            return;
        };
        let (tx, pin, drops) = (ex.out.tx.len(), ex.out.packet_ins.len(), ex.out.dropped);
        let next = ex.pipeline_stage(pkt, table, hit, true);
        let (tx_end, pin_end) = (ex.out.tx.len(), ex.out.packet_ins.len());
        let emitted = tx_end != tx || pin_end != pin;
        if sc.base.is_some() && emitted {
            sc.spans.push((i, tx, tx_end, pin, pin_end));
        }
        let now = emitted || ex.out.dropped != drops;
        let acted = match sc.acted.get_mut(i) {
            Some(a) => {
                *a |= now;
                *a
            }
            None => now,
        };
        match next {
            Some(t) => {
                // Its outputs so far come first whatever follows.
                sc.base.get_or_insert((tx_end, pin_end));
                sc.later.push((i, t));
            }
            None if !acted => ex.out.count_drop(DropReason::NoOutput),
            None => {}
        }
    }

    /// The lowest table that records wait for: one burst lookup of their
    /// keys there (prefetching the classifier's slots), a pass
    /// prefetching the compiled entries and flow counters hit, then each
    /// record runs on from there.
    pub(super) fn later_stage(ex: &mut Exec<'_>, sc: &mut Scratch) {
        let Some(t) = sc.later.iter().map(|&(_, t)| t).min() else {
            return;
        };
        sc.stage.clear();
        let stage = &mut sc.stage;
        sc.later.retain(|&(i, tt)| {
            if tt == t {
                stage.push(i);
            }
            tt != t
        });
        let stage = std::mem::take(&mut sc.stage);
        let Some(table) = ex.tables.table(t) else {
            // No such table: the general path counts the miss.
            for &i in &stage {
                Self::stage_call(ex, sc, i, t, None);
            }
            sc.stage = stage;
            return;
        };
        ex.hot.reserve(t, table.slot_count());
        for chunk in stage.chunks(32) {
            // Rewrites earlier in the pipeline left some keys stale.
            for &i in chunk {
                if let Some(p) = sc.pkts.get_mut(i) {
                    p.key();
                }
            }
            let found = lookup_records(table, &sc.pkts, chunk);
            let m = chunk.len();
            for s in found[..m].iter().take(AHEAD).flatten() {
                prefetch_hit(table, ex.hot, t, *s);
            }
            for (j, (&i, hit)) in chunk.iter().zip(found).enumerate() {
                if let Some(Some(s)) = found[..m].get(j + AHEAD) {
                    prefetch_hit(table, ex.hot, t, *s);
                }
                Self::stage_call(ex, sc, i, t, Some(hit));
            }
        }
        sc.stage = stage;
    }

    /// Puts what the burst emitted since `tx0` and `pin0` (where the
    /// output stood at the first deferral) back in packet order, each
    /// packet's own outputs in the order it made them, as if the packets
    /// had gone through the tables one after the other.
    pub(super) fn restore_order(out: &mut BurstOutput, sc: &mut Scratch, tx0: usize, pin0: usize) {
        // Stable: a record's spans keep their (chronological) order.
        sc.spans.sort_by_key(|s| s.0);
        sc.tx_hold.clear();
        sc.tx_hold.extend(out.tx.drain_from(tx0).map(Some));
        sc.pin_hold.clear();
        sc.pin_hold.extend(out.packet_ins.drain(pin0..).map(Some));
        let tunnels = out.tx_tunnel_ids.last().is_some_and(|(i, _)| *i >= tx0);
        if tunnels {
            sc.tx_moved.clear();
            sc.tx_moved.resize(sc.tx_hold.len(), usize::MAX);
        }
        for &(_, a, b, c, d) in &sc.spans {
            for (j, slot) in sc
                .tx_hold
                .get_mut(a - tx0..b - tx0)
                .unwrap_or_default()
                .iter_mut()
                .enumerate()
            {
                if let Some(p) = slot.take() {
                    if tunnels {
                        if let Some(m) = sc.tx_moved.get_mut(a - tx0 + j) {
                            *m = out.tx.len();
                        }
                    }
                    out.tx.push(p.0, p.1);
                }
            }
            for slot in sc.pin_hold.get_mut(c - pin0..d - pin0).unwrap_or_default() {
                if let Some(p) = slot.take() {
                    out.packet_ins.push(p);
                }
            }
        }
        if tunnels {
            // The tunnel_ids follow their packets (one not put back has
            // none left to follow).
            let moved = &sc.tx_moved;
            out.tx_tunnel_ids.retain_mut(|(i, _)| {
                if *i < tx0 {
                    return true;
                }
                match moved.get(*i - tx0) {
                    Some(&m) if m != usize::MAX => {
                        *i = m;
                        true
                    }
                    _ => false,
                }
            });
            out.tx_tunnel_ids.sort_unstable_by_key(|(i, _)| *i);
        }
        sc.tx_hold.clear();
        sc.pin_hold.clear();
    }

    /// Fills `sc.first` (one per `sc.pkts`) with table 0's hit: from the
    /// flow cache, else from one burst lookup whose results are cached.
    pub(super) fn first_hits(
        &mut self,
        view: &PipelineView<'_>,
        t0: &crate::tables::FlowTable,
        sc: &mut Scratch,
    ) {
        let tables = view.tables;
        // A table answered by one probe (one hash, or the IPv4 route
        // array) is looked up at least as fast as the cache would be, and
        // the flows a small working set touches keep the table's lines as
        // warm as the cache's: only tuple-space and merged tables gain.
        // `fulmar bench ... --seconds 2`, same minutes, cache consulted vs
        // not: l2 1K rules 15.6 -> 18.5 Mpps, l3 100K with 1000 flows 12.0
        // -> 15.9, gateway 1M with 10K flows 7.0 -> 10.1; flows = rules
        // unchanged (the cache had turned itself off), acl 10K unchanged.
        // The same holds beside a table-miss entry (its empty mask is
        // probed only when nothing better matched): `fulmar bench faucet
        // --rules 10000 --seconds 4`, table 0 one mask of 16 rules plus
        // the miss, same minutes: 1.9-2.6 Mpps with the cache (70 % hits),
        // 3.1-3.3 without.
        let one_probe = t0.index().one_probe();
        if self.cache.is_none() && self.cache_capacity > 0 && !one_probe {
            self.cache = Some(FlowCache::new(self.cache_capacity));
            self.cache_instance = tables.instance();
        }
        if let Some(c) = self.cache.as_mut() {
            if self.cache_instance != tables.instance() {
                // Another set of tables: its generations mean nothing here.
                c.clear();
                self.cache_instance = tables.instance();
            }
        }
        let gens = [t0.generation()];
        sc.first.clear();
        sc.miss_at.clear();
        let live = sc.pkts.get(..sc.n).unwrap_or_default();
        let n = live.len() as u64;
        let cached = self.cache.is_some() && !one_probe;
        let use_cache = cached && self.cache_bypass == 0;
        if cached && !use_cache {
            self.cache_bypass = self.cache_bypass.saturating_sub(n);
            self.cache_bypassed += n;
        }
        let mut hits = 0u64;
        for (i, p) in live.iter().enumerate() {
            let cached = if use_cache {
                self.cache
                    .as_mut()
                    .and_then(|c| c.get(p.parsed_key(), &gens))
            } else {
                None
            };
            hits += u64::from(cached.is_some());
            match cached {
                Some(hit) => sc.first.push(Some(*hit)),
                None => {
                    sc.first.push(None);
                    sc.miss_at.push(i);
                }
            }
        }
        if use_cache {
            let w = &mut self.cache_window;
            w.0 += n;
            w.1 += hits;
            if w.0 >= CACHE_WINDOW {
                if w.1 * CACHE_MIN_HIT_DIV < w.0 {
                    // A bypass of 1 to 2 times the base, at random: with
                    // a fixed length, traffic that repeats with a period
                    // near a multiple of it (the benchmark's template pool
                    // does) made trial windows find their own last
                    // entries, look good and reset the back-off.
                    let j = &mut self.cache_jitter;
                    *j ^= *j << 13;
                    *j ^= *j >> 7;
                    *j ^= *j << 17;
                    let base = CACHE_BYPASS << self.cache_backoff;
                    self.cache_bypass = base + *j % base;
                    self.cache_backoff = (self.cache_backoff + 1).min(CACHE_MAX_BACKOFF);
                } else {
                    self.cache_backoff = 0;
                }
                *w = (0, 0);
            }
        }
        let mut deps = Deps::new();
        deps.push(0, gens[0]);
        for chunk in sc.miss_at.chunks(32) {
            let found = lookup_records(t0, live, chunk);
            for (&i, hit) in chunk.iter().zip(found) {
                if let Some(f) = sc.first.get_mut(i) {
                    *f = Some(hit);
                }
                let key = live.get(i).map(Pkt::parsed_key);
                if let (Some(c), Some(key)) = (self.cache.as_mut().filter(|_| use_cache), key) {
                    c.insert(*key, deps, hit, &gens);
                }
            }
        }
    }
}

/// Hints the CPU to load what executing a hit on slot `slot` of table
/// `t` reads first: its compiled entry and this worker's flow counter.
#[inline]
pub(super) fn prefetch_hit(table: &crate::tables::FlowTable, hot: &HotCounters, t: u8, slot: u32) {
    table.prefetch_fast(slot);
    hot.prefetch(t, slot);
}

/// The slots of `table` that records `idx` (at most 32) of `pkts` hit:
/// one burst lookup (it prefetches), the keys passed by reference
/// (copying them out cost 3 % of the gateway benchmark).
fn lookup_records(
    table: &crate::tables::FlowTable,
    pkts: &[Pkt],
    idx: &[usize],
) -> [Option<u32>; 32] {
    let blank = FlowKey::default();
    let mut keys = [&blank; 32];
    for (k, &i) in keys.iter_mut().zip(idx) {
        if let Some(p) = pkts.get(i) {
            *k = p.parsed_key();
        }
    }
    let m = idx.len().min(32);
    let mut found = [None; 32];
    table.lookup_burst_slots(&keys[..m], &mut found[..m]);
    found
}
