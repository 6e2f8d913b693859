//! Heap allocations per forwarded packet on the runtime path, counted by a
//! `#[global_allocator]` wrapper (this example only).
//!
//! Starts a bridge over two memory ports with one flow (`in_port=1,
//! actions=output:2`), sends warm-up packets, then counts the allocations
//! the switch's threads make while forwarding `N` more. The thread that
//! injects and collects frames is not counted (its buffers are the test's).
//!
//! `cargo run --release -p runtime --example allocs_per_packet [N]`
//! (both thread modes are measured).
//!
//! `allocs_per_packet N veth socket|ring` puts the bridge's ports on
//! AF_PACKET (`fse1`, `fse2`) instead and injects through the veth peers
//! (`fse1p`, `fse2p`), as root, e.g. in a namespace:
//!
//! ```text
//! ip netns add fse-alloc
//! ip netns exec fse-alloc sh -c 'sysctl -qw net.ipv6.conf.all.disable_ipv6=1;
//!   for i in 1 2; do ip link add fse$i type veth peer name fse${i}p;
//!   ip link set fse$i up; ip link set fse${i}p up; done'
//! ip netns exec fse-alloc target/release/examples/allocs_per_packet 200000 veth socket
//! ip netns del fse-alloc
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dataplane::rawsock::RawSocketPort;
use dataplane::{Burst, PacketBuf, PortBackend};
use datastore::Config;
use runtime::{AfPacketMode, Runtime, RuntimeOptions};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if !UNCOUNTED.try_with(Cell::get).unwrap_or(true) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A 64-byte UDP frame from port 1's MAC/IP to port 2's, whose payload
/// opens with a sequence number.
const HEADERS: [u8; 42] = [
    0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00, // eth
    0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 10, 1, 10, 0, 10, 2, // ip
    0x04, 0xd2, 0x16, 0x2e, 0, 26, 0, 0, // udp
];

fn frame(seq: u16) -> Vec<u8> {
    let mut f = HEADERS.to_vec();
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(64, 0xaa);
    f
}

/// Sends `n` frames into `from` and waits for them at `to`, at most
/// `burst` in flight.
fn forward(from: &mut dyn PortBackend, to: &mut dyn PortBackend, n: usize, burst: usize) -> usize {
    let frames: Vec<Vec<u8>> = (0..burst).map(|i| frame(i as u16)).collect();
    // `done`: frames received or given up for lost.
    let (mut sent, mut done, mut got) = (0, 0, 0);
    let mut b = Burst::with_limit(burst);
    let mut r = Burst::with_limit(burst);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stalled = Instant::now();
    while done < n && Instant::now() < deadline {
        // Frames lost on the way (a full socket queue) are given up.
        if stalled.elapsed() > Duration::from_millis(50) {
            done = sent;
            stalled = Instant::now();
        }
        while sent < n && sent - done < burst && !b.is_full() {
            let _ = b.push(PacketBuf::from_slice(&frames[sent % burst]));
            sent += 1;
        }
        while !b.is_empty() {
            if from.tx_burst(&mut b).unwrap_or(0) == 0 {
                std::thread::yield_now();
            }
        }
        r.clear();
        if to.rx_burst(&mut r).unwrap_or(0) == 0 {
            std::thread::yield_now();
        }
        let k = r.drain().count();
        if k > 0 {
            stalled = Instant::now();
        }
        got += k;
        done = (done + k).min(sent);
    }
    got
}

fn measure(mode: &str, n: usize, veth: Option<AfPacketMode>) {
    let mode_lines = if mode == "rx-worker-tx" {
        "mode = \"rx-worker-tx\"\nrx_threads = 1\nworker_threads = 1\ntx_threads = 1\n"
    } else {
        "mode = \"run-to-completion\"\nworker_threads = 1\n"
    };
    let text = format!(
        "[dataplane]\n{mode_lines}\n[[bridges]]\nname = \"br0\"\n\
         flows = [\"table=0,priority=1,in_port=1,actions=output:2\"]\n\
         [[bridges.ports]]\nport = 1\ninterface = \"{p1}\"\nbackend = \"{b}\"\n\
         [[bridges.ports]]\nport = 2\ninterface = \"{p2}\"\nbackend = \"{b}\"\n",
        p1 = if veth.is_some() { "fse1" } else { "m1" },
        p2 = if veth.is_some() { "fse2" } else { "m2" },
        b = if veth.is_some() { "afpacket" } else { "memory" },
    );
    let mut opts = RuntimeOptions {
        watch_links: false,
        ..RuntimeOptions::default()
    };
    if let Some(m) = veth {
        opts.backends.afpacket_mode = m;
    }
    let config = Config::from_str(&text, "allocs.toml").unwrap_or_else(|e| panic!("{e}"));
    let rt = Runtime::start(&config, &opts).unwrap_or_else(|e| panic!("{e}"));
    let (mut m1, mut m2): (Box<dyn PortBackend>, Box<dyn PortBackend>) = if veth.is_some() {
        let open = |n| RawSocketPort::open(n).unwrap_or_else(|e| panic!("{n}: {e}"));
        (Box::new(open("fse1p")), Box::new(open("fse2p")))
    } else {
        (
            Box::new(rt.take_memory_port("m1").expect("m1")),
            Box::new(rt.take_memory_port("m2").expect("m2")),
        )
    };
    let warm = forward(&mut *m1, &mut *m2, n / 4 + 1000, 32);
    // Let the first counter hand-overs and any lazy set-up finish.
    std::thread::sleep(Duration::from_millis(100));
    let before = ALLOCS.load(Ordering::Relaxed);
    let t = Instant::now();
    let got = forward(&mut *m1, &mut *m2, n, 32);
    let elapsed = t.elapsed();
    let ports = match veth {
        None => "memory ports",
        Some(AfPacketMode::Socket) => "AF_PACKET socket",
        Some(AfPacketMode::Ring) => "AF_PACKET ring",
    };
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    println!(
        "{mode:18} {ports}: warm-up {warm}, forwarded {got}/{n}: {allocs} allocations by \
         the switch, {:.3} per packet ({:.2} Mpps, all threads on this machine)",
        allocs as f64 / got.max(1) as f64,
        got as f64 / elapsed.as_secs_f64() / 1e6
    );
    drop((m1, m2));
    rt.stop();
}

fn main() {
    UNCOUNTED.with(|u| u.set(true));
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let veth = match (
        std::env::args().nth(2).as_deref(),
        std::env::args().nth(3).as_deref(),
    ) {
        (Some("veth"), Some("ring")) => Some(AfPacketMode::Ring),
        (Some("veth"), _) => Some(AfPacketMode::Socket),
        _ => None,
    };
    for mode in ["run-to-completion", "rx-worker-tx"] {
        measure(mode, n, veth);
    }
}
