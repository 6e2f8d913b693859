//! Logs to stderr with a filter that can change while the switch runs
//! (`fulmar run --log-level`, `fulmar ctl log-level`). The first filter
//! comes from `RUST_LOG`, else `info`. Colours only when stderr is a
//! terminal, so files and pipes get plain text.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// The process's log filter.
#[derive(Clone)]
pub struct Logs {
    handle: Option<reload::Handle<EnvFilter, Registry>>,
    current: Arc<Mutex<String>>,
}

/// Installs the subscriber (once per process; later calls get a handle
/// that changes nothing).
pub fn init() -> Logs {
    let text = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
    let filter = EnvFilter::try_new(&text).unwrap_or_else(|_| EnvFilter::new("info"));
    let (layer, handle) = reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = tracing_subscriber::registry()
        .with(layer)
        .with(fmt)
        .try_init()
        .is_ok();
    Logs {
        handle: installed.then_some(handle),
        current: Arc::new(Mutex::new(text)),
    }
}

impl Logs {
    /// Replaces the filter (`debug`, `warn,runtime=debug`, ...); returns
    /// it. A filter that does not parse changes nothing.
    pub fn set(&self, filter: &str) -> Result<String, String> {
        let f = EnvFilter::try_new(filter).map_err(|e| format!("log filter {filter:?}: {e}"))?;
        if let Some(h) = &self.handle {
            h.reload(f).map_err(|e| e.to_string())?;
        }
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = filter.to_string();
        Ok(filter.to_string())
    }

    /// The filter in force.
    pub fn current(&self) -> String {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
