//! The `fulmar` command: parses the command line and dispatches to the
//! subcommand modules, which hold the logic.

mod cmd_bench;
mod cmd_ofp;
mod cmd_trace;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "fulmar",
    version,
    about = "A userspace OpenFlow 1.3 software switch"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// OpenFlow 1.3 message tools.
    Ofp {
        #[command(subcommand)]
        command: cmd_ofp::OfpCommand,
    },
    /// Send packets through an in-memory pipeline built from flow, group
    /// and meter files, and show what happens to them.
    Trace(cmd_trace::TraceArgs),
    /// Measure forwarding: generated rules, in-memory packets, one or
    /// more workers; reports Mpps, ns/packet, memory and install rate.
    Bench(cmd_bench::BenchArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ofp { command } => cmd_ofp::run(command),
        Command::Trace(args) => cmd_trace::run(&args),
        Command::Bench(args) => cmd_bench::run(&args),
    }
}
