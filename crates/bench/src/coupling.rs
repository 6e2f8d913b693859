//! [`fn@coupling`]: the control/data coupling benchmark (after OPNFV
//! VSPERF's): the scenario's rules installed (1M for the figure),
//! workers forwarding its flows, while this thread acts as a controller
//! that adds and deletes flows at a paced rate, step by step (0, 1K, 10K,
//! 100K flow-mods a second by default). Each step reports the flow-mod
//! rate achieved, the forwarding rate, its ratio to the idle step's, and
//! the load average: the question is how much the control side's work
//! costs the data side.
//!
//! The flow-mods take the runtime's road from the point where the agent
//! hands them over: [`pipeline::SwitchState::flow_mod`] on the control
//! side's copy, then a snapshot of it published through the runtime's
//! `dataplane::snapshot::Publisher` once per agent batch (the channel
//! quiet for `flush_idle`, 1 ms, else every `flush_max_delay`, 1 s, of a
//! continuous stream; `runtime::openflow`'s `Switch::flush`); the workers
//! pick it up between bursts with a `Reader`, as the runtime's do. Not
//! timed here: the OpenFlow decoding and the TCP channel in front of it
//! (bench/flowmod-under-traffic.sh has those).
//!
//! The churn keeps the table's size constant: before the steps, `window`
//! more rules of the scenario's shape (indices after the installed ones,
//! so the flows never hit them) are added, untimed; a step then alternates
//! an ADD of the next churn rule with a DELETE_STRICT of the one added
//! `window` adds before it, cycling through `2 * window` rules, so the
//! rule added is never in the table.
//!
//! Steps run in the order given, one `--seconds` each, over the same
//! state and publisher; a step's ratio is to the idle steps (rate 0)
//! nearest before and after it, their mean when there are both (one idle
//! step is run first when none is given), so that on a machine whose load
//! drifts, rates between idle steps (`0,1000,0,100000,0`) compare with
//! their neighbours; an idle step's ratio is to the first idle step. The sampled check runs before the steps
//! and again on the last snapshot, so churn that changed what the flows
//! hit would show as mismatches.

use crate::options::Options;
use crate::pool::Pool;
use crate::progress::Progress;
use crate::switch::{add_ports, check, default_state, install, snapshot_of};
use crate::traffic::{totals, traffic, warm_up, worker_states, Control, WorkerOpts};
use crate::workload::Workload;
use anyhow::{ensure, Context};
use dataplane::snapshot::Publisher;
use ofp::{FlowMod, FlowModCommand};
use pipeline::{SwitchState, TablesConfig, Time};
use std::sync::Arc;
use std::time::Duration;

/// The coupling run's own settings (the rest come from [`Options`]).
#[derive(Clone, Debug)]
pub struct CouplingOptions {
    /// Target flow-mods a second, one step each, in order (0: idle).
    pub rates: Vec<u64>,
    /// Churn rules in the table beside the installed ones (see the
    /// module comment).
    pub window: usize,
    /// The agent's `flush_idle`: a quiet channel this long ends a batch.
    pub flush_idle: Duration,
    /// The agent's `flush_max_delay`: a continuous stream is published at
    /// least this often.
    pub flush_max_delay: Duration,
}

impl Default for CouplingOptions {
    /// The steps, a window of 1024, the agent's defaults.
    fn default() -> Self {
        CouplingOptions {
            rates: vec![0, 1_000, 10_000, 100_000],
            window: 1024,
            flush_idle: Duration::from_millis(1),
            flush_max_delay: Duration::from_secs(1),
        }
    }
}

/// The figures of a coupling run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CouplingReport {
    pub scenario: &'static str,
    pub rules: usize,
    pub window: usize,
    pub flows: usize,
    pub workers: usize,
    pub seconds_per_step: f64,
    pub packet_size: usize,
    pub burst: usize,
    /// Seconds spent in `flow_mod` installing the rules.
    pub install_seconds: f64,
    /// Forwarding of the first idle step, Mpps (pipeline time).
    pub idle_mpps: f64,
    pub steps: Vec<CouplingStep>,
    /// Sampled packets checked before the steps and on the last
    /// snapshot, and mismatches (both checks together).
    pub checked: usize,
    pub mismatches: usize,
    pub notes: Vec<String>,
    /// The first mismatches, described; not in the JSON form.
    #[serde(skip)]
    pub mismatch_lines: Vec<String>,
}

/// One step of a coupling run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CouplingStep {
    /// Flow-mods a second asked for.
    pub target_per_sec: u64,
    /// Flow-mods applied (adds and deletes), and of them adds.
    pub applied: usize,
    pub adds: usize,
    /// Flow-mods a second achieved (applied over the step's length).
    pub flow_mods_per_sec: f64,
    /// Snapshots published, and the mean time of one (snapshot, swap).
    pub publishes: u64,
    pub publish_ms_mean: f64,
    /// Forwarding, Mpps of pipeline time summed over workers.
    pub mpps: f64,
    pub ns_per_packet: f64,
    /// `mpps` over the nearest idle steps' (their mean when there is one
    /// before and one after; for an idle step, the first idle step's).
    pub ratio: f64,
    pub packets: u64,
    pub tx_packets: u64,
    pub dropped: u64,
    /// Fewest new snapshots a worker picked up during the step.
    pub versions_seen: u64,
    /// Length of the step, seconds.
    pub seconds: f64,
    /// Entries in table 0 after the step (the control side's copy).
    pub entries_after: usize,
    /// /proc/loadavg's three figures at the end of the step.
    pub load_average: Option<[f64; 3]>,
}

/// The three load averages of /proc/loadavg.
pub(crate) fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Fills in each step's ratio (see [`CouplingStep::ratio`]).
fn set_ratios(steps: &mut [CouplingStep]) {
    let idle: Vec<(usize, f64)> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.target_per_sec == 0)
        .map(|(i, s)| (i, s.mpps))
        .collect();
    let first = idle.first().map_or(0.0, |x| x.1);
    for (i, s) in steps.iter_mut().enumerate() {
        let reference = if s.target_per_sec == 0 {
            first
        } else {
            let before = idle.iter().rev().find(|x| x.0 < i).map(|x| x.1);
            let after = idle.iter().find(|x| x.0 > i).map(|x| x.1);
            match (before, after) {
                (Some(b), Some(a)) => (a + b) / 2.0,
                (Some(x), None) | (None, Some(x)) => x,
                (None, None) => 0.0,
            }
        };
        s.ratio = if reference > 0.0 {
            s.mpps / reference
        } else {
            0.0
        };
    }
}

/// The churn: alternately an ADD of the next churn rule and a
/// DELETE_STRICT of the rule added `window` adds before it.
struct Churn {
    adds: Vec<FlowMod>,
    deletes: Vec<FlowMod>,
    window: usize,
    /// Flow-mods issued so far (even: an add is next).
    issued: usize,
    /// Adds issued so far (the window's preload included).
    added: usize,
}

impl Churn {
    /// Adds the first `window` churn rules (before the steps).
    fn preload(&mut self, state: &mut SwitchState) -> anyhow::Result<()> {
        for fm in &self.adds[..self.window] {
            state
                .flow_mod(fm, Time::from_secs(1))
                .map_err(|e| anyhow::anyhow!("churn flow-mod refused: {e}"))?;
        }
        self.added = self.window;
        Ok(())
    }

    /// Applies the next flow-mod to `state`.
    fn next(&mut self, state: &mut SwitchState) -> anyhow::Result<()> {
        let pool = self.adds.len();
        let fm = if self.issued.is_multiple_of(2) {
            self.added += 1;
            &self.adds[(self.added - 1) % pool]
        } else {
            &self.deletes[(self.added - 1 - self.window) % pool]
        };
        self.issued += 1;
        state
            .flow_mod(fm, Time::from_secs(1))
            .map_err(|e| anyhow::anyhow!("churn flow-mod refused: {e}"))?;
        Ok(())
    }
}

/// Runs the coupling benchmark (see the module comment).
pub fn coupling(opts: &Options, c: &CouplingOptions) -> anyhow::Result<CouplingReport> {
    let rules = opts.rule_count();
    let flows = opts.flows.unwrap_or(rules);
    let seconds = opts.seconds.unwrap_or(if opts.smoke { 0.2 } else { 5.0 });
    ensure!(rules > 0, "--rules must be at least 1");
    opts.check_traffic(flows)?;
    ensure!(!c.rates.is_empty(), "--coupling needs at least one rate");
    ensure!(
        c.rates.iter().all(|&r| r <= 10_000_000),
        "--coupling rates must be at most 10,000,000 flow-mods a second"
    );
    ensure!(
        (1..=1 << 20).contains(&c.window),
        "--coupling-window must be 1..=1048576"
    );
    ensure!(
        !opts.reference && opts.flow_mods == 0,
        "--coupling runs on its own: not with --reference or --flow-mods"
    );
    ensure!(
        seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0,
        "--seconds must be more than 0 and at most a day"
    );
    ensure!(
        flows.saturating_mul(opts.packet_size) <= 4 << 30,
        "--flows times --packet-size is over the 4 GiB the template pool may use"
    );
    let pool_rules = 2 * c.window;
    let max_entries = TablesConfig::default().max_entries;
    ensure!(
        rules + c.window < max_entries,
        "--rules plus --coupling-window must be below {max_entries}, the size of a table"
    );
    let progress = Progress { on: opts.progress };
    let mut w = Workload::new(opts.scenario, rules + pool_rules, opts.seed)?;
    w.installed = rules;
    let mut state = default_state();
    add_ports(&mut state, w.n_ports);
    let install_seconds = install(&mut state, &w, 0..rules, true, &progress)?;
    let mut adds = Vec::with_capacity(pool_rules);
    let mut deletes = Vec::with_capacity(pool_rules);
    for i in rules..rules + pool_rules {
        let text = w.rule_text(i);
        let add =
            flowtext::parse_flow(&text).with_context(|| format!("generated rule {text:?}"))?;
        let head = text.split_once("actions=").map_or(&*text, |(h, _)| h);
        let mut del =
            flowtext::parse_flow_command(head.trim_end_matches(','), FlowModCommand::DeleteStrict)
                .with_context(|| format!("delete of generated rule {text:?}"))?;
        del.table_id = add.table_id;
        adds.push(add);
        deletes.push(del);
    }
    let mut churn = Churn {
        adds,
        deletes,
        window: c.window,
        issued: 0,
        added: 0,
    };
    // The window's preload: adds only, untimed.
    churn.preload(&mut state)?;
    let entries = |state: &SwitchState| state.tables.table(0).map_or(0, |t| t.len());
    let pool = Arc::new(Pool::for_options(&w, flows, rules, opts));
    let snap = snapshot_of(&state);
    let (mut checked, bad) = check(&w, &pool, &snap, 100, opts.seed);
    let mut mismatch_lines: Vec<String> = bad.iter().take(10).cloned().collect();
    let mut mismatches = bad.len();
    let publisher = Publisher::new(snap);
    let wopts = WorkerOpts::of(opts);
    let mut rates = c.rates.clone();
    if !rates.contains(&0) {
        rates.insert(0, 0);
    }
    let mut steps: Vec<CouplingStep> = Vec::with_capacity(rates.len());
    let mut notes = Vec::new();
    let mut idle_mpps = None;
    // The workers last from step to step, as the runtime's do.
    let mut states = worker_states(opts.workers, wopts);
    warm_up(&publisher, &pool, &mut states, wopts)?;
    for &rate in &rates {
        let (issued0, added0) = (churn.issued, churn.added);
        let mut apply = |s: &mut SwitchState| churn.next(s);
        let (res, wall, inst) = traffic(
            &publisher,
            &pool,
            &mut states,
            wopts,
            seconds,
            Control::Paced {
                state: &mut state,
                apply: &mut apply,
                rate: rate as f64,
                idle: c.flush_idle,
                max_delay: c.flush_max_delay,
            },
            &progress,
        )?;
        let t = totals(&res);
        if rate == 0 && idle_mpps.is_none() {
            idle_mpps = Some(t.mpps);
        }
        let applied = churn.issued - issued0;
        let achieved = applied as f64 / inst.seconds.max(1e-9);
        if rate > 0 && achieved < 0.9 * rate as f64 {
            notes.push(format!(
                "at {rate} flow-mods/s the control thread applied only {achieved:.0}/s: \
                 it could not keep to the schedule on this machine"
            ));
        }
        steps.push(CouplingStep {
            target_per_sec: rate,
            applied,
            adds: churn.added - added0,
            flow_mods_per_sec: achieved,
            publishes: inst.publishes,
            publish_ms_mean: inst.publish_seconds * 1e3 / inst.publishes.max(1) as f64,
            mpps: t.mpps,
            ns_per_packet: if t.packets == 0 {
                0.0
            } else {
                t.process_ns as f64 / t.packets as f64
            },
            ratio: 0.0,
            packets: t.packets,
            tx_packets: t.tx,
            dropped: t.drops,
            versions_seen: res.iter().map(|r| r.versions).min().unwrap_or(0),
            seconds: wall,
            entries_after: entries(&state),
            load_average: load_average(),
        });
    }
    set_ratios(&mut steps);
    // What the flows hit must not have changed under the churn.
    let (n, bad) = check(&w, &pool, &publisher.current().1, 100, opts.seed ^ 1);
    checked += n;
    mismatches += bad.len();
    mismatch_lines.extend(bad.into_iter().take(10));
    if load_average().is_some_and(|l| l[0] > 1.0) {
        notes.push(
            "the load average was above 1 (other work on the machine): figures are \
             this machine's at that load, compare ratios only"
                .to_string(),
        );
    }
    Ok(CouplingReport {
        scenario: opts.scenario.name(),
        rules,
        window: c.window,
        flows,
        workers: opts.workers,
        seconds_per_step: seconds,
        packet_size: opts.packet_size,
        burst: opts.burst,
        install_seconds,
        idle_mpps: idle_mpps.unwrap_or(0.0),
        steps,
        checked,
        mismatches,
        notes,
        mismatch_lines,
    })
}
