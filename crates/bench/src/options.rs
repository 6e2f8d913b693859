//! [`Options`]: what shapes a run.

use crate::frame;
use crate::workload::Scenario;
use anyhow::ensure;

/// What to run: the options of `fulmar bench` that shape a run (the
/// command's modes and output format stay with the command).
#[derive(Clone, Debug)]
pub struct Options {
    /// The scenario.
    pub scenario: Scenario,
    /// Number of rules (default 10000; 64 with `smoke`).
    pub rules: Option<usize>,
    /// Distinct packet flows (default: the rule count).
    pub flows: Option<usize>,
    /// Worker threads, each with its own worker state over one snapshot.
    pub workers: usize,
    /// Seconds of traffic (default 5; 0.2 with `smoke`).
    pub seconds: Option<f64>,
    /// Frame size in bytes (64..=9000).
    pub packet_size: usize,
    /// Packets per burst.
    pub burst: usize,
    /// Entries of each worker's flow cache (0: none; `None`: the
    /// pipeline's default).
    pub flow_cache: Option<usize>,
    /// After the run, time this many more flow-mods alone, then again
    /// while the workers forward.
    pub flow_mods: usize,
    /// While installing with traffic, publish a snapshot after every N
    /// flow-mods.
    pub publish_every: usize,
    /// Hand the counters over as the runtime's workers do
    /// (`runtime::worker::hand_over`), every this many milliseconds of the
    /// run, the slot emptied every 50th time as the control side's
    /// once-a-second collection does; timed as pipeline time (0: never).
    pub hand_over_ms: u64,
    /// Seed of the rule and traffic generator.
    pub seed: u64,
    /// Small, quick run for tests: 64 rules, 0.2 s unless given.
    pub smoke: bool,
    /// Also run the scenario's reference loop, alternating with fulmar.
    pub reference: bool,
    /// With `reference`: rounds of each.
    pub rounds: usize,
    /// With `reference`: the exact scenarios' reference looks its keys
    /// up in the in-place table's lines (`classifier::versioned`) instead
    /// of its own 16-byte slots.
    pub reference_lines: bool,
    /// Show a progress line on stderr (every second) while traffic runs.
    pub progress: bool,
}

impl Options {
    /// Checks what every traffic run needs of the options: at least one
    /// flow (numbered in 32 bits), 1..=1024 workers, bursts of 1..=4096 and
    /// a packet size a frame can have.
    pub(crate) fn check_traffic(&self, flows: usize) -> anyhow::Result<()> {
        ensure!(flows > 0, "--flows must be at least 1");
        ensure!(u32::try_from(flows).is_ok(), "--flows must fit in 32 bits");
        ensure!(
            (1..=1024).contains(&self.workers),
            "--workers must be 1..=1024"
        );
        ensure!((1..=4096).contains(&self.burst), "--burst must be 1..=4096");
        ensure!(
            (frame::MIN_FRAME..=9000).contains(&self.packet_size),
            "--packet-size must be {}..=9000",
            frame::MIN_FRAME
        );
        Ok(())
    }

    /// The rule count asked for, or the default.
    pub(crate) fn rule_count(&self) -> usize {
        self.rules.unwrap_or(if self.smoke { 64 } else { 10_000 })
    }
}
