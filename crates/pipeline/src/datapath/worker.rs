//! Packet processing split for several workers: a read-only
//! [`PipelineView`] of the published switch (tables, groups, meter
//! configurations, ports, settings) that any number of workers share, and
//! one [`WorkerState`] per worker holding everything processing writes
//! (counters, the packet buffer pool, meter token buckets, the trace).
//!
//! The runtime's design: the control side applies FLOW_MOD, GROUP_MOD,
//! METER_MOD and PORT_MOD to its own [`SwitchState`], then publishes an
//! immutable copy (an `Arc<`[`Snapshot`]`>`); each worker builds a `PipelineView` over the copy it
//! last saw ([`Snapshot::view`]) and calls
//! [`WorkerState::process_burst_into`]. Nothing here locks or uses atomics.
//! The control side collects the workers' counters (`take_counters`), sums
//! them ([`Counters::sum`]) and folds them into its state
//! ([`SwitchState::fold`]). [`super::Datapath`] is the single-worker
//! convenience: one `SwitchState`, one `WorkerState`.
//!
//! # A burst, stage by stage
//!
//! [`WorkerState::process_burst_into`] runs a burst in stages so that the
//! cache misses of one stage overlap across the whole burst instead of
//! stalling packet after packet. When table 0 is one exact table keyed
//! on link-layer fields and the ingress port, or the IPv4 route engine,
//! the burst first takes the express path (`worker::express`: keys read
//! straight from the frames, no packet records, the compiled entry run
//! in place) and what that path
//! does not forward goes on to these stages:
//!
//! 1. parse: each packet's [`FlowKey`] is parsed in place into a packet
//!    record kept from burst to burst (no allocation, no copy of the key);
//! 2. table 0: the flow cache, then one burst lookup of the misses
//!    (`FlowTable::lookup_burst_slots`, which prefetches the classifier's
//!    slots); the answer is an entry *slot*;
//! 3. prefetch: the compiled entries
//!    ([`crate::tables::compiled::FastEntry`], one cache line each) and
//!    the flow counters of the first `AHEAD` packets, then for entries
//!    that did not compile the full entries, their instruction lists and
//!    their action lists;
//! 4. execute each packet, prefetching the compiled entry and counter of
//!    the packet `AHEAD` places on: a compiled entry without a goto
//!    runs at once (`Exec::final_entry`), anything else through
//!    `Exec::pipeline_stage` until it is done or reaches a goto while it
//!    has no action set;
//! 5. later tables, lowest first: the packets waiting for a table are
//!    looked up there in one burst lookup, their compiled entries and
//!    flow counters prefetched, and each runs on as in step 4. What the
//!    packets emit is then put back in packet order, so a burst gives
//!    exactly what its packets give one at a time.
//!
//! Per-packet counters (flow, table, port, queue 0) go to
//! [`super::counters::HotCounters`], plain arrays moved into [`Counters`]
//! when the counters are read. Nothing on this path allocates while the
//! packets leave by one port each (the buffer then moves to the output).
//!
//! Measured with `fulmar bench gateway-vlan2mpls --rules 100000 --seconds 3`
//! (one worker, 64-byte packets, uniform over the rules, shared 2-core VM,
//! same-minute comparisons): 1.0 Mpps (~1000 ns/packet) before this
//! structure; entry slots + array counters + prefetch 2.5; in-place
//! records, lazy re-parse and moving outputs 3.2; counters prefetched in
//! their own pass 3.7; compiled entries 5.2; no key copies 7.1; port
//! vector and cache back-off 10.0; the key updated in place after
//! rewrites instead of parsed again ~10.5; the gateway's three rewrites
//! fused into one six-byte write ([`crate::tables::compiled::FastOp::VlanToMpls`])
//! 12.2-14.4 (70-82 ns/packet). The classifier alone does 41-44 Mpps on
//! this table, so about 50 ns/packet are still spent around the lookup:
//! the one parse, the flow-counter and compiled-entry misses (one memory
//! latency per burst each), the output and the per-packet bookkeeping.
//!
//! Step 5 and compiled gotos came with the Faucet-shaped scenario (four
//! tables, each packet through three with 100K-entry tables 1 and 2):
//! `fulmar bench faucet --rules 100000 --workers 1 --seconds 5`, same
//! VM: 0.79-0.91 Mpps with later tables looked up packet by packet and
//! the eth_src entries (a bare goto) read from the full entry; 1.00-1.06
//! with gotos compiled; 2.08-2.13 with later tables looked up per burst.
//!
//! 2026-11-26: the whole burst's entry and counter prefetches had been
//! issued at once and stalled on full miss buffers (55 % of the gateway
//! benchmark's samples); fetched `AHEAD` packets ahead instead, gateway
//! 100K went from 180-192 to 127 ns/packet and faucet 100K from 522 to
//! 413-430; huge pages for the arrays (`packet::huge`) and the
//! final-entry shortcut took gateway to 103 ns (docs/results.md).
//!
//! # Meters across workers
//!
//! A single worker (`W = 1`, also the [`super::Datapath`] wrapper) measures
//! with its own copy of each meter ([`Meter::worker_copy`], [`Meter::apply`]):
//! nothing shared. Several workers measure one meter together with the
//! buckets its published clones share ([`Meter::apply_shared`]: per band an
//! atomic arrival time, GCRA, one compare-and-swap per conforming packet),
//! so a meter passes its configured rate whether its packets land on one
//! worker or are spread over all of them. Until 2026-11 each of `W` workers
//! enforced `1/W` of the rate with a private copy: nothing shared, but a
//! meter whose traffic a port's single worker carried passed only `1/W` of
//! its rate, which no controller expects. Cost (`cargo test -p pipeline
//! --release meter_cost -- --ignored --nocapture`, 2-core VM, 64-byte
//! packets): a private copy 3.1–3.3 ns per packet, the shared buckets 6.7
//! ns with one thread and with two threads hitting the same meter, 15.5
//! ns per packet per thread with four threads on the two cores; the two
//! decide exactly alike (`shared_buckets_decide_as_a_private_copy`). A
//! mutex around the buckets instead cost 17 ns alone and 124 ns per packet
//! with two threads contending. On a 16-core VM (the same test binary),
//! packets the meter drops cost 12–15 ns at any thread count (a load), but
//! packets it passes cost 18 ns alone, 58 ns per thread with 2 threads on
//! one meter, 108 with 4, 215 with 8 and 508 with 16: one meter passes at
//! most about 30–35 Mpps in all, whatever the worker count (the cache
//! line moves between cores on every packet). Workers taking tokens from
//! the shared buckets in chunks and spending them privately would lift
//! that ceiling at the price of a bounded error; not done yet.
//!
//! The shared buckets belong to the meter a METER_MOD made: a METER_MOD
//! brings new ones, and a single worker's copy is replaced when the
//! published meter's [`Meter::generation`] changes. Meter counters (input
//! and per band) are counted per worker in [`Counters::meters`] and folded
//! into the control-side meter like every other counter.

mod express;

use super::buffers::BufferPool;
use super::config::DatapathConfig;
use super::counters::DropReason;
use super::counters::{Counters, HotCounters};
use super::exec::{Exec, Pkt, NO_COOKIE};
use super::local_meters::LocalMeters;
use super::output::{BurstOutput, TraceEvent};
use crate::model::ports::Ports;
use crate::tables::groups::Groups;
use crate::tables::meters::Meters;
use crate::tables::TableSet;
use crate::{SwitchState, Time};
use classifier::{CacheStats, Deps, FlowCache};
use ofp::consts::{port_no, OFP_NO_BUFFER};
use ofp::error::BadRequestCode;
use ofp::{Action, Instruction, OfpError, PacketOut};
use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;

/// Flow-cache entries a worker keeps by default (about 320 bytes each:
/// the packed key, the dependencies and the hit; 5 MiB, allocated when
/// first used). 16384 rather than 4096: the acl scenario's 10K flows then
/// mostly hit (73 %), 2.9 -> 5.2-5.7 Mpps (`fulmar bench acl --rules
/// 10000 --flow-cache N`). Tables one probe answers (gateway, l2, l3:
/// one hash or the route array) never use it (see `first_hits`).
pub const DEFAULT_FLOW_CACHE: usize = 16384;

/// Lookups over which the cache's hit rate is judged.
pub const CACHE_WINDOW: u64 = 2048;
/// A window whose hit rate is below `1 / CACHE_MIN_HIT_DIV` turns the cache
/// off for the next [`CACHE_BYPASS`] packets: with many more flows than
/// entries the cache only adds a hash, a compare and an insert per packet
/// in front of a classifier lookup that is about as fast.
pub const CACHE_MIN_HIT_DIV: u64 = 2;
/// Packets that go past the cache after a poor window (then it is tried
/// again for a window), times a random factor in [1, 2). Consecutive poor
/// windows double it, up to `CACHE_BYPASS << CACHE_MAX_BACKOFF`: a trial
/// window costs an insert per packet into memory that has gone cold
/// (about a microsecond each with a 16K-entry cache). Gateway 100K with
/// the 16K cache: window 8192, at most 16 doublings, half-hit threshold
/// 1/4 and no jitter sent 3 % of the packets through trials at 9.7-10.3
/// Mpps; now 0.1 % at 13.0 (no cache at all: 13.7).
pub const CACHE_BYPASS: u64 = 16 * CACHE_WINDOW;
/// Most doublings of [`CACHE_BYPASS`].
const CACHE_MAX_BACKOFF: u32 = 6;

/// How many packets ahead of the one executing the table-0 compiled
/// entries and flow counters are prefetched.
pub(super) const AHEAD: usize = 8;

/// Everything a worker reads, borrowed from the published switch.
#[derive(Clone, Copy)]
pub struct PipelineView<'a> {
    /// The flow tables.
    pub tables: &'a TableSet,
    /// The groups.
    pub groups: &'a Groups,
    /// The meters (configurations, and the buckets workers share).
    pub meters: &'a Meters,
    /// The ports' config and state bits.
    pub ports: &'a Ports,
    /// Settings (miss_send_len, flags, group depth).
    pub config: &'a DatapathConfig,
    /// Look entries up with the reference linear scan instead of the
    /// tables' indexes (differential tests; no flow cache, no burst
    /// lookup).
    pub reference: bool,
}

impl<'a> PipelineView<'a> {
    /// A view of `state`'s tables, groups and meters with `ports`.
    pub fn of(state: &'a SwitchState, ports: &'a Ports, config: &'a DatapathConfig) -> Self {
        PipelineView {
            tables: state.tables.set(),
            groups: &state.groups,
            meters: &state.meters,
            ports,
            config,
            reference: false,
        }
    }
}

/// A published, immutable copy of everything workers read: share it as
/// `Arc<Snapshot>` and build a [`PipelineView`] from it per burst (or per
/// snapshot change). It holds no counters and no control-side index:
/// making one costs O(tables + groups + meters), whatever the number of
/// flow entries.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The flow tables as published ([`crate::Tables::published`]).
    pub tables: TableSet,
    /// The groups.
    pub groups: Groups,
    /// The meters.
    pub meters: Meters,
    /// The packet side's copy of the ports' config and state bits.
    pub ports: Ports,
    /// Settings.
    pub config: DatapathConfig,
}

impl Snapshot {
    /// A snapshot of `state` with `ports` and `config`.
    pub fn new(state: &SwitchState, ports: Ports, config: DatapathConfig) -> Snapshot {
        Snapshot {
            tables: state.tables.published(),
            groups: state.groups.clone(),
            meters: state.meters.clone(),
            ports,
            config,
        }
    }

    /// A snapshot of `state` with the ports of its port table.
    pub fn of(state: &SwitchState, config: DatapathConfig) -> Snapshot {
        Snapshot::new(state, state.port_table.datapath_ports(), config)
    }

    /// A view of it.
    pub fn view(&self) -> PipelineView<'_> {
        PipelineView {
            tables: &self.tables,
            groups: &self.groups,
            meters: &self.meters,
            ports: &self.ports,
            config: &self.config,
            reference: false,
        }
    }
}

/// What one worker writes while processing. See the module comment.
#[derive(Clone, Debug)]
pub struct WorkerState {
    counters: Counters,
    /// Per-packet flow and table counters, moved into `counters` when
    /// those are read.
    hot: HotCounters,
    buffers: BufferPool,
    meters: LocalMeters,
    trace: Option<Vec<TraceEvent>>,
    /// Table 0's hits (entry slots) by packet key (see
    /// [`WorkerState::process_burst_into`]); made on first use,
    /// `cache_capacity` 0 disables it.
    cache: Option<FlowCache<Option<u32>>>,
    cache_capacity: usize,
    /// The [`crate::tables::Tables::instance`] the cache's generations
    /// belong to.
    cache_instance: u64,
    /// Stats of caches dropped by [`WorkerState::set_flow_cache`].
    cache_stats_before: CacheStats,
    /// Current window: (lookups, hits).
    cache_window: (u64, u64),
    /// Packets still to send past the cache.
    cache_bypass: u64,
    /// Poor windows in a row (doublings of the next bypass).
    cache_backoff: u32,
    /// Xorshift state jittering the bypass lengths.
    cache_jitter: u64,
    /// Packets sent past the cache so far.
    cache_bypassed: u64,
    /// Per-burst scratch, kept to avoid allocating per burst.
    scratch: Scratch,
}

/// Buffers one burst uses, kept between bursts.
#[derive(Clone, Debug, Default)]
struct Scratch {
    /// Packet records, reused burst after burst (their keys are parsed in
    /// place); the first `n` are this burst's.
    pkts: Vec<Pkt>,
    n: usize,
    first: Vec<Option<Option<u32>>>,
    /// What the express path hands on to the general path.
    rest: Vec<PacketBuf>,
    /// The express path's table-0 slots, one per frame.
    express: Vec<u32>,
    miss_at: Vec<usize>,
    /// Packets waiting for a later table's burst lookup: (record, table).
    later: Vec<(usize, u8)>,
    /// The records of the stage being looked up.
    stage: Vec<usize>,
    /// Per record: emitted or dropped something in an earlier stage.
    acted: Vec<bool>,
    /// What each stage call emitted after the first deferral: (record,
    /// first tx, end, first packet-in, end), in the order of the calls.
    spans: Vec<(usize, usize, usize, usize, usize)>,
    /// Where the output stood when the first record was deferred: what
    /// comes before is in packet order already.
    base: Option<(usize, usize)>,
    /// Kept for putting outputs back in packet order (no allocation per
    /// burst).
    tx_hold: Vec<Option<crate::datapath::TxPacket>>,
    /// Where `restore_order` put each held output (by hold index), when
    /// outputs carry tunnel_ids.
    tx_moved: Vec<usize>,
    pin_hold: Vec<Option<crate::datapath::PacketInEvent>>,
}

impl WorkerState {
    /// Worker `index` of `n_workers` (buffer ids `index + k·n_workers`;
    /// with more than one worker meters are measured with shared buckets),
    /// with `n_buffers` packet buffers.
    pub fn new(index: u32, n_workers: u32, n_buffers: usize) -> WorkerState {
        WorkerState {
            counters: Counters::default(),
            hot: HotCounters::default(),
            buffers: BufferPool::with_stride(n_buffers, index, n_workers),
            meters: LocalMeters::new(n_workers),
            trace: None,
            cache: None,
            cache_capacity: DEFAULT_FLOW_CACHE,
            cache_instance: 0,
            cache_stats_before: CacheStats::default(),
            cache_window: (0, 0),
            cache_bypass: 0,
            cache_backoff: 0,
            cache_jitter: 0x9e37_79b9_7f4a_7c15 ^ u64::from(index),
            cache_bypassed: 0,
            scratch: Scratch::default(),
        }
    }

    /// Sets the flow cache's size in entries (0: no cache), dropping what
    /// it held (its counters are kept in [`WorkerState::cache_stats`]).
    pub fn set_flow_cache(&mut self, capacity: usize) {
        if let Some(c) = self.cache.take() {
            let s = c.stats();
            let b = &mut self.cache_stats_before;
            b.hits += s.hits;
            b.misses += s.misses;
            b.stale += s.stale;
            b.inserts += s.inserts;
        }
        self.cache_capacity = capacity;
    }

    /// Counts a frame of `bytes` bytes received on `port` that the caller
    /// handles without the pipeline (the runtime's fail-standalone
    /// learning switch), so port statistics still count it.
    pub fn count_port_rx(&mut self, port: u32, bytes: u64) {
        let c = self.hot.port(&mut self.counters, port);
        c.rx_packets += 1;
        c.rx_bytes += bytes;
    }

    /// Counts a frame of `bytes` bytes sent on `port` (queue 0) without
    /// the pipeline (see [`WorkerState::count_port_rx`]).
    pub fn count_port_tx(&mut self, port: u32, bytes: u64) {
        let c = self.hot.port(&mut self.counters, port);
        c.tx_packets += 1;
        c.tx_bytes += bytes;
        self.hot.queue_tx(&mut self.counters, port, 0, 1, bytes);
    }

    /// Packets whose table-0 lookup went past the flow cache because its
    /// recent hit rate was too low (see [`CACHE_MIN_HIT_DIV`]); they count
    /// neither as hits nor as misses.
    pub fn cache_bypassed(&self) -> u64 {
        self.cache_bypassed
    }

    /// The flow cache's counters since this worker started: a hit is a
    /// packet whose table-0 lookup the cache answered.
    pub fn cache_stats(&self) -> CacheStats {
        let mut s = self.cache_stats_before;
        if let Some(c) = &self.cache {
            let n = c.stats();
            s.hits += n.hits;
            s.misses += n.misses;
            s.stale += n.stale;
            s.inserts += n.inserts;
        }
        s
    }

    /// This worker's counters (not yet folded into the state).
    pub fn counters(&mut self) -> &Counters {
        self.hot.settle(&mut self.counters);
        &self.counters
    }

    /// Takes this worker's counters, leaving zeros.
    pub fn take_counters(&mut self) -> Counters {
        self.hot.settle(&mut self.counters);
        std::mem::take(&mut self.counters)
    }

    /// Adds this worker's counters to `into`, leaving zeros here with
    /// every map's room kept: the hand-over without a map built per call.
    pub fn settle_into(&mut self, into: &mut Counters) {
        self.hot.settle(into);
        if !self.counters.is_empty() {
            into.merge(&self.counters);
            self.counters.clear();
        }
    }

    /// The buffer pool.
    pub fn buffers(&self) -> &BufferPool {
        &self.buffers
    }

    /// This worker's meter copies.
    pub fn meters_mut(&mut self) -> &mut LocalMeters {
        &mut self.meters
    }

    /// Turns step recording on or off.
    pub fn set_tracing(&mut self, on: bool) {
        self.trace = on.then(Vec::new);
    }

    /// The steps recorded since the last call.
    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn exec<'a>(
        &'a mut self,
        view: &PipelineView<'a>,
        out: &'a mut BurstOutput,
        now: Time,
    ) -> Exec<'a> {
        Exec {
            tables: view.tables,
            groups: view.groups,
            meters: view.meters,
            local_meters: &mut self.meters,
            reference: view.reference,
            ports: view.ports,
            config: view.config,
            counters: &mut self.counters,
            hot: &mut self.hot,
            buffers: &mut self.buffers,
            trace: self.trace.as_mut(),
            out,
            now,
        }
    }

    /// Processes a burst received on `in_port`, draining `packets` and
    /// appending to `out` (see [`super::Datapath::process_burst_into`] and
    /// "A burst, stage by stage" in the module comment).
    ///
    /// With a classifier that uses the tables' own index
    /// ([`Classifier::uses_table_index`], the default), every packet is
    /// parsed first; table 0's hits come from the flow cache or, for the
    /// packets it does not answer, from one burst lookup
    /// ([`crate::tables::FlowTable::lookup_burst`], which prefetches);
    /// later tables are looked up the same way, a burst lookup per table
    /// for the packets a goto sent there without an action set (a packet
    /// with one goes on alone).
    ///
    /// The cache holds only table 0's result, keyed by the whole parsed
    /// key (in_port included; metadata is 0 there) and valid while table
    /// 0's generation is unchanged. Later tables are not cached: what they
    /// see depends on table 0's apply-actions (set-field, push/pop rewrite
    /// the key) and write-metadata, not on the key alone. A cache whose
    /// hit rate over [`CACHE_WINDOW`] lookups falls below
    /// `1/`[`CACHE_MIN_HIT_DIV`] is skipped for the next [`CACHE_BYPASS`]
    /// packets ([`WorkerState::cache_bypassed`]).
    pub fn process_burst_into(
        &mut self,
        view: &PipelineView<'_>,
        in_port: u32,
        packets: &mut Vec<PacketBuf>,
        now: Time,
        out: &mut BurstOutput,
    ) {
        if self.express_burst(view, in_port, packets, now, out) {
            return;
        }
        self.general_burst(view, in_port, packets, &[], now, out, false);
    }

    /// As [`WorkerState::process_burst_into`] for a burst from a tunnel
    /// port: packet `i` starts with `tunnel_ids[i]` as its `tunnel_id`
    /// match field (the key it was received with; 0 past the slice's
    /// end). Such bursts take the general path: the express path's keys
    /// have no tunnel_id, and the flow cache's key has it (so a packet
    /// never hits an entry made for another tunnel_id).
    pub fn process_burst_tunnel_into(
        &mut self,
        view: &PipelineView<'_>,
        in_port: u32,
        packets: &mut Vec<PacketBuf>,
        tunnel_ids: &[u64],
        now: Time,
        out: &mut BurstOutput,
    ) {
        self.general_burst(view, in_port, packets, tunnel_ids, now, out, false);
    }

    /// [`WorkerState::process_burst_into`] without the express path;
    /// `tunnel_ids`: the packets' received tunnel_ids (empty: all 0);
    /// `rx_counted`: the burst's port counters were bumped already (the
    /// express path hands on what it does not forward).
    #[allow(clippy::too_many_arguments)]
    fn general_burst(
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
    fn prefetch_hits(&self, t0: &crate::tables::FlowTable, first: &[Option<Option<u32>>]) {
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
                classifier::prefetch_all(e.instructions.as_slice());
            }
        }
        for s in slots().filter(|s| general(*s)) {
            for i in t0.slot(s).map(|e| e.instructions.as_slice()).unwrap_or(&[]) {
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
    fn stage_call(
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
    fn later_stage(ex: &mut Exec<'_>, sc: &mut Scratch) {
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
    fn restore_order(out: &mut BurstOutput, sc: &mut Scratch, tx0: usize, pin0: usize) {
        // Stable: a record's spans keep their (chronological) order.
        sc.spans.sort_by_key(|s| s.0);
        sc.tx_hold.clear();
        sc.tx_hold.extend(out.tx.drain(tx0..).map(Some));
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
                    out.tx.push(p);
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
    fn first_hits(
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

    /// Executes a PACKET_OUT (see [`super::Datapath::packet_out`]). A
    /// `buffer_id` must be one this worker's pool gave.
    pub fn packet_out_into(
        &mut self,
        view: &PipelineView<'_>,
        po: &PacketOut,
        now: Time,
        out: &mut BurstOutput,
    ) -> Result<(), OfpError> {
        let in_port_ok = po.in_port <= port_no::MAX
            || po.in_port == port_no::CONTROLLER
            || po.in_port == port_no::LOCAL;
        if !in_port_ok || po.in_port == 0 {
            return Err(OfpError::BadRequest(BadRequestCode::BadPort));
        }
        let groups = view.groups;
        let policy = view.tables.config().policy;
        for a in &po.actions {
            if matches!(
                a,
                Action::Output {
                    port: port_no::TABLE,
                    ..
                }
            ) {
                continue;
            }
            crate::tables::validate::validate_action_list(
                std::slice::from_ref(a),
                None,
                &|g| groups.contains(g),
                policy,
            )?;
        }
        let buf = if po.buffer_id == OFP_NO_BUFFER {
            PacketBuf::from_slice(&po.data)
        } else {
            self.buffers
                .take(po.buffer_id)
                .ok_or(OfpError::BadRequest(BadRequestCode::BufferUnknown))?
                .packet
        };
        let drops_before = out.drops;
        let mut ex = self.exec(view, out, now);
        let mut pkt = Pkt::new(buf, po.in_port);
        pkt.packet_out = true;
        pkt.origin.cookie = NO_COOKIE;
        for a in &po.actions {
            if ex.action(&mut pkt, a, 0).is_err() {
                break;
            }
        }
        self.counters.drops.merge(&out.drops.since(&drops_before));
        Ok(())
    }

    /// Fail-open: NORMAL for every packet of a burst received on
    /// `in_port`, the flow tables bypassed (a bridge in fail mode
    /// standalone whose controllers are all gone; see
    /// [`crate::normal`]). Port counters and drops are counted as on the
    /// general path. Returns how many packets went to one learnt port and
    /// how many were flooded.
    pub fn process_burst_normal(
        &mut self,
        view: &PipelineView<'_>,
        in_port: u32,
        packets: &mut Vec<PacketBuf>,
        now: Time,
        out: &mut BurstOutput,
    ) -> (u64, u64) {
        use super::normal::NormalOutcome;
        let drops_before = out.drops;
        let receives = view.ports.receives(in_port);
        let mut ex = self.exec(view, out, now);
        let (mut forwarded, mut flooded) = (0, 0);
        for buf in packets.drain(..) {
            let Some(pkt) = received(&mut ex, in_port, receives, buf, None) else {
                continue;
            };
            ex.or_no_output(|ex| match ex.normal(&pkt) {
                NormalOutcome::Forwarded => forwarded += 1,
                NormalOutcome::Flooded => flooded += 1,
                NormalOutcome::Dropped => {}
            });
        }
        self.counters.drops.merge(&out.drops.since(&drops_before));
        (forwarded, flooded)
    }

    /// Sends a buffered packet through the pipeline from table 0 (see
    /// [`super::Datapath::release_buffer`]).
    pub fn release_buffer_into(
        &mut self,
        view: &PipelineView<'_>,
        buffer_id: u32,
        now: Time,
        out: &mut BurstOutput,
    ) -> Result<(), OfpError> {
        let b = self
            .buffers
            .take(buffer_id)
            .ok_or(OfpError::BadRequest(BadRequestCode::BufferUnknown))?;
        let drops_before = out.drops;
        self.exec(view, out, now)
            .pipeline(Pkt::new(b.packet, b.in_port), 0);
        self.counters.drops.merge(&out.drops.since(&drops_before));
        Ok(())
    }
}

/// Counts a frame received on `in_port` and makes its record (with the
/// `tunnel_id` it came with, if any), or drops it, counted, when the port
/// is `NO_RECV` (`receives` false).
#[inline]
fn received(
    ex: &mut Exec<'_>,
    in_port: u32,
    receives: bool,
    buf: PacketBuf,
    tunnel_id: Option<&u64>,
) -> Option<Pkt> {
    let pc = ex.hot.port(ex.counters, in_port);
    pc.rx_packets += 1;
    pc.rx_bytes += buf.len() as u64;
    if !receives {
        pc.rx_dropped += 1;
        ex.out.count_drop(DropReason::PortNoRecv);
        return None;
    }
    let mut pkt = Pkt::new(buf, in_port);
    if let Some(id) = tunnel_id {
        pkt.set_tunnel_id(*id);
    }
    Some(pkt)
}

/// Hints the CPU to load what executing a hit on slot `slot` of table
/// `t` reads first: its compiled entry and this worker's flow counter.
#[inline]
fn prefetch_hit(table: &crate::tables::FlowTable, hot: &HotCounters, t: u8, slot: u32) {
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
