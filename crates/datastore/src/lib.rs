//! fulmar's configuration model: the one description of bridges, ports,
//! patch links, controllers, dataplane threads and static flows, groups
//! and meters. The config file (`fulmar run --config FILE`), the quick
//! command-line form ([`Config::from_flags`]) and later the management API
//! all produce and read a [`Config`].
//!
//! A configuration is validated whole before it is returned: every error
//! found is reported (each with file, line, column and field path, see
//! [`Diagnostic`]), and nothing is returned if there is one. Findings that
//! do not stop loading (a flow naming a group that a controller may add
//! later) are [`Config::warnings`]. Interfaces are not opened or looked
//! up here; the runtime checks [`Config::interfaces`] before starting.
//!
//! # The file
//!
//! ```toml
//! [dataplane]                     # all optional; defaults shown
//! mode = "run-to-completion"      # or "rx-worker-tx"
//! worker_threads = 1              # 1..=256
//! # rx_threads = 1, tx_threads = 1 (rx-worker-tx only)
//! # worker_cores = [2, 3]         # one core per thread; rx_cores, tx_cores
//! flush_idle_us = 0               # 0..=1000 (0: when the input is drained)
//! max_batch_wait_us = 0           # flush_idle_us..=10000 (0: at the end of each round)
//! rx_ring_size = 1024             # power of two, 64..=65536
//! tx_ring_size = 1024
//! # dispatch = "5tuple"           # port | l2 | 5tuple | priority-class
//! # dispatch_fallback = "5tuple"  # for priority-class
//! max_queue_delay_us = 100        # 0..=1000000 (0: deep, byte-sized queues)
//! bulk_reply_nice = 5             # 0..=19: long flow stats replies yield a shared CPU to workers (0: off)
//! [dataplane.burst]               # powers of two, 1..=1024
//! rx_read = 32
//! rx_write = 32
//! worker_read = 32
//! worker_write = 32
//! tx_read = 32
//! tx_write = 32
//! # [[dataplane.priority_class]]  # dispatch = "priority-class" only
//! # ip_dscp = 46                  # also vlan_pcp, ip_proto, udp_src,
//! # worker = 0                    # udp_dst, tcp_src, tcp_dst
//!
//! # [tls]                         # needed by tls:/ptls: controllers
//! # private_key = "switch.key"    # paths relative to this file
//! # certificate = "switch.crt"
//! # ca_cert = "ca.crt"
//!
//! [[bridges]]
//! name = "br0"
//! dpid = "0x1"                    # integer, "0x..", "00:00:..:01"; default: position
//! fail_mode = "secure"            # or "standalone"
//! n_tables = 254                  # 1..=254
//! miss_send_len = 128             # 0..=65535
//! flow_table_capacity = 16777216  # per table (the most an index holds)
//! flow_memory_limit_mib = 0       # all tables' entries; 0: no budget
//! flows = ["table=0,priority=0,actions=drop"]   # and/or flows_file = "br0.flows"
//! # groups = [..], groups_file, meters = [..], meters_file
//!
//! [[bridges.ports]]
//! port = 1                        # 1..=0xffffff00, unique in the bridge
//! interface = "eth0"              # unique in the process
//! backend = "afpacket"            # afpacket | afxdp | tap | memory | pcap | patch
//! # pcap_read = "in.pcap", pcap_write = "out.pcap", pcap_rate = "max" | PPS
//!
//! [[bridges.controllers]]
//! target = "tcp:192.0.2.1:6653"   # tls:, ptcp:PORT[:ADDR], ptls:; or listen = "tcp:ADDR:PORT"
//! echo_interval_ms = 5000
//! dead_peer_timeout_ms = 15000
//! backoff_min_ms = 1000
//! backoff_max_ms = 8000
//!
//! # [[patch_links]]               # both ends: ports with backend = "patch"
//! # a = "br0:10"
//! # b = "br1:10"
//! ```
//!
//! `crates/datastore/examples/gateway.toml` is a complete example.
//!
//! # The live model
//!
//! A running switch changes its model by transactions: [`Config::apply`]
//! takes a list of [`Op`]s (`fulmar ctl` words become them through
//! [`parse_ctl`]) and returns a new, validated model or every error;
//! [`diff`] lists the [`Change`]s between two models for the runtime to
//! apply; [`Config::save`] persists the model with [`write_atomic`].

mod diff;
mod error;
mod flows_file;
mod model;
mod path;
mod persist;
mod raw;
mod ser;
mod target;
mod tunnel;
mod txn;
mod validate;

pub use diff::{diff, Change};
pub use error::{ConfigError, Diagnostic};
pub use flows_file::{for_each_parsed_block, FileRead, FlowHandover, FlowsFileError};
pub use model::*;
pub use path::{FieldPath, Seg};
pub use persist::write_atomic;
pub use tunnel::{parse_tunnel_ip, parse_tunnel_key, TunnelKey};
pub use txn::{parse_ctl, Op, PortRef, CTL_COMMANDS, TRANSACTION};

use std::path::{Path, PathBuf};

use error::SourceText;
use raw::{IntOrString, RawBridge, RawConfig, RawController, RawDataplane, RawPort};
use toml::Spanned;

/// The command-line quick case: `fulmar run -i eth0 -i eth1 --flows f`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlagArgs {
    /// Interfaces, becoming ports 1, 2, ... in this order.
    pub interfaces: Vec<String>,
    /// A flows file (relative to the current directory).
    pub flows_file: Option<PathBuf>,
    /// Listeners (`--listen`): `tcp:ADDR:PORT`, `ptcp:PORT[:ADDR]`, ...
    pub listen: Vec<String>,
    /// Controllers to connect to: `tcp:HOST:PORT`, `tls:HOST:PORT`, ...
    pub controllers: Vec<String>,
    /// Datapath id (default 1).
    pub dpid: Option<u64>,
    /// The backend of every port.
    pub io: Backend,
    /// Run-to-completion dataplane threads.
    pub workers: usize,
}

/// One interface port, as [`Config::interfaces`] lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterfaceRef<'a> {
    /// Bridge name.
    pub bridge: &'a str,
    /// OpenFlow port number.
    pub port: u32,
    /// Interface name.
    pub interface: &'a str,
    /// Its backend.
    pub backend: &'a Backend,
}

/// Where messages about flag values say they are.
pub const COMMAND_LINE: &str = "command line";

/// Where messages of [`Config::revalidate`] say they are.
pub const MODEL: &str = "running config";

impl Config {
    /// Reads and validates a configuration file; core ids are checked
    /// against this machine's CPU count ([`Host::detect`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        Config::load_for(path, Host::detect())
    }

    /// As [`load`](Self::load), checking against `host`.
    pub fn load_for(path: impl AsRef<Path>, host: Host) -> Result<Config, ConfigError> {
        Config::load_with(path.as_ref(), host, None)
    }

    /// As [`load`](Self::load), handing each bridge's flows-file flows to
    /// `handover` as they are checked (see [`FlowHandover`]).
    pub fn load_handing_over(
        path: impl AsRef<Path>,
        handover: &mut dyn FlowHandover,
    ) -> Result<Config, ConfigError> {
        Config::load_with(path.as_ref(), Host::detect(), Some(handover))
    }

    fn load_with(
        path: &Path,
        host: Host,
        handover: Option<&mut dyn FlowHandover>,
    ) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::one(Diagnostic {
                file: path.to_path_buf(),
                line: None,
                column: None,
                field: String::new(),
                message: format!("cannot read the configuration: {e}"),
                ..Diagnostic::default()
            })
        })?;
        Config::check_text(&text, path, host, handover)
    }

    /// Parses and validates configuration text. `origin` names the file
    /// in messages, and its directory is where relative `*_file`, pcap and
    /// TLS paths are taken from. Checks cores against [`Host::detect`].
    pub fn from_str(text: &str, origin: impl AsRef<Path>) -> Result<Config, ConfigError> {
        Config::from_str_for(text, origin, Host::detect())
    }

    /// As [`from_str`](Self::from_str), checking against `host`.
    pub fn from_str_for(
        text: &str,
        origin: impl AsRef<Path>,
        host: Host,
    ) -> Result<Config, ConfigError> {
        Config::check_text(text, origin.as_ref(), host, None)
    }

    fn check_text(
        text: &str,
        origin: &Path,
        host: Host,
        handover: Option<&mut dyn FlowHandover>,
    ) -> Result<Config, ConfigError> {
        let src = SourceText::new(origin, Some(text));
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let field = validate::path_at(text, span.start);
            let message = e.message().trim_end().to_string();
            ConfigError::one(src.diag(&span, &field, message))
        })?;
        let mut checker = validate::Checker::new(src, validate::config_dir(origin), host);
        if let Some(h) = handover {
            checker = checker.handing_over(h);
        }
        match checker.config(&raw) {
            Some(c) => Ok(c),
            None => Err(ConfigError {
                errors: checker.errors,
            }),
        }
    }

    /// The quick case: one bridge `br0` whose ports 1, 2, ... are
    /// `args.interfaces` in order, all on `args.io`, with the flows file,
    /// listeners and controllers given, and `args.workers`
    /// run-to-completion threads. Validated as a file is; messages name
    /// [`COMMAND_LINE`] and the field the flag became.
    pub fn from_flags(args: FlagArgs) -> Result<Config, ConfigError> {
        Config::from_flags_for(args, Host::detect())
    }

    /// As [`from_flags`](Self::from_flags), checking against `host`.
    pub fn from_flags_for(args: FlagArgs, host: Host) -> Result<Config, ConfigError> {
        Config::flags_with(args, host, None)
    }

    /// As [`from_flags`](Self::from_flags), handing the flows file's flows
    /// to `handover` as they are checked (see [`FlowHandover`]).
    pub fn from_flags_handing_over(
        args: FlagArgs,
        handover: &mut dyn FlowHandover,
    ) -> Result<Config, ConfigError> {
        Config::flags_with(args, Host::detect(), Some(handover))
    }

    fn flags_with(
        args: FlagArgs,
        host: Host,
        handover: Option<&mut dyn FlowHandover>,
    ) -> Result<Config, ConfigError> {
        fn s<T>(v: T) -> Spanned<T> {
            Spanned::new(0..0, v)
        }
        fn path(p: &Path, field: &str) -> Result<String, ConfigError> {
            p.to_str().map(str::to_string).ok_or_else(|| {
                ConfigError::one(Diagnostic {
                    file: PathBuf::from(COMMAND_LINE),
                    line: None,
                    column: None,
                    field: field.to_string(),
                    message: format!("{} is not UTF-8", p.display()),
                    ..Diagnostic::default()
                })
            })
        }
        let mut ports = Vec::new();
        for (i, name) in args.interfaces.iter().enumerate() {
            let field = format!("bridges[0].ports[{i}]");
            let mut p = RawPort {
                port: s(i as i64 + 1),
                interface: Some(s(name.clone())),
                backend: Some(s(args.io.kind_str().to_string())),
                ..RawPort::default()
            };
            if let Backend::Pcap(pc) = &args.io {
                p.pcap_read = match &pc.read {
                    Some(r) => Some(s(path(r, &format!("{field}.pcap_read"))?)),
                    None => None,
                };
                p.pcap_write = match &pc.write {
                    Some(w) => Some(s(path(w, &format!("{field}.pcap_write"))?)),
                    None => None,
                };
                p.pcap_rate = Some(s(match pc.rate {
                    PcapRate::Max => IntOrString::Str("max".into()),
                    PcapRate::Pps(n) => IntOrString::Int(i64::try_from(n).unwrap_or(i64::MAX)),
                }));
            }
            ports.push(s(p));
        }
        let controller = |target: Option<String>, listen: Option<String>| {
            s(RawController {
                target: target.map(s),
                listen: listen.map(s),
                echo_interval_ms: None,
                dead_peer_timeout_ms: None,
                backoff_min_ms: None,
                backoff_max_ms: None,
            })
        };
        let mut controllers: Vec<_> = args
            .controllers
            .iter()
            .map(|t| controller(Some(t.clone()), None))
            .collect();
        controllers.extend(
            args.listen
                .iter()
                .map(|l| controller(None, Some(l.clone()))),
        );
        let flows_file = match &args.flows_file {
            Some(f) => Some(s(path(f, "bridges[0].flows_file")?)),
            None => None,
        };
        let raw = RawConfig {
            bridges: vec![s(RawBridge {
                name: s("br0".to_string()),
                dpid: Some(s(IntOrString::Str(format!(
                    "{:#x}",
                    args.dpid.unwrap_or(1)
                )))),
                fail_mode: None,
                n_tables: None,
                miss_send_len: None,
                flow_table_capacity: None,
                flow_memory_limit_mib: None,
                ports,
                controllers,
                flows: Vec::new(),
                flows_file,
                groups: Vec::new(),
                groups_file: None,
                meters: Vec::new(),
                meters_file: None,
                local_port: None,
            })],
            patch_links: Vec::new(),
            dataplane: Some(s(RawDataplane {
                worker_threads: Some(s(i64::try_from(args.workers).unwrap_or(i64::MAX))),
                ..RawDataplane::default()
            })),
            tls: None,
            dpdk: None,
        };
        let src = SourceText::new(Path::new(COMMAND_LINE), None);
        let mut checker = validate::Checker::new(src, PathBuf::new(), host);
        if let Some(h) = handover {
            checker = checker.handing_over(h);
        }
        match checker.config(&raw) {
            Some(c) => Ok(c),
            None => Err(ConfigError {
                errors: checker.errors,
            }),
        }
    }

    /// Every interface port of every bridge, in file order, for the
    /// runtime to check before it starts anything.
    pub fn interfaces(&self) -> Vec<InterfaceRef<'_>> {
        let mut out = Vec::new();
        for b in &self.bridges {
            for p in &b.ports {
                if let PortKind::Interface { name, backend } = &p.kind {
                    out.push(InterfaceRef {
                        bridge: &b.name,
                        port: p.number,
                        interface: name,
                        backend,
                    });
                }
            }
        }
        out
    }

    /// The bridge with this name.
    pub fn bridge(&self, name: &str) -> Option<&Bridge> {
        self.bridges.iter().find(|b| b.name == name)
    }

    /// Validates a model built or changed in code (by the management API)
    /// with the checks a file gets, on the model itself: nothing is
    /// written as TOML or parsed. Messages name [`MODEL`] and the field
    /// path as a file's would be (`bridges[1].ports[0].port`), with no
    /// line (there is no text). The returned model holds fresh warnings.
    ///
    /// Inline flows, groups and meters keep the [`Source`] they have in
    /// `self` (matched by bridge name, position and text).
    pub fn revalidate(&self, host: Host) -> Result<Config, ConfigError> {
        self.check(host, false)
    }

    /// [`revalidate`](Self::revalidate), with field paths by name
    /// (`bridges.br0.ports.eth3.backend`) when `by_name`, as transactions
    /// report them.
    pub(crate) fn check(&self, host: Host, by_name: bool) -> Result<Config, ConfigError> {
        let raw = raw::from_model(self);
        let src = SourceText::new(Path::new(MODEL), None);
        let mut checker = validate::Checker::new(src, PathBuf::new(), host);
        if by_name {
            checker = checker.by_name();
        }
        let Some(mut c) = checker.config(&raw) else {
            return Err(ConfigError {
                errors: checker.errors,
            });
        };
        for nb in &mut c.bridges {
            let Some(ob) = self.bridge(&nb.name) else {
                continue;
            };
            for (n, o) in nb.flows.iter_mut().zip(&ob.flows) {
                if n.source.inline && o.source.inline && n.text == o.text {
                    n.source = o.source.clone();
                }
            }
            for (n, o) in nb.groups.iter_mut().zip(&ob.groups) {
                if n.source.inline && o.source.inline && n.text == o.text {
                    n.source = o.source.clone();
                }
            }
            for (n, o) in nb.meters.iter_mut().zip(&ob.meters) {
                if n.source.inline && o.source.inline && n.text == o.text {
                    n.source = o.source.clone();
                }
            }
        }
        Ok(c)
    }

    /// The configuration as a TOML file that loads back to the same model
    /// (defaults written out; `*_file`s referred to by resolved path).
    pub fn to_toml_string(&self) -> String {
        ser::to_toml(self)
    }
}

#[cfg(test)]
mod tests;
