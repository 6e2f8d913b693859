//! The OF-CONFIG 1.2 module: a NETCONF server over SSH.
//!
//! (Being built: `start` refuses until the module lands.)

use std::sync::Arc;

use runtime::daemon::Daemon;

/// The module's `fulmar run` flags.
#[derive(clap::Args, Debug, Clone, Default)]
#[group(id = "ofconfig-module")]
pub struct Args {
    /// Serve OF-CONFIG 1.2 over NETCONF/SSH on ADDR:PORT (PORT alone: 127.0.0.1:PORT)
    #[arg(long = "netconf", value_name = "ADDR")]
    pub netconf: Option<String>,
}

impl Args {
    /// The module was asked for.
    pub fn enabled(&self) -> bool {
        self.netconf.is_some()
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
    match &args.netconf {
        None => Ok(None),
        Some(t) => Err(format!("--netconf {t}: not built yet")),
    }
}
