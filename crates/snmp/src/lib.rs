//! The SNMP module: an AgentX subagent serving IF-MIB and BRIDGE-MIB.
//!
//! (Being built: `start` refuses until the module lands.)

use std::sync::Arc;

use runtime::daemon::Daemon;

/// The module's `fulmar run` flags.
#[derive(clap::Args, Debug, Clone, Default)]
#[group(id = "snmp-module")]
pub struct Args {
    /// Serve IF-MIB and BRIDGE-MIB as an AgentX subagent of this master agent (a unix socket path such as /var/agentx/master, or tcp:HOST:PORT)
    #[arg(long = "agentx", value_name = "MASTER")]
    pub agentx: Option<String>,
}

impl Args {
    /// The module was asked for.
    pub fn enabled(&self) -> bool {
        self.agentx.is_some()
    }
}

/// The running module; dropping it (or [`Service::stop`]) stops it.
pub struct Service {}

impl Service {
    /// Stops the module.
    pub fn stop(self) {}
}

/// Starts the module on `rt` when `args` ask for it.
pub fn start(
    _daemon: Arc<Daemon>,
    _rt: &tokio::runtime::Handle,
    args: &Args,
) -> Result<Option<Service>, String> {
    match &args.agentx {
        None => Ok(None),
        Some(t) => Err(format!("--agentx {t}: not built yet")),
    }
}
