//! The one table of the control socket's commands: each command's name,
//! its `ovs-appctl` aliases, its usage and help, which of its arguments
//! are files the client makes absolute, and what runs it.
//!
//! Everything that names a command reads [`COMMANDS`]: the socket's
//! dispatch ([`crate::commands::Ctl`]), `list-commands`, and in the
//! `fulmar` binary the `fulmar ctl` parser (one clap subcommand per
//! entry), so `fulmar ctl --help`, the shell completions and the man
//! pages (`fulmar completions`, `fulmar man`). The configuration
//! commands ([`Run::Transaction`]) are parsed by the datastore
//! (`datastore::parse_ctl`); a test checks that they are exactly the ones
//! it knows (`datastore::CTL_COMMANDS`).

use std::fmt::Write as _;

use crate::commands::Ctl;
use crate::ctl::Handler;

/// What runs a command.
#[derive(Clone, Copy)]
pub enum Run {
    /// A configuration transaction: the command's words, and any more
    /// after `--`, go to `datastore::parse_ctl` and commit whole.
    Transaction,
    /// A method of the command set, given the command's name and its
    /// arguments.
    Call(fn(&Ctl, &str, &[String]) -> Result<String, String>),
}

/// One command of the control socket.
pub struct Command {
    /// Its name (`fulmar ctl NAME`).
    pub name: &'static str,
    /// Other names it answers to (`ovs-appctl` names: `fdb/show`, ...).
    pub aliases: &'static [&'static str],
    /// Its arguments, as usage prints them (empty for a
    /// [`Run::Transaction`], whose usage is the datastore's: read
    /// [`Command::usage`]).
    pub args: &'static str,
    /// What it does, in one line.
    pub help: &'static str,
    /// Which positional arguments (0-based, options not counted) name a
    /// file the switch reads or writes: a client makes them absolute,
    /// since the switch runs in its own working directory.
    pub files: &'static [usize],
    /// Options that take a value (it is not a positional argument).
    pub valued: &'static [&'static str],
    /// What runs it.
    pub run: Run,
}

const fn cmd(name: &'static str, args: &'static str, help: &'static str, run: Run) -> Command {
    Command {
        name,
        aliases: &[],
        args,
        help,
        files: &[],
        valued: &[],
        run,
    }
}

/// A configuration command: its usage is the datastore's.
const fn txn(name: &'static str, help: &'static str) -> Command {
    cmd(name, "", help, Run::Transaction)
}

impl Command {
    const fn aliases(mut self, aliases: &'static [&'static str]) -> Command {
        self.aliases = aliases;
        self
    }

    const fn files(mut self, files: &'static [usize]) -> Command {
        self.files = files;
        self
    }

    const fn valued(mut self, valued: &'static [&'static str]) -> Command {
        self.valued = valued;
        self
    }

    /// Its arguments, as usage prints them: a configuration command's
    /// from the datastore's grammar (`datastore::CTL_COMMANDS`, which its
    /// errors print too), the others' from [`Command::args`].
    pub fn usage(&self) -> &'static str {
        match self.run {
            Run::Transaction => datastore::CTL_COMMANDS
                .iter()
                .find(|(n, _)| *n == self.name)
                .map_or("", |(_, u)| *u),
            Run::Call(_) => self.args,
        }
    }

    /// Whether `name` is this command's name or one of its aliases.
    pub fn answers(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }

    /// `params` with the file arguments made absolute against `cwd`
    /// (what `fulmar ctl` sends). Options (`--x`) and the values of
    /// [`Command::valued`] options are not counted as positions.
    pub fn absolute_files(&self, params: &[String], cwd: &std::path::Path) -> Vec<String> {
        let mut out = params.to_vec();
        let mut positional = 0;
        let mut skip = false;
        for p in out.iter_mut() {
            if std::mem::take(&mut skip) {
                continue;
            }
            if self.valued.contains(&p.as_str()) {
                skip = true;
                continue;
            }
            if p.starts_with('-') {
                continue;
            }
            if self.files.contains(&positional) && !std::path::Path::new(p).is_absolute() {
                *p = cwd.join(&*p).display().to_string();
            }
            positional += 1;
        }
        out
    }
}

use Run::Call;

/// Every command, in the order `list-commands` prints them.
pub static COMMANDS: &[Command] = &[
    cmd("list-commands", "", "this list", Call(Ctl::list_commands)).aliases(&["help"]),
    cmd("version", "", "the switch's version", Call(Ctl::version)),
    cmd(
        "show",
        "[--json]",
        "bridges, ports, controllers and their state",
        Call(Ctl::show),
    ),
    txn("add-br", "add a bridge"),
    txn("del-br", "delete a bridge"),
    txn("add-port", "add a port"),
    txn("del-port", "delete a port"),
    txn("set-controller", "set a bridge's controllers"),
    txn("del-controller", "remove a bridge's controllers"),
    txn("set-fail-mode", "set a bridge's fail mode"),
    txn("del-fail-mode", "back to fail mode secure"),
    txn("set", "set settings (bridge:BR, port:BR:IF, dataplane)"),
    txn("set-qos", "set a port's egress queues"),
    txn("clear-qos", "remove a port's egress queues"),
    cmd(
        "save",
        "[FILE]",
        "write the running configuration (default: the state file)",
        Call(Ctl::save),
    )
    .files(&[0]),
    cmd(
        "load",
        "FILE [--dry-run]",
        "make the running switch what FILE says",
        Call(Ctl::load),
    )
    .files(&[0]),
    cmd(
        "check",
        "FILE",
        "validate a configuration file",
        Call(Ctl::check),
    )
    .files(&[0]),
    cmd(
        "dump-flows",
        "BR [MATCH]",
        "flow entries with counters",
        Call(Ctl::dump_flows),
    ),
    cmd(
        "add-flow",
        "BR FLOW",
        "add a flow (ovs-ofctl syntax)",
        Call(Ctl::flow_command),
    ),
    cmd(
        "add-flows",
        "BR FILE",
        "add the flows of a file",
        Call(Ctl::add_flows),
    )
    .files(&[1]),
    cmd(
        "mod-flows",
        "BR FLOW [--strict]",
        "modify flows",
        Call(Ctl::flow_command),
    ),
    cmd(
        "del-flows",
        "BR [MATCH] [--strict]",
        "delete flows",
        Call(Ctl::flow_command),
    ),
    cmd("dump-groups", "BR", "group entries", Call(Ctl::dump_groups)),
    cmd("dump-meters", "BR", "meter entries", Call(Ctl::dump_meters)),
    cmd(
        "fdb-show",
        "BR [--json]",
        "the addresses NORMAL has learnt: port, VLAN, MAC, age",
        Call(Ctl::fdb_show),
    )
    .aliases(&["fdb/show"]),
    cmd(
        "trace",
        "BR in_port=N HEX [--json]",
        "a packet through the live tables",
        Call(Ctl::trace),
    )
    .aliases(&["ofproto/trace"]),
    cmd(
        "stats",
        "[BR] [--json]",
        "ports, tables, threads, drops by name",
        Call(Ctl::stats),
    )
    .aliases(&["dpif-netdev/pmd-stats-show"]),
    cmd(
        "capture",
        "PORT FILE [--count N] [--seconds S]",
        "write a pcapng of what a port (IF or BR:NUM) receives and sends",
        Call(Ctl::capture),
    )
    .files(&[1])
    .valued(&["--count", "--seconds"]),
    cmd("memory", "", "memory in use", Call(Ctl::memory)).aliases(&["memory/show"]),
    cmd(
        "log-level",
        "[LEVEL [TARGET]]",
        "set the log level (none: the filter in force)",
        Call(Ctl::log_level),
    )
    .aliases(&["vlog/set", "vlog/list"]),
    cmd("exit", "", "stop the switch", Call(Ctl::exit)),
];

/// The command named `name` (or one of its aliases).
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.answers(name))
}

/// What `list-commands` answers.
pub fn list_text() -> String {
    let mut s = String::from("The available commands are:\n");
    for c in COMMANDS {
        let line = format!("  {:<23} {}", c.name, c.usage());
        let _ = writeln!(s, "{}", line.trim_end());
    }
    for c in COMMANDS {
        for a in c.aliases {
            let _ = writeln!(s, "  {a:<23} (as {})", c.name);
        }
    }
    s
}

/// The socket's dispatch: the command's entry runs it. It lives here,
/// above the handlers, so that the handlers never name the table.
impl Handler for Ctl {
    fn call(&self, method: &str, params: &[String]) -> Result<String, String> {
        let Some(cmd) = find(method) else {
            return Err(format!(
                "\"{method}\" is not a valid command (use list-commands to see a list)"
            ));
        };
        match cmd.run {
            Run::Transaction => self.transaction(cmd.name, params),
            Run::Call(f) => f(self, cmd.name, params),
        }
    }
}

impl Ctl {
    pub(crate) fn list_commands(&self, _: &str, _: &[String]) -> Result<String, String> {
        Ok(list_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut all: Vec<&str> = COMMANDS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a name or alias appears twice");
    }

    #[test]
    fn transactions_are_the_datastores_commands() {
        let mut ours: Vec<&str> = COMMANDS
            .iter()
            .filter(|c| matches!(c.run, Run::Transaction))
            .map(|c| c.name)
            .collect();
        let mut theirs: Vec<&str> = datastore::CTL_COMMANDS.iter().map(|(n, _)| *n).collect();
        ours.sort_unstable();
        theirs.sort_unstable();
        assert_eq!(ours, theirs);
        // Their usage is the datastore's, and theirs alone.
        for c in COMMANDS
            .iter()
            .filter(|c| matches!(c.run, Run::Transaction))
        {
            assert_eq!(c.args, "", "{}", c.name);
            assert!(!c.usage().is_empty(), "{}", c.name);
        }
        assert_eq!(find("del-br").unwrap().usage(), "BRIDGE");
        assert_eq!(find("trace").unwrap().usage(), "BR in_port=N HEX [--json]");
    }

    #[test]
    fn the_list_names_every_command_and_alias() {
        let text = list_text();
        for c in COMMANDS {
            for n in std::iter::once(&c.name).chain(c.aliases) {
                assert!(
                    text.lines().any(|l| l.split_whitespace().next() == Some(n)),
                    "{n}"
                );
            }
        }
        assert_eq!(find("fdb/show").map(|c| c.name), Some("fdb-show"));
        assert!(find("no-such").is_none());
    }

    #[test]
    fn file_arguments_are_made_absolute() {
        let cwd = std::path::Path::new("/home/op");
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cap = find("capture").unwrap();
        assert_eq!(
            cap.absolute_files(&p(&["--count", "5", "eth0", "x.pcapng"]), cwd),
            p(&["--count", "5", "eth0", "/home/op/x.pcapng"])
        );
        let load = find("load").unwrap();
        assert_eq!(
            load.absolute_files(&p(&["--dry-run", "a.toml"]), cwd),
            p(&["--dry-run", "/home/op/a.toml"])
        );
        assert_eq!(
            load.absolute_files(&p(&["/etc/a.toml"]), cwd),
            p(&["/etc/a.toml"])
        );
        let add = find("add-flows").unwrap();
        assert_eq!(
            add.absolute_files(&p(&["br0", "f.txt"]), cwd),
            p(&["br0", "/home/op/f.txt"])
        );
        // A command without files sends its words as they are.
        let show = find("show").unwrap();
        assert_eq!(show.absolute_files(&p(&["x"]), cwd), p(&["x"]));
    }
}
