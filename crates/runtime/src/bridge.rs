//! One running bridge: its control side (a pipeline instance whose tables
//! the agent and the management modules change), the snapshot publisher
//! its workers read, its dataplane threads and its ports.
//!
//! The control side edits its own copy of the tables under a mutex that
//! only control code takes and publishes a new immutable version; workers
//! move to it between bursts. Ports come and go while the bridge runs
//! ([`BridgeRt::add_port`], [`BridgeRt::remove_port`]): the threads take
//! the port over between bursts, so the other ports keep forwarding.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use dataplane::dispatch::{ClassRule, DispatchKey as DpKey, Dispatcher};
use dataplane::flush::FlushPolicy;
use dataplane::patch::PatchPort;
use dataplane::placement;
use dataplane::snapshot::Publisher;
use dataplane::threads::{BurstSizes, PortSpec, ThreadDrops, ThreadMode, Threads, ThreadsConfig};
use dataplane::{LinkState, PortBackend, PortCounters};
use datastore::{Config, CoreAssign, DispatchKey, ThreadMode as CfgMode};
use ofp::port::port_state;
use pipeline::datapath::{Counters, Datapath, DatapathConfig, PortInfo, Snapshot, TxPacket};
use pipeline::{GroupsConfig, MetersConfig, SwitchState, TablesConfig, Time};

use crate::ports::{self, OpenPort};
use crate::{standalone, EventSender, PipelineWorker, RuntimeError, RuntimeOptions, WorkerShared};

/// The switch-side number of each bridge's injection port (not an
/// OpenFlow port: above `OFPP_MAX`, below the reserved numbers).
pub const INJECT_PORT: u32 = 0xffff_fff0;

/// The control side of a bridge: its own pipeline instance (tables,
/// groups, meters, port table, settings; packet-outs run here), the
/// counters collected from the workers so far, and the feeding end of the
/// injection port that carries packet-out results to the dataplane.
pub(crate) struct Control {
    pub(crate) dp: Datapath,
    pub(crate) totals: Counters,
    pub(crate) inject: PatchPort,
    /// Packets the injection ring had no room for, by output port (they
    /// count as that port's `tx_ring_full` drops).
    pub(crate) inject_lost: BTreeMap<u32, u64>,
    /// The last wait for room in the injection ring ran out: the workers
    /// are not draining it, so the next packets do not wait.
    pub(crate) inject_stalled: bool,
    /// FLOW_REMOVED reports of entries already gone from the control
    /// side's tables, not yet handed to the agent: every collection of
    /// the workers' counters adds what they counted for those entries
    /// (folding drops it: the tables no longer hold them), so frames
    /// forwarded until the workers took tables without them count,
    /// whichever thread collects. Each with its report's ticket: 0 while
    /// the removal may be unpublished, then the ticket of the
    /// [`BridgeRt::publish_and_report`] that sends it.
    pub(crate) removing: Vec<(u64, pipeline::FlowRemoved)>,
    /// The last ticket [`BridgeRt::publish_and_report`] gave.
    pub(crate) last_ticket: u64,
}

impl Control {
    /// Keeps `removed` (entries just removed, not yet published) until a
    /// [`BridgeRt::publish_and_report`] sends them.
    pub(crate) fn hold_removed(&mut self, removed: Vec<pipeline::FlowRemoved>) {
        self.removing.extend(removed.into_iter().map(|r| (0, r)));
    }

    /// Whether removals wait for a publish and a report.
    pub(crate) fn holds_unreported(&self) -> bool {
        self.removing.iter().any(|(t, _)| *t == 0)
    }
}

/// How long packets from the control side (packet-outs) wait for the
/// workers to make room in the injection ring (for any room at all: the
/// wait starts again whenever some was made) before what does not fit is
/// dropped.
const INJECT_WAIT: Duration = Duration::from_millis(100);
/// How often the ring is tried again meanwhile.
const INJECT_POLL: Duration = Duration::from_micros(50);

/// A port of a running bridge, as the control side knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortEntry {
    /// Interface name (`patch:PEER_BRIDGE:PEER_PORT` for a patch port).
    pub interface: String,
    /// A kernel interface whose link state the netlink watcher follows.
    pub kernel: bool,
}

pub(crate) struct BridgeRt {
    pub(crate) name: String,
    pub(crate) dpid: u64,
    pub(crate) control: Mutex<Control>,
    pub(crate) publisher: Publisher<Snapshot>,
    /// Locked by control code only (publishing wakes the threads; a port
    /// change waits for them to take it over).
    pub(crate) threads: Mutex<Threads>,
    pub(crate) workers: Vec<Arc<WorkerShared>>,
    /// Port number → interface, in port order.
    pub(crate) ports: Mutex<BTreeMap<u32, PortEntry>>,
    /// Where packet-ins, flow-removed and port-status go once an agent
    /// runs (set once; read without locking by the workers).
    pub(crate) events: Arc<OnceLock<EventSender>>,
    /// The learning switch the workers use while the bridge is standalone.
    pub(crate) standalone: Arc<standalone::Standalone>,
    /// A controller channel is open (set by the bridge's agent; read by
    /// the workers before they hand over packet-ins).
    pub(crate) controller_up: Arc<std::sync::atomic::AtomicBool>,
    pub(crate) epoch: Instant,
    pub(crate) mode: &'static str,
    /// The threads' settings, cores included (ports added later are
    /// placed by them).
    pub(crate) tcfg: ThreadsConfig,
    /// Ports with egress queues: the queue ids configured and the
    /// scheduler's counters (copied into the port table by `collect`).
    pub(crate) qos: Mutex<BTreeMap<u32, (Vec<u32>, dataplane::threads::QueueStatsHandle)>>,
}

/// The dataplane's scheduler settings for a port's configured queues
/// (each queue holds [`dataplane::qos::DEFAULT_QUEUE_LEN`] packets).
fn qos_spec(q: &datastore::PortQos) -> dataplane::qos::QosSpec {
    dataplane::qos::QosSpec {
        max_rate: q.max_rate,
        queues: q
            .queues
            .iter()
            .map(|c| dataplane::qos::QueueSpec {
                priority: c.priority,
                min_rate: c.min_rate,
                max_rate: c.max_rate,
                ..dataplane::qos::QueueSpec::new(c.id)
            })
            .collect(),
    }
}

/// A rate as OpenFlow's queue properties give it: tenths of a percent
/// of `reference` (the port's max_rate; ports report no speed), at most
/// 1000; `None` for no rate or no reference.
fn permille(rate: u64, reference: u64) -> Option<u16> {
    if rate == 0 || reference == 0 {
        return None;
    }
    let v = (u128::from(rate) * 1000 / u128::from(reference)).min(1000);
    u16::try_from(v).ok()
}

/// The CPUs of each kind of thread (RX, workers, TX): the `*_cores`
/// lists, or those `core_assign` picks on this machine.
fn placed_cores(d: &datastore::Dataplane) -> Result<[Option<Vec<usize>>; 3], String> {
    let Some(policy) = d.core_assign else {
        return Ok([
            d.rx_cores.clone(),
            d.worker_cores.clone(),
            d.tx_cores.clone(),
        ]);
    };
    let policy = match policy {
        CoreAssign::Performance => placement::CoreAssign::Performance,
        CoreAssign::Balance => placement::CoreAssign::Balance,
        CoreAssign::Minimum => placement::CoreAssign::Minimum,
    };
    let (nrx, ntx) = match d.mode {
        CfgMode::RunToCompletion => (0, 0),
        CfgMode::RxWorkerTx => (d.rx_threads.max(1), d.tx_threads.max(1)),
    };
    let plan = placement::assign(
        policy,
        nrx,
        d.worker_threads.max(1),
        ntx,
        &placement::allowed_cpus(),
        &placement::siblings,
    )?;
    let some = |v: Vec<usize>| (!v.is_empty()).then_some(v);
    Ok([some(plan.rx), some(plan.workers), some(plan.tx)])
}

/// The thread index of the reader (or TX thread) pinned to each CPU in
/// `cores`; `what` names the list in errors.
fn threads_on(
    wanted: &[usize],
    cores: &Option<Vec<usize>>,
    what: &str,
) -> Result<Vec<usize>, String> {
    wanted
        .iter()
        .map(|c| {
            cores
                .as_ref()
                .and_then(|list| list.iter().position(|x| x == c))
                .ok_or_else(|| format!("no {what} runs on core {c} (cores: {cores:?})"))
        })
        .collect()
}

/// A port for the threads, with its queues placed as the configuration
/// asks (`rx_queue_cores`, `tx_core`).
fn port_spec(t: &ThreadsConfig, p: OpenPort) -> io::Result<PortSpec> {
    let (readers, reader_kind) = match t.mode {
        ThreadMode::RunToCompletion => (&t.worker_cores, "worker"),
        ThreadMode::RxWorkerTx => (&t.rx_cores, "RX thread"),
    };
    let bad = |e: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("port {}: {e}", p.number),
        )
    };
    let chosen = match &p.rx_queue_cores {
        Some(cores) => threads_on(cores, readers, reader_kind).map_err(bad)?,
        None => Vec::new(),
    };
    let sender = match p.tx_core {
        Some(c) if t.mode == ThreadMode::RxWorkerTx => threads_on(&[c], &t.tx_cores, "TX thread")
            .map_err(bad)?
            .pop(),
        _ => None,
    };
    let mut spec = PortSpec::new(p.number, p.backend);
    spec.readers = chosen;
    spec.sender = sender;
    Ok(spec)
}

pub(crate) fn threads_config(name: &str, cfg: &Config) -> Result<ThreadsConfig, String> {
    let d = &cfg.dataplane;
    let [rx_cores, worker_cores, tx_cores] = placed_cores(d)?;
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
    Ok(ThreadsConfig {
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
        rx_cores,
        worker_cores,
        tx_cores,
        ..ThreadsConfig::default()
    })
}

/// A bridge's empty tables, sized as configured.
fn empty_state(br: &datastore::Bridge) -> SwitchState {
    SwitchState::new(
        TablesConfig {
            n_tables: br.n_tables,
            max_entries: br.flow_table_capacity as usize,
            max_bytes: (br.flow_memory_limit_mib as usize) << 20,
            ..TablesConfig::default()
        },
        GroupsConfig::default(),
        MetersConfig::default(),
    )
}

/// A bridge's tables with what was saved at the last stop
/// ([`crate::saved`]) instead of its static meters, groups and flows.
pub(crate) fn restore_state(
    br: &datastore::Bridge,
    saved: &crate::saved::SavedTables,
    now: Time,
) -> Result<SwitchState, RuntimeError> {
    let mut state = fill(
        br,
        now,
        saved
            .meters
            .iter()
            .map(|m| (m, move || format!("saved {}", flowtext::format_meter(m)))),
        saved
            .groups
            .iter()
            .map(|g| (g, move || format!("saved {}", flowtext::format_group(g)))),
    )?;
    for f in &saved.flows {
        state
            .flow_mod(f, now)
            .map_err(|error| RuntimeError::Refused {
                bridge: br.name.clone(),
                what: format!("saved {}", flowtext::format_flow(f)),
                error,
            })?;
    }
    Ok(state)
}

/// A bridge's tables with its static meters, groups and flows.
pub(crate) fn build_state(br: &datastore::Bridge, now: Time) -> Result<SwitchState, RuntimeError> {
    let mut state = fill(
        br,
        now,
        br.meters
            .iter()
            .map(|m| (&m.meter_mod, move || format!("{}: {}", m.source, m.text))),
        br.groups
            .iter()
            .map(|g| (&g.group_mod, move || format!("{}: {}", g.source, g.text))),
    )?;
    install_static_flows(&mut state, br, now)?;
    Ok(state)
}

/// Empty tables sized for `br` with the meters, then the groups
/// installed; the first one refused is named by its description (made
/// only then).
fn fill<'a>(
    br: &datastore::Bridge,
    now: Time,
    meters: impl Iterator<Item = (&'a ofp::MeterMod, impl Fn() -> String)>,
    groups: impl Iterator<Item = (&'a ofp::GroupMod, impl Fn() -> String)>,
) -> Result<SwitchState, RuntimeError> {
    let mut state = empty_state(br);
    let refused = |what: &dyn Fn() -> String, error| RuntimeError::Refused {
        bridge: br.name.clone(),
        what: what(),
        error,
    };
    for (m, what) in meters {
        state.meter_mod(m, now).map_err(|e| refused(&what, e))?;
    }
    for (g, what) in groups {
        state.group_mod(g, now).map_err(|e| refused(&what, e))?;
    }
    Ok(state)
}

/// Static flows parsed per block, a block ahead of their installation.
const FLOW_BLOCK: usize = 8192;

/// Installs `br`'s static flows in order. The model keeps only their text,
/// so each is parsed again: on a second thread, a few blocks ahead of the
/// installation, when there are more than a block of them (a million
/// flows take about 2 s to parse and 3 s to install on one core here).
fn install_static_flows(
    state: &mut SwitchState,
    br: &datastore::Bridge,
    now: Time,
) -> Result<(), RuntimeError> {
    let install = |state: &mut SwitchState,
                   f: &datastore::StaticFlow,
                   parsed: Result<ofp::FlowMod, flowtext::ParseError>|
     -> Result<(), RuntimeError> {
        let what = || format!("{}: {}", f.source, f.text);
        let fm = parsed.map_err(|e| RuntimeError::Unparsable {
            bridge: br.name.clone(),
            what: what(),
            error: e.message,
        })?;
        state
            .flow_mod(&fm, now)
            .map_err(|error| RuntimeError::Refused {
                bridge: br.name.clone(),
                what: what(),
                error,
            })?;
        Ok(())
    };
    if br.flows.len() <= FLOW_BLOCK {
        for f in &br.flows {
            install(state, f, f.flow_mod())?;
        }
        return Ok(());
    }
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        s.spawn(move || {
            for block in br.flows.chunks(FLOW_BLOCK) {
                let parsed: Vec<_> = block.iter().map(|f| f.flow_mod()).collect();
                // The installing side stopped at a refused flow.
                if tx.send(parsed).is_err() {
                    return;
                }
            }
        });
        let mut flows = br.flows.iter();
        for parsed in rx {
            for (r, f) in parsed.into_iter().zip(flows.by_ref()) {
                install(state, f, r)?;
            }
        }
        Ok(())
    })
}

/// Adds what `taken` counted for entries already removed to their
/// FLOW_REMOVED reports.
fn count_late(removing: &mut [(u64, pipeline::FlowRemoved)], taken: &Counters) {
    if taken.flows.is_empty() {
        return;
    }
    for (_, r) in removing.iter_mut() {
        if let Some(f) = taken.flows.get(&r.id) {
            r.add_late_hits(f.packets, f.bytes);
        }
    }
}

pub(crate) fn link_bits(s: LinkState) -> u32 {
    match s {
        LinkState::Down => port_state::LINK_DOWN,
        LinkState::Up | LinkState::Unknown => 0,
    }
}

fn port_desc(number: u32, interface: &str, backend: &dyn PortBackend) -> ofp::Port {
    let (curr, speed) = crate::openflow::speed_of(interface).unwrap_or((0, 0));
    ofp::Port {
        port_no: number,
        hw_addr: ofp::oxm::MacAddr(crate::openflow::mac_of(interface, number)),
        name: interface.chars().take(15).collect(),
        state: link_bits(backend.link_state()),
        curr,
        curr_speed: speed,
        max_speed: speed,
        ..ofp::Port::default()
    }
}

fn lock_map<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One thread's place: `br0-w0 (worker) on core 1, reads 1:q0 2:q0`.
pub(crate) fn placement_line(t: &dataplane::threads::ThreadStats) -> String {
    let core = t
        .core
        .map_or("unpinned".to_string(), |c| format!("on core {c}"));
    let reads: Vec<String> = t
        .reads
        .iter()
        .filter(|(p, _)| *p != INJECT_PORT)
        .map(|(p, q)| format!("{p}:q{q}"))
        .collect();
    if reads.is_empty() {
        format!("{} ({}) {core}", t.name, t.role)
    } else {
        format!("{} ({}) {core}, reads {}", t.name, t.role, reads.join(" "))
    }
}

fn mode_name(t: &ThreadsConfig) -> &'static str {
    match t.mode {
        ThreadMode::RunToCompletion => "run-to-completion",
        ThreadMode::RxWorkerTx => "rx-worker-tx",
    }
}

impl BridgeRt {
    /// Builds the bridge `br` of `config` over its opened `ports` and
    /// starts its threads.
    pub(crate) fn start(
        config: &Config,
        br: &datastore::Bridge,
        mut state: SwitchState,
        ports: Vec<OpenPort>,
        opts: &RuntimeOptions,
    ) -> Result<BridgeRt, RuntimeError> {
        let epoch = Instant::now();
        let mut entries = BTreeMap::new();
        let mut specs = Vec::new();
        let threads_err = |error: io::Error| RuntimeError::Threads {
            bridge: br.name.clone(),
            error,
        };
        let mut tcfg = threads_config(&br.name, config)
            .map_err(|e| threads_err(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
        if let Some(w) = opts.poll_window {
            tcfg.poll_window = w;
        }
        let mut vlans = Vec::new();
        for p in ports {
            state.port_table.add_port(
                port_desc(p.number, &p.interface, p.backend.as_ref()),
                Time(0),
            );
            vlans.push((p.number, p.vlan.clone()));
            entries.insert(
                p.number,
                PortEntry {
                    interface: p.interface.clone(),
                    kernel: p.kernel,
                },
            );
            specs.push(port_spec(&tcfg, p).map_err(threads_err)?);
        }
        let (inject_sw, inject) =
            dataplane::patch::pair("inject", "inject-feed", ports::PATCH_RING);
        specs.push(PortSpec {
            woken: true,
            ..PortSpec::new(INJECT_PORT, Box::new(inject_sw))
        });
        let dp_config = DatapathConfig {
            miss_send_len: br.miss_send_len,
            // Packet-ins carry the packet; no buffer ids to resolve
            // across workers.
            n_buffers: 0,
            ..DatapathConfig::default()
        };
        let mut dp_ports = state.port_table.datapath_ports();
        for (n, v) in vlans {
            dp_ports.set_vlan(n, v);
        }
        let snapshot = Snapshot::new(&state, dp_ports.clone(), dp_config.clone());
        let publisher = Publisher::new(snapshot);
        let mut workers = Vec::new();
        let events: Arc<OnceLock<EventSender>> = Arc::default();
        // Up until an agent says otherwise (Controllers::attach follows
        // its channels): whoever takes the events directly gets them all.
        let controller_up = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let standalone = Arc::new(standalone::Standalone::new(dp_config.normal.clone()));
        let n_workers = u32::try_from(tcfg.workers).unwrap_or(u32::MAX);
        let threads = Threads::start(&tcfg, specs, &mut |i| {
            let shared = Arc::new(WorkerShared {
                events: events.clone(),
                controller_up: controller_up.clone(),
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
            ports = ?entries.iter().map(|(n, e)| (*n, e.interface.as_str())).collect::<Vec<_>>(),
            threads = threads.thread_count(),
            mode = mode_name(&tcfg),
            flows = state.tables.len(),
            "bridge started"
        );
        for t in threads.thread_stats() {
            tracing::info!(
                bridge = %br.name,
                "placement: {}",
                placement_line(&t)
            );
        }
        let dp = Datapath::new(state, dp_ports, dp_config);
        let b = BridgeRt {
            name: br.name.clone(),
            dpid: br.dpid,
            control: Mutex::new(Control {
                dp,
                totals: Counters::default(),
                inject,
                inject_lost: BTreeMap::new(),
                inject_stalled: false,
                removing: Vec::new(),
                last_ticket: 0,
            }),
            publisher,
            threads: Mutex::new(threads),
            workers,
            ports: Mutex::new(entries),
            events,
            standalone,
            controller_up,
            epoch,
            mode: mode_name(&tcfg),
            tcfg,
            qos: Mutex::new(BTreeMap::new()),
        };
        // Egress queues of the ports it starts with.
        for (port, q) in &br.qos {
            if !b.port_entries().contains_key(port) {
                continue;
            }
            if let Err(error) = b.set_qos(*port, Some(q)) {
                b.halt();
                return Err(threads_err(error));
            }
        }
        Ok(b)
    }

    /// Gives port `port` the egress queues `q` (`None`: none): the
    /// threads send through them once this returns, and the port table
    /// lists them for QUEUE_GET_CONFIG and QUEUE stats (counters from the
    /// scheduler). An unknown port is `NotFound`.
    pub(crate) fn set_qos(&self, port: u32, q: Option<&datastore::PortQos>) -> io::Result<()> {
        let spec = q.map(qos_spec);
        let handle = {
            let mut t = self.threads();
            t.set_qos(port, spec.as_ref())?;
            t.queue_handle(port)
        };
        let old = lock_map(&self.qos).remove(&port);
        {
            let mut c = self.control();
            let now = self.now();
            for id in old.iter().flat_map(|(ids, _)| ids) {
                c.dp.state.port_table.remove_queue(port, *id);
            }
            for qc in q.iter().flat_map(|q| &q.queues) {
                let reference = q.map_or(0, |q| q.max_rate);
                c.dp.state.port_table.set_queue(
                    port,
                    qc.id,
                    pipeline::tables::port_table::QueueConfig {
                        min_rate: permille(qc.min_rate, reference),
                        max_rate: permille(qc.max_rate, reference),
                    },
                    now,
                );
            }
        }
        if let (Some(q), Some(h)) = (q, handle) {
            let ids = q.queues.iter().map(|c| c.id).collect();
            lock_map(&self.qos).insert(port, (ids, h));
        }
        tracing::info!(bridge = %self.name, port, queues = q.map_or(0, |q| q.queues.len()), "egress queues set");
        Ok(())
    }

    /// Every port's egress queue counters (the default queue included).
    pub(crate) fn queue_counters(&self) -> BTreeMap<u32, Vec<dataplane::qos::QueueCounters>> {
        lock_map(&self.qos)
            .iter()
            .map(|(p, (_, h))| (*p, h.counters()))
            .collect()
    }

    pub(crate) fn control(&self) -> MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn threads(&self) -> MutexGuard<'_, Threads> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn port_entries(&self) -> MutexGuard<'_, BTreeMap<u32, PortEntry>> {
        self.ports.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now(&self) -> Time {
        Time(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    pub(crate) fn wake_all(&self) {
        self.threads().wake_all();
    }

    /// Publishes the control side's tables to the workers; returns the
    /// version. No thread is woken: a busy worker takes the version
    /// between bursts, a sleeping one (parked, holding none) before its
    /// next burst.
    pub(crate) fn publish(&self, c: &Control) -> u64 {
        self.publisher.publish(Snapshot::new(
            &c.dp.state,
            c.dp.ports.clone(),
            c.dp.config.clone(),
        ))
    }

    /// Asks every worker to hand over its counters now and waits (at most
    /// `timeout`) until each has; a worker that does not answer in time
    /// (stopped, or stuck in a long burst) is simply collected as it is.
    /// A sleeping worker handed everything over when it went to sleep
    /// (`WorkerShared::asleep`) and is neither woken nor waited for: what
    /// it forwards after waking uses the tables published before this
    /// call.
    pub(crate) fn request_counters(&self, timeout: Duration) {
        let wanted: Vec<u64> = self
            .workers
            .iter()
            .map(|w| w.sync_requested.fetch_add(1, Ordering::SeqCst) + 1)
            .collect();
        let pending = |(w, &v): (&Arc<WorkerShared>, &u64)| {
            w.sync_done.load(Ordering::Acquire) < v && !w.asleep.load(Ordering::SeqCst)
        };
        if !self.workers.iter().zip(&wanted).any(pending) {
            return;
        }
        self.wake_all();
        let deadline = Instant::now() + timeout;
        while self.workers.iter().zip(&wanted).any(pending) {
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Removes the flows whose idle or hard timeout passed, publishing
    /// the tables when some went, and hands the FLOW_REMOVED of those
    /// that asked for one to the agent. Returns how many were removed.
    /// The workers' counters are collected first (idle timeouts need
    /// their hits); when some entry asked for FLOW_REMOVED they are asked
    /// for first too, since the message reports the flow's counters (a
    /// flow forwarding 10K frames/s at its hard timeout was reported up
    /// to 178 frames short: the workers hand over every 20 ms).
    pub(crate) fn expire_flows(&self, timeout: Duration) -> usize {
        let mut c = self.counted_control(timeout);
        let before = c.dp.state.tables.len();
        let removed = c.dp.state.expire(self.now());
        let gone = before - c.dp.state.tables.len();
        if gone > 0 {
            c.hold_removed(removed);
            self.publish_and_report(c, timeout);
        }
        gone
    }

    /// Publishes the control side's tables, then hands to the agent the
    /// FLOW_REMOVED of the removals `c` holds ([`Control::hold_removed`]),
    /// which that publish covers. The workers went on forwarding by those
    /// entries until they took those tables (a few frames at 10K/s on a
    /// quiet machine, 40 with both cores busy): they are asked once more
    /// (waiting at most `timeout`), now that every burst they start is
    /// without them, and the reports go out with what they counted (added
    /// by every collection meanwhile, see [`Control::removing`]).
    pub(crate) fn publish_and_report(&self, mut c: MutexGuard<'_, Control>, timeout: Duration) {
        self.publish(&c);
        if !c.holds_unreported() {
            return;
        }
        c.last_ticket += 1;
        let ticket = c.last_ticket;
        for (t, _) in c.removing.iter_mut().filter(|(t, _)| *t == 0) {
            *t = ticket;
        }
        drop(c);
        self.request_counters(timeout);
        let mut c = self.control();
        self.collect(&mut c);
        let (mine, rest) = std::mem::take(&mut c.removing)
            .into_iter()
            .partition(|(t, _)| *t == ticket);
        c.removing = rest;
        drop(c);
        self.emit_removed(mine.into_iter().map(|(_, r)| r).collect());
    }

    /// The control side with the workers' counters folded in; when some
    /// entry asked for FLOW_REMOVED the workers are asked for them first
    /// ([`BridgeRt::request_counters`], waiting at most `timeout`), so
    /// that what the expiry sees is not up to a hand-over period (20 ms)
    /// old.
    pub(crate) fn counted_control(&self, timeout: Duration) -> MutexGuard<'_, Control> {
        let ask = self.control().dp.state.tables.any_send_flow_rem();
        if ask {
            self.request_counters(timeout);
        }
        let mut c = self.control();
        self.collect(&mut c);
        c
    }

    /// Hands an event to the bridge's agent, when one runs.
    pub(crate) fn emit(&self, ev: agent::SwitchEvent) {
        if let Some(tx) = self.events.get() {
            tx.send(ev);
        }
    }

    /// Hands the FLOW_REMOVED of `removed` to the agent.
    pub(crate) fn emit_removed(&self, removed: Vec<pipeline::FlowRemoved>) {
        for r in removed {
            self.emit(agent::SwitchEvent::FlowRemoved(r.to_message()));
        }
    }

    /// Packet-ins the workers did not hand to the agent: (no controller
    /// channel open, the agent's queue full).
    pub(crate) fn packet_ins_not_handed(&self) -> (u64, u64) {
        self.workers.iter().fold((0, 0), |(n, f), w| {
            (
                n + w.packet_ins_no_controller.load(Ordering::Relaxed),
                f + w.packet_ins_agent_full.load(Ordering::Relaxed),
            )
        })
    }

    /// Takes what the workers counted since the last collection and folds
    /// it into the control side's state (flow, table, group, meter and
    /// port counters) and totals.
    /// Hits of entries already removed are added to their FLOW_REMOVED
    /// reports in [`Control::removing`] (folding drops them).
    pub(crate) fn collect(&self, c: &mut Control) {
        for w in &self.workers {
            let taken = std::mem::take(&mut *w.counters.lock().unwrap_or_else(|e| e.into_inner()));
            count_late(&mut c.removing, &taken);
            c.dp.state.fold(&taken);
            c.totals.merge(&taken);
        }
        // The control side's own: packet-outs through OUTPUT:TABLE.
        let own = c.dp.take_counters();
        count_late(&mut c.removing, &own);
        c.dp.state.fold(&own);
        c.totals.merge(&own);
        // Egress queues: what their scheduler sent and dropped.
        for (port, (ids, h)) in lock_map(&self.qos).iter() {
            for q in h.counters().iter().filter(|q| ids.contains(&q.id)) {
                c.dp.state.port_table.set_queue_counters(
                    *port,
                    q.id,
                    q.tx_packets,
                    q.tx_bytes,
                    q.dropped,
                );
            }
        }
    }

    /// The pipeline counters summed over workers, and the packet-ins not
    /// handed to the agent (no controller, or its queue full).
    pub(crate) fn sum_workers(&self) -> (Counters, u64) {
        let mut c = self.control();
        self.collect(&mut c);
        let (no_controller, full) = self.packet_ins_not_handed();
        (c.totals.clone(), no_controller + full)
    }

    /// Hands packets (packet-out results) to the dataplane through the
    /// injection port. When the ring is full (a controller sending
    /// packet-outs faster than the workers transmit them), it waits for
    /// room ([`INJECT_WAIT`]): the agent reads no more from that
    /// controller meanwhile, so TCP slows the controller down instead of
    /// packets being lost. What still does not fit is dropped and counted
    /// against its output port ([`BridgeRt::port_drops`]). Returns how
    /// many were handed over.
    pub(crate) fn transmit(&self, c: &mut Control, tx: Vec<TxPacket>) -> usize {
        if tx.is_empty() {
            return 0;
        }
        let ports: Vec<u32> = tx.iter().map(|t| t.port).collect();
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
        let mut n = c.inject.tx_burst(&mut burst).unwrap_or(0);
        self.wake_all();
        if n > 0 {
            c.inject_stalled = false;
        }
        if !burst.is_empty() && !c.inject_stalled {
            let mut deadline = Instant::now() + INJECT_WAIT;
            while !burst.is_empty() && Instant::now() < deadline {
                std::thread::sleep(INJECT_POLL);
                let more = c.inject.tx_burst(&mut burst).unwrap_or(0);
                if more > 0 {
                    n += more;
                    deadline = Instant::now() + INJECT_WAIT;
                }
            }
            c.inject_stalled = !burst.is_empty();
        }
        // The burst keeps the packets that did not fit, the last ones.
        for port in ports.iter().skip(n) {
            *c.inject_lost.entry(*port).or_default() += 1;
        }
        n
    }

    pub(crate) fn port_counters(&self) -> BTreeMap<u32, PortCounters> {
        let mut m = self.threads().port_counters();
        m.remove(&INJECT_PORT);
        m
    }

    /// The dataplane threads' drops per port (rings, TX bursts, failed
    /// port calls); the injection port's count against no OpenFlow port.
    /// Packets the injection ring had no room for count as their output
    /// port's `tx_ring_full`.
    pub(crate) fn port_drops(&self) -> BTreeMap<u32, ThreadDrops> {
        let mut m = self.threads().port_drops();
        m.remove(&INJECT_PORT);
        // Not nested in the threads lock: `transmit` takes the two the
        // other way round.
        let lost = self.control().inject_lost.clone();
        for (port, n) in lost {
            m.entry(port).or_default().tx_ring_full += n;
        }
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
    pub(crate) fn complete_port_stats(&self, stats: &mut [ofp::stats::PortStats]) {
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

    fn emit_port_status(&self, reason: u8, desc: ofp::Port) {
        self.emit(agent::SwitchEvent::PortStatus(ofp::PortStatus {
            reason,
            desc,
        }));
    }

    /// Adds an opened port to the running bridge: the pipeline learns it
    /// (and tells controllers with a PORT_STATUS ADD), then the threads
    /// take it over. On error nothing changed.
    pub(crate) fn add_port(&self, p: OpenPort) -> io::Result<()> {
        if self.port_entries().contains_key(&p.number) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("bridge {} already has port {}", self.name, p.number),
            ));
        }
        let desc = port_desc(p.number, &p.interface, p.backend.as_ref());
        let entry = PortEntry {
            interface: p.interface.clone(),
            kernel: p.kernel,
        };
        // Tables first, so the first packet the threads read finds the
        // port; then the threads.
        {
            let mut c = self.control();
            let now = self.now();
            c.dp.state.port_table.add_port(desc.clone(), now);
            c.dp.ports.set(
                p.number,
                PortInfo {
                    config: desc.config,
                    state: desc.state,
                },
            );
            c.dp.ports.set_vlan(p.number, p.vlan.clone());
            self.publish(&c);
        }
        let (number, interface) = (p.number, p.interface.clone());
        let added = port_spec(&self.tcfg, p).and_then(|spec| self.threads().add_port(spec));
        if let Err(e) = added {
            let mut c = self.control();
            c.dp.state.port_table.remove_port(number);
            c.dp.ports.remove(number);
            self.publish(&c);
            return Err(e);
        }
        self.port_entries().insert(number, entry);
        self.emit_port_status(ofp::port_status::port_reason::ADD, desc);
        tracing::info!(bridge = %self.name, port = number, interface = %interface, "port added");
        Ok(())
    }

    /// Removes a port from the running bridge: the threads let it go (its
    /// backend is closed when this returns), then the pipeline forgets it
    /// and controllers get a PORT_STATUS DELETE.
    pub(crate) fn remove_port(&self, number: u32) -> io::Result<PortEntry> {
        let Some(entry) = self.port_entries().get(&number).cloned() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("bridge {} has no port {number}", self.name),
            ));
        };
        self.threads().remove_port(number)?;
        lock_map(&self.qos).remove(&number);
        let desc = {
            let mut c = self.control();
            let desc = c.dp.state.port_table.remove_port(number);
            c.dp.ports.remove(number);
            self.publish(&c);
            // What NORMAL learnt behind the port is gone with it.
            c.dp.config.normal.flush_port(number);
            desc
        };
        self.port_entries().remove(&number);
        if let Some(desc) = desc {
            self.emit_port_status(ofp::port_status::port_reason::DELETE, desc);
        }
        tracing::info!(bridge = %self.name, port = number, interface = %entry.interface, "port removed");
        Ok(entry)
    }

    /// Sets the link bit of one port, publishes, and tells the agent (if
    /// one runs) with a PORT_STATUS.
    pub(crate) fn set_link(&self, port: u32, up: bool) -> u64 {
        let mut c = self.control();
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
        let v = self.publish(&c);
        drop(c);
        if let Some(desc) = changed {
            self.emit_port_status(ofp::port_status::port_reason::MODIFY, desc);
        }
        v
    }

    /// Sets a port's VLAN settings for NORMAL, publishes, and forgets
    /// what was learnt behind the port.
    pub(crate) fn set_port_vlan(&self, number: u32, vlan: pipeline::normal::PortVlan) {
        let mut c = self.control();
        c.dp.ports.set_vlan(number, vlan);
        self.publish(&c);
        c.dp.config.normal.flush_port(number);
    }

    /// Whether a table-0 miss goes to NORMAL (fail mode standalone with
    /// no controller configured); publishes when it changes. Returns
    /// whether it changed.
    pub(crate) fn set_miss_normal(&self, on: bool) -> bool {
        let mut c = self.control();
        if c.dp.config.miss_normal == on {
            return false;
        }
        c.dp.config.miss_normal = on;
        self.publish(&c);
        true
    }

    /// Stops the threads (stage by stage, so packets inside are sent).
    pub(crate) fn halt(&self) {
        self.threads().halt();
    }
}
