//! SIGINT and SIGTERM as a flag: the first signal asks for a clean
//! shutdown; the process keeps running until the caller acts on it.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A flag raised by SIGINT or SIGTERM.
#[derive(Clone)]
pub struct Shutdown {
    flag: Arc<AtomicBool>,
}

impl Shutdown {
    /// Installs the handlers.
    pub fn install() -> io::Result<Shutdown> {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, flag.clone())?;
        }
        Ok(Shutdown { flag })
    }

    /// True once a signal arrived (or [`Shutdown::request`] was called).
    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Raises the flag by hand.
    pub fn request(&self) {
        self.flag.store(true, Ordering::Release);
    }

    /// Sleeps up to `d`, waking early when the flag is raised; returns it.
    pub fn sleep(&self, d: Duration) -> bool {
        let step = Duration::from_millis(20);
        let mut left = d;
        while !self.requested() && !left.is_zero() {
            let s = left.min(step);
            std::thread::sleep(s);
            left -= s;
        }
        self.requested()
    }
}
