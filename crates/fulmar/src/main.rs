//! The `fulmar` command: parses the command line and dispatches to the
//! subcommand modules, which hold the logic.

mod cmd_bench;
mod cmd_demo;
mod cmd_ofp;
mod cmd_run;
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
    /// Run the switch on real interfaces (config file or flags).
    Run(cmd_run::RunArgs),
    /// Build network namespaces as root and run the seed-001 gateway:
    /// host A (VLAN 10) <-> gw1 <-MPLS-> gw2 <-> host B (VLAN 20), ping
    /// across, print counters, clean up.
    Demo(cmd_demo::DemoArgs),
    /// Send ICMP echo requests from one interface (used by `demo`).
    #[command(hide = true)]
    DemoPing(cmd_demo::PingArgs),
    /// Answer ICMP echo requests on one interface (used by `demo`).
    #[command(hide = true)]
    DemoEcho(cmd_demo::EchoArgs),
}

/// Logs to stderr; `RUST_LOG` picks the level (default info). Colours
/// only when stderr is a terminal, so files and pipes get plain text.
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ofp { command } => cmd_ofp::run(command),
        Command::Trace(args) => cmd_trace::run(&args),
        Command::Bench(args) => cmd_bench::run(&args),
        Command::Run(args) => {
            init_logging();
            cmd_run::run(&args)
        }
        Command::Demo(args) => {
            init_logging();
            cmd_demo::run(&args)
        }
        Command::DemoPing(args) => cmd_demo::ping(&args),
        Command::DemoEcho(args) => cmd_demo::echo(&args),
    }
}
