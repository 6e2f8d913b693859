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

#[cfg(test)]
mod tests {
    use super::*;
    use mgmt::registry::COMMANDS;

    fn ctl() -> clap::Command {
        Cli::command()
            .find_subcommand("ctl")
            .cloned()
            .expect("a ctl subcommand")
    }

    fn parse(words: &[&str]) -> Vec<String> {
        let cli = Cli::try_parse_from(std::iter::once("fulmar").chain(words.iter().copied()))
            .unwrap_or_else(|e| panic!("{words:?}: {e}"));
        let Command::Ctl(args) = cli.command else {
            panic!("{words:?}: not ctl");
        };
        args.command
    }

    /// Every place that lists `fulmar ctl`'s commands lists the
    /// registry's, and nothing else.
    #[test]
    fn ctl_commands_everywhere_are_the_registrys() {
        let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        // The parser: one subcommand per entry, with its aliases.
        let ctl = ctl();
        let subs: Vec<&str> = ctl.get_subcommands().map(|s| s.get_name()).collect();
        assert_eq!(subs, names);
        for c in COMMANDS {
            let sub = ctl.find_subcommand(c.name).unwrap();
            let aliases: Vec<&str> = sub.get_visible_aliases().collect();
            assert_eq!(aliases, c.aliases, "{}", c.name);
        }
        // `fulmar ctl --help`.
        let help = ctl.clone().render_long_help().to_string();
        // `list-commands`.
        let list = mgmt::registry::list_text();
        // The completions of three shells.
        let completion = |shell| {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "fulmar", &mut out);
            String::from_utf8(out).unwrap()
        };
        let bash = completion(clap_complete::Shell::Bash);
        let zsh = completion(clap_complete::Shell::Zsh);
        let fish = completion(clap_complete::Shell::Fish);
        // The man pages: fulmar-ctl.1 and one per command.
        let dir = tempfile::tempdir().unwrap();
        write_man_pages(Cli::command(), dir.path()).unwrap();
        let man = std::fs::read_to_string(dir.path().join("fulmar-ctl.1")).unwrap();
        for n in &names {
            let word = |text: &str| {
                text.split(|c: char| c.is_whitespace() || "'\"(),:;\\[]".contains(c))
                    .any(|w| w == *n)
            };
            assert!(word(&help), "--help lacks {n}:\n{help}");
            assert!(word(&list), "list-commands lacks {n}:\n{list}");
            assert!(word(&bash), "bash completion lacks {n}");
            assert!(word(&zsh), "zsh completion lacks {n}");
            assert!(word(&fish), "fish completion lacks {n}");
            assert!(man.contains(&n.replace('-', "\\-")), "man page lacks {n}");
            assert!(
                dir.path().join(format!("fulmar-ctl-{n}.1")).exists(),
                "no man page for {n}"
            );
        }
        // Nothing listed that the registry lacks: list-commands' lines
        // are the names and aliases, one each.
        let listed: Vec<&str> = list
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let known = COMMANDS.iter().map(|c| 1 + c.aliases.len()).sum::<usize>();
        assert_eq!(listed.len(), known);
    }

    #[test]
    fn ctl_words_reach_the_switch_as_typed() {
        assert_eq!(parse(&["ctl", "show", "--json"]), ["show", "--json"]);
        assert_eq!(
            parse(&["ctl", "-t", "/x.ctl", "add-br", "br1", "--", "add-port", "br1", "p0"]),
            ["add-br", "br1", "--", "add-port", "br1", "p0"]
        );
        assert_eq!(
            parse(&["ctl", "capture", "--count", "5", "eth0", "x.pcapng"]),
            ["capture", "--count", "5", "eth0", "x.pcapng"]
        );
        assert_eq!(
            parse(&["ctl", "load", "a.toml", "--dry-run"]),
            ["load", "a.toml", "--dry-run"]
        );
        assert_eq!(
            parse(&["ctl", "dump-flows", "br0", "-"]),
            ["dump-flows", "br0", "-"]
        );
        assert_eq!(parse(&["ctl", "fdb/show", "br0"]), ["fdb-show", "br0"]);
        assert_eq!(
            parse(&["ctl", "set", "port", "p0", "tag=10"]),
            ["set", "port", "p0", "tag=10"]
        );
        // A name the registry lacks still goes to the switch, which
        // answers for itself.
        assert_eq!(
            parse(&["ctl", "coverage/show", "x", "--y"]),
            ["coverage/show", "x", "--y"]
        );
        assert!(Cli::try_parse_from(["fulmar", "ctl"]).is_err());
    }
}
