//! The `fulmar` command: parses the command line and dispatches to the
//! subcommand modules, which hold the logic.

/// jemalloc for every allocation of the binary (see the dependency's
/// comment in Cargo.toml for the measurements).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod cmd_bench;
mod cmd_ctl;
mod cmd_demo;
mod cmd_ofp;
mod cmd_run;
mod cmd_trace;
mod logging;

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// `VERSION (commit HASH)`.
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FULMAR_COMMIT"),
    ")"
);

/// `fulmar VERSION (commit HASH)`, as `fulmar ctl version` answers.
pub fn version_line() -> String {
    format!("fulmar {LONG_VERSION}")
}

#[derive(Parser)]
#[command(
    name = "fulmar",
    version = LONG_VERSION,
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
    Run(Box<cmd_run::RunArgs>),
    /// Manage a running switch through its control socket: show,
    /// add-br, add-port, set-controller, dump-flows, stats, trace, ...
    /// (`fulmar ctl list-commands`).
    Ctl(cmd_ctl::CtlArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell) on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write man pages (fulmar.1, fulmar-run.1, ...) into a directory.
    Man {
        /// Where to write them.
        dir: PathBuf,
    },
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

/// Writes a man page for `cmd` and each of its subcommands into `dir`.
fn write_man_pages(cmd: clap::Command, dir: &std::path::Path) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut n = 0;
    let mut stack = vec![(cmd.get_name().to_string(), cmd)];
    while let Some((name, cmd)) = stack.pop() {
        if cmd.is_hide_set() {
            continue;
        }
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd.clone())
            .title(name.clone())
            .render(&mut out)?;
        std::fs::write(dir.join(format!("{name}.1")), out)?;
        n += 1;
        for sub in cmd.get_subcommands() {
            stack.push((format!("{name}-{}", sub.get_name()), sub.clone()));
        }
    }
    Ok(n)
}

/// A user error prints one line (with its causes) and exits 1; never a
/// backtrace.
fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fulmar: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Ofp { command } => cmd_ofp::run(command),
        Command::Trace(args) => cmd_trace::run(&args),
        Command::Bench(args) => cmd_bench::run(&args),
        Command::Run(args) => {
            let logs = logging::init();
            cmd_run::run(&args, logs)
        }
        Command::Ctl(args) => cmd_ctl::run(&args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "fulmar", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            let n = write_man_pages(Cli::command(), &dir)?;
            println!("{n} man pages written to {}", dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => {
            logging::init();
            cmd_demo::run(&args)
        }
        Command::DemoPing(args) => cmd_demo::ping(&args),
        Command::DemoEcho(args) => cmd_demo::echo(&args),
    }
}
