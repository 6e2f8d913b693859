//! fulmar's management modules: each turns its protocol into reads of the
//! running switch ([`runtime::daemon::Daemon`]) and transactions on its
//! datastore. They reach the switch only through the daemon: no crate
//! below `runtime` but the datastore and the OpenFlow text crates.
//!
//! - [`registry`]: the one table of the control socket's commands (what
//!   `fulmar ctl`, `list-commands`, `--help`, completions and man pages
//!   all read).
//! - [`ctl`]: the control socket (JSON-RPC 1.0 as `ovs-appctl` speaks it)
//!   and its blocking client (`fulmar ctl`); [`commands`]: what it
//!   answers.
//! - [`metrics`]: Prometheus / OpenMetrics exposition; [`scrape`] reads
//!   the switch for it.
//! - [`trace`]: packet traces through a pipeline instance (`fulmar trace`
//!   and `fulmar ctl trace` print through it); it lives in the runtime
//!   ([`runtime::daemon::trace`]), re-exported here.

pub mod commands;
pub mod ctl;
pub mod metrics;
pub mod registry;
pub mod scrape;
pub use runtime::daemon::trace;

#[cfg(test)]
mod tests {
    /// mgmt reaches the switch through the daemon only: its manifest
    /// names no crate below `runtime` but `datastore`, and `ofp` and
    /// `flowtext` for the text the commands speak.
    #[test]
    fn no_crate_below_the_runtime_but_the_allowed_ones() {
        let below = [
            "agent",
            "pipeline",
            "packet",
            "dataplane",
            "classifier",
            "dpdk-sys",
        ];
        let mut section = "";
        let mut names = Vec::new();
        for line in include_str!("../Cargo.toml").lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
            } else if section.ends_with("dependencies]") && !line.starts_with('#') {
                if let Some((name, _)) = line.split_once('=') {
                    names.push(name.trim());
                }
            }
        }
        for n in ["runtime", "datastore", "ofp", "flowtext"] {
            assert!(names.contains(&n), "{n} not found in {names:?}");
        }
        for n in names {
            assert!(
                !below.contains(&n),
                "mgmt depends on {n}: go through Daemon"
            );
        }
    }
}
