//! fulmar's management modules: each turns its protocol into reads of the
//! running switch ([`runtime::daemon::Daemon`]) and transactions on its
//! datastore.
//!
//! - [`ctl`]: the control socket (JSON-RPC 1.0 as `ovs-appctl` speaks it)
//!   and its blocking client (`fulmar ctl`); [`commands`]: what it
//!   answers.
//! - [`metrics`]: Prometheus / OpenMetrics exposition; [`scrape`] reads
//!   the switch for it.
//! - [`trace`]: packet traces through a pipeline instance (`fulmar trace`
//!   and `fulmar ctl trace` print through it).

pub mod commands;
pub mod ctl;
pub mod metrics;
pub mod scrape;
pub mod trace;
