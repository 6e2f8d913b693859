//! The OVSDB module: fulmar as a client of `ovsdb-server`.
//!
//! (Being built: `start` refuses until the module lands.)

use std::sync::Arc;

use runtime::daemon::Daemon;

/// The module's `fulmar run` flags.
#[derive(clap::Args, Debug, Clone, Default)]
#[group(id = "ovsdb-module")]
pub struct Args {
    /// Take the configuration from an ovsdb-server holding vswitch.ovsschema and write the switch's state back (unix:PATH or tcp:IP:PORT)
    #[arg(long = "ovsdb", value_name = "TARGET")]
    pub ovsdb: Option<String>,
}

impl Args {
    /// The module was asked for.
    pub fn enabled(&self) -> bool {
        self.ovsdb.is_some()
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
    match &args.ovsdb {
        None => Ok(None),
        Some(t) => Err(format!("--ovsdb {t}: not built yet")),
    }
}
