//! `fulmar bench SCENARIO`: the command line of the benchmark harness
//! (the `fulmar-bench` crate, which holds the scenarios, the run and the
//! figures, and says how a run goes) and the text or JSON it prints.
//!
//! ```text
//! fulmar bench gateway-vlan2mpls|gateway-mpls2vlan|l2|l3|acl|faucet
//!     [--rules N] [--flows N] [--workers N] [--seconds S]
//!     [--packet-size B] [--burst N] [--flow-mods N [--publish-every N]]
//!     [--seed N] [--json] [--smoke] [--reference [--rounds N]]
//!     [--write-flows FILE | --export DIR [--out-port P] | --loss-free ...
//!      | --coupling [RATE,...] [--coupling-window N]]
//! ```
//!
//! On a terminal, a progress line on stderr is updated every second.

use clap::Args;
use fulmar_bench::{CouplingOptions, CouplingReport, Options, Report, Scenario};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// Arguments of `fulmar bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The scenario.
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Number of rules (default 10000; 64 with --smoke).
    #[arg(long)]
    pub rules: Option<usize>,
    /// Distinct packet flows (default: the rule count).
    #[arg(long)]
    pub flows: Option<usize>,
    /// Worker threads, each with its own worker state over one snapshot.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Seconds of traffic (default 5; 0.2 with --smoke).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Frame size in bytes (64..=9000).
    #[arg(long, default_value_t = 64)]
    pub packet_size: usize,
    /// Packets per burst.
    #[arg(long, default_value_t = 32)]
    pub burst: usize,
    /// Entries of each worker's flow cache (0: none; default: the
    /// pipeline's, as `fulmar run` uses).
    #[arg(long)]
    pub flow_cache: Option<usize>,
    /// After the run, time this many more flow-mods alone, then again
    /// while the workers forward (reporting both rates).
    #[arg(long, default_value_t = 0)]
    pub flow_mods: usize,
    /// While installing with traffic, publish a snapshot after every N
    /// flow-mods (1: the worst case; the runtime publishes once per agent
    /// batch — 1 ms of quiet, a BARRIER, or a second of a continuous
    /// stream — so a bulk install there is closer to a large N).
    #[arg(long, default_value_t = 1)]
    pub publish_every: usize,
    /// Hand the counters over as the runtime's workers do
    /// (`runtime::worker::hand_over`), every this many milliseconds
    /// of the run, the slot taken every 50th time as the control side's
    /// once-a-second collection does; timed as pipeline time (0: never).
    #[arg(long, default_value_t = 20)]
    pub hand_over_ms: u64,
    /// Seed of the rule and traffic generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Small, quick run for tests: 64 rules, 0.2 s unless given.
    #[arg(long)]
    pub smoke: bool,
    /// Also run, in the same process, alternating with fulmar, the least
    /// any switch must do for the scenario on the same packets (a
    /// hand-written loop: parse the key, one hash or LPM probe with the
    /// burst's lookups prefetched, the scenario's rewrite, move the
    /// buffer; for acl the classifier's own lookups), and report
    /// fulmar's rate as a fraction of it.
    #[arg(long, conflicts_with_all = ["export", "write_flows", "loss_free"])]
    pub reference: bool,
    /// With --reference: rounds of each (fulmar, then the reference, in
    /// turn; --seconds is shared between all of them; medians reported).
    #[arg(long, default_value_t = 5, requires = "reference")]
    pub rounds: usize,
    /// With --reference, for the exact-match scenarios (gateway, l2): the
    /// reference looks its keys up in the in-place tables' 64-byte lines
    /// (versioned lookup, each worker a registered reader counting its
    /// hits in the line) instead of its own 16-byte slots: what one line
    /// per hit costs at this table size.
    #[arg(long, requires = "reference")]
    pub reference_lines: bool,
    /// Write the scenario's rules (flow text, one per line, as
    /// `fulmar run --flows` or a config's `flows_file` reads them) to
    /// this file and exit, without running: the same rules for a
    /// `fulmar run` beside `fulmar bench` (bench/million-flows.sh).
    #[arg(long, value_name = "FILE")]
    pub write_flows: Option<std::path::PathBuf>,
    /// Instead of running: write the scenario's rules (`rules.flows`,
    /// ovs-ofctl syntax) and one packet per flow (`traffic.pcap`, in
    /// seeded random order) into this directory, for a run through real
    /// ports (`bench/dpdk-vs-ovs.sh`). Every flow must enter on port 1.
    #[arg(long, value_name = "DIR")]
    pub export: Option<std::path::PathBuf>,
    /// With --export: every rule outputs to this port instead of its own.
    #[arg(long, value_name = "PORT", requires = "export")]
    pub out_port: Option<u32>,
    /// Instead of the in-memory run: the highest loss-free rate through
    /// DPDK ports (RFC 2544 style trials; a generator in the same process
    /// paces the packets over ring ports; needs the `dpdk` build and root).
    #[arg(long, conflicts_with = "export")]
    pub loss_free: bool,
    /// With --loss-free: seconds per trial.
    #[arg(long, default_value_t = 2.0, requires = "loss_free")]
    pub trial_seconds: f64,
    /// With --loss-free: stop when the interval is within this share of
    /// the rate found.
    #[arg(long, default_value_t = 0.02, requires = "loss_free")]
    pub resolution: f64,
    /// With --loss-free: the EAL's arguments, one string (default: no huge
    /// pages, 1 GiB, no PCI scan, no shared files).
    #[arg(
        long,
        value_name = "ARGS",
        default_value = "--no-huge -m 1024 --no-pci --no-shconf --no-telemetry",
        requires = "loss_free"
    )]
    pub eal: String,
    /// Instead of the plain run: the control/data coupling benchmark. One
    /// step of --seconds per rate (flow-mods a second; default
    /// 0,1000,10000,100000): the workers forward while a controller's
    /// flow-mods (adds and deletes, the table's size kept) are applied at
    /// that rate and published as the runtime publishes an agent batch;
    /// prints the flow-mod rate achieved, the forwarding rate, its ratio
    /// to the idle steps (rate 0) just before and after it, and the load
    /// average, per step.
    #[arg(
        long,
        value_name = "RATES",
        value_delimiter = ',',
        num_args = 0..=1,
        default_missing_value = "0,1000,10000,100000",
        conflicts_with_all = ["export", "write_flows", "loss_free", "reference"]
    )]
    pub coupling: Option<Vec<u64>>,
    /// With --coupling: churn rules kept in the table beside --rules (each
    /// step adds the next and deletes the one added this many adds before).
    #[arg(long, default_value_t = 1024, requires = "coupling")]
    pub coupling_window: usize,
}

impl BenchArgs {
    /// The options of the run itself.
    fn options(&self) -> Options {
        Options {
            scenario: self.scenario,
            rules: self.rules,
            flows: self.flows,
            workers: self.workers,
            seconds: self.seconds,
            packet_size: self.packet_size,
            burst: self.burst,
            flow_cache: self.flow_cache,
            flow_mods: self.flow_mods,
            publish_every: self.publish_every,
            hand_over_ms: self.hand_over_ms,
            seed: self.seed,
            smoke: self.smoke,
            reference: self.reference,
            rounds: self.rounds,
            reference_lines: self.reference_lines,
            progress: std::io::stderr().is_terminal(),
        }
    }
}

#[cfg(feature = "dpdk")]
fn loss_free_run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let eal: Vec<String> = args.eal.split_whitespace().map(str::to_string).collect();
    let r = fulmar_bench::loss_free(&args.options(), args.resolution, args.trial_seconds, &eal)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    } else {
        print_loss_free(&r, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "dpdk"))]
fn loss_free_run(_: &BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("--loss-free needs a fulmar built with `--features dpdk`")
}

/// Runs `fulmar bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let opts = args.options();
    if let Some(path) = &args.write_flows {
        fulmar_bench::write_flows(&opts, path)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = &args.export {
        let e = fulmar_bench::export(&opts, dir, args.out_port)?;
        eprintln!(
            "wrote {} rules to {} and {} packets of {} bytes to {}",
            e.rules,
            e.flows_path.display(),
            e.packets,
            e.packet_size,
            e.pcap_path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.loss_free {
        return loss_free_run(args);
    }
    if let Some(rates) = &args.coupling {
        let c = CouplingOptions {
            rates: rates.clone(),
            window: args.coupling_window,
            ..CouplingOptions::default()
        };
        let r = fulmar_bench::coupling(&opts, &c)?;
        emit(&r, &r.mismatch_lines, args.json, print_coupling)?;
        return Ok(if r.mismatches == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let report = fulmar_bench::bench(&opts)?;
    emit(&report, &report.mismatch_lines, args.json, print_report)?;
    let ref_bad = report
        .reference
        .as_ref()
        .is_some_and(|r| r.reference_mismatches > 0);
    Ok(if report.mismatches == 0 && !ref_bad {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes a run's mismatches to stderr and the run to stdout, as one JSON
/// object or as text.
fn emit<R: serde::Serialize>(
    r: &R,
    mismatch_lines: &[String],
    json: bool,
    print: fn(&R, &mut std::io::StdoutLock<'static>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    for m in mismatch_lines {
        eprintln!("mismatch: {m}");
    }
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(r)?)?;
    } else {
        print(r, &mut out)?;
    }
    Ok(())
}

fn print_report(r: &Report, w: &mut impl Write) -> anyhow::Result<()> {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    writeln!(
        w,
        "{}: {} rules, {} flows, {} worker{}, {}-byte packets, bursts of {}, {:.2} s",
        r.scenario,
        r.rules,
        r.flows,
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        r.packet_size,
        r.burst,
        r.seconds
    )?;
    writeln!(
        w,
        "  install     {} rules in {:.3} s ({:.0} flow-mods/s)",
        r.rules, r.install_seconds, r.install_rate
    )?;
    writeln!(
        w,
        "  check       {} of {} sampled packets forwarded as the rules say",
        r.checked - r.mismatches,
        r.checked
    )?;
    writeln!(
        w,
        "  forwarding  {:.3} Mpps, {:.1} ns/packet (pipeline only, generator subtracted)",
        r.mpps, r.ns_per_packet
    )?;
    writeln!(
        w,
        "  wall        {:.3} Mpps with the generator ({:.1} ns/packet refilling buffers, {} allocations)",
        r.mpps_wall, r.generator_ns_per_packet, r.generator_allocations
    )?;
    writeln!(
        w,
        "  packets     {} in, {} out, {} dropped",
        r.packets, r.tx_packets, r.dropped
    )?;
    match r.cache_hit_rate {
        Some(h) => writeln!(w, "  cache       {:.1}% hits", h * 100.0)?,
        None => writeln!(w, "  cache       n/a")?,
    }
    match r.rss_bytes {
        Some(b) => writeln!(
            w,
            "  memory      VmRSS {:.1} MiB (templates {:.1} MiB)",
            mib(b),
            mib(r.template_bytes as u64)
        )?,
        None => writeln!(w, "  memory      n/a")?,
    }
    let f = &r.flow_mods;
    if let Some(rate) = f.per_sec {
        writeln!(
            w,
            "  flow-mods   {} more: {rate:.0} flow-mods/s alone",
            f.count
        )?;
    }
    if let (Some(n), Some(rate), Some(p), Some(pm), Some(m), Some(ns)) = (
        f.applied_with_traffic,
        f.per_sec_with_traffic,
        f.publishes,
        f.publish_ms_mean,
        f.mpps_while_installing,
        f.ns_per_packet_while_installing,
    ) {
        writeln!(
            w,
            "  with traffic {n} applied at {rate:.0} flow-mods/s, {p} snapshots published (every {}, {pm:.3} ms each)",
            f.publish_every
        )?;
        writeln!(
            w,
            "  forwarding  {m:.3} Mpps, {ns:.1} ns/packet while installing (vs {:.3} Mpps undisturbed)",
            r.mpps
        )?;
    }
    if let Some(x) = &r.reference {
        writeln!(
            w,
            "  reference   {:.3} Mpps, {:.1} ns/packet: {}",
            x.reference_mpps, x.reference_ns_per_packet, x.what
        )?;
        writeln!(
            w,
            "  reference   check {} of {} sampled packets as the rules say; {} rounds of {:.2} s each, fulmar {:.3} Mpps",
            x.reference_checked - x.reference_mismatches,
            x.reference_checked,
            x.rounds,
            x.seconds_each,
            x.fulmar_mpps
        )?;
        writeln!(
            w,
            "  ratio       fulmar / reference = {:.3} ({:.1}%, median of {} rounds){}",
            x.ratio,
            x.ratio * 100.0,
            x.rounds,
            match (x.target, x.target_met) {
                (Some(t), Some(m)) => format!(
                    "; target >= {:.0}%: {}",
                    t * 100.0,
                    if m { "met" } else { "not met" }
                ),
                _ => String::new(),
            }
        )?;
    }
    for n in &r.notes {
        writeln!(w, "  note: {n}")?;
    }
    Ok(())
}

/// The text form of a coupling run: one line per step.
fn print_coupling(r: &CouplingReport, w: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        w,
        "coupling {}: {} rules (+{} churned), {} flows, {} worker{}, {}-byte packets, bursts of {}, {} s a step",
        r.scenario,
        r.rules,
        r.window,
        r.flows,
        r.workers,
        if r.workers == 1 { "" } else { "s" },
        r.packet_size,
        r.burst,
        r.seconds_per_step
    )?;
    writeln!(
        w,
        "  install {} rules in {:.3} s; check {} of {} sampled packets as the rules say (before and after)",
        r.rules,
        r.install_seconds,
        r.checked - r.mismatches,
        r.checked
    )?;
    writeln!(
        w,
        "  {:>10} {:>12} {:>9} {:>8} {:>9} {:>6} {:>17}",
        "target/s", "flow-mods/s", "publishes", "Mpps", "ns/pkt", "ratio", "load average"
    )?;
    for s in &r.steps {
        let load = s.load_average.map_or("n/a".to_string(), |l| {
            format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])
        });
        writeln!(
            w,
            "  {:>10} {:>12.0} {:>9} {:>8.3} {:>9.1} {:>6.3} {:>17}",
            s.target_per_sec,
            s.flow_mods_per_sec,
            s.publishes,
            s.mpps,
            s.ns_per_packet,
            s.ratio,
            load
        )?;
    }
    for n in &r.notes {
        writeln!(w, "  note: {n}")?;
    }
    Ok(())
}

/// The text form of a loss-free search.
#[cfg(feature = "dpdk")]
fn print_loss_free(
    r: &fulmar_bench::LossFree,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: {} rules, {} flows, {} worker(s), {} s trials, through DPDK ring ports",
        r.scenario, r.rules, r.flows, r.workers, r.trial_seconds
    )?;
    for t in &r.trials {
        let offered = match t.offered_pps {
            Some(p) => format!("{:>8.3} Mpps", p / 1e6),
            None => "  flat out   ".to_string(),
        };
        writeln!(
            out,
            "  offered {offered}: sent {} ({:.3} Mpps), taken {}, out {}, lost {}{}",
            t.sent,
            t.achieved_pps / 1e6,
            t.accepted,
            t.received,
            t.lost(),
            if t.generator_bound {
                " (generator behind schedule)"
            } else {
                ""
            }
        )?;
    }
    writeln!(
        out,
        "  loss-free rate {:.3} Mpps{}",
        r.loss_free_pps / 1e6,
        if r.generator_bound {
            " (bound by the generator, not the switch)"
        } else {
            ""
        }
    )
}
