//! Counters: the drop cells each port shares with its handles, the
//! drop map a ring producer counts by, and a thread's own tally of its work.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::port::PacketBuf;

use super::cycles::StageCycles;
use super::types::ThreadDrops;

/// One port's drop counters (the `ThreadDrops` fields that have a port),
/// shared by the port's handles and the control side's registry.
#[derive(Default)]
pub(super) struct PortDropCells {
    pub(super) rx_ring_full: AtomicU64,
    pub(super) tx_ring_full: AtomicU64,
    pub(super) tx_queue_full: AtomicU64,
    pub(super) port_error: AtomicU64,
    pub(super) rx_error: AtomicU64,
    pub(super) qos_queue_full: AtomicU64,
}

impl PortDropCells {
    pub(super) fn read(&self) -> ThreadDrops {
        ThreadDrops {
            rx_ring_full: self.rx_ring_full.load(Ordering::Relaxed),
            tx_ring_full: self.tx_ring_full.load(Ordering::Relaxed),
            tx_queue_full: self.tx_queue_full.load(Ordering::Relaxed),
            no_port: 0,
            port_error: self.port_error.load(Ordering::Relaxed),
            rx_error: self.rx_error.load(Ordering::Relaxed),
            qos_queue_full: self.qos_queue_full.load(Ordering::Relaxed),
        }
    }
}

/// A thread's own map from port number to drop cells, for drops of ring
/// items (which carry only a number); it changes with the port changes
/// the thread applies. A number without cells counts as `no_port`.
pub(super) struct DropMap {
    pub(super) ports: HashMap<u32, Arc<PortDropCells>>,
    pub(super) no_port: Arc<AtomicU64>,
}

impl DropMap {
    pub(super) fn new(no_port: Arc<AtomicU64>) -> DropMap {
        DropMap {
            ports: HashMap::new(),
            no_port,
        }
    }

    /// Counts `n` drops against `port` in the cell `which` picks.
    pub(super) fn count(
        &self,
        port: u32,
        n: u64,
        which: impl FnOnce(&PortDropCells) -> &AtomicU64,
    ) {
        match self.ports.get(&port) {
            Some(c) => bump(which(c), n),
            None => bump(&self.no_port, n),
        }
    }
}

pub(super) fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// A value on a ring between threads, and the port a drop of it counts
/// against.
pub(super) trait RingItem {
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

/// A thread's statistics as last published.
#[derive(Default)]
pub(super) struct ThreadCells {
    pub(super) packets: AtomicU64,
    pub(super) bursts: AtomicU64,
    pub(super) busy_ns: AtomicU64,
    pub(super) idle_ns: AtomicU64,
    /// [`StageCycles`], field by field.
    pub(super) cycles: [AtomicU64; 3],
    /// The thread yields its CPU after busy rounds (set once at start).
    pub(super) yields: AtomicBool,
}

impl ThreadCells {
    pub(super) fn cycles(&self) -> StageCycles {
        let [rx, pipeline, tx] = &self.cycles;
        StageCycles {
            rx: rx.load(Ordering::Relaxed),
            pipeline: pipeline.load(Ordering::Relaxed),
            tx: tx.load(Ordering::Relaxed),
        }
    }
}

/// A thread's statistics as it keeps them: plain integers, stored into
/// its [`ThreadCells`] when it publishes.
pub(super) struct Tally {
    pub(super) packets: u64,
    pub(super) bursts: u64,
    pub(super) busy_ns: u64,
    pub(super) idle_ns: u64,
    /// Cycles per stage ([`super::cycles`]).
    pub(super) cycles: StageCycles,
    /// End of the last round accounted for.
    pub(super) mark: Instant,
}

pub(super) fn nanos(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX)
}

impl Tally {
    pub(super) fn new(now: Instant) -> Tally {
        Tally {
            packets: 0,
            bursts: 0,
            busy_ns: 0,
            idle_ns: 0,
            cycles: StageCycles::default(),
            mark: now,
        }
    }

    /// A round that found `packets` in `bursts` reads ended at `now`.
    pub(super) fn busy(&mut self, now: Instant, packets: usize, bursts: u64) {
        self.packets += packets as u64;
        self.bursts += bursts;
        self.busy_ns += nanos(self.mark, now);
        self.mark = now;
    }

    /// A round that found nothing ended (after its sleep) at `now`.
    pub(super) fn idle(&mut self, now: Instant) {
        self.idle_ns += nanos(self.mark, now);
        self.mark = now;
    }

    /// Adds a round's cycles per stage: all of them if the round carried
    /// packets (`busy`), else only its port sends (`tx`; see
    /// [`super::cycles`]).
    pub(super) fn stages(&mut self, busy: bool, s: &StageCycles) {
        if busy {
            self.cycles.add(s);
        } else {
            self.cycles.tx += s.tx;
        }
    }

    pub(super) fn publish(&self, c: &ThreadCells) {
        c.packets.store(self.packets, Ordering::Relaxed);
        c.bursts.store(self.bursts, Ordering::Relaxed);
        c.busy_ns.store(self.busy_ns, Ordering::Relaxed);
        c.idle_ns.store(self.idle_ns, Ordering::Relaxed);
        let [rx, pipeline, tx] = &c.cycles;
        rx.store(self.cycles.rx, Ordering::Relaxed);
        pipeline.store(self.cycles.pipeline, Ordering::Relaxed);
        tx.store(self.cycles.tx, Ordering::Relaxed);
    }
}
