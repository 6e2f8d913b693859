//! fulmar's runtime: turns a [`datastore::Config`] into running bridges.
//!
//! [`Runtime::start`] opens every port of every bridge first (a missing
//! interface is named and nothing starts), builds each bridge's tables
//! from its static meters, groups and flows, starts one set of dataplane
//! threads per bridge ([`dataplane::threads`]) whose workers run the
//! OpenFlow pipeline ([`worker::PipelineWorker`]), and watches kernel links
//! (netlink) so a link going down or up changes the port's state bits in
//! the tables the workers read and queues a [`PortStatusEvent`] for the
//! agent. Several bridges run in one process; patch links join two of
//! them with an in-process port pair.
//!
//! The control side (flow mods, link changes) edits its own copy of each
//! bridge's tables under a mutex that only control code takes, and
//! publishes a new immutable version ([`dataplane::snapshot`]); workers
//! move to it between bursts. [`Runtime::barrier`] waits until every worker
//! uses a version.
//!
//! [`Runtime::stop`] stops the threads stage by stage and returns the final
//! counters as text (also logged with `tracing`).

pub mod openflow;
pub mod ports;
pub mod signals;
pub mod standalone;
pub mod worker;

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dataplane::dispatch::{ClassRule, DispatchKey as DpKey, Dispatcher};
use dataplane::flush::FlushPolicy;
use dataplane::link::{LinkChange, LinkWatcher};
use dataplane::patch::PatchPort;
use dataplane::snapshot::Publisher;
use dataplane::threads::{BurstSizes, PortSpec, ThreadDrops, ThreadMode, Threads, ThreadsConfig};
use dataplane::{LinkState, PortBackend, PortCounters};
use datastore::{Config, DispatchKey, ThreadMode as CfgMode};
use ofp::port::port_state;
use ofp::{FlowMod, OfpError};
use pipeline::datapath::{Counters, Datapath, DatapathConfig, Snapshot, TxPacket};
use pipeline::{GroupsConfig, MetersConfig, SwitchState, TablesConfig, Time};

pub use ports::{AfPacketMode, BackendOptions, PortError};
pub use worker::{PipelineWorker, WorkerShared};

/// Why the runtime did not start.
#[derive(Debug)]
pub enum RuntimeError {
    /// Ports that could not be opened (all of them, not just the first).
    Ports(Vec<PortError>),
    /// A static flow, group or meter the pipeline refused.
    Refused {
        /// Bridge name.
        bridge: String,
        /// Where it was written (`FILE:LINE`) and its text.
        what: String,
        /// The OpenFlow error.
        error: OfpError,
    },
    /// Threads could not be started.
    Threads {
        /// Bridge name.
        bridge: String,
        /// Why.
        error: io::Error,
    },
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Ports(errs) => {
                for (i, e) in errs.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            RuntimeError::Refused {
                bridge,
                what,
                error,
            } => write!(f, "bridge {bridge}: {what}: refused: {error}"),
            RuntimeError::Threads { bridge, error } => {
                write!(f, "bridge {bridge}: cannot start threads: {error}")
            }
        }
    }
}

impl std::error::Error for RuntimeError {}

/// A port's link went up or down (for the agent's OFPT_PORT_STATUS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStatusEvent {
    /// Bridge name.
    pub bridge: String,
    /// OpenFlow port number.
    pub port: u32,
    /// Interface name.
    pub interface: String,
    /// The link is up.
    pub up: bool,
}

/// Runtime settings that are not part of the configuration.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Backend options.
    pub backends: BackendOptions,
    /// Follow kernel link state with a netlink watcher thread.
    pub watch_links: bool,
    /// How long idle dataplane threads keep polling before they sleep
    /// (`Duration::MAX`: busy polling); `None`: the dataplane's default.
    pub poll_window: Option<Duration>,
    /// Entries of each worker's flow cache (0: none); `None`: the
    /// pipeline's default ([`pipeline::datapath::DEFAULT_FLOW_CACHE`]).
    pub flow_cache: Option<usize>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            backends: BackendOptions::default(),
            watch_links: true,
            poll_window: None,
            flow_cache: None,
        }
    }
}

/// The control side of a bridge: its own pipeline instance (tables,
/// groups, meters, port table, settings; packet-outs run here), the
/// counters collected from the workers so far, and the feeding end of the
/// injection port that carries packet-out results to the dataplane.
struct Control {
    dp: Datapath,
    totals: Counters,
    inject: PatchPort,
}

/// The switch-side number of each bridge's injection port (not an
/// OpenFlow port: above `OFPP_MAX`, below the reserved numbers).
pub const INJECT_PORT: u32 = 0xffff_fff0;

/// Sender of agent events (packet-in, flow-removed, port-status).
pub type EventSender = tokio::sync::mpsc::Sender<agent::SwitchEvent>;

struct BridgeRt {
    name: String,
    dpid: u64,
    control: Mutex<Control>,
    publisher: Publisher<Snapshot>,
    threads: Threads,
    workers: Vec<Arc<WorkerShared>>,
    /// Port number → interface name, in port order.
    interfaces: BTreeMap<u32, String>,
    /// Where packet-ins, flow-removed and port-status go once an agent
    /// runs (set once; read without locking by the workers).
    events: Arc<OnceLock<EventSender>>,
    /// The learning switch the workers use while the bridge is standalone.
    standalone: Arc<standalone::Standalone>,
    epoch: Instant,
}

/// Running bridges.
pub struct Runtime {
    bridges: Vec<Arc<BridgeRt>>,
    memory: Mutex<HashMap<String, PatchPort>>,
    events: Mutex<Receiver<PortStatusEvent>>,
    stop_links: Arc<AtomicBool>,
    link_thread: Option<JoinHandle<()>>,
}

/// One flow entry with its counters (summed over workers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowLine {
    /// The entry in `ovs-ofctl` syntax.
    pub text: String,
    /// Packets that hit it.
    pub packets: u64,
    /// Bytes that hit it.
    pub bytes: u64,
}

fn threads_config(name: &str, cfg: &Config) -> ThreadsConfig {
    let d = &cfg.dataplane;
    let key = |k: DispatchKey| match k {
        DispatchKey::Port => DpKey::Port,
        DispatchKey::L2 => DpKey::L2,
        DispatchKey::FiveTuple | DispatchKey::PriorityClass => DpKey::FiveTuple,
    };
    let workers = d.worker_threads.max(1);
    let dispatcher = if d.dispatch.key == DispatchKey::PriorityClass {
        let rules = d
            .dispatch
            .rules
            .iter()
            .map(|r| ClassRule {
                ip_dscp: r.ip_dscp,
                vlan_pcp: r.vlan_pcp,
                ip_proto: r.ip_proto,
                udp_src: r.udp_src,
                udp_dst: r.udp_dst,
                tcp_src: r.tcp_src,
                tcp_dst: r.tcp_dst,
                worker: r.worker,
            })
            .collect();
        Dispatcher::with_classes(key(d.dispatch.fallback), workers, rules)
    } else {
        Dispatcher::new(key(d.dispatch.key), workers)
    };
    let b = d.burst;
    ThreadsConfig {
        name: name.to_string(),
        mode: match d.mode {
            CfgMode::RunToCompletion => ThreadMode::RunToCompletion,
            CfgMode::RxWorkerTx => ThreadMode::RxWorkerTx,
        },
        rx_threads: d.rx_threads.max(1),
        workers,
        tx_threads: d.tx_threads.max(1),
        bursts: BurstSizes {
            rx_read: usize::from(b.rx_read),
            rx_write: usize::from(b.rx_write),
            worker_read: usize::from(b.worker_read),
            worker_write: usize::from(b.worker_write),
            tx_read: usize::from(b.tx_read),
            tx_write: usize::from(b.tx_write),
        },
        flush: FlushPolicy {
            idle: Duration::from_micros(u64::from(d.flush.flush_idle_us)),
            max_wait: Duration::from_micros(u64::from(d.flush.max_batch_wait_us)),
        },
        rx_ring: d.rings.rx_ring as usize,
        tx_ring: d.rings.tx_ring as usize,
        dispatcher,
        rx_cores: d.rx_cores.clone(),
        worker_cores: d.worker_cores.clone(),
        tx_cores: d.tx_cores.clone(),
        ..ThreadsConfig::default()
    }
}

fn build_state(br: &datastore::Bridge, now: Time) -> Result<SwitchState, RuntimeError> {
    let mut state = SwitchState::new(
        TablesConfig {
            n_tables: br.n_tables,
            max_entries: br.flow_table_capacity as usize,
            ..TablesConfig::default()
        },
        GroupsConfig::default(),
        MetersConfig::default(),
    );
    let refused = |what: String, error| RuntimeError::Refused {
        bridge: br.name.clone(),
        what,
        error,
    };
    for m in &br.meters {
        state
            .meter_mod(&m.meter_mod, now)
            .map_err(|e| refused(format!("{}: {}", m.source, m.text), e))?;
    }
    for g in &br.groups {
        state
            .group_mod(&g.group_mod, now)
            .map_err(|e| refused(format!("{}: {}", g.source, g.text), e))?;
    }
    for f in &br.flows {
        state
            .flow_mod(&f.flow_mod, now)
            .map_err(|e| refused(format!("{}: {}", f.source, f.text), e))?;
    }
    Ok(state)
}

fn link_bits(s: LinkState) -> u32 {
    match s {
        LinkState::Down => port_state::LINK_DOWN,
        LinkState::Up | LinkState::Unknown => 0,
    }
}

impl Runtime {
    /// Opens every port, builds every bridge and starts the threads.
    pub fn start(config: &Config, opts: &RuntimeOptions) -> Result<Runtime, RuntimeError> {
        let epoch = Instant::now();
        let mut states = Vec::new();
        for br in &config.bridges {
            states.push(build_state(br, Time(0))?);
        }
        let opened = ports::open_all(config, &opts.backends).map_err(RuntimeError::Ports)?;
        let (tx_events, rx_events) = mpsc::channel();
        let mut bridges = Vec::new();
        for ((br, mut state), ports) in config.bridges.iter().zip(states).zip(opened.bridges) {
            let mut interfaces = BTreeMap::new();
            let mut specs = Vec::new();
            for p in ports {
                state.port_table.add_port(
                    ofp::Port {
                        port_no: p.number,
                        hw_addr: ofp::oxm::MacAddr(openflow::mac_of(&p.interface, p.number)),
                        name: p.interface.chars().take(15).collect(),
                        state: link_bits(p.backend.link_state()),
                        ..ofp::Port::default()
                    },
                    Time(0),
                );
                interfaces.insert(p.number, p.interface.clone());
                specs.push(PortSpec::new(p.number, p.backend));
            }
            let (inject_sw, inject) =
                dataplane::patch::pair("inject", "inject-feed", ports::PATCH_RING);
            specs.push(PortSpec {
                number: INJECT_PORT,
                backend: Box::new(inject_sw),
                woken: true,
            });
            let dp_config = DatapathConfig {
                miss_send_len: br.miss_send_len,
                // Packet-ins carry the packet; no buffer ids to resolve
                // across workers.
                n_buffers: 0,
                ..DatapathConfig::default()
            };
            let snapshot = Snapshot::new(state, dp_config);
            let publisher = Publisher::new(snapshot.clone());
            let mut tcfg = threads_config(&br.name, config);
            if let Some(w) = opts.poll_window {
                tcfg.poll_window = w;
            }
            let mut workers = Vec::new();
            let events: Arc<OnceLock<EventSender>> = Arc::default();
            let standalone = Arc::new(standalone::Standalone::new(
                interfaces.keys().copied().collect(),
            ));
            let n_workers = u32::try_from(tcfg.workers).unwrap_or(u32::MAX);
            let threads = Threads::start(&tcfg, specs, &mut |i| {
                let shared = Arc::new(WorkerShared {
                    events: events.clone(),
                    standalone: standalone.clone(),
                    ..WorkerShared::default()
                });
                workers.push(shared.clone());
                let mut w = PipelineWorker::new(
                    publisher.reader(),
                    u32::try_from(i).unwrap_or(0),
                    n_workers,
                    epoch,
                    shared,
                );
                if let Some(n) = opts.flow_cache {
                    w.set_flow_cache(n);
                }
                Box::new(w)
            })
            .map_err(|error| RuntimeError::Threads {
                bridge: br.name.clone(),
                error,
            })?;
            tracing::info!(
                bridge = %br.name,
                dpid = format_args!("{:#018x}", br.dpid),
                ports = ?interfaces,
                threads = threads.thread_count(),
                mode = tcfg_mode(&tcfg),
                flows = snapshot.state.tables.len(),
                "bridge started"
            );
            let dp = Datapath::new(snapshot.state, snapshot.ports, snapshot.config);
            bridges.push(Arc::new(BridgeRt {
                name: br.name.clone(),
                dpid: br.dpid,
                control: Mutex::new(Control {
                    dp,
                    totals: Counters::default(),
                    inject,
                }),
                publisher,
                threads,
                workers,
                interfaces,
                events,
                standalone,
                epoch,
            }));
        }
        let stop_links = Arc::new(AtomicBool::new(false));
        let link_thread = if opts.watch_links {
            spawn_link_watcher(&bridges, config, tx_events, stop_links.clone())
        } else {
            None
        };
        Ok(Runtime {
            bridges,
            memory: Mutex::new(opened.memory),
            events: Mutex::new(rx_events),
            stop_links,
            link_thread,
        })
    }

    fn bridge(&self, name: &str) -> Option<&Arc<BridgeRt>> {
        self.bridges.iter().find(|b| b.name == name)
    }

    /// The bridges' names, in configuration order.
    pub fn bridge_names(&self) -> Vec<String> {
        self.bridges.iter().map(|b| b.name.clone()).collect()
    }

    /// Takes the far end of a `memory` port (tests inject packets into it
    /// and collect what the switch sends out of it).
    pub fn take_memory_port(&self, interface: &str) -> Option<PatchPort> {
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(interface)
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

    /// Sets a port's link state (what the netlink watcher does; also for
    /// ports without a kernel interface). Queues no event.
    pub fn set_link(&self, bridge: &str, port: u32, up: bool) -> Option<u64> {
        let b = self.bridge(bridge)?;
        Some(set_link(b, port, up))
    }

    /// The next link event, if one is queued.
    pub fn try_port_event(&self) -> Option<PortStatusEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .try_recv()
            .ok()
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
        Some(openflow::BridgeSwitch::new(b.clone()))
    }

    /// Housekeeping, about once a second: collects the workers' counters
    /// and removes flows whose idle or hard timeout passed (publishing the
    /// tables when some were removed). Returns how many were removed. The
    /// agent's housekeeping does the same for bridges it serves (and also
    /// sends FLOW_REMOVED).
    pub fn tick(&self) -> usize {
        let mut n = 0;
        for b in &self.bridges {
            let now = b.now();
            let mut c = b.control();
            b.collect(&mut c);
            let before = c.dp.state.tables.len();
            // The events are only for SEND_FLOW_REM entries; count entries.
            c.dp.state.expire(now);
            let gone = before - c.dp.state.tables.len();
            if gone > 0 {
                b.publish(&c);
            }
            n += gone;
        }
        n
    }

    /// A bridge's datapath id.
    pub fn dpid(&self, bridge: &str) -> Option<u64> {
        Some(self.bridge(bridge)?.dpid)
    }

    /// A bridge's learning switch (fail mode standalone): turn it on while
    /// no controller is connected ([`standalone::follow_controllers`]).
    pub fn standalone(&self, bridge: &str) -> Option<Arc<standalone::Standalone>> {
        Some(self.bridge(bridge)?.standalone.clone())
    }

    /// A bridge's thread-level drops.
    pub fn thread_drops(&self, bridge: &str) -> Option<ThreadDrops> {
        Some(self.bridge(bridge)?.threads.drops())
    }

    /// A bridge's pipeline counters, summed over workers, and its
    /// packet-ins.
    pub fn pipeline_counters(&self, bridge: &str) -> Option<(Counters, u64)> {
        let b = self.bridge(bridge)?;
        Some(sum_workers(b))
    }

    /// A bridge's flow entries with counters summed over workers.
    pub fn flows(&self, bridge: &str) -> Option<Vec<FlowLine>> {
        let b = self.bridge(bridge)?;
        Some(flow_lines(b))
    }

    /// Counters of every bridge as text (ports, drops, flows).
    pub fn report(&self) -> String {
        let mut s = String::new();
        for b in &self.bridges {
            report_bridge(b, &mut s);
        }
        s
    }

    /// Stops every bridge's threads and the link watcher; returns the
    /// final counters (also logged).
    pub fn stop(mut self) -> String {
        self.stop_links.store(true, Ordering::Release);
        if let Some(h) = self.link_thread.take() {
            let _ = h.join();
        }
        let mut s = String::new();
        for b in std::mem::take(&mut self.bridges) {
            let text = match Arc::try_unwrap(b) {
                Ok(mut b) => {
                    b.threads.halt();
                    let mut t = String::new();
                    report_bridge(&b, &mut t);
                    t
                }
                Err(b) => {
                    let mut t = String::new();
                    report_bridge(&b, &mut t);
                    t
                }
            };
            tracing::info!("final counters:\n{text}");
            s.push_str(&text);
        }
        s
    }
}

fn tcfg_mode(t: &ThreadsConfig) -> &'static str {
    match t.mode {
        ThreadMode::RunToCompletion => "run-to-completion",
        ThreadMode::RxWorkerTx => "rx-worker-tx",
    }
}

fn sum_workers(b: &BridgeRt) -> (Counters, u64) {
    let mut c = b.control();
    b.collect(&mut c);
    let pins = b
        .workers
        .iter()
        .map(|w| w.packet_ins.load(Ordering::Relaxed))
        .sum();
    (c.totals.clone(), pins)
}

fn flow_lines(b: &BridgeRt) -> Vec<FlowLine> {
    let mut c = b.control();
    b.collect(&mut c);
    let tables = &c.dp.state.tables;
    (0..tables.n_tables())
        .filter_map(|t| tables.table(t))
        .flat_map(|t| t.entries())
        .map(|e| FlowLine {
            text: flowtext::format_flow(&FlowMod {
                table_id: e.table_id,
                priority: e.priority,
                cookie: e.cookie,
                idle_timeout: e.idle_timeout,
                hard_timeout: e.hard_timeout,
                flags: e.flags,
                match_: e.match_.clone(),
                instructions: e.instructions.clone(),
                ..FlowMod::default()
            }),
            packets: e.packet_count,
            bytes: e.byte_count,
        })
        .collect()
}

impl BridgeRt {
    fn control(&self) -> std::sync::MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Time {
        Time(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Publishes the control side's tables to the workers and wakes them;
    /// returns the version.
    fn publish(&self, c: &Control) -> u64 {
        let v = self.publisher.publish(Snapshot {
            state: c.dp.state.clone(),
            ports: c.dp.ports.clone(),
            config: c.dp.config.clone(),
        });
        self.threads.wake_all();
        v
    }

    /// Takes what the workers counted since the last collection and folds
    /// it into the control side's state (flow, table, group, meter and
    /// port counters) and totals.
    /// Asks every worker to hand over its counters now and waits (at most
    /// `timeout`) until each has; a worker that does not answer in time
    /// (stopped, or stuck in a long burst) is simply collected as it is.
    fn request_counters(&self, timeout: Duration) {
        let wanted: Vec<u64> = self
            .workers
            .iter()
            .map(|w| w.sync_requested.fetch_add(1, Ordering::AcqRel) + 1)
            .collect();
        self.threads.wake_all();
        let deadline = Instant::now() + timeout;
        while self
            .workers
            .iter()
            .zip(&wanted)
            .any(|(w, &v)| w.sync_done.load(Ordering::Acquire) < v)
        {
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn collect(&self, c: &mut Control) {
        for w in &self.workers {
            let taken = std::mem::take(&mut *w.counters.lock().unwrap_or_else(|e| e.into_inner()));
            c.dp.state.fold(&taken);
            c.totals.merge(&taken);
        }
        // The control side's own: packet-outs through OUTPUT:TABLE.
        let own = c.dp.take_counters();
        c.dp.state.fold(&own);
        c.totals.merge(&own);
    }

    /// Hands packets (packet-out results) to the dataplane through the
    /// injection port; counts what did not fit.
    fn transmit(&self, c: &mut Control, tx: Vec<TxPacket>) -> usize {
        if tx.is_empty() {
            return 0;
        }
        let mut burst = dataplane::Burst::with_limit(tx.len());
        for t in tx {
            let (mut v, head) = t.packet.into_raw_parts();
            // The output port travels in front of the frame.
            let head = if head >= 4 {
                head - 4
            } else {
                v.splice(head..head, [0u8; 4]);
                head
            };
            if let Some(slot) = v.get_mut(head..head + 4) {
                slot.copy_from_slice(&t.port.to_be_bytes());
            }
            let _ = burst.push(dataplane::PacketBuf::from_vec(v, head));
        }
        let n = c.inject.tx_burst(&mut burst).unwrap_or(0);
        self.threads.wake_all();
        n
    }

    fn port_counters(&self) -> BTreeMap<u32, PortCounters> {
        let mut m = self.threads.port_counters();
        m.remove(&INJECT_PORT);
        m
    }

    /// The dataplane threads' drops per port (rings, TX bursts, failed
    /// port calls); the injection port's count against no OpenFlow port.
    fn port_drops(&self) -> BTreeMap<u32, ThreadDrops> {
        let mut m = self.threads.port_drops();
        m.remove(&INJECT_PORT);
        m
    }

    /// Completes OpenFlow port statistics, which the pipeline counts as
    /// packets enter and leave it, with what happened outside it: frames
    /// lost before the pipeline saw them (the kernel's socket or ring
    /// overflowing, a full RX → worker ring, malformed or truncated
    /// frames) are `rx_dropped`; packets the pipeline output that the port
    /// never sent (a full worker → TX ring or TX burst, a link that went
    /// down, an oversize frame, a failed send) move from `tx_packets` to
    /// `tx_dropped`; failed port calls are `rx_errors` / `tx_errors`.
    fn complete_port_stats(&self, stats: &mut [ofp::stats::PortStats]) {
        let counters = self.port_counters();
        let drops = self.port_drops();
        for s in stats {
            let c = counters.get(&s.port_no).copied().unwrap_or_default();
            let d = drops.get(&s.port_no).copied().unwrap_or_default();
            s.rx_dropped = s.rx_dropped.saturating_add(c.rx_dropped() + d.rx_total());
            let unsent = c.tx_dropped() + c.tx_errors + d.tx_total();
            s.tx_packets = s.tx_packets.saturating_sub(unsent);
            s.tx_dropped = s
                .tx_dropped
                .saturating_add(c.tx_dropped() + d.tx_total() - d.port_error);
            s.rx_errors = s.rx_errors.saturating_add(c.rx_errors + d.rx_error);
            s.tx_errors = s.tx_errors.saturating_add(c.tx_errors + d.port_error);
        }
    }
}

fn report_bridge(b: &BridgeRt, s: &mut String) {
    report_parts(
        b,
        &b.port_counters(),
        &b.port_drops(),
        &b.threads.drops(),
        s,
    );
}

/// The text report: per port, the frames read and sent and those lost at
/// that port (by the port itself or by the threads' rings and bursts,
/// attributed as in [`BridgeRt::complete_port_stats`]), then every drop
/// cause by name, then the flows.
fn report_parts(
    b: &BridgeRt,
    ports: &BTreeMap<u32, PortCounters>,
    port_drops: &BTreeMap<u32, ThreadDrops>,
    drops: &ThreadDrops,
    s: &mut String,
) {
    let _ = writeln!(s, "bridge {} (dpid {:#x}):", b.name, b.dpid);
    for (no, c) in ports {
        let name = b.interfaces.get(no).map(String::as_str).unwrap_or("?");
        let d = port_drops.get(no).copied().unwrap_or_default();
        let _ = writeln!(
            s,
            "  port {no} ({name}): rx {} pkts {} bytes, drop {}; tx {} pkts {} bytes, drop {}",
            c.rx_packets,
            c.rx_bytes,
            c.rx_dropped() + c.rx_errors + d.rx_total(),
            c.tx_packets,
            c.tx_bytes,
            c.tx_dropped() + c.tx_errors + d.tx_total()
        );
    }
    let mut p = PortCounters::default();
    for c in ports.values() {
        p = p.merged(c);
    }
    let (pc, pins) = sum_workers(b);
    let sa = b.standalone.counters();
    let mut named: Vec<String> = pc
        .drops
        .named()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    for (k, n) in [
        ("port_rx_full", p.rx_drops.ring_full),
        ("port_rx_truncated", p.rx_drops.truncated),
        ("port_rx_malformed", p.rx_drops.malformed),
        ("port_rx_errors", p.rx_errors),
        ("port_tx_oversize", p.tx_drops.oversize),
        ("port_tx_link_down", p.tx_drops.link_down),
        ("port_tx_enobufs", p.tx_drops.queue_full),
        ("port_tx_runt", p.tx_drops.runt),
        ("port_tx_errors", p.tx_errors),
        ("rx_ring_full", drops.rx_ring_full),
        ("tx_ring_full", drops.tx_ring_full),
        ("tx_queue_full", drops.tx_queue_full),
        ("no_port", drops.no_port),
        ("port_error", drops.port_error),
        ("rx_error", drops.rx_error),
        ("packet_in_unsent", pins),
        ("standalone_same_port", sa.same_port),
        ("standalone_runt", sa.runt),
    ] {
        if n > 0 {
            named.push(format!("{k}={n}"));
        }
    }
    let _ = writeln!(
        s,
        "  drops: {}",
        if named.is_empty() {
            "none".to_string()
        } else {
            named.join(" ")
        }
    );
    if b.standalone.is_active() || sa.forwarded + sa.flooded > 0 {
        let _ = writeln!(
            s,
            "  learning switch (fail mode standalone){}: forwarded {} flooded {}",
            if b.standalone.is_active() {
                ", active"
            } else {
                ""
            },
            sa.forwarded,
            sa.flooded
        );
    }
    for f in flow_lines(b) {
        let _ = writeln!(
            s,
            "  n_packets={} n_bytes={} {}",
            f.packets, f.bytes, f.text
        );
    }
}

/// Sets the link bit of one port, publishes, and tells the agent (if
/// one runs) with a PORT_STATUS.
fn set_link(b: &BridgeRt, port: u32, up: bool) -> u64 {
    let mut c = b.control();
    let mut state =
        c.dp.state
            .port_table
            .get(port)
            .map(|p| p.state)
            .unwrap_or_default();
    if up {
        state &= !port_state::LINK_DOWN;
    } else {
        state |= port_state::LINK_DOWN;
    }
    let changed = c.dp.state.port_table.set_state(port, state);
    if let Some(mut info) = c.dp.ports.get(port) {
        info.state = state;
        c.dp.ports.set(port, info);
    }
    let v = b.publish(&c);
    drop(c);
    if let (Some(desc), Some(tx)) = (changed, b.events.get()) {
        let _ = tx.try_send(agent::SwitchEvent::PortStatus(ofp::PortStatus {
            reason: ofp::port_status::port_reason::MODIFY,
            desc,
        }));
    }
    v
}

fn spawn_link_watcher(
    bridges: &[Arc<BridgeRt>],
    config: &Config,
    events: Sender<PortStatusEvent>,
    stop: Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    // Kernel interfaces only.
    let mut by_name: HashMap<String, Vec<(Arc<BridgeRt>, u32)>> = HashMap::new();
    for iref in config.interfaces() {
        if !iref.backend.is_kernel() {
            continue;
        }
        if let Some(b) = bridges.iter().find(|b| b.name == iref.bridge) {
            by_name
                .entry(iref.interface.to_string())
                .or_default()
                .push((b.clone(), iref.port));
        }
    }
    if by_name.is_empty() {
        return None;
    }
    let mut watcher = match LinkWatcher::new() {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("link watcher unavailable, port states stay as at start: {e}");
            return None;
        }
    };
    std::thread::Builder::new()
        .name("fulmar-links".into())
        .spawn(move || {
            let mut known: HashMap<String, bool> = HashMap::new();
            let mut evs = Vec::new();
            while !stop.load(Ordering::Acquire) {
                evs.clear();
                if watcher.poll(&mut evs).unwrap_or(0) == 0 {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                for ev in &evs {
                    let Some(name) = &ev.name else { continue };
                    let Some(targets) = by_name.get(name) else {
                        continue;
                    };
                    let up = ev.change == LinkChange::Present && ev.state == LinkState::Up;
                    if known.insert(name.clone(), up) == Some(up) {
                        continue;
                    }
                    for (b, port) in targets {
                        set_link(b, *port, up);
                        tracing::info!(bridge = %b.name, port, interface = %name, up, "link changed");
                        let _ = events.send(PortStatusEvent {
                            bridge: b.name.clone(),
                            port: *port,
                            interface: name.clone(),
                            up,
                        });
                    }
                }
            }
        })
        .ok()
}

#[cfg(test)]
mod tests;
