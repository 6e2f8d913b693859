//! A timed phase: worker threads forwarding the pool's bursts over the
//! snapshots a publisher hands out, while the calling thread waits or
//! installs flow-mods and publishes; each worker's figures.

use crate::options::Options;
use crate::pool::Pool;
use crate::progress::Progress;
use crate::switch::snapshot_of;
use dataplane::snapshot::{Publisher, Reader};
use packet::buffer::PacketBuf;
use pipeline::datapath::{BurstOutput, Snapshot, WorkerState};
use pipeline::{SwitchState, Time};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

/// What one worker did.
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct WorkerResult {
    pub(crate) packets: u64,
    pub(crate) tx: u64,
    pub(crate) process_ns: u64,
    pub(crate) generator_ns: u64,
    pub(crate) allocations: u64,
    pub(crate) drops: u64,
    /// New snapshots picked up.
    pub(crate) versions: u64,
    /// Table-0 lookups the worker's flow cache answered, over the whole
    /// run (warm-up included).
    pub(crate) cache_hits: u64,
    /// Table-0 lookups: cache hits, misses and packets sent past it.
    pub(crate) cache_lookups: u64,
}

impl WorkerResult {
    /// Counts one measured burst: `span` packets, what was sent and
    /// dropped, buffers allocated, the time processing (t1..t2) and the
    /// time refilling around it (t0..t1 and t2..t3).
    pub(crate) fn record(
        &mut self,
        span: usize,
        tx: u64,
        dropped: u64,
        allocations: u64,
        [t0, t1, t2, t3]: [Instant; 4],
    ) {
        self.packets += span as u64;
        self.tx += tx;
        self.drops += dropped;
        self.allocations += allocations;
        self.process_ns += t2.duration_since(t1).as_nanos() as u64;
        self.generator_ns +=
            t3.duration_since(t2).as_nanos() as u64 + t1.duration_since(t0).as_nanos() as u64;
    }

    /// Adds `o`'s counts to `self`.
    pub(crate) fn add(&mut self, o: &WorkerResult) {
        self.packets += o.packets;
        self.tx += o.tx;
        self.process_ns += o.process_ns;
        self.generator_ns += o.generator_ns;
        self.allocations += o.allocations;
        self.drops += o.drops;
        self.versions += o.versions;
        self.cache_hits += o.cache_hits;
        self.cache_lookups += o.cache_lookups;
    }
}

/// What the calling thread does while the workers forward.
pub(crate) enum Control<'a> {
    /// Nothing: the phase lasts `seconds` (longer if a worker has not
    /// counted a burst yet).
    Idle,
    /// Applies `mods` to `state`, publishing a new snapshot every `every`
    /// of them (and after the last); the phase ends when all are applied
    /// or `seconds` have passed, and every worker has counted a burst.
    Install {
        state: &'a mut SwitchState,
        mods: &'a [ofp::FlowMod],
        every: usize,
    },
    /// Applies flow-mods with `apply` (one call, one flow-mod) at `rate`
    /// a second on a schedule (flow-mod k is due at k / rate seconds),
    /// and publishes as the runtime does for one agent batch: when the
    /// schedule leaves `idle` between two flow-mods (the channel went
    /// quiet), else every `max_delay` of the continuous stream, and at
    /// the end. The phase lasts `seconds`, longer until every worker has
    /// counted a burst and, with `rate` above 0, a flow-mod was applied
    /// and published.
    Paced {
        state: &'a mut SwitchState,
        apply: &'a mut dyn FnMut(&mut SwitchState) -> anyhow::Result<()>,
        rate: f64,
        idle: Duration,
        max_delay: Duration,
    },
}

/// What the calling thread did in an install phase.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct InstallResult {
    pub(crate) applied: usize,
    pub(crate) seconds: f64,
    pub(crate) publishes: u64,
    pub(crate) publish_seconds: f64,
}

/// Runs the workers over the snapshots `publisher` hands out while the
/// calling thread does `control`; returns the workers' results for the
/// measured part, the measured wall time and what the control did.
pub(crate) fn traffic(
    publisher: &Publisher<Snapshot>,
    pool: &Arc<Pool>,
    states: &mut [BenchWorker],
    opts: WorkerOpts,
    seconds: f64,
    control: Control<'_>,
    progress: &Progress,
) -> anyhow::Result<(Vec<WorkerResult>, f64, InstallResult)> {
    let workers = states.len();
    let stop = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let counts: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
    let epoch = Instant::now();
    let mut inst = InstallResult::default();
    let mut wall = 0.0;
    // An error of the control's own (a flow-mod refused): the workers are
    // stopped and joined first, then it is returned.
    let mut failed: Option<anyhow::Error> = None;
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = states
            .iter_mut()
            .enumerate()
            .map(|(w, ws)| {
                let reader = publisher.reader();
                let pool = Arc::clone(pool);
                let (stop, measuring, count) = (&stop, &measuring, &counts[w]);
                s.spawn(move || {
                    worker(
                        w, workers, ws, reader, &pool, opts, stop, measuring, count, epoch,
                    )
                })
            })
            .collect();
        let start = Instant::now();
        measuring.store(true, Ordering::Relaxed);
        let show = |t: f64, what: &str| {
            let n: u64 = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
            progress.show(&format!(
                "{t:5.1} s of {seconds} s: {:.3} Mpps wall, {n} packets{what}",
                n as f64 / t.max(1e-9) / 1e6
            ));
        };
        // However busy the machine, every worker's figures cover at least
        // one burst (a worker that ended early is joined below).
        let counted = || {
            counts.iter().all(|c| c.load(Ordering::Relaxed) > 0)
                || handles.iter().any(|h| h.is_finished())
        };
        let mut next_show = 1.0;
        match control {
            Control::Idle => loop {
                let t = start.elapsed().as_secs_f64();
                if t >= seconds && counted() {
                    break;
                }
                std::thread::sleep(Duration::from_secs_f64((seconds - t).clamp(0.001, 0.05)));
                let t = start.elapsed().as_secs_f64();
                if t >= next_show {
                    next_show += 1.0;
                    show(t, "");
                }
            },
            Control::Install { state, mods, every } => {
                let now = Time::from_secs(1);
                for chunk in mods.chunks(every.max(1)) {
                    for fm in chunk {
                        // Generated rules; a refusal was caught when the
                        // same rules were timed alone.
                        let _ = state.flow_mod(fm, now);
                    }
                    inst.applied += chunk.len();
                    let p0 = Instant::now();
                    publisher.publish(snapshot_of(state));
                    inst.publish_seconds += p0.elapsed().as_secs_f64();
                    inst.publishes += 1;
                    let t = start.elapsed().as_secs_f64();
                    if t >= seconds {
                        break;
                    }
                    if t >= next_show {
                        next_show += 1.0;
                        show(t, &format!(", {} flow-mods applied", inst.applied));
                    }
                }
                inst.seconds = start.elapsed().as_secs_f64();
                while !counted() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Control::Paced {
                state,
                apply,
                rate,
                idle,
                max_delay,
            } => {
                let gap = if rate > 0.0 {
                    1.0 / rate
                } else {
                    f64::INFINITY
                };
                // A controller that paces its flow-mods this far apart
                // lets the channel go quiet after each: one batch each.
                let quiet_between = gap >= idle.as_secs_f64();
                let end = start + Duration::from_secs_f64(seconds);
                // When flow-mod `k` (from 0) is due.
                let due_at = |k: usize| start + Duration::from_secs_f64(k as f64 * gap);
                // The open batch: when its first flow-mod was applied,
                // and when its last one was due.
                let mut batch: Option<(Instant, Instant)> = None;
                let publish = |state: &mut SwitchState, inst: &mut InstallResult| {
                    let p0 = Instant::now();
                    publisher.publish(snapshot_of(state));
                    inst.publish_seconds += p0.elapsed().as_secs_f64();
                    inst.publishes += 1;
                };
                loop {
                    let now = Instant::now();
                    let t = now.duration_since(start).as_secs_f64();
                    let over = t >= seconds;
                    let published = rate == 0.0 || inst.publishes > 0;
                    if over && batch.is_none() && published && counted() {
                        break;
                    }
                    // The channel went quiet (by the schedule, so that a
                    // flow-mod due at the same moment does not race it),
                    // or the phase is over: the batch is published.
                    if let Some((_, last_due)) = batch {
                        if over || (quiet_between && now >= last_due + idle) {
                            publish(state, &mut inst);
                            batch = None;
                            continue;
                        }
                    }
                    // Flow-mods due by now (the first at time 0), at most
                    // 64 before the clock is read again.
                    let due = match (rate > 0.0, over) {
                        (false, _) => 0,
                        (true, false) => (t * rate) as usize + 1,
                        (true, true) => inst.applied.max(1),
                    };
                    if inst.applied < due {
                        let n = (due - inst.applied).min(64);
                        for _ in 0..n {
                            if let Err(e) = apply(state) {
                                failed = Some(e);
                                break;
                            }
                            inst.applied += 1;
                        }
                        if failed.is_some() {
                            break;
                        }
                        let first = batch.map_or_else(Instant::now, |b| b.0);
                        batch = Some((first, due_at(inst.applied - 1)));
                        if first.elapsed() >= max_delay {
                            publish(state, &mut inst);
                            batch = None;
                        }
                        continue;
                    }
                    // Nothing due: sleep until the next flow-mod is due,
                    // the batch's quiet moment or the end.
                    let mut wake = if rate > 0.0 {
                        due_at(inst.applied).min(end)
                    } else {
                        end
                    };
                    if let (Some((_, last_due)), true) = (batch, quiet_between) {
                        wake = wake.min(last_due + idle);
                    }
                    if t >= next_show {
                        next_show += 1.0;
                        show(t, &format!(", {} flow-mods applied", inst.applied));
                    }
                    let nap = wake.saturating_duration_since(now);
                    std::thread::sleep(
                        nap.clamp(Duration::from_micros(1), Duration::from_millis(20)),
                    );
                }
                inst.seconds = start.elapsed().as_secs_f64();
            }
        }
        measuring.store(false, Ordering::Relaxed);
        wall = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        join_all(handles, "pipeline worker")
    });
    progress.done();
    if let Some(e) = failed {
        return Err(e);
    }
    Ok((results?, wall, inst))
}

/// Joins the workers in order, with their results; a worker that panicked
/// is an error naming `what` it was and its index.
pub(crate) fn join_all<T>(
    handles: Vec<ScopedJoinHandle<'_, T>>,
    what: &str,
) -> anyhow::Result<Vec<T>> {
    handles
        .into_iter()
        .enumerate()
        .map(|(i, h)| h.join().map_err(|_| anyhow::anyhow!("{what} {i} panicked")))
        .collect()
}

/// One worker's loop: refill a burst from the templates, process it
/// against the newest snapshot it has seen, recycle the output buffers;
/// until told to stop. Counts only bursts that end while `measuring`.
/// What every worker of a run is given besides its index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkerOpts {
    pub(crate) burst: usize,
    pub(crate) flow_cache: Option<usize>,
    pub(crate) hand_over_ms: u64,
}

impl WorkerOpts {
    /// The worker options the run's options give.
    pub(crate) fn of(opts: &Options) -> Self {
        WorkerOpts {
            burst: opts.burst,
            flow_cache: opts.flow_cache,
            hand_over_ms: opts.hand_over_ms,
        }
    }
}

/// What a runtime worker keeps for its whole life: its pipeline state,
/// its counter slot (where it hands its counters over, and the control
/// side takes them from), and when its next hand-over and the next
/// collection are due.
pub(crate) struct BenchWorker {
    ws: WorkerState,
    slot: std::sync::Mutex<pipeline::datapath::Counters>,
    next_hand_over: Instant,
    hand_overs: u32,
}

/// The state of each of `workers` workers, as a run starts them. A caller
/// that runs traffic several times (`--reference`'s rounds, the coupling
/// steps) keeps them from one run to the next, as the runtime keeps its
/// workers: what a worker warms (its flow counters' memory, its flow
/// cache, its counter slot's hand-over list) is then warm, and the
/// hand-over and collection keep their cadence across runs, as they do
/// in a switch that has been running.
pub(crate) fn worker_states(workers: usize, opts: WorkerOpts) -> Vec<BenchWorker> {
    (0..workers)
        .map(|index| {
            let mut ws = WorkerState::new(index as u32, workers as u32, 256);
            if let Some(n) = opts.flow_cache {
                ws.set_flow_cache(n);
            }
            BenchWorker {
                ws,
                slot: Default::default(),
                next_hand_over: Instant::now(),
                hand_overs: 0,
            }
        })
        .collect()
}

/// Runs `states`' workers for half a second, untimed, so that a series
/// of runs that keeps them ([`worker_states`]) starts warm: its first
/// run is then measured like the others (a pass over a million flows
/// takes about a tenth of a second on one core).
pub(crate) fn warm_up(
    publisher: &Publisher<Snapshot>,
    pool: &Arc<Pool>,
    states: &mut [BenchWorker],
    opts: WorkerOpts,
) -> anyhow::Result<()> {
    let quiet = Progress { on: false };
    traffic(publisher, pool, states, opts, 0.5, Control::Idle, &quiet).map(|_| ())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn worker(
    index: usize,
    workers: usize,
    bw: &mut BenchWorker,
    mut reader: Reader<Snapshot>,
    pool: &Pool,
    opts: WorkerOpts,
    stop: &AtomicBool,
    measuring: &AtomicBool,
    count: &AtomicU64,
    epoch: Instant,
) -> WorkerResult {
    let BenchWorker {
        ws,
        slot,
        next_hand_over,
        hand_overs,
    } = bw;
    let mut snap = reader.get().clone();
    let cs0 = ws.cache_stats();
    let bypassed0 = ws.cache_bypassed();
    let burst = opts.burst;
    let mut r = WorkerResult::default();
    let n_bursts = pool.bursts.len();
    if n_bursts == 0 {
        return r;
    }
    let first = pool.template(0);
    let mut free: Vec<PacketBuf> = (0..burst * 2)
        .map(|_| PacketBuf::from_slice(first))
        .collect();
    let mut batch: Vec<PacketBuf> = Vec::with_capacity(burst);
    let mut out = BurstOutput::default();
    out.tx.reserve(burst * 2);
    let mut b = index * n_bursts / workers.max(1);
    let mut t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // Between bursts, as the runtime's workers do: one atomic load
        // unless a new snapshot was published.
        if reader.refresh() {
            snap = reader.get().clone();
            r.versions += 1;
        }
        let span = pool.bursts[b];
        let allocations = pool.fill(span, &mut free, &mut batch);
        let t1 = Instant::now();
        let now = Time(t1.duration_since(epoch).as_nanos() as u64);
        ws.process_burst_into(&snap.view(), span.in_port, &mut batch, now, &mut out);
        if opts.hand_over_ms > 0 && t1 >= *next_hand_over {
            *next_hand_over = t1 + Duration::from_millis(opts.hand_over_ms);
            runtime::worker::hand_over(ws, slot, false);
            *hand_overs += 1;
        }
        let t2 = Instant::now();
        let tx = out.tx.len() as u64;
        let dropped: u64 = out.drops.named().iter().map(|(_, v)| v).sum();
        for (_, packet) in out.tx.drain() {
            if free.len() < burst * 4 {
                free.push(packet);
            }
        }
        out.clear();
        b += 1;
        if b == n_bursts {
            b = 0;
        }
        if *hand_overs == 50 {
            // The control side's collection: take the slot, give the
            // flow list's room back (as `collect` does; folding is the
            // control side's time, not the worker's).
            *hand_overs = 0;
            let s = slot.get_mut().unwrap_or_else(|e| e.into_inner());
            let mut taken = std::mem::take(s);
            s.give_room_back(&mut taken);
        }
        let t3 = Instant::now();
        if measuring.load(Ordering::Relaxed) {
            r.record(span.len, tx, dropped, allocations, [t0, t1, t2, t3]);
            count.store(r.packets, Ordering::Relaxed);
        }
        t0 = t3;
    }
    let cs = ws.cache_stats();
    let (hits, misses) = (cs.hits - cs0.hits, cs.misses - cs0.misses);
    r.cache_hits = hits;
    r.cache_lookups = hits + misses + (ws.cache_bypassed() - bypassed0);
    r
}

/// Summed figures of a phase.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    pub(crate) packets: u64,
    pub(crate) tx: u64,
    pub(crate) drops: u64,
    pub(crate) process_ns: u64,
    pub(crate) generator_ns: u64,
    pub(crate) allocations: u64,
    /// Sum over workers of packets / processing time, in Mpps.
    pub(crate) mpps: f64,
}

pub(crate) fn totals(results: &[WorkerResult]) -> Totals {
    let sum = |f: fn(&WorkerResult) -> u64| results.iter().map(f).sum::<u64>();
    Totals {
        packets: sum(|r| r.packets),
        tx: sum(|r| r.tx),
        drops: sum(|r| r.drops),
        process_ns: sum(|r| r.process_ns),
        generator_ns: sum(|r| r.generator_ns),
        allocations: sum(|r| r.allocations),
        mpps: results
            .iter()
            .filter(|r| r.process_ns > 0)
            .map(|r| r.packets as f64 / r.process_ns as f64 * 1e3)
            .sum(),
    }
}
