//! `fulmar ctl`: the client of a running switch's control socket.
//!
//! ```text
//! fulmar ctl [-t SOCKET] COMMAND [ARG…]      # fulmar ctl list-commands
//! ```
//!
//! It sends one JSON-RPC request (what `ovs-appctl` sends) and prints the
//! answer; an error is printed on stderr with exit status 2, a switch
//! that cannot be reached exits with 1. File arguments (`load`, `check`,
//! `save`, `add-flows`) are made absolute here, since the switch reads
//! them from its own working directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

/// `fulmar ctl` arguments.
#[derive(Args, Debug)]
#[command(trailing_var_arg = true)]
pub struct CtlArgs {
    /// The switch's control socket.
    #[arg(short = 't', long = "target", default_value = crate::cmd_run::DEFAULT_CTL)]
    pub socket: PathBuf,
    /// The command and its arguments (`list-commands` lists them).
    #[arg(required = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// Which positional argument of a command is a file the switch reads or
/// writes.
fn file_arg(command: &str) -> Option<usize> {
    match command {
        "load" | "check" | "save" => Some(0),
        "add-flows" | "capture" => Some(1),
        _ => None,
    }
}

/// Options that take a value (their value is not a positional argument).
const VALUED: &[&str] = &["--count", "--seconds"];

fn absolute(p: &str) -> String {
    let path = Path::new(p);
    if path.is_absolute() || p.starts_with('-') {
        return p.to_string();
    }
    std::env::current_dir()
        .map(|d| d.join(path).display().to_string())
        .unwrap_or_else(|_| p.to_string())
}

/// Runs `fulmar ctl`.
pub fn run(args: &CtlArgs) -> anyhow::Result<ExitCode> {
    let Some((method, rest)) = args.command.split_first() else {
        anyhow::bail!("give a command (fulmar ctl list-commands)");
    };
    let mut params: Vec<String> = rest.to_vec();
    if let Some(want) = file_arg(method) {
        let mut positional = 0;
        let mut skip = false;
        for p in params.iter_mut() {
            if std::mem::take(&mut skip) {
                continue;
            }
            if VALUED.contains(&p.as_str()) {
                skip = true;
                continue;
            }
            if p.starts_with("--") {
                continue;
            }
            if positional == want {
                *p = absolute(p);
                break;
            }
            positional += 1;
        }
    }
    match mgmt::ctl::call(&args.socket, method, &params) {
        Err(e) => {
            eprintln!(
                "fulmar ctl: cannot reach the switch at {}: {e} (is `fulmar run` running, with --ctl there?)",
                args.socket.display()
            );
            Ok(ExitCode::from(1))
        }
        Ok(Err(msg)) => {
            eprintln!("fulmar ctl: {method}: {}", msg.trim_end());
            Ok(ExitCode::from(2))
        }
        Ok(Ok(text)) => {
            print!("{text}");
            if !text.is_empty() && !text.ends_with('\n') {
                println!();
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
