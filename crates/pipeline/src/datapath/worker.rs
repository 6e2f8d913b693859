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
//! # Meters across workers
//!
//! A single worker (`W = 1`, also the [`super::Datapath`] wrapper) measures
//! with its own copy of each meter ([`Meter::worker_copy`], [`Meter::apply`]):
//! nothing shared. Several workers measure one meter together with the
//! buckets its published clones share ([`Meter::apply_shared`]: per band an
//! atomic arrival time, GCRA, one compare-and-swap per conforming packet),
//! so a meter passes its configured rate whether its packets land on one
//! worker or are spread over all of them (private copies would each have
//! to enforce `1/W` of the rate, and a meter whose traffic one worker
//! carries would pass only `1/W` of it, which no controller expects). The
//! two decide exactly alike
//! (`shared_buckets_decide_as_a_private_copy`); the shared buckets cost a
//! compare-and-swap on a cache line every worker of the meter writes, so
//! one meter's rate has a ceiling whatever the worker count (figures in
//! docs/results.md; `cargo test -p pipeline --release meter_cost --
//! --ignored --nocapture` measures them). Taking tokens in chunks and
//! spending them privately would lift it at the price of a bounded error.
//!
//! The shared buckets belong to the meter a METER_MOD made: a METER_MOD
//! brings new ones, and a single worker's copy is replaced when the
//! published meter's [`Meter::generation`] changes. Meter counters (input
//! and per band) are counted per worker in [`Counters::meters`] and folded
//! into the control-side meter like every other counter.

mod express;
mod stages;

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
use classifier::{CacheStats, FlowCache};
use ofp::consts::{port_no, OFP_NO_BUFFER};
use ofp::error::BadRequestCode;
use ofp::{Action, OfpError, PacketOut};
use packet::buffer::PacketBuf;

/// Flow-cache entries a worker keeps by default (about 320 bytes each:
/// the packed key, the dependencies and the hit; 5 MiB, allocated when
/// first used). 16384 rather than 4096, so that an ACL's 10K flows mostly
/// hit (`fulmar bench acl --rules 10000 --flow-cache N` compares sizes;
/// docs/results.md, "Workers"). Tables one probe answers (gateway, l2, l3:
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
/// (about a microsecond each with a 16K-entry cache), so a table the cache
/// cannot serve (gateway 100K) should send few packets through trials and
/// run close to no cache at all (docs/results.md, "Workers").
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
    tx_hold: Vec<Option<(u32, PacketBuf)>>,
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
        self.settle_into_up_to(into, usize::MAX);
    }

    /// [`WorkerState::settle_into`], except that flow hits counted by
    /// slot go over only while `into.by_slot` holds fewer than `limit`
    /// records (see [`HotCounters::settle_up_to`]): a slot nobody empties
    /// stops growing there, and the counts wait here, exact.
    pub fn settle_into_up_to(&mut self, into: &mut Counters, limit: usize) {
        self.hot.settle_up_to(into, limit);
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
