//! Reading the switch: the ports of every bridge from the daemon, their
//! ifIndex ([`crate::ifindex`]), what changed since the last reading
//! (linkUp/linkDown, ifLastChange) and the [`View`] built from it, kept
//! for at most [`MAX_AGE`] so that one walk of many PDUs costs a few
//! readings, not one per PDU.
//!
//! The daemon's calls take its locks briefly: [`Collector`] is called from
//! a std thread (the one-second poller) or `spawn_blocking`, never on an
//! async worker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use runtime::daemon::Daemon;
use tokio::sync::mpsc::UnboundedSender;

use crate::ifindex::{IfIndexMap, PortKey};
use crate::mib::{self, Dot1d, Model, PortRow, View};
use crate::pdu::VarBind;

/// `OFPP_LOCAL`: the bridge-local port's number.
const LOCAL: u32 = ofp::consts::port_no::LOCAL;

/// A View older than this is read again for a request.
pub const MAX_AGE: Duration = Duration::from_millis(500);

/// One bridge as the daemon reports it.
#[derive(Clone, Debug, Default)]
pub struct RawBridge {
    pub name: String,
    pub dpid: u64,
    /// (port number, interface name, is a patch port) in configuration order.
    pub ports: Vec<(u32, String, bool)>,
    pub desc: Vec<ofp::Port>,
    pub stats: Vec<ofp::stats::PortStats>,
    /// NORMAL's learnt addresses: (address, port), one per address (the
    /// most recently seen, whatever its VLAN).
    pub fdb: Vec<([u8; 6], u32)>,
}

/// Reads the daemon's bridges.
pub fn read_daemon(d: &Daemon) -> Vec<RawBridge> {
    let (config, _) = d.config();
    let rt = d.runtime();
    config
        .bridges
        .iter()
        .map(|b| RawBridge {
            name: b.name.clone(),
            dpid: b.dpid,
            ports: b
                .ports
                .iter()
                .map(|p| match &p.kind {
                    datastore::PortKind::Interface { name, .. } => (p.number, name.clone(), false),
                    datastore::PortKind::Patch {
                        peer_bridge,
                        peer_port,
                    } => (p.number, format!("patch:{peer_bridge}:{peer_port}"), true),
                })
                .collect(),
            desc: rt.port_desc(&b.name).unwrap_or_default(),
            stats: rt.port_stats(&b.name).unwrap_or_default(),
            // dot1dTpFdbTable is indexed by address alone (BRIDGE-MIB
            // knows no VLANs): an address learnt in several VLANs is
            // listed once, with the port it was seen on last.
            fdb: rt
                .fdb(&b.name)
                .map(|(mut e, _, _)| {
                    e.sort_by_key(|e| (e.mac, e.age_secs));
                    e.dedup_by_key(|e| e.mac);
                    e.into_iter().map(|e| (e.mac, e.port)).collect()
                })
                .unwrap_or_default(),
        })
        .map(with_local_port)
        .collect()
}

/// The bridge-local port (a TAP named after the bridge) is an interface
/// too, when the bridge has it.
fn with_local_port(mut b: RawBridge) -> RawBridge {
    if b.desc.iter().any(|d| d.port_no == LOCAL) {
        b.ports.push((LOCAL, b.name.clone(), false));
    }
    b
}

/// The kernel's MTU of `interface`, 1500 when it has none to tell.
fn mtu_of(interface: &str) -> u32 {
    if interface.is_empty() || interface.contains('/') || interface.starts_with('.') {
        return 1500;
    }
    std::fs::read_to_string(format!("/sys/class/net/{interface}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1500)
}

/// The module's clock: TimeTicks (hundredths of a second) since it
/// started, and how they relate to the master's sysUpTime once a session
/// has told it (every Response from the master carries its sysUpTime), so
/// that ifLastChange reads as RFC 2863 asks: sysUpTime when the port
/// entered its state, 0 when that was before the master started.
#[derive(Debug)]
pub struct Clock {
    started: Instant,
    /// Master's sysUpTime minus ours; `i64::MIN` while unknown.
    offset: AtomicI64,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            started: Instant::now(),
            offset: AtomicI64::new(i64::MIN),
        }
    }
}

impl Clock {
    /// Our TimeTicks now.
    pub fn ticks(&self) -> u32 {
        (self.started.elapsed().as_millis() / 10) as u32
    }

    /// The master's sysUpTime is `sys_up_time` now.
    pub fn master_says(&self, sys_up_time: u32) {
        self.offset
            .store(sys_up_time as i64 - self.ticks() as i64, Ordering::Relaxed);
    }

    /// Our `ticks` as the master's sysUpTime (ours while no master told).
    pub fn as_master(&self, ticks: u32) -> u32 {
        match self.offset.load(Ordering::Relaxed) {
            i64::MIN => ticks,
            o => (ticks as i64 + o).clamp(0, u32::MAX as i64) as u32,
        }
    }
}

/// What is remembered of a port between readings.
#[derive(Clone, Copy, Debug)]
struct Seen {
    oper: i32,
    last_change: u32,
    since: u32,
}

/// The module's reading of the switch (see the module comment).
pub struct Collector {
    source: Box<dyn FnMut() -> Vec<RawBridge> + Send>,
    mtu: fn(&str) -> u32,
    indexes: IfIndexMap,
    seen: HashMap<u32, Seen>,
    clock: Arc<Clock>,
    /// The bridge dot1dBase describes (`None`: the first).
    dot1d_bridge: Option<String>,
    events: UnboundedSender<Vec<VarBind>>,
    cached: Option<(Instant, Arc<View>)>,
    first: bool,
}

impl Collector {
    /// A collector of `daemon`'s ports; link changes go to `events` as
    /// notification varbinds.
    pub fn new(
        daemon: Arc<Daemon>,
        dot1d_bridge: Option<String>,
        events: UnboundedSender<Vec<VarBind>>,
    ) -> Collector {
        Collector::with_source(
            Box::new(move || read_daemon(&daemon)),
            mtu_of,
            dot1d_bridge,
            events,
        )
    }

    /// A collector of what `source` returns (tests use a stand-in).
    pub fn with_source(
        source: Box<dyn FnMut() -> Vec<RawBridge> + Send>,
        mtu: fn(&str) -> u32,
        dot1d_bridge: Option<String>,
        events: UnboundedSender<Vec<VarBind>>,
    ) -> Collector {
        Collector {
            source,
            mtu,
            indexes: IfIndexMap::default(),
            seen: HashMap::new(),
            clock: Arc::new(Clock::default()),
            dot1d_bridge,
            events,
            cached: None,
            first: true,
        }
    }

    /// The clock of this collector's TimeTicks.
    pub fn clock(&self) -> Arc<Clock> {
        self.clock.clone()
    }

    /// Our TimeTicks now.
    pub fn ticks(&self) -> u32 {
        self.clock.ticks()
    }

    /// The view, read again when the one held is older than `max_age`.
    pub fn view(&mut self, max_age: Duration) -> Arc<View> {
        if let Some((at, v)) = &self.cached {
            if at.elapsed() < max_age {
                return v.clone();
            }
        }
        let m = self.model();
        let v = Arc::new(View::build(&m));
        self.cached = Some((Instant::now(), v.clone()));
        v
    }

    /// Reads the switch: the model, with each port's ifIndex and change
    /// times; a notification for each port whose link went down or up.
    pub fn model(&mut self) -> Model {
        let raw = (self.source)();
        let now = if self.first { 0 } else { self.ticks() };
        self.first = false;
        let mut m = Model::default();
        let mut present = HashMap::new();
        let dot1d_name = self
            .dot1d_bridge
            .clone()
            .or_else(|| raw.first().map(|b| b.name.clone()));
        for b in &raw {
            let mut ports: Vec<_> = b.ports.iter().collect();
            ports.sort_by_key(|p| p.0);
            let mut dot1d = Dot1d {
                dpid: b.dpid,
                ports: Vec::new(),
                fdb: b.fdb.clone(),
            };
            for (ofport, interface, patch) in ports {
                let key = PortKey {
                    bridge: b.name.clone(),
                    ofport: *ofport,
                    interface: interface.clone(),
                };
                let Some(if_index) = self.indexes.index(&key) else {
                    continue;
                };
                let mut row = PortRow {
                    if_index,
                    bridge: b.name.clone(),
                    ofport: *ofport,
                    interface: interface.clone(),
                    patch: *patch,
                    desc: b.desc.iter().find(|d| d.port_no == *ofport).cloned(),
                    stats: b.stats.iter().find(|s| s.port_no == *ofport).copied(),
                    mtu: if *patch { 1500 } else { (self.mtu)(interface) },
                    last_change: now,
                    discontinuity: now,
                };
                let oper = row.oper_status();
                let seen = match self.seen.get(&if_index) {
                    None => Seen {
                        oper,
                        last_change: now,
                        since: now,
                    },
                    Some(s) if s.oper != oper => {
                        // RFC 2863: linkDown on entering down, linkUp on
                        // leaving it, neither from or to notPresent.
                        let notify = (oper == 2 && s.oper != 6) || (s.oper == 2 && oper != 6);
                        if notify {
                            let _ = self.events.send(mib::link_notification(&row));
                        }
                        Seen {
                            oper,
                            last_change: now,
                            since: s.since,
                        }
                    }
                    Some(s) => *s,
                };
                row.last_change = self.clock.as_master(seen.last_change);
                row.discontinuity = self.clock.as_master(seen.since);
                present.insert(if_index, seen);
                // dot1dBasePort is 1..65535: the local port is no bridge
                // port there (as Open vSwitch's own bridge is not).
                if *ofport != LOCAL {
                    dot1d.ports.push((*ofport, if_index));
                }
                m.ports.push(row);
            }
            if dot1d_name.as_deref() == Some(b.name.as_str()) {
                m.dot1d = Some(dot1d);
            }
        }
        // A port gone is forgotten: if it comes back, its counters start
        // again, and so does its discontinuity time.
        self.seen = present;
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn desc(no: u32, up: bool) -> ofp::Port {
        ofp::Port {
            port_no: no,
            state: if up {
                0
            } else {
                ofp::port::port_state::LINK_DOWN
            },
            ..Default::default()
        }
    }

    type Shared = Arc<Mutex<Vec<RawBridge>>>;

    fn collector(
        dot1d: Option<&str>,
    ) -> (
        Collector,
        Shared,
        tokio::sync::mpsc::UnboundedReceiver<Vec<VarBind>>,
    ) {
        let state: Shared = Arc::new(Mutex::new(vec![
            RawBridge {
                name: "br0".into(),
                dpid: 1,
                ports: vec![(2, "b".into(), false), (1, "a".into(), false)],
                desc: vec![desc(1, true), desc(2, true)],
                stats: vec![ofp::stats::PortStats {
                    port_no: 1,
                    rx_bytes: 42,
                    ..Default::default()
                }],
                fdb: vec![([2, 0, 0, 0, 0, 1], 2)],
            },
            RawBridge {
                name: "br1".into(),
                dpid: 2,
                ports: vec![(1, "patch:br0:9".into(), true)],
                desc: vec![desc(1, true)],
                stats: vec![],
                fdb: vec![],
            },
        ]));
        let s = state.clone();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let c = Collector::with_source(
            Box::new(move || s.lock().unwrap().clone()),
            |_| 9000,
            dot1d.map(str::to_string),
            tx,
        );
        (c, state, rx)
    }

    #[test]
    fn ports_of_all_bridges_numbered_in_order() {
        let (mut c, _, _) = collector(None);
        let m = c.model();
        let idx: Vec<_> = m
            .ports
            .iter()
            .map(|p| (p.if_index, p.bridge.as_str(), p.ofport))
            .collect();
        assert_eq!(idx, vec![(1, "br0", 1), (2, "br0", 2), (3, "br1", 1)]);
        assert_eq!(m.ports[0].stats.unwrap().rx_bytes, 42);
        assert_eq!(m.ports[0].mtu, 9000);
        assert!(m.ports[2].patch);
        assert_eq!(m.ports[2].mtu, 1500);
        assert_eq!(
            m.dot1d,
            Some(Dot1d {
                dpid: 1,
                ports: vec![(1, 1), (2, 2)],
                fdb: vec![([2, 0, 0, 0, 0, 1], 2)],
            })
        );
        let (mut c, _, _) = collector(Some("br1"));
        assert_eq!(c.model().dot1d.unwrap().ports, vec![(1, 3)]);
    }

    #[test]
    fn link_changes_notify_and_ifindex_stays() {
        let (mut c, state, mut rx) = collector(None);
        c.model();
        assert!(rx.try_recv().is_err());
        state.lock().unwrap()[0].desc[1] = desc(2, false);
        std::thread::sleep(Duration::from_millis(20));
        let m = c.model();
        let ev = rx.try_recv().unwrap();
        assert_eq!(ev, mib::link_notification(&m.ports[1]));
        assert_eq!(ev[0].value, crate::pdu::Value::Oid(mib::LINK_DOWN.to_vec()));
        assert!(m.ports[1].last_change > 0);
        assert_eq!(m.ports[0].last_change, 0);
        // Nothing new: no event.
        c.model();
        assert!(rx.try_recv().is_err());
        // br0 port 1 removed, a port 3 added, then port 1 back.
        {
            let mut s = state.lock().unwrap();
            s[0].ports = vec![(2, "b".into(), false), (3, "c".into(), false)];
        }
        let m = c.model();
        assert_eq!(
            m.ports.iter().map(|p| p.if_index).collect::<Vec<_>>(),
            vec![2, 4, 3]
        );
        {
            let mut s = state.lock().unwrap();
            s[0].ports.push((1, "a".into(), false));
        }
        let m = c.model();
        assert_eq!(m.ports[0].if_index, 1);
        // The port's link came up again: linkUp.
        state.lock().unwrap()[0].desc[1] = desc(2, true);
        c.model();
        assert_eq!(
            rx.try_recv().unwrap()[0].value,
            crate::pdu::Value::Oid(mib::LINK_UP.to_vec())
        );
    }

    #[test]
    fn ticks_read_as_the_masters_sys_up_time() {
        let c = Clock::default();
        assert_eq!(c.as_master(5), 5);
        c.master_says(c.ticks() + 100_000);
        assert!((100_000..100_100).contains(&c.as_master(0)));
        // A master started after the port's change: 0.
        c.master_says(0);
        assert_eq!(c.as_master(0), 0);
        assert_eq!(c.as_master(c.ticks() + 50), 50);
    }

    #[test]
    fn the_view_is_kept_for_max_age() {
        let (mut c, state, _) = collector(None);
        let v1 = c.view(Duration::from_secs(60));
        state.lock().unwrap()[0].stats[0].rx_bytes = 43;
        let v2 = c.view(Duration::from_secs(60));
        assert!(Arc::ptr_eq(&v1, &v2));
        let v3 = c.view(Duration::ZERO);
        let name = [mib::IF_X_ENTRY, &[6, 1]].concat();
        assert_eq!(v3.get(&name), crate::pdu::Value::Counter64(43));
    }
}

#[cfg(test)]
mod local_port_tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn the_local_port_is_an_interface_but_no_dot1d_port() {
        let raw = vec![RawBridge {
            name: "br0".into(),
            dpid: 1,
            ports: vec![(1, "a".into(), false), (LOCAL, "br0".into(), false)],
            desc: vec![
                ofp::Port {
                    port_no: 1,
                    ..Default::default()
                },
                ofp::Port {
                    port_no: LOCAL,
                    ..Default::default()
                },
            ],
            stats: vec![],
            fdb: vec![],
        }];
        let state = Arc::new(Mutex::new(raw));
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let mut c = Collector::with_source(
            Box::new(move || state.lock().unwrap().clone()),
            |_| 1500,
            None,
            tx,
        );
        let m = c.model();
        let rows: Vec<_> = m
            .ports
            .iter()
            .map(|p| (p.if_index, p.ofport, p.interface.as_str()))
            .collect();
        assert_eq!(rows, vec![(1, 1, "a"), (2, LOCAL, "br0")]);
        assert_eq!(m.dot1d.unwrap().ports, vec![(1, 1)]);
    }
}
