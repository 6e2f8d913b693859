//! What differs between two models, in terms a runtime can apply one by
//! one: [`diff`] compares the model in force with a new one (the result of
//! [`Config::apply`](crate::Config::apply), or a reloaded file) and lists
//! [`Change`]s, each naming exactly what to touch.
//!
//! Bridges are matched by name, ports by OpenFlow number within their
//! bridge. Moving a bridge or a port within its list changes nothing.
//!
//! # Order
//!
//! Deletions come first, then restarts and re-opened ports, then
//! additions, then settings:
//!
//! 1. [`Change::DelBridge`], 2. [`Change::DelPort`],
//! 3. [`Change::ChangeBridge`] / [`Change::ChangeFlows`],
//! 4. [`Change::ChangePort`], 5. [`Change::AddBridge`],
//! 6. [`Change::AddPort`], 6½. [`Change::SetPortVlan`],
//! 7. [`Change::SetFailMode`],
//! 8. [`Change::SetControllers`], 9. [`Change::PatchLinks`],
//! 10. [`Change::ChangeDataplane`].
//!
//! # What needs a restart
//!
//! [`Change::needs_restart`] classifies; the runtime decides.
//!
//! * Live: adding and deleting bridges and ports, re-opening a port
//!   ([`Change::ChangePort`]), a port's VLAN settings, controllers and
//!   fail mode.
//! * The bridge rebuilt: [`Change::ChangeBridge`] (dpid, n_tables,
//!   miss_send_len, flow_table_capacity — the tables are sized and the
//!   datapath id announced when the bridge starts) and
//!   [`Change::ChangeFlows`] (static flows, groups or meters: they are
//!   installed when the bridge starts, and a controller may have changed
//!   the tables since). A rebuilt bridge takes its new description whole,
//!   so no other change is listed for it (its ports, controllers, fail
//!   mode), and at most one rebuild: if both its settings and its static
//!   flows changed, one [`Change::ChangeBridge`] whose fields name
//!   `flows`, `groups` or `meters` too.
//! * Every bridge's threads: [`Change::ChangeDataplane`].
//! * The bridges at both ends: [`Change::PatchLinks`].

use crate::model::*;
use crate::Config;

/// One difference between two models.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// A bridge that is new (ports, controllers and flows with it).
    AddBridge(String),
    /// A bridge that is gone (ports and controllers with it).
    DelBridge(String),
    /// A port that is new in a bridge that stays.
    AddPort {
        /// The bridge.
        bridge: String,
        /// Its OpenFlow number.
        port: u32,
    },
    /// A port that is gone from a bridge that stays (or whose interface
    /// changed: then an [`AddPort`](Change::AddPort) of the same number
    /// follows).
    DelPort {
        /// The bridge.
        bridge: String,
        /// Its OpenFlow number.
        port: u32,
        /// Its interface; for a patch port `patch:PEER_BRIDGE:PEER_PORT`.
        interface: String,
    },
    /// The same port (number and interface) with another backend or other
    /// backend settings, or a patch port with another peer: the runtime
    /// re-opens it.
    ChangePort {
        /// The bridge.
        bridge: String,
        /// Its OpenFlow number.
        port: u32,
    },
    /// The controllers of a bridge differ (targets or timers), or the TLS
    /// files that its `tls:`/`ptls:` controllers use.
    SetControllers {
        /// The bridge.
        bridge: String,
    },
    /// The VLAN settings (`tag`, `trunks`, `vlan_mode`) of a port that
    /// stays differ: applied live, nothing re-opened.
    SetPortVlan {
        /// The bridge.
        bridge: String,
        /// Its OpenFlow number.
        port: u32,
    },
    /// The fail mode of a bridge differs.
    SetFailMode {
        /// The bridge.
        bridge: String,
        /// The new mode.
        mode: FailMode,
    },
    /// Settings the bridge is built with differ: it must be rebuilt.
    ChangeBridge {
        /// The bridge.
        bridge: String,
        /// Which: `dpid`, `n_tables`, `miss_send_len`,
        /// `flow_table_capacity`, and `flows`, `groups`, `meters` when
        /// those differ as well.
        fields: Vec<&'static str>,
    },
    /// Dataplane thread settings differ.
    ChangeDataplane {
        /// The file keys: `mode`, `rx_threads`, `worker_threads`,
        /// `tx_threads`, `rx_cores`, `worker_cores`, `tx_cores`,
        /// `burst.rx_read` ... `burst.tx_write`, `flush_idle_us`,
        /// `max_batch_wait_us`, `rx_ring_size`, `tx_ring_size`,
        /// `dispatch`, `dispatch_fallback`, `priority_class`,
        /// `core_assign`, and `dpdk.eal_args` (the `[dpdk]` section).
        fields: Vec<&'static str>,
    },
    /// Only the static flows, groups or meters of a bridge differ (the
    /// texts, not where they were written).
    ChangeFlows {
        /// The bridge.
        bridge: String,
    },
    /// The patch links differ (as a set; `a`/`b` order is no difference).
    PatchLinks,
    /// The egress queues of a port that stays differ (given, changed or
    /// taken away); a port added or re-added gets its queues with it.
    SetQos {
        /// The bridge.
        bridge: String,
        /// Its OpenFlow number.
        port: u32,
    },
}

impl Change {
    /// Whether applying this change means rebuilding a bridge (or, for
    /// [`ChangeDataplane`](Change::ChangeDataplane), the threads of every
    /// bridge); see the module comment. Everything else can be applied to
    /// a running bridge.
    pub fn needs_restart(&self) -> bool {
        matches!(
            self,
            Change::ChangeBridge { .. }
                | Change::ChangeFlows { .. }
                | Change::ChangeDataplane { .. }
                | Change::PatchLinks
        )
    }
}

/// The changes that turn `old` into `new`, in the order of the module
/// comment. Empty when nothing a runtime uses differs (warnings, the
/// lines flows were written on and list order are not compared).
pub fn diff(old: &Config, new: &Config) -> Vec<Change> {
    let mut del_bridges = Vec::new();
    let mut del_ports = Vec::new();
    let mut restarts = Vec::new();
    let mut change_ports = Vec::new();
    let mut add_bridges = Vec::new();
    let mut add_ports = Vec::new();
    let mut vlans = Vec::new();
    let mut fail_modes = Vec::new();
    let mut controllers = Vec::new();
    let mut qos = Vec::new();

    for ob in &old.bridges {
        if new.bridge(&ob.name).is_none() {
            del_bridges.push(Change::DelBridge(ob.name.clone()));
        }
    }
    let tls_changed = old.tls != new.tls;
    for nb in &new.bridges {
        let Some(ob) = old.bridge(&nb.name) else {
            add_bridges.push(Change::AddBridge(nb.name.clone()));
            continue;
        };
        let bridge = || nb.name.clone();
        let mut fields: Vec<&'static str> = [
            ("dpid", ob.dpid != nb.dpid),
            ("n_tables", ob.n_tables != nb.n_tables),
            ("miss_send_len", ob.miss_send_len != nb.miss_send_len),
            (
                "flow_table_capacity",
                ob.flow_table_capacity != nb.flow_table_capacity,
            ),
            (
                "flow_memory_limit_mib",
                ob.flow_memory_limit_mib != nb.flow_memory_limit_mib,
            ),
            ("local_port", ob.local_port != nb.local_port),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect();
        let mut statics = Vec::new();
        let file = |b: &Bridge| b.flows_file.as_ref().map(|f| (f.sha256, f.flows));
        if texts(&ob.flows, |f| &f.text) != texts(&nb.flows, |f| &f.text) || file(ob) != file(nb) {
            statics.push("flows");
        }
        if texts(&ob.groups, |g| &g.text) != texts(&nb.groups, |g| &g.text) {
            statics.push("groups");
        }
        if texts(&ob.meters, |m| &m.text) != texts(&nb.meters, |m| &m.text) {
            statics.push("meters");
        }
        if !fields.is_empty() {
            fields.extend(statics);
            restarts.push(Change::ChangeBridge {
                bridge: bridge(),
                fields,
            });
            continue;
        }
        if !statics.is_empty() {
            restarts.push(Change::ChangeFlows { bridge: bridge() });
            continue;
        }
        for op in &ob.ports {
            match nb.port(op.number) {
                None => del_ports.push(del_port(nb, op)),
                Some(np) if np.kind == op.kind && np.vlan == op.vlan => {}
                Some(np) if np.kind == op.kind => vlans.push(Change::SetPortVlan {
                    bridge: bridge(),
                    port: op.number,
                }),
                Some(np) if same_identity(&op.kind, &np.kind) => {
                    change_ports.push(Change::ChangePort {
                        bridge: bridge(),
                        port: op.number,
                    })
                }
                Some(_) => {
                    del_ports.push(del_port(nb, op));
                    add_ports.push(Change::AddPort {
                        bridge: bridge(),
                        port: op.number,
                    });
                }
            }
        }
        for np in &nb.ports {
            if ob.port(np.number).is_none() {
                add_ports.push(Change::AddPort {
                    bridge: bridge(),
                    port: np.number,
                });
            }
        }
        for np in &nb.ports {
            let readded = add_ports.iter().any(
                |c| matches!(c, Change::AddPort { bridge, port } if *bridge == nb.name && *port == np.number),
            );
            if !readded
                && ob.port(np.number).is_some()
                && ob.qos.get(&np.number) != nb.qos.get(&np.number)
            {
                qos.push(Change::SetQos {
                    bridge: bridge(),
                    port: np.number,
                });
            }
        }
        if ob.fail_mode != nb.fail_mode {
            fail_modes.push(Change::SetFailMode {
                bridge: bridge(),
                mode: nb.fail_mode,
            });
        }
        let uses_tls = nb
            .controllers
            .iter()
            .any(|c| c.target.transport() == Transport::Tls);
        if ob.controllers != nb.controllers || (tls_changed && uses_tls) {
            controllers.push(Change::SetControllers { bridge: bridge() });
        }
    }

    let mut out = del_bridges;
    out.extend(del_ports);
    out.extend(restarts);
    out.extend(change_ports);
    out.extend(add_bridges);
    out.extend(add_ports);
    out.extend(vlans);
    out.extend(fail_modes);
    out.extend(controllers);
    out.extend(qos);
    if !same_links(&old.patch_links, &new.patch_links) {
        out.push(Change::PatchLinks);
    }
    let mut fields = dataplane_fields(&old.dataplane, &new.dataplane);
    if old.dpdk != new.dpdk {
        // The EAL starts once per process.
        fields.push("dpdk.eal_args");
    }
    if !fields.is_empty() {
        out.push(Change::ChangeDataplane { fields });
    }
    out
}

fn texts<T>(items: &[T], text: impl Fn(&T) -> &String) -> Vec<&str> {
    items.iter().map(|i| text(i).as_str()).collect()
}

fn del_port(b: &Bridge, p: &Port) -> Change {
    Change::DelPort {
        bridge: b.name.clone(),
        port: p.number,
        interface: match &p.kind {
            PortKind::Interface { name, .. } => name.clone(),
            PortKind::Patch {
                peer_bridge,
                peer_port,
            } => format!("patch:{peer_bridge}:{peer_port}"),
        },
    }
}

/// The same interface (or both patch ports): a difference in them is a
/// re-open, not a new port.
fn same_identity(a: &PortKind, b: &PortKind) -> bool {
    match (a, b) {
        (PortKind::Interface { name: x, .. }, PortKind::Interface { name: y, .. }) => x == y,
        (PortKind::Patch { .. }, PortKind::Patch { .. }) => true,
        _ => false,
    }
}

fn same_links(a: &[PatchLink], b: &[PatchLink]) -> bool {
    let norm = |l: &[PatchLink]| {
        let mut v: Vec<_> = l
            .iter()
            .map(|l| {
                if l.a <= l.b {
                    (l.a.clone(), l.b.clone())
                } else {
                    (l.b.clone(), l.a.clone())
                }
            })
            .collect();
        v.sort();
        v
    };
    norm(a) == norm(b)
}

fn dataplane_fields(a: &Dataplane, b: &Dataplane) -> Vec<&'static str> {
    let checks: [(&'static str, bool); 19] = [
        ("mode", a.mode != b.mode),
        ("rx_threads", a.rx_threads != b.rx_threads),
        ("worker_threads", a.worker_threads != b.worker_threads),
        ("tx_threads", a.tx_threads != b.tx_threads),
        ("rx_cores", a.rx_cores != b.rx_cores),
        ("worker_cores", a.worker_cores != b.worker_cores),
        ("tx_cores", a.tx_cores != b.tx_cores),
        ("burst.rx_read", a.burst.rx_read != b.burst.rx_read),
        ("burst.rx_write", a.burst.rx_write != b.burst.rx_write),
        (
            "burst.worker_read",
            a.burst.worker_read != b.burst.worker_read,
        ),
        (
            "burst.worker_write",
            a.burst.worker_write != b.burst.worker_write,
        ),
        ("burst.tx_read", a.burst.tx_read != b.burst.tx_read),
        ("burst.tx_write", a.burst.tx_write != b.burst.tx_write),
        ("flush_idle_us", a.flush.idle != b.flush.idle),
        ("max_batch_wait_us", a.flush.max_wait != b.flush.max_wait),
        ("rx_ring_size", a.rings.rx_ring != b.rings.rx_ring),
        ("tx_ring_size", a.rings.tx_ring != b.rings.tx_ring),
        ("dispatch", a.dispatch.key != b.dispatch.key),
        (
            "dispatch_fallback",
            a.dispatch.fallback != b.dispatch.fallback,
        ),
    ];
    let mut out: Vec<&'static str> = checks
        .iter()
        .filter(|(_, differs)| *differs)
        .map(|(name, _)| *name)
        .collect();
    if a.dispatch.rules != b.dispatch.rules {
        out.push("priority_class");
    }
    if a.core_assign != b.core_assign {
        out.push("core_assign");
    }
    if a.max_queue_delay_us != b.max_queue_delay_us {
        out.push("max_queue_delay_us");
    }
    if a.bulk_reply_nice != b.bulk_reply_nice {
        out.push("bulk_reply_nice");
    }
    out
}
