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
//! # Files
//!
//! This file holds the public settings and counters; the rest is split by
//! concern: `mailbox` (the change protocol), `counters` (drop cells,
//! tallies), `tx` (send handles, TX staging, egress queues), `rings`
//! (staged bursts toward the rings and their time bound), `registry`
//! (the port records, cutting a port into parts), `spawn` (threads,
//! idling, reading ports), `control` (the control side's calls),
//! `rtc` and `split` (the thread loops), `shutdown`.
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

mod control;
mod counters;
mod mailbox;
mod registry;
mod rings;
mod rtc;
mod shutdown;
mod spawn;
mod split;
mod tx;

use counters::*;
use mailbox::*;
use registry::*;
use rings::*;
use rtc::*;
use shutdown::*;
use spawn::*;
use split::*;
use tx::*;

pub use registry::Threads;
pub use tx::QueueStatsHandle;

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

#[cfg(test)]
mod tests;
