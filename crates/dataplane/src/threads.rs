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
//!   A split thread that may run only on CPUs where more of the set's
//!   threads may run than there are CPUs (`spawn::crowded`, decided once
//!   as it starts from its own affinity and the others' placement) calls
//!   `sched_yield` after every round that found work: busy-polling threads
//!   on one CPU would otherwise hand it over once per scheduler slice
//!   (milliseconds) while the burst just handed on waits for the next
//!   stage. [`ThreadStats::yields`] tells which threads do.
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
//! (failed receive calls). All but `no_port` are also kept per port
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
//! Under [`QueueDelay::Bounded`] (the default) every port's receive
//! queue holds at most the configured time's worth of packets at the rate
//! its reader drains ([`crate::delay`]). Each thread measures its own
//! drain rate (a [`DrainMeter`] over its busy time) every time it
//! publishes its counters. A thread that reads ports then hands each port
//! its bound ([`PortBackend::set_rx_bound`]: the delay times its rate,
//! shared by the ports that had input). The rings between the split
//! mode's threads keep their capacity (`rings` says why).
//! [`QueueDelay::Deep`] leaves every queue at its full size.
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
//! This file only declares the parts and re-exports them. `types` holds
//! the public settings and counters; the rest is split by concern:
//! `counters` (drop cells, tallies), `tx` (send handles, TX staging,
//! egress queues), `rings` (staged bursts toward the rings and their time
//! bound), `spawn` (threads, idling, reading ports), `mailbox` (the change
//! protocol), `registry` (the port records, cutting a port into parts),
//! `shutdown`, `rtc` and `split` (the thread loops), `control` (the
//! control side's calls). Each part imports what it uses from the parts
//! listed before it, never from a later one (`scripts/check-layers.py`).
//!
//! # Shutdown
//!
//! [`Threads::stop`] stops the stages in order — RX threads first, then
//! workers once their input rings are empty, then TX threads likewise —
//! so packets already inside the switch are sent, not lost; each thread
//! flushes what it holds and publishes its final counters.
//!
//! [`Capture`]: crate::capture::Capture
//! [`Dispatcher`]: crate::dispatch::Dispatcher
//! [`DrainMeter`]: crate::delay::DrainMeter
//! [`FlushPolicy`]: crate::flush::FlushPolicy
//! [`PortBackend::set_rx_bound`]: crate::port::PortBackend::set_rx_bound
//! [`PortBackend::split_sender`]: crate::port::PortBackend::split_sender
//! [`QueueDelay::Bounded`]: crate::delay::QueueDelay::Bounded
//! [`QueueDelay::Deep`]: crate::delay::QueueDelay::Deep

mod control;
mod counters;
mod cycles;
mod mailbox;
mod registry;
mod rings;
mod rtc;
mod shutdown;
mod spawn;
mod split;
mod tx;
mod types;

pub use cycles::{tsc_hz, StageCycles};
pub use registry::Threads;
pub use tx::QueueStatsHandle;
pub use types::{
    BurstProcessor, BurstSizes, PortSpec, ThreadDrops, ThreadMode, ThreadRole, ThreadStats,
    ThreadsConfig,
};

#[cfg(test)]
mod tests;
