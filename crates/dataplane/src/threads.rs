//! Dataplane threads: run-to-completion workers, or RX / worker / TX
//! threads joined by SPSC rings, generic over what a worker does with a
//! burst ([`BurstProcessor`]), so this crate stays free of OpenFlow.
//!
//! # Arrangements
//!
//! - [`ThreadMode::RunToCompletion`]: `workers` threads; port `i` (in the
//!   order given) is polled by worker `i % workers`, which reads a burst,
//!   runs the processor and queues each output on a per-port TX burst that
//!   it sends itself. Every worker holds a send handle to every port.
//! - [`ThreadMode::RxWorkerTx`] (the seed-000 split): RX thread `i %
//!   rx_threads` polls port `i`, picks a worker per packet with a
//!   [`Dispatcher`] and hands bursts over one ring per (RX, worker) pair;
//!   workers run the processor and hand `(out_port, packet)` over one ring
//!   per (worker, TX) pair; TX thread `i % tx_threads` sends to port `i`.
//!   A flow's packets go to one worker and every ring is FIFO, so a flow
//!   leaves in order.
//!
//!   An RX thread that input wakes from sleep rings every worker's and TX
//!   thread's doorbell at once (when they sleep), before it reads: the
//!   three wake-ups of the first packet after a pause then overlap instead
//!   of adding up (each costs tens of microseconds; see [`crate::flush`]).
//!
//! The six burst sizes ([`BurstSizes`]) bound each hand-over; partly filled
//! bursts leave by the [`FlushPolicy`]; idle threads back off and sleep
//! (see [`crate::flush`] and [`crate::wake`]) until a port descriptor is
//! readable, their doorbell rings (a ring producer, a patch port's other
//! end, [`Threads::wake_all`], a port change) or a timeout passes.
//!
//! # Send handles
//!
//! A port is read by one thread and written by one or more. Each writer
//! gets its own handle from [`PortBackend::split_sender`]; a backend that
//! cannot split (AF_XDP, pcap, the memory generator) is put behind a mutex
//! shared by its reader and writers. Only dataplane threads take such a
//! mutex, for one burst at a time.
//!
//! # Port changes
//!
//! The port set changes while the threads run ([`Threads::add_port`],
//! [`Threads::remove_port`]) without stopping them or touching the other
//! ports' handles, counters or packets. The control side never reaches
//! into a thread's state: it posts a change into the thread's mailbox
//! and rings its doorbell. Between bursts a thread looks at the mailbox's
//! flag — one atomic load when nothing changed — and only when it is set
//! `try_lock`s the queue (a queue the control side is filling just now is
//! tried again next round), swaps the changes out into a spare vector,
//! applies them, recomputes what it sleeps on (descriptors, timeout) and
//! acknowledges with a counter the control side waits for, a few seconds
//! at most (then the call fails, naming the thread).
//!
//! A new port is read by the thread with the fewest ports to read (a
//! worker, or an RX thread in the split arrangement), which attaches its
//! doorbell to it as at start; every worker gets a send handle, or in the
//! split arrangement TX thread `i % tx_threads` does (`i`: how many ports
//! were handed over before it) and every worker learns which TX thread
//! that is. The changes go out in the order packets travel backwards —
//! TX threads, then workers, then the reader — so no stage ever hands a
//! packet to a stage that does not know the port yet. Removal goes
//! forwards: the reader stops reading, workers flush what they staged and
//! forget the route, the sender sends what it holds (what the port then
//! still refuses counts as `tx_queue_full`) and drops its handle; when the
//! last thread has acknowledged, every handle is gone and the backend is
//! closed. Packets still on a ring toward a thread that no longer has the
//! port count as `no_port`, like any later output to it.
//!
//! # Capture
//!
//! [`Threads::start_capture`] hands a [`Capture`] to every thread that
//! reads or sends a port, through the mailboxes like a port change: its
//! reader copies each burst it reads (before the pipeline), its senders
//! copy what they hand to the port's `tx_burst` and push the copies of
//! the packets the port took (see [`crate::capture`]). The thread keeps
//! the capture as an `Option` in its own per-port state, so a port nobody
//! captures costs one branch per burst and nothing per packet; a thread
//! forgets a capture that has ended by itself (its frame limit reached).
//!
//! # Egress queues
//!
//! [`Threads::set_qos`] gives a port a [`crate::qos::Scheduler`], shared
//! by its senders (its TX thread, or every run-to-completion worker)
//! behind a mutex only they take, once per burst: a sender queues the
//! burst it staged by each packet's `meta.queue_id` and hands the port
//! what the rates let out now, still under the lock (so that several
//! senders keep a queue's order). While the scheduler holds packets the
//! sender counts as holding (it polls instead of sleeping) and serves the
//! port every round. A port without queues costs one branch per burst.
//! Drop-tail losses count as `qos_queue_full` (per queue in
//! [`Threads::queue_counters`]).
//!
//! # Counters and the control side
//!
//! Dataplane threads never wait for a lock the control side can hold.
//! Port counters live in the handles; each handle carries its own stats
//! slot, into which its thread copies them every few milliseconds and on
//! exit with `try_lock` (a busy slot is simply updated next time), and
//! [`Threads::port_counters`] sums the slots of a port. Drops the threads
//! make themselves are named ([`ThreadDrops`]): `rx_ring_full` and
//! `tx_ring_full` (a ring between threads was full), `tx_queue_full` (a
//! port kept refusing packets and its TX burst overflowed), `no_port` (an
//! output to a port number this set of threads does not have),
//! `port_error` (packets lost to a failed send call), `rx_error`
//! (failed receive calls), `queue_delay` and `tx_queue_delay` (a ring
//! toward a worker, or toward a TX thread, already held its time bound's
//! worth of packets, see below). All but `no_port` are also kept per port
//! ([`Threads::port_drops`]): a packet lost on an RX → worker ring counts
//! against the port it came in on, one lost on a worker → TX ring or at a
//! port against the port it was going out of, so the control side can add
//! them to that port's OpenFlow `rx_dropped` / `tx_dropped`. A port's drop
//! cells are shared by its handles; a ring's producer finds them in a
//! map of its own thread, updated with the port changes it applies.
//!
//! The control side keeps a registry of the ports (their slots and drop
//! cells), read only by the counter calls; a removed port leaves it, and
//! its drops are kept in the totals of [`Threads::drops`].
//!
//! # Bounded queueing delay
//!
//! Under [`QueueDelay::Bounded`] (the default) every queue between a wire
//! and a worker holds at most the configured time's worth of packets at
//! the rate it drains ([`crate::delay`]). Each thread measures its own
//! drain rate (a [`DrainMeter`] over its busy time) every time it
//! publishes its counters. A thread that reads ports then hands each port
//! its bound ([`PortBackend::set_rx_bound`]: the delay times its rate,
//! shared by the ports that had input); a split worker or TX thread
//! publishes its rate in a [`DrainCell`], and the producers of its input
//! rings drop a packet early, as `queue_delay`, when the ring already
//! holds the delay's worth at that rate. A producer looks at the ring's
//! fill only when the room it last computed is used up, so below the
//! bound this costs one subtraction per packet. [`QueueDelay::Deep`]
//! leaves every queue at its full size.
//!
//! # Thread statistics
//!
//! [`Threads::thread_stats`] tells per thread what `ovs-appctl
//! dpif-netdev/pmd-stats-show` tells for OVS: packets and non-empty polls,
//! time spent in rounds that found work (busy) and in rounds that did not
//! (idle, sleep included), and how full its input rings are now. A thread
//! adds to plain integers — the clock reading it takes after its reads
//! anyway closes a busy round, one more is taken only after an idle round
//! — and stores them into atomics when it publishes its port counters.
//!
//! # Shutdown
//!
//! [`Threads::stop`] stops the stages in order — RX threads first, then
//! workers once their input rings are empty, then TX threads likewise —
//! so packets already inside the switch are sent, not lost; each thread
//! flushes what it holds and publishes its final counters.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::capture::{Capture, Tap};
use crate::delay::{bound_packets, DrainCell, DrainMeter, QueueDelay, RxBound};
use crate::dispatch::{DispatchKey, Dispatcher};
use crate::flush::{Backoff, FlushPolicy, IdleStep};
use crate::port::{Burst, PacketBuf, PortBackend, PortCounters};
use crate::qos::{QosError, QosSpec, QueueCounters, Scheduler};
use crate::spsc::{self, Consumer, Producer, RingStats};
use crate::wake::{self, Doorbell};

/// What a worker does with a burst: a pipeline, a learning switch, a test
/// function. Implementations are owned by one worker thread.
pub trait BurstProcessor: Send {
    /// Processes `burst`, all received on `in_port` (the burst may be
    /// drained or left as is; it is cleared afterwards), and hands every
    /// packet to send to `out` with its output port number. Packets not
    /// handed on are dropped (count them yourself).
    fn process(&mut self, in_port: u32, burst: &mut Burst, out: &mut dyn FnMut(u32, PacketBuf));

    /// Called between bursts and on every wake-up: the place to pick up a
    /// new table version (cheap when nothing changed).
    fn between_bursts(&mut self) {}

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
    F: FnMut(u32, &mut Burst, &mut dyn FnMut(u32, PacketBuf)) + Send,
{
    fn process(&mut self, in_port: u32, burst: &mut Burst, out: &mut dyn FnMut(u32, PacketBuf)) {
        self(in_port, burst, out)
    }
}

/// Thread arrangement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThreadMode {
    /// Each worker reads, processes and sends.
    #[default]
    RunToCompletion,
    /// RX threads → rings → workers → rings → TX threads.
    RxWorkerTx,
}

/// The six burst sizes (see the datastore's `BurstSizes`): most packets
/// moved per call at each hand-over. Zero counts as 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// The feeder calls [`Threads::wake_all`] after putting packets in
    /// (a control-side injection port), so a sleeping thread need not poll
    /// this port even though it has no descriptor.
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
    /// [`Threads::queue_counters`]).
    pub qos_queue_full: u64,
    /// A ring toward a worker held its time bound's worth of packets
    /// ([`crate::delay`]); counted against the input port.
    pub queue_delay: u64,
    /// As `queue_delay`, for a ring toward a TX thread; counted against
    /// the output port.
    pub tx_queue_delay: u64,
}

impl ThreadDrops {
    /// Lost on the way in (the RX → worker rings).
    pub fn rx_total(&self) -> u64 {
        self.rx_ring_full + self.queue_delay
    }

    /// Lost on the way out (rings toward TX threads, port TX bursts,
    /// failed port calls) and outputs to unknown ports.
    pub fn tx_total(&self) -> u64 {
        self.tx_ring_full
            + self.tx_queue_full
            + self.port_error
            + self.no_port
            + self.qos_queue_full
            + self.tx_queue_delay
    }

    fn add(&mut self, o: &ThreadDrops) {
        self.rx_ring_full += o.rx_ring_full;
        self.tx_ring_full += o.tx_ring_full;
        self.tx_queue_full += o.tx_queue_full;
        self.no_port += o.no_port;
        self.port_error += o.port_error;
        self.rx_error += o.rx_error;
        self.qos_queue_full += o.qos_queue_full;
        self.queue_delay += o.queue_delay;
        self.tx_queue_delay += o.tx_queue_delay;
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
    /// Packets waiting on its input rings now (0 for threads reading
    /// ports only).
    pub ring_fill: usize,
    /// Slots of its input rings together.
    pub ring_capacity: usize,
    /// The CPU it is pinned to, if it is.
    pub core: Option<usize>,
    /// The receive queues it reads: (port number, queue), queue 0 for a
    /// port with one queue.
    pub reads: Vec<(u32, usize)>,
}

/// One port's drop counters (the `ThreadDrops` fields that have a port),
/// shared by the port's handles and the control side's registry.
#[derive(Default)]
struct PortDropCells {
    rx_ring_full: AtomicU64,
    tx_ring_full: AtomicU64,
    tx_queue_full: AtomicU64,
    port_error: AtomicU64,
    rx_error: AtomicU64,
    qos_queue_full: AtomicU64,
    queue_delay: AtomicU64,
    tx_queue_delay: AtomicU64,
}

impl PortDropCells {
    fn read(&self) -> ThreadDrops {
        ThreadDrops {
            rx_ring_full: self.rx_ring_full.load(Ordering::Relaxed),
            tx_ring_full: self.tx_ring_full.load(Ordering::Relaxed),
            tx_queue_full: self.tx_queue_full.load(Ordering::Relaxed),
            no_port: 0,
            port_error: self.port_error.load(Ordering::Relaxed),
            rx_error: self.rx_error.load(Ordering::Relaxed),
            qos_queue_full: self.qos_queue_full.load(Ordering::Relaxed),
            queue_delay: self.queue_delay.load(Ordering::Relaxed),
            tx_queue_delay: self.tx_queue_delay.load(Ordering::Relaxed),
        }
    }
}

/// A thread's own map from port number to drop cells, for drops of ring
/// items (which carry only a number); it changes with the port changes
/// the thread applies. A number without cells counts as `no_port`.
struct DropMap {
    ports: HashMap<u32, Arc<PortDropCells>>,
    no_port: Arc<AtomicU64>,
}

impl DropMap {
    fn new(no_port: Arc<AtomicU64>) -> DropMap {
        DropMap {
            ports: HashMap::new(),
            no_port,
        }
    }

    /// Counts `n` drops against `port` in the cell `which` picks.
    fn count(&self, port: u32, n: u64, which: impl FnOnce(&PortDropCells) -> &AtomicU64) {
        match self.ports.get(&port) {
            Some(c) => bump(which(c), n),
            None => bump(&self.no_port, n),
        }
    }
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// A value on a ring between threads, and the port a drop of it counts
/// against.
trait RingItem {
    /// The port whose counters a drop of this value goes to.
    fn port(&self) -> u32;
    /// The cell: `rx_ring_full` for RX → worker rings, `tx_ring_full` for
    /// worker → TX rings.
    fn cell(c: &PortDropCells) -> &AtomicU64;
    /// The cell of early drops under the time bound: `queue_delay`,
    /// `tx_queue_delay`.
    fn delay_cell(c: &PortDropCells) -> &AtomicU64;
}

/// RX → worker: a received packet, counted against its input port.
impl RingItem for PacketBuf {
    fn port(&self) -> u32 {
        self.meta.in_port
    }
    fn cell(c: &PortDropCells) -> &AtomicU64 {
        &c.rx_ring_full
    }
    fn delay_cell(c: &PortDropCells) -> &AtomicU64 {
        &c.queue_delay
    }
}

/// Worker → TX: `(output port, packet)`, counted against the output port.
impl RingItem for (u32, PacketBuf) {
    fn port(&self) -> u32 {
        self.0
    }
    fn cell(c: &PortDropCells) -> &AtomicU64 {
        &c.tx_ring_full
    }
    fn delay_cell(c: &PortDropCells) -> &AtomicU64 {
        &c.tx_queue_delay
    }
}

/// A port change for one thread.
enum Change {
    /// Read this port (a run-to-completion worker, an RX thread).
    Read(RxPort),
    /// Send to this port (a run-to-completion worker, a TX thread).
    Write(TxPort),
    /// Output to port `number` goes to TX thread `tx` (a split worker).
    Route {
        number: u32,
        tx: usize,
        drops: Arc<PortDropCells>,
    },
    /// Forget port `number` (no-op for a thread that does not have it).
    Remove(u32),
    /// Copy what port `number` receives (its reader) and sends (its
    /// senders) into `sink`; `None`: stop copying. Others ignore it.
    Capture {
        number: u32,
        sink: Option<Arc<Capture>>,
    },
    /// Send to port `number` through these egress queues (`None`: send
    /// directly again). Only its senders apply it.
    Qos {
        number: u32,
        qos: Option<Arc<QosPort>>,
    },
}

/// Port changes waiting for one thread. The control side fills `queue`
/// and raises `pending`; the thread looks at `pending` between bursts and
/// only then tries the lock; `applied` counts the changes it has applied.
#[derive(Default)]
struct Mailbox {
    pending: AtomicBool,
    queue: Mutex<Vec<Change>>,
    applied: AtomicU64,
}

impl Mailbox {
    /// Control side.
    fn post(&self, c: Change) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push(c);
        self.pending.store(true, Ordering::Release);
    }

    /// Thread side: anything to take? One atomic load.
    fn has_mail(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Thread side: swaps the waiting changes into `into` (empty; its
    /// storage becomes the queue's, so nothing is allocated). Never waits:
    /// a queue the control side holds is tried again next round.
    fn take(&self, into: &mut Vec<Change>) -> bool {
        let mut q = match self.queue.try_lock() {
            Ok(q) => q,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        self.pending.store(false, Ordering::Relaxed);
        std::mem::swap(&mut *q, into);
        true
    }

    /// Thread side: `n` changes applied (their handles dropped).
    fn ack(&self, n: usize) {
        self.applied.fetch_add(n as u64, Ordering::Release);
    }
}

/// How long [`Threads::add_port`] and [`Threads::remove_port`] wait for a
/// thread to apply a change.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// A thread's statistics as last published.
#[derive(Default)]
struct ThreadCells {
    packets: AtomicU64,
    bursts: AtomicU64,
    busy_ns: AtomicU64,
    idle_ns: AtomicU64,
}

/// A thread's statistics as it keeps them: plain integers, stored into
/// its [`ThreadCells`] when it publishes.
struct Tally {
    packets: u64,
    bursts: u64,
    busy_ns: u64,
    idle_ns: u64,
    /// End of the last round accounted for.
    mark: Instant,
}

fn nanos(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX)
}

impl Tally {
    fn new(now: Instant) -> Tally {
        Tally {
            packets: 0,
            bursts: 0,
            busy_ns: 0,
            idle_ns: 0,
            mark: now,
        }
    }

    /// A round that found `packets` in `bursts` reads ended at `now`.
    fn busy(&mut self, now: Instant, packets: usize, bursts: u64) {
        self.packets += packets as u64;
        self.bursts += bursts;
        self.busy_ns += nanos(self.mark, now);
        self.mark = now;
    }

    /// A round that found nothing ended (after its sleep) at `now`.
    fn idle(&mut self, now: Instant) {
        self.idle_ns += nanos(self.mark, now);
        self.mark = now;
    }

    fn publish(&self, c: &ThreadCells) {
        c.packets.store(self.packets, Ordering::Relaxed);
        c.bursts.store(self.bursts, Ordering::Relaxed);
        c.busy_ns.store(self.busy_ns, Ordering::Relaxed);
        c.idle_ns.store(self.idle_ns, Ordering::Relaxed);
    }
}

/// A thread's end of the control links: its doorbell, its mailbox (with a
/// spare vector to swap changes into) and its statistics cells.
struct ThreadSide {
    bell: Arc<Doorbell>,
    mail: Arc<Mailbox>,
    inbox: Vec<Change>,
    cells: Arc<ThreadCells>,
    tally: Tally,
    /// The thread's drain rate, and what of its tally it has seen.
    meter: DrainMeter,
    metered: (u64, u64),
    /// Where it publishes the rate for the producers of its input rings.
    drain: Arc<DrainCell>,
}

impl ThreadSide {
    /// Hands each waiting change to `apply` (one atomic load when there is
    /// none) and returns how many there were, for the caller to ack once
    /// it is ready; `None` when there were none. The inbox's storage is
    /// kept for the next changes.
    fn drain_mail(&mut self, mut apply: impl FnMut(Change)) -> Option<usize> {
        if !(self.mail.has_mail() && self.mail.take(&mut self.inbox)) {
            return None;
        }
        let mut inbox = std::mem::take(&mut self.inbox);
        let n = inbox.len();
        for c in inbox.drain(..) {
            apply(c);
        }
        self.inbox = inbox;
        Some(n)
    }

    /// Feeds what the tally gained since the last call into the drain
    /// meter, publishes the estimate and returns it (packets per second).
    fn measure(&mut self) -> u64 {
        let (p, b) = (self.tally.packets, self.tally.busy_ns);
        self.meter.add(
            p.saturating_sub(self.metered.0),
            b.saturating_sub(self.metered.1),
        );
        self.metered = (p, b);
        let rate = self.meter.update();
        self.drain.set(rate);
        rate
    }
}

/// The input rings of a thread, for their fill.
enum InRings {
    None,
    Packets(Vec<RingStats<PacketBuf>>),
    Outputs(Vec<RingStats<(u32, PacketBuf)>>),
}

impl InRings {
    fn fill(&self) -> usize {
        match self {
            InRings::None => 0,
            InRings::Packets(r) => r.iter().map(|s| s.len()).sum(),
            InRings::Outputs(r) => r.iter().map(|s| s.len()).sum(),
        }
    }
}

/// The control side's end of one thread.
struct ThreadCtl {
    name: String,
    role: ThreadRole,
    /// The CPU the thread is pinned to.
    core: Option<usize>,
    bell: Arc<Doorbell>,
    mail: Arc<Mailbox>,
    cells: Arc<ThreadCells>,
    rings: InRings,
    ring_capacity: usize,
    /// Changes posted so far (compared with `mail.applied`).
    posted: u64,
    /// The thread's drain rate, for the producers of its input rings.
    drain: Arc<DrainCell>,
}

impl ThreadCtl {
    fn new(name: String, role: ThreadRole, core: Option<usize>) -> io::Result<ThreadCtl> {
        Ok(ThreadCtl {
            name,
            role,
            core,
            bell: Arc::new(Doorbell::new()?),
            mail: Arc::default(),
            cells: Arc::default(),
            rings: InRings::None,
            ring_capacity: 0,
            posted: 0,
            drain: Arc::default(),
        })
    }

    /// The thread's end.
    fn side(&self) -> ThreadSide {
        ThreadSide {
            bell: self.bell.clone(),
            mail: self.mail.clone(),
            inbox: Vec::new(),
            cells: self.cells.clone(),
            tally: Tally::new(Instant::now()),
            meter: DrainMeter::default(),
            metered: (0, 0),
            drain: self.drain.clone(),
        }
    }

    /// Posts a change and wakes the thread.
    fn post(&mut self, c: Change) {
        self.mail.post(c);
        self.posted += 1;
        self.bell.ring();
    }

    fn answered(&self) -> bool {
        self.mail.applied.load(Ordering::Acquire) >= self.posted
    }

    fn stats(&self) -> ThreadStats {
        let c = &self.cells;
        ThreadStats {
            name: self.name.clone(),
            role: self.role,
            packets: c.packets.load(Ordering::Relaxed),
            bursts: c.bursts.load(Ordering::Relaxed),
            busy_ns: c.busy_ns.load(Ordering::Relaxed),
            idle_ns: c.idle_ns.load(Ordering::Relaxed),
            ring_fill: self.rings.fill(),
            ring_capacity: self.ring_capacity,
            core: self.core,
            reads: Vec::new(),
        }
    }
}

/// Waits until every thread in `ctls` has applied what was posted to it,
/// [`ACK_WAIT`] at most.
fn await_acks<'a>(ctls: impl Iterator<Item = &'a ThreadCtl> + Clone) -> io::Result<()> {
    let deadline = Instant::now() + ACK_WAIT;
    loop {
        let Some(late) = ctls.clone().find(|c| !c.answered()) else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "dataplane thread {} did not take a port change within {ACK_WAIT:?}",
                    late.name
                ),
            ));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A handle on a port: owned by this thread, or shared behind a mutex
/// with the port's other users (all dataplane threads).
enum Handle {
    Own(Box<dyn PortBackend>),
    Shared(Arc<Mutex<Box<dyn PortBackend>>>),
}

impl Handle {
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn PortBackend) -> R) -> R {
        match self {
            Handle::Own(b) => f(b.as_mut()),
            Handle::Shared(m) => {
                let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
                f(g.as_mut())
            }
        }
    }

    fn fd(&mut self) -> Option<RawFd> {
        self.with(|b| b.rx_fd())
    }
}

/// One handle's counters slot, summed per port by the control side.
type Slot = Arc<Mutex<PortCounters>>;

/// A handle and the slot its thread copies its counters into (`None`:
/// a shared handle other than the reader's, whose counters the reader
/// publishes).
struct Published {
    slot: Option<Slot>,
    handle: Handle,
}

impl Published {
    fn publish(&mut self) {
        if let Some(slot) = &self.slot {
            let c = self.handle.with(|b| b.stats());
            if let Ok(mut g) = slot.try_lock() {
                *g = c;
            }
        }
    }
}

/// How often threads copy counters to their slots.
const PUBLISH_EVERY: Duration = Duration::from_millis(5);

/// One output port's pending TX burst.
struct TxPort {
    number: u32,
    out: Published,
    pending: Burst,
    first_at: Option<Instant>,
    drops: Arc<PortDropCells>,
    /// A capture of what the port is handed, if one runs.
    capture: Option<Tap>,
    /// The port's egress queues, if it has some.
    qos: Option<Box<QosTx>>,
}

/// One queue's counters as the control side reads them.
struct QueueCells {
    id: u32,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    dropped: AtomicU64,
}

/// A port's egress queues, shared by the threads that send to it (one
/// TX thread, or every run-to-completion worker) and the control side's
/// record. Only dataplane threads take `sched`'s lock, once per burst;
/// the control side reads the cells.
pub(crate) struct QosPort {
    sched: Mutex<Scheduler<PacketBuf>>,
    /// The scheduler's clock starts here.
    epoch: Instant,
    /// Packets the scheduler holds (stored under the lock).
    held: AtomicUsize,
    /// Nanoseconds after `epoch` when the rates let the next held packet
    /// leave (stored under the lock).
    next_ns: AtomicU64,
    /// In the scheduler's queue order.
    cells: Vec<QueueCells>,
}

impl QosPort {
    fn new(spec: &QosSpec) -> Result<QosPort, QosError> {
        let sched = Scheduler::new(spec, 0)?;
        let cells = sched
            .counters()
            .map(|c| QueueCells {
                id: c.id,
                tx_packets: AtomicU64::new(0),
                tx_bytes: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            })
            .collect();
        Ok(QosPort {
            sched: Mutex::new(sched),
            epoch: Instant::now(),
            held: AtomicUsize::new(0),
            next_ns: AtomicU64::new(0),
            cells,
        })
    }

    /// Queues the staged packets (drop-tail, counted), moves what the
    /// rates let leave now into `out`, up to its room, and hands `out` to
    /// `send` before letting go of the lock: with several senders (run
    /// to completion), packets leave a queue in the order they were
    /// dequeued.
    fn service(
        &self,
        staged: &mut Burst,
        out: &mut Burst,
        drops: &PortDropCells,
        send: impl FnOnce(&mut Burst),
    ) {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut s = self.sched.lock().unwrap_or_else(|e| e.into_inner());
        let mut dropped = 0;
        for pkt in staged.drain() {
            let len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
            let queue = pkt.meta.queue_id;
            if s.enqueue(queue, pkt, len).is_err() {
                dropped += 1;
            }
        }
        while out.room() > 0 {
            let Some(pkt) = s.dequeue(now) else {
                break;
            };
            let _ = out.push(pkt);
        }
        self.held.store(s.len(), Ordering::Relaxed);
        let wait = s.wait_ns().unwrap_or(0);
        self.next_ns
            .store(now.saturating_add(wait), Ordering::Relaxed);
        for (cell, c) in self.cells.iter().zip(s.counters()) {
            cell.tx_packets.store(c.tx_packets, Ordering::Relaxed);
            cell.tx_bytes.store(c.tx_bytes, Ordering::Relaxed);
            cell.dropped.store(c.dropped, Ordering::Relaxed);
        }
        send(out);
        drop(s);
        if dropped > 0 {
            bump(&drops.qos_queue_full, dropped);
        }
    }

    /// Takes every held packet out; how many.
    fn discard(&self) -> u64 {
        let mut s = self.sched.lock().unwrap_or_else(|e| e.into_inner());
        let n = s.drain().count() as u64;
        self.held.store(0, Ordering::Relaxed);
        n
    }

    fn counters(&self) -> Vec<QueueCounters> {
        self.cells
            .iter()
            .map(|c| QueueCounters {
                id: c.id,
                tx_packets: c.tx_packets.load(Ordering::Relaxed),
                tx_bytes: c.tx_bytes.load(Ordering::Relaxed),
                dropped: c.dropped.load(Ordering::Relaxed),
            })
            .collect()
    }
}

/// The control side's view of a port's egress queue counters (as of
/// their last burst); cheap to clone, takes no lock.
#[derive(Clone)]
pub struct QueueStatsHandle(Arc<QosPort>);

impl QueueStatsHandle {
    /// Every queue's counters, the default queue included.
    pub fn counters(&self) -> Vec<QueueCounters> {
        self.0.counters()
    }
}

/// A sender's side of a port's egress queues: the shared scheduler and
/// the burst it let out that the port has not taken yet.
struct QosTx {
    port: Arc<QosPort>,
    out: Burst,
}

impl QosTx {
    fn backlog(&self) -> bool {
        !self.out.is_empty() || self.port.held.load(Ordering::Relaxed) > 0
    }

    /// How long until this port may send again (`None`: nothing held).
    /// A burst the port refused is tried again soon.
    fn wait(&self) -> Option<Duration> {
        if !self.out.is_empty() {
            return Some(QOS_RETRY);
        }
        if self.port.held.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let now = u64::try_from(self.port.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let next = self.port.next_ns.load(Ordering::Relaxed);
        Some(Duration::from_nanos(next.saturating_sub(now)))
    }
}

/// A sender whose egress queues hold packets that may leave sooner than
/// this spins for them; a later release it sleeps for (so shaping a flood
/// does not take a core).
const QOS_SPIN: Duration = Duration::from_micros(20);

/// When a port refused a burst its egress queues let out, the next try.
const QOS_RETRY: Duration = Duration::from_micros(50);

/// Port number → position in a list, looked up once per packet sent: a
/// table for the numbers below [`PortIndex::DIRECT`] (OpenFlow ports are
/// mostly small), a map for the rest.
struct PortIndex {
    direct: [u32; PortIndex::DIRECT],
    other: HashMap<u32, usize>,
}

impl Default for PortIndex {
    fn default() -> Self {
        PortIndex {
            direct: [u32::MAX; PortIndex::DIRECT],
            other: HashMap::new(),
        }
    }
}

impl PortIndex {
    const DIRECT: usize = 256;

    #[inline]
    fn get(&self, number: u32) -> Option<usize> {
        match self.direct.get(number as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => self.other.get(&number).copied(),
        }
    }

    fn insert(&mut self, number: u32, i: usize) {
        match (self.direct.get_mut(number as usize), u32::try_from(i)) {
            (Some(slot), Ok(i)) if i != u32::MAX => *slot = i,
            _ => {
                self.other.insert(number, i);
            }
        }
    }

    fn remove(&mut self, number: u32) -> Option<usize> {
        let found = self.get(number);
        if let Some(slot) = self.direct.get_mut(number as usize) {
            *slot = u32::MAX;
        }
        self.other.remove(&number);
        found
    }
}

/// The sending side of a thread: a pending burst per port.
struct TxSide {
    ports: Vec<TxPort>,
    index: PortIndex,
    no_port: Arc<AtomicU64>,
}

impl TxSide {
    fn new(ports: Vec<TxPort>, no_port: Arc<AtomicU64>) -> TxSide {
        let mut side = TxSide {
            ports: Vec::with_capacity(ports.len()),
            index: PortIndex::default(),
            no_port,
        };
        for p in ports {
            side.add(p);
        }
        side
    }

    fn add(&mut self, p: TxPort) {
        self.remove(p.number);
        self.index.insert(p.number, self.ports.len());
        self.ports.push(p);
    }

    /// Sends what is pending for port `number` (what the port refuses is
    /// dropped as `tx_queue_full`) and drops the handle.
    fn remove(&mut self, number: u32) {
        let Some(i) = self.index.remove(number) else {
            return;
        };
        if i >= self.ports.len() {
            return;
        }
        let mut p = self.ports.swap_remove(i);
        if let Some(moved) = self.ports.get(i) {
            self.index.insert(moved.number, i);
        }
        Self::send(&mut p);
        let left = p.pending.len() as u64 + Self::qos_left(&mut p);
        if left > 0 {
            bump(&p.drops.tx_queue_full, left);
        }
    }

    fn send(p: &mut TxPort) {
        // Without egress queues: this one branch per burst.
        match &mut p.qos {
            None => Self::put(&mut p.out, &mut p.pending, &mut p.capture, &p.drops),
            Some(q) => {
                let (out, capture, drops) = (&mut p.out, &mut p.capture, &p.drops);
                q.port.service(&mut p.pending, &mut q.out, drops, |b| {
                    Self::put(out, b, capture, drops)
                });
            }
        }
        if p.pending.is_empty() {
            p.first_at = None;
        }
    }

    /// Hands `pending` to the port; what it refuses stays in `pending`.
    fn put(
        out: &mut Published,
        pending: &mut Burst,
        capture: &mut Option<Tap>,
        drops: &PortDropCells,
    ) {
        if pending.is_empty() {
            return;
        }
        // Without a capture: this one branch per burst.
        let sent = match capture {
            None => out.handle.with(|b| b.tx_burst(pending)).is_ok(),
            Some(tap) => {
                tap.sending(pending.pkts());
                let before = pending.len();
                let sent = out.handle.with(|b| b.tx_burst(pending)).is_ok();
                if sent {
                    let taken = before.saturating_sub(pending.len());
                    if !tap.sent(taken) {
                        *capture = None;
                    }
                } else {
                    tap.unsent();
                }
                sent
            }
        };
        if !sent {
            bump(&drops.port_error, pending.len() as u64);
            pending.clear();
        }
    }

    /// Packets held for port `p` after what is staged: what its egress
    /// queues let out and they still hold.
    fn qos_left(p: &mut TxPort) -> u64 {
        match &mut p.qos {
            None => 0,
            Some(q) => {
                let n = q.out.len() as u64 + q.port.discard();
                q.out.clear();
                n
            }
        }
    }

    /// Starts (`Some`) or stops sending port `number` through egress
    /// queues. What the old queues already let out is sent; what they
    /// still hold is dropped, counted as `tx_queue_full`.
    fn set_qos(&mut self, number: u32, qos: Option<Arc<QosPort>>) {
        let Some(p) = self.index.get(number).and_then(|i| self.ports.get_mut(i)) else {
            return;
        };
        if let Some(old) = p.qos.take() {
            let mut old = *old;
            Self::put(&mut p.out, &mut old.out, &mut p.capture, &p.drops);
            let left = old.out.len() as u64 + old.port.discard();
            if left > 0 {
                bump(&p.drops.tx_queue_full, left);
            }
        }
        let limit = p.pending.limit();
        p.qos = qos.map(|port| {
            Box::new(QosTx {
                port,
                out: Burst::with_limit(limit),
            })
        });
    }

    /// Starts (`Some`) or stops copying what port `number` is handed.
    fn set_capture(&mut self, number: u32, sink: Option<Arc<Capture>>) {
        if let Some(p) = self.index.get(number).and_then(|i| self.ports.get_mut(i)) {
            p.capture = sink.map(Tap::new);
        }
    }

    fn enqueue(&mut self, port: u32, pkt: PacketBuf, now: Instant) {
        let Some(p) = self.index.get(port).and_then(|i| self.ports.get_mut(i)) else {
            bump(&self.no_port, 1);
            return;
        };
        if p.pending.is_full() {
            Self::send(p);
        }
        if p.pending.push(pkt).is_err() {
            bump(&p.drops.tx_queue_full, 1);
            return;
        }
        p.first_at.get_or_insert(now);
        if p.pending.is_full() {
            Self::send(p);
        }
    }

    fn flush_due(
        &mut self,
        now: Instant,
        last_input: Instant,
        drained: bool,
        policy: &FlushPolicy,
    ) {
        for p in &mut self.ports {
            if let Some(first) = p.first_at {
                if policy.due(now, first, last_input, drained) {
                    Self::send(p);
                    continue;
                }
            }
            // Held by the egress queues: leaves as the rates allow.
            if p.qos.as_ref().is_some_and(|q| q.backlog()) {
                Self::send(p);
            }
        }
    }

    fn flush_all(&mut self) {
        for p in &mut self.ports {
            // A port that keeps refusing (or whose queues' rates hold
            // packets back) is given a few more tries.
            for _ in 0..100 {
                Self::send(p);
                if p.pending.is_empty() && !p.qos.as_ref().is_some_and(|q| q.backlog()) {
                    break;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            let left = p.pending.len() as u64 + Self::qos_left(p);
            if left > 0 {
                bump(&p.drops.tx_queue_full, left);
                p.pending.clear();
                if let Some(tap) = &mut p.capture {
                    tap.unsent();
                }
            }
        }
    }

    fn holding(&self) -> bool {
        self.ports.iter().any(|p| p.first_at.is_some())
            || self.qos_wait().is_some_and(|w| w < QOS_SPIN)
    }

    /// The soonest any port's egress queues may send again (`None`:
    /// they hold nothing): an idle thread sleeps no longer.
    fn qos_wait(&self) -> Option<Duration> {
        self.ports
            .iter()
            .filter_map(|p| p.qos.as_ref().and_then(|q| q.wait()))
            .min()
    }

    /// `timeout`, or less when egress queues release a packet sooner.
    fn sleep_for(&self, timeout: Duration) -> Duration {
        self.qos_wait().map_or(timeout, |w| w.min(timeout))
    }

    fn publish(&mut self) {
        for p in &mut self.ports {
            p.out.publish();
        }
    }
}

/// A staged burst toward a ring.
struct Stage<T> {
    ring: Producer<T>,
    bell: Arc<Doorbell>,
    pending: Vec<T>,
    limit: usize,
    first_at: Option<Instant>,
    /// The ring's time bound, if it has one.
    gate: Option<Gate>,
}

/// A ring's time bound as its producer keeps it: the consumer's published
/// drain rate, and the room left under the bound when last computed.
struct Gate {
    drain: Arc<DrainCell>,
    delay: Duration,
    /// Rings the consumer drains (they share its rate).
    inputs: usize,
    room: usize,
}

impl Gate {
    fn new(drain: Arc<DrainCell>, delay: QueueDelay, inputs: usize) -> Option<Gate> {
        delay.limit().map(|delay| Gate {
            drain,
            delay,
            inputs,
            room: 0,
        })
    }

    /// Whether one more packet fits under the bound, `staged` packets
    /// being on their way into `ring` already. Looks at the ring (the
    /// consumer's index) only when the room last computed is used up.
    fn admit<T>(&mut self, ring: &mut Producer<T>, staged: usize) -> bool {
        if self.room == 0 {
            let cap = ring.capacity();
            let fill = cap - ring.free();
            let bound = bound_packets(self.delay, self.drain.get(), self.inputs, cap);
            self.room = bound.saturating_sub(fill + staged);
            if self.room == 0 {
                return false;
            }
        }
        self.room -= 1;
        true
    }
}

impl<T: RingItem> Stage<T> {
    fn new(ring: Producer<T>, bell: Arc<Doorbell>, limit: usize, gate: Option<Gate>) -> Stage<T> {
        Stage {
            ring,
            bell,
            pending: Vec::with_capacity(limit),
            limit,
            first_at: None,
            gate,
        }
    }

    fn push(&mut self, v: T, now: Instant, drops: &DropMap) {
        if let Some(g) = &mut self.gate {
            if !g.admit(&mut self.ring, self.pending.len()) {
                drops.count(v.port(), 1, T::delay_cell);
                return;
            }
        }
        self.pending.push(v);
        self.first_at.get_or_insert(now);
        if self.pending.len() >= self.limit {
            self.flush(drops);
        }
    }

    fn flush(&mut self, drops: &DropMap) {
        if self.pending.is_empty() {
            return;
        }
        self.ring.push_from_vec(&mut self.pending);
        // What did not fit is dropped, counted against its port.
        for v in self.pending.drain(..) {
            drops.count(v.port(), 1, T::cell);
        }
        self.first_at = None;
        self.bell.ring_if_sleeping();
    }

    fn flush_due(
        &mut self,
        now: Instant,
        last_input: Instant,
        drained: bool,
        policy: &FlushPolicy,
        drops: &DropMap,
    ) {
        if let Some(first) = self.first_at {
            if policy.due(now, first, last_input, drained) {
                self.flush(drops);
            }
        }
    }
}

/// The control side's record of a port: where its counters are and which
/// threads read it and (split arrangement) send to it.
struct PortRecord {
    drops: Arc<PortDropCells>,
    slots: Vec<Slot>,
    /// The worker (run to completion) or RX thread reading each of its
    /// receive queues, queue `q` on entry `q`.
    readers: Vec<usize>,
    /// The TX thread sending to it (split arrangement).
    tx: usize,
    /// The capture its threads copy into, if one was started.
    capture: Option<Arc<Capture>>,
    /// Its egress queues, if configured.
    qos: Option<Arc<QosPort>>,
}

/// A running set of dataplane threads.
pub struct Threads {
    mode: ThreadMode,
    tx_write: usize,
    stop_rx: Arc<AtomicBool>,
    stop_workers: Arc<AtomicBool>,
    stop_tx: Arc<AtomicBool>,
    rx_handles: Vec<JoinHandle<()>>,
    worker_handles: Vec<JoinHandle<()>>,
    tx_handles: Vec<JoinHandle<()>>,
    /// The control ends of the RX threads, workers and TX threads.
    rx: Vec<ThreadCtl>,
    workers: Vec<ThreadCtl>,
    tx: Vec<ThreadCtl>,
    /// The ports, read only by the counter calls.
    ports: BTreeMap<u32, PortRecord>,
    no_port: Arc<AtomicU64>,
    /// Drops counted against ports since removed.
    retired: ThreadDrops,
    /// Ports handed over so far (picks a new port's TX thread).
    given: usize,
}

/// Makes the handles for one port: a reader handle and `writers` send
/// handles (split senders, or all shared behind one mutex).
fn handles_for(
    backend: Box<dyn PortBackend>,
    writers: usize,
) -> io::Result<(Handle, Vec<Handle>, bool)> {
    let mut senders = Vec::with_capacity(writers);
    for _ in 0..writers {
        match backend.split_sender()? {
            Some(s) => senders.push(Handle::Own(s)),
            None => {
                let shared = Arc::new(Mutex::new(backend));
                let senders = (0..writers)
                    .map(|_| Handle::Shared(shared.clone()))
                    .collect();
                return Ok((Handle::Shared(shared), senders, true));
            }
        }
    }
    Ok((Handle::Own(backend), senders, false))
}

/// What [`port_parts`] makes: (reading thread, port) per receive queue,
/// the send ports, the record.
type PortParts = (Vec<(usize, RxPort)>, Vec<TxPort>, PortRecord);

/// The pieces of one port: a reader's port per receive queue (queue `q`
/// read by thread `pick(q)`, whose doorbell `bells` gives, attached),
/// `writers` send ports, and its record (TX thread still 0).
fn port_parts(
    mut spec: PortSpec,
    writers: usize,
    bells: &[Arc<Doorbell>],
    pick: &dyn Fn(usize) -> usize,
    tx_write: usize,
) -> io::Result<PortParts> {
    let number = spec.number;
    // The further queues first, while the backend is still ours alone.
    let extra = spec.backend.split_receivers()?;
    let n_queues = 1 + extra.len();
    let readers: Vec<usize> = (0..n_queues).map(pick).collect();
    if let Some(bad) = readers.iter().find(|&&r| r >= bells.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "port {number}: no reading thread {bad} (there are {})",
                bells.len()
            ),
        ));
    }
    let (reader, senders, shared) = handles_for(spec.backend, writers)?;
    let drops = Arc::new(PortDropCells::default());
    let mut slots = Vec::new();
    let woken = spec.woken;
    let rx_of = |handle: Handle, bell: &Arc<Doorbell>, slots: &mut Vec<Slot>| {
        let mut handle = handle;
        let rung = handle.with(|p| p.attach_doorbell(bell.clone()));
        let fdless = handle.fd().is_none() && !woken && !rung;
        let slot = Slot::default();
        slots.push(slot.clone());
        RxPort {
            number,
            input: Published {
                slot: Some(slot),
                handle,
            },
            fdless,
            drops: drops.clone(),
            capture: None,
            window: 0,
        }
    };
    let mut rxs = Vec::with_capacity(n_queues);
    rxs.push((readers[0], rx_of(reader, &bells[readers[0]], &mut slots)));
    for (q, h) in extra.into_iter().enumerate() {
        let r = readers[q + 1];
        rxs.push((r, rx_of(Handle::Own(h), &bells[r], &mut slots)));
    }
    let txs = senders
        .into_iter()
        .map(|handle| {
            // Shared handles are published by their reader only.
            let slot = (!shared).then(|| {
                let s = Slot::default();
                slots.push(s.clone());
                s
            });
            TxPort {
                number,
                out: Published { slot, handle },
                pending: Burst::with_limit(tx_write),
                first_at: None,
                drops: drops.clone(),
                capture: None,
                qos: None,
            }
        })
        .collect();
    spec.readers.clear();
    let record = PortRecord {
        drops,
        slots,
        readers,
        tx: 0,
        capture: None,
        qos: None,
    };
    Ok((rxs, txs, record))
}

fn spawn(
    name: String,
    core: Option<usize>,
    body: impl FnOnce() + Send + 'static,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(move || {
        if let Some(c) = core {
            // Pinning is best effort: a refused core leaves the thread free.
            let _ = wake::pin_to_core(c);
        }
        wake::set_timer_slack(1000);
        body()
    })
}

fn core_of(cores: &Option<Vec<usize>>, i: usize) -> Option<usize> {
    cores
        .as_ref()
        .filter(|c| !c.is_empty())
        .and_then(|c| c.get(i % c.len()).copied())
}

/// Sleeps or spins one idle step. Returns whether it slept and one of
/// `fds` woke it (input has arrived on a port).
/// `before_sleep` runs when it is about to sleep.
#[allow(clippy::too_many_arguments)]
fn idle(
    backoff: &mut Backoff,
    holding: bool,
    bell: &Doorbell,
    fds: &[RawFd],
    timeout: Duration,
    inputs_waiting: impl FnOnce() -> bool,
    before_sleep: impl FnOnce(),
) -> bool {
    match backoff.step(holding) {
        IdleStep::Spin => std::hint::spin_loop(),
        IdleStep::Yield => std::thread::yield_now(),
        IdleStep::Sleep => {
            bell.prepare();
            if inputs_waiting() {
                bell.cancel();
                return false;
            }
            before_sleep();
            return wake::wait(bell, fds, timeout);
        }
    }
    false
}

/// A port read by a thread.
struct RxPort {
    number: u32,
    input: Published,
    /// No descriptor to sleep on.
    fdless: bool,
    drops: Arc<PortDropCells>,
    /// A capture of what the port receives, if one runs.
    capture: Option<Tap>,
    /// Packets read since the last bound was set.
    window: u64,
}

fn read_port(p: &mut RxPort, burst: &mut Burst) -> usize {
    burst.clear();
    let n = match p.input.handle.with(|b| b.rx_burst(burst)) {
        Ok(n) => n,
        Err(_) => {
            bump(&p.drops.rx_error, 1);
            0
        }
    };
    for pkt in burst.pkts_mut() {
        pkt.meta.in_port = p.number;
    }
    p.window += n as u64;
    // Without a capture: this one branch per burst.
    if let Some(tap) = &mut p.capture {
        if n > 0 && !tap.received(burst.pkts()) {
            p.capture = None;
        }
    }
    n
}

/// Hands each port its receive queue's bound: `delay` at `rate_pps` (the
/// reading thread's drain rate), shared by the ports that had input since
/// the last call (a port without input gets a whole share, so a burst on
/// a quiet port is not cut short).
fn bound_ports(ports: &mut [RxPort], delay: QueueDelay, rate_pps: u64) {
    let Some(delay) = delay.limit() else {
        return;
    };
    let active = ports.iter().filter(|p| p.window > 0).count().max(1);
    for p in ports.iter_mut() {
        let share = if p.window > 0 { active } else { 1 };
        p.window = 0;
        let bound = RxBound {
            packets: bound_packets(delay, rate_pps, share, usize::MAX),
            delay,
        };
        p.input.handle.with(|b| b.set_rx_bound(Some(bound)));
    }
}

/// What a thread that reads ports sleeps on when idle: their descriptors
/// (sorted), and how long it may sleep — short when a port has no
/// descriptor to wake it.
#[derive(Default)]
struct IdlePlan {
    fds: Vec<RawFd>,
    timeout: Duration,
}

impl IdlePlan {
    fn of(ports: &mut [RxPort], cfg: &ThreadsConfig) -> IdlePlan {
        let mut fds: Vec<RawFd> = ports
            .iter_mut()
            .filter_map(|p| p.input.handle.fd())
            .collect();
        fds.sort_unstable();
        let timeout = if ports.iter().any(|p| p.fdless) {
            cfg.fdless_sleep
        } else {
            cfg.max_sleep
        };
        IdlePlan { fds, timeout }
    }
}

impl Threads {
    /// Starts the threads over `ports`; `make` builds worker `i`'s
    /// processor. Port numbers must be distinct (`AlreadyExists`).
    pub fn start(
        cfg: &ThreadsConfig,
        ports: Vec<PortSpec>,
        make: &mut dyn FnMut(usize) -> Box<dyn BurstProcessor>,
    ) -> io::Result<Threads> {
        match cfg.mode {
            ThreadMode::RunToCompletion => Self::start_rtc(cfg, ports, make),
            ThreadMode::RxWorkerTx => Self::start_split(cfg, ports, make),
        }
    }

    fn empty(cfg: &ThreadsConfig) -> Threads {
        Threads {
            mode: cfg.mode,
            tx_write: cfg.bursts.tx_write.max(1),
            stop_rx: Arc::default(),
            stop_workers: Arc::default(),
            stop_tx: Arc::default(),
            rx_handles: Vec::new(),
            worker_handles: Vec::new(),
            tx_handles: Vec::new(),
            rx: Vec::new(),
            workers: Vec::new(),
            tx: Vec::new(),
            ports: BTreeMap::new(),
            no_port: Arc::default(),
            retired: ThreadDrops::default(),
            given: 0,
        }
    }

    fn ctls(
        cfg: &ThreadsConfig,
        n: usize,
        tag: &str,
        role: ThreadRole,
    ) -> io::Result<Vec<ThreadCtl>> {
        let cores = match role {
            ThreadRole::Rx => &cfg.rx_cores,
            ThreadRole::Worker => &cfg.worker_cores,
            ThreadRole::Tx => &cfg.tx_cores,
        };
        (0..n)
            .map(|i| ThreadCtl::new(format!("{}-{tag}{i}", cfg.name), role, core_of(cores, i)))
            .collect()
    }

    /// rx-worker-tx: the TX thread of the `i`-th port handed over.
    fn sender_of(spec: &PortSpec, i: usize, ntx: usize) -> io::Result<usize> {
        match spec.sender {
            Some(x) if x >= ntx => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("port {}: no TX thread {x} (there are {ntx})", spec.number),
            )),
            Some(x) => Ok(x),
            None => Ok(i % ntx),
        }
    }

    fn check_new(&self, number: u32) -> io::Result<()> {
        if self.ports.contains_key(&number) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("port {number} is already in use"),
            ));
        }
        Ok(())
    }

    fn start_rtc(
        cfg: &ThreadsConfig,
        ports: Vec<PortSpec>,
        make: &mut dyn FnMut(usize) -> Box<dyn BurstProcessor>,
    ) -> io::Result<Threads> {
        let workers = cfg.workers.max(1);
        let mut t = Threads::empty(cfg);
        t.workers = Self::ctls(cfg, workers, "w", ThreadRole::Worker)?;
        let mut rx_of: Vec<Vec<RxPort>> = (0..workers).map(|_| Vec::new()).collect();
        let mut tx_of: Vec<Vec<TxPort>> = (0..workers).map(|_| Vec::new()).collect();
        let bells: Vec<Arc<Doorbell>> = t.workers.iter().map(|c| c.bell.clone()).collect();
        for (i, spec) in ports.into_iter().enumerate() {
            let number = spec.number;
            t.check_new(number)?;
            let chosen = spec.readers.clone();
            let pick = |q: usize| chosen.get(q).copied().unwrap_or((i + q) % workers);
            let (rxs, txs, record) = port_parts(spec, workers, &bells, &pick, t.tx_write)?;
            for (reader, rx) in rxs {
                if let Some(list) = rx_of.get_mut(reader) {
                    list.push(rx);
                }
            }
            for (list, tx) in tx_of.iter_mut().zip(txs) {
                list.push(tx);
            }
            t.ports.insert(number, record);
            t.given += 1;
        }
        for (w, (rx, tx)) in rx_of.into_iter().zip(tx_of).enumerate() {
            let side = t.workers.get(w).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("worker"))?;
            let mut worker = RtcWorker {
                rx,
                tx: TxSide::new(tx, t.no_port.clone()),
                processor: make(w),
                side,
                plan: IdlePlan::default(),
                stop: t.stop_workers.clone(),
                cfg: cfg.clone(),
            };
            t.worker_handles.push(spawn(
                format!("{}-w{w}", cfg.name),
                core_of(&cfg.worker_cores, w),
                move || worker.run(),
            )?);
        }
        Ok(t)
    }

    fn start_split(
        cfg: &ThreadsConfig,
        ports: Vec<PortSpec>,
        make: &mut dyn FnMut(usize) -> Box<dyn BurstProcessor>,
    ) -> io::Result<Threads> {
        let (nrx, nw, ntx) = (
            cfg.rx_threads.max(1),
            cfg.workers.max(1),
            cfg.tx_threads.max(1),
        );
        let b = cfg.bursts;
        let mut t = Threads::empty(cfg);
        t.rx = Self::ctls(cfg, nrx, "rx", ThreadRole::Rx)?;
        t.workers = Self::ctls(cfg, nw, "w", ThreadRole::Worker)?;
        t.tx = Self::ctls(cfg, ntx, "tx", ThreadRole::Tx)?;
        let mut rx_ports: Vec<Vec<RxPort>> = (0..nrx).map(|_| Vec::new()).collect();
        let mut tx_ports: Vec<Vec<TxPort>> = (0..ntx).map(|_| Vec::new()).collect();
        let bells: Vec<Arc<Doorbell>> = t.rx.iter().map(|c| c.bell.clone()).collect();
        for (i, spec) in ports.into_iter().enumerate() {
            let number = spec.number;
            t.check_new(number)?;
            let x = Self::sender_of(&spec, i, ntx)?;
            let chosen = spec.readers.clone();
            let pick = |q: usize| chosen.get(q).copied().unwrap_or((i + q) % nrx);
            let (rxs, mut txs, mut record) = port_parts(spec, 1, &bells, &pick, t.tx_write)?;
            record.tx = x;
            for (reader, rx) in rxs {
                if let Some(list) = rx_ports.get_mut(reader) {
                    list.push(rx);
                }
            }
            if let (Some(tx), Some(list)) = (txs.pop(), tx_ports.get_mut(x)) {
                list.push(tx);
            }
            t.ports.insert(number, record);
            t.given += 1;
        }
        // What every worker knows of the ports: their TX thread and cells.
        let routes: HashMap<u32, usize> = t.ports.iter().map(|(n, r)| (*n, r.tx)).collect();
        let drop_map = || {
            let mut m = DropMap::new(t.no_port.clone());
            m.ports = t.ports.iter().map(|(n, r)| (*n, r.drops.clone())).collect();
            m
        };
        let worker_drops: Vec<DropMap> = (0..nw).map(|_| drop_map()).collect();
        // worker_in[w]: consumers of worker w; rx_out[r]: stages of RX thread r.
        let mut worker_in: Vec<Vec<Consumer<PacketBuf>>> = (0..nw).map(|_| Vec::new()).collect();
        let mut rx_out: Vec<Vec<Stage<PacketBuf>>> = (0..nrx).map(|_| Vec::new()).collect();
        for out in rx_out.iter_mut() {
            for (w, ctl) in t.workers.iter().enumerate() {
                let (p, c) = spsc::ring(cfg.rx_ring);
                let gate = Gate::new(ctl.drain.clone(), cfg.queue_delay, nrx);
                out.push(Stage::new(p, ctl.bell.clone(), b.rx_write.max(1), gate));
                if let Some(list) = worker_in.get_mut(w) {
                    list.push(c);
                }
            }
        }
        let mut tx_in: Vec<Vec<Consumer<(u32, PacketBuf)>>> =
            (0..ntx).map(|_| Vec::new()).collect();
        let mut worker_out: Vec<Vec<Stage<(u32, PacketBuf)>>> =
            (0..nw).map(|_| Vec::new()).collect();
        for out in worker_out.iter_mut() {
            for (x, ctl) in t.tx.iter().enumerate() {
                let (p, c) = spsc::ring(cfg.tx_ring);
                let gate = Gate::new(ctl.drain.clone(), cfg.queue_delay, nw);
                out.push(Stage::new(p, ctl.bell.clone(), b.worker_write.max(1), gate));
                if let Some(list) = tx_in.get_mut(x) {
                    list.push(c);
                }
            }
        }
        for (ctl, inputs) in t.workers.iter_mut().zip(&worker_in) {
            ctl.ring_capacity = inputs.iter().map(|c| c.capacity()).sum();
            ctl.rings = InRings::Packets(inputs.iter().map(|c| c.stats()).collect());
        }
        for (ctl, inputs) in t.tx.iter_mut().zip(&tx_in) {
            ctl.ring_capacity = inputs.iter().map(|c| c.capacity()).sum();
            ctl.rings = InRings::Outputs(inputs.iter().map(|c| c.stats()).collect());
        }
        for (x, (ports, inputs)) in tx_ports.into_iter().zip(tx_in).enumerate() {
            let side = t.tx.get(x).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("tx thread"))?;
            let mut th = TxThread {
                inputs,
                tx: TxSide::new(ports, t.no_port.clone()),
                side,
                stop: t.stop_tx.clone(),
                cfg: cfg.clone(),
            };
            t.tx_handles.push(spawn(
                format!("{}-tx{x}", cfg.name),
                core_of(&cfg.tx_cores, x),
                move || th.run(),
            )?);
        }
        for (w, ((inputs, outs), drops)) in worker_in
            .into_iter()
            .zip(worker_out)
            .zip(worker_drops)
            .enumerate()
        {
            let side = t.workers.get(w).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("worker"))?;
            let mut th = SplitWorker {
                inputs,
                outs,
                routes: routes.clone(),
                drops,
                processor: make(w),
                side,
                stop: t.stop_workers.clone(),
                cfg: cfg.clone(),
            };
            t.worker_handles.push(spawn(
                format!("{}-w{w}", cfg.name),
                core_of(&cfg.worker_cores, w),
                move || th.run(),
            )?);
        }
        let downstream: Vec<Arc<Doorbell>> = t
            .workers
            .iter()
            .chain(&t.tx)
            .map(|c| c.bell.clone())
            .collect();
        for (r, (ports, outs)) in rx_ports.into_iter().zip(rx_out).enumerate() {
            let side = t.rx.get(r).map(|c| c.side());
            let side = side.ok_or_else(|| io::Error::other("rx thread"))?;
            let mut drops = DropMap::new(t.no_port.clone());
            drops.ports = ports.iter().map(|p| (p.number, p.drops.clone())).collect();
            let mut th = RxThread {
                ports,
                outs,
                dispatcher: cfg.dispatcher.clone(),
                side,
                plan: IdlePlan::default(),
                downstream: downstream.clone(),
                stop: t.stop_rx.clone(),
                drops,
                cfg: cfg.clone(),
            };
            t.rx_handles.push(spawn(
                format!("{}-rx{r}", cfg.name),
                core_of(&cfg.rx_cores, r),
                move || th.run(),
            )?);
        }
        Ok(t)
    }

    /// The threads that read ports: workers (run to completion) or RX
    /// threads.
    fn readers(&self) -> &[ThreadCtl] {
        match self.mode {
            ThreadMode::RunToCompletion => &self.workers,
            ThreadMode::RxWorkerTx => &self.rx,
        }
    }

    fn running(&self) -> bool {
        !self.worker_handles.is_empty()
    }

    /// Adds a port to the running threads, leaving the other ports alone.
    /// The reader with the fewest ports reads it; every worker (run to
    /// completion) or TX thread `i % tx_threads` (split) sends to it. Once
    /// this returns every thread concerned has taken it. A port number
    /// already present is `AlreadyExists` and changes nothing; a thread
    /// that does not take the port within a few seconds is `TimedOut` (the
    /// port is then withdrawn again).
    pub fn add_port(&mut self, spec: PortSpec) -> io::Result<()> {
        let number = spec.number;
        self.check_new(number)?;
        if !self.running() {
            return Err(io::Error::other("the dataplane threads have stopped"));
        }
        let n = self.readers().len().max(1);
        let base = (0..n)
            .min_by_key(|i| {
                self.ports
                    .values()
                    .map(|r| r.readers.iter().filter(|&&t| t == *i).count())
                    .sum::<usize>()
            })
            .unwrap_or(0);
        let chosen = spec.readers.clone();
        let pick = |q: usize| chosen.get(q).copied().unwrap_or((base + q) % n);
        let bells: Vec<Arc<Doorbell>> = self.readers().iter().map(|c| c.bell.clone()).collect();
        let done = match self.mode {
            ThreadMode::RunToCompletion => {
                let (rxs, txs, record) =
                    port_parts(spec, self.workers.len(), &bells, &pick, self.tx_write)?;
                self.ports.insert(number, record);
                self.given += 1;
                // Each worker applies its changes in order: a reader can
                // send to the port before it reads it.
                for (ctl, tx) in self.workers.iter_mut().zip(txs) {
                    ctl.post(Change::Write(tx));
                }
                for (reader, rx) in rxs {
                    if let Some(ctl) = self.workers.get_mut(reader) {
                        ctl.post(Change::Read(rx));
                    }
                }
                await_acks(self.workers.iter())
            }
            ThreadMode::RxWorkerTx => {
                let x = Self::sender_of(&spec, self.given, self.tx.len().max(1))?;
                let (rxs, mut txs, mut record) = port_parts(spec, 1, &bells, &pick, self.tx_write)?;
                record.tx = x;
                let drops = record.drops.clone();
                self.ports.insert(number, record);
                self.given += 1;
                self.add_split(number, rxs, txs.pop(), drops, x)
            }
        };
        if done.is_err() {
            self.withdraw(number);
        }
        done
    }

    /// The split arrangement's steps of [`Threads::add_port`], backwards
    /// along the packets' way.
    fn add_split(
        &mut self,
        number: u32,
        rxs: Vec<(usize, RxPort)>,
        tx: Option<TxPort>,
        drops: Arc<PortDropCells>,
        x: usize,
    ) -> io::Result<()> {
        if let (Some(ctl), Some(tx)) = (self.tx.get_mut(x), tx) {
            ctl.post(Change::Write(tx));
        }
        await_acks(self.tx.get(x).into_iter())?;
        for ctl in &mut self.workers {
            ctl.post(Change::Route {
                number,
                tx: x,
                drops: drops.clone(),
            });
        }
        await_acks(self.workers.iter())?;
        for (reader, rx) in rxs {
            if let Some(ctl) = self.rx.get_mut(reader) {
                ctl.post(Change::Read(rx));
            }
        }
        await_acks(self.rx.iter())
    }

    /// Tells every thread to forget `number` without waiting, and forgets
    /// it here.
    fn withdraw(&mut self, number: u32) {
        for ctl in self
            .rx
            .iter_mut()
            .chain(&mut self.workers)
            .chain(&mut self.tx)
        {
            ctl.post(Change::Remove(number));
        }
        self.retire(number);
    }

    fn retire(&mut self, number: u32) {
        if let Some(r) = self.ports.remove(&number) {
            self.retired.add(&r.drops.read());
            if let Some(c) = r.capture {
                c.stop();
            }
        }
    }

    /// Removes a port from the running threads, leaving the other ports
    /// alone: its reader stops reading, staged packets for it are sent
    /// (what the port refuses counts as `tx_queue_full`), and every thread
    /// drops its handles. Once this returns the backend is closed; later
    /// output to the number counts as `no_port`, and its counters are gone
    /// from [`Threads::port_counters`] and [`Threads::port_drops`] (its
    /// drops stay in [`Threads::drops`]). An unknown number is `NotFound`;
    /// a thread that does not answer within a few seconds is `TimedOut`
    /// (the port is then still listed, and removing it again waits again).
    pub fn remove_port(&mut self, number: u32) -> io::Result<()> {
        let Some(r) = self.ports.get(&number) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no port {number}"),
            ));
        };
        let (readers, x) = (r.readers.clone(), r.tx);
        if self.running() {
            match self.mode {
                ThreadMode::RunToCompletion => {
                    for ctl in &mut self.workers {
                        ctl.post(Change::Remove(number));
                    }
                    await_acks(self.workers.iter())?;
                }
                ThreadMode::RxWorkerTx => {
                    // Forwards along the packets' way.
                    for (i, ctl) in self.rx.iter_mut().enumerate() {
                        if readers.contains(&i) {
                            ctl.post(Change::Remove(number));
                        }
                    }
                    await_acks(self.rx.iter())?;
                    for ctl in &mut self.workers {
                        ctl.post(Change::Remove(number));
                    }
                    await_acks(self.workers.iter())?;
                    if let Some(ctl) = self.tx.get_mut(x) {
                        ctl.post(Change::Remove(number));
                    }
                    await_acks(self.tx.get(x).into_iter())?;
                }
            }
        }
        self.retire(number);
        Ok(())
    }

    /// Starts copying what port `port` receives and sends into `sink`:
    /// every thread that reads or sends the port gets it through its
    /// mailbox, and once this returns every one of them has it. The
    /// capture ends by itself at its frame limit, or by
    /// [`Threads::stop_capture`], by removing the port, or by stopping the
    /// threads; the control side writes it out with
    /// [`Capture::drain_to`]. An unknown port is `NotFound`; a port whose
    /// capture is still running is `AlreadyExists`; a thread that does
    /// not answer within a few seconds is `TimedOut` (the capture is then
    /// stopped).
    pub fn start_capture(&mut self, port: u32, sink: Arc<Capture>) -> io::Result<()> {
        let Some(r) = self.ports.get(&port) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no port {port}"),
            ));
        };
        if r.capture.as_ref().is_some_and(|c| !c.is_finished()) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("port {port} is already being captured"),
            ));
        }
        if !self.running() {
            return Err(io::Error::other("the dataplane threads have stopped"));
        }
        if let Some(r) = self.ports.get_mut(&port) {
            r.capture = Some(sink.clone());
        }
        let done = self.post_capture(port, Some(sink.clone()));
        if done.is_err() {
            self.stop_capture(port);
        }
        done
    }

    /// Stops the capture of port `port`, if one runs: no frame is taken
    /// after this returns (the writer then writes what is queued and
    /// ends), and the threads let go of it. Does nothing for a port
    /// without a capture or an unknown one.
    pub fn stop_capture(&mut self, port: u32) {
        let Some(sink) = self.ports.get_mut(&port).and_then(|r| r.capture.take()) else {
            return;
        };
        sink.stop();
        if self.running() {
            // A thread that is late lets go at its next burst anyway (the
            // capture says it has ended).
            let _ = self.post_capture(port, None);
        }
    }

    /// Posts a capture change to the threads that read or send `number`
    /// and waits for them.
    fn post_capture(&mut self, number: u32, sink: Option<Arc<Capture>>) -> io::Result<()> {
        let Some(r) = self.ports.get(&number) else {
            return Ok(());
        };
        let (readers, x) = (r.readers.clone(), r.tx);
        self.post_to(&readers, x, || Change::Capture {
            number,
            sink: sink.clone(),
        })
    }

    /// Posts `change()` to the threads that handle a port read by RX
    /// threads `readers` and sent by TX thread `x` (every worker in run
    /// to completion) and waits for them.
    fn post_to(
        &mut self,
        readers: &[usize],
        x: usize,
        change: impl Fn() -> Change,
    ) -> io::Result<()> {
        match self.mode {
            ThreadMode::RunToCompletion => {
                for ctl in &mut self.workers {
                    ctl.post(change());
                }
                await_acks(self.workers.iter())
            }
            ThreadMode::RxWorkerTx => {
                for (i, ctl) in self.rx.iter_mut().enumerate() {
                    if readers.contains(&i) {
                        ctl.post(change());
                    }
                }
                if let Some(ctl) = self.tx.get_mut(x) {
                    ctl.post(change());
                }
                await_acks(
                    self.rx
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| readers.contains(i))
                        .map(|(_, c)| c)
                        .chain(self.tx.get(x)),
                )
            }
        }
    }

    /// Sends port `port` through egress queues configured by `spec`
    /// ([`crate::qos`]), replacing any it had (their counters start
    /// again; packets they still hold are dropped as `tx_queue_full`);
    /// `None` sends it
    /// directly again. Once this returns every sender of the port has it.
    /// An unknown port is `NotFound`, a bad spec `InvalidInput` (nothing
    /// changes); a thread that does not answer within a few seconds is
    /// `TimedOut`.
    pub fn set_qos(&mut self, port: u32, spec: Option<&QosSpec>) -> io::Result<()> {
        if !self.ports.contains_key(&port) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no port {port}"),
            ));
        }
        let qos = match spec {
            Some(s) => Some(Arc::new(QosPort::new(s).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("port {port}: {e}"))
            })?)),
            None => None,
        };
        if !self.running() {
            return Err(io::Error::other("the dataplane threads have stopped"));
        }
        let Some(r) = self.ports.get_mut(&port) else {
            return Ok(());
        };
        r.qos = qos.clone();
        let x = r.tx;
        // Only the senders hold a port's queues.
        self.post_to(&[], x, || Change::Qos {
            number: port,
            qos: qos.clone(),
        })
    }

    /// The counters of port `port`'s egress queues (the default queue
    /// included, in the scheduler's order), as of their last burst;
    /// `None` when the port has none configured.
    pub fn queue_counters(&self, port: u32) -> Option<Vec<QueueCounters>> {
        self.ports
            .get(&port)
            .and_then(|r| r.qos.as_ref())
            .map(|q| q.counters())
    }

    /// A handle on port `port`'s egress queue counters that outlives
    /// this borrow (`None`: no queues configured).
    pub fn queue_handle(&self, port: u32) -> Option<QueueStatsHandle> {
        self.ports
            .get(&port)
            .and_then(|r| r.qos.clone())
            .map(QueueStatsHandle)
    }

    /// Wakes every sleeping thread (after publishing new tables, so they
    /// pick them up at once).
    pub fn wake_all(&self) {
        for c in self.rx.iter().chain(&self.workers).chain(&self.tx) {
            c.bell.ring();
        }
    }

    /// Each port's counters, summed over the handles of all threads (as of
    /// their last publication, at most a few milliseconds old).
    pub fn port_counters(&self) -> BTreeMap<u32, PortCounters> {
        self.ports
            .iter()
            .map(|(n, r)| {
                let c = r.slots.iter().fold(PortCounters::default(), |acc, s| {
                    acc.merged(&s.lock().unwrap_or_else(|e| e.into_inner()))
                });
                (*n, c)
            })
            .collect()
    }

    /// The drops the threads made, by name, summed over all ports (removed
    /// ones included).
    pub fn drops(&self) -> ThreadDrops {
        let mut d = self.retired;
        d.no_port += self.no_port.load(Ordering::Relaxed);
        for r in self.ports.values() {
            d.add(&r.drops.read());
        }
        d
    }

    /// The drops the threads made, per port (`no_port` is always 0 here;
    /// see [`Threads::drops`]). Exact: read from atomic counters, not a
    /// published copy.
    pub fn port_drops(&self) -> BTreeMap<u32, ThreadDrops> {
        self.ports
            .iter()
            .map(|(n, r)| (*n, r.drops.read()))
            .collect()
    }

    /// Per thread: packets, bursts, busy and idle time (as of its last
    /// publication, at most a few milliseconds old), and its input rings'
    /// fill now. RX threads first, then workers, then TX threads.
    pub fn thread_stats(&self) -> Vec<ThreadStats> {
        let mut out: Vec<ThreadStats> = self
            .rx
            .iter()
            .chain(&self.workers)
            .chain(&self.tx)
            .map(ThreadCtl::stats)
            .collect();
        // The readers are the RX threads (split) or the workers.
        let first = match self.mode {
            ThreadMode::RunToCompletion => self.rx.len(),
            ThreadMode::RxWorkerTx => 0,
        };
        for (number, r) in &self.ports {
            for (q, &t) in r.readers.iter().enumerate() {
                if let Some(st) = out.get_mut(first + t) {
                    st.reads.push((*number, q));
                }
            }
        }
        out
    }

    /// Number of threads running.
    pub fn thread_count(&self) -> usize {
        self.rx_handles.len() + self.worker_handles.len() + self.tx_handles.len()
    }

    /// Stops the threads stage by stage (see the module comment) and
    /// returns once all have exited.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// As [`Threads::stop`], keeping the counters readable afterwards (the
    /// final values). Calling it again does nothing.
    pub fn halt(&mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let stages = [
            (self.stop_rx.clone(), std::mem::take(&mut self.rx_handles)),
            (
                self.stop_workers.clone(),
                std::mem::take(&mut self.worker_handles),
            ),
            (self.stop_tx.clone(), std::mem::take(&mut self.tx_handles)),
        ];
        for (flag, handles) in stages {
            flag.store(true, Ordering::Release);
            self.wake_all();
            for h in handles {
                let _ = h.join();
            }
        }
        // What the threads flushed on their way out is in; writers end.
        for r in self.ports.values() {
            if let Some(c) = &r.capture {
                c.stop();
            }
        }
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct RtcWorker {
    rx: Vec<RxPort>,
    tx: TxSide,
    processor: Box<dyn BurstProcessor>,
    side: ThreadSide,
    plan: IdlePlan,
    stop: Arc<AtomicBool>,
    cfg: ThreadsConfig,
}

impl RtcWorker {
    fn publish(&mut self) {
        for p in &mut self.rx {
            p.input.publish();
        }
        self.tx.publish();
        self.side.tally.publish(&self.side.cells);
    }

    /// Applies waiting port changes, if any (one atomic load if none).
    fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Read(p) => self.rx.push(p),
            Change::Write(p) => self.tx.add(p),
            Change::Remove(number) => {
                self.rx.retain(|p| p.number != number);
                self.tx.remove(number);
            }
            Change::Capture { number, sink } => {
                for p in self.rx.iter_mut().filter(|p| p.number == number) {
                    p.capture = sink.clone().map(Tap::new);
                }
                self.tx.set_capture(number, sink);
            }
            Change::Qos { number, qos } => self.tx.set_qos(number, qos),
            Change::Route { .. } => {}
        }) else {
            return;
        };
        self.plan = IdlePlan::of(&mut self.rx, &self.cfg);
        self.side.mail.ack(n);
    }

    fn run(&mut self) {
        let mut burst = Burst::with_limit(self.cfg.bursts.rx_read.max(1));
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        self.plan = IdlePlan::of(&mut self.rx, &self.cfg);
        while !self.stop.load(Ordering::Acquire) {
            self.take_changes();
            self.processor.between_bursts();
            let mut got = 0;
            let mut bursts = 0;
            let mut drained = true;
            for p in &mut self.rx {
                let n = read_port(p, &mut burst);
                if n == 0 {
                    continue;
                }
                got += n;
                bursts += 1;
                drained &= burst.room() > 0;
                let now = Instant::now();
                let tx = &mut self.tx;
                self.processor
                    .process(p.number, &mut burst, &mut |port, pkt| {
                        tx.enqueue(port, pkt, now)
                    });
                burst.clear();
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            }
            self.tx.flush_due(now, last_input, drained, &self.cfg.flush);
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                let rate = self.side.measure();
                bound_ports(&mut self.rx, self.cfg.queue_delay, rate);
                self.publish();
            }
            if got == 0 {
                let holding = self.tx.holding();
                let plan = &self.plan;
                idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &plan.fds,
                    self.tx.sleep_for(plan.timeout),
                    || false,
                    || self.processor.idle(),
                );
                self.side.tally.idle(Instant::now());
            }
        }
        self.tx.flush_all();
        self.processor.finish();
        self.publish();
        let mut held = boxed(self.rx.drain(..));
        held.extend(boxed(self.tx.ports.drain(..)));
        drop_together(held);
    }
}

struct RxThread {
    ports: Vec<RxPort>,
    outs: Vec<Stage<PacketBuf>>,
    dispatcher: Dispatcher,
    side: ThreadSide,
    plan: IdlePlan,
    /// Every worker's and TX thread's doorbell: rung when input wakes this
    /// thread from sleep, so the later stages wake while this one reads
    /// (in parallel, not one after the other as each burst reaches them).
    downstream: Vec<Arc<Doorbell>>,
    stop: Arc<AtomicBool>,
    /// Cells of the ports it reads, for `rx_ring_full`.
    drops: DropMap,
    cfg: ThreadsConfig,
}

impl RxThread {
    fn publish(&mut self) {
        for p in &mut self.ports {
            p.input.publish();
        }
        self.side.tally.publish(&self.side.cells);
    }

    /// Applies waiting port changes, if any (one atomic load if none).
    fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Read(p) => {
                self.drops.ports.insert(p.number, p.drops.clone());
                self.ports.push(p);
            }
            Change::Remove(number) => {
                // Staged packets of the port go on (or count against
                // it) before its cells leave the map.
                for s in &mut self.outs {
                    s.flush(&self.drops);
                }
                self.ports.retain(|p| p.number != number);
                self.drops.ports.remove(&number);
            }
            Change::Capture { number, sink } => {
                for p in self.ports.iter_mut().filter(|p| p.number == number) {
                    p.capture = sink.clone().map(Tap::new);
                }
            }
            Change::Write(_) | Change::Route { .. } | Change::Qos { .. } => {}
        }) else {
            return;
        };
        self.plan = IdlePlan::of(&mut self.ports, &self.cfg);
        self.side.mail.ack(n);
    }

    fn run(&mut self) {
        let mut burst = Burst::with_limit(self.cfg.bursts.rx_read.max(1));
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        self.plan = IdlePlan::of(&mut self.ports, &self.cfg);
        while !self.stop.load(Ordering::Acquire) {
            self.take_changes();
            let mut got = 0;
            let mut bursts = 0;
            let mut drained = true;
            let now = Instant::now();
            for p in &mut self.ports {
                let n = read_port(p, &mut burst);
                got += n;
                bursts += u64::from(n > 0);
                drained &= burst.room() > 0;
                for pkt in burst.drain() {
                    let w = self.dispatcher.worker_for(p.number, pkt.data());
                    if let Some(s) = self.outs.get_mut(w) {
                        s.push(pkt, now, &self.drops);
                    }
                }
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            }
            for s in &mut self.outs {
                s.flush_due(now, last_input, drained, &self.cfg.flush, &self.drops);
            }
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                let rate = self.side.measure();
                bound_ports(&mut self.ports, self.cfg.queue_delay, rate);
                self.publish();
            }
            if got == 0 {
                let holding = self.outs.iter().any(|s| s.first_at.is_some());
                let plan = &self.plan;
                if idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &plan.fds,
                    plan.timeout,
                    || false,
                    || {},
                ) {
                    for b in &self.downstream {
                        b.ring_if_sleeping();
                    }
                }
                self.side.tally.idle(Instant::now());
            }
        }
        for s in &mut self.outs {
            s.flush(&self.drops);
        }
        self.publish();
        drop_together(boxed(self.ports.drain(..)));
    }
}

struct SplitWorker {
    inputs: Vec<Consumer<PacketBuf>>,
    outs: Vec<Stage<(u32, PacketBuf)>>,
    /// Output port → TX thread.
    routes: HashMap<u32, usize>,
    /// Output port → cells, for `tx_ring_full`.
    drops: DropMap,
    processor: Box<dyn BurstProcessor>,
    side: ThreadSide,
    stop: Arc<AtomicBool>,
    cfg: ThreadsConfig,
}

impl SplitWorker {
    /// Applies waiting port changes, if any (one atomic load if none).
    fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Route { number, tx, drops } => {
                self.routes.insert(number, tx);
                self.drops.ports.insert(number, drops);
            }
            Change::Remove(number) => {
                // Staged packets for the port go on (or count against
                // it) before the route goes.
                for s in &mut self.outs {
                    s.flush(&self.drops);
                }
                self.routes.remove(&number);
                self.drops.ports.remove(&number);
            }
            Change::Read(_) | Change::Write(_) | Change::Capture { .. } | Change::Qos { .. } => {}
        }) else {
            return;
        };
        self.side.mail.ack(n);
    }

    fn run(&mut self) {
        let read = self.cfg.bursts.worker_read.max(1);
        let mut burst = Burst::with_limit(read);
        let mut run = Burst::with_limit(read);
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            self.take_changes();
            self.processor.between_bursts();
            let mut got = 0;
            let mut bursts = 0;
            let now = Instant::now();
            let mut drained = true;
            for c in &mut self.inputs {
                burst.clear();
                let n = c.pop_burst(&mut burst);
                got += n;
                bursts += u64::from(n > 0);
                drained &= burst.room() > 0;
                // Runs of packets from one port go to the processor together.
                let mut pkts = burst.drain().peekable();
                while let Some(first) = pkts.next() {
                    let port = first.meta.in_port;
                    run.clear();
                    let _ = run.push(first);
                    while let Some(next) = pkts.next_if(|p| p.meta.in_port == port) {
                        let _ = run.push(next);
                    }
                    let (outs, routes, drops) = (&mut self.outs, &self.routes, &self.drops);
                    self.processor
                        .process(port, &mut run, &mut |out, pkt| match routes
                            .get(&out)
                            .and_then(|&t| outs.get_mut(t))
                        {
                            Some(s) => s.push((out, pkt), now, drops),
                            None => bump(&drops.no_port, 1),
                        });
                }
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            } else if stopping {
                break;
            }
            for s in &mut self.outs {
                s.flush_due(now, last_input, drained, &self.cfg.flush, &self.drops);
            }
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                self.side.measure();
                self.side.tally.publish(&self.side.cells);
            }
            if got == 0 {
                let holding = self.outs.iter().any(|s| s.first_at.is_some());
                let inputs = &mut self.inputs;
                idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &[],
                    self.cfg.max_sleep,
                    || inputs.iter_mut().any(|c| c.available() > 0),
                    || self.processor.idle(),
                );
                self.side.tally.idle(Instant::now());
            }
        }
        for s in &mut self.outs {
            s.flush(&self.drops);
        }
        self.processor.finish();
        self.side.tally.publish(&self.side.cells);
    }
}

struct TxThread {
    inputs: Vec<Consumer<(u32, PacketBuf)>>,
    tx: TxSide,
    side: ThreadSide,
    stop: Arc<AtomicBool>,
    cfg: ThreadsConfig,
}

impl TxThread {
    fn publish(&mut self) {
        self.tx.publish();
        self.side.tally.publish(&self.side.cells);
    }

    /// Applies waiting port changes, if any (one atomic load if none).
    fn take_changes(&mut self) {
        let Some(n) = self.side.drain_mail(|c| match c {
            Change::Write(p) => self.tx.add(p),
            Change::Remove(number) => self.tx.remove(number),
            Change::Capture { number, sink } => self.tx.set_capture(number, sink),
            Change::Qos { number, qos } => self.tx.set_qos(number, qos),
            Change::Read(_) | Change::Route { .. } => {}
        }) else {
            return;
        };
        self.side.mail.ack(n);
    }

    fn run(&mut self) {
        let read = self.cfg.bursts.tx_read.max(1);
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        self.side.tally = Tally::new(last_input);
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            self.take_changes();
            let mut got = 0;
            let mut bursts = 0;
            let now = Instant::now();
            let mut drained = true;
            for c in &mut self.inputs {
                let tx = &mut self.tx;
                let n = c.pop_many(read, |(port, pkt)| tx.enqueue(port, pkt, now));
                got += n;
                bursts += u64::from(n > 0);
                drained &= n < read;
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
                self.side.tally.busy(now, got, bursts);
            } else if stopping {
                break;
            }
            self.tx.flush_due(now, last_input, drained, &self.cfg.flush);
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                self.side.measure();
                self.publish();
            }
            if got == 0 {
                let holding = self.tx.holding();
                let inputs = &mut self.inputs;
                idle(
                    &mut backoff,
                    holding,
                    &self.side.bell,
                    &[],
                    self.tx.sleep_for(self.cfg.max_sleep),
                    || inputs.iter_mut().any(|c| c.available() > 0),
                    || {},
                );
                self.side.tally.idle(Instant::now());
            }
        }
        self.tx.flush_all();
        self.publish();
        drop_together(boxed(self.tx.ports.drain(..)));
    }
}

/// The items of `it`, each boxed as something to drop.
fn boxed<T: Send + 'static>(it: impl Iterator<Item = T>) -> Vec<Box<dyn Send>> {
    it.map(|x| Box::new(x) as Box<dyn Send>).collect()
}

/// Drops `items` each on its own thread, all at once, and returns when all
/// are dropped. A stopping thread's ports go this way: the kernel waits for
/// an RCU grace period when it releases a packet socket (6-24 ms each in
/// this VM), so two veth ports closed one after the other took 78 ms, all
/// of it forwarding lost in a restart. (A thread that cannot be spawned
/// drops its item here.)
fn drop_together(items: Vec<Box<dyn Send>>) {
    if items.len() < 2 {
        return;
    }
    std::thread::scope(|s| {
        for it in items {
            let _ = std::thread::Builder::new()
                .name("fulmar-close".into())
                .spawn_scoped(s, move || drop(it));
        }
    });
}

#[cfg(test)]
mod tests;
