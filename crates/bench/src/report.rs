//! The figures of a run ([`Report`]), as `fulmar bench` prints them in
//! text or JSON, and the small statistics behind them.

use crate::workload::Scenario;

/// The figures of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub scenario: &'static str,
    pub rules: usize,
    pub flows: usize,
    pub workers: usize,
    pub seconds: f64,
    pub packet_size: usize,
    pub burst: usize,
    /// Million packets per second of pipeline time (generator subtracted),
    /// summed over workers.
    pub mpps: f64,
    /// Pipeline nanoseconds per packet (per worker core).
    pub ns_per_packet: f64,
    /// Million packets per second over the wall clock, generator included.
    pub mpps_wall: f64,
    /// Nanoseconds per packet spent refilling buffers from the templates.
    pub generator_ns_per_packet: f64,
    /// Buffers allocated during the run (the refill reuses buffers unless
    /// a packet was dropped or changed length).
    pub generator_allocations: u64,
    /// Share of table-0 lookups the workers' flow caches answered (hits /
    /// (hits + misses + bypassed)); null when no packet was looked up.
    pub cache_hit_rate: Option<f64>,
    /// VmRSS at the end of the run (with `--reference`: before the
    /// reference's own tables were built).
    pub rss_bytes: Option<u64>,
    /// Bytes of packet templates (part of rss_bytes).
    pub template_bytes: usize,
    pub packets: u64,
    pub tx_packets: u64,
    pub dropped: u64,
    /// Seconds spent in flow_mod installing the rules.
    pub install_seconds: f64,
    /// Rules installed per second.
    pub install_rate: f64,
    /// The flow-mod measurement (`--flow-mods`).
    pub flow_mods: FlowModFigures,
    /// Sampled packets checked against the generator, and mismatches.
    pub checked: usize,
    pub mismatches: usize,
    /// `--reference`: fulmar beside the hand-written minimum.
    pub reference: Option<ReferenceFigures>,
    pub notes: Vec<String>,
    /// The first mismatches of the check (fulmar's, then the
    /// reference's), described; not in the JSON form.
    #[serde(skip)]
    pub mismatch_lines: Vec<String>,
}

/// Figures of `--reference`: rounds of fulmar and of the reference loop
/// in turn over the same packets, each round `seconds_each` long.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReferenceFigures {
    /// What the reference does.
    pub what: &'static str,
    pub rounds: usize,
    pub seconds_each: f64,
    /// Median over rounds of fulmar's Mpps (pipeline time, summed over
    /// workers).
    pub fulmar_mpps: f64,
    /// Median over rounds of the reference's Mpps (its timed part only).
    pub reference_mpps: f64,
    /// Reference nanoseconds per packet (median round).
    pub reference_ns_per_packet: f64,
    /// Median of the per-round ratios fulmar / reference.
    pub ratio: f64,
    /// The target for this scenario (one worker), if it has one.
    pub target: Option<f64>,
    /// ratio >= target.
    pub target_met: Option<bool>,
    pub fulmar_mpps_rounds: Vec<f64>,
    pub reference_mpps_rounds: Vec<f64>,
    /// Packets the reference forwarded and dropped (all rounds).
    pub reference_packets: u64,
    pub reference_tx_packets: u64,
    pub reference_dropped: u64,
    /// Bytes of the reference's lookup structures.
    pub reference_table_bytes: usize,
    /// Sampled packets checked through the reference, and mismatches.
    pub reference_checked: usize,
    pub reference_mismatches: usize,
}

/// Figures of `--flow-mods N`: N more rules of the scenario's shape,
/// timed alone and then while the workers forward.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FlowModFigures {
    /// N.
    pub count: usize,
    /// Flow-mods per second in `flow_mod` alone (no traffic, no publish).
    pub per_sec: Option<f64>,
    /// With traffic: a snapshot is published after this many flow-mods.
    pub publish_every: usize,
    /// With traffic: flow-mods applied before `--seconds` ran out.
    pub applied_with_traffic: Option<usize>,
    /// With traffic: flow-mods per second, publishing included.
    pub per_sec_with_traffic: Option<f64>,
    /// Snapshots published.
    pub publishes: Option<u64>,
    /// Mean time of one publish (clone of the state, swap).
    pub publish_ms_mean: Option<f64>,
    /// Forwarding (pipeline time, summed over workers) while installing;
    /// compare with the report's `mpps` (undisturbed).
    pub mpps_while_installing: Option<f64>,
    /// Pipeline nanoseconds per packet while installing.
    pub ns_per_packet_while_installing: Option<f64>,
    /// Packets forwarded while installing.
    pub packets_while_installing: Option<u64>,
    /// Length of the install-with-traffic phase.
    pub seconds_while_installing: Option<f64>,
    /// Fewest new snapshots any worker picked up while installing.
    pub versions_seen: Option<u64>,
}

/// The median of `v` (mean of the middle two for an even count; 0 when
/// empty).
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The per-core target for a scenario's ratio to its reference: issue
/// #35's for the gateway (both directions) and l3, the earlier per-core
/// issue's for acl.
pub(crate) fn target_of(s: Scenario) -> Option<f64> {
    match s {
        Scenario::GatewayVlan2Mpls | Scenario::GatewayMpls2Vlan => Some(0.40),
        Scenario::L3 => Some(0.60),
        Scenario::Acl => Some(0.70),
        Scenario::L2 | Scenario::Faucet => None,
    }
}

/// VmRSS of this process in bytes.
pub(crate) fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
