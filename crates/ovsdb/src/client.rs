//! The connection to ovsdb-server and the loop that keeps the switch and
//! the database in step.
//!
//! Threads (plain std threads: every daemon call blocks):
//!
//! * the client thread owns the connection, the replica and the sync
//!   state; it waits on one channel of [`Event`]s with a one-second tick;
//! * a reader thread per connection turns bytes into JSON values
//!   ([`Framer`]) and sends them to the channel;
//! * a watcher thread follows the daemon's commits
//!   ([`Daemon::wait_change`]) and sends [`Event::Changed`].
//!
//! A round ([`Client::reconcile`]) runs after the monitor reply, after each
//! update, after each commit of the switch, and every five seconds while an
//! item is failing. The status columns are refreshed after each round and
//! every second (link state, controller connections); statistics every
//! `--ovsdb-stats-interval` seconds and after a change.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datastore::{ControllerTarget, Op, PortRef};
use runtime::daemon::Daemon;
use serde_json::{json, Value};

use crate::jsonrpc::{self, Framer, Message};
use crate::replica::{self, Replica, DB, MONITOR_ID};
use crate::sync::{model_items, Items, Key, Sync, Val};
use crate::view::DbView;
use crate::writeback::{
    local_port_ops, structure_ops, Live, LiveBridge, LiveController, LivePort, Status,
};

/// Where ovsdb-server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `unix:PATH`.
    Unix(PathBuf),
    /// `tcp:IP:PORT` (a host name is resolved at each connection).
    Tcp(String),
}

impl Target {
    /// Parses `unix:PATH` or `tcp:HOST:PORT`.
    pub fn parse(s: &str) -> Result<Target, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(format!("--ovsdb {s}: the socket path is empty"));
            }
            return Ok(Target::Unix(PathBuf::from(p)));
        }
        if let Some(hp) = s.strip_prefix("tcp:") {
            let ok = hp
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p != 0));
            if !ok {
                return Err(format!("--ovsdb {s}: expected tcp:IP:PORT"));
            }
            return Ok(Target::Tcp(hp.to_string()));
        }
        Err(format!(
            "--ovsdb {s}: expected unix:PATH or tcp:IP:PORT (ssl: is not supported)"
        ))
    }

    fn connect(&self) -> std::io::Result<Conn> {
        match self {
            Target::Unix(p) => UnixStream::connect(p).map(Conn::Unix),
            Target::Tcp(hp) => {
                let host = hp
                    .strip_prefix('[')
                    .map(|r| r.replacen("]:", ":", 1))
                    .unwrap_or_else(|| hp.clone());
                let addrs: Vec<SocketAddr> = match host.to_socket_addrs() {
                    Ok(a) => a.collect(),
                    Err(_) => hp.to_socket_addrs()?.collect(),
                };
                let mut last = std::io::Error::other("no address");
                for a in addrs {
                    match TcpStream::connect_timeout(&a, Duration::from_secs(5)) {
                        Ok(s) => {
                            let _ = s.set_nodelay(true);
                            return Ok(Conn::Tcp(s));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Tcp(hp) => write!(f, "tcp:{hp}"),
        }
    }
}

enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn try_clone(&self) -> std::io::Result<Conn> {
        Ok(match self {
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Conn::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Conn::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    fn set_write_timeout(&self, d: Duration) {
        let _ = match self {
            Conn::Unix(s) => s.set_write_timeout(Some(d)),
            Conn::Tcp(s) => s.set_write_timeout(Some(d)),
        };
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(buf),
            Conn::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(buf),
            Conn::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What wakes the client thread.
pub enum Event {
    /// A JSON value from connection `n`.
    Msg(u64, Value),
    /// Connection `n` ended.
    Closed(u64, String),
    /// The daemon committed a transaction.
    Changed,
    /// Stop.
    Stop,
}

enum Pending {
    Monitor,
    Structure(Vec<Key>),
    Status,
    Echo,
}

/// Why a session ended.
enum End {
    Lost(String),
    Stop,
}

const BACKOFF_MIN: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
const TICK: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_secs(5);
const PROBE_IDLE: Duration = Duration::from_secs(15);

/// The client thread's state.
pub struct Client {
    daemon: Arc<Daemon>,
    target: Target,
    events: Receiver<Event>,
    stop: Arc<AtomicBool>,
    stats_every: Duration,
    conn: Option<Conn>,
    session: u64,
    next_id: u64,
    pending: HashMap<u64, Pending>,
    replica: Replica,
    synced: bool,
    sync: Sync,
    status: Status,
    errors: BTreeMap<Key, String>,
    last_stats: Instant,
    stats_due: bool,
    last_retry: Instant,
    last_rx: Instant,
    probing: bool,
}

impl Client {
    /// A client; [`Client::run`] does the work.
    pub fn new(
        daemon: Arc<Daemon>,
        target: Target,
        events: Receiver<Event>,
        stop: Arc<AtomicBool>,
        stats_every: Duration,
    ) -> Client {
        let now = Instant::now();
        Client {
            daemon,
            target,
            events,
            stop,
            stats_every,
            conn: None,
            session: 0,
            next_id: 1,
            pending: HashMap::new(),
            replica: Replica::default(),
            synced: false,
            sync: Sync::default(),
            status: Status::default(),
            errors: BTreeMap::new(),
            last_stats: now,
            stats_due: true,
            last_retry: now,
            last_rx: now,
            probing: false,
        }
    }

    /// Connects, follows, reconnects with backoff, until stopped.
    pub fn run(mut self, tx: Sender<Event>) {
        let mut backoff = BACKOFF_MIN;
        let mut failures = 0u32;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            match self.target.connect() {
                Ok(conn) => {
                    tracing::info!("ovsdb: connected to {}", self.target);
                    failures = 0;
                    backoff = BACKOFF_MIN;
                    match self.session(conn, &tx) {
                        End::Stop => return,
                        End::Lost(why) => {
                            tracing::warn!(
                                "ovsdb: connection to {} lost ({why}); reconnecting",
                                self.target
                            )
                        }
                    }
                }
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!("ovsdb: cannot connect to {} ({e}); retrying", self.target);
                    }
                    failures = failures.saturating_add(1);
                }
            }
            // Wait, still answering stop.
            let until = Instant::now() + backoff;
            loop {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match self.events.recv_timeout(left) {
                    Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    Ok(_) => {}
                    Err(RecvTimeoutError::Timeout) => break,
                }
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    fn session(&mut self, conn: Conn, tx: &Sender<Event>) -> End {
        self.session += 1;
        let sid = self.session;
        let reader = match conn.try_clone() {
            Ok(mut r) => {
                let tx = tx.clone();
                std::thread::Builder::new()
                    .name("fulmar-ovsdb-rx".into())
                    .spawn(move || read_loop(&mut r, sid, &tx))
                    .ok()
            }
            Err(e) => return End::Lost(e.to_string()),
        };
        conn.set_write_timeout(Duration::from_secs(5));
        self.conn = Some(conn);
        self.pending.clear();
        self.replica = Replica::default();
        self.synced = false;
        self.status.forget();
        self.sync.unwritten_all();
        self.last_rx = Instant::now();
        self.probing = false;
        let end = match self.send_request("monitor", replica::monitor_params(), Pending::Monitor) {
            Ok(()) => self.follow(sid),
            Err(e) => End::Lost(e),
        };
        if let Some(c) = self.conn.take() {
            c.shutdown();
        }
        if let Some(r) = reader {
            let _ = r.join();
        }
        end
    }

    fn follow(&mut self, sid: u64) -> End {
        let mut next_tick = Instant::now() + TICK;
        loop {
            let left = next_tick.saturating_duration_since(Instant::now());
            let r = match self.events.recv_timeout(left) {
                Ok(Event::Msg(s, v)) if s == sid => {
                    self.last_rx = Instant::now();
                    self.probing = false;
                    self.handle(v)
                }
                Ok(Event::Closed(s, why)) if s == sid => Err(why),
                Ok(Event::Msg(..)) | Ok(Event::Closed(..)) => Ok(()),
                Ok(Event::Changed) => {
                    if self.synced {
                        self.reconcile()
                    } else {
                        Ok(())
                    }
                }
                Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => return End::Stop,
                Err(RecvTimeoutError::Timeout) => {
                    next_tick = Instant::now() + TICK;
                    self.tick()
                }
            };
            if let Err(why) = r {
                return End::Lost(why);
            }
            if self.stop.load(Ordering::Relaxed) {
                return End::Stop;
            }
        }
    }

    fn send(&mut self, v: &Value) -> Result<(), String> {
        let Some(c) = self.conn.as_mut() else {
            return Err("not connected".into());
        };
        let bytes = serde_json::to_vec(v).map_err(|e| e.to_string())?;
        c.write_all(&bytes).map_err(|e| format!("write: {e}"))
    }

    fn send_request(&mut self, method: &str, params: Value, what: Pending) -> Result<(), String> {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, what);
        self.send(&jsonrpc::request(method, params, id))
    }

    fn transact(&mut self, ops: Vec<Value>, what: Pending) -> Result<(), String> {
        let mut params = vec![json!(DB)];
        params.extend(ops);
        self.send_request("transact", Value::Array(params), what)
    }

    fn handle(&mut self, v: Value) -> Result<(), String> {
        match Message::parse(v) {
            Some(Message::Request { method, params, id }) => {
                if method == "echo" {
                    self.send(&jsonrpc::reply(params, id))
                } else {
                    self.send(&jsonrpc::reply_error("not supported", id))
                }
            }
            Some(Message::Notification { method, params }) => {
                if method == "update" && params.get(0) == Some(&json!(MONITOR_ID)) {
                    let updates = params.get(1).cloned().unwrap_or(Value::Null);
                    self.replica
                        .apply(&updates)
                        .map_err(|e| format!("bad update: {}", e.0))?;
                    if self.synced {
                        return self.reconcile();
                    }
                }
                Ok(())
            }
            Some(Message::Response { id, result, error }) => {
                let Some(what) = id.as_u64().and_then(|i| self.pending.remove(&i)) else {
                    return Ok(());
                };
                let failure = txn_error(&result, &error);
                match what {
                    Pending::Monitor => {
                        if let Some(e) = failure {
                            return Err(format!("monitor refused: {e}"));
                        }
                        self.replica = Replica::default();
                        self.replica
                            .apply(&result)
                            .map_err(|e| format!("bad monitor reply: {}", e.0))?;
                        self.synced = true;
                        self.stats_due = true;
                        self.reconcile()
                    }
                    Pending::Structure(keys) => {
                        if let Some(e) = failure {
                            tracing::warn!("ovsdb: writing the switch's changes failed: {e}");
                            self.sync.unwritten(&keys);
                        }
                        Ok(())
                    }
                    Pending::Status => {
                        if let Some(e) = failure {
                            tracing::warn!("ovsdb: writing status failed: {e}");
                            self.status.forget();
                        }
                        Ok(())
                    }
                    Pending::Echo => Ok(()),
                }
            }
            None => Ok(()),
        }
    }

    fn tick(&mut self) -> Result<(), String> {
        let idle = self.last_rx.elapsed();
        if idle >= PROBE_IDLE * 2 {
            return Err(format!("no answer for {} s", idle.as_secs()));
        }
        if idle >= PROBE_IDLE && !self.probing {
            self.probing = true;
            self.send_request("echo", json!([]), Pending::Echo)?;
        }
        if !self.synced {
            return Ok(());
        }
        if !self.errors.is_empty() && self.last_retry.elapsed() >= RETRY {
            self.last_retry = Instant::now();
            return self.reconcile();
        }
        self.write_status(false)
    }

    /// One round (see the module comment of [`crate::sync`]).
    fn reconcile(&mut self) -> Result<(), String> {
        let view = DbView::read(&self.replica);
        if view.root.is_none() {
            // An empty database: filled from the switch.
            self.sync.forget();
        }
        let (cfg, _) = self.daemon.config();
        let model = model_items(&cfg);
        let plan = self.sync.plan(&view.wanted, &model);
        self.errors
            .retain(|k, _| plan.to_switch.iter().any(|(pk, _)| pk == k));
        let changed = !plan.to_switch.is_empty() || !plan.to_db.is_empty();
        if !plan.to_switch.is_empty() {
            self.last_retry = Instant::now();
            self.apply_to_switch(plan.to_switch, &view);
        }
        if !plan.to_db.is_empty() {
            let mut ops = structure_ops(&plan.to_db, &view);
            ops.extend(local_port_ops(&plan.to_db, &view, |b| {
                cfg.bridge(b).is_some_and(|b| b.local_port)
            }));
            let keys: Vec<Key> = plan.to_db.iter().map(|(k, _)| k.clone()).collect();
            for (k, v) in plan.to_db {
                self.sync.wrote(&k, v);
            }
            if !ops.is_empty() {
                tracing::info!(
                    "ovsdb: writing {} switch change(s) into the database",
                    keys.len()
                );
                self.transact(ops, Pending::Structure(keys))?;
            }
        }
        self.write_status(changed)
    }

    /// Applies the database's wishes to the switch, one transaction per
    /// item, so that one bad row does not hold up the others.
    fn apply_to_switch(&mut self, items: Vec<(Key, Option<Val>)>, view: &DbView) {
        let wanted = &view.wanted;
        let (cfg, _) = self.daemon.config();
        let mut model = model_items(&cfg);
        let mut applied = Vec::new();
        // Removals, then new bridges, then the rest on bridges that run.
        for phase in 0..3 {
            if phase == 2 {
                model = model_items(&self.daemon.config().0);
            }
            for (key, val) in &items {
                let b = key.bridge().to_string();
                let bkey = Key::Bridge(b.clone());
                let p = match (key, val) {
                    (Key::Bridge(_), None) => 0,
                    (Key::Port(..), None) => 0,
                    (Key::Bridge(_), Some(_)) if !model.contains_key(key) => 1,
                    _ => 2,
                };
                if p != phase {
                    continue;
                }
                if phase != 1 && !matches!(key, Key::Bridge(_)) {
                    // A bridge's part: only on a bridge both sides have
                    // (a deleted bridge takes its parts along).
                    if !wanted.contains_key(&bkey) || !model.contains_key(&bkey) {
                        continue;
                    }
                }
                if phase == 2 && crate::sync::agree(val.as_ref(), model.get(key)) {
                    applied.push(key.clone());
                    continue;
                }
                let ops = switch_ops(key, val.as_ref(), wanted, &model);
                if ops.is_empty() {
                    continue;
                }
                match self.daemon.transact(&ops, false) {
                    Ok(_) => {
                        tracing::info!(
                            "ovsdb: applied {}",
                            ops.iter()
                                .map(|o| o.to_string())
                                .collect::<Vec<_>>()
                                .join("; ")
                        );
                        self.errors.remove(key);
                        applied.push(key.clone());
                    }
                    Err(e) => {
                        let text = e.to_string();
                        if self.errors.get(key) != Some(&text) {
                            tracing::warn!("ovsdb: {text}");
                        }
                        self.errors.insert(key.clone(), text);
                    }
                }
            }
        }
        let now = model_items(&self.daemon.config().0);
        for k in applied {
            self.sync.settle(&k, now.get(&k).cloned());
        }
    }

    fn live(&self, with_stats: bool) -> Live {
        let show = self.daemon.show();
        let mut live = Live::default();
        let mut stats = BTreeMap::new();
        for b in show.bridges {
            let mut lb = LiveBridge {
                dpid: u64::from_str_radix(&b.datapath_id, 16).unwrap_or(0),
                local_error: b.local_port_error.clone(),
                ..Default::default()
            };
            for p in b.ports.iter().chain(&b.local_port) {
                lb.ports.insert(
                    p.interface.clone(),
                    LivePort {
                        ofport: p.ofport,
                        link_up: p.link_up,
                        admin_up: p.admin_up,
                    },
                );
            }
            for c in &b.controllers {
                lb.controllers.push(LiveController {
                    target: ControllerTarget::parse_target(&c.target)
                        .map(|t| t.to_string())
                        .unwrap_or_else(|_| c.target.clone()),
                    connected: c.connected,
                    role: c.role.clone(),
                });
            }
            if with_stats {
                let by_no: HashMap<u32, &str> = b
                    .ports
                    .iter()
                    .chain(&b.local_port)
                    .map(|p| (p.ofport, p.interface.as_str()))
                    .collect();
                for s in self
                    .daemon
                    .runtime()
                    .port_stats(&b.name)
                    .unwrap_or_default()
                {
                    let Some(name) = by_no.get(&s.port_no) else {
                        continue;
                    };
                    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                    let m: BTreeMap<String, i64> = [
                        ("rx_packets", s.rx_packets),
                        ("rx_bytes", s.rx_bytes),
                        ("rx_dropped", s.rx_dropped),
                        ("rx_errors", s.rx_errors),
                        ("rx_frame_err", s.rx_frame_err),
                        ("rx_over_err", s.rx_over_err),
                        ("rx_crc_err", s.rx_crc_err),
                        ("tx_packets", s.tx_packets),
                        ("tx_bytes", s.tx_bytes),
                        ("tx_dropped", s.tx_dropped),
                        ("tx_errors", s.tx_errors),
                        ("collisions", s.collisions),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), i(v)))
                    .collect();
                    stats.insert((b.name.clone(), name.to_string()), m);
                }
            }
            live.bridges.insert(b.name.clone(), lb);
        }
        if with_stats {
            live.stats = Some(stats);
        }
        live
    }

    fn write_status(&mut self, changed: bool) -> Result<(), String> {
        let with_stats = changed || self.stats_due || self.last_stats.elapsed() >= self.stats_every;
        if with_stats {
            self.last_stats = Instant::now();
            self.stats_due = false;
        }
        let view = DbView::read(&self.replica);
        let live = self.live(with_stats);
        let ops = self
            .status
            .ops(&self.replica, &view, &live, &self.errors, view.next_cfg);
        if ops.is_empty() {
            return Ok(());
        }
        self.transact(ops, Pending::Status)
    }
}

/// The daemon operations for one item: the database's value `d` (or its
/// removal) on a switch whose items are `model`.
pub fn switch_ops(key: &Key, d: Option<&Val>, wanted: &Items, model: &Items) -> Vec<Op> {
    match (key, d) {
        (Key::Bridge(b), None) => vec![Op::DelBridge { name: b.clone() }],
        (Key::Bridge(b), Some(Val::Bridge { dpid })) => {
            if model.contains_key(key) {
                match dpid {
                    Some(d) => vec![Op::Set {
                        object: format!("bridge:{b}"),
                        key: "dpid".into(),
                        value: format!("{d:#x}"),
                    }],
                    None => Vec::new(),
                }
            } else {
                let fail_mode = match wanted.get(&Key::FailMode(b.clone())) {
                    Some(Val::FailMode(m)) => Some(*m),
                    _ => None,
                };
                vec![Op::AddBridge {
                    name: b.clone(),
                    dpid: *dpid,
                    fail_mode,
                }]
            }
        }
        (Key::Port(b, i), None) => vec![Op::DelPort {
            bridge: Some(b.clone()),
            port: PortRef::Name(i.clone()),
        }],
        (Key::Port(b, i), Some(Val::Port(spec))) => {
            let mut options = vec![("type".to_string(), spec.kind.clone())];
            options.extend(spec.options.iter().map(|(k, v)| (k.clone(), v.clone())));
            let add = Op::AddPort {
                bridge: b.clone(),
                interface: i.clone(),
                number: spec.number,
                options,
            };
            let mut ops = if model.contains_key(key) {
                vec![
                    Op::DelPort {
                        bridge: Some(b.clone()),
                        port: PortRef::Name(i.clone()),
                    },
                    add,
                ]
            } else {
                vec![add]
            };
            // A port made again keeps the queues the database gives it.
            if let Some(Val::Qos(q)) = wanted.get(&Key::Qos(b.clone(), i.clone())) {
                ops.push(Op::SetQos {
                    bridge: b.clone(),
                    port: PortRef::Name(i.clone()),
                    qos: Some(q.clone()),
                });
            }
            ops
        }
        (Key::PortVlan(_, i), Some(Val::Vlan(v))) => {
            let object = format!("interface:{i}");
            let set = |key: &str, value: String| Op::Set {
                object: object.clone(),
                key: key.into(),
                value,
            };
            let trunks: Vec<String> = v.trunks.iter().map(u16::to_string).collect();
            vec![
                set("tag", v.tag.map(|t| t.to_string()).unwrap_or_default()),
                set("trunks", trunks.join(",")),
                set(
                    "vlan_mode",
                    v.mode.map(|m| m.as_str().to_string()).unwrap_or_default(),
                ),
            ]
        }
        (Key::FailMode(b), Some(Val::FailMode(mode))) => vec![Op::SetFailMode {
            bridge: b.clone(),
            mode: *mode,
        }],
        (Key::Controllers(b), Some(Val::Controllers(t))) if t.is_empty() => {
            vec![Op::DelController { bridge: b.clone() }]
        }
        (Key::Controllers(b), Some(Val::Controllers(t))) => vec![Op::SetController {
            bridge: b.clone(),
            targets: t.clone(),
        }],
        // Queues of a port that runs (a port deleted took its queues).
        (Key::Qos(b, i), q) if model.contains_key(&Key::Port(b.clone(), i.clone())) => {
            vec![Op::SetQos {
                bridge: b.clone(),
                port: PortRef::Name(i.clone()),
                qos: match q {
                    Some(Val::Qos(q)) => Some(q.clone()),
                    _ => None,
                },
            }]
        }
        _ => Vec::new(),
    }
}

/// A transaction's failure text: the response's `error`, or the first
/// operation result that carries one.
fn txn_error(result: &Value, error: &Value) -> Option<String> {
    if !error.is_null() {
        return Some(error.to_string());
    }
    result.as_array()?.iter().find_map(|r| {
        let e = r.get("error")?;
        let details = r.get("details").and_then(Value::as_str).unwrap_or("");
        Some(format!("{} {details}", e.as_str().unwrap_or("error")))
    })
}

fn read_loop(conn: &mut Conn, sid: u64, tx: &Sender<Event>) {
    let mut framer = Framer::default();
    let mut buf = vec![0u8; 64 * 1024];
    let why = loop {
        match conn.read(&mut buf) {
            Ok(0) => break "closed by the server".to_string(),
            Ok(n) => match framer.push(&buf[..n]) {
                Ok(values) => {
                    for v in values {
                        if tx.send(Event::Msg(sid, v)).is_err() {
                            return;
                        }
                    }
                }
                Err(e) => break e.0,
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break e.to_string(),
        }
    };
    let _ = tx.send(Event::Closed(sid, why));
}

/// Follows the daemon's commits until `stop`.
pub fn watch(daemon: Arc<Daemon>, tx: Sender<Event>, stop: Arc<AtomicBool>) {
    let mut seen = daemon.config().1;
    while !stop.load(Ordering::Relaxed) {
        let v = daemon.wait_change(seen, Duration::from_millis(300));
        if v != seen {
            seen = v;
            if tx.send(Event::Changed).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::PortSpec;
    use datastore::FailMode;

    #[test]
    fn targets() {
        assert_eq!(
            Target::parse("unix:/run/db.sock"),
            Ok(Target::Unix("/run/db.sock".into()))
        );
        assert_eq!(
            Target::parse("tcp:127.0.0.1:6640"),
            Ok(Target::Tcp("127.0.0.1:6640".into()))
        );
        for bad in [
            "unix:",
            "tcp:1.2.3.4",
            "tcp::5",
            "ssl:1.2.3.4:6640",
            "/x",
            "tcp:h:0",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn items_become_daemon_operations() {
        let mut wanted = Items::new();
        wanted.insert(
            Key::FailMode("br0".into()),
            Val::FailMode(FailMode::Standalone),
        );
        let model = Items::new();
        let ops = switch_ops(
            &Key::Bridge("br0".into()),
            Some(&Val::Bridge { dpid: Some(5) }),
            &wanted,
            &model,
        );
        assert_eq!(
            ops,
            vec![Op::AddBridge {
                name: "br0".into(),
                dpid: Some(5),
                fail_mode: Some(FailMode::Standalone)
            }]
        );
        let k = Key::Port("br0".into(), "veth1".into());
        let spec = Val::Port(PortSpec {
            kind: "afpacket".into(),
            number: Some(3),
            options: BTreeMap::new(),
        });
        let ops = switch_ops(&k, Some(&spec), &wanted, &model);
        assert_eq!(ops.len(), 1);
        assert_eq!(
            ops[0].to_string(),
            "add-port br0 veth1 ofport=3 type=afpacket"
        );
        let mut model = Items::new();
        model.insert(k.clone(), spec.clone());
        assert_eq!(switch_ops(&k, Some(&spec), &wanted, &model).len(), 2);
        assert_eq!(
            switch_ops(&k, None, &wanted, &model)[0].to_string(),
            "del-port br0 veth1"
        );
        assert_eq!(
            switch_ops(
                &Key::Controllers("br0".into()),
                Some(&Val::Controllers(vec![])),
                &wanted,
                &model
            )[0]
            .to_string(),
            "del-controller br0"
        );
    }

    #[test]
    fn transaction_errors_are_found() {
        assert_eq!(txn_error(&json!([{}, {"count": 1}]), &Value::Null), None);
        assert!(txn_error(
            &json!([{}, {"error": "constraint violation", "details": "x"}]),
            &Value::Null
        )
        .unwrap()
        .contains("constraint"));
        assert!(txn_error(&Value::Null, &json!("unknown database")).is_some());
    }
}

/// The client against a scripted server (a unix socket in a temporary
/// directory) and a real daemon over memory ports: monitor, apply, write
/// back, echo, a switch-side change, a dropped connection.
#[cfg(test)]
mod session_tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::sync::mpsc::channel;

    use runtime::daemon::DaemonOptions;
    use runtime::RuntimeOptions;

    fn daemon() -> Arc<Daemon> {
        let cfg = datastore::Config::from_str("", datastore::COMMAND_LINE)
            .unwrap_or_else(|e| panic!("{e}"));
        let opts = DaemonOptions {
            runtime: RuntimeOptions {
                watch_links: false,
                ..RuntimeOptions::default()
            },
            ..DaemonOptions::default()
        };
        Arc::new(Daemon::start(cfg, opts).unwrap_or_else(|e| panic!("{e}")))
    }

    /// The server side: reads values, writes bytes in small pieces.
    struct Server {
        stream: UnixStream,
        framer: Framer,
        got: std::collections::VecDeque<Value>,
    }

    impl Server {
        fn next(&mut self) -> Value {
            let mut buf = [0u8; 4096];
            loop {
                if let Some(v) = self.got.pop_front() {
                    return v;
                }
                let n = self.stream.read(&mut buf).expect("read");
                assert!(n > 0, "client closed");
                self.got.extend(self.framer.push(&buf[..n]).expect("json"));
            }
        }

        fn send(&mut self, v: &Value) {
            let bytes = serde_json::to_vec(v).unwrap();
            for chunk in bytes.chunks(7) {
                self.stream.write_all(chunk).unwrap();
            }
        }

        /// Answers requests until `pred` holds for a transact; returns its
        /// operations.
        fn until(&mut self, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                let v = self.next();
                let id = v["id"].clone();
                if v["method"] == "transact" {
                    let ops: Vec<Value> = v["params"].as_array().unwrap()[1..].to_vec();
                    let results: Vec<Value> = ops.iter().map(|_| json!({})).collect();
                    self.send(&json!({"id": id, "result": results, "error": null}));
                    if pred(&ops) {
                        return ops;
                    }
                } else if v["method"] == "echo" {
                    self.send(&json!({"id": id, "result": v["params"], "error": null}));
                }
            }
            panic!("timed out waiting for {what}");
        }
    }

    fn writes(ops: &[Value], table: &str, col: &str) -> Option<Value> {
        ops.iter()
            .find(|o| o["table"] == table && o["row"].get(col).is_some())
            .map(|o| o["row"][col].clone())
    }

    #[test]
    fn monitor_apply_write_back_and_follow_the_switch() {
        let dir = std::env::temp_dir().join(format!("fulmar-ovsdb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("db.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let d = daemon();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        let client = Client::new(
            d.clone(),
            Target::Unix(sock.clone()),
            rx,
            stop.clone(),
            Duration::from_secs(1),
        );
        let tx2 = tx.clone();
        let main = std::thread::spawn(move || client.run(tx2));
        let watcher = {
            let (d, tx, stop) = (d.clone(), tx.clone(), stop.clone());
            std::thread::spawn(move || watch(d, tx, stop))
        };

        let (stream, _) = listener.accept().unwrap();
        let mut srv = Server {
            stream,
            framer: Framer::default(),
            got: Default::default(),
        };
        let mon = srv.next();
        assert_eq!(mon["method"], "monitor");
        assert_eq!(mon["params"][0], "Open_vSwitch");
        // An echo before the reply: answered.
        srv.send(&json!({"method": "echo", "params": ["x"], "id": "echo"}));
        let echo = srv.next();
        assert_eq!(echo, json!({"id": "echo", "result": ["x"], "error": null}));
        srv.send(&json!({"id": mon["id"], "error": null, "result": {
            "Open_vSwitch": {"o": {"new": {"bridges": ["uuid", "b0"], "next_cfg": 3, "cur_cfg": 0}}},
            "Bridge": {"b0": {"new": {"name": "br0", "fail_mode": "secure", "ports": ["set", [["uuid", "p1"], ["uuid", "p2"]]]}}},
            "Port": {"p1": {"new": {"name": "m1", "interfaces": ["uuid", "i1"]}},
                     "p2": {"new": {"name": "m2", "interfaces": ["uuid", "i2"]}}},
            "Interface": {"i1": {"new": {"name": "m1", "type": "memory", "ofport_request": 4}},
                          "i2": {"new": {"name": "m2", "type": "vxlan"}}}
        }}));
        let ops = srv.until("cur_cfg", |ops| {
            writes(ops, "Open_vSwitch", "cur_cfg").is_some()
        });
        assert_eq!(writes(&ops, "Open_vSwitch", "cur_cfg"), Some(json!(3)));
        let i1 = ops
            .iter()
            .find(|o| o["where"][0][2][1] == "i1")
            .expect("i1 written");
        assert_eq!(i1["row"]["ofport"], 4);
        assert_eq!(i1["row"]["link_state"], "up");
        let i2 = ops.iter().find(|o| o["where"][0][2][1] == "i2").unwrap();
        assert_eq!(i2["row"]["ofport"], -1);
        assert!(i2["row"]["error"].as_str().unwrap().contains("vxlan"));
        let (cfg, _) = d.config();
        assert_eq!(cfg.bridges.len(), 1);
        assert_eq!(cfg.bridges[0].ports[0].number, 4);
        assert_eq!(cfg.bridges[0].fail_mode, datastore::FailMode::Secure);

        // A switch-side change is written into the database, once.
        let w: Vec<&str> = "add-port br0 m3 type=memory".split(' ').collect();
        d.transact(&datastore::parse_ctl(&w).unwrap(), false)
            .unwrap();
        let ops = srv.until("m3's rows", |ops| {
            ops.iter()
                .any(|o| o["op"] == "insert" && o["row"]["name"] == "m3")
        });
        assert!(ops
            .iter()
            .any(|o| o["op"] == "mutate" && o["mutations"][0][1] == "insert"));

        // The connection drops: the client comes back and monitors again.
        drop(srv);
        let (stream, _) = listener.accept().unwrap();
        let mut srv = Server {
            stream,
            framer: Framer::default(),
            got: Default::default(),
        };
        assert_eq!(srv.next()["method"], "monitor");

        stop.store(true, Ordering::Relaxed);
        let _ = tx.send(Event::Stop);
        main.join().unwrap();
        watcher.join().unwrap();
        d.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
