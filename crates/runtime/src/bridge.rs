//! One running bridge: its control side (a pipeline instance whose tables
//! the agent and the management modules change), the snapshot publisher
//! its workers read, its dataplane threads and its ports.
//!
//! The control side edits its own copy of the tables under a mutex that
//! only control code takes and publishes a new immutable version; workers
//! move to it between bursts. Ports come and go while the bridge runs
//! ([`BridgeRt::add_port`], [`BridgeRt::remove_port`]): the threads take
//! the port over between bursts, so the other ports keep forwarding.
//!
//! Files by concern: this one holds the bridge, its threads' settings and
//! its control side; [`port_ops`] its ports (adding and removing them,
//! link state, VLANs, egress queues, port counters); [`crate::tables`] the
//! tables it starts from.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use dataplane::dispatch::{DispatchKey, Dispatcher};
use dataplane::patch::PatchPort;
use dataplane::placement;
use dataplane::snapshot::Publisher;
use dataplane::threads::{PortSpec, ThreadDrops, ThreadMode, Threads, ThreadsConfig};
use dataplane::{LinkState, PortBackend, PortCounters};
use datastore::Config;
use ofp::port::port_state;
use pipeline::datapath::{Counters, Datapath, DatapathConfig, PortInfo, Snapshot, TxPacket};
use pipeline::{SwitchState, Time};

use crate::ports::{self, OpenPort};
use crate::{standalone, PipelineWorker, RuntimeError, RuntimeOptions, WorkerShared, INJECT_PORT};
use agent::EventSender;

mod port_ops;

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
    /// The nice value the control side runs at while FLOW replies of
    /// several pages are written (`[dataplane] bulk_reply_nice`): how many
    /// are, and the priority lowered while any is (see
    /// `dataplane::placement::Yielding`).
    pub(crate) bulk_reply_nice: i32,
    pub(crate) bulk_replies: Mutex<(usize, Option<dataplane::placement::Yielding>)>,
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
    let (nrx, ntx) = match d.mode {
        ThreadMode::RunToCompletion => (0, 0),
        ThreadMode::RxWorkerTx => (d.rx_threads.max(1), d.tx_threads.max(1)),
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
    let workers = d.worker_threads.max(1);
    let dispatcher = if d.dispatch.key == DispatchKey::PriorityClass {
        Dispatcher::with_classes(d.dispatch.fallback, workers, d.dispatch.rules.clone())
    } else {
        Dispatcher::new(d.dispatch.key, workers)
    };
    Ok(ThreadsConfig {
        name: name.to_string(),
        mode: d.mode,
        rx_threads: d.rx_threads.max(1),
        workers,
        tx_threads: d.tx_threads.max(1),
        bursts: d.burst,
        flush: d.flush,
        rx_ring: d.rings.rx_ring as usize,
        tx_ring: d.rings.tx_ring as usize,
        dispatcher,
        rx_cores,
        worker_cores,
        tx_cores,
        queue_delay: dataplane::delay::QueueDelay::from_micros(u64::from(d.max_queue_delay_us))?,
        ..ThreadsConfig::default()
    })
}

/// Adds what `taken` counted for entries already removed to their
/// FLOW_REMOVED reports.
/// One pass over the taken list, whatever the number of reports.
fn count_late(removing: &mut [(u64, pipeline::FlowRemoved)], taken: &Counters) {
    if removing.is_empty() || (taken.flows.is_empty() && taken.by_slot.is_empty()) {
        return;
    }
    let index: pipeline::datapath::FlowMap<usize> = removing
        .iter()
        .enumerate()
        .map(|(i, (_, r))| (r.id, i))
        .collect();
    let mut add = |id, packets, bytes| {
        if let Some((_, r)) = index.get(&id).and_then(|&i| removing.get_mut(i)) {
            r.add_late_hits(packets, bytes);
        }
    };
    for (id, f) in &taken.flows {
        add(*id, f.packets, f.bytes);
    }
    for h in &taken.by_slot {
        add(h.id, h.packets, h.bytes);
    }
}

pub(crate) fn link_bits(s: LinkState) -> u32 {
    match s {
        LinkState::Down => port_state::LINK_DOWN,
        LinkState::Up | LinkState::Unknown => 0,
    }
}

/// The link's current speed as OpenFlow reports it: the `curr` feature
/// bit and the speed in kbit/s, from sysfs (`speed` in Mbit/s, `duplex`);
/// `None` where the kernel knows none (a down link, a TAP, a tunnel).
/// Controllers such as Faucet's tests check a port's `curr_speed`.
pub fn speed_of(interface: &str) -> Option<(u32, u32)> {
    let read = |f: &str| std::fs::read_to_string(format!("/sys/class/net/{interface}/{f}"));
    let mbps: i64 = read("speed").ok()?.trim().parse().ok()?;
    let mbps = u32::try_from(mbps).ok().filter(|&m| m > 0)?;
    let full = read("duplex").map_or(true, |d| d.trim() != "half");
    Some((speed_feature(mbps, full), mbps.saturating_mul(1000)))
}

/// The OpenFlow 1.3 port feature bit (`OFPPF_*`) of a link speed.
pub fn speed_feature(mbps: u32, full_duplex: bool) -> u32 {
    let (half, full) = match mbps {
        10 => (1 << 0, 1 << 1),
        100 => (1 << 2, 1 << 3),
        1000 => (1 << 4, 1 << 5),
        10_000 => (0, 1 << 6),
        40_000 => (0, 1 << 7),
        100_000 => (0, 1 << 8),
        1_000_000 => (0, 1 << 9),
        _ => (0, 0),
    };
    match (full_duplex, half, full) {
        (false, h, _) if h != 0 => h,
        (true, _, f) if f != 0 => f,
        _ => 1 << 10, // OFPPF_OTHER
    }
}

/// The MAC address of an interface (from sysfs), or a locally administered
/// one made from the port number.
pub fn mac_of(interface: &str, port: u32) -> [u8; 6] {
    let path = format!("/sys/class/net/{interface}/address");
    if let Ok(s) = std::fs::read_to_string(path) {
        let parts: Vec<u8> = s
            .trim()
            .split(':')
            .filter_map(|p| u8::from_str_radix(p, 16).ok())
            .collect();
        if let Ok(mac) = <[u8; 6]>::try_from(parts.as_slice()) {
            return mac;
        }
    }
    let n = port.to_be_bytes();
    [0x02, 0xf0, n[0], n[1], n[2], n[3]]
}

fn port_desc(number: u32, interface: &str, backend: &dyn PortBackend) -> ofp::Port {
    let (curr, speed) = speed_of(interface).unwrap_or((0, 0));
    ofp::Port {
        port_no: number,
        hw_addr: ofp::oxm::MacAddr(mac_of(interface, number)),
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
    t.mode.as_str()
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
            bulk_reply_nice: i32::from(config.dataplane.bulk_reply_nice),
            bulk_replies: Mutex::new((0, None)),
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
        Time::from_duration(self.epoch.elapsed())
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
            let lock = || w.counters.lock().unwrap_or_else(|e| e.into_inner());
            let mut taken = std::mem::take(&mut *lock());
            count_late(&mut c.removing, &taken);
            c.dp.state.fold(&taken);
            c.totals.merge_without_flows(&taken);
            lock().give_room_back(&mut taken);
        }
        // The control side's own: packet-outs through OUTPUT:TABLE.
        let own = c.dp.take_counters();
        count_late(&mut c.removing, &own);
        c.dp.state.fold(&own);
        c.totals.merge_without_flows(&own);
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
            let mut p = t.packet;
            // The worker sends it to this port, past the pipeline.
            p.meta = dataplane::PacketMeta::for_frame(p.len());
            p.meta.set_out_port(Some(t.port));
            let _ = burst.push(p);
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

#[cfg(test)]
mod speed_tests {
    use super::{speed_feature, speed_of};

    #[test]
    fn speeds_map_to_their_feature_bits() {
        assert_eq!(speed_feature(10, false), 1 << 0);
        assert_eq!(speed_feature(10, true), 1 << 1);
        assert_eq!(speed_feature(1000, true), 1 << 5);
        assert_eq!(speed_feature(10_000, true), 1 << 6);
        assert_eq!(speed_feature(100_000, true), 1 << 8);
        // No half-duplex bit above 1 Gbit/s, and no bit for 25 Gbit/s.
        assert_eq!(speed_feature(10_000, false), 1 << 10);
        assert_eq!(speed_feature(25_000, true), 1 << 10);
    }

    #[test]
    fn an_interface_without_a_speed_has_none() {
        // The loopback device has no link speed; a missing one no sysfs.
        assert_eq!(speed_of("lo"), None);
        assert_eq!(speed_of("no-such-if0"), None);
    }
}
