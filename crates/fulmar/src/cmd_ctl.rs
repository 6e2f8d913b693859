//! `fulmar ctl`: the client of a running switch's control socket.
//!
//! ```text
//! fulmar ctl [-t SOCKET] COMMAND [ARG…]      # fulmar ctl list-commands
//! ```
//!
//! The commands are the control socket's registry
//! ([`mgmt::registry::COMMANDS`]): each is a clap subcommand built from
//! its entry, so `fulmar ctl --help`, `fulmar ctl COMMAND --help`, the
//! shell completions and the man pages list what the switch answers. A
//! name the registry does not know is still sent (a switch of another
//! version may know it) and the switch says whether it does.
//!
//! It sends one JSON-RPC request (what `ovs-appctl` sends) and prints the
//! answer; an error is printed on stderr with exit status 2, a switch
//! that cannot be reached exits with 1. The arguments the registry marks
//! as files (`load`, `check`, `save`, `add-flows`, `capture`) are made
//! absolute here, since the switch reads them from its own working
//! directory.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use mgmt::registry::{self, COMMANDS};

/// `fulmar ctl` arguments.
#[derive(Debug)]
pub struct CtlArgs {
    /// The switch's control socket.
    pub socket: PathBuf,
    /// The command and its arguments.
    pub command: Vec<String>,
}

const TARGET: &str = "target";
const ARGS: &str = "args";

/// The subcommand of one registry entry: its arguments are taken as
/// they are (options, `--` between joined configuration commands).
fn subcommand(c: &registry::Command) -> Command {
    Command::new(c.name)
        .about(c.help)
        .override_usage(
            format!("fulmar ctl [-t SOCKET] {} {}", c.name, c.usage())
                .trim_end()
                .to_string(),
        )
        .visible_aliases(c.aliases.iter().copied())
        .arg(
            Arg::new(ARGS)
                .value_name("ARG")
                .help(if c.usage().is_empty() {
                    "(none)"
                } else {
                    c.usage()
                })
                .num_args(0..)
                .action(ArgAction::Append)
                .trailing_var_arg(true)
                .allow_hyphen_values(true),
        )
}

impl Args for CtlArgs {
    fn augment_args(cmd: Command) -> Command {
        cmd.arg(
            Arg::new(TARGET)
                .short('t')
                .long("target")
                .value_name("SOCKET")
                .value_parser(clap::value_parser!(PathBuf))
                .default_value(crate::cmd_run::DEFAULT_CTL)
                .help("The switch's control socket"),
        )
        .subcommands(COMMANDS.iter().map(subcommand))
        .subcommand_required(true)
        .subcommand_value_name("COMMAND")
        .allow_external_subcommands(true)
        .external_subcommand_value_parser(clap::value_parser!(String))
        .disable_help_subcommand(true)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for CtlArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let socket = m
            .get_one::<PathBuf>(TARGET)
            .cloned()
            .unwrap_or_else(|| PathBuf::from(crate::cmd_run::DEFAULT_CTL));
        let Some((name, sub)) = m.subcommand() else {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::MissingSubcommand,
                "give a command (fulmar ctl list-commands)\n",
            ));
        };
        let mut command = vec![name.to_string()];
        // A registry command's words are under ARGS; an unknown one's
        // under the empty name.
        let id = if registry::find(name).is_some() {
            ARGS
        } else {
            ""
        };
        if let Ok(Some(words)) = sub.try_get_many::<String>(id) {
            command.extend(words.cloned());
        }
        Ok(CtlArgs { socket, command })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// Runs `fulmar ctl`.
pub fn run(args: &CtlArgs) -> anyhow::Result<ExitCode> {
    let Some((method, rest)) = args.command.split_first() else {
        anyhow::bail!("give a command (fulmar ctl list-commands)");
    };
    let params = match (registry::find(method), std::env::current_dir()) {
        (Some(c), Ok(cwd)) => c.absolute_files(rest, &cwd),
        _ => rest.to_vec(),
    };
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
