//! The scenario's rules and packets written to files, for runs outside
//! this process (`--export`, `--write-flows`).

use crate::frame::{self, Rng};
use crate::options::Options;
use crate::workload::Workload;
use anyhow::{ensure, Context};
use std::io::Write;

/// What [`export`] wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// Rules written (the scenario's extra rules included).
    pub rules: usize,
    /// The rules' file (`rules.flows`).
    pub flows_path: std::path::PathBuf,
    /// Packets written, one per flow.
    pub packets: usize,
    /// Their size in bytes.
    pub packet_size: usize,
    /// The packets' file (`traffic.pcap`).
    pub pcap_path: std::path::PathBuf,
}

/// Writes the scenario's rules (`rules.flows`, ovs-ofctl syntax) and one
/// packet per flow (`traffic.pcap`, in seeded random order) into `dir`,
/// for a run through real ports; every flow must enter on port 1. With
/// `out_port`, every rule outputs to that port instead of its own.
pub fn export(
    opts: &Options,
    dir: &std::path::Path,
    out_port: Option<u32>,
) -> anyhow::Result<Exported> {
    use dataplane::pcap::PcapCapture;
    use dataplane::{Burst, PacketBuf, PortBackend};
    let rules = opts.rule_count();
    let flows = opts.flows.unwrap_or(rules);
    ensure!(flows > 0, "--flows must be at least 1");
    ensure!(
        (frame::MIN_FRAME..=9000).contains(&opts.packet_size),
        "--packet-size must be {}..=9000",
        frame::MIN_FRAME
    );
    let w = Workload::new(opts.scenario, rules, opts.seed)?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let mut text = String::new();
    for line in (0..rules).map(|i| w.rule_text(i)).chain(w.extra_rules()) {
        match (out_port, line.rfind("output:")) {
            (Some(p), Some(at)) => {
                text.push_str(&line[..at]);
                text.push_str(&format!("output:{p}"));
            }
            _ => text.push_str(&line),
        }
        text.push('\n');
    }
    let flows_path = dir.join("rules.flows");
    std::fs::write(&flows_path, text).with_context(|| format!("{}", flows_path.display()))?;
    let mut order: Vec<usize> = (0..flows).collect();
    Rng::new(opts.seed ^ 0xe4).shuffle(&mut order);
    let pcap_path = dir.join("traffic.pcap");
    let mut out =
        PcapCapture::create(&pcap_path).with_context(|| format!("{}", pcap_path.display()))?;
    let mut burst = Burst::with_limit(1024);
    for j in order {
        let (i, v) = Workload::flow_rule(j, flows, rules);
        let (port, frame) = w.flow(i, v);
        ensure!(
            port == 1,
            "{} with {rules} rules sends flows into port {port}; --export needs every flow on port 1",
            opts.scenario.name()
        );
        if burst
            .push(PacketBuf::from_slice(&frame.build(opts.packet_size)))
            .is_err()
        {
            unreachable!("the burst is sent when full");
        }
        if burst.is_full() {
            out.tx_burst(&mut burst)?;
        }
    }
    out.tx_burst(&mut burst)?;
    out.flush()?;
    Ok(Exported {
        rules: rules + w.extra_rules().len(),
        flows_path,
        packets: flows,
        packet_size: opts.packet_size,
        pcap_path,
    })
}

/// Writes the scenario's rules as flow text, one per line, as
/// `fulmar run --flows` or a config's `flows_file` reads them (the same
/// rules for a `fulmar run` beside `fulmar bench`).
pub fn write_flows(opts: &Options, path: &std::path::Path) -> anyhow::Result<()> {
    let rules = opts.rule_count();
    let w = Workload::new(opts.scenario, rules, opts.seed)?;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("{}", path.display()))?,
    );
    for t in w.extra_rules() {
        writeln!(f, "{t}")?;
    }
    for i in 0..rules {
        writeln!(f, "{}", w.rule_text(i))?;
    }
    f.flush()?;
    Ok(())
}
