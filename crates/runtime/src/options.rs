//! What the runtime is told besides the configuration, and what it tells
//! back: its options, the link event it reports, the number of the port
//! packet-outs are injected on. Every layer of the runtime names these.

use std::time::Duration;

use crate::ports::BackendOptions;

/// The switch-side number of each bridge's injection port (not an
/// OpenFlow port: above `OFPP_MAX`, below the reserved numbers).
pub const INJECT_PORT: u32 = 0xffff_fff0;

/// A port's link went up or down (for the agent's OFPT_PORT_STATUS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStatusEvent {
    /// Bridge name.
    pub bridge: String,
    /// OpenFlow port number.
    pub port: u32,
    /// Interface name.
    pub interface: String,
    /// The link is up.
    pub up: bool,
}

/// Runtime settings that are not part of the configuration.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Backend options.
    pub backends: BackendOptions,
    /// Follow kernel link state with a netlink watcher thread.
    pub watch_links: bool,
    /// How long idle dataplane threads keep polling before they sleep
    /// (`Duration::MAX`: busy polling); `None`: the dataplane's default.
    pub poll_window: Option<Duration>,
    /// Entries of each worker's flow cache (0: none); `None`: the
    /// pipeline's default ([`pipeline::datapath::DEFAULT_FLOW_CACHE`]).
    pub flow_cache: Option<usize>,
    /// Where tables saved at the last graceful stop are restored from
    /// ([`crate::saved`]); `None`: nothing is restored.
    pub saved_tables: Option<std::path::PathBuf>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            backends: BackendOptions::default(),
            watch_links: true,
            poll_window: None,
            flow_cache: None,
            saved_tables: None,
        }
    }
}
