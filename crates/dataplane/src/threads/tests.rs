//! Tests of the dataplane threads over patch and memory ports.

use super::*;
use crate::memory::{MemoryGenerator, MemorySink};
use crate::patch::{self, PatchPort};
use crate::port::{LinkState, RxBurst, TxBurst};
use crate::testnet::test_frame;

/// Forwards port 1 ↔ port 2.
fn cross() -> Box<dyn BurstProcessor> {
    Box::new(
        |in_port: u32, burst: &mut Burst, out: &mut dyn FnMut(u32, PacketBuf)| {
            let to = if in_port == 1 { 2 } else { 1 };
            for p in burst.drain() {
                out(to, p);
            }
        },
    )
}

fn cfg(mode: ThreadMode, workers: usize) -> ThreadsConfig {
    ThreadsConfig {
        name: "t".into(),
        mode,
        workers,
        rx_threads: 1,
        tx_threads: 1,
        dispatcher: Dispatcher::new(DispatchKey::L2, workers),
        ..ThreadsConfig::default()
    }
}

/// Two patch pairs: the switch gets ports 1 and 2, the test the far ends.
fn switch_ports() -> (Vec<PortSpec>, PatchPort, PatchPort) {
    let (a_sw, a_far) = patch::pair("sw1", "far1", 4096);
    let (b_sw, b_far) = patch::pair("sw2", "far2", 4096);
    (
        vec![
            PortSpec::new(1, Box::new(a_sw)),
            PortSpec::new(2, Box::new(b_sw)),
        ],
        a_far,
        b_far,
    )
}

fn send_all(port: &mut PatchPort, frames: Vec<Vec<u8>>) {
    let mut burst = Burst::with_limit(32);
    let mut it = frames.into_iter().peekable();
    while it.peek().is_some() || !burst.is_empty() {
        while !burst.is_full() {
            match it.next() {
                Some(f) => {
                    let _ = burst.push(PacketBuf::from_slice(&f));
                }
                None => break,
            }
        }
        port.tx_burst(&mut burst).unwrap();
        if !burst.is_empty() {
            std::thread::yield_now();
        }
    }
}

fn collect(port: &mut PatchPort, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut burst = Burst::with_limit(64);
    while got.len() < want && Instant::now() < deadline {
        burst.clear();
        if port.rx_burst(&mut burst).unwrap() == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
        got.extend(burst.drain().map(|p| p.data().to_vec()));
    }
    got
}

fn seq_of(f: &[u8]) -> (u8, u32) {
    (f[11], u32::from_be_bytes([f[14], f[15], f[16], f[17]]))
}

fn order_and_count(mode: ThreadMode, workers: usize) {
    let (ports, mut a, mut b) = switch_ports();
    // Below capacity: the rings can hold everything sent at once, so no
    // scheduling hiccup of this shared machine can overflow them.
    let mut c = cfg(mode, workers);
    c.rx_ring = 8192;
    c.tx_ring = 8192;
    let t = Threads::start(&c, ports, &mut |_| cross()).unwrap();
    let flows = 8u8;
    let per_flow = 500u32;
    let frames: Vec<Vec<u8>> = (0..per_flow)
        .flat_map(|s| (0..flows).map(move |f| test_frame(f, s, 64)))
        .collect();
    let n = frames.len();
    send_all(&mut a, frames);
    let got = collect(&mut b, n, Duration::from_secs(20));
    assert_eq!(
        got.len(),
        n,
        "no loss below capacity ({mode:?}) {:?} {:?}",
        t.drops(),
        t.port_counters()
    );
    let mut next = [0u32; 256];
    for f in &got {
        let (flow, seq) = seq_of(f);
        assert_eq!(seq, next[flow as usize], "flow {flow} out of order");
        next[flow as usize] += 1;
    }
    // And the way back.
    send_all(&mut b, vec![test_frame(1, 0, 60)]);
    assert_eq!(collect(&mut a, 1, Duration::from_secs(5)).len(), 1);
    std::thread::sleep(PUBLISH_EVERY * 3);
    let c = t.port_counters();
    assert_eq!(c[&1].rx_packets, n as u64);
    assert_eq!(c[&2].tx_packets, n as u64);
    assert_eq!(c[&1].tx_packets, 1);
    assert_eq!(t.drops(), ThreadDrops::default());
    t.stop();
}

#[test]
fn run_to_completion_keeps_flow_order_without_loss() {
    order_and_count(ThreadMode::RunToCompletion, 1);
    order_and_count(ThreadMode::RunToCompletion, 2);
}

#[test]
fn split_threads_keep_flow_order_without_loss() {
    order_and_count(ThreadMode::RxWorkerTx, 1);
    order_and_count(ThreadMode::RxWorkerTx, 3);
}

#[test]
fn overload_drops_are_counted_by_name() {
    // A slow worker behind a tiny ring: the RX thread must drop and count.
    let generated = 20_000u64;
    let gen = MemoryGenerator::new("gen", vec![test_frame(1, 0, 64)]).with_limit(generated);
    let sink = MemorySink::new("sink");
    let seen = sink.handle();
    let ports = vec![
        PortSpec::new(1, Box::new(gen)),
        PortSpec::new(2, Box::new(sink)),
    ];
    let mut c = cfg(ThreadMode::RxWorkerTx, 1);
    c.rx_ring = 64;
    let slow = || -> Box<dyn BurstProcessor> {
        Box::new(
            |_: u32, burst: &mut Burst, out: &mut dyn FnMut(u32, PacketBuf)| {
                std::thread::sleep(Duration::from_micros(200));
                for p in burst.drain() {
                    out(2, p);
                }
            },
        )
    };
    let t = Threads::start(&c, ports, &mut |_| slow()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let d = t.drops();
        if seen.packets() + d.rx_ring_full >= generated {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let d = t.drops();
    let per_port = t.port_drops();
    t.stop();
    // Counted against the port the packets came in on.
    assert_eq!(per_port[&1].rx_ring_full, d.rx_ring_full, "{per_port:?}");
    assert_eq!(per_port[&2], ThreadDrops::default());
    assert!(d.rx_ring_full > 0, "{d:?}");
    assert_eq!(seen.packets() + d.rx_ring_full, generated, "{d:?}");
    assert_eq!((d.tx_ring_full, d.no_port, d.port_error), (0, 0, 0));
}

/// A sink that takes its time over every burst.
struct SlowSink(MemorySink);

impl PortBackend for SlowSink {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn rx_burst(&mut self, out: &mut RxBurst) -> io::Result<usize> {
        self.0.rx_burst(out)
    }
    fn tx_burst(&mut self, pkts: &mut TxBurst) -> io::Result<usize> {
        std::thread::sleep(Duration::from_micros(300));
        self.0.tx_burst(pkts)
    }
    fn link_state(&self) -> LinkState {
        self.0.link_state()
    }
    fn stats(&self) -> PortCounters {
        self.0.stats()
    }
}

#[test]
fn tx_ring_drops_count_against_the_output_port_and_every_packet_is_accounted_for() {
    let generated = 20_000u64;
    let gen = MemoryGenerator::new("gen", vec![test_frame(1, 0, 64)]).with_limit(generated);
    let sink = MemorySink::new("sink");
    let seen = sink.handle();
    let ports = vec![
        PortSpec::new(1, Box::new(gen)),
        PortSpec::new(2, Box::new(SlowSink(sink))),
    ];
    let mut c = cfg(ThreadMode::RxWorkerTx, 1);
    c.tx_ring = 64;
    let t = Threads::start(&c, ports, &mut |_| cross()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let total = |d: &ThreadDrops| d.rx_total() + d.tx_total();
    while Instant::now() < deadline && seen.packets() + total(&t.drops()) < generated {
        std::thread::sleep(Duration::from_millis(5));
    }
    let d = t.drops();
    let per_port = t.port_drops();
    t.stop();
    assert!(d.tx_ring_full > 0, "{d:?}");
    assert_eq!(per_port[&2].tx_ring_full, d.tx_ring_full, "{per_port:?}");
    assert_eq!(per_port[&1].tx_ring_full, 0, "{per_port:?}");
    assert_eq!(per_port[&2].rx_ring_full, 0, "{per_port:?}");
    assert_eq!(seen.packets() + total(&d), generated, "{d:?}");
}

/// A port that accepts nothing.
struct Refuser;

impl PortBackend for Refuser {
    fn name(&self) -> &str {
        "refuser"
    }
    fn rx_burst(&mut self, _: &mut RxBurst) -> io::Result<usize> {
        Ok(0)
    }
    fn tx_burst(&mut self, _: &mut TxBurst) -> io::Result<usize> {
        Ok(0)
    }
    fn link_state(&self) -> LinkState {
        LinkState::Up
    }
    fn stats(&self) -> PortCounters {
        PortCounters::default()
    }
}

#[test]
fn refused_and_unroutable_packets_are_counted() {
    for mode in [ThreadMode::RunToCompletion, ThreadMode::RxWorkerTx] {
        let gen = MemoryGenerator::new("gen", vec![test_frame(1, 0, 64)]).with_limit(100);
        let ports = vec![
            PortSpec::new(1, Box::new(gen)),
            PortSpec::new(2, Box::new(Refuser)),
        ];
        let mut n = 0u32;
        let t = Threads::start(&cfg(mode, 1), ports, &mut |_| {
            Box::new(
                move |_: u32, burst: &mut Burst, out: &mut dyn FnMut(u32, PacketBuf)| {
                    for p in burst.drain() {
                        n += 1;
                        // Every other packet to a port that does not exist.
                        out(if n.is_multiple_of(2) { 2 } else { 99 }, p);
                    }
                },
            )
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        t.stop_and_check(|d| {
            assert_eq!(d.no_port, 50, "{mode:?} {d:?}");
            assert_eq!(d.tx_queue_full, 50, "{mode:?} {d:?}");
        });
    }
}

impl Threads {
    fn stop_and_check(mut self, check: impl FnOnce(ThreadDrops)) {
        self.shutdown();
        check(self.drops());
    }
}

/// Median and max one-way delay of single packets sent 2 ms apart.
fn trickle_delay(mode: ThreadMode, flush: FlushPolicy) -> (Duration, Duration) {
    let (ports, mut a, mut b) = switch_ports();
    let mut c = cfg(mode, 1);
    c.flush = flush;
    let t = Threads::start(&c, ports, &mut |_| cross()).unwrap();
    let mut delays = Vec::new();
    for i in 0..15 {
        std::thread::sleep(Duration::from_millis(2));
        let start = Instant::now();
        send_all(&mut a, vec![test_frame(1, i, 64)]);
        let got = collect(&mut b, 1, Duration::from_secs(5));
        assert_eq!(got.len(), 1);
        delays.push(start.elapsed());
    }
    t.stop();
    delays.sort();
    (delays[delays.len() / 2], *delays.last().unwrap())
}

#[test]
fn a_trickle_is_flushed_promptly() {
    for mode in [ThreadMode::RunToCompletion, ThreadMode::RxWorkerTx] {
        let (median, max) = trickle_delay(mode, FlushPolicy::default());
        // Bound generously: this machine is shared; the policy's bound is
        // 50 µs per stage, plus wake-ups.
        assert!(median < Duration::from_millis(3), "{mode:?}: {median:?}");
        assert!(max < Duration::from_millis(100), "{mode:?}: {max:?}");
        // The bound comes from the flush policy: with a 200 ms policy the
        // same trickle waits about that long.
        let slow = FlushPolicy {
            idle: Duration::from_millis(200),
            max_wait: Duration::from_millis(200),
        };
        if mode == ThreadMode::RunToCompletion {
            let (median, _) = trickle_delay(mode, slow);
            assert!(median >= Duration::from_millis(150), "{median:?}");
        }
    }
}

#[test]
fn pinned_threads_still_forward() {
    let (ports, mut a, mut b) = switch_ports();
    let mut c = cfg(ThreadMode::RxWorkerTx, 1);
    c.rx_cores = Some(vec![0]);
    c.worker_cores = Some(vec![0]);
    c.tx_cores = Some(vec![0]);
    let t = Threads::start(&c, ports, &mut |_| cross()).unwrap();
    assert_eq!(t.thread_count(), 3);
    send_all(&mut a, (0..10).map(|i| test_frame(3, i, 64)).collect());
    assert_eq!(collect(&mut b, 10, Duration::from_secs(5)).len(), 10);
    t.stop();
}

/// Ethernet + IPv4 + UDP with the given DSCP and source port.
fn ip_frame(dscp: u8, sport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, dscp << 2, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0x13, 0x8c, 0, 8, 0, 0]);
    f
}

#[test]
fn priority_class_gets_its_own_worker() {
    let (ports, mut a, mut b) = switch_ports();
    let mut c = cfg(ThreadMode::RxWorkerTx, 2);
    c.dispatcher = Dispatcher::with_classes(
        DispatchKey::FiveTuple,
        2,
        vec![crate::dispatch::ClassRule {
            ip_dscp: Some(46),
            worker: 0,
            ..Default::default()
        }],
    );
    // Each worker stamps its index into the last byte.
    let t = Threads::start(&c, ports, &mut |w| {
        Box::new(
            move |_: u32, burst: &mut Burst, out: &mut dyn FnMut(u32, PacketBuf)| {
                for mut p in burst.drain() {
                    if let Some(last) = p.data_mut().last_mut() {
                        *last = w as u8;
                    }
                    out(2, p);
                }
            },
        )
    })
    .unwrap();
    let frames: Vec<Vec<u8>> = (0..40u16)
        .map(|i| ip_frame(if i % 2 == 0 { 46 } else { 0 }, 1000 + i))
        .collect();
    send_all(&mut a, frames);
    let got = collect(&mut b, 40, Duration::from_secs(10));
    t.stop();
    assert_eq!(got.len(), 40);
    for f in &got {
        let dscp = f[15] >> 2;
        let worker = *f.last().unwrap();
        assert_eq!(worker == 0, dscp == 46, "DSCP {dscp} on worker {worker}");
    }
}
