//! The progress line on stderr.

use std::io::Write;

/// A progress line on stderr, when asked for ([`crate::Options::progress`]).
pub(crate) struct Progress {
    pub(crate) on: bool,
}

impl Progress {
    pub(crate) fn show(&self, line: &str) {
        if self.on {
            eprint!("\r\x1b[2K{line}");
            let _ = std::io::stderr().flush();
        }
    }

    pub(crate) fn done(&self) {
        if self.on {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}
