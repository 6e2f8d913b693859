//! The running switch as its management sees it: the datastore's live
//! model (the [`Config`] now in force and its version), the bridges
//! ([`Runtime`]) and their controllers ([`Controllers`]).
//!
//! A change is a transaction ([`Daemon::transact`]): the datastore
//! validates the whole new model against the running one, the
//! differences are classified ([`datastore::diff`]), and only then is
//! anything touched. What can fail is done first — every new port is
//! opened, every new bridge's tables built — so a transaction applies
//! whole or not at all; then removals, then additions. (Two things can
//! still fail after removals began, and then the error names them: a
//! controller listener that does not bind, and a port re-opened with
//! another backend.) Bridges and ports
//! the transaction does not name keep forwarding. After each committed
//! transaction the model is written atomically to the state file (the
//! file `fulmar run --config` loaded, or `--state FILE`), so a restart
//! comes back with the same bridges, ports and controllers.
//!
//! Transactions are serialised by one mutex, held while a change is
//! applied; reads (show, stats) take it only to copy the model.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use datastore::{Change, Config, Host, Op};
use serde::Serialize;

use crate::controllers::{ControllerOptions, ControllerStatus, Controllers};
use crate::{Runtime, RuntimeError, RuntimeOptions};

/// Why a transaction did not apply (nothing changed).
#[derive(Debug)]
pub enum TxnError {
    /// The new model does not validate: every finding, each naming the
    /// operation and field.
    Invalid(datastore::ConfigError),
    /// The running switch cannot take the change (an interface that does
    /// not open, a listener that does not bind, a change that needs a
    /// restart).
    Runtime(RuntimeError),
    /// The state file could not be written (the change is in force; the
    /// file holds the model before it).
    Persist(std::io::Error),
}

impl std::fmt::Display for TxnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxnError::Invalid(e) => write!(f, "{e}"),
            TxnError::Runtime(e) => write!(f, "{e}"),
            TxnError::Persist(e) => write!(f, "applied, but the state file was not written: {e}"),
        }
    }
}

impl std::error::Error for TxnError {}

/// What a committed (or dry-run) transaction did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    /// The datastore version after it (unchanged for a dry run).
    pub version: u64,
    /// Each change, in the words of `fulmar ctl`.
    pub changes: Vec<String>,
    /// Validated only.
    pub dry_run: bool,
}

/// A port in `show`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ShowPort {
    /// OpenFlow port number.
    pub ofport: u32,
    /// Interface name.
    pub interface: String,
    /// Backend kind (afpacket, afxdp, tap, pcap, memory, patch).
    #[serde(rename = "type")]
    pub kind: String,
    /// The link is up.
    pub link_up: bool,
    /// The port is administratively up (no OFPPC_PORT_DOWN).
    pub admin_up: bool,
    /// Its VLAN settings for NORMAL, when any is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<ShowVlan>,
}

/// A port's VLAN settings in `show` (what is not set is left out).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ShowVlan {
    /// `vlan_mode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan_mode: Option<String>,
    /// `tag`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<u16>,
    /// `trunks`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trunks: Vec<u16>,
}

/// A bridge in `show`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ShowBridge {
    /// Name.
    pub name: String,
    /// Datapath id, 16 hex digits.
    pub datapath_id: String,
    /// secure or standalone.
    pub fail_mode: String,
    /// Thread arrangement.
    pub mode: String,
    /// Controllers and their state.
    pub controllers: Vec<ControllerStatus>,
    /// Ports in number order.
    pub ports: Vec<ShowPort>,
    /// The bridge-local port when it has one: `ofport` `OFPP_LOCAL`
    /// (4294967294), the bridge's name, type `internal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_port: Option<ShowPort>,
    /// Why the bridge has no local port although its configuration asks
    /// for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_port_error: Option<String>,
}

/// The tree `fulmar ctl show` prints.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Show {
    /// Bridges in configuration order.
    pub bridges: Vec<ShowBridge>,
}

impl Show {
    /// The `ovs-vsctl show`-like text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for b in &self.bridges {
            let _ = writeln!(s, "Bridge {}", b.name);
            let _ = writeln!(s, "    datapath_id: {}", b.datapath_id);
            for c in &b.controllers {
                let _ = writeln!(s, "    Controller \"{}\"", c.target);
                if c.connected {
                    let _ = writeln!(s, "        is_connected: true");
                    let _ = writeln!(s, "        role: {}", c.role);
                }
            }
            let _ = writeln!(s, "    fail_mode: {}", b.fail_mode);
            if let Some(e) = &b.local_port_error {
                let _ = writeln!(s, "    local_port: none: {e}");
            }
            for p in b.ports.iter().chain(&b.local_port) {
                let _ = writeln!(s, "    Port {}", p.interface);
                if p.ofport == ofp::consts::port_no::LOCAL {
                    let _ = writeln!(s, "        ofport: LOCAL");
                } else {
                    let _ = writeln!(s, "        ofport: {}", p.ofport);
                }
                if let Some(v) = &p.vlan {
                    if let Some(t) = v.tag {
                        let _ = writeln!(s, "        tag: {t}");
                    }
                    if !v.trunks.is_empty() {
                        let t: Vec<String> = v.trunks.iter().map(u16::to_string).collect();
                        let _ = writeln!(s, "        trunks: [{}]", t.join(", "));
                    }
                    if let Some(m) = &v.vlan_mode {
                        let _ = writeln!(s, "        vlan_mode: {m}");
                    }
                }
                let _ = writeln!(s, "        Interface {}", p.interface);
                if p.kind != "afpacket" {
                    let _ = writeln!(s, "            type: {}", p.kind);
                }
                let _ = writeln!(
                    s,
                    "            link_state: {}",
                    if p.link_up { "up" } else { "down" }
                );
                if !p.admin_up {
                    let _ = writeln!(s, "            admin_state: down");
                }
            }
        }
        s
    }
}

/// Settings of the daemon beyond the configuration.
#[derive(Clone, Debug, Default)]
pub struct DaemonOptions {
    /// The runtime's.
    pub runtime: RuntimeOptions,
    /// The controller side's.
    pub controllers: ControllerOptions,
    /// Where the model is written after each transaction (`None`: not
    /// persisted).
    pub state_file: Option<PathBuf>,
    /// Bridges' first tables built while the configuration was checked
    /// ([`crate::Prebuild`]); a bridge without is built at the start.
    pub prebuilt: crate::Prebuilt,
}

struct Store {
    config: Config,
    version: u64,
}

/// The running switch (see the module comment).
pub struct Daemon {
    runtime: Runtime,
    controllers: Controllers,
    store: Mutex<Store>,
    /// Signalled after each committed transaction ([`Daemon::wait_change`]).
    changed: Condvar,
    state_file: Option<PathBuf>,
    /// Where the tables are saved at [`Daemon::stop`] (and were restored
    /// from at start).
    saved_tables: Option<PathBuf>,
    host: Host,
}

fn describe(c: &Change) -> String {
    match c {
        Change::AddBridge(b) => format!("add bridge {b}"),
        Change::DelBridge(b) => format!("delete bridge {b}"),
        Change::AddPort { bridge, port } => format!("add port {port} to {bridge}"),
        Change::DelPort {
            bridge,
            port,
            interface,
        } => format!("delete port {port} ({interface}) from {bridge}"),
        Change::ChangePort { bridge, port } => format!("re-open port {port} of {bridge}"),
        Change::SetPortVlan { bridge, port } => {
            format!("set the VLAN settings of port {port} of {bridge}")
        }
        Change::SetQos { bridge, port } => {
            format!("set the egress queues of port {port} of {bridge}")
        }
        Change::SetControllers { bridge } => format!("set the controllers of {bridge}"),
        Change::SetFailMode { bridge, mode } => {
            format!("set the fail mode of {bridge} to {}", mode.as_str())
        }
        Change::ChangeBridge { bridge, fields } => {
            format!("restart bridge {bridge} ({} changed)", fields.join(", "))
        }
        Change::ChangeDataplane { fields } => {
            format!("dataplane threads ({})", fields.join(", "))
        }
        Change::ChangeFlows { bridge } => {
            format!("restart bridge {bridge} (static flows, groups or meters changed)")
        }
        Change::PatchLinks => "patch links".into(),
    }
}

fn refuse(s: String) -> TxnError {
    TxnError::Runtime(RuntimeError::Change(s))
}

impl Daemon {
    /// Starts the bridges of `config`, then their controller sides.
    pub fn start(config: Config, opts: DaemonOptions) -> Result<Daemon, RuntimeError> {
        let runtime = Runtime::start_with(&config, &opts.runtime, &opts.prebuilt)?;
        let controllers =
            Controllers::new(opts.controllers.clone()).map_err(|error| RuntimeError::Threads {
                bridge: "*".into(),
                error,
            })?;
        for b in &config.bridges {
            controllers.attach(&runtime, b)?;
        }
        Ok(Daemon {
            runtime,
            controllers,
            store: Mutex::new(Store { config, version: 1 }),
            changed: Condvar::new(),
            state_file: opts.state_file,
            saved_tables: opts.runtime.saved_tables.clone(),
            host: Host::detect(),
        })
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bridges.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The controller sides.
    pub fn controllers(&self) -> &Controllers {
        &self.controllers
    }

    /// The model in force and its version.
    pub fn config(&self) -> (Config, u64) {
        let s = self.store();
        (s.config.clone(), s.version)
    }

    /// Waits until the model's version differs from `seen` (a transaction
    /// committed), at most `timeout`; returns the version then. Management
    /// modules that mirror the model elsewhere (OVSDB) follow it with this.
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> u64 {
        let store = self.store();
        let (store, _) = self
            .changed
            .wait_timeout_while(store, timeout, |s| s.version == seen)
            .unwrap_or_else(|e| e.into_inner());
        store.version
    }

    /// Where the model is persisted.
    pub fn state_file(&self) -> Option<&Path> {
        self.state_file.as_deref()
    }

    /// Validates `ops` against the running model and, unless `dry_run`,
    /// applies them whole (see the module comment).
    pub fn transact(&self, ops: &[Op], dry_run: bool) -> Result<Outcome, TxnError> {
        let mut store = self.store();
        let new = store
            .config
            .apply(ops, self.host)
            .map_err(TxnError::Invalid)?;
        self.commit(&mut store, new, dry_run)
    }

    /// Replaces the whole model with `new` (already validated: a loaded
    /// file), applying only the differences.
    pub fn replace(&self, new: Config, dry_run: bool) -> Result<Outcome, TxnError> {
        let mut store = self.store();
        self.commit(&mut store, new, dry_run)
    }

    fn commit(&self, store: &mut Store, new: Config, dry_run: bool) -> Result<Outcome, TxnError> {
        let changes = datastore::diff(&store.config, &new);
        self.check_live(&changes)?;
        let described = changes.iter().map(describe).collect();
        if dry_run {
            return Ok(Outcome {
                version: store.version,
                changes: described,
                dry_run: true,
            });
        }
        self.apply(&store.config, &new, &changes)
            .map_err(TxnError::Runtime)?;
        store.config = new;
        store.version += 1;
        self.changed.notify_all();
        let outcome = Outcome {
            version: store.version,
            changes: described,
            dry_run: false,
        };
        if let Some(path) = &self.state_file {
            store.config.save(path).map_err(TxnError::Persist)?;
        }
        Ok(outcome)
    }

    /// Refuses, before anything is touched, what cannot change on a
    /// running switch.
    fn check_live(&self, changes: &[Change]) -> Result<(), TxnError> {
        for c in changes {
            match c {
                Change::ChangeDataplane { fields } => {
                    return Err(refuse(format!(
                        "dataplane settings ({}) cannot change while the switch runs: \
                         change the configuration file and restart",
                        fields.join(", ")
                    )))
                }
                Change::PatchLinks => {
                    return Err(refuse(
                        "patch links cannot change while the switch runs: \
                         change the configuration file and restart"
                            .into(),
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Applies `changes` (from `old` to `new`). Ports are opened before
    /// anything is removed or added; a failure there changes nothing.
    /// Stops bridge `bridge`'s agent, then the bridge; its final report
    /// (logged) names the agent's drops too.
    fn remove_bridge(&self, bridge: &str) -> Result<(), RuntimeError> {
        let agent = self.controllers.detach(bridge);
        self.runtime.remove_bridge_with(bridge, |r| {
            if let Some(a) = &agent {
                add_agent_drops(r, a, false);
            }
        })?;
        Ok(())
    }

    fn apply(&self, old: &Config, new: &Config, changes: &[Change]) -> Result<(), RuntimeError> {
        let rt = &self.runtime;
        let bridge_of = |c: &Config, name: &str| {
            c.bridge(name)
                .cloned()
                .ok_or_else(|| RuntimeError::Change(format!("bridge {name} is not in the model")))
        };
        // 1. What can fail: open the ports to add, build the bridges to
        // add (their tables, their ports).
        let mut new_ports = Vec::new();
        let mut new_bridges = Vec::new();
        for c in changes {
            match c {
                Change::AddPort { bridge, port } => {
                    let b = bridge_of(new, bridge)?;
                    let p = b.port(*port).cloned().ok_or_else(|| {
                        RuntimeError::Change(format!("bridge {bridge} has no port {port}"))
                    })?;
                    let mut opened = rt.open_ports(bridge, std::slice::from_ref(&p))?;
                    if let Some(o) = opened.pop() {
                        new_ports.push((bridge.clone(), o));
                    }
                }
                Change::AddBridge(b)
                | Change::ChangeBridge { bridge: b, .. }
                | Change::ChangeFlows { bridge: b } => {
                    let br = bridge_of(new, b)?;
                    if old.bridge(b).is_some() {
                        // A restart: its tables must build; its ports are
                        // re-opened once the old ones are closed.
                        crate::tables::build_state(&br, pipeline::Time(0))?;
                        new_bridges.push((br, None));
                    } else {
                        let prepared = rt.prepare_bridge(&br)?;
                        new_bridges.push((br, Some(prepared)));
                    }
                }
                _ => {}
            }
        }
        // 2. Removals.
        for c in changes {
            match c {
                Change::DelBridge(b) => self.remove_bridge(b)?,
                Change::DelPort { bridge, port, .. } | Change::ChangePort { bridge, port } => {
                    rt.remove_port(bridge, *port)?;
                }
                Change::ChangeBridge { bridge, .. } | Change::ChangeFlows { bridge }
                    if old.bridge(bridge).is_some() =>
                {
                    self.remove_bridge(bridge)?
                }
                _ => {}
            }
        }
        // 3. Additions and settings.
        for (bridge, open) in new_ports {
            rt.add_opened_port(&bridge, open)?;
        }
        // A port whose backend changed is opened again once the old
        // handle is closed (the same interface cannot always be opened
        // twice): if that fails, the port is gone and the error says so.
        for c in changes {
            if let Change::ChangePort { bridge, port } = c {
                let b = bridge_of(new, bridge)?;
                if let Some(p) = b.port(*port) {
                    rt.add_port(bridge, p)?;
                }
            }
        }
        for c in changes {
            if let Change::SetPortVlan { bridge, port } = c {
                let b = bridge_of(new, bridge)?;
                if let Some(p) = b.port(*port) {
                    let v = p.vlan.resolve().map_err(|e| {
                        RuntimeError::Change(format!("bridge {bridge} port {port}: {e}"))
                    })?;
                    rt.set_port_vlan(bridge, *port, v)?;
                }
            }
        }
        // Egress queues of ports added, re-opened or changed (a new
        // bridge's ports get theirs as it starts).
        for c in changes {
            if let Change::AddPort { bridge, port }
            | Change::ChangePort { bridge, port }
            | Change::SetQos { bridge, port } = c
            {
                let b = bridge_of(new, bridge)?;
                if b.port(*port).is_some() {
                    rt.set_port_qos(bridge, *port, b.qos.get(port))?;
                }
            }
        }
        for (br, prepared) in new_bridges {
            match prepared {
                Some(p) => rt.add_prepared_bridge(new, &br, p)?,
                None => rt.add_bridge(new, &br)?,
            }
            self.controllers.attach(rt, &br)?;
        }
        for c in changes {
            match c {
                Change::SetControllers { bridge } | Change::SetFailMode { bridge, .. } => {
                    let br = bridge_of(new, bridge)?;
                    self.controllers
                        .set(rt, bridge, &br.controllers, br.fail_mode)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Bridge `bridge`'s report ([`Runtime::bridge_report`]) with the drops
    /// of its controller side added by name: packet-ins the agent's rate
    /// limit or full queues dropped, events no channel had room for.
    pub fn bridge_report(
        &self,
        bridge: &str,
        top: usize,
        zeros: bool,
    ) -> Option<crate::BridgeReport> {
        let mut r = self.runtime.bridge_report(bridge, top, zeros)?;
        if let Some(a) = self.controllers.agent_stats(bridge) {
            add_agent_drops(&mut r, &a, zeros);
        }
        Some(r)
    }

    /// Writes the model to `path` (atomically).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        self.store().config.save(path)
    }

    /// The `show` tree of the running switch.
    pub fn show(&self) -> Show {
        let (config, _) = self.config();
        let bridges = config
            .bridges
            .iter()
            .map(|b| {
                let desc = self.runtime.port_desc(&b.name).unwrap_or_default();
                let ports = b
                    .ports
                    .iter()
                    .map(|p| {
                        let d = desc.iter().find(|d| d.port_no == p.number);
                        let (interface, kind) = match &p.kind {
                            datastore::PortKind::Interface { name, backend } => {
                                (name.clone(), backend.kind_str().to_string())
                            }
                            datastore::PortKind::Patch {
                                peer_bridge,
                                peer_port,
                            } => (format!("patch:{peer_bridge}:{peer_port}"), "patch".into()),
                        };
                        ShowPort {
                            ofport: p.number,
                            interface,
                            kind,
                            link_up: d
                                .is_some_and(|d| d.state & ofp::port::port_state::LINK_DOWN == 0),
                            admin_up: d
                                .is_some_and(|d| d.config & ofp::port::port_config::PORT_DOWN == 0),
                            vlan: (!p.vlan.is_default()).then(|| ShowVlan {
                                vlan_mode: p.vlan.mode.map(|m| m.as_str().to_string()),
                                tag: p.vlan.tag,
                                trunks: p.vlan.trunks.clone(),
                            }),
                        }
                    })
                    .collect();
                let local = ofp::consts::port_no::LOCAL;
                let local_port = desc.iter().find(|d| d.port_no == local).map(|d| ShowPort {
                    ofport: local,
                    interface: b.name.clone(),
                    kind: "internal".into(),
                    link_up: d.state & ofp::port::port_state::LINK_DOWN == 0,
                    admin_up: d.config & ofp::port::port_config::PORT_DOWN == 0,
                    vlan: None,
                });
                ShowBridge {
                    name: b.name.clone(),
                    datapath_id: format!("{:016x}", b.dpid),
                    fail_mode: b.fail_mode.as_str().to_string(),
                    mode: self
                        .runtime
                        .thread_mode(&b.name)
                        .unwrap_or("stopped")
                        .to_string(),
                    controllers: self.controllers.status(&b.name),
                    ports,
                    local_port,
                    local_port_error: self.runtime.local_port_error(&b.name),
                }
            })
            .collect();
        Show { bridges }
    }

    /// Stops the controllers, saves every bridge's tables (when a place
    /// for them is set: [`crate::saved`]), then stops the bridges; returns
    /// the final counters.
    pub fn stop(&self) -> String {
        let agents = self.controllers.stop_all();
        if let Some(dir) = &self.saved_tables {
            let (config, _) = self.config();
            match self.runtime.save_tables(&config, dir) {
                Ok(files) => tracing::info!(
                    "saved the tables of {} bridge(s) in {} for the next start",
                    files.len(),
                    dir.display()
                ),
                Err(e) => tracing::warn!("tables not saved: {e}"),
            }
        }
        self.runtime.halt_with(|r| {
            if let Some(a) = agents.get(&r.bridge) {
                add_agent_drops(r, a, false);
            }
        })
    }
}

/// Adds the drops bridge `r`'s agent counted (packet-ins over the rate
/// limit or a full queue, controller events that did not fit) to the
/// report; with `zeros` also those at 0.
fn add_agent_drops(r: &mut crate::BridgeReport, a: &agent::AgentStats, zeros: bool) {
    for (name, n) in [
        ("packet_in_rate_limited", a.packet_in.packet_in_rate_limited),
        ("packet_in_queue_full", a.packet_in.packet_in_queue_full),
        ("controller_event_queue_full", a.event_queue_full),
    ] {
        if zeros || n > 0 {
            r.drops.push((name.to_string(), n));
        }
    }
}

mod switch_ops;
pub mod trace;

pub use switch_ops::{CaptureSummary, SwitchOpError};

#[cfg(test)]
mod tests;
