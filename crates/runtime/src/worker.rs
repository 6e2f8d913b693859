//! The pipeline as a dataplane [`BurstProcessor`], and the table snapshot
//! the control side publishes to it.
//!
//! # One packet buffer
//!
//! Ports and the pipeline share one buffer type
//! ([`packet::buffer::PacketBuf`], re-exported as `dataplane::PacketBuf`).
//! A burst's packets go into the pipeline as they are: owned storage and a
//! DPDK mbuf's region are rewritten in place; a frame in a ring slot shared
//! with the kernel (AF_PACKET, AF_XDP) is copied once into pooled storage,
//! so the slot goes back at once and a slow flow cannot pin ring blocks.
//! On the way out only the metadata is reset. Packet-outs carry their port
//! in `PacketMeta::out_port` and skip the pipeline. When a port has sent a
//! buffer (or anything drops it) its storage goes back to the pool, which
//! passes it to whichever thread receives or copies next.
//!
//! So forwarding makes no heap allocation per packet once the pool is
//! warm, in both thread modes: `cargo run --release -p runtime --example
//! allocs_per_packet` counts the switch threads' allocations over memory
//! ports, or over AF_PACKET on veths (`... allocs_per_packet 100000 veth
//! socket|ring`, see the example); docs/results.md ("Packets without a
//! heap allocation") has the figures. The socket backend
//! ([`dataplane::rawsock`]) copies each frame into pooled storage rather
//! than a receive buffer of its own. What the pipeline
//! itself allocates (a copy per extra output, growth past the headroom)
//! is its own affair. AF_PACKET and AF_XDP slots are still copied: their
//! lenders are reference counted per ring, and a slow flow holding slots
//! would starve the kernel's ring.
//!
//! # Table updates
//!
//! The control side publishes an immutable [`Snapshot`] (tables, groups,
//! meter configurations, port states, settings) through a
//! [`dataplane::snapshot::Publisher`]; every worker holds a [`Reader`] and
//! a [`WorkerState`] (its counters, buffer pool and, when it is the only
//! worker, its meter copies) and processes each burst against a view of
//! the snapshot it last saw, moving to a newer one between bursts. Nothing
//! is copied per worker; with several workers a meter's token buckets are
//! shared atomics inside the published meter (see
//! `pipeline::datapath::worker`). The worker's counters are handed to a
//! shared per-worker slot every [`SYNC_EVERY`] with `try_lock` (the control
//! side reads the slots; a worker never waits for it) and summed on read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use dataplane::snapshot::Reader;
use dataplane::threads::BurstProcessor;
use dataplane::{Burst, Outbox, PacketBuf, PacketMeta};
use pipeline::datapath::{BurstOutput, Counters, Snapshot, WorkerState};
use pipeline::Time;

/// Headroom of pipeline buffers (room for PBB + MPLS + VLAN pushes).
const HEADROOM: usize = 64;

/// How often a worker hands its counters to the control side.
pub const SYNC_EVERY: Duration = Duration::from_millis(20);

/// What a worker shares with the control side.
#[derive(Default)]
pub struct WorkerShared {
    /// The worker's pipeline counters not yet collected by the control side.
    pub counters: Mutex<Counters>,
    /// Packet-ins not handed to the agent: no controller channel was
    /// open (or no agent runs), reported as `packet_in_no_controller`.
    pub packet_ins_no_controller: AtomicU64,
    /// Packet-ins not handed to the agent: its queue from the workers was
    /// full (the agent is behind), reported as `packet_in_agent_queue_full`.
    pub packet_ins_agent_full: AtomicU64,
    /// The agent's event queue, once one runs (read without locking).
    pub events: Arc<OnceLock<crate::EventSender>>,
    /// Whether a controller channel is open now: packet-ins go to the
    /// agent only then, and are counted as `packet_in_no_controller`
    /// otherwise.
    pub controller_up: Arc<AtomicBool>,
    /// The latest counter hand-over the control side asked for: a statistics
    /// request must see every packet forwarded before it, not a view up to
    /// [`SYNC_EVERY`] old.
    pub sync_requested: AtomicU64,
    /// The latest request the worker has answered (its counters are in
    /// `counters`).
    pub sync_done: AtomicU64,
    /// Set when the worker goes to sleep, after handing over every count
    /// and letting go of its table version; cleared when it wakes, before
    /// it counts anything more. A request for counters need not wake a
    /// sleeping worker, nor wait for it.
    pub asleep: AtomicBool,
    /// The flow cache's hits and misses so far (stored at each counter
    /// hand-over).
    pub cache_hits: AtomicU64,
    /// See `cache_hits`.
    pub cache_misses: AtomicU64,
    /// The bridge's learning switch, used instead of the pipeline while
    /// active (fail mode standalone, no controller).
    pub standalone: Arc<crate::standalone::Standalone>,
}

/// A pipeline instance driven by a dataplane worker.
pub struct PipelineWorker {
    reader: Reader<Snapshot>,
    /// The version whose meters `ws` was last pruned against.
    reader_version: u64,
    ws: WorkerState,
    pkts: Vec<PacketBuf>,
    /// The tunnel_ids of a burst from a tunnel port, one per packet
    /// (empty for every other burst).
    tunnel_ids: Vec<u64>,
    out: BurstOutput,
    epoch: Instant,
    shared: Arc<WorkerShared>,
    last_sync: Instant,
}

/// The worker half of the counter hand-over: adds what `ws` counted to
/// its shared slot ([`WorkerShared::counters`]) and returns `true`; with
/// `force` it waits for the slot, otherwise it takes it with `try_lock`
/// and, when the control side holds it, hands nothing over and returns
/// `false` (the counts stay in `ws`, exact, for the next hand-over).
///
/// The slot is added to in place ([`WorkerState::settle_into_up_to`]):
/// one record appended to its flat list per flow hit since the last
/// hand-over (no hashing; the control side applies them by slot), into
/// room the control side gives back when it takes the slot (about once a
/// second); without `force`, at most
/// [`pipeline::datapath::HAND_OVER_LIMIT`] records wait there, the rest
/// staying in `ws` (what this saves: docs/results.md, "The counter
/// hand-over"). The slot is held while the worker settles: O(flows hit)
/// (`bench/hand-over.sh` times it), which a collection may wait for; the
/// control side holds it only to take it.
/// Its own function so that `fulmar bench --hand-over-ms` runs the same
/// code as a worker.
pub fn hand_over(ws: &mut WorkerState, slot: &Mutex<Counters>, force: bool) -> bool {
    let slot = if force {
        Some(slot.lock().unwrap_or_else(|e| e.into_inner()))
    } else {
        slot.try_lock().ok()
    };
    match slot {
        Some(mut s) => {
            let limit = if force {
                usize::MAX
            } else {
                pipeline::datapath::HAND_OVER_LIMIT
            };
            ws.settle_into_up_to(&mut s, limit);
            true
        }
        None => false,
    }
}

impl PipelineWorker {
    /// Worker `index` of `n_workers`, reading versions from `reader`, with
    /// times measured from `epoch`.
    pub fn new(
        mut reader: Reader<Snapshot>,
        index: u32,
        n_workers: u32,
        epoch: Instant,
        shared: Arc<WorkerShared>,
    ) -> PipelineWorker {
        let n_buffers = reader.get().config.n_buffers;
        PipelineWorker {
            ws: WorkerState::new(index, n_workers, n_buffers),
            reader_version: reader.version(),
            reader,
            pkts: Vec::new(),
            tunnel_ids: Vec::new(),
            out: BurstOutput::default(),
            epoch,
            shared,
            last_sync: Instant::now(),
        }
    }

    /// Sets the size of this worker's flow cache (0: none).
    pub fn set_flow_cache(&mut self, entries: usize) {
        self.ws.set_flow_cache(entries);
    }

    /// `now` as the pipeline's time (since `epoch`).
    fn time_at(&self, now: Instant) -> Time {
        Time::from_duration(now.saturating_duration_since(self.epoch))
    }

    fn sync(&mut self, force: bool) {
        let cs = self.ws.cache_stats();
        self.shared.cache_hits.store(cs.hits, Ordering::Relaxed);
        self.shared.cache_misses.store(cs.misses, Ordering::Relaxed);
        hand_over(&mut self.ws, &self.shared.counters, force);
    }
}

/// A received packet as the pipeline takes it: a frame in a ring slot
/// shared with the kernel (AF_PACKET, AF_XDP) is copied into pooled
/// storage with [`HEADROOM`] and the slot given back at once (a slow flow
/// holding slots would starve the kernel's ring); owned storage and DPDK
/// mbufs are processed where they are. The padding floor is set from the
/// length the packet arrived with.
#[inline]
fn admit(p: &mut PacketBuf) {
    p.copy_out_of_slot(HEADROOM);
    p.reset_floor();
}

/// The metadata a packet leaves the pipeline with: the egress queue it
/// chose (`meta.queue_id`), nothing of the input's (its tunnel key, an
/// injected output port).
#[inline]
fn leaving(p: &mut PacketBuf) {
    let queue_id = p.meta.queue_id;
    p.meta = PacketMeta::for_frame(p.len());
    p.meta.queue_id = queue_id;
}

impl BurstProcessor for PipelineWorker {
    fn process(&mut self, in_port: u32, burst: &mut Burst, now: Instant, out: &mut Outbox) {
        // Packet-out results the control side injected: each names the
        // port it leaves on (a burst is one port's, so its first packet
        // says); they bypass the pipeline.
        if burst
            .pkts()
            .first()
            .is_some_and(|p| p.meta.out_port().is_some())
        {
            for mut p in burst.drain() {
                if let Some(port) = p.meta.take_out_port() {
                    out.push(port, p);
                }
            }
            return;
        }
        let now = self.time_at(now);
        // A tunnel port marks every frame with the key it came with; a
        // burst is one port's, so its first frame says (one test a burst
        // on every other port).
        let tunnel = burst
            .pkts()
            .first()
            .is_some_and(|p| p.meta.tunnel_id().is_some());
        if tunnel {
            self.tunnel_ids.clear();
            self.tunnel_ids.extend(
                burst
                    .pkts()
                    .iter()
                    .map(|p| p.meta.tunnel_id().map_or(0, u64::from)),
            );
        }
        // The burst's vector becomes the pipeline's (no buffer moved;
        // `self.pkts` is empty, the pipeline drains it).
        debug_assert!(self.pkts.is_empty());
        burst.swap_pkts(&mut self.pkts);
        self.pkts.iter_mut().for_each(admit);
        self.out.clear();
        // Parked while the thread slept: this takes the newest version.
        self.reader.get();
        let version = self.reader.version();
        let snap = self.reader.get();
        if self.reader_version != version {
            self.reader_version = version;
            // Meter copies of meters that are gone are dropped.
            self.ws.meters_mut().prune(&snap.meters);
        }
        if self.shared.standalone.is_active() {
            // Fail-open: NORMAL for the burst, the tables bypassed.
            let (forwarded, flooded) = self.ws.process_burst_normal(
                &snap.view(),
                in_port,
                &mut self.pkts,
                now,
                &mut self.out,
            );
            self.shared.standalone.count(forwarded, flooded);
        } else if tunnel {
            self.ws.process_burst_tunnel_into(
                &snap.view(),
                in_port,
                &mut self.pkts,
                &self.tunnel_ids,
                now,
                &mut self.out,
            );
        } else {
            self.ws
                .process_burst_into(&snap.view(), in_port, &mut self.pkts, now, &mut self.out);
        }
        // Each packet leaves with the egress queue set_queue chose (a port
        // without queues ignores it) and, from a burst that set any, the
        // tunnel_id it leaves with (the key a key=flow tunnel port wraps
        // it in: its low 32 bits, all a VNI or GRE key holds); rewritten
        // where it lies, and the outputs handed over whole.
        let mut ids = self.out.tx_tunnel_ids.iter().peekable();
        for (i, p) in self.out.tx.pkts_mut().iter_mut().enumerate() {
            leaving(p);
            if let Some((_, id)) = ids.next_if(|(j, _)| *j == i) {
                p.meta.set_tunnel_id(Some(*id as u32));
            }
        }
        debug_assert!(out.is_empty());
        std::mem::swap(out, &mut self.out.tx);
        if !self.out.packet_ins.is_empty() {
            let (mut no_controller, mut full) = (0, 0);
            let tx = self
                .shared
                .events
                .get()
                .filter(|_| self.shared.controller_up.load(Ordering::Relaxed));
            for pi in self.out.packet_ins.drain(..) {
                match tx.map(|t| t.packet_in(pi.message)) {
                    Some(Ok(())) => {}
                    Some(Err(agent::PacketInRefused::Full)) => full += 1,
                    None | Some(Err(agent::PacketInRefused::Closed)) => no_controller += 1,
                }
            }
            for (n, c) in [
                (no_controller, &self.shared.packet_ins_no_controller),
                (full, &self.shared.packet_ins_agent_full),
            ] {
                if n > 0 {
                    c.fetch_add(n, Ordering::Relaxed);
                }
            }
        }
    }

    fn between_bursts(&mut self, now: Instant) {
        // Awake: a request for counters waits for this worker again.
        // (Cleared before any burst: between_bursts runs first.)
        if self.shared.asleep.load(Ordering::Relaxed) {
            self.shared.asleep.store(false, Ordering::SeqCst);
        }
        let requested = self.shared.sync_requested.load(Ordering::Acquire);
        if requested > self.shared.sync_done.load(Ordering::Relaxed) {
            self.last_sync = now;
            self.sync(true);
            self.shared.sync_done.store(requested, Ordering::Release);
        }
        // A parked reader takes the newest version only when a burst needs
        // it (`process`): a wake-up that finds nothing costs nothing here.
        if !self.reader.is_parked() && self.reader.refresh() {
            self.reader_version = self.reader.version();
            let snap = self.reader.get();
            self.ws.meters_mut().prune(&snap.meters);
        }
        if now.saturating_duration_since(self.last_sync) >= SYNC_EVERY {
            self.last_sync = now;
            self.sync(false);
        }
    }

    fn idle(&mut self) {
        // A sleeping worker holds no table version: barriers count it as
        // caught up, and old versions are freed for reuse. It hands its
        // counters over first, so that it need not be woken for them.
        self.reader.park();
        self.sync(true);
        self.shared.asleep.store(true, Ordering::SeqCst);
    }

    fn finish(&mut self) {
        self.sync(true);
    }
}
