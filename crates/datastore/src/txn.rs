//! Transactions on the live model: what `fulmar ctl` (and every other
//! management protocol) asks for, as a list of [`Op`]s applied together.
//!
//! [`Config::apply`] applies the operations in order to a copy of the
//! model and then validates the whole result with the checks a file gets,
//! on the model itself (no TOML is written or parsed; see
//! [`Config::revalidate`]). An operation parses its values into the
//! model's types and refuses only what depends on the order of the
//! operations; ranges and checks between settings are the validation's,
//! so a transaction gets the file's messages. It is all or nothing: if any operation fails
//! (a missing bridge or port, a name already taken, a value that does not
//! parse) or the result does not validate, the error lists every finding
//! and there is no new model; `self` is never changed (it is borrowed
//! immutably). A dry run is simply a call to `apply` whose result is
//! discarded (or handed to [`diff`](crate::diff) to show what would
//! change).
//!
//! # Errors
//!
//! Every finding is a [`Diagnostic`] whose file is [`TRANSACTION`], whose
//! line is the 1-based position of the operation in the list, and whose
//! field is a path by name, `bridges.br0.ports.eth3.backend` (a patch port
//! by its number, controllers, flows and patch links by index). The
//! message starts with the operation in `fulmar ctl` words:
//!
//! ```text
//! <transaction>:2: bridges.br0.ports.eth3.backend: add-port br0 eth3 type=vhost: backend "vhost" is not valid (afpacket, afxdp, tap, memory, pcap or dpdk)
//! ```
//!
//! An operation that fails is skipped and the ones after it still run, so
//! one call reports every bad operation. Each operation records the typed
//! paths ([`FieldPath`]) of what it changed; each error of the validation
//! of the result carries the typed path of its field and of the fields
//! its message names (a duplicate's first use), and is given to the
//! operation that touched one of them (compared segment by segment,
//! bridges and ports by name; the most specific, the latest on a tie).
//! One that no operation touched (a flows file changed on disk) keeps no
//! line. Errors inside a flows, groups or meters file keep that file and
//! line.
//!
//! # Choices
//!
//! * Deleting a bridge ([`Op::DelBridge`]) also deletes the patch links
//!   that touch it and the patch ports at their other ends, since a patch
//!   port without its link is not valid. Deleting a patch port
//!   ([`Op::DelPort`]) does the same for its link and peer. Patch ports
//!   themselves are made only in the configuration file.
//! * Relative pcap paths are kept as given; the daemon resolves them
//!   against its own working directory, so clients should send absolute
//!   paths.
//! * The keys of one `set` apply in order: `set dataplane
//!   mode=rx-worker-tx rx_threads=2` works, the other order is refused
//!   (`rx_threads` is only for `rx-worker-tx`, as in the file).

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use ofp::consts::port_no;

use crate::error::{ConfigError, Diagnostic};
use crate::model::*;
use crate::path::FieldPath;
use crate::raw::IntOrString;
use crate::validate::parse_dpid;
use crate::{Config, MODEL};

mod commands;
#[cfg(test)]
mod tests;

pub use commands::{parse_ctl, CTL_COMMANDS};

/// Where the messages of [`Config::apply`] say they are; the line is the
/// operation's position (from 1).
pub const TRANSACTION: &str = "<transaction>";

/// A port named in an operation: by interface name or by OpenFlow number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PortRef {
    /// The port whose interface has this name.
    Name(String),
    /// The port with this OpenFlow number.
    Number(u32),
}

impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortRef::Name(n) => f.write_str(n),
            PortRef::Number(n) => write!(f, "{n}"),
        }
    }
}

impl PortRef {
    /// A word of the command line: digits are a port number, anything
    /// else an interface name.
    pub fn parse(word: &str) -> PortRef {
        match word.parse::<u32>() {
            Ok(n) if word.bytes().all(|b| b.is_ascii_digit()) => PortRef::Number(n),
            _ => PortRef::Name(word.to_string()),
        }
    }
}

/// One change of a transaction, as `ovs-vsctl` names them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `add-br NAME`: a bridge with no ports, no controllers, no flows and
    /// every default of the file.
    AddBridge {
        /// Its name (unique).
        name: String,
        /// Datapath id; default the lowest positive one no bridge has.
        dpid: Option<u64>,
        /// Default secure.
        fail_mode: Option<FailMode>,
    },
    /// `del-br NAME`: the bridge, its ports and controllers, and the patch
    /// links touching it with the patch ports at their other ends.
    DelBridge {
        /// The bridge.
        name: String,
    },
    /// `add-port BRIDGE INTERFACE [KEY=VALUE...]`.
    AddPort {
        /// The bridge.
        bridge: String,
        /// The interface (unique in the process).
        interface: String,
        /// OpenFlow number; default the lowest free one from 1.
        number: Option<u32>,
        /// As `ovs-vsctl ... -- set interface IF KEY=VALUE` would give:
        /// `type` (or `backend`) = afpacket | afxdp | tap | memory | pcap
        /// (default afpacket); for pcap `pcap_read`, `pcap_write`,
        /// `pcap_rate`; `ofport` (or `ofport_request`) = the number. An
        /// `options:` prefix is ignored. Any other key is an error.
        options: Vec<(String, String)>,
    },
    /// `del-port [BRIDGE] PORT`.
    DelPort {
        /// The bridge; `None`: the one whose port has this interface
        /// (then `port` must be a name).
        bridge: Option<String>,
        /// The port.
        port: PortRef,
    },
    /// `set-controller BRIDGE TARGET...`: replaces the bridge's
    /// controllers (`tcp:`, `tls:`, `ptcp:`, `ptls:` as
    /// [`ControllerTarget::parse_target`] takes them). A target the bridge
    /// had keeps its timers; new ones get the defaults.
    SetController {
        /// The bridge.
        bridge: String,
        /// The targets, in order.
        targets: Vec<String>,
    },
    /// `del-controller BRIDGE`: no controllers.
    DelController {
        /// The bridge.
        bridge: String,
    },
    /// `set-fail-mode BRIDGE secure|standalone`.
    SetFailMode {
        /// The bridge.
        bridge: String,
        /// The mode.
        mode: FailMode,
    },
    /// `del-fail-mode BRIDGE`: back to secure.
    DelFailMode {
        /// The bridge.
        bridge: String,
    },
    /// `set OBJECT KEY=VALUE`, the generic setting. Objects and keys:
    ///
    /// * `bridge:NAME`: `dpid` (as the file takes it; also
    ///   `other_config:datapath-id` as 16 hex digits), `fail_mode`,
    ///   `n_tables`, `miss_send_len`, `flow_table_capacity`;
    /// * `port:BRIDGE:PORT` (PORT a name or number) or `interface:NAME`:
    ///   the keys of [`Op::AddPort`]'s options (`type`, `pcap_read`,
    ///   `pcap_write`, `pcap_rate`, `ofport`);
    /// * `dataplane`: `mode`, `worker_threads`, `rx_threads`,
    ///   `tx_threads`, `rx_cores`, `worker_cores`, `tx_cores` (`2,3`;
    ///   empty: not pinned), `dispatch`, `dispatch_fallback`, the burst
    ///   sizes (`burst.rx_read` or `rx_read`, ...), `flush_idle_us`,
    ///   `max_batch_wait_us`, `rx_ring_size`, `tx_ring_size`.
    ///
    /// Values are checked with the file's ranges and messages. Setting
    /// `mode = run-to-completion` clears the RX/TX threads, their cores
    /// and the dispatch settings (the file ignores them in that mode).
    Set {
        /// `bridge:NAME`, `port:BRIDGE:PORT`, `interface:NAME` or
        /// `dataplane`.
        object: String,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
    },
    /// `set-qos BRIDGE PORT [type=T] [max_rate=BITS]
    /// [queue:ID=min_rate:BITS,max_rate:BITS,priority:N]...` (`qos`
    /// `Some`), or `clear-qos BRIDGE PORT` (`None`): the port's egress
    /// queues, replaced whole.
    SetQos {
        /// The bridge.
        bridge: String,
        /// The port.
        port: PortRef,
        /// The queues; `None`: none.
        qos: Option<PortQos>,
    },
}

impl fmt::Display for Op {
    /// The operation in `fulmar ctl` words.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::AddBridge {
                name,
                dpid,
                fail_mode,
            } => {
                write!(f, "add-br {name}")?;
                opt(f, "dpid", dpid.map(|d| format!("{d:#x}")))?;
                opt(f, "fail_mode", fail_mode.map(|m| m.as_str()))
            }
            Op::DelBridge { name } => write!(f, "del-br {name}"),
            Op::AddPort {
                bridge,
                interface,
                number,
                options,
            } => {
                write!(f, "add-port {bridge} {interface}")?;
                opt(f, "ofport", *number)?;
                for (k, v) in options {
                    write!(f, " {k}={v}")?;
                }
                Ok(())
            }
            Op::DelPort { bridge, port } => match bridge {
                Some(b) => write!(f, "del-port {b} {port}"),
                None => write!(f, "del-port {port}"),
            },
            Op::SetController { bridge, targets } => {
                write!(f, "set-controller {bridge}")?;
                for t in targets {
                    write!(f, " {t}")?;
                }
                Ok(())
            }
            Op::DelController { bridge } => write!(f, "del-controller {bridge}"),
            Op::SetFailMode { bridge, mode } => {
                write!(f, "set-fail-mode {bridge} {}", mode.as_str())
            }
            Op::DelFailMode { bridge } => write!(f, "del-fail-mode {bridge}"),
            Op::Set { object, key, value } => write!(f, "set {object} {key}={value}"),
            Op::SetQos { bridge, port, qos } => match qos {
                None => write!(f, "clear-qos {bridge} {port}"),
                Some(q) => {
                    write!(f, "set-qos {bridge} {port} type={}", q.kind.as_str())?;
                    if q.max_rate != 0 {
                        write!(f, " max_rate={}", q.max_rate)?;
                    }
                    for c in &q.queues {
                        write!(f, " queue:{}=priority:{}", c.id, c.priority)?;
                        if c.min_rate != 0 {
                            write!(f, ",min_rate:{}", c.min_rate)?;
                        }
                        if c.max_rate != 0 {
                            write!(f, ",max_rate:{}", c.max_rate)?;
                        }
                    }
                    Ok(())
                }
            },
        }
    }
}

/// Writes ` key=value` for a setting an operation names, nothing for one it
/// leaves out.
fn opt(f: &mut fmt::Formatter<'_>, key: &str, value: Option<impl fmt::Display>) -> fmt::Result {
    match value {
        Some(v) => write!(f, " {key}={v}"),
        None => Ok(()),
    }
}

/// A failed operation: (field path, message) for each finding.
type Fail = Vec<(FieldPath, String)>;

fn fail(field: impl Into<FieldPath>, message: impl Into<String>) -> Fail {
    vec![(field.into(), message.into())]
}

/// Bridge `name`, by name (an operation knows no positions).
fn bridge_at(name: &str) -> FieldPath {
    FieldPath::bridge(None, name)
}

/// A port of bridge `bridge`, by its label (interface, or number).
fn port_at(bridge: impl fmt::Display, label: impl fmt::Display) -> FieldPath {
    bridge_at(&bridge.to_string()).port(None, label.to_string())
}

impl Config {
    /// Applies `ops` in order to a copy of this model and validates the
    /// result whole against `host` (see the module comment). Returns the
    /// new model (with fresh warnings), or every error found; `self` is
    /// not changed either way. A dry run is this call with the result
    /// discarded.
    pub fn apply(&self, ops: &[Op], host: Host) -> Result<Config, ConfigError> {
        let mut cfg = self.clone();
        let mut errors = Vec::new();
        // (op index, path by name of what it changed)
        let mut touched: Vec<(usize, FieldPath)> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let mut next = cfg.clone();
            let mut paths = Vec::new();
            match apply_one(&mut next, op, &mut paths) {
                Ok(()) => {
                    cfg = next;
                    touched.extend(paths.into_iter().map(|p| (i, p)));
                }
                Err(fails) => {
                    for (field, message) in fails {
                        errors.push(op_diag(i, op, field, &message));
                    }
                }
            }
        }
        match cfg.check(host, true) {
            Ok(new) if errors.is_empty() => Ok(new),
            Ok(_) => Err(ConfigError { errors }),
            Err(e) => {
                for d in e.errors {
                    errors.push(attribute(ops, &touched, d));
                }
                Err(ConfigError { errors })
            }
        }
    }
}

fn op_diag(i: usize, op: &Op, path: FieldPath, message: &str) -> Diagnostic {
    Diagnostic {
        file: PathBuf::from(TRANSACTION),
        line: Some(i + 1),
        column: None,
        field: path.render(true),
        message: format!("{op}: {message}"),
        path,
        related: Vec::new(),
    }
}

/// A validation error of the result, given to the operation that touched
/// the field it is about or one its message names (the most specific
/// such operation, the latest on a tie), by comparing typed paths.
fn attribute(ops: &[Op], touched: &[(usize, FieldPath)], d: Diagnostic) -> Diagnostic {
    if d.file.as_path() != std::path::Path::new(MODEL) {
        // In a flows, groups or meters file: that file and line stand.
        return d;
    }
    let mut best: Option<(usize, usize)> = None; // (specificity, op)
    for (i, t) in touched {
        if std::iter::once(&d.path)
            .chain(&d.related)
            .any(|r| r.related(t))
        {
            let score = t.segs().len();
            if best.is_none_or(|(s, _)| score >= s) {
                best = Some((score, *i));
            }
        }
    }
    if best.is_none() && ops.len() == 1 {
        best = Some((0, 0));
    }
    match best.and_then(|(_, i)| ops.get(i).map(|op| (i, op))) {
        Some((i, op)) => Diagnostic {
            related: d.related,
            ..op_diag(i, op, d.path, &d.message)
        },
        None => Diagnostic {
            file: PathBuf::from(TRANSACTION),
            line: None,
            column: None,
            ..d
        },
    }
}

/// How a port is named in paths: its interface, or a patch port's number.
fn port_label(p: &Port) -> String {
    match &p.kind {
        PortKind::Interface { name, .. } => name.clone(),
        PortKind::Patch { .. } => p.number.to_string(),
    }
}

fn bridge_mut<'a>(cfg: &'a mut Config, name: &str) -> Result<&'a mut Bridge, Fail> {
    cfg.bridges
        .iter_mut()
        .find(|b| b.name == name)
        .ok_or_else(|| fail(bridge_at(name), format!("there is no bridge {name:?}")))
}

/// The index of the port `r` names in `b`.
fn find_port(b: &Bridge, r: &PortRef) -> Option<usize> {
    b.ports.iter().position(|p| match (r, &p.kind) {
        (PortRef::Number(n), _) => p.number == *n,
        (PortRef::Name(n), PortKind::Interface { name, .. }) => name == n,
        (PortRef::Name(_), PortKind::Patch { .. }) => false,
    })
}

/// The bridge and port of an interface, anywhere.
fn find_interface<'a>(cfg: &'a Config, iface: &str) -> Option<(&'a Bridge, &'a Port)> {
    cfg.bridges.iter().find_map(|b| {
        b.ports
            .iter()
            .find(|p| matches!(&p.kind, PortKind::Interface { name, .. } if name == iface))
            .map(|p| (b, p))
    })
}

fn apply_one(cfg: &mut Config, op: &Op, touched: &mut Vec<FieldPath>) -> Result<(), Fail> {
    match op {
        Op::AddBridge {
            name,
            dpid,
            fail_mode,
        } => {
            let field = bridge_at(name);
            if cfg.bridge(name).is_some() {
                return Err(fail(
                    field.at("name"),
                    format!("bridge {name:?} already exists"),
                ));
            }
            let used: HashSet<u64> = cfg.bridges.iter().map(|b| b.dpid).collect();
            let dpid = match dpid {
                Some(d) => {
                    if let Some(b) = cfg.bridges.iter().find(|b| b.dpid == *d) {
                        return Err(fail(
                            field.at("dpid"),
                            format!("dpid {d:#018x} is already used by bridge {:?}", b.name),
                        ));
                    }
                    *d
                }
                None => (1..).find(|d| !used.contains(d)).unwrap_or(u64::MAX),
            };
            let mut b = new_bridge(name, dpid, fail_mode.unwrap_or_default());
            // As Open vSwitch's add-br: the bridge comes with its local port.
            b.local_port = true;
            cfg.bridges.push(b);
            touched.push(field);
            Ok(())
        }
        Op::DelBridge { name } => {
            let Some(bi) = cfg.bridges.iter().position(|b| &b.name == name) else {
                return Err(fail(
                    bridge_at(name),
                    format!("there is no bridge {name:?}"),
                ));
            };
            let b = cfg.bridges.remove(bi);
            touched.push(bridge_at(name));
            for p in &b.ports {
                if let PortKind::Patch { .. } = p.kind {
                    unlink(cfg, name, p.number, touched);
                }
            }
            Ok(())
        }
        Op::AddPort {
            bridge,
            interface,
            number,
            options,
        } => {
            let field = port_at(bridge, interface);
            bridge_mut(cfg, bridge)?;
            if let Some((b, p)) = find_interface(cfg, interface) {
                return Err(fail(
                    field.at("interface"),
                    format!(
                        "interface {interface:?} is already port {} of bridge {:?}",
                        p.number, b.name
                    ),
                ));
            }
            let mut opts = PortOptions::parse(&field, options)?;
            if let (Some(n), Some(o)) = (number, opts.number) {
                if *n != o {
                    return Err(fail(
                        field.at("port"),
                        format!("the port number is given twice ({n} and ofport={o})"),
                    ));
                }
            }
            opts.number = opts.number.or(*number);
            let mut backend = Backend::AfPacket;
            opts.apply_to(&field, &mut backend)?;
            if let Backend::Dpdk(d) = &mut backend {
                if d.devargs.is_empty() {
                    d.devargs = interface.clone();
                }
            }
            let b = bridge_mut(cfg, bridge)?;
            let number = match opts.number {
                Some(n) => {
                    check_free(b, n, &field)?;
                    n
                }
                None => (1..=port_no::MAX)
                    .find(|n| b.port(*n).is_none())
                    .unwrap_or(port_no::MAX),
            };
            let mut vlan = VlanSettings::default();
            opts.apply_vlan(&mut vlan);
            b.ports.push(Port {
                number,
                kind: PortKind::Interface {
                    name: interface.clone(),
                    backend,
                },
                vlan,
            });
            touched.push(field);
            Ok(())
        }
        Op::SetQos { bridge, port, qos } => {
            let b = bridge_mut(cfg, bridge)?;
            let Some(pi) = find_port(b, port) else {
                return Err(fail(
                    port_at(bridge, port),
                    format!("bridge {bridge:?} has no port {port}"),
                ));
            };
            let number = b.ports.get(pi).map_or(0, |p| p.number);
            let field = port_at(bridge, port).at("qos");
            match qos {
                Some(q) => {
                    q.check().map_err(|m| fail(field.clone(), m))?;
                    b.qos.insert(number, q.clone());
                }
                None => {
                    b.qos.remove(&number);
                }
            }
            touched.push(field);
            Ok(())
        }
        Op::DelPort { bridge, port } => {
            let bridge = match (bridge, port) {
                (Some(b), _) => b.clone(),
                (None, PortRef::Name(n)) => match find_interface(cfg, n) {
                    Some((b, _)) => b.name.clone(),
                    None => {
                        return Err(fail(
                            FieldPath::root().at("ports").key(n.to_string()),
                            format!("no bridge has a port {n:?}"),
                        ))
                    }
                },
                (None, PortRef::Number(n)) => {
                    return Err(fail(
                        FieldPath::root().at("ports").key(n.to_string()),
                        format!("port number {n} needs its bridge (del-port BRIDGE {n})"),
                    ))
                }
            };
            let b = bridge_mut(cfg, &bridge)?;
            let Some(pi) = find_port(b, port) else {
                return Err(fail(
                    port_at(&bridge, port),
                    format!("bridge {bridge:?} has no port {port}"),
                ));
            };
            let p = b.ports.remove(pi);
            b.qos.remove(&p.number);
            touched.push(port_at(&bridge, port_label(&p)));
            if let PortKind::Patch { .. } = p.kind {
                unlink(cfg, &bridge, p.number, touched);
            }
            Ok(())
        }
        Op::SetController { bridge, targets } => {
            let b = bridge_mut(cfg, bridge)?;
            let mut fails = Vec::new();
            let mut controllers = Vec::new();
            for (i, t) in targets.iter().enumerate() {
                match ControllerTarget::parse_target(t) {
                    Ok(target) => controllers.push(
                        b.controllers
                            .iter()
                            .find(|c| c.target == target)
                            .cloned()
                            .unwrap_or_else(|| Controller::new(target)),
                    ),
                    Err(m) => fails.push((bridge_at(bridge).at("controllers").index(i), m)),
                }
            }
            if !fails.is_empty() {
                return Err(fails);
            }
            b.controllers = controllers;
            touched.push(bridge_at(bridge).at("controllers"));
            Ok(())
        }
        Op::DelController { bridge } => {
            bridge_mut(cfg, bridge)?.controllers.clear();
            touched.push(bridge_at(bridge).at("controllers"));
            Ok(())
        }
        Op::SetFailMode { bridge, mode } => {
            bridge_mut(cfg, bridge)?.fail_mode = *mode;
            touched.push(bridge_at(bridge).at("fail_mode"));
            Ok(())
        }
        Op::DelFailMode { bridge } => {
            bridge_mut(cfg, bridge)?.fail_mode = FailMode::Secure;
            touched.push(bridge_at(bridge).at("fail_mode"));
            Ok(())
        }
        Op::Set { object, key, value } => set(cfg, object, key, unquote(value), touched),
    }
}

/// A bridge as `[[bridges]] name = NAME` gives it.
fn new_bridge(name: &str, dpid: u64, fail_mode: FailMode) -> Bridge {
    Bridge {
        name: name.to_string(),
        dpid,
        fail_mode,
        n_tables: 254,
        miss_send_len: 128,
        flow_table_capacity: 16_777_216,
        flow_memory_limit_mib: 0,
        ports: Vec::new(),
        controllers: Vec::new(),
        flows: Vec::new(),
        groups: Vec::new(),
        meters: Vec::new(),
        flows_file: None,
        groups_file: None,
        meters_file: None,
        local_port: false,
        qos: Default::default(),
    }
}

/// Removes the patch link at `bridge`:`port` and the port at its other
/// end (the port itself is already gone).
fn unlink(cfg: &mut Config, bridge: &str, port: u32, touched: &mut Vec<FieldPath>) {
    let end = (bridge.to_string(), port);
    let mut peers = Vec::new();
    cfg.patch_links.retain(|l| {
        if l.a == end {
            peers.push(l.b.clone());
            false
        } else if l.b == end {
            peers.push(l.a.clone());
            false
        } else {
            true
        }
    });
    if !peers.is_empty() {
        touched.push(FieldPath::root().at("patch_links"));
    }
    for (pb, pn) in peers {
        if let Some(b) = cfg.bridges.iter_mut().find(|b| b.name == pb) {
            b.ports.retain(|p| p.number != pn);
            touched.push(port_at(pb, pn));
        }
    }
}

fn check_free(b: &Bridge, n: u32, field: &FieldPath) -> Result<(), Fail> {
    let max = port_no::MAX;
    if n == 0 || n > max {
        return Err(fail(
            field.at("port"),
            format!("port number {n} is not valid (1..={max})"),
        ));
    }
    if let Some(p) = b.port(n) {
        return Err(fail(
            field.at("port"),
            format!(
                "port number {n} is already used by port {} of bridge {:?}",
                port_label(p),
                b.name
            ),
        ));
    }
    Ok(())
}

/// `"x"` → `x`: one level of double quotes, as `ovs-vsctl` takes them.
fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v)
}

/// The keys an interface port takes, in messages.
const PORT_KEYS: &str =
    "type, pcap_read, pcap_write, pcap_rate, dpdk_devargs, dpdk_rx_queues, remote_ip, local_ip, key, dst_port, ofport, tag, trunks, vlan_mode";

/// The options of [`Op::AddPort`] (or one `set port` key), parsed.
#[derive(Default)]
struct PortOptions {
    kind: Option<String>,
    pcap_read: Option<PathBuf>,
    pcap_write: Option<PathBuf>,
    pcap_rate: Option<PcapRate>,
    dpdk_devargs: Option<String>,
    dpdk_rx_queues: Option<u16>,
    number: Option<u32>,
    /// `tag` (Some(None): cleared with an empty value).
    tag: Option<Option<u16>>,
    /// `trunks` (Some(empty): cleared).
    trunks: Option<Vec<u16>>,
    /// `vlan_mode` (Some(None): cleared).
    vlan_mode: Option<Option<VlanMode>>,
    remote_ip: Option<std::net::Ipv4Addr>,
    local_ip: Option<std::net::Ipv4Addr>,
    /// As written; checked against the kind in `apply_to`.
    key: Option<String>,
    dst_port: Option<u16>,
}

impl PortOptions {
    /// Parses every option; errors name the key under `field`.
    fn parse(field: &FieldPath, options: &[(String, String)]) -> Result<PortOptions, Fail> {
        let mut o = PortOptions::default();
        let mut fails = Vec::new();
        for (k, v) in options {
            if let Err(mut f) = o.set(field, k, unquote(v)) {
                fails.append(&mut f);
            }
        }
        if fails.is_empty() {
            Ok(o)
        } else {
            Err(fails)
        }
    }

    fn set(&mut self, field: &FieldPath, key: &str, value: &str) -> Result<(), Fail> {
        let key = key.strip_prefix("options:").unwrap_or(key);
        match key {
            "type" | "backend" => match value {
                "afpacket" | "afxdp" | "tap" | "memory" | "pcap" | "dpdk" | "vxlan" | "gre" => {
                    self.kind = Some(value.to_string())
                }
                "patch" => {
                    return Err(fail(
                        field.at("backend"),
                        "patch ports are made in the configuration file ([[patch_links]])",
                    ))
                }
                other => {
                    return Err(fail(
                        field.at("backend"),
                        format!(
                            "backend {other:?} is not valid (afpacket, afxdp, tap, memory, pcap, dpdk, vxlan or gre)"
                        ),
                    ))
                }
            },
            // `options:dpdk-devargs` and `options:n_rxq` as ovs-vsctl spells them.
            "dpdk_devargs" | "dpdk-devargs" => {
                let v = value.trim();
                if v.is_empty() || v.starts_with(',') || v.contains(char::is_control) {
                    return Err(fail(
                        field.at("dpdk_devargs"),
                        format!("dpdk_devargs {value:?} is not a device (a vdev like \"net_pcap0,rx_pcap=in.pcap\", or a PCI address)"),
                    ));
                }
                self.dpdk_devargs = Some(v.to_string());
            }
            "dpdk_rx_queues" | "n_rxq" => {
                let f = field.at("dpdk_rx_queues");
                self.dpdk_rx_queues = Some(int_in(&f, "dpdk_rx_queues", value, 1..=1024)? as u16);
            }
            "pcap_read" | "pcap_write" => {
                if value.is_empty() {
                    return Err(fail(field.at(key), "the path is empty"));
                }
                let p = Some(PathBuf::from(value));
                if key == "pcap_read" {
                    self.pcap_read = p;
                } else {
                    self.pcap_write = p;
                }
            }
            "pcap_rate" => {
                let f = field.at("pcap_rate");
                self.pcap_rate = Some(if value == "max" {
                    PcapRate::Max
                } else {
                    match value.parse::<i64>() {
                        Ok(n) if (1..=1_000_000_000).contains(&n) => PcapRate::Pps(n as u64),
                        Ok(n) => return Err(fail(f, format!("pcap_rate {n} is not valid (1..=1000000000 packets per second, or \"max\")"))),
                        Err(_) => return Err(fail(f, format!("pcap_rate {value:?} is not valid (packets per second, or \"max\")"))),
                    }
                });
            }
            "tag" => {
                let f = field.at("tag");
                self.tag = Some(match cleared(value) {
                    true => None,
                    false => Some(int_in(&f, "tag", value, 0..=i64::from(MAX_VID))? as u16),
                });
            }
            "trunks" => {
                let f = field.at("trunks");
                let list = value.trim_start_matches('[').trim_end_matches(']');
                let mut t = list
                    .split(',')
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(|w| int_in(&f, "VLAN id", w, 0..=i64::from(MAX_VID)).map(|n| n as u16))
                    .collect::<Result<Vec<u16>, Fail>>()?;
                t.sort_unstable();
                t.dedup();
                self.trunks = Some(t);
            }
            "vlan_mode" => {
                self.vlan_mode = Some(match cleared(value) {
                    true => None,
                    false => Some(
                        value
                            .parse::<VlanMode>()
                            .map_err(|m| fail(field.at("vlan_mode"), m))?,
                    ),
                });
            }
            "remote_ip" | "local_ip" => {
                let remote = key == "remote_ip";
                let ip = crate::tunnel::parse_tunnel_ip(key, value, remote)
                    .map_err(|m| fail(field.at(key), m))?;
                if remote {
                    self.remote_ip = Some(ip);
                } else {
                    self.local_ip = Some(ip);
                }
            }
            "key" => self.key = Some(value.to_string()),
            "dst_port" => {
                let f = field.at("dst_port");
                self.dst_port = Some(int_in(&f, "dst_port", value, 1..=65535)? as u16);
            }
            "ofport" | "ofport_request" => {
                let max = port_no::MAX;
                match value.parse::<i64>() {
                    Ok(n) if (1..=i64::from(max)).contains(&n) => self.number = Some(n as u32),
                    Ok(n) => {
                        return Err(fail(
                            field.at("port"),
                            format!("port number {n} is not valid (1..={max})"),
                        ))
                    }
                    Err(_) => {
                        return Err(fail(
                            field.at("port"),
                            format!("port number {value:?} is not an integer"),
                        ))
                    }
                }
            }
            other => {
                return Err(fail(
                    field.at(other),
                    format!("unknown key {other:?} for a port (expected {PORT_KEYS})"),
                ))
            }
        }
        Ok(())
    }

    /// Whether any VLAN key was given.
    fn has_vlan(&self) -> bool {
        self.tag.is_some() || self.trunks.is_some() || self.vlan_mode.is_some()
    }

    /// Whether only VLAN keys were given.
    fn only_vlan(&self) -> bool {
        self.has_vlan()
            && self.kind.is_none()
            && self.pcap_read.is_none()
            && self.pcap_write.is_none()
            && self.pcap_rate.is_none()
            && self.dpdk_devargs.is_none()
            && self.dpdk_rx_queues.is_none()
            && self.number.is_none()
    }

    /// The VLAN settings these options make of `v` (checked whole when the
    /// transaction's model is validated, so `tag` and `vlan_mode` may be
    /// set by two operations of one transaction in either order).
    fn apply_vlan(&self, v: &mut VlanSettings) {
        if let Some(t) = self.tag {
            v.tag = t;
        }
        if let Some(t) = &self.trunks {
            v.trunks = t.clone();
        }
        if let Some(m) = self.vlan_mode {
            v.mode = m;
        }
    }

    /// The backend these options make of `backend`.
    fn apply_to(&self, field: &FieldPath, backend: &mut Backend) -> Result<(), Fail> {
        if let Some(k) = &self.kind {
            let same = backend.kind_str() == k;
            if !same {
                *backend = match k.as_str() {
                    "afxdp" => Backend::AfXdp,
                    "tap" => Backend::Tap,
                    "memory" => Backend::Memory,
                    "pcap" => Backend::Pcap(PcapBackend::default()),
                    "dpdk" => Backend::Dpdk(DpdkBackend::new("")),
                    "vxlan" => Backend::Vxlan(TunnelBackend {
                        dst_port: VXLAN_DEFAULT_PORT,
                        ..TunnelBackend::default()
                    }),
                    "gre" => Backend::Gre(TunnelBackend::default()),
                    _ => Backend::AfPacket,
                };
            }
        }
        let tunnel_given = [
            ("remote_ip", self.remote_ip.is_some()),
            ("local_ip", self.local_ip.is_some()),
            ("key", self.key.is_some()),
            ("dst_port", self.dst_port.is_some()),
        ];
        let vxlan = matches!(backend, Backend::Vxlan(_));
        match backend {
            Backend::Vxlan(t) | Backend::Gre(t) => {
                if let Some(k) = &self.key {
                    let k = crate::tunnel::parse_tunnel_key(vxlan, k)
                        .map_err(|m| fail(field.at("key"), m))?;
                    (t.key, t.key_flow) = k.to_model();
                }
                if let Some(d) = self.dst_port {
                    if !vxlan {
                        return Err(fail(
                            field.at("dst_port"),
                            "dst_port is only for type=vxlan",
                        ));
                    }
                    t.dst_port = d;
                }
                if self.remote_ip.is_some() {
                    t.remote_ip = self.remote_ip;
                }
                if self.local_ip.is_some() {
                    t.local_ip = self.local_ip;
                }
            }
            _ => only_for(field, &tunnel_given, "type=vxlan or type=gre")?,
        }
        let given = [
            ("pcap_read", self.pcap_read.is_some()),
            ("pcap_write", self.pcap_write.is_some()),
            ("pcap_rate", self.pcap_rate.is_some()),
        ];
        let dpdk_given = [
            ("dpdk_devargs", self.dpdk_devargs.is_some()),
            ("dpdk_rx_queues", self.dpdk_rx_queues.is_some()),
        ];
        if !matches!(backend, Backend::Dpdk(_)) {
            only_for(field, &dpdk_given, "type=dpdk")?;
        }
        match backend {
            Backend::Dpdk(d) => {
                if let Some(a) = &self.dpdk_devargs {
                    d.devargs = a.clone();
                }
                if let Some(q) = self.dpdk_rx_queues {
                    d.rx_queues = Some(q);
                }
                only_for(field, &given, "type=pcap")
            }
            Backend::Pcap(pc) => {
                if let Some(r) = &self.pcap_read {
                    pc.read = Some(r.clone());
                }
                if let Some(w) = &self.pcap_write {
                    pc.write = Some(w.clone());
                }
                if let Some(r) = self.pcap_rate {
                    pc.rate = r;
                }
                Ok(())
            }
            _ => only_for(field, &given, "type=pcap"),
        }
    }
}

/// Refuses each of the `given` keys (those whose flag is set) as being
/// only for `what` (`type=pcap`).
fn only_for(field: &FieldPath, given: &[(&str, bool)], what: &str) -> Result<(), Fail> {
    let fails: Fail = given
        .iter()
        .filter(|(_, g)| *g)
        .map(|(k, _)| (field.at(k), format!("{k} is only for {what}")))
        .collect();
    if fails.is_empty() {
        Ok(())
    } else {
        Err(fails)
    }
}

/// Whether a value clears a setting: empty, or `[]` as `ovs-vsctl`
/// writes an empty set.
fn cleared(value: &str) -> bool {
    matches!(value.trim(), "" | "[]")
}

/// An integer value in `range`, with the file's message.
fn int_in(
    field: &FieldPath,
    what: &str,
    value: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<i64, Fail> {
    match value.parse::<i64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        Ok(n) => Err(fail(
            field,
            format!(
                "{what} {n} is not valid ({}..={})",
                range.start(),
                range.end()
            ),
        )),
        Err(_) => Err(fail(field, format!("{what} {value:?} is not an integer"))),
    }
}

fn set(
    cfg: &mut Config,
    object: &str,
    key: &str,
    value: &str,
    touched: &mut Vec<FieldPath>,
) -> Result<(), Fail> {
    if object == "dataplane" {
        set_dataplane(&mut cfg.dataplane, key, value)?;
        touched.push(FieldPath::root().at("dataplane"));
        return Ok(());
    }
    if let Some(name) = object.strip_prefix("bridge:") {
        let field = bridge_at(name);
        let others: Vec<(u64, String)> = cfg
            .bridges
            .iter()
            .filter(|b| b.name != name)
            .map(|b| (b.dpid, b.name.clone()))
            .collect();
        let b = bridge_mut(cfg, name)?;
        set_bridge(b, &field, key, value, &others)?;
        touched.push(field);
        return Ok(());
    }
    let (bridge, port) = if let Some(rest) = object.strip_prefix("port:") {
        match rest.split_once(':') {
            Some((b, p)) => (b.to_string(), PortRef::parse(p)),
            None => return Err(bad_object(object)),
        }
    } else if let Some(iface) = object.strip_prefix("interface:") {
        match find_interface(cfg, iface) {
            Some((b, _)) => (b.name.clone(), PortRef::Name(iface.to_string())),
            None => {
                return Err(fail(
                    FieldPath::root().at("ports").key(iface),
                    format!("no bridge has a port {iface:?}"),
                ))
            }
        }
    } else {
        return Err(bad_object(object));
    };
    let b = bridge_mut(cfg, &bridge)?;
    let Some(pi) = find_port(b, &port) else {
        return Err(fail(
            port_at(&bridge, &port),
            format!("bridge {bridge:?} has no port {port}"),
        ));
    };
    let label = port_label(&b.ports[pi]);
    let field = port_at(&bridge, &label);
    let mut opts = PortOptions::default();
    opts.set(&field, key, value)?;
    if opts.only_vlan() {
        opts.apply_vlan(&mut b.ports[pi].vlan);
        touched.push(field);
        return Ok(());
    }
    if let Some(n) = opts.number {
        let old = b.ports[pi].number;
        if n != old {
            check_free(b, n, &field)?;
            // The port's egress queues are kept by its number: they move
            // with it.
            if let Some(q) = b.qos.remove(&old) {
                b.qos.insert(n, q);
            }
        }
        b.ports[pi].number = n;
    }
    match &mut b.ports[pi].kind {
        PortKind::Interface { backend, .. } => opts.apply_to(&field, backend)?,
        PortKind::Patch { .. } if opts.number.is_none() => {
            return Err(fail(
                field,
                format!("port {label} is a patch port; only its ofport can be set here"),
            ))
        }
        PortKind::Patch { .. } => {
            return Err(fail(
                field.at("port"),
                "a patch port is renumbered in the configuration file ([[patch_links]])",
            ))
        }
    }
    touched.push(field);
    Ok(())
}

fn bad_object(object: &str) -> Fail {
    fail(
        FieldPath::root().key(object),
        format!(
            "unknown object {object:?} (bridge:NAME, port:BRIDGE:PORT, interface:NAME or dataplane)"
        ),
    )
}

const BRIDGE_KEYS: &str =
    "dpid, fail_mode, n_tables, miss_send_len, flow_table_capacity, flow_memory_limit_mib, local_port";

fn set_bridge(
    b: &mut Bridge,
    field: &FieldPath,
    key: &str,
    value: &str,
    others: &[(u64, String)],
) -> Result<(), Fail> {
    let f = field.at(key);
    match key {
        "dpid" | "other_config:datapath-id" | "other-config:datapath-id" => {
            let f = field.at("dpid");
            let dpid = if key == "dpid" {
                parse_dpid(&IntOrString::Str(value.to_string())).map_err(|m| fail(&f, m))?
            } else if value.len() == 16 && value.bytes().all(|c| c.is_ascii_hexdigit()) {
                u64::from_str_radix(value, 16).map_err(|e| fail(&f, e.to_string()))?
            } else {
                return Err(fail(
                    &f,
                    format!("datapath-id {value:?} is not valid (exactly 16 hex digits)"),
                ));
            };
            if let Some((_, other)) = others.iter().find(|(d, _)| *d == dpid) {
                return Err(fail(
                    f,
                    format!("dpid {dpid:#018x} is already used by bridge {other:?}"),
                ));
            }
            b.dpid = dpid;
        }
        "fail_mode" | "fail-mode" => {
            b.fail_mode = parse_fail_mode(value).map_err(|m| fail(field.at("fail_mode"), m))?
        }
        "n_tables" => b.n_tables = int_in(&f, "n_tables", value, 1..=254)? as u8,
        "miss_send_len" => b.miss_send_len = int_in(&f, "miss_send_len", value, 0..=65535)? as u16,
        "flow_table_capacity" => {
            b.flow_table_capacity = int_in(&f, "flow_table_capacity", value, 1..=16_777_216)? as u32
        }
        "flow_memory_limit_mib" => {
            b.flow_memory_limit_mib =
                int_in(&f, "flow_memory_limit_mib", value, 0..=16_777_216)? as u32
        }
        "local_port" => {
            b.local_port = match value {
                "true" => true,
                "false" => false,
                v => {
                    return Err(fail(
                        f,
                        format!("local_port {v:?} is not valid (true or false)"),
                    ))
                }
            }
        }
        other => {
            return Err(fail(
                f,
                format!("unknown key {other:?} for a bridge (expected {BRIDGE_KEYS})"),
            ))
        }
    }
    Ok(())
}

/// `secure` or `standalone`, with the file's message (the type's one
/// spelling).
fn parse_fail_mode(v: &str) -> Result<FailMode, String> {
    v.parse()
}

const DATAPLANE_KEYS: &str = "mode, worker_threads, rx_threads, tx_threads, rx_cores, worker_cores, tx_cores, dispatch, dispatch_fallback, burst.rx_read, burst.rx_write, burst.worker_read, burst.worker_write, burst.tx_read, burst.tx_write, flush_idle_us, max_batch_wait_us, rx_ring_size, tx_ring_size, max_queue_delay_us, bulk_reply_nice";

fn dispatch_key(field: &FieldPath, v: &str) -> Result<DispatchKey, Fail> {
    v.parse().map_err(|m| fail(field, m))
}

/// A number as the field's type holds it. Its range, and how it goes
/// with the other settings, is checked with the whole model, as a file's
/// is (`validate::dataplane`), so the messages are the file's.
fn num<T: TryFrom<i64>>(field: &FieldPath, what: &str, value: &str) -> Result<T, Fail> {
    match value.parse::<i64>() {
        Ok(n) => T::try_from(n).map_err(|_| fail(field, format!("{what} {n} is out of range"))),
        Err(_) => Err(fail(field, format!("{what} {value:?} is not an integer"))),
    }
}

/// One `set dataplane KEY=VALUE`: the value parsed into the model. What
/// depends on the order of the keys (a setting only for `rx-worker-tx`
/// given before the mode) is refused here; every range and every check
/// between settings is the whole model's ([`Config::apply`] validates it).
fn set_dataplane(d: &mut Dataplane, key: &str, value: &str) -> Result<(), Fail> {
    let key = key.strip_prefix("burst_").map_or(key, |k| k);
    let f = FieldPath::root().at("dataplane").key(key);
    let piped = d.mode == ThreadMode::RxWorkerTx;
    let only_piped = |name: &str| {
        fail(
            FieldPath::root().at("dataplane").key(name),
            format!("{name} is only for mode = \"rx-worker-tx\""),
        )
    };
    match key {
        "mode" => match value.parse().map_err(|m| fail(&f, m))? {
            ThreadMode::RunToCompletion => {
                *d = Dataplane {
                    mode: ThreadMode::RunToCompletion,
                    rx_threads: 0,
                    tx_threads: 0,
                    rx_cores: None,
                    tx_cores: None,
                    dispatch: Dispatch::default(),
                    ..d.clone()
                }
            }
            ThreadMode::RxWorkerTx => {
                d.mode = ThreadMode::RxWorkerTx;
                d.rx_threads = d.rx_threads.max(1);
                d.tx_threads = d.tx_threads.max(1);
            }
        },
        "worker_threads" => d.worker_threads = num(&f, key, value)?,
        "rx_threads" | "tx_threads" => {
            if !piped {
                return Err(only_piped(key));
            }
            let n = num(&f, key, value)?;
            if key == "rx_threads" {
                d.rx_threads = n;
            } else {
                d.tx_threads = n;
            }
        }
        "rx_cores" | "worker_cores" | "tx_cores" => {
            if !piped && key != "worker_cores" {
                return Err(only_piped(key));
            }
            let list = value.trim().trim_start_matches('[').trim_end_matches(']');
            let cores = if list.trim().is_empty() {
                None
            } else {
                let mut out = Vec::new();
                for c in list.split(',') {
                    let c = c.trim();
                    match c.parse::<usize>() {
                        Ok(n) => out.push(n),
                        Err(_) => return Err(fail(f, format!("core {c:?} is not a core number"))),
                    }
                }
                Some(out)
            };
            match key {
                "rx_cores" => d.rx_cores = cores,
                "worker_cores" => d.worker_cores = cores,
                _ => d.tx_cores = cores,
            }
        }
        "dispatch" => {
            if !piped {
                return Err(only_piped(key));
            }
            d.dispatch.key = dispatch_key(&f, value)?;
            if d.dispatch.key != DispatchKey::PriorityClass {
                d.dispatch.rules.clear();
                d.dispatch.fallback = DispatchKey::FiveTuple;
            }
        }
        "dispatch_fallback" => {
            if d.dispatch.key != DispatchKey::PriorityClass {
                return Err(fail(
                    f,
                    "dispatch_fallback is only for dispatch = \"priority-class\"",
                ));
            }
            d.dispatch.fallback = dispatch_key(&f, value)?;
        }
        "flush_idle_us" => d.flush.idle = Duration::from_micros(num(&f, key, value)?),
        "max_batch_wait_us" => d.flush.max_wait = Duration::from_micros(num(&f, key, value)?),
        "rx_ring_size" => d.rings.rx_ring = num(&f, key, value)?,
        "tx_ring_size" => d.rings.tx_ring = num(&f, key, value)?,
        "max_queue_delay_us" => d.max_queue_delay_us = num(&f, key, value)?,
        "bulk_reply_nice" => d.bulk_reply_nice = num(&f, key, value)?,
        _ => {
            let name = key.strip_prefix("burst.").unwrap_or(key);
            let b = &mut d.burst;
            let slot = match name {
                "rx_read" => &mut b.rx_read,
                "rx_write" => &mut b.rx_write,
                "worker_read" => &mut b.worker_read,
                "worker_write" => &mut b.worker_write,
                "tx_read" => &mut b.tx_read,
                "tx_write" => &mut b.tx_write,
                other => {
                    return Err(fail(
                        f,
                        format!(
                            "unknown key {other:?} for the dataplane (expected {DATAPLANE_KEYS})"
                        ),
                    ))
                }
            };
            *slot = num(
                &FieldPath::root().at("dataplane.burst").key(name),
                "burst size",
                value,
            )?;
        }
    }
    Ok(())
}
