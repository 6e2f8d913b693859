//! The benchmark harness behind `fulmar bench SCENARIO` (the command
//! parses the arguments into [`Options`] and prints the [`Report`]):
//! installs a generated rule set into an in-memory pipeline, sends
//! pre-built packets through it from one or more worker threads, and
//! measures the forwarding rate, the cost per packet, resident memory and
//! the rule install rate. No root, no ports: packets come from memory.
//!
//! The map, lowest first: `frame` (test frames built byte by byte, a
//! seeded random-number generator); `workload` (the scenarios: their
//! rules as flow text, their flows, and what a correct switch does with
//! each), `options`, `progress`; `pool` (the packet templates, burst by
//! burst) and `report` (the figures); `switch` (ports, rules installed,
//! the snapshot, the sampled check); `traffic` (a timed phase of worker
//! threads); `reference` (the hand-written minimum loop of
//! `--reference`), `export` (`--export`, `--write-flows`), `loss_free`
//! (feature `dpdk`) and `coupling` ([`fn@coupling`], `--coupling`: flow-mods
//! at paced rates while the workers forward); `run` ([`fn@bench`], the
//! phases in order). No module imports a later one.
//!
//! How a run goes:
//! 1. The scenario's rules are generated (flow text, seeded) and installed
//!    with [`pipeline::SwitchState::flow_mod`]; only the `flow_mod` calls are timed
//!    (parsing the text is not).
//! 2. The state is frozen into one `Arc<Snapshot>` handed out by the
//!    runtime's snapshot `Publisher`; each worker thread has its own
//!    [`pipeline::datapath::WorkerState`] over
//!    [`pipeline::datapath::Snapshot::view`], so the run uses whatever
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
//!    (see `workload::Workload::expected`); any mismatch makes the exit
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
//!    `reference` over the same pool (the order alternating), and the
//!    report adds the medians and the median ratio fulmar / reference.
//!    Fulmar's workers keep their state from round to round, warmed by
//!    an untimed half second first, as a running switch's workers are
//!    warm: started afresh each round, a 0.4 s round at 1M flows timed
//!    mostly the first touch of the workers' counters and flow cache
//!    (gateway 1M: 0.13 of the reference in 0.4 s rounds, 0.26 in 4 s
//!    rounds).
//!
//! A timed phase lasts `--seconds`, and longer if some worker has not yet
//! finished a burst inside it (a busy machine), so its figures always
//! cover at least one burst per worker.
//!
//! `--smoke`: 64 rules and 0.2 s unless given; for tests.
//!
//! With [`Options::progress`], a progress line on stderr is updated every
//! second.

mod coupling;
mod export;
mod frame;
#[cfg(feature = "dpdk")]
mod loss_free;
mod options;
mod pool;
mod progress;
mod reference;
mod report;
mod run;
mod switch;
mod traffic;
mod workload;

pub use coupling::{coupling, CouplingOptions, CouplingReport, CouplingStep};
pub use export::{export, write_flows, Exported};
#[cfg(feature = "dpdk")]
pub use loss_free::{run as loss_free, LossFree, Trial};
pub use options::Options;
pub use report::{FlowModFigures, ReferenceFigures, Report};
pub use run::bench;
pub use workload::Scenario;
