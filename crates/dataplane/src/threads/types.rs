//! The public settings and counters of a set of threads: what a worker
//! does with a burst, the arrangement, burst sizes, ports handed over,
//! drops by name, thread statistics.

use std::fmt;
use std::time::{Duration, Instant};

use crate::delay::QueueDelay;
use crate::dispatch::{DispatchKey, Dispatcher};
use crate::flush::FlushPolicy;
use crate::port::{Burst, Outbox, PortBackend};

use super::cycles::StageCycles;

/// What a worker does with a burst: a pipeline, a learning switch, a test
/// function. Implementations are owned by one worker thread.
pub trait BurstProcessor: Send {
    /// Processes `burst`, all received on `in_port` at about `now` (the
    /// time the thread last read, at the end of its previous round or
    /// wake-up: a clock read per round, not per burst), and puts every
    /// packet to send in `out` with its output port number (`out` is empty
    /// on entry). The burst may be drained or left as is; it is cleared
    /// afterwards. Packets not handed on are dropped (count them
    /// yourself).
    fn process(&mut self, in_port: u32, burst: &mut Burst, now: Instant, out: &mut Outbox);

    /// Called between bursts and on every wake-up, `now` being the time
    /// the thread last read (at the end of its last round or wake-up): the
    /// place to pick up a new table version (cheap when nothing changed).
    fn between_bursts(&mut self, _now: Instant) {}

    /// Called when the thread is about to sleep for want of input (it
    /// calls [`BurstProcessor::between_bursts`] again before its next
    /// burst): the place to let go of a table version, so that barriers
    /// need not wait for a thread that has nothing to do (see
    /// [`crate::snapshot::Reader::park`]).
    fn idle(&mut self) {}

    /// Called once when the worker stops.
    fn finish(&mut self) {}
}

/// Any `FnMut(in_port, burst, out)` is a processor.
impl<F> BurstProcessor for F
where
    F: FnMut(u32, &mut Burst, &mut Outbox) + Send,
{
    fn process(&mut self, in_port: u32, burst: &mut Burst, _now: Instant, out: &mut Outbox) {
        self(in_port, burst, out)
    }
}

/// Thread arrangement (spelled in `crate::settings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ThreadMode {
    /// Each worker reads, processes and sends.
    #[default]
    RunToCompletion,
    /// RX threads → rings → workers → rings → TX threads.
    RxWorkerTx,
}

/// The six burst sizes (the configuration's `[dataplane.burst]`): most
/// packets moved per call at each hand-over. Zero counts as 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BurstSizes {
    /// Port → RX thread (run-to-completion: port → worker).
    pub rx_read: usize,
    /// RX thread → worker ring.
    pub rx_write: usize,
    /// Worker ring → worker.
    pub worker_read: usize,
    /// Worker → TX ring.
    pub worker_write: usize,
    /// TX ring → TX thread.
    pub tx_read: usize,
    /// TX thread → port (run-to-completion: worker → port).
    pub tx_write: usize,
}

impl Default for BurstSizes {
    fn default() -> Self {
        BurstSizes {
            rx_read: 32,
            rx_write: 32,
            worker_read: 32,
            worker_write: 32,
            tx_read: 32,
            tx_write: 32,
        }
    }
}

/// Settings of a set of dataplane threads.
#[derive(Clone, Debug)]
pub struct ThreadsConfig {
    /// Prefix of the thread names (`NAME-w0`, `NAME-rx0`, ...).
    pub name: String,
    /// Arrangement.
    pub mode: ThreadMode,
    /// RX threads (split mode; at least 1).
    pub rx_threads: usize,
    /// Workers (at least 1).
    pub workers: usize,
    /// TX threads (split mode; at least 1).
    pub tx_threads: usize,
    /// Burst sizes.
    pub bursts: BurstSizes,
    /// Partial-burst flushing.
    pub flush: FlushPolicy,
    /// Slots of each RX → worker ring.
    pub rx_ring: usize,
    /// Slots of each worker → TX ring.
    pub tx_ring: usize,
    /// RX dispatch (split mode).
    pub dispatcher: Dispatcher,
    /// Cores for RX threads, workers and TX threads (thread `i` gets
    /// `cores[i % len]`); `None`: not pinned.
    pub rx_cores: Option<Vec<usize>>,
    /// See `rx_cores`.
    pub worker_cores: Option<Vec<usize>>,
    /// See `rx_cores`.
    pub tx_cores: Option<Vec<usize>>,
    /// How long an idle thread keeps polling (yielding between polls)
    /// before it sleeps; `Duration::MAX`: never (busy polling). See
    /// [`crate::flush`].
    pub poll_window: Duration,
    /// Longest sleep of an idle thread (it also wakes on input).
    pub max_sleep: Duration,
    /// Longest sleep when some input has neither a descriptor to wait on
    /// nor a doorbell it rings ([`PortBackend::attach_doorbell`]; patch
    /// ports have one): such ports (the memory generator, pcap replay) are
    /// polled at least this often.
    pub fdless_sleep: Duration,
    /// How long packets may wait in the queues toward a worker (default
    /// `Deep`, the rings' and ports' full sizes; the daemon bounds it by
    /// its configuration, `max_queue_delay_us`).
    pub queue_delay: QueueDelay,
}

impl Default for ThreadsConfig {
    fn default() -> Self {
        ThreadsConfig {
            name: "dp".into(),
            mode: ThreadMode::RunToCompletion,
            rx_threads: 1,
            workers: 1,
            tx_threads: 1,
            bursts: BurstSizes::default(),
            flush: FlushPolicy::default(),
            rx_ring: 1024,
            tx_ring: 1024,
            dispatcher: Dispatcher::new(DispatchKey::FiveTuple, 1),
            rx_cores: None,
            worker_cores: None,
            tx_cores: None,
            poll_window: crate::flush::POLL_WINDOW,
            max_sleep: Duration::from_millis(5),
            fdless_sleep: Duration::from_micros(50),
            queue_delay: QueueDelay::Deep,
        }
    }
}

/// A port handed to the threads.
pub struct PortSpec {
    /// The number packets carry as `in_port` and processors output to.
    pub number: u32,
    /// The backend.
    pub backend: Box<dyn PortBackend>,
    /// The feeder calls [`Threads::wake_all`](super::Threads::wake_all)
    /// after putting packets in (a control-side injection port), so a
    /// sleeping thread need not poll this port even though it has no
    /// descriptor.
    pub woken: bool,
    /// Which thread reads each receive queue (queue `q` on entry `q`): a
    /// worker index (run to completion) or an RX thread index
    /// (rx-worker-tx). Queues past the list's end, or all with an empty
    /// list, are spread over the threads in turn. A port has one queue
    /// unless its backend has more ([`PortBackend::split_receivers`]).
    pub readers: Vec<usize>,
    /// rx-worker-tx: the TX thread that sends to the port (`None`: in
    /// turn).
    pub sender: Option<usize>,
}

impl PortSpec {
    /// A port that is polled or waited on as usual.
    pub fn new(number: u32, backend: Box<dyn PortBackend>) -> PortSpec {
        PortSpec {
            number,
            backend,
            woken: false,
            readers: Vec::new(),
            sender: None,
        }
    }
}

/// Drops the threads made themselves, by name (for one port, or summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadDrops {
    /// An RX → worker ring was full.
    pub rx_ring_full: u64,
    /// A worker → TX ring was full.
    pub tx_ring_full: u64,
    /// A port refused packets until its TX burst overflowed.
    pub tx_queue_full: u64,
    /// Output to a port number the threads do not have.
    pub no_port: u64,
    /// Packets lost to a failed send call.
    pub port_error: u64,
    /// Failed receive calls (each counted once; what they lost is unknown).
    pub rx_error: u64,
    /// An egress queue was full (drop-tail; per queue in
    /// [`Threads::queue_counters`](super::Threads::queue_counters)).
    pub qos_queue_full: u64,
}

impl ThreadDrops {
    /// Lost on the way in (the RX → worker rings).
    pub fn rx_total(&self) -> u64 {
        self.rx_ring_full
    }

    /// Lost on the way out (rings toward TX threads, port TX bursts,
    /// failed port calls) and outputs to unknown ports.
    pub fn tx_total(&self) -> u64 {
        self.tx_ring_full
            + self.tx_queue_full
            + self.port_error
            + self.no_port
            + self.qos_queue_full
    }

    pub(super) fn add(&mut self, o: &ThreadDrops) {
        self.rx_ring_full += o.rx_ring_full;
        self.tx_ring_full += o.tx_ring_full;
        self.tx_queue_full += o.tx_queue_full;
        self.no_port += o.no_port;
        self.port_error += o.port_error;
        self.rx_error += o.rx_error;
        self.qos_queue_full += o.qos_queue_full;
    }
}

/// What a thread does, for [`ThreadStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadRole {
    /// Reads ports and hands packets to workers (split arrangement).
    Rx,
    /// Runs the processor (and, run to completion, reads and sends too).
    Worker,
    /// Sends to ports what workers hand it (split arrangement).
    Tx,
}

impl ThreadRole {
    /// `rx`, `worker` or `tx`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ThreadRole::Rx => "rx",
            ThreadRole::Worker => "worker",
            ThreadRole::Tx => "tx",
        }
    }
}

impl fmt::Display for ThreadRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thread's work so far (as of its last publication, a few
/// milliseconds old), and its input rings now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStats {
    /// The thread's name (`br0-w0`, `br0-rx0`, `br0-tx0`).
    pub name: String,
    /// What it does.
    pub role: ThreadRole,
    /// Packets it handled: read from ports (RX threads, run-to-completion
    /// workers) or taken from its input rings (split workers, TX threads).
    pub packets: u64,
    /// Non-empty reads (of a port or a ring).
    pub bursts: u64,
    /// Time in rounds that found work, in nanoseconds.
    pub busy_ns: u64,
    /// Time in rounds that found nothing, sleeping included, in
    /// nanoseconds.
    pub idle_ns: u64,
    /// Cycles spent per stage ([`tsc_hz`](super::tsc_hz) per second);
    /// divided by `packets`, cycles per packet per stage.
    pub cycles: StageCycles,
    /// Packets waiting on its input rings now (0 for threads reading
    /// ports only).
    pub ring_fill: usize,
    /// Slots of its input rings together.
    pub ring_capacity: usize,
    /// The CPU it is pinned to, if it is.
    pub core: Option<usize>,
    /// It yields its CPU after every round that found work (split mode,
    /// when it shares its CPUs with more busy-polling threads of the set
    /// than there are CPUs; decided once at start).
    pub yields: bool,
    /// The receive queues it reads: (port number, queue), queue 0 for a
    /// port with one queue.
    pub reads: Vec<(u32, usize)>,
}
