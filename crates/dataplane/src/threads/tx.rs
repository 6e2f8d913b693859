//! TX staging: send handles, published port counters, the per-port TX
//! bursts a sender stages and flushes, and egress queues behind them.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::capture::{Capture, Tap};
use crate::flush::FlushPolicy;
use crate::port::{Burst, Outbox, PacketBuf, PortBackend, PortCounters};
use crate::qos::{QosError, QosSpec, QueueCounters, Scheduler};

use super::counters::{bump, PortDropCells};
use super::cycles;

/// A handle on a port: owned by this thread, or shared behind a mutex
/// with the port's other users (all dataplane threads).
pub(super) enum Handle {
    Own(Box<dyn PortBackend>),
    Shared(Arc<Mutex<Box<dyn PortBackend>>>),
}

impl Handle {
    pub(super) fn with<R>(&mut self, f: impl FnOnce(&mut dyn PortBackend) -> R) -> R {
        match self {
            Handle::Own(b) => f(b.as_mut()),
            Handle::Shared(m) => {
                let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
                f(g.as_mut())
            }
        }
    }

    pub(super) fn fd(&mut self) -> Option<RawFd> {
        self.with(|b| b.rx_fd())
    }
}

/// One handle's counters slot, summed per port by the control side.
pub(super) type Slot = Arc<Mutex<PortCounters>>;

/// A handle and the slot its thread copies its counters into (`None`:
/// a shared handle other than the reader's, whose counters the reader
/// publishes).
pub(super) struct Published {
    pub(super) slot: Option<Slot>,
    pub(super) handle: Handle,
}

impl Published {
    pub(super) fn publish(&mut self) {
        if let Some(slot) = &self.slot {
            let c = self.handle.with(|b| b.stats());
            if let Ok(mut g) = slot.try_lock() {
                *g = c;
            }
        }
    }
}

/// How often threads copy counters to their slots.
pub(super) const PUBLISH_EVERY: Duration = Duration::from_millis(5);

/// One output port's pending TX burst.
pub(super) struct TxPort {
    pub(super) number: u32,
    pub(super) out: Published,
    pub(super) pending: Burst,
    pub(super) first_at: Option<Instant>,
    pub(super) drops: Arc<PortDropCells>,
    /// A capture of what the port is handed, if one runs.
    pub(super) capture: Option<Tap>,
    /// The port's egress queues, if it has some.
    pub(super) qos: Option<Box<QosTx>>,
}

/// One queue's counters as the control side reads them.
pub(super) struct QueueCells {
    pub(super) id: u32,
    pub(super) tx_packets: AtomicU64,
    pub(super) tx_bytes: AtomicU64,
    pub(super) dropped: AtomicU64,
}

/// A port's egress queues, shared by the threads that send to it (one
/// TX thread, or every run-to-completion worker) and the control side's
/// record. Only dataplane threads take `sched`'s lock, once per burst;
/// the control side reads the cells.
pub(crate) struct QosPort {
    pub(super) sched: Mutex<Scheduler<PacketBuf>>,
    /// The scheduler's clock starts here.
    pub(super) epoch: Instant,
    /// Packets the scheduler holds (stored under the lock).
    pub(super) held: AtomicUsize,
    /// Nanoseconds after `epoch` when the rates let the next held packet
    /// leave (stored under the lock).
    pub(super) next_ns: AtomicU64,
    /// In the scheduler's queue order.
    pub(super) cells: Vec<QueueCells>,
}

impl QosPort {
    pub(super) fn new(spec: &QosSpec) -> Result<QosPort, QosError> {
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
    pub(super) fn service(
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
    pub(super) fn discard(&self) -> u64 {
        let mut s = self.sched.lock().unwrap_or_else(|e| e.into_inner());
        let n = s.drain().count() as u64;
        self.held.store(0, Ordering::Relaxed);
        n
    }

    pub(super) fn counters(&self) -> Vec<QueueCounters> {
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
pub struct QueueStatsHandle(pub(super) Arc<QosPort>);

impl QueueStatsHandle {
    /// Every queue's counters, the default queue included.
    pub fn counters(&self) -> Vec<QueueCounters> {
        self.0.counters()
    }
}

/// A sender's side of a port's egress queues: the shared scheduler and
/// the burst it let out that the port has not taken yet.
pub(super) struct QosTx {
    pub(super) port: Arc<QosPort>,
    pub(super) out: Burst,
}

impl QosTx {
    pub(super) fn backlog(&self) -> bool {
        !self.out.is_empty() || self.port.held.load(Ordering::Relaxed) > 0
    }

    /// How long until this port may send again (`None`: nothing held).
    /// A burst the port refused is tried again soon.
    pub(super) fn wait(&self) -> Option<Duration> {
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
pub(super) const QOS_SPIN: Duration = Duration::from_micros(20);

/// When a port refused a burst its egress queues let out, the next try.
pub(super) const QOS_RETRY: Duration = Duration::from_micros(50);

/// Port number → position in a list, looked up once per packet sent: a
/// table for the numbers below [`PortIndex::DIRECT`] (OpenFlow ports are
/// mostly small), a map for the rest.
pub(super) struct PortIndex {
    pub(super) direct: [u32; PortIndex::DIRECT],
    pub(super) other: HashMap<u32, usize>,
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
    pub(super) const DIRECT: usize = 256;

    #[inline]
    pub(super) fn get(&self, number: u32) -> Option<usize> {
        match self.direct.get(number as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => self.other.get(&number).copied(),
        }
    }

    pub(super) fn insert(&mut self, number: u32, i: usize) {
        match (self.direct.get_mut(number as usize), u32::try_from(i)) {
            (Some(slot), Ok(i)) if i != u32::MAX => *slot = i,
            _ => {
                self.other.insert(number, i);
            }
        }
    }

    pub(super) fn remove(&mut self, number: u32) -> Option<usize> {
        let found = self.get(number);
        if let Some(slot) = self.direct.get_mut(number as usize) {
            *slot = u32::MAX;
        }
        self.other.remove(&number);
        found
    }
}

/// The sending side of a thread: a pending burst per port.
pub(super) struct TxSide {
    pub(super) ports: Vec<TxPort>,
    pub(super) index: PortIndex,
    pub(super) no_port: Arc<AtomicU64>,
    /// Cycles spent in port sends so far ([`cycles`]: the `tx` stage).
    pub(super) sent_cycles: u64,
}

impl TxSide {
    pub(super) fn new(ports: Vec<TxPort>, no_port: Arc<AtomicU64>) -> TxSide {
        let mut side = TxSide {
            ports: Vec::with_capacity(ports.len()),
            index: PortIndex::default(),
            no_port,
            sent_cycles: 0,
        };
        for p in ports {
            side.add(p);
        }
        side
    }

    pub(super) fn add(&mut self, p: TxPort) {
        self.remove(p.number);
        self.index.insert(p.number, self.ports.len());
        self.ports.push(p);
    }

    /// Sends what is pending for port `number` (what the port refuses is
    /// dropped as `tx_queue_full`) and drops the handle.
    pub(super) fn remove(&mut self, number: u32) {
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

    pub(super) fn send(p: &mut TxPort) {
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
    pub(super) fn put(
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
    pub(super) fn qos_left(p: &mut TxPort) -> u64 {
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
    pub(super) fn set_qos(&mut self, number: u32, qos: Option<Arc<QosPort>>) {
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
    pub(super) fn set_capture(&mut self, number: u32, sink: Option<Arc<Capture>>) {
        if let Some(p) = self.index.get(number).and_then(|i| self.ports.get_mut(i)) {
            p.capture = sink.map(Tap::new);
        }
    }

    /// Stages everything `out` holds (leaving it empty), each packet
    /// behind what its port already holds. A burst that leaves by one
    /// port whose transmit burst is empty and has room for it becomes that
    /// transmit burst by exchanging vectors, no buffer moved (the common
    /// case: one input, one output); otherwise packet by packet.
    pub(super) fn enqueue_all(&mut self, out: &mut Outbox, now: Instant) {
        if let Some(port) = out.single_port() {
            if let Some(p) = self.index.get(port).and_then(|i| self.ports.get_mut(i)) {
                if p.pending.is_empty() && out.len() <= p.pending.limit() {
                    p.pending.take_outbox(out);
                    p.first_at = Some(now);
                    if p.pending.is_full() {
                        self.sent_cycles += cycles::timed(|| Self::send(p));
                    }
                    return;
                }
            }
        }
        // A drain can't be held across `enqueue`'s borrow of self.
        let mut staged = std::mem::take(out);
        for (port, pkt) in staged.drain() {
            self.enqueue(port, pkt, now);
        }
        *out = staged;
    }

    pub(super) fn enqueue(&mut self, port: u32, pkt: PacketBuf, now: Instant) {
        let Some(p) = self.index.get(port).and_then(|i| self.ports.get_mut(i)) else {
            bump(&self.no_port, 1);
            return;
        };
        if p.pending.is_full() {
            self.sent_cycles += cycles::timed(|| Self::send(p));
        }
        if p.pending.push(pkt).is_err() {
            bump(&p.drops.tx_queue_full, 1);
            return;
        }
        p.first_at.get_or_insert(now);
        if p.pending.is_full() {
            self.sent_cycles += cycles::timed(|| Self::send(p));
        }
    }

    pub(super) fn flush_due(
        &mut self,
        now: Instant,
        last_input: Instant,
        drained: bool,
        policy: &FlushPolicy,
    ) {
        for p in &mut self.ports {
            if let Some(first) = p.first_at {
                if policy.due(now, first, last_input, drained) {
                    self.sent_cycles += cycles::timed(|| Self::send(p));
                    continue;
                }
            }
            // Held by the egress queues: leaves as the rates allow.
            if p.qos.as_ref().is_some_and(|q| q.backlog()) {
                self.sent_cycles += cycles::timed(|| Self::send(p));
            }
        }
    }

    pub(super) fn flush_all(&mut self) {
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

    pub(super) fn holding(&self) -> bool {
        self.ports.iter().any(|p| p.first_at.is_some())
            || self.qos_wait().is_some_and(|w| w < QOS_SPIN)
    }

    /// The soonest any port's egress queues may send again (`None`:
    /// they hold nothing): an idle thread sleeps no longer.
    pub(super) fn qos_wait(&self) -> Option<Duration> {
        self.ports
            .iter()
            .filter_map(|p| p.qos.as_ref().and_then(|q| q.wait()))
            .min()
    }

    /// `timeout`, or less when egress queues release a packet sooner.
    pub(super) fn sleep_for(&self, timeout: Duration) -> Duration {
        self.qos_wait().map_or(timeout, |w| w.min(timeout))
    }

    pub(super) fn publish(&mut self) {
        for p in &mut self.ports {
            p.out.publish();
        }
    }
}
