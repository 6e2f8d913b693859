//! Why the runtime did not start, or a change was not applied: the one
//! error every layer of the runtime returns.

use std::fmt;
use std::io;

use ofp::OfpError;

use crate::ports::PortError;

/// Why the runtime did not start, or a change was not applied.
#[derive(Debug)]
pub enum RuntimeError {
    /// Ports that could not be opened (all of them, not just the first).
    Ports(Vec<PortError>),
    /// A static flow, group or meter the pipeline refused.
    Refused {
        /// Bridge name.
        bridge: String,
        /// Where it was written (`FILE:LINE`) and its text.
        what: String,
        /// The OpenFlow error.
        error: OfpError,
    },
    /// A static flow whose text no longer parses (the model keeps only
    /// the text of static flows; it parsed when it was validated).
    Unparsable {
        /// Bridge name.
        bridge: String,
        /// Where it was written (`FILE:LINE`) and its text.
        what: String,
        /// The parser's message.
        error: String,
    },
    /// A flows file that could not be read again to install its flows,
    /// or that changed after it was checked.
    FlowsFile {
        /// Bridge name.
        bridge: String,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: String,
    },
    /// Threads could not be started.
    Threads {
        /// Bridge name.
        bridge: String,
        /// Why.
        error: io::Error,
    },
    /// A change that names what does not run, or cannot be made live.
    Change(String),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Ports(errs) => {
                for (i, e) in errs.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            RuntimeError::Refused {
                bridge,
                what,
                error,
            } => write!(f, "bridge {bridge}: {what}: refused: {error}"),
            RuntimeError::Unparsable {
                bridge,
                what,
                error,
            } => write!(f, "bridge {bridge}: {what}: does not parse: {error}"),
            RuntimeError::FlowsFile {
                bridge,
                path,
                error,
            } => write!(f, "bridge {bridge}: flows file {}: {error}", path.display()),
            RuntimeError::Threads { bridge, error } => {
                write!(f, "bridge {bridge}: cannot start threads: {error}")
            }
            RuntimeError::Change(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for RuntimeError {}
