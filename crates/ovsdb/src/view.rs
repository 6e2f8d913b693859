//! The database's rows read as fulmar's configuration: which bridges,
//! ports and controllers the database asks for ([`DbView::wanted`]), and,
//! for each row, what fulmar cannot do with it.
//!
//! The mapping, Open vSwitch's schema on the left:
//!
//! * `Open_vSwitch.bridges` → the bridges; a bridge not referenced there is
//!   not configured (ovsdb-server collects it anyway).
//! * `Bridge`: `name`; `fail_mode` (empty: standalone, as in Open
//!   vSwitch); `other_config:datapath-id` (16 hex digits) → the datapath
//!   id; `controller` → the targets; `ports`.
//! * `Port` with exactly one `Interface` → a fulmar port named after the
//!   interface. `Interface.type` "" or "system" → afpacket; "afxdp", "tap",
//!   "memory", "pcap" (with `options:pcap_read`, `pcap_write`,
//!   `pcap_rate`) → those backends; `ofport_request` → the port number;
//!   "vxlan" and "gre" → tunnel ports, with `options:remote_ip`
//!   (required), `local_ip`, `key` (a number, or `flow`: the key from
//!   and to the flow's `tunnel_id`) and, for VXLAN, `dst_port`; a bad or
//!   missing value refuses the interface.
//! * `Port.tag`, `trunks`, `vlan_mode` → the port's VLAN settings for
//!   NORMAL (checked as the configuration file checks them; settings
//!   that do not go together refuse the port, with the reason).
//! * The interface of type "internal" named after its bridge (the one
//!   `ovs-vsctl add-br` makes) → the bridge's local port (`OFPP_LOCAL`, a
//!   TAP interface that a bridge made by `add-br` has): no port item; its
//!   row shows `ofport` 65534 as Open vSwitch's does, or -1 and why the
//!   bridge has none.
//! * `Port.qos` → that port's egress queues: `QoS.type` `linux-htb` or
//!   `linux-hfsc` (both served by fulmar's own scheduler),
//!   `other_config:max-rate` (the port's rate), `queues` (id → `Queue`
//!   row: `other_config:min-rate`, `max-rate`, `priority`). Another type
//!   or a value that is not a number leaves the queues out and says so in
//!   the interface's `error`.
//! * Refused, with the reason in the interface's `error` (and `ofport`
//!   -1): other "internal" interfaces, "patch" and other types, bonds
//!   (several interfaces, `bond_mode`), an interface in two ports.
//! * Ignored but reported (in `error`, the port still works):
//!   `mtu_request`, `mac`, `ingress_policing_rate`, `bfd`, unknown
//!   `options`. A bridge's `stp_enable`, `rstp_enable`,
//!   `mcast_snooping_enable`, `mirrors`, `netflow`, `sflow`, `ipfix` are
//!   reported in its `status:fulmar_ignored`.

use std::collections::{BTreeMap, BTreeSet};

use datastore::{
    ControllerTarget, FailMode, PortQos, QosKind, QueueConf, VlanMode, VlanSettings, MAX_VID,
};

use crate::datum::{Atom, Datum, RowRef};
use crate::replica::Replica;
use crate::sync::{Items, Key, PortSpec, Val};

/// An interface row and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfaceRow {
    /// Row UUID.
    pub uuid: String,
    /// Interface name.
    pub name: String,
    /// The bridge whose port holds it.
    pub bridge: String,
    /// Why fulmar will not make a port of it (then `ofport` -1).
    pub refused: Option<String>,
    /// Settings it ignores.
    pub ignored: Vec<String>,
    /// The bridge's local port: type "internal", named after the bridge.
    pub local: bool,
}

/// A controller row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtrlRow {
    /// Row UUID.
    pub uuid: String,
    /// The bridge.
    pub bridge: String,
    /// The target as written.
    pub target: String,
    /// The canonical target, or why it does not parse.
    pub canonical: Result<String, String>,
}

/// A bridge row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeRow {
    /// Row UUID.
    pub uuid: String,
    /// Name.
    pub name: String,
    /// Why its `other_config:datapath-id` is not used.
    pub bad_dpid: Option<String>,
    /// Columns set that fulmar ignores.
    pub ignored: Vec<String>,
    /// Port row UUID by interface name.
    pub port_rows: BTreeMap<String, String>,
}

/// The database as configuration.
#[derive(Clone, Debug, Default)]
pub struct DbView {
    /// The Open_vSwitch row, if there is one.
    pub root: Option<String>,
    /// Its `next_cfg`.
    pub next_cfg: Option<i64>,
    /// Configured bridges.
    pub bridges: Vec<BridgeRow>,
    /// Interfaces of configured bridges' ports.
    pub ifaces: Vec<IfaceRow>,
    /// Controllers of configured bridges.
    pub controllers: Vec<CtrlRow>,
    /// The items the database asks for.
    pub wanted: Items,
}

/// The backend kind for an `Interface.type`, or why there is none.
pub fn backend_of(ovs_type: &str) -> Result<&'static str, String> {
    match ovs_type {
        "" | "system" => Ok("afpacket"),
        "afxdp" => Ok("afxdp"),
        "tap" => Ok("tap"),
        "memory" => Ok("memory"),
        "pcap" => Ok("pcap"),
        "vxlan" => Ok("vxlan"),
        "gre" => Ok("gre"),
        "internal" => Err("fulmar's only internal port is a bridge's local port, \
                           the interface named after the bridge; \
                           this interface is left out and the rest of the bridge works"
            .into()),
        "patch" => Err("patch ports are configured in fulmar's configuration file \
                        ([[patch_links]]), not through OVSDB"
            .into()),
        other => Err(format!(
            "interface type {other:?} is not supported by fulmar \
             (system, afxdp, tap, memory, pcap, vxlan or gre)"
        )),
    }
}

/// The `Interface.type` written for a backend kind.
pub fn ovs_type_of(kind: &str) -> &str {
    match kind {
        "afpacket" => "",
        k => k,
    }
}

impl DbView {
    /// Reads the replica; never fails: what fulmar cannot use is noted on
    /// its row.
    pub fn read(r: &Replica) -> DbView {
        let mut v = DbView::default();
        let Some((root_uuid, root)) = r.rows("Open_vSwitch").next() else {
            return v;
        };
        let root = RowRef(root);
        v.root = Some(root_uuid.clone());
        v.next_cfg = root.int("next_cfg");
        let mut seen_ifaces = BTreeSet::new();
        let mut bridge_uuids = root.uuids("bridges");
        // Configuration order is not the database's to give; by name.
        bridge_uuids.sort_by_key(|u| {
            r.row("Bridge", u)
                .and_then(|b| RowRef(b).string("name"))
                .unwrap_or_default()
        });
        for bu in bridge_uuids {
            let Some(brow) = r.row("Bridge", &bu) else {
                continue;
            };
            let b = RowRef(brow);
            let Some(name) = b.string("name") else {
                continue;
            };
            let mut row = BridgeRow {
                uuid: bu.clone(),
                name: name.clone(),
                bad_dpid: None,
                ignored: Vec::new(),
                port_rows: BTreeMap::new(),
            };
            for col in crate::replica::BRIDGE_UNSUPPORTED {
                if b.is_set(col) {
                    row.ignored.push(col.to_string());
                }
            }
            let dpid = match b.str_map("other_config").get("datapath-id") {
                None => None,
                Some(s) => match parse_dpid(s) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        row.bad_dpid = Some(e);
                        None
                    }
                },
            };
            v.wanted
                .insert(Key::Bridge(name.clone()), Val::Bridge { dpid });
            let mode = match b.string("fail_mode").as_deref() {
                Some("secure") => FailMode::Secure,
                _ => FailMode::Standalone,
            };
            v.wanted
                .insert(Key::FailMode(name.clone()), Val::FailMode(mode));
            let mut targets = Vec::new();
            let mut ctrl_uuids = b.uuids("controller");
            ctrl_uuids.sort_by_key(|u| {
                r.row("Controller", u)
                    .and_then(|c| RowRef(c).string("target"))
                    .unwrap_or_default()
            });
            for cu in ctrl_uuids {
                let Some(c) = r.row("Controller", &cu) else {
                    continue;
                };
                let target = RowRef(c).string("target").unwrap_or_default();
                let canonical = ControllerTarget::parse_target(&target).map(|t| t.to_string());
                if let Ok(t) = &canonical {
                    if !targets.contains(t) {
                        targets.push(t.clone());
                    }
                }
                v.controllers.push(CtrlRow {
                    uuid: cu,
                    bridge: name.clone(),
                    target,
                    canonical,
                });
            }
            v.wanted.insert(
                Key::Controllers(name.clone()),
                crate::sync::controllers(targets),
            );
            for pu in b.uuids("ports") {
                let Some(prow) = r.row("Port", &pu) else {
                    continue;
                };
                let p = RowRef(prow);
                let pname = p.string("name").unwrap_or_default();
                let ifs = p.uuids("interfaces");
                let mut port_refusal = None;
                if ifs.len() > 1 {
                    port_refusal = Some(format!(
                        "port {pname} is a bond of {} interfaces: fulmar ports have one",
                        ifs.len()
                    ));
                } else if p.is_set("bond_mode") {
                    port_refusal = Some(format!(
                        "port {pname}: bond_mode is not supported by fulmar (ports have one interface)"
                    ));
                }
                let vlan = match port_vlan(p) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        port_refusal.get_or_insert(format!("port {pname}: {e}"));
                        None
                    }
                };
                for iu in ifs {
                    let Some(irow) = r.row("Interface", &iu) else {
                        continue;
                    };
                    let i = RowRef(irow);
                    let Some(iname) = i.string("name") else {
                        continue;
                    };
                    let mut refused = port_refusal.clone();
                    if refused.is_none() && !seen_ifaces.insert(iname.clone()) {
                        refused = Some(format!("interface {iname} is in two ports"));
                    }
                    let mut ignored = Vec::new();
                    let mut spec = None;
                    let local = refused.is_none()
                        && iname == name
                        && i.string("type").as_deref() == Some("internal");
                    if refused.is_none() && !local {
                        match port_spec(i, &mut ignored) {
                            Ok(s) => spec = Some(s),
                            Err(e) => refused = Some(e),
                        }
                    }
                    if let (Some(s), Some(vl)) = (spec, &vlan) {
                        match port_qos(r, p) {
                            Ok(Some(q)) => {
                                v.wanted.insert(
                                    Key::Qos(name.clone(), iname.clone()),
                                    crate::sync::qos_val(&q),
                                );
                            }
                            Ok(None) => {}
                            Err(e) => ignored.push(e),
                        }
                        row.port_rows.insert(iname.clone(), pu.clone());
                        v.wanted
                            .insert(Key::Port(name.clone(), iname.clone()), Val::Port(s));
                        v.wanted.insert(
                            Key::PortVlan(name.clone(), iname.clone()),
                            Val::Vlan(vl.clone()),
                        );
                    }
                    v.ifaces.push(IfaceRow {
                        uuid: iu,
                        name: iname,
                        bridge: name.clone(),
                        refused,
                        ignored,
                        local,
                    });
                }
            }
            v.bridges.push(row);
        }
        v
    }

    /// The row of bridge `name`.
    pub fn bridge(&self, name: &str) -> Option<&BridgeRow> {
        self.bridges.iter().find(|b| b.name == name)
    }
}

/// A Port row's `tag`, `trunks` and `vlan_mode`, checked as the
/// configuration file checks them.
fn port_vlan(p: RowRef<'_>) -> Result<VlanSettings, String> {
    let vid = |n: i64| {
        u16::try_from(n)
            .ok()
            .filter(|v| *v <= MAX_VID)
            .ok_or_else(|| format!("{n} is not a VLAN id (0 to {MAX_VID})"))
    };
    let tag = match p.int("tag") {
        Some(n) => Some(vid(n).map_err(|e| format!("tag {e}"))?),
        None => None,
    };
    let mut trunks = Vec::new();
    if let Some(d) = p.get("trunks") {
        for a in d.atoms() {
            match a {
                crate::datum::Atom::Int(n) => {
                    trunks.push(vid(*n).map_err(|e| format!("trunks: {e}"))?)
                }
                other => return Err(format!("trunks: {other:?} is not a VLAN id")),
            }
        }
    }
    trunks.sort_unstable();
    trunks.dedup();
    let mode = match p.string("vlan_mode") {
        Some(m) => Some(m.parse::<VlanMode>()?),
        None => None,
    };
    let v = VlanSettings { mode, tag, trunks };
    v.resolve()?;
    Ok(v)
}

fn port_spec(i: RowRef<'_>, ignored: &mut Vec<String>) -> Result<PortSpec, String> {
    let kind = backend_of(&i.string("type").unwrap_or_default())?;
    let number = match i.int("ofport_request") {
        None => None,
        Some(n) => Some(
            u32::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("ofport_request {n} is not a port number"))?,
        ),
    };
    let mut options = BTreeMap::new();
    let tunnel = matches!(kind, "vxlan" | "gre");
    for (k, val) in i.str_map("options") {
        match k.as_str() {
            "pcap_read" | "pcap_write" | "pcap_rate" if kind == "pcap" => {
                options.insert(k, val);
            }
            // Canonical forms, so that the model's values agree with these.
            "remote_ip" | "local_ip" if tunnel => {
                let ip = datastore::parse_tunnel_ip(&k, &val, k == "remote_ip")?;
                options.insert(k, ip.to_string());
            }
            "key" if tunnel => {
                let text = match datastore::parse_tunnel_key(kind == "vxlan", &val)? {
                    datastore::TunnelKey::Fixed(n) => n.to_string(),
                    datastore::TunnelKey::Flow => "flow".to_string(),
                };
                options.insert(k, text);
            }
            "dst_port" if kind == "vxlan" => {
                let n = val
                    .parse::<u16>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("dst_port {val:?} is not a UDP port (1..=65535)"))?;
                if n != datastore::VXLAN_DEFAULT_PORT {
                    options.insert(k, n.to_string());
                }
            }
            _ => ignored.push(format!("options:{k}")),
        }
    }
    if tunnel && !options.contains_key("remote_ip") {
        return Err(format!(
            "a {kind} interface needs options:remote_ip (the peer's IPv4 address)"
        ));
    }
    for col in ["mtu_request", "mac", "bfd"] {
        if i.is_set(col) {
            ignored.push(col.to_string());
        }
    }
    if i.int("ingress_policing_rate").unwrap_or(0) != 0 {
        ignored.push("ingress_policing_rate".into());
    }
    Ok(PortSpec {
        kind: kind.to_string(),
        number,
        options,
    })
}

/// A port's `qos` row and its `Queue` rows as fulmar's egress queues
/// (`None`: no QoS row), or why they are left out. `linux-htb` and
/// `linux-hfsc` are both served by fulmar's own scheduler; QoS
/// `other_config:max-rate` is the port's rate, and each queue's
/// `other_config:min-rate`, `max-rate` (bits/s) and `priority` its own.
fn port_qos(r: &Replica, p: RowRef<'_>) -> Result<Option<PortQos>, String> {
    let Some(qu) = p.uuids("qos").into_iter().next() else {
        return Ok(None);
    };
    let Some(qrow) = r.row("QoS", &qu) else {
        return Ok(None);
    };
    let q = RowRef(qrow);
    let ty = q.string("type").unwrap_or_default();
    let kind = QosKind::parse(&ty)
        .ok_or_else(|| format!("qos type {ty:?} (fulmar applies linux-htb and linux-hfsc only)"))?;
    let rate = |m: &BTreeMap<String, String>, k: &str, what: &str| -> Result<u64, String> {
        match m.get(k) {
            None => Ok(0),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n <= datastore::MAX_QOS_RATE)
                .ok_or_else(|| format!("qos: {what} other_config:{k} {v:?} is not a rate")),
        }
    };
    let other = q.str_map("other_config");
    let mut out = PortQos {
        kind,
        max_rate: rate(&other, "max-rate", "QoS")?,
        queues: Vec::new(),
    };
    if let Some(Datum::Map(pairs)) = q.get("queues") {
        for (k, v) in pairs {
            let (Atom::Int(id), Atom::Uuid(u)) = (k, v) else {
                continue;
            };
            let id = u32::try_from(id)
                .ok()
                .filter(|i| *i != u32::MAX)
                .ok_or_else(|| format!("qos: queue id {id} is not valid"))?;
            let qo = r
                .row("Queue", &u)
                .map(|row| RowRef(row).str_map("other_config"))
                .unwrap_or_default();
            let what = format!("queue {id}");
            let priority = match qo.get("priority") {
                None => 0,
                Some(v) => v
                    .parse::<u32>()
                    .map_err(|_| format!("qos: {what} other_config:priority {v:?} is not valid"))?,
            };
            out.queues.push(QueueConf {
                id,
                min_rate: rate(&qo, "min-rate", &what)?,
                max_rate: rate(&qo, "max-rate", &what)?,
                priority,
            });
        }
    }
    out.check().map_err(|e| format!("qos: {e}"))?;
    Ok(Some(out))
}

/// `other_config:datapath-id`: exactly 16 hex digits, as Open vSwitch
/// takes it.
pub fn parse_dpid(s: &str) -> Result<u64, String> {
    if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        u64::from_str_radix(s, 16).map_err(|e| e.to_string())
    } else {
        Err(format!(
            "other_config:datapath-id {s:?} is not 16 hex digits; the datapath id is fulmar's choice"
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// ovs-vsctl add-br br0, add-port br0 eth1, add-port br0 veth9 with
    /// ofport_request 7, a bond, a tagged port and a controller.
    pub fn sample() -> Replica {
        let mut r = Replica::default();
        r.apply(&json!({
            "Open_vSwitch": {"o": {"new": {"bridges": ["set", [["uuid", "b0"]]], "next_cfg": 4, "cur_cfg": 3}}},
            "Bridge": {"b0": {"new": {"name": "br0", "fail_mode": ["set", []],
                "ports": ["set", [["uuid", "p0"], ["uuid", "p1"], ["uuid", "p2"], ["uuid", "p3"], ["uuid", "p4"]]],
                "controller": ["uuid", "c0"], "other_config": ["map", [["datapath-id", "00000000000000ab"]]],
                "stp_enable": true}}},
            "Port": {
                "p0": {"new": {"name": "br0", "interfaces": ["uuid", "i0"]}},
                "p1": {"new": {"name": "eth1", "interfaces": ["uuid", "i1"]}},
                "p2": {"new": {"name": "veth9", "interfaces": ["uuid", "i2"]}},
                "p3": {"new": {"name": "bond0", "interfaces": ["set", [["uuid", "i3"], ["uuid", "i4"]]]}},
                "p4": {"new": {"name": "vlan", "interfaces": ["uuid", "i5"], "tag": 10}}},
            "Interface": {
                "i0": {"new": {"name": "br0", "type": "internal"}},
                "i1": {"new": {"name": "eth1", "type": "", "mtu_request": 9000}},
                "i2": {"new": {"name": "veth9", "type": "system", "ofport_request": 7}},
                "i3": {"new": {"name": "a", "type": ""}},
                "i4": {"new": {"name": "b", "type": ""}},
                "i5": {"new": {"name": "vlan", "type": ""}}},
            "Controller": {"c0": {"new": {"target": "tcp:127.0.0.1"}}}
        }))
        .unwrap();
        r
    }

    /// `ovs-vsctl set port eth1 qos=@q -- --id=@q create qos
    /// type=TYPE other_config:max-rate=10000000 queues:1=@q1 queues:2=@q2
    /// -- ...create queue ...`.
    fn with_qos(ty: &str, q2_min: &str) -> Replica {
        let mut r = sample();
        r.apply(&json!({
            "Port": {"p1": {"new": {"name": "eth1", "interfaces": ["uuid", "i1"], "qos": ["uuid", "q0"]}}},
            "QoS": {"q0": {"new": {"type": ty, "other_config": ["map", [["max-rate", "10000000"]]],
                "queues": ["map", [[1, ["uuid", "u1"]], [2, ["uuid", "u2"]]]]}}},
            "Queue": {
                "u1": {"new": {"other_config": ["map", [["priority", "0"], ["max-rate", "8000000"]]]}},
                "u2": {"new": {"other_config": ["map", [["priority", "5"], ["min-rate", q2_min]]]}}}
        }))
        .unwrap();
        r
    }

    #[test]
    fn qos_and_queue_rows_become_egress_queues() {
        let v = DbView::read(&with_qos("linux-htb", "1000000"));
        let k = Key::Qos("br0".into(), "eth1".into());
        assert_eq!(
            v.wanted.get(&k),
            Some(&Val::Qos(PortQos {
                kind: QosKind::LinuxHtb,
                max_rate: 10_000_000,
                queues: vec![
                    QueueConf {
                        id: 1,
                        min_rate: 0,
                        max_rate: 8_000_000,
                        priority: 0
                    },
                    QueueConf {
                        id: 2,
                        min_rate: 1_000_000,
                        max_rate: 0,
                        priority: 5
                    },
                ]
            }))
        );
        let v = DbView::read(&with_qos("linux-hfsc", "1000000"));
        assert!(matches!(v.wanted.get(&k), Some(Val::Qos(q)) if q.kind == QosKind::LinuxHfsc));
        // Another type, or a rate that is not one: left out, said on the
        // interface; the port itself still works.
        for (ty, min, why) in [
            ("linux-codel", "1", "qos type \"linux-codel\""),
            (
                "linux-htb",
                "fast",
                "queue 2 other_config:min-rate \"fast\"",
            ),
        ] {
            let v = DbView::read(&with_qos(ty, min));
            assert!(!v.wanted.contains_key(&k));
            assert!(v
                .wanted
                .contains_key(&Key::Port("br0".into(), "eth1".into())));
            let eth1 = v.ifaces.iter().find(|i| i.name == "eth1").unwrap();
            assert!(
                eth1.ignored.iter().any(|e| e.contains(why)),
                "{:?}",
                eth1.ignored
            );
        }
    }

    #[test]
    fn rows_become_items_and_refusals() {
        let v = DbView::read(&sample());
        assert_eq!(v.next_cfg, Some(4));
        let w = &v.wanted;
        assert_eq!(
            w[&Key::Bridge("br0".into())],
            Val::Bridge { dpid: Some(0xab) }
        );
        assert_eq!(
            w[&Key::FailMode("br0".into())],
            Val::FailMode(FailMode::Standalone)
        );
        assert_eq!(
            w[&Key::Controllers("br0".into())],
            Val::Controllers(vec!["tcp:127.0.0.1:6653".into()])
        );
        let p = |i: &str| w.get(&Key::Port("br0".into(), i.into())).cloned();
        assert_eq!(
            p("eth1"),
            Some(Val::Port(PortSpec {
                kind: "afpacket".into(),
                number: None,
                options: BTreeMap::new()
            }))
        );
        assert!(matches!(
            p("veth9"),
            Some(Val::Port(PortSpec {
                number: Some(7),
                ..
            }))
        ));
        // A tagged port is an access port of its VLAN.
        assert!(p("vlan").is_some());
        assert_eq!(
            w[&Key::PortVlan("br0".into(), "vlan".into())],
            Val::Vlan(VlanSettings {
                tag: Some(10),
                ..VlanSettings::default()
            })
        );
        // br0 is the bridge's local port: no port item, not refused.
        assert_eq!(p("br0"), None);
        let br0 = v.ifaces.iter().find(|i| i.name == "br0").unwrap();
        assert!(br0.local && br0.refused.is_none(), "{br0:?}");
        for refused in ["a", "b"] {
            assert_eq!(p(refused), None, "{refused}");
            let row = v.ifaces.iter().find(|i| i.name == refused).unwrap();
            assert!(row.refused.is_some(), "{refused}");
        }
        let eth1 = v.ifaces.iter().find(|i| i.name == "eth1").unwrap();
        assert_eq!(eth1.ignored, vec!["mtu_request".to_string()]);
        assert_eq!(v.bridges[0].ignored, vec!["stp_enable".to_string()]);
    }

    #[test]
    fn vlan_settings_that_do_not_go_together_refuse_the_port() {
        let mut r = Replica::default();
        r.apply(&json!({
            "Open_vSwitch": {"o": {"new": {"bridges": ["uuid", "b0"]}}},
            "Bridge": {"b0": {"new": {"name": "br0", "ports": ["set", [["uuid", "p0"], ["uuid", "p1"], ["uuid", "p2"]]]}}},
            "Port": {
                "p0": {"new": {"name": "x", "interfaces": ["uuid", "i0"], "vlan_mode": "native-tagged"}},
                "p1": {"new": {"name": "y", "interfaces": ["uuid", "i1"], "tag": 4095}},
                "p2": {"new": {"name": "z", "interfaces": ["uuid", "i2"], "trunks": ["set", [20, 10]],
                               "vlan_mode": "native-untagged", "tag": 5}}},
            "Interface": {"i0": {"new": {"name": "x"}}, "i1": {"new": {"name": "y"}}, "i2": {"new": {"name": "z"}}}
        }))
        .unwrap();
        let v = DbView::read(&r);
        let refusal = |n: &str| {
            v.ifaces
                .iter()
                .find(|i| i.name == n)
                .unwrap()
                .refused
                .clone()
        };
        assert!(refusal("x").unwrap().contains("needs a tag"));
        assert!(refusal("y").unwrap().contains("4095"));
        assert_eq!(refusal("z"), None);
        assert_eq!(
            v.wanted[&Key::PortVlan("br0".into(), "z".into())],
            Val::Vlan(VlanSettings {
                mode: Some(VlanMode::NativeUntagged),
                tag: Some(5),
                trunks: vec![10, 20],
            })
        );
    }

    #[test]
    fn no_root_row_means_no_configuration() {
        let v = DbView::read(&Replica::default());
        assert!(v.root.is_none());
        assert!(v.wanted.is_empty());
    }

    #[test]
    fn bad_values_are_noted_not_fatal() {
        let mut r = Replica::default();
        r.apply(&json!({
            "Open_vSwitch": {"o": {"new": {"bridges": ["set", [["uuid", "b0"], ["uuid", "gone"]]]}}},
            "Bridge": {"b0": {"new": {"name": "br0", "ports": ["set", [["uuid", "p0"], ["uuid", "nope"]]],
                "controller": ["uuid", "c0"], "other_config": ["map", [["datapath-id", "xyz"]]],
                "fail_mode": 17}}},
            "Port": {"p0": {"new": {"name": "x", "interfaces": ["uuid", "i0"]}}},
            "Interface": {"i0": {"new": {"name": "x", "type": "dpdk", "ofport_request": -3}}},
            "Controller": {"c0": {"new": {"target": "unix:/x"}}}
        }))
        .unwrap();
        let v = DbView::read(&r);
        assert!(v.bridges[0].bad_dpid.is_some());
        assert!(v.ifaces[0].refused.as_deref().unwrap().contains("dpdk"));
        assert!(v.controllers[0].canonical.is_err());
        assert_eq!(
            v.wanted[&Key::Controllers("br0".into())],
            Val::Controllers(Vec::new())
        );
        assert_eq!(v.wanted.len(), 3);
    }

    #[test]
    fn dpid_needs_sixteen_hex_digits() {
        assert_eq!(parse_dpid("0000000000000001"), Ok(1));
        assert!(parse_dpid("1").is_err());
        assert!(parse_dpid("000000000000000g").is_err());
    }
}

/// Every monitored column holding every odd shape: reading, planning and
/// building writes never panic.
#[cfg(test)]
mod odd_input {
    use super::*;
    use crate::replica::MONITORED;
    use crate::sync::{model_items, Sync};
    use crate::writeback::{structure_ops, Live, Status};
    use serde_json::{json, Value};

    #[test]
    fn odd_values_in_every_column() {
        let odd = [
            json!(null),
            json!({"a": 1}),
            json!([]),
            json!([[["x"]]]),
            json!(-1),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1.5),
            json!(""),
            json!("\u{0}\u{ffff}"),
            json!(["uuid", "nowhere"]),
            json!(["set", [1, "a", true, ["uuid", "b0"]]]),
            json!(["map", [[1, "x"], ["k", ["uuid", "p1"]]]]),
            json!(["map", [["datapath-id", "ffffffffffffffff"]]]),
        ];
        let base = super::tests::sample();
        let cfg = datastore::Config::from_str("", datastore::COMMAND_LINE).unwrap();
        let model = model_items(&cfg);
        for (table, cols, unsupported) in MONITORED {
            let uuids: Vec<String> = base.rows(table).map(|(u, _)| u.clone()).collect();
            for col in cols.iter().chain(*unsupported) {
                for v in &odd {
                    let mut r = base.clone();
                    for u in &uuids {
                        let mut row = serde_json::Map::new();
                        row.insert(col.to_string(), v.clone());
                        r.apply(&json!({ *table: { u.as_str(): { "new": Value::Object(row) } } }))
                            .unwrap();
                    }
                    let view = DbView::read(&r);
                    let mut sync = Sync::default();
                    let plan = sync.plan(&view.wanted, &model);
                    let _ = structure_ops(&plan.to_db, &view);
                    let _ = structure_ops(&plan.to_switch, &view);
                    for (k, d) in &plan.to_switch {
                        let _ = crate::client::switch_ops(k, d.as_ref(), &view.wanted, &model);
                    }
                    let _ = Status::default().ops(
                        &r,
                        &view,
                        &Live::default(),
                        &Default::default(),
                        view.next_cfg,
                    );
                }
            }
        }
    }
}
