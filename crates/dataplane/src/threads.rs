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
//! end, [`Threads::wake_all`]) or a timeout passes.
//!
//! # Send handles
//!
//! A port is read by one thread and written by one or more. Each writer
//! gets its own handle from [`PortBackend::split_sender`]; a backend that
//! cannot split (AF_XDP, pcap, the memory generator) is put behind a mutex
//! shared by its reader and writers. Only dataplane threads take such a
//! mutex, for one burst at a time.
//!
//! # Counters and the control side
//!
//! Dataplane threads never wait for a lock the control side can hold.
//! Port counters live in the handles; each thread copies them into a
//! stats board every few milliseconds and on exit with `try_lock` (a busy
//! slot is simply updated next time), and [`Threads::port_counters`] sums
//! the slots of a port. Drops the threads make themselves are named
//! ([`ThreadDrops`]): `rx_ring_full` and `tx_ring_full` (a ring between
//! threads was full), `tx_queue_full` (a port kept refusing packets and
//! its TX burst overflowed), `no_port` (an output to a port number this
//! set of threads does not have), `port_error` (packets lost to a failed
//! send call) and `rx_error` (failed receive calls).
//! All but `no_port` are also kept per port ([`Threads::port_drops`]): a
//! packet lost on an RX → worker ring counts against the port it came in
//! on, one lost on a worker → TX ring or at a port against the port it
//! was going out of, so the control side can add them to that port's
//! OpenFlow `rx_dropped` / `tx_dropped`.
//!
//! # Shutdown
//!
//! [`Threads::stop`] stops the stages in order — RX threads first, then
//! workers once their input rings are empty, then TX threads likewise —
//! so packets already inside the switch are sent, not lost; each thread
//! flushes what it holds and publishes its final counters.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dispatch::{DispatchKey, Dispatcher};
use crate::flush::{Backoff, FlushPolicy, IdleStep};
use crate::port::{Burst, PacketBuf, PortBackend, PortCounters};
use crate::spsc::{self, Consumer, Producer};
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
}

impl PortSpec {
    /// A port that is polled or waited on as usual.
    pub fn new(number: u32, backend: Box<dyn PortBackend>) -> PortSpec {
        PortSpec {
            number,
            backend,
            woken: false,
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
}

impl ThreadDrops {
    /// Lost on the way in (the RX → worker rings).
    pub fn rx_total(&self) -> u64 {
        self.rx_ring_full
    }

    /// Lost on the way out (rings toward TX threads, port TX bursts,
    /// failed port calls) and outputs to unknown ports.
    pub fn tx_total(&self) -> u64 {
        self.tx_ring_full + self.tx_queue_full + self.port_error + self.no_port
    }

    fn add(&mut self, o: &ThreadDrops) {
        self.rx_ring_full += o.rx_ring_full;
        self.tx_ring_full += o.tx_ring_full;
        self.tx_queue_full += o.tx_queue_full;
        self.no_port += o.no_port;
        self.port_error += o.port_error;
        self.rx_error += o.rx_error;
    }
}

/// One port's drop counters (the `ThreadDrops` fields that have a port).
#[derive(Default)]
struct PortDropCells {
    rx_ring_full: AtomicU64,
    tx_ring_full: AtomicU64,
    tx_queue_full: AtomicU64,
    port_error: AtomicU64,
    rx_error: AtomicU64,
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
        }
    }
}

/// The threads' drop counters: per port (the set is fixed at start, so
/// lookups need no lock) and `no_port`.
#[derive(Default)]
struct DropCells {
    no_port: AtomicU64,
    ports: HashMap<u32, PortDropCells>,
}

impl DropCells {
    fn for_ports(numbers: impl IntoIterator<Item = u32>) -> DropCells {
        DropCells {
            no_port: AtomicU64::new(0),
            ports: numbers
                .into_iter()
                .map(|n| (n, PortDropCells::default()))
                .collect(),
        }
    }

    /// Counts `n` drops against `port` in the cell `which` picks; a port
    /// without cells counts as `no_port`.
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
}

/// RX → worker: a received packet, counted against its input port.
impl RingItem for PacketBuf {
    fn port(&self) -> u32 {
        self.meta.in_port
    }
    fn cell(c: &PortDropCells) -> &AtomicU64 {
        &c.rx_ring_full
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

/// Where threads leave their handles' counters.
struct StatsBoard {
    slots: Vec<(u32, Mutex<PortCounters>)>,
}

/// A handle whose counters a thread publishes into a board slot.
struct Published {
    slot: usize,
    handle: Handle,
}

fn publish(board: &StatsBoard, items: &mut [&mut Published]) {
    for p in items.iter_mut() {
        let c = p.handle.with(|b| b.stats());
        if let Some((_, m)) = board.slots.get(p.slot) {
            if let Ok(mut g) = m.try_lock() {
                *g = c;
            }
        }
    }
}

/// How often threads copy counters to the board.
const PUBLISH_EVERY: Duration = Duration::from_millis(5);

/// One output port's pending TX burst.
struct TxPort {
    number: u32,
    out: Published,
    pending: Burst,
    first_at: Option<Instant>,
}

/// The sending side of a thread: a pending burst per port.
struct TxSide {
    ports: Vec<TxPort>,
    index: HashMap<u32, usize>,
    drops: Arc<DropCells>,
}

impl TxSide {
    fn new(ports: Vec<TxPort>, drops: Arc<DropCells>) -> TxSide {
        let index = ports
            .iter()
            .enumerate()
            .map(|(i, p)| (p.number, i))
            .collect();
        TxSide {
            ports,
            index,
            drops,
        }
    }

    fn send(p: &mut TxPort, drops: &DropCells) {
        if p.pending.is_empty() {
            return;
        }
        let pending = &mut p.pending;
        if let Err(_e) = p.out.handle.with(|b| b.tx_burst(pending)) {
            drops.count(p.number, p.pending.len() as u64, |c| &c.port_error);
            p.pending.clear();
        }
        if p.pending.is_empty() {
            p.first_at = None;
        }
    }

    fn enqueue(&mut self, port: u32, pkt: PacketBuf, now: Instant) {
        let Some(p) = self.index.get(&port).and_then(|&i| self.ports.get_mut(i)) else {
            bump(&self.drops.no_port, 1);
            return;
        };
        if p.pending.is_full() {
            Self::send(p, &self.drops);
        }
        if p.pending.push(pkt).is_err() {
            self.drops.count(p.number, 1, |c| &c.tx_queue_full);
            return;
        }
        p.first_at.get_or_insert(now);
        if p.pending.is_full() {
            Self::send(p, &self.drops);
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
                    Self::send(p, &self.drops);
                }
            }
        }
    }

    fn flush_all(&mut self) {
        for p in &mut self.ports {
            // A port that keeps refusing is given a few more tries.
            for _ in 0..100 {
                Self::send(p, &self.drops);
                if p.pending.is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            let left = p.pending.len() as u64;
            if left > 0 {
                self.drops.count(p.number, left, |c| &c.tx_queue_full);
                p.pending.clear();
            }
        }
    }

    fn holding(&self) -> bool {
        self.ports.iter().any(|p| p.first_at.is_some())
    }
}

/// A staged burst toward a ring.
struct Stage<T> {
    ring: Producer<T>,
    bell: Arc<Doorbell>,
    pending: Vec<T>,
    limit: usize,
    first_at: Option<Instant>,
    drops: Arc<DropCells>,
}

impl<T: RingItem> Stage<T> {
    fn push(&mut self, v: T, now: Instant) {
        self.pending.push(v);
        self.first_at.get_or_insert(now);
        if self.pending.len() >= self.limit {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.ring.push_from_vec(&mut self.pending);
        // What did not fit is dropped, counted against its port.
        for v in self.pending.drain(..) {
            self.drops.count(v.port(), 1, T::cell);
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
    ) {
        if let Some(first) = self.first_at {
            if policy.due(now, first, last_input, drained) {
                self.flush();
            }
        }
    }
}

/// A running set of dataplane threads.
pub struct Threads {
    stop_rx: Arc<AtomicBool>,
    stop_workers: Arc<AtomicBool>,
    stop_tx: Arc<AtomicBool>,
    rx_handles: Vec<JoinHandle<()>>,
    worker_handles: Vec<JoinHandle<()>>,
    tx_handles: Vec<JoinHandle<()>>,
    bells: Vec<Arc<Doorbell>>,
    board: Arc<StatsBoard>,
    drops: Arc<DropCells>,
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
fn idle(
    backoff: &mut Backoff,
    holding: bool,
    bell: &Doorbell,
    fds: &[RawFd],
    timeout: Duration,
    inputs_waiting: impl FnOnce() -> bool,
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
}

fn read_port(p: &mut RxPort, burst: &mut Burst, drops: &DropCells) -> usize {
    burst.clear();
    let n = match p.input.handle.with(|b| b.rx_burst(burst)) {
        Ok(n) => n,
        Err(_) => {
            drops.count(p.number, 1, |c| &c.rx_error);
            0
        }
    };
    for pkt in burst.pkts_mut() {
        pkt.meta.in_port = p.number;
    }
    n
}

impl Threads {
    /// Starts the threads over `ports`; `make` builds worker `i`'s
    /// processor. Port numbers must be distinct.
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

    fn empty(board: StatsBoard) -> Threads {
        let drops = DropCells::for_ports(board.slots.iter().map(|(n, _)| *n));
        Threads {
            stop_rx: Arc::default(),
            stop_workers: Arc::default(),
            stop_tx: Arc::default(),
            rx_handles: Vec::new(),
            worker_handles: Vec::new(),
            tx_handles: Vec::new(),
            bells: Vec::new(),
            board: Arc::new(board),
            drops: Arc::new(drops),
        }
    }

    fn start_rtc(
        cfg: &ThreadsConfig,
        ports: Vec<PortSpec>,
        make: &mut dyn FnMut(usize) -> Box<dyn BurstProcessor>,
    ) -> io::Result<Threads> {
        let workers = cfg.workers.max(1);
        let mut slots = Vec::new();
        let bells: Vec<Arc<Doorbell>> = (0..workers)
            .map(|_| Doorbell::new().map(Arc::new))
            .collect::<io::Result<_>>()?;
        let mut rx_of: Vec<Vec<RxPort>> = (0..workers).map(|_| Vec::new()).collect();
        let mut tx_of: Vec<Vec<TxPort>> = (0..workers).map(|_| Vec::new()).collect();
        let tx_write = cfg.bursts.tx_write.max(1);
        for (i, spec) in ports.into_iter().enumerate() {
            let (reader, senders, shared) = handles_for(spec.backend, workers)?;
            let mut reader = reader;
            let bell = bells.get(i % workers).cloned();
            let rung = bell.is_some_and(|b| reader.with(|p| p.attach_doorbell(b)));
            let fdless = reader.fd().is_none() && !spec.woken && !rung;
            slots.push((spec.number, Mutex::new(PortCounters::default())));
            if let Some(list) = rx_of.get_mut(i % workers) {
                list.push(RxPort {
                    number: spec.number,
                    input: Published {
                        slot: slots.len() - 1,
                        handle: reader,
                    },
                    fdless,
                });
            }
            for (w, h) in senders.into_iter().enumerate() {
                // Shared handles are published by their reader only.
                let slot = if shared {
                    usize::MAX
                } else {
                    slots.push((spec.number, Mutex::new(PortCounters::default())));
                    slots.len() - 1
                };
                if let Some(list) = tx_of.get_mut(w) {
                    list.push(TxPort {
                        number: spec.number,
                        out: Published { slot, handle: h },
                        pending: Burst::with_limit(tx_write),
                        first_at: None,
                    });
                }
            }
        }
        let mut t = Threads::empty(StatsBoard { slots });
        for (w, ((rx, tx), bell)) in rx_of.into_iter().zip(tx_of).zip(bells).enumerate() {
            t.bells.push(bell.clone());
            let mut worker = RtcWorker {
                rx,
                tx: TxSide::new(tx, t.drops.clone()),
                processor: make(w),
                bell,
                stop: t.stop_workers.clone(),
                board: t.board.clone(),
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
        let mut slots = Vec::new();
        let rx_bells: Vec<Arc<Doorbell>> = (0..nrx)
            .map(|_| Doorbell::new().map(Arc::new))
            .collect::<io::Result<_>>()?;
        let mut rx_ports: Vec<Vec<RxPort>> = (0..nrx).map(|_| Vec::new()).collect();
        let mut tx_ports: Vec<Vec<TxPort>> = (0..ntx).map(|_| Vec::new()).collect();
        let mut tx_thread_of = HashMap::new();
        for (i, spec) in ports.into_iter().enumerate() {
            let (mut reader, mut senders, shared) = handles_for(spec.backend, 1)?;
            let bell = rx_bells.get(i % nrx).cloned();
            let rung = bell.is_some_and(|b| reader.with(|p| p.attach_doorbell(b)));
            let fdless = reader.fd().is_none() && !spec.woken && !rung;
            slots.push((spec.number, Mutex::new(PortCounters::default())));
            if let Some(list) = rx_ports.get_mut(i % nrx) {
                list.push(RxPort {
                    number: spec.number,
                    input: Published {
                        slot: slots.len() - 1,
                        handle: reader,
                    },
                    fdless,
                });
            }
            let slot = if shared {
                usize::MAX
            } else {
                slots.push((spec.number, Mutex::new(PortCounters::default())));
                slots.len() - 1
            };
            if let (Some(h), Some(list)) = (senders.pop(), tx_ports.get_mut(i % ntx)) {
                tx_thread_of.insert(spec.number, i % ntx);
                list.push(TxPort {
                    number: spec.number,
                    out: Published { slot, handle: h },
                    pending: Burst::with_limit(b.tx_write.max(1)),
                    first_at: None,
                });
            }
        }
        let mut t = Threads::empty(StatsBoard { slots });
        let worker_bells: Vec<Arc<Doorbell>> = (0..nw)
            .map(|_| Doorbell::new().map(Arc::new))
            .collect::<io::Result<_>>()?;
        let tx_bells: Vec<Arc<Doorbell>> = (0..ntx)
            .map(|_| Doorbell::new().map(Arc::new))
            .collect::<io::Result<_>>()?;
        // rx_in[w]: consumers of worker w; rx_out[r]: stages of RX thread r.
        let mut worker_in: Vec<Vec<Consumer<PacketBuf>>> = (0..nw).map(|_| Vec::new()).collect();
        let mut rx_out: Vec<Vec<Stage<PacketBuf>>> = (0..nrx).map(|_| Vec::new()).collect();
        for out in rx_out.iter_mut() {
            for (w, bell) in worker_bells.iter().enumerate() {
                let (p, c) = spsc::ring(cfg.rx_ring);
                out.push(Stage {
                    ring: p,
                    bell: bell.clone(),
                    pending: Vec::with_capacity(b.rx_write.max(1)),
                    limit: b.rx_write.max(1),
                    first_at: None,
                    drops: t.drops.clone(),
                });
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
            for (x, bell) in tx_bells.iter().enumerate() {
                let (p, c) = spsc::ring(cfg.tx_ring);
                out.push(Stage {
                    ring: p,
                    bell: bell.clone(),
                    pending: Vec::with_capacity(b.worker_write.max(1)),
                    limit: b.worker_write.max(1),
                    first_at: None,
                    drops: t.drops.clone(),
                });
                if let Some(list) = tx_in.get_mut(x) {
                    list.push(c);
                }
            }
        }
        let tx_thread_of = Arc::new(tx_thread_of);
        for (x, (ports, inputs)) in tx_ports.into_iter().zip(tx_in).enumerate() {
            let bell = tx_bells
                .get(x)
                .cloned()
                .ok_or_else(|| io::Error::other("bell"))?;
            t.bells.push(bell.clone());
            let mut th = TxThread {
                inputs,
                tx: TxSide::new(ports, t.drops.clone()),
                bell,
                stop: t.stop_tx.clone(),
                board: t.board.clone(),
                cfg: cfg.clone(),
            };
            t.tx_handles.push(spawn(
                format!("{}-tx{x}", cfg.name),
                core_of(&cfg.tx_cores, x),
                move || th.run(),
            )?);
        }
        for (w, (inputs, outs)) in worker_in.into_iter().zip(worker_out).enumerate() {
            let bell = worker_bells
                .get(w)
                .cloned()
                .ok_or_else(|| io::Error::other("bell"))?;
            t.bells.push(bell.clone());
            let mut th = SplitWorker {
                inputs,
                outs,
                tx_thread_of: tx_thread_of.clone(),
                processor: make(w),
                bell,
                stop: t.stop_workers.clone(),
                drops: t.drops.clone(),
                cfg: cfg.clone(),
            };
            t.worker_handles.push(spawn(
                format!("{}-w{w}", cfg.name),
                core_of(&cfg.worker_cores, w),
                move || th.run(),
            )?);
        }
        for (r, ((ports, outs), bell)) in rx_ports.into_iter().zip(rx_out).zip(rx_bells).enumerate()
        {
            t.bells.push(bell.clone());
            let mut th = RxThread {
                ports,
                outs,
                dispatcher: cfg.dispatcher.clone(),
                bell,
                downstream: worker_bells.iter().chain(&tx_bells).cloned().collect(),
                stop: t.stop_rx.clone(),
                board: t.board.clone(),
                drops: t.drops.clone(),
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

    /// Wakes every sleeping thread (after publishing new tables, so they
    /// pick them up at once).
    pub fn wake_all(&self) {
        for b in &self.bells {
            b.ring();
        }
    }

    /// Each port's counters, summed over the handles of all threads (as of
    /// their last publication, at most a few milliseconds old).
    pub fn port_counters(&self) -> BTreeMap<u32, PortCounters> {
        let mut out: BTreeMap<u32, PortCounters> = BTreeMap::new();
        for (port, m) in &self.board.slots {
            let c = *m.lock().unwrap_or_else(|e| e.into_inner());
            let e = out.entry(*port).or_default();
            *e = e.merged(&c);
        }
        out
    }

    /// The drops the threads made, by name, summed over all ports.
    pub fn drops(&self) -> ThreadDrops {
        let mut d = ThreadDrops {
            no_port: self.drops.no_port.load(Ordering::Relaxed),
            ..ThreadDrops::default()
        };
        for c in self.drops.ports.values() {
            d.add(&c.read());
        }
        d
    }

    /// The drops the threads made, per port (`no_port` is always 0 here;
    /// see [`Threads::drops`]). Exact: read from atomic counters, not a
    /// published copy.
    pub fn port_drops(&self) -> BTreeMap<u32, ThreadDrops> {
        self.drops
            .ports
            .iter()
            .map(|(n, c)| (*n, c.read()))
            .collect()
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
    bell: Arc<Doorbell>,
    stop: Arc<AtomicBool>,
    board: Arc<StatsBoard>,
    cfg: ThreadsConfig,
}

impl RtcWorker {
    fn publish(&mut self) {
        let mut items: Vec<&mut Published> = self.rx.iter_mut().map(|p| &mut p.input).collect();
        items.extend(
            self.tx
                .ports
                .iter_mut()
                .map(|p| &mut p.out)
                .filter(|p| p.slot != usize::MAX),
        );
        publish(&self.board, &mut items);
    }

    fn run(&mut self) {
        let mut burst = Burst::with_limit(self.cfg.bursts.rx_read.max(1));
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        let (fds, timeout) = idle_plan(&mut self.rx, &self.cfg);
        while !self.stop.load(Ordering::Acquire) {
            self.processor.between_bursts();
            let mut got = 0;
            let mut drained = true;
            for p in &mut self.rx {
                let n = read_port(p, &mut burst, &self.tx.drops);
                if n == 0 {
                    continue;
                }
                got += n;
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
            }
            self.tx.flush_due(now, last_input, drained, &self.cfg.flush);
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                self.publish();
            }
            if got == 0 {
                let holding = self.tx.holding();
                idle(&mut backoff, holding, &self.bell, &fds, timeout, || false);
            }
        }
        self.tx.flush_all();
        self.processor.finish();
        self.publish();
    }
}

/// What a thread that reads `ports` sleeps on when idle: their descriptors
/// (sorted), and how long it may sleep — short when a port has no
/// descriptor to wake it.
fn idle_plan(ports: &mut [RxPort], cfg: &ThreadsConfig) -> (Vec<RawFd>, Duration) {
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
    (fds, timeout)
}

struct RxThread {
    ports: Vec<RxPort>,
    outs: Vec<Stage<PacketBuf>>,
    dispatcher: Dispatcher,
    bell: Arc<Doorbell>,
    /// Every worker's and TX thread's doorbell: rung when input wakes this
    /// thread from sleep, so the later stages wake while this one reads
    /// (in parallel, not one after the other as each burst reaches them).
    downstream: Vec<Arc<Doorbell>>,
    stop: Arc<AtomicBool>,
    board: Arc<StatsBoard>,
    drops: Arc<DropCells>,
    cfg: ThreadsConfig,
}

impl RxThread {
    fn publish(&mut self) {
        let mut items: Vec<&mut Published> = self.ports.iter_mut().map(|p| &mut p.input).collect();
        publish(&self.board, &mut items);
    }

    fn run(&mut self) {
        let mut burst = Burst::with_limit(self.cfg.bursts.rx_read.max(1));
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        let (fds, timeout) = idle_plan(&mut self.ports, &self.cfg);
        while !self.stop.load(Ordering::Acquire) {
            let mut got = 0;
            let mut drained = true;
            let now = Instant::now();
            for p in &mut self.ports {
                let n = read_port(p, &mut burst, &self.drops);
                got += n;
                drained &= burst.room() > 0;
                for pkt in burst.drain() {
                    let w = self.dispatcher.worker_for(p.number, pkt.data());
                    if let Some(s) = self.outs.get_mut(w) {
                        s.push(pkt, now);
                    }
                }
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
            }
            for s in &mut self.outs {
                s.flush_due(now, last_input, drained, &self.cfg.flush);
            }
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                self.publish();
            }
            if got == 0 {
                let holding = self.outs.iter().any(|s| s.first_at.is_some());
                if idle(&mut backoff, holding, &self.bell, &fds, timeout, || false) {
                    for b in &self.downstream {
                        b.ring_if_sleeping();
                    }
                }
            }
        }
        for s in &mut self.outs {
            s.flush();
        }
        self.publish();
    }
}

struct SplitWorker {
    inputs: Vec<Consumer<PacketBuf>>,
    outs: Vec<Stage<(u32, PacketBuf)>>,
    tx_thread_of: Arc<HashMap<u32, usize>>,
    processor: Box<dyn BurstProcessor>,
    bell: Arc<Doorbell>,
    stop: Arc<AtomicBool>,
    drops: Arc<DropCells>,
    cfg: ThreadsConfig,
}

impl SplitWorker {
    fn run(&mut self) {
        let read = self.cfg.bursts.worker_read.max(1);
        let mut burst = Burst::with_limit(read);
        let mut run = Burst::with_limit(read);
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            self.processor.between_bursts();
            let mut got = 0;
            let now = Instant::now();
            let mut drained = true;
            for c in &mut self.inputs {
                burst.clear();
                got += c.pop_burst(&mut burst);
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
                    let (outs, map, drops) = (&mut self.outs, &self.tx_thread_of, &self.drops);
                    self.processor
                        .process(port, &mut run, &mut |out, pkt| match map
                            .get(&out)
                            .and_then(|&t| outs.get_mut(t))
                        {
                            Some(s) => s.push((out, pkt), now),
                            None => bump(&drops.no_port, 1),
                        });
                }
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
            } else if stopping {
                break;
            }
            for s in &mut self.outs {
                s.flush_due(now, last_input, drained, &self.cfg.flush);
            }
            if got == 0 {
                let holding = self.outs.iter().any(|s| s.first_at.is_some());
                let inputs = &mut self.inputs;
                idle(
                    &mut backoff,
                    holding,
                    &self.bell,
                    &[],
                    self.cfg.max_sleep,
                    || inputs.iter_mut().any(|c| c.available() > 0),
                );
            }
        }
        for s in &mut self.outs {
            s.flush();
        }
        self.processor.finish();
    }
}

struct TxThread {
    inputs: Vec<Consumer<(u32, PacketBuf)>>,
    tx: TxSide,
    bell: Arc<Doorbell>,
    stop: Arc<AtomicBool>,
    board: Arc<StatsBoard>,
    cfg: ThreadsConfig,
}

impl TxThread {
    fn publish(&mut self) {
        let mut items: Vec<&mut Published> = self
            .tx
            .ports
            .iter_mut()
            .map(|p| &mut p.out)
            .filter(|p| p.slot != usize::MAX)
            .collect();
        publish(&self.board, &mut items);
    }

    fn run(&mut self) {
        let read = self.cfg.bursts.tx_read.max(1);
        let mut backoff = Backoff::new(self.cfg.poll_window);
        let mut last_input = Instant::now();
        let mut last_publish = last_input;
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            let mut got = 0;
            let now = Instant::now();
            let mut drained = true;
            for c in &mut self.inputs {
                let tx = &mut self.tx;
                let n = c.pop_many(read, |(port, pkt)| tx.enqueue(port, pkt, now));
                got += n;
                drained &= n < read;
            }
            let now = Instant::now();
            if got > 0 {
                last_input = now;
                backoff.reset();
            } else if stopping {
                break;
            }
            self.tx.flush_due(now, last_input, drained, &self.cfg.flush);
            if now.duration_since(last_publish) >= PUBLISH_EVERY {
                last_publish = now;
                self.publish();
            }
            if got == 0 {
                let holding = self.tx.holding();
                let inputs = &mut self.inputs;
                idle(
                    &mut backoff,
                    holding,
                    &self.bell,
                    &[],
                    self.cfg.max_sleep,
                    || inputs.iter_mut().any(|c| c.available() > 0),
                );
            }
        }
        self.tx.flush_all();
        self.publish();
    }
}

#[cfg(test)]
mod tests;
