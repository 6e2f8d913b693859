//! fulmar's runtime: turns a [`datastore::Config`] into running bridges,
//! and keeps applying it as it changes.
//!
//! - [`Runtime::start`] opens every port of every bridge first (a missing
//!   interface is named and nothing starts), builds each bridge's tables
//!   from its static meters, groups and flows and starts one set of
//!   dataplane threads per bridge ([`bridge`]) whose workers run the
//!   OpenFlow pipeline ([`worker::PipelineWorker`]).
//! - Bridges and ports are added and removed while the others forward
//!   ([`Runtime::add_bridge`], [`Runtime::add_port`], ...); [`daemon`]
//!   turns datastore transactions into these calls and the controller
//!   channels of [`controllers`].
//! - [`links`] follows kernel link state (netlink) into the port state
//!   bits and PORT_STATUS messages; [`report`] gathers the counter report;
//!   [`openflow`] is a bridge as the agent's switch; [`standalone`] the
//!   learning switch of fail mode standalone. Several bridges run in one
//!   process; patch links join two of them with an in-process port pair.
//!
//! [`Runtime::stop`] stops the threads stage by stage and returns the final
//! counters as text (also logged with `tracing`).

pub mod bridge;
pub mod controllers;
pub mod daemon;
pub mod links;
pub mod openflow;
pub mod ports;
pub mod report;
pub mod saved;
pub mod signals;
pub mod standalone;
pub mod worker;

mod error;
mod options;
mod running;
mod tables;

pub use error::RuntimeError;
pub use options::{PortStatusEvent, RuntimeOptions, INJECT_PORT};
pub use tables::{Prebuild, Prebuilt};

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use dataplane::patch::PatchPort;
use dataplane::threads::ThreadDrops;
use dataplane::PortCounters;
use datastore::Config;
use ofp::{FlowMod, OfpError};
use pipeline::datapath::Counters;
use pipeline::Time;

use bridge::BridgeRt;
use links::LinkRegistry;
use running::Running;
use tables::build_state;

pub use bridge::PortEntry;
pub use ports::{AfPacketMode, BackendOptions, DpdkOptions, PortError};
pub use report::{BridgeReport, FlowLine};

/// Flows a bridge's final counters list when it stops or is removed (the
/// busiest first, with the total count above them). Every flow was a
/// line once: stopping a switch with 1M flows wrote 146 MB to the log and
/// as much to stdout.
pub const FINAL_REPORT_FLOWS: usize = 100;
pub use worker::{PipelineWorker, WorkerShared};

/// Sender of agent events (packet-in, flow-removed, port-status): see
/// [`agent::events`] for its two lanes.
pub use agent::EventSender;

/// Running bridges.
pub struct Runtime {
    /// By handle; a name is resolved to its handle in one place
    /// ([`Running::id`]).
    bridges: Mutex<Running>,
    opts: RuntimeOptions,
    memory: Mutex<HashMap<String, PatchPort>>,
    links: Arc<LinkRegistry>,
    events: Mutex<Receiver<PortStatusEvent>>,
    stop_links: Arc<AtomicBool>,
    link_thread: Mutex<Option<JoinHandle<()>>>,
    /// Saved tables not yet taken by their bridge.
    pending: Mutex<saved::Pending>,
}

/// A port opened for a running bridge, not yet handed to it.
pub struct OpenedPort {
    port: ports::OpenPort,
    /// The far end of a memory port.
    memory: HashMap<String, PatchPort>,
}

/// A bridge's tables and opened ports, not yet running.
pub struct PreparedBridge {
    state: pipeline::SwitchState,
    ports: Vec<OpenedPort>,
    /// Why its local port could not be made.
    local_error: Option<String>,
}

/// Bridge `br`'s local port ([`ports::open_local`]), or why it has none
/// (logged as a warning: the bridge runs without it).
fn local_port(br: &datastore::Bridge) -> (Option<ports::OpenPort>, Option<String>) {
    match ports::open_local(br) {
        None => (None, None),
        Some(Ok(p)) => (Some(p), None),
        Some(Err(e)) => {
            tracing::warn!(bridge = %br.name, "{e}");
            (None, Some(e))
        }
    }
}

/// Stops bridge `b`'s threads (stage by stage) and returns its final
/// counters as text, `extra` adding what the runtime does not count
/// itself.
fn final_report(b: &BridgeRt, extra: impl FnOnce(&mut BridgeReport)) -> String {
    b.halt();
    let mut s = String::new();
    let mut r = report::gather(b, FINAL_REPORT_FLOWS, false);
    extra(&mut r);
    r.text(&mut s);
    s
}

/// Maps bridge `bridge`'s threads' refusal to the runtime's error.
fn threads_error(bridge: &str) -> impl FnOnce(std::io::Error) -> RuntimeError + '_ {
    move |error| RuntimeError::Threads {
        bridge: bridge.to_string(),
        error,
    }
}

/// The error of a name no running bridge has.
fn no_bridge(name: &str) -> RuntimeError {
    RuntimeError::Change(format!("no bridge named {name:?} runs"))
}

/// The error of adding a bridge whose name a running one has.
fn already_runs(name: &str) -> RuntimeError {
    RuntimeError::Change(format!("bridge {name:?} already runs"))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bridge `br`'s tables: its saved ones if `pending` holds them for its
/// static configuration (with the file to remove once the bridge runs),
/// else its static meters, groups and flows; either may have been built
/// while the configuration was checked (`prebuilt`). Saved tables the
/// pipeline refuses are set aside and the bridge starts from its
/// configuration.
#[allow(clippy::type_complexity)]
fn build_or_restore(
    br: &datastore::Bridge,
    pending: &mut saved::Pending,
    prebuilt: &Prebuilt,
) -> Result<
    (
        pipeline::SwitchState,
        Option<(std::path::PathBuf, String, saved::Restored)>,
    ),
    RuntimeError,
> {
    let restored = |path: std::path::PathBuf, r: Result<(_, _), String>| match r {
        Ok((state, n)) => Some((state, Some((path, br.name.clone(), n)))),
        Err(e) => {
            saved::set_aside(&path, &e);
            None
        }
    };
    match prebuilt.take(br) {
        Some(tables::Outcome::Built(state)) => {
            tracing::debug!(bridge = br.name, "tables built during the check");
            return Ok((state?, None));
        }
        Some(tables::Outcome::Restored(path, r)) => {
            tracing::debug!(bridge = br.name, "saved tables restored during the check");
            pending.forget(&br.name);
            if let Some(done) = restored(path, r) {
                return Ok(done);
            }
        }
        None => {
            if let Some(path) = pending.take(br) {
                if let Some(done) =
                    restored(path.clone(), tables::restore_state(br, &path, Time(0)))
                {
                    return Ok(done);
                }
            }
        }
    }
    Ok((build_state(br, Time(0))?, None))
}

impl Runtime {
    /// Opens every port, builds every bridge and starts the threads.
    pub fn start(config: &Config, opts: &RuntimeOptions) -> Result<Runtime, RuntimeError> {
        Runtime::start_with(config, opts, &Prebuilt::default())
    }

    /// As [`start`](Self::start), taking the bridges' tables from
    /// `prebuilt` where they were built for the bridge as `config` has it
    /// ([`Prebuild`]).
    pub fn start_with(
        config: &Config,
        opts: &RuntimeOptions,
        prebuilt: &Prebuilt,
    ) -> Result<Runtime, RuntimeError> {
        let mut opts = opts.clone();
        opts.backends.dpdk = DpdkOptions::of(config);
        let opts = &opts;
        let mut pending = opts
            .saved_tables
            .as_deref()
            .map(saved::Pending::load)
            .unwrap_or_default();
        let mut states = Vec::new();
        let mut restored = Vec::new();
        for br in &config.bridges {
            let (state, from) = build_or_restore(br, &mut pending, prebuilt)?;
            states.push(state);
            restored.extend(from);
        }
        // Tables built for bridges that started otherwise are not kept.
        prebuilt.clear();
        let opened = ports::open_all(config, &opts.backends).map_err(RuntimeError::Ports)?;
        let (tx_events, rx_events) = mpsc::channel();
        let links = Arc::new(LinkRegistry::default());
        let mut bridges = Running::default();
        for ((br, state), mut ports) in config.bridges.iter().zip(states).zip(opened.bridges) {
            let (local, local_error) = local_port(br);
            ports.extend(local);
            let b = Arc::new(BridgeRt::start(config, br, state, ports, opts)?);
            // A validated configuration names each bridge once.
            if let Err(b) = bridges.insert(b.clone(), local_error) {
                b.halt();
                return Err(already_runs(&br.name));
            }
            links.add_bridge(&b);
        }
        let stop_links = Arc::new(AtomicBool::new(false));
        let link_thread = if opts.watch_links {
            links::spawn_watcher(links.clone(), tx_events, stop_links.clone())
        } else {
            None
        };
        for (path, bridge, tables) in restored {
            saved::consumed(&path, &bridge, &tables);
        }
        Ok(Runtime {
            bridges: Mutex::new(bridges),
            opts: opts.clone(),
            memory: Mutex::new(opened.memory),
            links,
            events: Mutex::new(rx_events),
            stop_links,
            link_thread: Mutex::new(link_thread),
            pending: Mutex::new(pending),
        })
    }

    /// Bridge `name` (resolved to its handle, then found by it).
    fn bridge(&self, name: &str) -> Option<Arc<BridgeRt>> {
        Some(lock(&self.bridges).named(name)?.1.clone())
    }

    /// Bridge `name`, or the error that no bridge of that name runs.
    fn need(&self, name: &str) -> Result<Arc<BridgeRt>, RuntimeError> {
        self.bridge(name).ok_or_else(|| no_bridge(name))
    }

    fn all(&self) -> Vec<Arc<BridgeRt>> {
        lock(&self.bridges).all()
    }

    /// The bridges' names, in configuration order.
    pub fn bridge_names(&self) -> Vec<String> {
        lock(&self.bridges).names()
    }

    /// Opens the ports of `bridge` given (all errors together; patch
    /// ports are made with their link at start only).
    pub fn open_ports(
        &self,
        bridge: &str,
        ports: &[datastore::Port],
    ) -> Result<Vec<OpenedPort>, RuntimeError> {
        let mut errors = Vec::new();
        let mut opened = Vec::new();
        for p in ports {
            if matches!(p.kind, datastore::PortKind::Patch { .. }) {
                return Err(RuntimeError::Change(format!(
                    "bridge {bridge} port {}: patch ports are made with their link when the switch starts",
                    p.number
                )));
            }
            let mut memory = HashMap::new();
            match ports::open_port(
                bridge,
                p,
                &self.opts.backends,
                &mut memory,
                &mut HashMap::new(),
            ) {
                Ok(port) => opened.push(OpenedPort { port, memory }),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(opened)
        } else {
            Err(RuntimeError::Ports(errors))
        }
    }

    /// Builds bridge `br`'s tables and opens its ports, starting nothing:
    /// what can fail about adding a bridge, done before anything changes.
    pub fn prepare_bridge(&self, br: &datastore::Bridge) -> Result<PreparedBridge, RuntimeError> {
        if self.bridge(&br.name).is_some() {
            return Err(already_runs(&br.name));
        }
        let mut ports = self.open_ports(&br.name, &br.ports)?;
        let (state, restored) =
            build_or_restore(br, &mut lock(&self.pending), &Prebuilt::default())?;
        if let Some((path, bridge, tables)) = restored {
            saved::consumed(&path, &bridge, &tables);
        }
        // Last: a bridge that cannot start closes it again at once.
        let (local, local_error) = local_port(br);
        if let Some(port) = local {
            ports.push(OpenedPort {
                port,
                memory: HashMap::new(),
            });
        }
        Ok(PreparedBridge {
            state,
            ports,
            local_error,
        })
    }

    /// Writes every bridge's tables to `dir` ([`saved`]): each bridge of
    /// `config` that runs, one file each, written atomically; the files of
    /// bridges that do not run are left as they are. Returns the files
    /// written.
    pub fn save_tables(
        &self,
        config: &Config,
        dir: &std::path::Path,
    ) -> Result<Vec<std::path::PathBuf>, String> {
        let mut written = Vec::new();
        for br in &config.bridges {
            let Some(sw) = self.bridge_switch(&br.name) else {
                continue;
            };
            let tables = saved::read(&sw).map_err(|e| format!("bridge {}: {e}", br.name))?;
            let path = saved::write(dir, br, &tables)
                .map_err(|e| format!("bridge {}: {}: {e}", br.name, dir.display()))?;
            written.push(path);
        }
        Ok(written)
    }

    /// Starts bridge `br` of `config` from what [`Runtime::prepare_bridge`]
    /// made.
    pub fn add_prepared_bridge(
        &self,
        config: &Config,
        br: &datastore::Bridge,
        prepared: PreparedBridge,
    ) -> Result<(), RuntimeError> {
        let mut memory = HashMap::new();
        let ports = prepared
            .ports
            .into_iter()
            .map(|o| {
                memory.extend(o.memory);
                o.port
            })
            .collect();
        let b = Arc::new(BridgeRt::start(
            config,
            br,
            prepared.state,
            ports,
            &self.opts,
        )?);
        if let Err(b) = lock(&self.bridges).insert(b.clone(), prepared.local_error) {
            b.halt();
            return Err(already_runs(&br.name));
        }
        self.links.add_bridge(&b);
        lock(&self.memory).extend(memory);
        Ok(())
    }

    /// Starts bridge `br` of `config` (its ports opened first; a port that
    /// does not open is named and nothing starts).
    pub fn add_bridge(&self, config: &Config, br: &datastore::Bridge) -> Result<(), RuntimeError> {
        let prepared = self.prepare_bridge(br)?;
        self.add_prepared_bridge(config, br, prepared)
    }

    /// Stops bridge `name` (its threads stage by stage) and forgets it;
    /// returns its final counters as text.
    pub fn remove_bridge(&self, name: &str) -> Result<String, RuntimeError> {
        self.remove_bridge_with(name, |_| {})
    }

    /// [`Runtime::remove_bridge`], with `extra` adding to the final report
    /// what the runtime does not count itself (the daemon's controller-side
    /// drops).
    pub fn remove_bridge_with(
        &self,
        name: &str,
        extra: impl FnOnce(&mut BridgeReport),
    ) -> Result<String, RuntimeError> {
        let b = {
            let mut running = lock(&self.bridges);
            let (id, _) = running.named(name).ok_or_else(|| no_bridge(name))?;
            running.remove(id).ok_or_else(|| no_bridge(name))?
        };
        self.links.remove(&b, None);
        // The threads own the ports: once they are stopped, the local
        // port's TAP interface is gone too.
        let s = final_report(&b, extra);
        tracing::info!(bridge = name, "bridge removed; final counters:\n{s}");
        Ok(s)
    }

    /// Why the running bridge `bridge`, configured with a local port, has
    /// none (the TAP could not be made); `None` when it has one, or was not
    /// asked for one.
    pub fn local_port_error(&self, bridge: &str) -> Option<String> {
        let running = lock(&self.bridges);
        let (id, _) = running.named(bridge)?;
        running.local_error(id).map(str::to_string)
    }

    /// Opens `port` and adds it to the running bridge `bridge`: the other
    /// ports keep forwarding; the new one forwards once this returns.
    pub fn add_port(&self, bridge: &str, port: &datastore::Port) -> Result<(), RuntimeError> {
        self.need(bridge)?;
        let open = self
            .open_ports(bridge, std::slice::from_ref(port))?
            .pop()
            .ok_or_else(|| RuntimeError::Change("no port opened".into()))?;
        self.add_opened_port(bridge, open)
    }

    /// Adds a port [`Runtime::open_ports`] opened to the running bridge
    /// `bridge`.
    pub fn add_opened_port(&self, bridge: &str, open: OpenedPort) -> Result<(), RuntimeError> {
        let b = self.need(bridge)?;
        let (interface, kernel, number) = (
            open.port.interface.clone(),
            open.port.kernel,
            open.port.number,
        );
        b.add_port(open.port).map_err(threads_error(bridge))?;
        if kernel {
            self.links.add(&interface, &b, number);
        }
        lock(&self.memory).extend(open.memory);
        Ok(())
    }

    /// Sets how NORMAL carries VLANs on port `number` of `bridge`; what
    /// NORMAL learnt behind the port is forgotten (its VLANs changed).
    pub fn set_port_vlan(
        &self,
        bridge: &str,
        number: u32,
        vlan: pipeline::normal::PortVlan,
    ) -> Result<(), RuntimeError> {
        self.need(bridge)?.set_port_vlan(number, vlan);
        Ok(())
    }

    /// Removes port `number` from `bridge`; its interface is closed when
    /// this returns.
    pub fn remove_port(&self, bridge: &str, number: u32) -> Result<(), RuntimeError> {
        let b = self.need(bridge)?;
        self.links.remove(&b, Some(number));
        let e = b.remove_port(number).map_err(threads_error(bridge))?;
        lock(&self.memory).remove(&e.interface);
        Ok(())
    }

    /// Gives port `port` of `bridge` the egress queues `q` (`None`:
    /// none); see the guide's "Egress queues".
    pub fn set_port_qos(
        &self,
        bridge: &str,
        port: u32,
        q: Option<&datastore::PortQos>,
    ) -> Result<(), RuntimeError> {
        let b = self.need(bridge)?;
        b.set_qos(port, q).map_err(threads_error(bridge))
    }

    /// Each port's egress queue counters (the default queue included), for
    /// ports with queues configured.
    pub fn queue_counters(
        &self,
        bridge: &str,
    ) -> Option<BTreeMap<u32, Vec<dataplane::qos::QueueCounters>>> {
        Some(self.bridge(bridge)?.queue_counters())
    }

    /// A bridge's ports: number → interface.
    pub fn ports(&self, bridge: &str) -> Option<BTreeMap<u32, PortEntry>> {
        Some(self.bridge(bridge)?.port_entries().clone())
    }

    /// Takes the far end of a `memory` port (tests inject packets into it
    /// and collect what the switch sends out of it).
    pub fn take_memory_port(&self, interface: &str) -> Option<PatchPort> {
        lock(&self.memory).remove(interface)
    }

    /// Applies a flow mod to a bridge and publishes the new tables;
    /// returns the version the workers will move to.
    pub fn flow_mod(&self, bridge: &str, fm: &FlowMod) -> Result<u64, OfpError> {
        let b = self
            .bridge(bridge)
            .ok_or(OfpError::BadRequest(ofp::error::BadRequestCode::BadTableId))?;
        let now = b.now();
        let mut c = b.control();
        c.dp.state.flow_mod(fm, now)?;
        Ok(b.publish(&c))
    }

    /// Waits until every worker of `bridge` uses version `version` or newer.
    pub fn barrier(&self, bridge: &str, version: u64, timeout: Duration) -> bool {
        self.bridge(bridge)
            .is_some_and(|b| b.publisher.barrier(version, timeout))
    }

    /// A port's config and state bits as the workers see them now.
    pub fn port_info(&self, bridge: &str, port: u32) -> Option<pipeline::datapath::PortInfo> {
        let b = self.bridge(bridge)?;
        let c = b.control();
        c.dp.ports.get(port)
    }

    /// The OpenFlow description of a bridge's ports (what PORT_DESC
    /// answers).
    pub fn port_desc(&self, bridge: &str) -> Option<Vec<ofp::Port>> {
        let b = self.bridge(bridge)?;
        let c = b.control();
        Some(c.dp.state.port_table.port_desc())
    }

    /// OpenFlow port statistics of every port of `bridge`, exactly as a
    /// PORT_STATS request answers them.
    pub fn port_stats(&self, bridge: &str) -> Option<Vec<ofp::stats::PortStats>> {
        use agent::Switch;
        let req = ofp::multipart::MultipartRequestBody::PortStats {
            port_no: ofp::consts::port_no::ANY,
        };
        match self.bridge_switch(bridge)?.multipart(&req) {
            Ok(ofp::multipart::MultipartReplyBody::PortStats { stats }) => Some(stats),
            _ => None,
        }
    }

    /// Sets a port's link state (what the netlink watcher does; also for
    /// ports without a kernel interface). Queues no event.
    pub fn set_link(&self, bridge: &str, port: u32, up: bool) -> Option<u64> {
        Some(self.bridge(bridge)?.set_link(port, up))
    }

    /// The next link event, if one is queued.
    pub fn try_port_event(&self) -> Option<PortStatusEvent> {
        lock(&self.events).try_recv().ok()
    }

    /// A bridge's port counters, summed over threads.
    pub fn port_counters(&self, bridge: &str) -> Option<BTreeMap<u32, PortCounters>> {
        Some(self.bridge(bridge)?.port_counters())
    }

    /// An OpenFlow [`agent::Switch`] over a bridge, sending its events to
    /// `events` (packet-ins from the workers, flow-removed, port-status).
    /// The event sender can be set once per bridge.
    pub fn switch(&self, bridge: &str, events: EventSender) -> Option<openflow::BridgeSwitch> {
        let b = self.bridge(bridge)?;
        let _ = b.events.set(events);
        Some(openflow::BridgeSwitch::new(b))
    }

    /// The flag that tells a bridge's workers whether a controller channel
    /// is open (packet-ins are handed to the agent only then; counted as
    /// `packet_in_no_controller` otherwise). Up until someone follows it.
    pub fn controller_flag(&self, bridge: &str) -> Option<Arc<std::sync::atomic::AtomicBool>> {
        Some(self.bridge(bridge)?.controller_up.clone())
    }

    /// A bridge as an OpenFlow switch for management (`fulmar ctl
    /// add-flow` takes the controllers' path); events stay with the agent.
    pub fn bridge_switch(&self, bridge: &str) -> Option<openflow::BridgeSwitch> {
        Some(openflow::BridgeSwitch::new(self.bridge(bridge)?))
    }

    /// A private pipeline instance over a copy of a bridge's tables, ports
    /// and settings as they are now, and the bridge's time: what
    /// `fulmar ctl trace` sends a packet through (nothing it does reaches
    /// the running switch).
    pub fn trace_datapath(&self, bridge: &str) -> Option<(pipeline::datapath::Datapath, Time)> {
        let b = self.bridge(bridge)?;
        let c = b.control();
        let now = b.now();
        // NORMAL's table is copied: a trace learns nothing for real.
        let mut config = c.dp.config.clone();
        config.normal = pipeline::normal::NormalHandle(Arc::new(c.dp.config.normal.copy(now)));
        Some((
            pipeline::datapath::Datapath::new(c.dp.state.clone(), c.dp.ports.clone(), config),
            now,
        ))
    }

    /// What NORMAL has learnt in bridge `bridge` (as `ovs-appctl
    /// fdb/show` lists it), with the table's capacity and aging time.
    pub fn fdb(
        &self,
        bridge: &str,
    ) -> Option<(Vec<pipeline::normal::FdbEntry>, usize, std::time::Duration)> {
        let b = self.bridge(bridge)?;
        let now = b.now();
        let t = b.control().dp.config.normal.clone();
        Some((t.entries(now), t.capacity(), t.aging()))
    }

    /// Flow entries installed in a bridge.
    pub fn flow_count(&self, bridge: &str) -> Option<usize> {
        Some(self.bridge(bridge)?.control().dp.state.tables.len())
    }

    /// The bridge and port number of an interface (`IF`), or of `BR:NUM`.
    pub fn find_port(&self, name: &str) -> Option<(String, u32, String)> {
        if let Some((br, no)) = name.split_once(':') {
            if let (Some(b), Ok(no)) = (self.bridge(br), no.parse::<u32>()) {
                let e = b.port_entries().get(&no).cloned()?;
                return Some((b.name.clone(), no, e.interface));
            }
        }
        self.all().into_iter().find_map(|b| {
            let ports = b.port_entries();
            let (no, e) = ports.iter().find(|(_, e)| e.interface == name)?;
            Some((b.name.clone(), *no, e.interface.clone()))
        })
    }

    /// Starts copying what port `port` of `bridge` receives and sends into
    /// `sink` (see [`dataplane::capture`]).
    pub fn start_capture(
        &self,
        bridge: &str,
        port: u32,
        sink: Arc<dataplane::capture::Capture>,
    ) -> Result<(), RuntimeError> {
        let b = self.need(bridge)?;
        let r = b.threads().start_capture(port, sink);
        r.map_err(threads_error(bridge))
    }

    /// Stops a capture [`Runtime::start_capture`] started.
    pub fn stop_capture(&self, bridge: &str, port: u32) {
        if let Some(b) = self.bridge(bridge) {
            b.threads().stop_capture(port);
        }
    }

    /// Housekeeping, about once a second: removes the flows whose idle or
    /// hard timeout passed (`BridgeRt::expire_flows`: their
    /// FLOW_REMOVED go to the bridge's agent). Returns how many were
    /// removed. The agent's housekeeping calls the same for the bridges
    /// it serves; whichever comes first removes a flow, and either hands
    /// its FLOW_REMOVED to the agent.
    pub fn tick(&self) -> usize {
        {
            let mut pending = lock(&self.pending);
            if pending.is_expired() {
                pending.expire();
            }
        }
        self.all()
            .iter()
            .map(|b| b.expire_flows(openflow::COUNTER_SYNC_TIMEOUT))
            .sum()
    }

    /// A bridge's datapath id.
    pub fn dpid(&self, bridge: &str) -> Option<u64> {
        Some(self.bridge(bridge)?.dpid)
    }

    /// Sends bridge `bridge`'s table-0 misses to NORMAL, or drops them
    /// again (see [`standalone`]). False when there is no such bridge or
    /// nothing changed.
    pub fn set_miss_normal(&self, bridge: &str, on: bool) -> bool {
        self.bridge(bridge).is_some_and(|b| b.set_miss_normal(on))
    }

    /// A bridge's learning switch (fail mode standalone): turn it on while
    /// no controller is connected ([`standalone::follow_controllers`]).
    pub fn standalone(&self, bridge: &str) -> Option<Arc<standalone::Standalone>> {
        Some(self.bridge(bridge)?.standalone.clone())
    }

    /// A bridge's thread-level drops.
    pub fn thread_drops(&self, bridge: &str) -> Option<ThreadDrops> {
        Some(self.bridge(bridge)?.threads().drops())
    }

    /// A bridge's thread arrangement (`run-to-completion` or
    /// `rx-worker-tx`).
    pub fn thread_mode(&self, bridge: &str) -> Option<&'static str> {
        Some(self.bridge(bridge)?.mode)
    }

    /// A bridge's pipeline counters, summed over workers, and its
    /// packet-ins.
    pub fn pipeline_counters(&self, bridge: &str) -> Option<(Counters, u64)> {
        Some(self.bridge(bridge)?.sum_workers())
    }

    /// A bridge's flow entries with counters summed over workers.
    pub fn flows(&self, bridge: &str) -> Option<Vec<FlowLine>> {
        let b = self.bridge(bridge)?;
        let mut c = b.control();
        b.collect(&mut c);
        let tables = &c.dp.state.tables;
        Some(
            tables
                .entries()
                .map(|e| report::flow_line(e, &tables.counter(e.id).unwrap_or_default()))
                .collect(),
        )
    }

    /// One bridge's report with its `top` busiest flows (every drop
    /// counter, zeros too, when `zeros`).
    pub fn bridge_report(&self, bridge: &str, top: usize, zeros: bool) -> Option<BridgeReport> {
        Some(report::gather(&*self.bridge(bridge)?, top, zeros))
    }

    /// Counters of every bridge as text (ports, drops, the `top` busiest
    /// flows).
    pub fn report(&self, top: usize) -> String {
        let mut s = String::new();
        for b in self.all() {
            report::gather(&b, top, false).text(&mut s);
        }
        s
    }

    /// Stops every bridge's threads and the link watcher; returns the
    /// final counters (also logged).
    pub fn stop(self) -> String {
        self.halt()
    }

    /// As [`Runtime::stop`], through a shared reference: the bridges are
    /// stopped and forgotten (the runtime runs none afterwards).
    pub fn halt(&self) -> String {
        self.halt_with(|_| {})
    }

    /// [`Runtime::halt`], with `extra` adding to each bridge's final report
    /// what the runtime does not count itself (the daemon's controller-side
    /// drops).
    pub fn halt_with(&self, extra: impl Fn(&mut BridgeReport)) -> String {
        self.stop_links.store(true, Ordering::Release);
        if let Some(h) = lock(&self.link_thread).take() {
            let _ = h.join();
        }
        let mut s = String::new();
        let all = lock(&self.bridges).take_all();
        for b in all {
            let t = final_report(&b, &extra);
            tracing::info!("final counters:\n{t}");
            s.push_str(&t);
        }
        s
    }
}

#[cfg(test)]
mod tests;
