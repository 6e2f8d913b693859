//! In-memory ports for tests and benchmarks; no root, no sockets.
//!
//! - [`MemoryGenerator`] yields copies of template frames, round robin, as
//!   fast as asked or paced to a packet rate, optionally stopping after a
//!   count. What is sent to it is counted and discarded.
//! - [`MemorySink`] counts what is sent to it and optionally keeps the first
//!   N frames; a [`SinkHandle`] reads both from another thread. It never
//!   receives anything.
//!
//! The generator allocates one owned buffer per packet (a test and benchmark
//! tool; a buffer pool is future work).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::port::{
    LinkState, PacketBuf, PortBackend, PortCounters, RxBurst, TxBurst, DEFAULT_HEADROOM,
};

/// A port whose RX side produces template frames.
pub struct MemoryGenerator {
    name: String,
    templates: Vec<Vec<u8>>,
    next_template: usize,
    /// Packets per second, or `None` for as fast as polled.
    rate_pps: Option<f64>,
    /// Stop after this many packets, or `None` for never.
    limit: Option<u64>,
    started: Option<Instant>,
    headroom: usize,
    counters: PortCounters,
}

impl MemoryGenerator {
    /// A generator named `name` cycling through `templates` (no packets at all
    /// when `templates` is empty), unpaced and unlimited.
    pub fn new(name: impl Into<String>, templates: Vec<Vec<u8>>) -> Self {
        MemoryGenerator {
            name: name.into(),
            templates,
            next_template: 0,
            rate_pps: None,
            limit: None,
            started: None,
            headroom: DEFAULT_HEADROOM,
            counters: PortCounters::default(),
        }
    }

    /// Paces the generator to `pps` packets per second, measured from the
    /// first `rx_burst` call. A rate that is not a positive finite number
    /// means unpaced.
    pub fn with_rate(mut self, pps: f64) -> Self {
        self.rate_pps = (pps.is_finite() && pps > 0.0).then_some(pps);
        self
    }

    /// Stops after `count` packets in total.
    pub fn with_limit(mut self, count: u64) -> Self {
        self.limit = Some(count);
        self
    }

    /// Headroom for the generated buffers (default [`DEFAULT_HEADROOM`]).
    pub fn with_headroom(mut self, headroom: usize) -> Self {
        self.headroom = headroom;
        self
    }

    /// Packets generated so far.
    pub fn generated(&self) -> u64 {
        self.counters.rx_packets
    }

    /// True when a limit was set and has been reached (or there are no templates).
    pub fn is_exhausted(&self) -> bool {
        self.templates.is_empty() || self.limit.is_some_and(|l| self.counters.rx_packets >= l)
    }

    /// How many packets may be produced now.
    fn allowance(&mut self, room: usize) -> u64 {
        let mut n = room as u64;
        if let Some(limit) = self.limit {
            n = n.min(limit.saturating_sub(self.counters.rx_packets));
        }
        if let Some(pps) = self.rate_pps {
            let started = *self.started.get_or_insert_with(Instant::now);
            let due = (started.elapsed().as_secs_f64() * pps) as u64;
            n = n.min(due.saturating_sub(self.counters.rx_packets));
        }
        n
    }
}

impl PortBackend for MemoryGenerator {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        if self.templates.is_empty() {
            return Ok(0);
        }
        let n = self.allowance(out.room());
        let mut produced = 0;
        for _ in 0..n {
            let Some(t) = self.templates.get(self.next_template) else {
                break;
            };
            let pkt = PacketBuf::with_headroom(t, self.headroom);
            let len = pkt.len() as u64;
            if out.push(pkt).is_err() {
                break;
            }
            self.next_template = (self.next_template + 1) % self.templates.len();
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += len;
            produced += 1;
        }
        Ok(produced)
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        Ok(self.counters.discard_as_sent(pkts))
    }

    fn link_state(&self) -> LinkState {
        LinkState::Up
    }

    fn stats(&self) -> PortCounters {
        self.counters
    }
}

/// State shared by a [`MemorySink`] and its handles.
#[derive(Default)]
struct SinkShared {
    packets: AtomicU64,
    bytes: AtomicU64,
    kept: Mutex<Vec<Vec<u8>>>,
}

/// A port that counts (and optionally keeps) what is sent to it.
pub struct MemorySink {
    name: String,
    keep_limit: usize,
    shared: Arc<SinkShared>,
    counters: PortCounters,
}

/// A cheap, cloneable view of a sink's counts and kept frames, usable from
/// any thread while the sink itself is owned by a TX thread.
#[derive(Clone)]
pub struct SinkHandle {
    shared: Arc<SinkShared>,
}

impl MemorySink {
    /// A sink named `name` that keeps no frames.
    pub fn new(name: impl Into<String>) -> Self {
        MemorySink {
            name: name.into(),
            keep_limit: 0,
            shared: Arc::default(),
            counters: PortCounters::default(),
        }
    }

    /// Keeps copies of the first `limit` frames it is sent.
    pub fn keeping(mut self, limit: usize) -> Self {
        self.keep_limit = limit;
        self
    }

    /// A handle to read the counts and kept frames.
    pub fn handle(&self) -> SinkHandle {
        SinkHandle {
            shared: self.shared.clone(),
        }
    }
}

impl SinkHandle {
    /// Packets received so far.
    pub fn packets(&self) -> u64 {
        self.shared.packets.load(Ordering::Acquire)
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.shared.bytes.load(Ordering::Acquire)
    }

    /// Copies of the kept frames, in arrival order.
    pub fn kept(&self) -> Vec<Vec<u8>> {
        self.shared
            .kept
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }
}

impl PortBackend for MemorySink {
    fn name(&self) -> &str {
        &self.name
    }

    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        let n = pkts.len();
        let mut bytes = 0u64;
        if self.keep_limit > 0 {
            if let Ok(mut kept) = self.shared.kept.lock() {
                for p in pkts.iter() {
                    if kept.len() < self.keep_limit {
                        kept.push(p.data().to_vec());
                    }
                }
            }
        }
        for p in pkts.drain() {
            bytes += p.len() as u64;
        }
        self.counters.tx_packets += n as u64;
        self.counters.tx_bytes += bytes;
        self.shared.bytes.fetch_add(bytes, Ordering::Release);
        self.shared.packets.fetch_add(n as u64, Ordering::Release);
        Ok(n)
    }

    /// Another sink feeding the same handle (shared counts and kept frames).
    fn split_sender(&self) -> io::Result<Option<Box<dyn PortBackend>>> {
        Ok(Some(Box::new(MemorySink {
            name: self.name.clone(),
            keep_limit: self.keep_limit,
            shared: self.shared.clone(),
            counters: PortCounters::default(),
        })))
    }

    fn link_state(&self) -> LinkState {
        LinkState::Up
    }

    fn stats(&self) -> PortCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::Burst;
    use std::time::Duration;

    #[test]
    fn generator_cycles_templates_and_stops_at_limit() {
        let mut g = MemoryGenerator::new("gen", vec![vec![1, 2, 3], vec![4, 5]]).with_limit(5);
        let mut b = Burst::with_limit(4);
        assert_eq!(g.rx_burst(&mut b).unwrap(), 4);
        let got: Vec<Vec<u8>> = b.iter().map(|p| p.data().to_vec()).collect();
        assert_eq!(
            got,
            vec![vec![1, 2, 3], vec![4, 5], vec![1, 2, 3], vec![4, 5]]
        );
        assert_eq!(b.pkts()[0].headroom(), DEFAULT_HEADROOM);
        b.clear();
        assert_eq!(g.rx_burst(&mut b).unwrap(), 1);
        assert_eq!(b.pkts()[0].data(), &[1, 2, 3]);
        b.clear();
        assert_eq!(g.rx_burst(&mut b).unwrap(), 0);
        assert!(g.is_exhausted());
        let s = g.stats();
        assert_eq!((s.rx_packets, s.rx_bytes), (5, 3 + 2 + 3 + 2 + 3));
    }

    #[test]
    fn generator_respects_burst_room() {
        let mut g = MemoryGenerator::new("gen", vec![vec![0; 60]]);
        let mut b = Burst::with_limit(3);
        b.push(PacketBuf::from_slice(&[1])).unwrap();
        assert_eq!(g.rx_burst(&mut b).unwrap(), 2);
        assert_eq!(b.len(), 3);
        assert_eq!(g.rx_burst(&mut b).unwrap(), 0);
    }

    #[test]
    fn generator_with_no_templates_yields_nothing() {
        let mut g = MemoryGenerator::new("empty", vec![]);
        let mut b = Burst::new();
        assert_eq!(g.rx_burst(&mut b).unwrap(), 0);
        assert!(g.is_exhausted());
    }

    #[test]
    fn generator_paces_to_rate() {
        // 1000 pps: after ~50 ms about 50 packets are due, never 32 at once
        // right at the start.
        let mut g = MemoryGenerator::new("paced", vec![vec![0; 64]]).with_rate(1000.0);
        let mut b = Burst::with_limit(100_000);
        let t0 = Instant::now();
        let first = g.rx_burst(&mut b).unwrap();
        assert!(first <= 2, "at t=0 almost nothing is due, got {first}");
        std::thread::sleep(Duration::from_millis(50));
        g.rx_burst(&mut b).unwrap();
        let elapsed_ms = t0.elapsed().as_millis() as u64;
        let total = g.generated();
        assert!(
            total >= 45 && total <= elapsed_ms + 1,
            "{total} packets after {elapsed_ms} ms at 1000 pps"
        );
    }

    #[test]
    fn sink_counts_and_keeps_first_n() {
        let mut sink = MemorySink::new("sink").keeping(2);
        let h = sink.handle();
        let mut b = Burst::new();
        for i in 0..3u8 {
            b.push(PacketBuf::from_slice(&[i; 10])).unwrap();
        }
        assert_eq!(sink.tx_burst(&mut b).unwrap(), 3);
        assert!(b.is_empty());
        assert_eq!(h.packets(), 3);
        assert_eq!(h.bytes(), 30);
        assert_eq!(h.kept(), vec![vec![0; 10], vec![1; 10]]);
        assert_eq!(sink.stats().tx_packets, 3);
        assert_eq!(sink.rx_burst(&mut b).unwrap(), 0);
        let mut other = sink.split_sender().unwrap().unwrap();
        b.push(PacketBuf::from_slice(&[9; 5])).unwrap();
        other.tx_burst(&mut b).unwrap();
        assert_eq!((h.packets(), h.bytes()), (4, 35));
        assert_eq!(other.stats().tx_packets, 1);
        assert_eq!(sink.stats().tx_packets, 3);
    }

    #[test]
    fn generator_to_sink_through_trait_objects() {
        let mut ports: Vec<Box<dyn PortBackend>> = vec![
            Box::new(MemoryGenerator::new("g", vec![vec![7; 64]]).with_limit(100)),
            Box::new(MemorySink::new("s")),
        ];
        let mut b = Burst::new();
        loop {
            let n = ports[0].rx_burst(&mut b).unwrap();
            if n == 0 {
                break;
            }
            ports[1].tx_burst(&mut b).unwrap();
        }
        assert_eq!(ports[0].stats().rx_packets, 100);
        assert_eq!(ports[1].stats().tx_packets, 100);
        assert_eq!(ports[1].stats().tx_bytes, 6400);
    }
}
