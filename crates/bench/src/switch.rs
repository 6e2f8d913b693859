//! The switch under test: its ports, the scenario's rules installed (the
//! `flow_mod` calls timed), the snapshot the workers read, and the check
//! of sampled packets against the generator's own record of its rules.

use crate::frame::{hex, Rng};
use crate::pool::{sample_flow, Pool};
use crate::progress::Progress;
use crate::workload::Workload;
use anyhow::Context;
use packet::buffer::PacketBuf;
use pipeline::datapath::{BurstOutput, DatapathConfig, Snapshot, WorkerState};
use pipeline::{GroupsConfig, MetersConfig, SwitchState, TablesConfig, Time};
use std::time::{Duration, Instant};

/// A switch state with the default table, group and meter configurations.
pub(crate) fn default_state() -> SwitchState {
    SwitchState::new(
        TablesConfig::default(),
        GroupsConfig::default(),
        MetersConfig::default(),
    )
}

/// Adds ports `1..=n` (up, no features) to the state's port table.
pub(crate) fn add_ports(state: &mut SwitchState, n: u32) {
    for port_no in 1..=n {
        state.port_table.add_port(
            ofp::Port {
                port_no,
                name: format!("p{port_no}"),
                ..ofp::Port::default()
            },
            Time::from_secs(1),
        );
    }
}

/// What the workers read: the state with the packet side's copy of its
/// ports, as the pipeline builds it.
pub(crate) fn snapshot_of(state: &SwitchState) -> Snapshot {
    Snapshot::of(state, DatapathConfig::default())
}

/// Installs rules `range` of `w` (and, when `extra`, the scenario's extra
/// rules) into `state`; returns the seconds spent in `flow_mod`.
pub(crate) fn install(
    state: &mut SwitchState,
    w: &Workload,
    range: std::ops::Range<usize>,
    extra: bool,
    progress: &Progress,
) -> anyhow::Result<f64> {
    const BATCH: usize = 4096;
    let now = Time::from_secs(1);
    let total = range.len();
    let mut spent = Duration::ZERO;
    let mut last = Instant::now();
    let mut texts: Vec<String> = if extra { w.extra_rules() } else { Vec::new() };
    let mut next = range.start;
    loop {
        while texts.len() < BATCH && next < range.end {
            texts.push(w.rule_text(next));
            next += 1;
        }
        if texts.is_empty() {
            break;
        }
        let mods = texts
            .iter()
            .map(|t| flowtext::parse_flow(t).with_context(|| format!("generated rule {t:?}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let t0 = Instant::now();
        for (fm, t) in mods.iter().zip(&texts) {
            state
                .flow_mod(fm, now)
                .map_err(|e| anyhow::anyhow!("rule {t:?} refused: {e}"))?;
        }
        spent += t0.elapsed();
        texts.clear();
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            progress.show(&format!(
                "installing: {} of {total} rules, {:.1} s in flow_mod",
                next - range.start,
                spent.as_secs_f64()
            ));
        }
    }
    progress.done();
    Ok(spent.as_secs_f64())
}

/// Sends `samples` random templates through the pipeline one by one and
/// compares output port and bytes with the generator's expectation;
/// returns the number checked and a description of each mismatch.
pub(crate) fn check(
    w: &Workload,
    pool: &Pool,
    snap: &Snapshot,
    samples: usize,
    seed: u64,
) -> (usize, Vec<String>) {
    let mut rng = Rng::new(seed ^ 0xc4ec);
    let view = snap.view();
    let mut ws = WorkerState::new(0, 1, 0);
    let mut out = BurstOutput::default();
    let mut burst = Vec::with_capacity(1);
    let n = pool.flow_of.len();
    let samples = samples.min(n);
    let mut bad = Vec::new();
    for s in 0..samples {
        // Every template when there are few, else a random sample.
        let k = if n <= samples {
            s
        } else {
            rng.below(n as u64) as usize
        };
        let j = pool.flow_of[k] as usize;
        let (port, frame) = sample_flow(w, pool, k);
        let expected = w.expected(port, &frame);
        out.clear();
        burst.push(PacketBuf::from_slice(pool.template(k)));
        ws.process_burst_into(&view, port, &mut burst, Time::from_secs(2), &mut out);
        let got: Vec<(u32, &[u8])> = out
            .tx
            .iter()
            .map(|(port, packet)| (port, packet.as_slice()))
            .collect();
        let want = expected.map(|e| (e.port, e.frame.build(pool.size)));
        let ok = match (&want, got.as_slice()) {
            (None, []) => out.packet_ins.is_empty(),
            (Some((p, b)), [(gp, gb)]) => {
                p == gp && b.as_slice() == *gb && out.packet_ins.is_empty()
            }
            _ => false,
        };
        if !ok {
            bad.push(format!(
                "flow {j} (in_port {port}, {frame:?}): expected {}, got {}",
                match &want {
                    Some((p, b)) => format!("port {p} {}", hex(b)),
                    None => "a drop".into(),
                },
                if got.is_empty() {
                    format!("no output ({} packet-ins)", out.packet_ins.len())
                } else {
                    got.iter()
                        .map(|(p, b)| format!("port {p} {}", hex(b)))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
    }
    (samples, bad)
}
