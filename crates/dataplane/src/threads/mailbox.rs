//! The mailbox protocol between the control side and a thread: the
//! changes, the mailbox, a thread's end of its control links and the
//! control side's end.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use crate::capture::Capture;
use crate::delay::DrainMeter;
use crate::port::PacketBuf;
use crate::spsc::RingStats;
use crate::wake::Doorbell;

use super::counters::{PortDropCells, Tally, ThreadCells};
use super::spawn::RxPort;
use super::tx::{QosPort, TxPort};
use super::types::{ThreadRole, ThreadStats};

/// A port change for one thread.
pub(super) enum Change {
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
pub(super) struct Mailbox {
    pub(super) pending: AtomicBool,
    pub(super) queue: Mutex<Vec<Change>>,
    pub(super) applied: AtomicU64,
}

impl Mailbox {
    /// Control side.
    pub(super) fn post(&self, c: Change) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push(c);
        self.pending.store(true, Ordering::Release);
    }

    /// Thread side: anything to take? One atomic load.
    pub(super) fn has_mail(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Thread side: swaps the waiting changes into `into` (empty; its
    /// storage becomes the queue's, so nothing is allocated). Never waits:
    /// a queue the control side holds is tried again next round.
    pub(super) fn take(&self, into: &mut Vec<Change>) -> bool {
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
    pub(super) fn ack(&self, n: usize) {
        self.applied.fetch_add(n as u64, Ordering::Release);
    }
}

/// How long [`Threads::add_port`](super::Threads::add_port) and
/// [`Threads::remove_port`](super::Threads::remove_port) wait for a thread
/// to apply a change.
pub(super) const ACK_WAIT: Duration = Duration::from_secs(5);

/// A thread's end of the control links: its doorbell, its mailbox (with a
/// spare vector to swap changes into) and its statistics cells.
pub(super) struct ThreadSide {
    pub(super) bell: Arc<Doorbell>,
    pub(super) mail: Arc<Mailbox>,
    pub(super) inbox: Vec<Change>,
    pub(super) cells: Arc<ThreadCells>,
    pub(super) tally: Tally,
    /// The thread's drain rate, and what of its tally it has seen.
    pub(super) meter: DrainMeter,
    pub(super) metered: (u64, u64),
}

impl ThreadSide {
    /// Hands each waiting change to `apply` (one atomic load when there is
    /// none) and returns how many there were, for the caller to ack once
    /// it is ready; `None` when there were none. The inbox's storage is
    /// kept for the next changes.
    pub(super) fn drain_mail(&mut self, mut apply: impl FnMut(Change)) -> Option<usize> {
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
    /// meter and returns the estimate (packets per second).
    pub(super) fn measure(&mut self) -> u64 {
        let (p, b) = (self.tally.packets, self.tally.busy_ns);
        self.meter.add(
            p.saturating_sub(self.metered.0),
            b.saturating_sub(self.metered.1),
        );
        self.metered = (p, b);
        self.meter.update()
    }
}

/// The input rings of a thread, for their fill.
pub(super) enum InRings {
    None,
    Packets(Vec<RingStats<PacketBuf>>),
    Outputs(Vec<RingStats<(u32, PacketBuf)>>),
}

impl InRings {
    pub(super) fn fill(&self) -> usize {
        match self {
            InRings::None => 0,
            InRings::Packets(r) => r.iter().map(|s| s.len()).sum(),
            InRings::Outputs(r) => r.iter().map(|s| s.len()).sum(),
        }
    }
}

/// The control side's end of one thread.
pub(super) struct ThreadCtl {
    pub(super) name: String,
    pub(super) role: ThreadRole,
    /// The CPU the thread is pinned to.
    pub(super) core: Option<usize>,
    pub(super) bell: Arc<Doorbell>,
    pub(super) mail: Arc<Mailbox>,
    pub(super) cells: Arc<ThreadCells>,
    pub(super) rings: InRings,
    pub(super) ring_capacity: usize,
    /// Changes posted so far (compared with `mail.applied`).
    pub(super) posted: u64,
}

impl ThreadCtl {
    pub(super) fn new(
        name: String,
        role: ThreadRole,
        core: Option<usize>,
    ) -> io::Result<ThreadCtl> {
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
        })
    }

    /// The thread's end.
    pub(super) fn side(&self) -> ThreadSide {
        ThreadSide {
            bell: self.bell.clone(),
            mail: self.mail.clone(),
            inbox: Vec::new(),
            cells: self.cells.clone(),
            tally: Tally::new(Instant::now()),
            meter: DrainMeter::default(),
            metered: (0, 0),
        }
    }

    /// Posts a change and wakes the thread.
    pub(super) fn post(&mut self, c: Change) {
        self.mail.post(c);
        self.posted += 1;
        self.bell.ring();
    }

    pub(super) fn answered(&self) -> bool {
        self.mail.applied.load(Ordering::Acquire) >= self.posted
    }

    pub(super) fn stats(&self) -> ThreadStats {
        let c = &self.cells;
        ThreadStats {
            name: self.name.clone(),
            role: self.role,
            packets: c.packets.load(Ordering::Relaxed),
            bursts: c.bursts.load(Ordering::Relaxed),
            busy_ns: c.busy_ns.load(Ordering::Relaxed),
            idle_ns: c.idle_ns.load(Ordering::Relaxed),
            cycles: c.cycles(),
            ring_fill: self.rings.fill(),
            ring_capacity: self.ring_capacity,
            core: self.core,
            yields: c.yields.load(Ordering::Relaxed),
            reads: Vec::new(),
        }
    }
}

/// Waits until every thread in `ctls` has applied what was posted to it,
/// [`ACK_WAIT`] at most.
pub(super) fn await_acks<'a>(ctls: impl Iterator<Item = &'a ThreadCtl> + Clone) -> io::Result<()> {
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
