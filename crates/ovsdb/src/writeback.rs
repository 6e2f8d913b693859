//! What fulmar writes into the database, as `transact` operations:
//!
//! * [`structure_ops`]: the switch's own changes (a `fulmar ctl add-port`,
//!   a `--config` bridge the database lacks) as rows inserted, updated or
//!   unreferenced (ovsdb-server collects rows nothing refers to).
//! * [`Status::ops`]: the columns the switch owns — `cur_cfg`,
//!   `Bridge.datapath_id` and `status`, `Interface.ofport`, `error`,
//!   `link_state`, `admin_state`, `statistics`, `Controller.is_connected`,
//!   `role` and `status` — only where they differ from what the database
//!   holds (or from what was already sent and not yet echoed).

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::datum::{Datum, RowRef};
use crate::replica::Replica;
use crate::sync::{Key, Val};
use crate::view::{ovs_type_of, DbView};

/// The largest `ofport_request` the schema takes.
const MAX_OFPORT_REQUEST: u32 = 65279;

fn where_uuid(uuid: &str) -> Value {
    json!([["_uuid", "==", ["uuid", uuid]]])
}

fn where_name(name: &str) -> Value {
    json!([["name", "==", name]])
}

fn str_map_json(m: &BTreeMap<String, String>) -> Value {
    Datum::str_map(m).to_json()
}

/// The operations that write the model's values `items` (from
/// [`Plan::to_db`](crate::sync::Plan)) into a database seen as `view`.
pub fn structure_ops(items: &[(Key, Option<Val>)], view: &DbView) -> Vec<Value> {
    let mut ops = Vec::new();
    let adds = items.iter().any(|(_, v)| v.is_some());
    if view.root.is_none() && adds {
        ops.push(json!({"op": "insert", "table": "Open_vSwitch", "row": {}}));
    }
    let mut n = 0;
    let mut named = |prefix: &str| {
        n += 1;
        format!("{prefix}{n}")
    };
    // Bridges first: later operations find them by name.
    let mut ordered: Vec<&(Key, Option<Val>)> = items.iter().collect();
    ordered.sort_by_key(|(k, _)| !matches!(k, Key::Bridge(_)));
    for (key, val) in ordered {
        match (key, val) {
            (Key::Bridge(b), Some(Val::Bridge { dpid })) => {
                let dpid = dpid.map(|d| format!("{d:016x}"));
                if view.bridge(b).is_none() {
                    let name = named("bridge");
                    let mut other = BTreeMap::new();
                    if let Some(d) = &dpid {
                        other.insert("datapath-id".to_string(), d.clone());
                    }
                    ops.push(json!({"op": "insert", "table": "Bridge", "uuid-name": name,
                                    "row": {"name": b, "other_config": str_map_json(&other)}}));
                    ops.push(json!({"op": "mutate", "table": "Open_vSwitch", "where": [],
                                    "mutations": [["bridges", "insert", ["set", [["named-uuid", name]]]]]}));
                } else if let Some(d) = dpid {
                    ops.push(json!({"op": "mutate", "table": "Bridge", "where": where_name(b),
                                    "mutations": [["other_config", "delete", ["set", ["datapath-id"]]],
                                                  ["other_config", "insert", ["map", [["datapath-id", d]]]]]}));
                }
            }
            (Key::Bridge(b), None) => {
                if let Some(row) = view.bridge(b) {
                    ops.push(json!({"op": "mutate", "table": "Open_vSwitch", "where": [],
                                    "mutations": [["bridges", "delete", ["set", [["uuid", row.uuid]]]]]}));
                }
            }
            (Key::PortVlan(_, i), Some(Val::Vlan(v))) => {
                let tag = match v.tag {
                    Some(t) => json!(t),
                    None => json!(["set", []]),
                };
                let mode = match v.mode {
                    Some(m) => json!(m.as_str()),
                    None => json!(["set", []]),
                };
                ops.push(json!({"op": "update", "table": "Port", "where": where_name(i),
                                "row": {"tag": tag, "trunks": ["set", v.trunks], "vlan_mode": mode}}));
            }
            (Key::FailMode(b), Some(Val::FailMode(m))) => {
                ops.push(
                    json!({"op": "update", "table": "Bridge", "where": where_name(b),
                                "row": {"fail_mode": m.as_str()}}),
                );
            }
            (Key::Controllers(b), Some(Val::Controllers(targets))) => {
                let mut refs = Vec::new();
                for t in targets {
                    let existing = view
                        .controllers
                        .iter()
                        .find(|c| &c.bridge == b && c.canonical.as_ref() == Ok(t));
                    match existing {
                        Some(c) => refs.push(json!(["uuid", c.uuid])),
                        None => {
                            let name = named("controller");
                            ops.push(
                                json!({"op": "insert", "table": "Controller", "uuid-name": name,
                                            "row": {"target": t}}),
                            );
                            refs.push(json!(["named-uuid", name]));
                        }
                    }
                }
                ops.push(
                    json!({"op": "update", "table": "Bridge", "where": where_name(b),
                                "row": {"controller": ["set", refs]}}),
                );
            }
            (Key::Port(b, i), Some(Val::Port(spec))) => {
                let mut row = serde_json::Map::new();
                row.insert("type".into(), json!(ovs_type_of(&spec.kind)));
                row.insert("options".into(), str_map_json(&spec.options));
                if let Some(n) = spec.number.filter(|n| *n <= MAX_OFPORT_REQUEST) {
                    row.insert("ofport_request".into(), json!(n));
                }
                if view.ifaces.iter().any(|r| &r.bridge == b && &r.name == i) {
                    ops.push(
                        json!({"op": "update", "table": "Interface", "where": where_name(i),
                                    "row": row}),
                    );
                } else {
                    let iname = named("iface");
                    let pname = named("port");
                    row.insert("name".into(), json!(i));
                    ops.push(json!({"op": "insert", "table": "Interface", "uuid-name": iname, "row": row}));
                    ops.push(json!({"op": "insert", "table": "Port", "uuid-name": pname,
                                    "row": {"name": i, "interfaces": ["named-uuid", iname]}}));
                    ops.push(json!({"op": "mutate", "table": "Bridge", "where": where_name(b),
                                    "mutations": [["ports", "insert", ["set", [["named-uuid", pname]]]]]}));
                }
            }
            (Key::Port(b, i), None) => {
                if let Some(pu) = view.bridge(b).and_then(|r| r.port_rows.get(i)) {
                    ops.push(
                        json!({"op": "mutate", "table": "Bridge", "where": where_name(b),
                                    "mutations": [["ports", "delete", ["set", [["uuid", pu]]]]]}),
                    );
                }
            }
            (Key::Qos(_, i), Some(Val::Qos(q))) => {
                let mut queues = Vec::new();
                for c in &q.queues {
                    let qname = named("queue");
                    let mut other = BTreeMap::new();
                    other.insert("priority".to_string(), c.priority.to_string());
                    if c.min_rate != 0 {
                        other.insert("min-rate".to_string(), c.min_rate.to_string());
                    }
                    if c.max_rate != 0 {
                        other.insert("max-rate".to_string(), c.max_rate.to_string());
                    }
                    ops.push(json!({"op": "insert", "table": "Queue", "uuid-name": qname,
                                    "row": {"other_config": str_map_json(&other)}}));
                    queues.push(json!([c.id, ["named-uuid", qname]]));
                }
                let qos = named("qos");
                let mut other = BTreeMap::new();
                if q.max_rate != 0 {
                    other.insert("max-rate".to_string(), q.max_rate.to_string());
                }
                ops.push(json!({"op": "insert", "table": "QoS", "uuid-name": qos,
                                "row": {"type": q.kind.as_str(),
                                        "other_config": str_map_json(&other),
                                        "queues": ["map", queues]}}));
                ops.push(
                    json!({"op": "update", "table": "Port", "where": where_name(i),
                                "row": {"qos": ["named-uuid", qos]}}),
                );
            }
            (Key::Qos(_, i), None) => {
                ops.push(
                    json!({"op": "update", "table": "Port", "where": where_name(i),
                                "row": {"qos": ["set", []]}}),
                );
            }
            // A bridge's settings when the bridge itself goes: nothing.
            _ => {}
        }
    }
    ops
}

/// The rows Open vSwitch's `add-br` makes beside a bridge, for bridges
/// that `structure_ops` inserts and that have a local port (`has_local`):
/// an `Interface` of type "internal" and a `Port`, both named after the
/// bridge, in its `ports`. Goes after `structure_ops`'s operations in the
/// same transaction (the bridge is found by name).
pub fn local_port_ops(
    items: &[(Key, Option<Val>)],
    view: &DbView,
    has_local: impl Fn(&str) -> bool,
) -> Vec<Value> {
    let mut ops = Vec::new();
    for (n, (key, val)) in items.iter().enumerate() {
        let (Key::Bridge(b), Some(Val::Bridge { .. })) = (key, val) else {
            continue;
        };
        if view.bridge(b).is_some() || !has_local(b) {
            continue;
        }
        let (iname, pname) = (format!("local_iface{n}"), format!("local_port{n}"));
        ops.push(
            json!({"op": "insert", "table": "Interface", "uuid-name": iname,
                        "row": {"name": b, "type": "internal"}}),
        );
        ops.push(json!({"op": "insert", "table": "Port", "uuid-name": pname,
                        "row": {"name": b, "interfaces": ["named-uuid", iname]}}));
        ops.push(
            json!({"op": "mutate", "table": "Bridge", "where": where_name(b),
                        "mutations": [["ports", "insert", ["set", [["named-uuid", pname]]]]]}),
        );
    }
    ops
}

/// A port as the switch runs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LivePort {
    /// OpenFlow number.
    pub ofport: u32,
    /// Link up.
    pub link_up: bool,
    /// Administratively up.
    pub admin_up: bool,
}

/// A controller as the switch runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveController {
    /// Canonical target.
    pub target: String,
    /// Negotiated.
    pub connected: bool,
    /// Role (master, slave, equal, other).
    pub role: String,
}

/// A bridge as the switch runs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveBridge {
    /// Datapath id.
    pub dpid: u64,
    /// Ports by interface name.
    pub ports: BTreeMap<String, LivePort>,
    /// Controllers.
    pub controllers: Vec<LiveController>,
    /// Why the bridge has no local port although it was asked for one.
    pub local_error: Option<String>,
}

/// The `ofport` Open vSwitch shows for its bridge-local port (its
/// OpenFlow 1.0 number); OpenFlow 1.3 calls it 0xfffffffe.
pub const OVS_LOCAL_OFPORT: i64 = 65534;

/// `OFPP_LOCAL` in OpenFlow 1.3, as the switch numbers the port.
pub const OFPP_LOCAL: u32 = 0xffff_fffe;

/// The running switch, as far as the database shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    /// Bridges by name.
    pub bridges: BTreeMap<String, LiveBridge>,
    /// Port statistics by (bridge, interface), when fetched this round.
    pub stats: Option<BTreeMap<(String, String), BTreeMap<String, i64>>>,
}

/// Open vSwitch's roles: "equal" is its "other".
fn ovs_role(role: &str) -> &'static str {
    match role {
        "master" => "master",
        "slave" => "slave",
        _ => "other",
    }
}

/// The status columns already sent and not yet seen in the database.
#[derive(Debug, Default)]
pub struct Status {
    sent: HashMap<(String, String), Datum>,
}

impl Status {
    /// Forgets what was sent (a new connection, or a refused write).
    pub fn forget(&mut self) {
        self.sent.clear();
    }

    /// The update operations that bring the switch-owned columns up to
    /// date. `errors`: why an item did not apply to the switch;
    /// `cur_cfg`: the `next_cfg` now in force, to acknowledge.
    pub fn ops(
        &mut self,
        replica: &Replica,
        view: &DbView,
        live: &Live,
        errors: &BTreeMap<Key, String>,
        cur_cfg: Option<i64>,
    ) -> Vec<Value> {
        let mut ops = Vec::new();
        let mut row_update = |table: &str, uuid: &str, cols: Vec<(&str, Datum)>| {
            let have = replica.row(table, uuid).map(RowRef);
            let mut row = serde_json::Map::new();
            for (col, want) in cols {
                let key = (uuid.to_string(), col.to_string());
                if have.and_then(|h| h.get(col)).as_ref() == Some(&want) {
                    self.sent.remove(&key);
                    continue;
                }
                if self.sent.get(&key) == Some(&want) {
                    continue;
                }
                row.insert(col.to_string(), want.to_json());
                self.sent.insert(key, want);
            }
            if !row.is_empty() {
                ops.push(
                    json!({"op": "update", "table": table, "where": where_uuid(uuid), "row": row}),
                );
            }
        };
        for b in &view.bridges {
            let lb = live.bridges.get(&b.name);
            let mut status = BTreeMap::new();
            if !b.ignored.is_empty() {
                status.insert("fulmar_ignored".to_string(), b.ignored.join(", "));
            }
            let error = errors
                .get(&Key::Bridge(b.name.clone()))
                .or(errors.get(&Key::FailMode(b.name.clone())))
                .cloned()
                .or(b.bad_dpid.clone());
            if let Some(e) = error {
                status.insert("fulmar_error".to_string(), e);
            }
            let dpid = match lb {
                Some(l) => Datum::str(&format!("{:016x}", l.dpid)),
                None => Datum::empty(),
            };
            row_update(
                "Bridge",
                &b.uuid,
                vec![("datapath_id", dpid), ("status", Datum::str_map(&status))],
            );
        }
        for i in &view.ifaces {
            let lp = live
                .bridges
                .get(&i.bridge)
                .and_then(|b| b.ports.get(&i.name));
            let mut cols = Vec::new();
            match (lp, &i.refused) {
                (Some(p), None) => {
                    let ofport = if p.ofport == OFPP_LOCAL {
                        OVS_LOCAL_OFPORT
                    } else {
                        i64::from(p.ofport)
                    };
                    cols.push(("ofport", Datum::int(ofport)));
                    let error = if i.ignored.is_empty() {
                        Datum::empty()
                    } else {
                        Datum::str(&format!("ignored by fulmar: {}", i.ignored.join(", ")))
                    };
                    cols.push(("error", error));
                    let updown = |b: bool| Datum::str(if b { "up" } else { "down" });
                    cols.push(("link_state", updown(p.link_up)));
                    cols.push(("admin_state", updown(p.admin_up)));
                    if let Some(s) = live
                        .stats
                        .as_ref()
                        .and_then(|s| s.get(&(i.bridge.clone(), i.name.clone())))
                    {
                        cols.push((
                            "statistics",
                            Datum::map(
                                s.iter()
                                    .map(|(k, v)| {
                                        (
                                            crate::datum::Atom::Str(k.clone()),
                                            crate::datum::Atom::Int(*v),
                                        )
                                    })
                                    .collect(),
                            ),
                        ));
                    }
                }
                _ => {
                    let why = i
                        .refused
                        .clone()
                        .or_else(|| {
                            errors
                                .get(&Key::Port(i.bridge.clone(), i.name.clone()))
                                .cloned()
                        })
                        .or_else(|| {
                            errors
                                .get(&Key::Bridge(i.bridge.clone()))
                                .map(|e| format!("bridge {} is not running: {e}", i.bridge))
                        })
                        .or_else(|| {
                            let lb = live.bridges.get(&i.bridge).filter(|_| i.local)?;
                            Some(lb.local_error.clone().unwrap_or_else(|| {
                                format!(
                                    "bridge {} runs without its local port \
                                     (local_port = false in fulmar's configuration)",
                                    i.bridge
                                )
                            }))
                        })
                        .unwrap_or_else(|| "not configured in the switch".into());
                    cols.push(("ofport", Datum::int(-1)));
                    cols.push(("error", Datum::str(&why)));
                    cols.push(("link_state", Datum::empty()));
                    cols.push(("admin_state", Datum::empty()));
                }
            }
            row_update("Interface", &i.uuid, cols);
        }
        for c in &view.controllers {
            let lc = live.bridges.get(&c.bridge).and_then(|b| {
                b.controllers
                    .iter()
                    .find(|l| c.canonical.as_ref() == Ok(&l.target))
            });
            let connected = lc.is_some_and(|l| l.connected);
            let role = match lc {
                Some(l) if l.connected => Datum::str(ovs_role(&l.role)),
                _ => Datum::empty(),
            };
            let mut status = BTreeMap::new();
            let error = match &c.canonical {
                Err(e) => Some(e.clone()),
                Ok(_) => errors.get(&Key::Controllers(c.bridge.clone())).cloned(),
            };
            if let Some(e) = error {
                status.insert("last_error".to_string(), e);
            }
            row_update(
                "Controller",
                &c.uuid,
                vec![
                    ("is_connected", Datum::bool(connected)),
                    ("role", role),
                    ("status", Datum::str_map(&status)),
                ],
            );
        }
        if let (Some(root), Some(cfg)) = (&view.root, cur_cfg) {
            row_update("Open_vSwitch", root, vec![("cur_cfg", Datum::int(cfg))]);
        }
        // Rows that are gone need no memory.
        let rows: std::collections::HashSet<&str> = view
            .bridges
            .iter()
            .map(|b| b.uuid.as_str())
            .chain(view.ifaces.iter().map(|i| i.uuid.as_str()))
            .chain(view.controllers.iter().map(|c| c.uuid.as_str()))
            .chain(view.root.as_deref())
            .collect();
        self.sent.retain(|(u, _), _| rows.contains(u.as_str()));
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::PortSpec;
    use crate::view::tests::sample;
    use datastore::FailMode;

    fn live() -> Live {
        let mut b = LiveBridge {
            dpid: 0xab,
            ..Default::default()
        };
        b.ports.insert(
            "eth1".into(),
            LivePort {
                ofport: 1,
                link_up: true,
                admin_up: true,
            },
        );
        b.controllers.push(LiveController {
            target: "tcp:127.0.0.1:6653".into(),
            connected: true,
            role: "equal".into(),
        });
        let mut l = Live::default();
        l.bridges.insert("br0".into(), b);
        let mut s = BTreeMap::new();
        s.insert("rx_packets".to_string(), 5i64);
        let mut all = BTreeMap::new();
        all.insert(("br0".to_string(), "eth1".to_string()), s);
        l.stats = Some(all);
        l
    }

    fn find<'a>(ops: &'a [Value], table: &str, uuid: &str) -> Option<&'a Value> {
        ops.iter()
            .find(|o| o["table"] == table && o["where"][0][2][1] == uuid)
    }

    #[test]
    fn status_writes_what_the_switch_owns_once() {
        let r = sample();
        let v = DbView::read(&r);
        let mut errors = BTreeMap::new();
        errors.insert(
            Key::Port("br0".into(), "veth9".into()),
            "could not open veth9".to_string(),
        );
        let mut st = Status::default();
        let ops = st.ops(&r, &v, &live(), &errors, Some(4));
        let eth1 = &find(&ops, "Interface", "i1").unwrap()["row"];
        assert_eq!(eth1["ofport"], 1);
        assert_eq!(eth1["link_state"], "up");
        assert_eq!(eth1["statistics"], json!(["map", [["rx_packets", 5]]]));
        assert_eq!(eth1["error"], "ignored by fulmar: mtu_request");
        let veth9 = &find(&ops, "Interface", "i2").unwrap()["row"];
        assert_eq!(veth9["ofport"], -1);
        assert_eq!(veth9["error"], "could not open veth9");
        // The bridge's internal interface without a local port running.
        let br0 = &find(&ops, "Interface", "i0").unwrap()["row"];
        assert_eq!(br0["ofport"], -1);
        assert!(
            br0["error"].as_str().unwrap().contains("local port"),
            "{br0}"
        );
        let c = &find(&ops, "Controller", "c0").unwrap()["row"];
        assert_eq!(c["is_connected"], true);
        assert_eq!(c["role"], "other");
        assert_eq!(
            find(&ops, "Bridge", "b0").unwrap()["row"]["datapath_id"],
            "00000000000000ab"
        );
        assert_eq!(
            find(&ops, "Open_vSwitch", "o").unwrap()["row"]["cur_cfg"],
            4
        );
        // Sent, not yet echoed: not sent again.
        assert!(st.ops(&r, &v, &live(), &errors, Some(4)).is_empty());
        // Echoed: nothing to do either; a change goes out alone.
        let mut r2 = r.clone();
        for op in &ops {
            let uuid = op["where"][0][2][1].as_str().unwrap();
            r2.apply(&json!({op["table"].as_str().unwrap(): {uuid: {"new": op["row"]}}}))
                .unwrap();
        }
        assert!(st.ops(&r2, &v, &live(), &errors, Some(4)).is_empty());
        let mut l = live();
        l.bridges
            .get_mut("br0")
            .unwrap()
            .ports
            .get_mut("eth1")
            .unwrap()
            .link_up = false;
        let ops = st.ops(&r2, &v, &l, &errors, Some(4));
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0]["row"], json!({"link_state": "down"}));
    }

    #[test]
    fn queues_become_qos_and_queue_rows() {
        let v = DbView::read(&sample());
        let q = datastore::PortQos {
            kind: datastore::QosKind::LinuxHfsc,
            max_rate: 5_000_000,
            queues: vec![datastore::QueueConf {
                id: 3,
                min_rate: 1000,
                max_rate: 0,
                priority: 2,
            }],
        };
        let k = Key::Qos("br0".into(), "eth1".into());
        let ops = structure_ops(&[(k.clone(), Some(Val::Qos(q)))], &v);
        let text = serde_json::to_string(&ops).unwrap();
        assert_eq!(ops.len(), 3, "{text}");
        assert_eq!(ops[0]["table"], "Queue");
        assert_eq!(
            ops[0]["row"]["other_config"],
            json!(["map", [["min-rate", "1000"], ["priority", "2"]]])
        );
        assert_eq!(ops[1]["table"], "QoS");
        assert_eq!(ops[1]["row"]["type"], "linux-hfsc");
        assert_eq!(
            ops[1]["row"]["queues"],
            json!(["map", [[3, ["named-uuid", "queue1"]]]])
        );
        assert_eq!(ops[2]["table"], "Port");
        assert_eq!(ops[2]["row"]["qos"], json!(["named-uuid", "qos2"]));
        let ops = structure_ops(&[(k, None)], &v);
        assert_eq!(ops[0]["row"]["qos"], json!(["set", []]));
    }

    #[test]
    fn switch_changes_become_rows() {
        let v = DbView::read(&sample());
        let spec = PortSpec {
            kind: "tap".into(),
            number: Some(9),
            options: BTreeMap::new(),
        };
        let items = vec![
            (
                Key::Port("br0".into(), "tap0".into()),
                Some(Val::Port(spec)),
            ),
            (Key::Port("br0".into(), "eth1".into()), None),
            (
                Key::Bridge("br1".into()),
                Some(Val::Bridge { dpid: Some(2) }),
            ),
            (
                Key::FailMode("br1".into()),
                Some(Val::FailMode(FailMode::Secure)),
            ),
            (
                Key::Controllers("br0".into()),
                Some(Val::Controllers(vec![
                    "tcp:127.0.0.1:6653".into(),
                    "ptcp:6634:0.0.0.0".into(),
                ])),
            ),
        ];
        let ops = structure_ops(&items, &v);
        // The new bridge comes first and is linked from the root.
        assert_eq!(ops[0]["table"], "Bridge");
        assert_eq!(
            ops[0]["row"]["other_config"],
            json!(["map", [["datapath-id", "0000000000000002"]]])
        );
        assert_eq!(ops[1]["mutations"][0][0], "bridges");
        let iface = ops.iter().find(|o| o["table"] == "Interface").unwrap();
        assert_eq!(iface["row"]["type"], "tap");
        assert_eq!(iface["row"]["ofport_request"], 9);
        assert!(ops.iter().any(|o| o["op"] == "mutate"
            && o["mutations"][0] == json!(["ports", "delete", ["set", [["uuid", "p1"]]]])));
        let ctl = ops
            .iter()
            .find(|o| o["table"] == "Bridge" && o["row"]["controller"].is_array())
            .unwrap();
        let refs = &ctl["row"]["controller"][1];
        assert_eq!(refs[0], json!(["uuid", "c0"]));
        assert_eq!(refs[1][0], "named-uuid");
        assert!(!ops
            .iter()
            .any(|o| o["table"] == "Open_vSwitch" && o["op"] == "insert"));
        // An empty database gets its root row.
        let ops = structure_ops(&items, &DbView::default());
        assert_eq!(
            ops[0],
            json!({"op": "insert", "table": "Open_vSwitch", "row": {}})
        );
    }
}

#[cfg(test)]
mod local_port_tests {
    use super::*;
    use crate::view::tests::sample;

    fn find<'a>(ops: &'a [Value], uuid: &str) -> Option<&'a Value> {
        ops.iter()
            .find(|o| o["table"] == "Interface" && o["where"][0][2][1] == uuid)
    }

    #[test]
    fn the_local_port_shows_as_open_vswitch_shows_it() {
        let r = sample();
        let v = DbView::read(&r);
        let mut b = LiveBridge::default();
        b.ports.insert(
            "br0".into(),
            LivePort {
                ofport: OFPP_LOCAL,
                link_up: false,
                admin_up: true,
            },
        );
        let mut l = Live::default();
        l.bridges.insert("br0".into(), b.clone());
        let ops = Status::default().ops(&r, &v, &l, &BTreeMap::new(), None);
        let br0 = &find(&ops, "i0").unwrap()["row"];
        assert_eq!(br0["ofport"], 65534);
        assert_eq!(br0["link_state"], "down");
        assert_eq!(br0["error"], json!(["set", []]));
        // The TAP could not be made: -1 and why.
        b.ports.clear();
        b.local_error = Some("the local port (TAP interface \"br0\") could not be made".into());
        l.bridges.insert("br0".into(), b);
        let ops = Status::default().ops(&r, &v, &l, &BTreeMap::new(), None);
        let br0 = &find(&ops, "i0").unwrap()["row"];
        assert_eq!(br0["ofport"], -1);
        assert!(br0["error"].as_str().unwrap().contains("could not be made"));
    }
}

#[cfg(test)]
mod local_port_rows_tests {
    use super::*;
    use crate::replica::Replica;

    #[test]
    fn a_new_bridge_with_a_local_port_gets_its_internal_rows() {
        let view = DbView::read(&Replica::default());
        let items = vec![
            (
                Key::Bridge("br1".into()),
                Some(Val::Bridge { dpid: Some(2) }),
            ),
            (
                Key::Bridge("br2".into()),
                Some(Val::Bridge { dpid: Some(3) }),
            ),
            (Key::Bridge("br3".into()), None),
        ];
        let ops = local_port_ops(&items, &view, |b| b != "br2");
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert_eq!(ops[0]["row"], json!({"name": "br1", "type": "internal"}));
        assert_eq!(ops[1]["table"], "Port");
        assert_eq!(ops[1]["row"]["name"], "br1");
        assert_eq!(ops[2]["where"], where_name("br1"));
        // A bridge the database has already is left alone.
        let view = DbView::read(&crate::view::tests::sample());
        let items = vec![(Key::Bridge("br0".into()), Some(Val::Bridge { dpid: None }))];
        assert!(local_port_ops(&items, &view, |_| true).is_empty());
    }
}
