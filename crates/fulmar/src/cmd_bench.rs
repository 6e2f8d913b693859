//! `fulmar bench SCENARIO`: installs a generated rule set into an
//! in-memory pipeline, sends pre-built packets through it from one or
//! more worker threads, and reports the forwarding rate, the cost per
//! packet, resident memory and the rule install rate. No root, no ports:
//! packets come from memory.
//!
//! ```text
//! fulmar bench gateway-vlan2mpls|gateway-mpls2vlan|l2|l3|acl
//!     [--rules N] [--flows N] [--workers N] [--seconds S]
//!     [--packet-size B] [--burst N] [--flow-mods N [--publish-every N]]
//!     [--hand-over-ms MS] [--seed N] [--json] [--smoke]
//!     [--reference [--rounds N]]
//! ```
//!
//! How a run goes:
//! 1. The scenario's rules are generated (flow text, seeded) and installed
//!    with [`SwitchState::flow_mod`]; only the `flow_mod` calls are timed
//!    (parsing the text is not).
//! 2. The state is frozen into one `Arc<Snapshot>` handed out by the
//!    runtime's snapshot `Publisher`; each worker thread has its own
//!    [`WorkerState`] over [`Snapshot::view`], so the run uses whatever
//!    classifier the pipeline's view uses.
//! 3. A template pool holds one packet per flow (`--flows` distinct flows
//!    spread evenly over the rules), grouped into bursts that share an
//!    ingress port, bursts in seeded random order. Before each burst the
//!    worker refills recycled buffers by copying the template bytes in
//!    (no allocation while the output has the input's length); the
//!    buffers come back from the burst output. The refill (and recycling)
//!    is timed apart from processing: `mpps` and `ns_per_packet` are the
//!    pipeline alone (generator time subtracted); `mpps_wall` includes it
//!    and `generator_ns_per_packet` says what it cost.
//! 4. Before the timed run, 100 sampled packets (fewer when there are
//!    fewer) go through one by one and their output port and bytes are
//!    compared with what the generator's own record of its rules says
//!    (see [`workload::Workload::expected`]); any mismatch makes the exit
//!    status 1.
//! 5. With `--flow-mods N`, N more rules of the same shape are timed
//!    twice after the run: alone (`flow_mod` calls on a copy of the
//!    state), then while the workers forward: this thread applies them to
//!    another copy and publishes a snapshot (clone of the state) every
//!    `--publish-every` flow-mods through the runtime's
//!    `dataplane::snapshot::Publisher`; workers pick new snapshots up
//!    between bursts with a `Reader`, as the runtime's workers do. The
//!    report gives both install rates and the forwarding rate during that
//!    phase beside the undisturbed one.
//!
//! 6. With `--reference`, step 3's run is split into `--rounds` rounds,
//!    each a turn of fulmar and a turn of the hand-written minimum loop of
//!    [`mod@reference`] over the same pool (the order alternating), and the
//!    report adds the medians and the median ratio fulmar / reference.
//!
//! `--smoke`: 64 rules and 0.2 s unless given; for tests.
//!
//! On a terminal, a progress line on stderr is updated every second.

mod frame;
#[cfg(feature = "dpdk")]
mod loss_free;
mod reference;
mod workload;

use anyhow::{bail, ensure, Context};
use clap::Args;
use dataplane::snapshot::{Publisher, Reader};
use frame::Rng;
use packet::buffer::PacketBuf;
use pipeline::datapath::{BurstOutput, DatapathConfig, Snapshot, WorkerState};
use pipeline::{GroupsConfig, MetersConfig, SwitchState, TablesConfig, Time};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use workload::Scenario;
use workload::Workload;

/// Arguments of `fulmar bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The scenario.
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Number of rules (default 10000; 64 with --smoke).
    #[arg(long)]
    pub rules: Option<usize>,
    /// Distinct packet flows (default: the rule count).
    #[arg(long)]
    pub flows: Option<usize>,
    /// Worker threads, each with its own worker state over one snapshot.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Seconds of traffic (default 5; 0.2 with --smoke).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Frame size in bytes (64..=9000).
    #[arg(long, default_value_t = 64)]
    pub packet_size: usize,
    /// Packets per burst.
    #[arg(long, default_value_t = 32)]
    pub burst: usize,
    /// Entries of each worker's flow cache (0: none; default: the
    /// pipeline's, as `fulmar run` uses).
    #[arg(long)]
    pub flow_cache: Option<usize>,
    /// After the run, time this many more flow-mods alone, then again
    /// while the workers forward (reporting both rates).
    #[arg(long, default_value_t = 0)]
    pub flow_mods: usize,
    /// While installing with traffic, publish a snapshot after every N
    /// flow-mods (1: the worst case; the runtime publishes once per agent
    /// batch — 1 ms of quiet, a BARRIER, or a second of a continuous
    /// stream — so a bulk install there is closer to a large N).
    #[arg(long, default_value_t = 1)]
    pub publish_every: usize,
    /// Hand the counters over as the runtime's workers do
    /// (`runtime::worker::hand_over`), every this many milliseconds
    /// of the run, the slot taken every 50th time as the control side's
    /// once-a-second collection does; timed as pipeline time (0: never).
    #[arg(long, default_value_t = 20)]
    pub hand_over_ms: u64,
    /// Seed of the rule and traffic generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Small, quick run for tests: 64 rules, 0.2 s unless given.
    #[arg(long)]
    pub smoke: bool,
    /// Also run, in the same process, alternating with fulmar, the least
    /// any switch must do for the scenario on the same packets (a
    /// hand-written loop: parse the key, one hash or LPM probe with the
    /// burst's lookups prefetched, the scenario's rewrite, move the
    /// buffer; for acl the classifier's own lookups), and report
    /// fulmar's rate as a fraction of it.
    #[arg(long, conflicts_with_all = ["export", "write_flows", "loss_free"])]
    pub reference: bool,
    /// With --reference: rounds of each (fulmar, then the reference, in
    /// turn; --seconds is shared between all of them; medians reported).
    #[arg(long, default_value_t = 5, requires = "reference")]
    pub rounds: usize,
    /// Write the scenario's rules (flow text, one per line, as
    /// `fulmar run --flows` or a config's `flows_file` reads them) to
    /// this file and exit, without running: the same rules for a
    /// `fulmar run` beside `fulmar bench` (bench/million-flows.sh).
    #[arg(long, value_name = "FILE")]
    pub write_flows: Option<std::path::PathBuf>,
    /// Instead of running: write the scenario's rules (`rules.flows`,
    /// ovs-ofctl syntax) and one packet per flow (`traffic.pcap`, in
    /// seeded random order) into this directory, for a run through real
    /// ports (`bench/dpdk-vs-ovs.sh`). Every flow must enter on port 1.
    #[arg(long, value_name = "DIR")]
    pub export: Option<std::path::PathBuf>,
    /// With --export: every rule outputs to this port instead of its own.
    #[arg(long, value_name = "PORT", requires = "export")]
    pub out_port: Option<u32>,
    /// Instead of the in-memory run: the highest loss-free rate through
    /// DPDK ports (RFC 2544 style trials; a generator in the same process
    /// paces the packets over ring ports; needs the `dpdk` build and root).
    #[arg(long, conflicts_with = "export")]
    pub loss_free: bool,
    /// With --loss-free: seconds per trial.
    #[arg(long, default_value_t = 2.0, requires = "loss_free")]
    pub trial_seconds: f64,
    /// With --loss-free: stop when the interval is within this share of
    /// the rate found.
    #[arg(long, default_value_t = 0.02, requires = "loss_free")]
    pub resolution: f64,
    /// With --loss-free: the EAL's arguments, one string (default: no huge
    /// pages, 1 GiB, no PCI scan, no shared files).
    #[arg(
        long,
        value_name = "ARGS",
        default_value = "--no-huge -m 1024 --no-pci --no-shconf --no-telemetry",
        requires = "loss_free"
    )]
    pub eal: String,
}

/// The packets sent: one template per flow, laid out burst by burst.
struct Pool {
    size: usize,
    /// The flows are spread over rules `0..over`.
    over: usize,
    bytes: Vec<u8>,
    /// Flow number of each template.
    flow_of: Vec<u32>,
    bursts: Vec<BurstSpan>,
}

#[derive(Clone, Copy, Debug)]
struct BurstSpan {
    in_port: u32,
    start: usize,
    len: usize,
}

impl Pool {
    /// Puts the packets of `span` into `batch`, reusing the buffers in
    /// `free` (the untimed refill between bursts); returns how many had to
    /// be allocated.
    fn fill(&self, span: BurstSpan, free: &mut Vec<PacketBuf>, batch: &mut Vec<PacketBuf>) -> u64 {
        let mut allocations = 0;
        for k in span.start..span.start + span.len {
            let tpl = self.template(k);
            match free.pop() {
                Some(mut buf) if buf.len() == tpl.len() => {
                    buf.as_mut_slice().copy_from_slice(tpl);
                    batch.push(buf);
                }
                _ => {
                    allocations += 1;
                    batch.push(PacketBuf::from_slice(tpl));
                }
            }
        }
        allocations
    }

    fn template(&self, k: usize) -> &[u8] {
        &self.bytes[k * self.size..(k + 1) * self.size]
    }

    /// Builds `flows` flows over the first `over` rules of `w`.
    fn new(w: &Workload, flows: usize, over: usize, size: usize, burst: usize, seed: u64) -> Pool {
        let mut rng = Rng::new(seed ^ 0xb0057);
        // Group flows by ingress port so a burst shares one.
        let mut by_port: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for j in 0..flows {
            let (i, v) = Workload::flow_rule(j, flows, over);
            let (port, _) = w.flow(i, v);
            by_port.entry(port).or_default().push(j as u32);
        }
        let mut chunks: Vec<(u32, Vec<u32>)> = Vec::new();
        for (port, mut js) in by_port {
            rng.shuffle(&mut js);
            for c in js.chunks(burst) {
                chunks.push((port, c.to_vec()));
            }
        }
        rng.shuffle(&mut chunks);
        let mut pool = Pool {
            size,
            over,
            bytes: Vec::with_capacity(flows * size),
            flow_of: Vec::with_capacity(flows),
            bursts: Vec::with_capacity(chunks.len()),
        };
        for (port, js) in chunks {
            pool.bursts.push(BurstSpan {
                in_port: port,
                start: pool.flow_of.len(),
                len: js.len(),
            });
            for j in js {
                let (i, v) = Workload::flow_rule(j as usize, flows, over);
                pool.bytes.extend_from_slice(&w.flow(i, v).1.build(size));
                pool.flow_of.push(j);
            }
        }
        pool
    }
}

/// What one worker did.
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct WorkerResult {
    packets: u64,
    tx: u64,
    process_ns: u64,
    generator_ns: u64,
    allocations: u64,
    drops: u64,
    /// New snapshots picked up.
    versions: u64,
    /// Table-0 lookups the worker's flow cache answered, over the whole
    /// run (warm-up included).
    cache_hits: u64,
    /// Table-0 lookups: cache hits, misses and packets sent past it.
    cache_lookups: u64,
}

/// The figures of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    scenario: &'static str,
    rules: usize,
    flows: usize,
    workers: usize,
    seconds: f64,
    packet_size: usize,
    burst: usize,
    /// Million packets per second of pipeline time (generator subtracted),
    /// summed over workers.
    mpps: f64,
    /// Pipeline nanoseconds per packet (per worker core).
    ns_per_packet: f64,
    /// Million packets per second over the wall clock, generator included.
    mpps_wall: f64,
    /// Nanoseconds per packet spent refilling buffers from the templates.
    generator_ns_per_packet: f64,
    /// Buffers allocated during the run (the refill reuses buffers unless
    /// a packet was dropped or changed length).
    generator_allocations: u64,
    /// Share of table-0 lookups the workers' flow caches answered (hits /
    /// (hits + misses + bypassed)); null when no packet was looked up.
    cache_hit_rate: Option<f64>,
    /// VmRSS at the end of the run (with `--reference`: before the
    /// reference's own tables were built).
    rss_bytes: Option<u64>,
    /// Bytes of packet templates (part of rss_bytes).
    template_bytes: usize,
    packets: u64,
    tx_packets: u64,
    dropped: u64,
    /// Seconds spent in flow_mod installing the rules.
    install_seconds: f64,
    /// Rules installed per second.
    install_rate: f64,
    /// The flow-mod measurement (`--flow-mods`).
    flow_mods: FlowModFigures,
    /// Sampled packets checked against the generator, and mismatches.
    checked: usize,
    mismatches: usize,
    /// `--reference`: fulmar beside the hand-written minimum.
    reference: Option<ReferenceFigures>,
    notes: Vec<String>,
}

/// Figures of `--reference`: rounds of fulmar and of the reference loop
/// in turn over the same packets, each round `seconds_each` long.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReferenceFigures {
    /// What the reference does.
    what: &'static str,
    rounds: usize,
    seconds_each: f64,
    /// Median over rounds of fulmar's Mpps (pipeline time, summed over
    /// workers).
    fulmar_mpps: f64,
    /// Median over rounds of the reference's Mpps (its timed part only).
    reference_mpps: f64,
    /// Reference nanoseconds per packet (median round).
    reference_ns_per_packet: f64,
    /// Median of the per-round ratios fulmar / reference.
    ratio: f64,
    /// The issue's target for this scenario (one worker), if it has one.
    target: Option<f64>,
    /// ratio >= target.
    target_met: Option<bool>,
    fulmar_mpps_rounds: Vec<f64>,
    reference_mpps_rounds: Vec<f64>,
    /// Packets the reference forwarded and dropped (all rounds).
    reference_packets: u64,
    reference_tx_packets: u64,
    reference_dropped: u64,
    /// Bytes of the reference's lookup structures.
    reference_table_bytes: usize,
    /// Sampled packets checked through the reference, and mismatches.
    reference_checked: usize,
    reference_mismatches: usize,
}

impl WorkerResult {
    /// Counts one measured burst: `span` packets, what was sent and
    /// dropped, buffers allocated, the time processing (t1..t2) and the
    /// time refilling around it (t0..t1 and t2..t3).
    fn record(
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
    fn add(&mut self, o: &WorkerResult) {
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

/// The median of `v` (mean of the middle two for an even count; 0 when
/// empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The issue's per-core target for a scenario's ratio to its reference.
fn target_of(s: Scenario) -> Option<f64> {
    match s {
        Scenario::GatewayVlan2Mpls | Scenario::GatewayMpls2Vlan | Scenario::L3 => Some(0.33),
        Scenario::Acl => Some(0.70),
        Scenario::L2 | Scenario::Faucet => None,
    }
}

/// Figures of `--flow-mods N`: N more rules of the scenario's shape,
/// timed alone and then while the workers forward.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FlowModFigures {
    /// N.
    count: usize,
    /// Flow-mods per second in `flow_mod` alone (no traffic, no publish).
    per_sec: Option<f64>,
    /// With traffic: a snapshot is published after this many flow-mods.
    publish_every: usize,
    /// With traffic: flow-mods applied before `--seconds` ran out.
    applied_with_traffic: Option<usize>,
    /// With traffic: flow-mods per second, publishing included.
    per_sec_with_traffic: Option<f64>,
    /// Snapshots published.
    publishes: Option<u64>,
    /// Mean time of one publish (clone of the state, swap).
    publish_ms_mean: Option<f64>,
    /// Forwarding (pipeline time, summed over workers) while installing;
    /// compare with the report's `mpps` (undisturbed).
    mpps_while_installing: Option<f64>,
    /// Pipeline nanoseconds per packet while installing.
    ns_per_packet_while_installing: Option<f64>,
    /// Packets forwarded while installing.
    packets_while_installing: Option<u64>,
    /// Length of the install-with-traffic phase.
    seconds_while_installing: Option<f64>,
    /// Fewest new snapshots any worker picked up while installing.
    versions_seen: Option<u64>,
}

/// VmRSS of this process in bytes.
fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A progress line on stderr when it is a terminal.
struct Progress {
    on: bool,
}

impl Progress {
    /// On when stderr is a terminal.
    fn new() -> Progress {
        Progress {
            on: std::io::stderr().is_terminal(),
        }
    }

    fn show(&self, line: &str) {
        if self.on {
            eprint!("\r\x1b[2K{line}");
            let _ = std::io::stderr().flush();
        }
    }

    fn done(&self) {
        if self.on {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}

/// Adds ports `1..=n` (up, no features) to the state's port table.
fn add_ports(state: &mut SwitchState, n: u32) {
    for port_no in 1..=n {
        state.port_table.add_port(
            ofp::Port {
                port_no,
                name: format!("p{port_no}"),
                ..ofp::Port::default()
            },
            Time::from_secs(1),
        );
    }
}

/// What the workers read: the state with the packet side's copy of its
/// ports, as the pipeline builds it.
fn snapshot_of(state: &SwitchState) -> Snapshot {
    Snapshot::of(state, DatapathConfig::default())
}

/// Installs rules `range` of `w` (and, when `extra`, the scenario's extra
/// rules) into `state`; returns the seconds spent in `flow_mod`.
fn install(
    state: &mut SwitchState,
    w: &Workload,
    range: std::ops::Range<usize>,
    extra: bool,
    progress: &Progress,
) -> anyhow::Result<f64> {
    const BATCH: usize = 4096;
    let now = Time::from_secs(1);
    let total = range.len();
    let mut spent = Duration::ZERO;
    let mut last = Instant::now();
    let mut texts: Vec<String> = if extra { w.extra_rules() } else { Vec::new() };
    let mut next = range.start;
    loop {
        while texts.len() < BATCH && next < range.end {
            texts.push(w.rule_text(next));
            next += 1;
        }
        if texts.is_empty() {
            break;
        }
        let mods = texts
            .iter()
            .map(|t| flowtext::parse_flow(t).with_context(|| format!("generated rule {t:?}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let t0 = Instant::now();
        for (fm, t) in mods.iter().zip(&texts) {
            state
                .flow_mod(fm, now)
                .map_err(|e| anyhow::anyhow!("rule {t:?} refused: {e}"))?;
        }
        spent += t0.elapsed();
        texts.clear();
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            progress.show(&format!(
                "installing: {} of {total} rules, {:.1} s in flow_mod",
                next - range.start,
                spent.as_secs_f64()
            ));
        }
    }
    progress.done();
    Ok(spent.as_secs_f64())
}

/// Sends `samples` random templates through the pipeline one by one and
/// compares output port and bytes with the generator's expectation;
/// returns the number checked and a description of each mismatch.
fn check(
    w: &Workload,
    pool: &Pool,
    snap: &Snapshot,
    samples: usize,
    seed: u64,
) -> (usize, Vec<String>) {
    let mut rng = Rng::new(seed ^ 0xc4ec);
    let view = snap.view();
    let mut ws = WorkerState::new(0, 1, 0);
    let mut out = BurstOutput::default();
    let mut burst = Vec::with_capacity(1);
    let n = pool.flow_of.len();
    let samples = samples.min(n);
    let mut bad = Vec::new();
    for s in 0..samples {
        // Every template when there are few, else a random sample.
        let k = if n <= samples {
            s
        } else {
            rng.below(n as u64) as usize
        };
        let j = pool.flow_of[k] as usize;
        let (port, frame) = sample_flow(w, pool, k);
        let expected = w.expected(port, &frame);
        out.clear();
        burst.push(PacketBuf::from_slice(pool.template(k)));
        ws.process_burst_into(&view, port, &mut burst, Time::from_secs(2), &mut out);
        let got: Vec<(u32, &[u8])> = out
            .tx
            .iter()
            .map(|t| (t.port, t.packet.as_slice()))
            .collect();
        let want = expected.map(|e| (e.port, e.frame.build(pool.size)));
        let ok = match (&want, got.as_slice()) {
            (None, []) => out.packet_ins.is_empty(),
            (Some((p, b)), [(gp, gb)]) => {
                p == gp && b.as_slice() == *gb && out.packet_ins.is_empty()
            }
            _ => false,
        };
        if !ok {
            bad.push(format!(
                "flow {j} (in_port {port}, {frame:?}): expected {}, got {}",
                match &want {
                    Some((p, b)) => format!("port {p} {}", hex(b)),
                    None => "a drop".into(),
                },
                if got.is_empty() {
                    format!("no output ({} packet-ins)", out.packet_ins.len())
                } else {
                    got.iter()
                        .map(|(p, b)| format!("port {p} {}", hex(b)))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
    }
    (samples, bad)
}

/// The flow of template `k`, rebuilt from the generator.
fn sample_flow(w: &Workload, pool: &Pool, k: usize) -> (u32, frame::Frame) {
    let j = pool.flow_of[k] as usize;
    let (i, v) = Workload::flow_rule(j, pool.flow_of.len(), pool.over);
    w.flow(i, v)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What the calling thread does while the workers forward.
enum Control<'a> {
    /// Nothing: the phase lasts `seconds`.
    Idle,
    /// Applies `mods` to `state`, publishing a new snapshot every `every`
    /// of them (and after the last); the phase ends when all are applied
    /// or `seconds` have passed.
    Install {
        state: &'a mut SwitchState,
        mods: &'a [ofp::FlowMod],
        every: usize,
    },
}

/// What the calling thread did in an install phase.
#[derive(Debug, Default, Clone, Copy)]
struct InstallResult {
    applied: usize,
    seconds: f64,
    publishes: u64,
    publish_seconds: f64,
}

/// Runs the workers over the snapshots `publisher` hands out while the
/// calling thread does `control`; returns the workers' results for the
/// measured part, the measured wall time and what the control did.
fn traffic(
    publisher: &Publisher<Snapshot>,
    pool: &Arc<Pool>,
    workers: usize,
    opts: WorkerOpts,
    seconds: f64,
    control: Control<'_>,
    progress: &Progress,
) -> anyhow::Result<(Vec<WorkerResult>, f64, InstallResult)> {
    let stop = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let counts: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
    let epoch = Instant::now();
    let mut inst = InstallResult::default();
    let mut wall = 0.0;
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let reader = publisher.reader();
                let pool = Arc::clone(pool);
                let (stop, measuring, count) = (&stop, &measuring, &counts[w]);
                s.spawn(move || {
                    worker(
                        w, workers, reader, &pool, opts, stop, measuring, count, epoch,
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
        let mut next_show = 1.0;
        match control {
            Control::Idle => loop {
                let t = start.elapsed().as_secs_f64();
                if t >= seconds {
                    break;
                }
                std::thread::sleep(Duration::from_secs_f64((seconds - t).min(0.05)));
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
            }
        }
        measuring.store(false, Ordering::Relaxed);
        wall = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("worker {i} panicked (a pipeline bug)"))
            })
            .collect::<anyhow::Result<Vec<_>>>()
    });
    progress.done();
    Ok((results?, wall, inst))
}

/// One worker's loop: refill a burst from the templates, process it
/// against the newest snapshot it has seen, recycle the output buffers;
/// until told to stop. Counts only bursts that end while `measuring`.
/// What every worker of a run is given besides its index.
#[derive(Clone, Copy, Debug)]
struct WorkerOpts {
    burst: usize,
    flow_cache: Option<usize>,
    hand_over_ms: u64,
}

#[allow(clippy::too_many_arguments)]
fn worker(
    index: usize,
    workers: usize,
    mut reader: Reader<Snapshot>,
    pool: &Pool,
    opts: WorkerOpts,
    stop: &AtomicBool,
    measuring: &AtomicBool,
    count: &AtomicU64,
    epoch: Instant,
) -> WorkerResult {
    let mut snap = reader.get().clone();
    let mut ws = WorkerState::new(index as u32, workers as u32, 256);
    if let Some(n) = opts.flow_cache {
        ws.set_flow_cache(n);
    }
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
    let slot = std::sync::Mutex::new(pipeline::datapath::Counters::default());
    let (mut next_hand_over, mut hand_overs) = (t0, 0);
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
        if opts.hand_over_ms > 0 && t1 >= next_hand_over {
            next_hand_over = t1 + Duration::from_millis(opts.hand_over_ms);
            runtime::worker::hand_over(&mut ws, &slot, false);
            hand_overs += 1;
        }
        let t2 = Instant::now();
        let tx = out.tx.len() as u64;
        let dropped: u64 = out.drops.named().iter().map(|(_, v)| v).sum();
        for t in out.tx.drain(..) {
            if free.len() < burst * 4 {
                free.push(t.packet);
            }
        }
        out.clear();
        b += 1;
        if b == n_bursts {
            b = 0;
        }
        if hand_overs == 50 {
            hand_overs = 0;
            drop(std::mem::take(
                &mut *slot.lock().unwrap_or_else(|e| e.into_inner()),
            ));
        }
        let t3 = Instant::now();
        if measuring.load(Ordering::Relaxed) {
            r.record(span.len, tx, dropped, allocations, [t0, t1, t2, t3]);
            count.store(r.packets, Ordering::Relaxed);
        }
        t0 = t3;
    }
    let cs = ws.cache_stats();
    r.cache_hits = cs.hits;
    r.cache_lookups = cs.hits + cs.misses + ws.cache_bypassed();
    r
}

/// Summed figures of a phase.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    packets: u64,
    tx: u64,
    drops: u64,
    process_ns: u64,
    generator_ns: u64,
    allocations: u64,
    /// Sum over workers of packets / processing time, in Mpps.
    mpps: f64,
}

fn totals(results: &[WorkerResult]) -> Totals {
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

/// Writes the rules and the packets of a scenario (`--export`).
fn export(args: &BenchArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    use dataplane::pcap::PcapCapture;
    use dataplane::{Burst, PacketBuf, PortBackend};
    let rules = args.rules.unwrap_or(if args.smoke { 64 } else { 10_000 });
    let flows = args.flows.unwrap_or(rules);
    ensure!(flows > 0, "--flows must be at least 1");
    ensure!(
        (frame::MIN_FRAME..=9000).contains(&args.packet_size),
        "--packet-size must be {}..=9000",
        frame::MIN_FRAME
    );
    let w = Workload::new(args.scenario, rules, args.seed)?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let mut text = String::new();
    for line in (0..rules).map(|i| w.rule_text(i)).chain(w.extra_rules()) {
        match (args.out_port, line.rfind("output:")) {
            (Some(p), Some(at)) => {
                text.push_str(&line[..at]);
                text.push_str(&format!("output:{p}"));
            }
            _ => text.push_str(&line),
        }
        text.push('\n');
    }
    let flows_path = dir.join("rules.flows");
    std::fs::write(&flows_path, text).with_context(|| format!("{}", flows_path.display()))?;
    let mut order: Vec<usize> = (0..flows).collect();
    Rng::new(args.seed ^ 0xe4).shuffle(&mut order);
    let pcap_path = dir.join("traffic.pcap");
    let mut out =
        PcapCapture::create(&pcap_path).with_context(|| format!("{}", pcap_path.display()))?;
    let mut burst = Burst::with_limit(1024);
    for j in order {
        let (i, v) = Workload::flow_rule(j, flows, rules);
        let (port, frame) = w.flow(i, v);
        ensure!(
            port == 1,
            "{} with {rules} rules sends flows into port {port}; --export needs every flow on port 1",
            args.scenario.name()
        );
        if burst
            .push(PacketBuf::from_slice(&frame.build(args.packet_size)))
            .is_err()
        {
            unreachable!("the burst is sent when full");
        }
        if burst.is_full() {
            out.tx_burst(&mut burst)?;
        }
    }
    out.tx_burst(&mut burst)?;
    out.flush()?;
    eprintln!(
        "wrote {} rules to {} and {flows} packets of {} bytes to {}",
        rules + w.extra_rules().len(),
        flows_path.display(),
        args.packet_size,
        pcap_path.display()
    );
    Ok(())
}

#[cfg(feature = "dpdk")]
fn loss_free_run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let eal: Vec<String> = args.eal.split_whitespace().map(str::to_string).collect();
    let r = loss_free::run(args, args.resolution, args.trial_seconds, &eal)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    } else {
        loss_free::print(&r, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "dpdk"))]
fn loss_free_run(_: &BenchArgs) -> anyhow::Result<ExitCode> {
    bail!("--loss-free needs a fulmar built with `--features dpdk`")
}

/// Runs `fulmar bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.write_flows {
        let rules = args.rules.unwrap_or(if args.smoke { 64 } else { 10_000 });
        let w = Workload::new(args.scenario, rules, args.seed)?;
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("{}", path.display()))?,
        );
        for t in w.extra_rules() {
            writeln!(f, "{t}")?;
        }
        for i in 0..rules {
            writeln!(f, "{}", w.rule_text(i))?;
        }
        f.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = &args.export {
        export(args, dir)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.loss_free {
        return loss_free_run(args);
    }
    let report = bench(args)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        print_report(&report, &mut out)?;
    }
    let ref_bad = report
        .reference
        .as_ref()
        .is_some_and(|r| r.reference_mismatches > 0);
    Ok(if report.mismatches == 0 && !ref_bad {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Does the whole run and returns the figures.
pub fn bench(args: &BenchArgs) -> anyhow::Result<Report> {
    let rules = args.rules.unwrap_or(if args.smoke { 64 } else { 10_000 });
    let flows = args.flows.unwrap_or(rules);
    let seconds = args.seconds.unwrap_or(if args.smoke { 0.2 } else { 5.0 });
    ensure!(flows > 0, "--flows must be at least 1");
    ensure!(u32::try_from(flows).is_ok(), "--flows must fit in 32 bits");
    ensure!(
        (1..=1024).contains(&args.workers),
        "--workers must be 1..=1024"
    );
    ensure!((1..=4096).contains(&args.burst), "--burst must be 1..=4096");
    ensure!(
        (1..=1000).contains(&args.rounds),
        "--rounds must be 1..=1000"
    );
    ensure!(
        !args.reference || args.scenario.has_reference(),
        "{} has no reference loop: its figures stand beside the single-table scenarios'",
        args.scenario.name()
    );
    ensure!(
        args.publish_every >= 1,
        "--publish-every must be at least 1"
    );
    ensure!(
        (frame::MIN_FRAME..=9000).contains(&args.packet_size),
        "--packet-size must be {}..=9000",
        frame::MIN_FRAME
    );
    let max_entries = TablesConfig::default().max_entries;
    ensure!(
        rules + args.flow_mods < max_entries,
        "--rules plus --flow-mods must be below {max_entries}, the size of a table"
    );
    ensure!(
        flows.saturating_mul(args.packet_size) <= 4 << 30,
        "--flows times --packet-size is over the 4 GiB the template pool may use"
    );
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
        bail!("--seconds must be more than 0 and at most a day");
    }
    let progress = Progress::new();
    let mut notes = Vec::new();
    let mut w = Workload::new(args.scenario, rules + args.flow_mods, args.seed)?;
    w.installed = rules;
    let mut state = SwitchState::new(
        TablesConfig::default(),
        GroupsConfig::default(),
        MetersConfig::default(),
    );
    add_ports(&mut state, w.n_ports);
    let install_seconds = install(&mut state, &w, 0..rules, true, &progress)?;
    // The flows hit only the installed rules.
    let pool = Arc::new(Pool::new(
        &w,
        flows,
        rules,
        args.packet_size,
        args.burst,
        args.seed,
    ));
    // The control side keeps `state` (its indexes and counters), as
    // `fulmar run` does; the workers read the snapshot.
    let snap = snapshot_of(&state);
    let (checked, bad) = check(&w, &pool, &snap, 100, args.seed);
    for b in bad.iter().take(10) {
        eprintln!("mismatch: {b}");
    }
    let publisher = Publisher::new(snap);
    let opts = WorkerOpts {
        burst: args.burst,
        flow_cache: args.flow_cache,
        hand_over_ms: args.hand_over_ms,
    };
    let (results, wall, rss, reference) = if args.reference {
        // Resident memory before the reference's tables exist: fulmar's.
        let rss = rss_bytes();
        let r = reference::Reference::new(&w, &pool)?;
        let (ref_checked, ref_bad) = reference::check(&r, &w, &pool, 100, args.seed);
        for b in ref_bad.iter().take(10) {
            eprintln!("mismatch: {b}");
        }
        let each = seconds / args.rounds as f64;
        let mut all = vec![WorkerResult::default(); args.workers];
        let mut ref_all = WorkerResult::default();
        let (mut f_rounds, mut r_rounds, mut ratios, mut r_ns) = (vec![], vec![], vec![], vec![]);
        let mut wall = 0.0;
        for round in 0..args.rounds {
            // Alternate which goes first, so a trend in the machine's
            // load does not favour one side.
            let mut f_mpps = 0.0;
            let mut r_mpps = 0.0;
            for fulmar_turn in [round % 2 == 0, round % 2 == 1] {
                if fulmar_turn {
                    let (res, w_s, _) = traffic(
                        &publisher,
                        &pool,
                        args.workers,
                        opts,
                        each,
                        Control::Idle,
                        &progress,
                    )?;
                    for (a, b) in all.iter_mut().zip(&res) {
                        a.add(b);
                    }
                    wall += w_s;
                    f_mpps = totals(&res).mpps;
                } else {
                    let res = reference::run(&r, &pool, args.workers, args.burst, each)?;
                    let t = totals(&res);
                    res.iter().for_each(|x| ref_all.add(x));
                    r_mpps = t.mpps;
                    r_ns.push(if t.packets == 0 {
                        0.0
                    } else {
                        t.process_ns as f64 / t.packets as f64
                    });
                }
            }
            f_rounds.push(f_mpps);
            r_rounds.push(r_mpps);
            ratios.push(if r_mpps > 0.0 { f_mpps / r_mpps } else { 0.0 });
        }
        let ratio = median(&ratios);
        let target = target_of(args.scenario);
        let figures = ReferenceFigures {
            what: r.describe(),
            rounds: args.rounds,
            seconds_each: each,
            fulmar_mpps: median(&f_rounds),
            reference_mpps: median(&r_rounds),
            reference_ns_per_packet: median(&r_ns),
            ratio,
            target,
            target_met: target.map(|t| ratio >= t),
            fulmar_mpps_rounds: f_rounds,
            reference_mpps_rounds: r_rounds,
            reference_packets: ref_all.packets,
            reference_tx_packets: ref_all.tx,
            reference_dropped: ref_all.drops,
            reference_table_bytes: r.table_bytes(),
            reference_checked: ref_checked,
            reference_mismatches: ref_bad.len(),
        };
        (all, wall, rss, Some(figures))
    } else {
        let (results, wall, _) = traffic(
            &publisher,
            &pool,
            args.workers,
            opts,
            seconds,
            Control::Idle,
            &progress,
        )?;
        (results, wall, rss_bytes(), None)
    };
    let t = totals(&results);
    let per_packet = |ns: u64, packets: u64| {
        if packets == 0 {
            0.0
        } else {
            ns as f64 / packets as f64
        }
    };
    let mut fm = FlowModFigures {
        count: args.flow_mods,
        publish_every: args.publish_every,
        ..FlowModFigures::default()
    };
    if args.flow_mods > 0 {
        let mods = (rules..rules + args.flow_mods)
            .map(|i| {
                let text = w.rule_text(i);
                flowtext::parse_flow(&text).with_context(|| format!("generated rule {text:?}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        // Alone: the flow_mod calls only.
        let mut alone = state.clone();
        let t0 = Instant::now();
        for (m, i) in mods.iter().zip(rules..) {
            alone
                .flow_mod(m, Time::from_secs(1))
                .map_err(|e| anyhow::anyhow!("rule {:?} refused: {e}", w.rule_text(i)))?;
        }
        fm.per_sec = Some(mods.len() as f64 / t0.elapsed().as_secs_f64().max(1e-9));
        drop(alone);
        // With traffic: the workers forward while this thread applies the
        // same flow-mods to a copy and publishes snapshots through the
        // runtime's mechanism (dataplane::snapshot), as the runtime does.
        let mut state = state.clone();
        let (res, phase, inst) = traffic(
            &publisher,
            &pool,
            args.workers,
            opts,
            seconds,
            Control::Install {
                state: &mut state,
                mods: &mods,
                every: args.publish_every,
            },
            &progress,
        )?;
        let during = totals(&res);
        fm.applied_with_traffic = Some(inst.applied);
        fm.per_sec_with_traffic = Some(inst.applied as f64 / inst.seconds.max(1e-9));
        fm.publishes = Some(inst.publishes);
        fm.publish_ms_mean = Some(inst.publish_seconds * 1e3 / inst.publishes.max(1) as f64);
        fm.mpps_while_installing = Some(during.mpps);
        fm.ns_per_packet_while_installing = Some(per_packet(during.process_ns, during.packets));
        fm.packets_while_installing = Some(during.packets);
        fm.seconds_while_installing = Some(phase);
        fm.versions_seen = Some(res.iter().map(|r| r.versions).min().unwrap_or(0));
        if inst.applied < mods.len() {
            notes.push(format!(
                "with traffic only {} of {} flow-mods were applied within --seconds",
                inst.applied,
                mods.len()
            ));
        }
    }
    Ok(Report {
        scenario: args.scenario.name(),
        rules,
        flows,
        workers: args.workers,
        seconds: wall,
        packet_size: args.packet_size,
        burst: args.burst,
        mpps: t.mpps,
        ns_per_packet: per_packet(t.process_ns, t.packets),
        mpps_wall: t.packets as f64 / wall / 1e6,
        generator_ns_per_packet: per_packet(t.generator_ns, t.packets),
        generator_allocations: t.allocations,
        cache_hit_rate: {
            let hits: u64 = results.iter().map(|r| r.cache_hits).sum();
            let lookups: u64 = results.iter().map(|r| r.cache_lookups).sum();
            (lookups > 0).then(|| hits as f64 / lookups as f64)
        },
        rss_bytes: rss,
        template_bytes: pool.bytes.len(),
        packets: t.packets,
        tx_packets: t.tx,
        dropped: t.drops,
        install_seconds,
        install_rate: rules as f64 / install_seconds.max(1e-9),
        flow_mods: fm,
        checked,
        mismatches: bad.len(),
        reference,
        notes,
    })
}

fn print_report(r: &Report, w: &mut impl Write) -> anyhow::Result<()> {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    writeln!(
        w,
        "{}: {} rules, {} flows, {} worker{}, {}-byte packets, bursts of {}, {:.2} s",
        r.scenario,
        r.rules,
        r.flows,
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        r.packet_size,
        r.burst,
        r.seconds
    )?;
    writeln!(
        w,
        "  install     {} rules in {:.3} s ({:.0} flow-mods/s)",
        r.rules, r.install_seconds, r.install_rate
    )?;
    writeln!(
        w,
        "  check       {} of {} sampled packets forwarded as the rules say",
        r.checked - r.mismatches,
        r.checked
    )?;
    writeln!(
        w,
        "  forwarding  {:.3} Mpps, {:.1} ns/packet (pipeline only, generator subtracted)",
        r.mpps, r.ns_per_packet
    )?;
    writeln!(
        w,
        "  wall        {:.3} Mpps with the generator ({:.1} ns/packet refilling buffers, {} allocations)",
        r.mpps_wall, r.generator_ns_per_packet, r.generator_allocations
    )?;
    writeln!(
        w,
        "  packets     {} in, {} out, {} dropped",
        r.packets, r.tx_packets, r.dropped
    )?;
    match r.cache_hit_rate {
        Some(h) => writeln!(w, "  cache       {:.1}% hits", h * 100.0)?,
        None => writeln!(w, "  cache       n/a")?,
    }
    match r.rss_bytes {
        Some(b) => writeln!(
            w,
            "  memory      VmRSS {:.1} MiB (templates {:.1} MiB)",
            mib(b),
            mib(r.template_bytes as u64)
        )?,
        None => writeln!(w, "  memory      n/a")?,
    }
    let f = &r.flow_mods;
    if let Some(rate) = f.per_sec {
        writeln!(
            w,
            "  flow-mods   {} more: {rate:.0} flow-mods/s alone",
            f.count
        )?;
    }
    if let (Some(n), Some(rate), Some(p), Some(pm), Some(m), Some(ns)) = (
        f.applied_with_traffic,
        f.per_sec_with_traffic,
        f.publishes,
        f.publish_ms_mean,
        f.mpps_while_installing,
        f.ns_per_packet_while_installing,
    ) {
        writeln!(
            w,
            "  with traffic {n} applied at {rate:.0} flow-mods/s, {p} snapshots published (every {}, {pm:.3} ms each)",
            f.publish_every
        )?;
        writeln!(
            w,
            "  forwarding  {m:.3} Mpps, {ns:.1} ns/packet while installing (vs {:.3} Mpps undisturbed)",
            r.mpps
        )?;
    }
    if let Some(x) = &r.reference {
        writeln!(
            w,
            "  reference   {:.3} Mpps, {:.1} ns/packet: {}",
            x.reference_mpps, x.reference_ns_per_packet, x.what
        )?;
        writeln!(
            w,
            "  reference   check {} of {} sampled packets as the rules say; {} rounds of {:.2} s each, fulmar {:.3} Mpps",
            x.reference_checked - x.reference_mismatches,
            x.reference_checked,
            x.rounds,
            x.seconds_each,
            x.fulmar_mpps
        )?;
        writeln!(
            w,
            "  ratio       fulmar / reference = {:.3} ({:.1}%, median of {} rounds){}",
            x.ratio,
            x.ratio * 100.0,
            x.rounds,
            match (x.target, x.target_met) {
                (Some(t), Some(m)) => format!(
                    "; target >= {:.0}%: {}",
                    t * 100.0,
                    if m { "met" } else { "not met" }
                ),
                _ => String::new(),
            }
        )?;
    }
    for n in &r.notes {
        writeln!(w, "  note: {n}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: Scenario) -> BenchArgs {
        BenchArgs {
            scenario: s,
            rules: Some(50),
            flows: Some(120),
            workers: 2,
            seconds: Some(0.05),
            packet_size: 64,
            burst: 8,
            flow_cache: None,
            hand_over_ms: 1,
            flow_mods: 10,
            publish_every: 3,
            seed: 5,
            json: true,
            smoke: true,
            reference: false,
            rounds: 5,
            write_flows: None,
            export: None,
            out_port: None,
            loss_free: false,
            trial_seconds: 2.0,
            resolution: 0.02,
            eal: String::new(),
        }
    }

    /// `--export --out-port` sends every rule's output to that port, in
    /// every scenario (l2's rules have the output right after
    /// `actions=`: they kept their own ports once, and a DPDK run forwarded
    /// 7 % of its packets).
    #[test]
    fn export_out_port_rewrites_every_rule() {
        for s in [Scenario::GatewayMpls2Vlan, Scenario::L2, Scenario::L3] {
            let dir = std::env::temp_dir().join(format!(
                "fulmar-export-test-{}-{}",
                std::process::id(),
                s.name()
            ));
            let mut a = args(s);
            a.flows = Some(8);
            a.export = Some(dir.clone());
            a.out_port = Some(2);
            export(&a, &dir).unwrap();
            let text = std::fs::read_to_string(dir.join("rules.flows")).unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            assert_eq!(text.lines().count(), 50, "{}", s.name());
            for line in text.lines() {
                assert!(line.ends_with("output:2"), "{}: {line}", s.name());
                assert_eq!(line.matches("output:").count(), 1, "{line}");
                assert!(flowtext::parse_flow(line).is_ok(), "{line}");
            }
        }
    }

    /// The loss-free search end to end on a small gateway: it finds a rate
    /// above zero, and its last loss-free trial lost nothing. (The rate
    /// itself is this machine's affair; nothing is asserted about it.)
    #[cfg(feature = "dpdk")]
    #[test]
    fn loss_free_search_runs_through_dpdk_ring_ports() {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user.
        if std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(1)
            != 0
        {
            eprintln!("skipped: DPDK's EAL needs root");
            return;
        }
        let mut a = args(Scenario::GatewayMpls2Vlan);
        a.rules = Some(64);
        a.flows = Some(64);
        let eal: Vec<String> = "-l 0 --no-huge -m 512 --no-pci --no-shconf --no-telemetry"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let r = loss_free::run(&a, 0.2, 0.2, &eal).unwrap();
        let j = serde_json::to_value(&r).unwrap();
        assert!(j["loss_free_pps"].as_f64().unwrap() > 0.0, "{j}");
        let trials = j["trials"].as_array().unwrap();
        assert!(trials.len() >= 2, "{j}");
        assert!(
            trials
                .iter()
                .any(|t| t["sent"] == t["received"] && t["offered_pps"].is_f64()),
            "a paced trial without loss: {j}"
        );
    }

    #[test]
    fn export_writes_rules_and_one_packet_per_flow() {
        let dir = std::env::temp_dir().join(format!("fulmar-bench-export-{}", std::process::id()));
        let mut a = args(Scenario::GatewayMpls2Vlan);
        a.rules = Some(50);
        a.flows = Some(20);
        a.export = Some(dir.clone());
        a.out_port = Some(2);
        assert_eq!(run(&a).unwrap(), ExitCode::SUCCESS);
        let rules = std::fs::read_to_string(dir.join("rules.flows")).unwrap();
        assert_eq!(rules.lines().count(), 50);
        assert!(rules
            .lines()
            .all(|l| l.ends_with(",output:2") && l.contains("mpls_label=")));
        let mut r = dataplane::pcap::PcapReplay::open(dir.join("traffic.pcap")).unwrap();
        let mut b = dataplane::Burst::with_limit(64);
        use dataplane::PortBackend;
        r.rx_burst(&mut b).unwrap();
        assert_eq!(b.len(), 20);
        assert!(b
            .iter()
            .all(|p| p.len() == 64 && p.data()[12..14] == [0x88, 0x47]));
        // A scenario whose flows enter on several ports is refused.
        let mut many = args(Scenario::GatewayVlan2Mpls);
        many.rules = Some(5000);
        many.export = Some(dir.clone());
        let e = run(&many).unwrap_err().to_string();
        assert!(e.contains("needs every flow on port 1"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_scenario_forwards_as_its_rules_say() {
        for s in Scenario::ALL {
            let r = bench(&args(s)).unwrap();
            assert_eq!(r.mismatches, 0, "{s:?}");
            assert_eq!(r.checked, 100);
            assert!(r.packets > 0);
            assert_eq!(r.tx_packets, r.packets, "{s:?}: every packet leaves");
            assert_eq!(r.dropped, 0);
            assert_eq!(r.generator_allocations, 0, "{s:?}: buffers are reused");
            let f = &r.flow_mods;
            assert!(f.per_sec.is_some());
            // The install stops when --seconds is up, so how many of the
            // 10 flow-mods land with traffic depends on the machine's
            // speed: at least the first chunk of 3 (applied before the
            // clock is read), at most all 10, and a snapshot per chunk.
            let applied = f.applied_with_traffic.expect("flow-mods with traffic");
            assert!((3..=10).contains(&applied), "{s:?}: {applied}");
            assert_eq!(
                f.publishes,
                Some(applied.div_ceil(3) as u64),
                "{s:?}: {applied} flow-mods, a snapshot every 3"
            );
            assert!(f.packets_while_installing.is_some());
        }
    }

    #[test]
    fn reference_rounds_alternate_and_give_a_ratio() {
        for s in Scenario::ALL.into_iter().filter(|s| s.has_reference()) {
            let mut a = args(s);
            a.reference = true;
            a.rounds = 3;
            a.flow_mods = 0;
            a.workers = 1;
            let r = bench(&a).unwrap();
            assert_eq!(r.mismatches, 0, "{s:?}");
            let x = r.reference.expect("--reference figures");
            assert_eq!((x.reference_checked, x.reference_mismatches), (100, 0));
            assert_eq!(x.fulmar_mpps_rounds.len(), 3);
            assert_eq!(x.reference_mpps_rounds.len(), 3);
            assert!(x.reference_packets > 0 && x.ratio > 0.0, "{s:?}: {x:?}");
            assert_eq!(x.reference_tx_packets, x.reference_packets, "{s:?}");
            assert_eq!(x.reference_dropped, 0);
            assert_eq!(x.target.is_some(), s != Scenario::L2);
            // Fulmar's own figures cover its rounds.
            assert!(r.packets > 0 && r.tx_packets == r.packets);
        }
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn flow_mods_beyond_the_installed_rules_leave_the_check_alone() {
        // 500 generated, 200 installed: the flows and the reference see 200.
        for s in Scenario::ALL {
            let mut a = args(s);
            a.rules = Some(200);
            a.flows = Some(200);
            a.flow_mods = 300;
            a.workers = 1;
            let r = bench(&a).unwrap();
            assert_eq!((r.checked, r.mismatches), (100, 0), "{s:?}");
            assert_eq!(r.tx_packets, r.packets);
        }
    }

    #[test]
    fn the_check_catches_a_wrong_rule() {
        for s in Scenario::ALL {
            let w = Workload::new(s, 40, 3).unwrap();
            let mut state = SwitchState::new(
                TablesConfig::default(),
                GroupsConfig::default(),
                MetersConfig::default(),
            );
            install(&mut state, &w, 0..40, true, &Progress { on: false }).unwrap();
            let pool = Pool::new(&w, 40, 40, 64, 4, 3);
            // One port more than the scenario uses, for the wrong rule.
            add_ports(&mut state, w.n_ports + 1);
            let snap = snapshot_of(&state);
            assert_eq!(check(&w, &pool, &snap, 30, 1).1.len(), 0, "{s:?}");
            for wrong in [
                // Everything to a port no rule of the scenario uses.
                format!("priority=65535,actions=output:{}", w.n_ports + 1),
                // Everything dropped.
                "priority=65535,actions=drop".to_string(),
            ] {
                let mut bad_state = state.clone();
                let fm = flowtext::parse_flow(&wrong).unwrap();
                bad_state.flow_mod(&fm, Time::from_secs(1)).unwrap();
                let (n, bad) = check(&w, &pool, &snapshot_of(&bad_state), 30, 1);
                assert_eq!(n, 30);
                assert_eq!(bad.len(), 30, "{s:?} {wrong}");
            }
            // Rule 0 again above everything, with one more rewrite: the
            // right port, different bytes, for the flows that hit it.
            let r0 = w.rule_text(0);
            let (head, actions) = r0.split_once("actions=").unwrap();
            let head: Vec<&str> = head
                .split(',')
                .map(|f| {
                    if f.starts_with("priority=") {
                        "priority=65535"
                    } else {
                        f
                    }
                })
                .collect();
            let twisted = format!(
                "{}actions=set_field:02:00:00:00:00:99->eth_src,{actions}",
                head.join(",")
            );
            let mut bad_state = state.clone();
            let fm = flowtext::parse_flow(&twisted).unwrap();
            bad_state.flow_mod(&fm, Time::from_secs(1)).unwrap();
            let (n, bad) = check(&w, &pool, &snapshot_of(&bad_state), 40, 1);
            assert_eq!(n, 40, "every template checked");
            assert!(!bad.is_empty(), "{s:?}: {twisted}");
            assert!(
                bad.iter().all(|b| b.contains("020000000099")),
                "{s:?}: {bad:?}"
            );
        }
    }

    /// The faucet scenario's tables do what Faucet's do: a learned
    /// destination goes out of its port untagged, an unknown one floods
    /// the VLAN's other ports, a tagged frame on an access port drops.
    #[test]
    fn faucet_tables_forward_flood_and_drop_as_faucet_does() {
        let w = Workload::new(Scenario::Faucet, 40, 3).unwrap();
        let mut state = SwitchState::new(
            TablesConfig::default(),
            GroupsConfig::default(),
            MetersConfig::default(),
        );
        install(&mut state, &w, 0..40, true, &Progress { on: false }).unwrap();
        add_ports(&mut state, w.n_ports);
        let snap = snapshot_of(&state);
        let view = snap.view();
        let mut ws = WorkerState::new(0, 1, 0);
        let mut send = |port: u32, f: &frame::Frame| {
            let mut out = BurstOutput::default();
            let mut burst = vec![PacketBuf::from_slice(&f.build(64))];
            ws.process_burst_into(&view, port, &mut burst, Time::from_secs(2), &mut out);
            assert!(out.packet_ins.is_empty());
            let mut ports: Vec<u32> = out.tx.iter().map(|t| t.port).collect();
            ports.sort_unstable();
            (ports, out.tx.first().map(|t| t.packet.as_slice().to_vec()))
        };
        // Host 5 (port 6) to host 4 (port 5): VLAN 101, learned.
        let (in_port, f) = w.flow(4, 0);
        assert_eq!(in_port, 6);
        let (ports, bytes) = send(in_port, &f);
        assert_eq!(ports, vec![5]);
        assert_eq!(bytes.unwrap(), f.build(64), "the VLAN tag is popped again");
        // An unknown destination floods VLAN 101's other ports.
        let mut unknown = f;
        unknown.eth_dst = 0x0200_dead_beef;
        assert_eq!(send(in_port, &unknown).0, vec![5, 7, 8]);
        // A tagged frame on an access port is dropped by table 0.
        let mut tagged = f;
        tagged.tag = frame::Tag::Vlan(101);
        assert_eq!(send(in_port, &tagged).0, Vec::<u32>::new());
        // --reference is refused with a reason.
        let mut a = args(Scenario::Faucet);
        a.reference = true;
        let e = bench(&a).expect_err("faucet has no reference").to_string();
        assert!(e.contains("no reference loop"), "{e}");
    }

    #[test]
    fn pool_bursts_share_a_port_and_cover_every_flow() {
        let w = Workload::new(Scenario::GatewayVlan2Mpls, 9000, 1).unwrap();
        let pool = Pool::new(&w, 9000, 9000, 64, 32, 1);
        let mut seen = vec![false; 9000];
        for b in &pool.bursts {
            assert!(b.len >= 1 && b.len <= 32);
            for k in b.start..b.start + b.len {
                seen[pool.flow_of[k] as usize] = true;
                assert_eq!(sample_flow(&w, &pool, k).0, b.in_port);
            }
        }
        assert!(seen.iter().all(|&s| s));
        let ports: std::collections::HashSet<u32> = pool.bursts.iter().map(|b| b.in_port).collect();
        assert_eq!(ports.len(), 3, "9000 rules over 4094 VLANs per port");
        assert_eq!(pool.bytes.len(), 9000 * 64);
    }

    #[test]
    fn bad_options_are_errors() {
        let mut a = args(Scenario::L2);
        a.packet_size = 10;
        assert!(bench(&a).is_err());
        let mut a = args(Scenario::L2);
        a.seconds = Some(0.0);
        assert!(bench(&a).is_err());
        let mut a = args(Scenario::L2);
        a.burst = 0;
        assert!(bench(&a).is_err());
        let mut a = args(Scenario::L2);
        a.flows = Some(0);
        assert!(bench(&a).is_err());
        let mut a = args(Scenario::L2);
        a.rules = Some(pipeline::MAX_TABLE_ENTRIES);
        assert!(bench(&a).is_err());
        let mut a = args(Scenario::L2);
        a.flows = Some(100_000_000);
        assert!(bench(&a).is_err());
    }
}
