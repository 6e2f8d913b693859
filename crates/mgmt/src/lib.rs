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
