//! The dataplane threads' own cost: a memory generator → a processor that
//! forwards every packet to a memory sink, through the real thread loops
//! (run-to-completion, and RX → worker → TX), busy polling, no system
//! calls. It prints packets per second per mode: a figure for comparing
//! two builds of the loops (for instance with and without a per-burst
//! counter), run in turn on the same machine; it asserts nothing.
//!
//! ```text
//! cargo run --release -p dataplane --example threads_rate -- [SECONDS] [rtc|split|both]
//! ```

use std::time::{Duration, Instant};

use dataplane::memory::{MemoryGenerator, MemorySink};
use dataplane::port::{Burst, Outbox};
use dataplane::threads::{BurstProcessor, PortSpec, ThreadMode, Threads, ThreadsConfig};

/// A 64-byte frame: broadcast, local experimental ethertype.
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].fill(0xff);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

fn to_sink() -> Box<dyn BurstProcessor> {
    Box::new(|_: u32, burst: &mut Burst, out: &mut Outbox| {
        for p in burst.drain() {
            out.push(2, p);
        }
    })
}

fn rate(mode: ThreadMode, seconds: f64) -> std::io::Result<f64> {
    let sink = MemorySink::new("sink");
    let seen = sink.handle();
    let ports = vec![
        PortSpec::new(1, Box::new(MemoryGenerator::new("gen", vec![frame()]))),
        PortSpec::new(2, Box::new(sink)),
    ];
    let cfg = ThreadsConfig {
        name: "rate".into(),
        mode,
        poll_window: Duration::MAX,
        ..ThreadsConfig::default()
    };
    let t = Threads::start(&cfg, ports, &mut |_| to_sink())?;
    // Warm up, then count what the sink saw over the window.
    std::thread::sleep(Duration::from_millis(300));
    let (p0, t0) = (seen.packets(), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (p1, t1) = (seen.packets(), Instant::now());
    t.stop();
    Ok((p1 - p0) as f64 / (t1 - t0).as_secs_f64())
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let which = args.next().unwrap_or_else(|| "both".into());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    for (name, mode) in [
        ("rtc", ThreadMode::RunToCompletion),
        ("split", ThreadMode::RxWorkerTx),
    ] {
        if which == name || which == "both" {
            println!("{name}: {:.3} Mpps", rate(mode, seconds)? / 1e6);
        }
    }
    Ok(())
}
