//! The capable-switch model (OF-CONFIG 1.2, namespace `urn:onf:config:yang`)
//! over fulmar's datastore: a [`Snapshot`] of the running configuration
//! (plus live state for `get`), rendered as an [`Element`] tree, subtree
//! filters over that tree, and `edit-config` turned into one list of
//! datastore [`Op`]s.
//!
//! Mapping: a logical switch is a bridge (id = bridge name); a port
//! resource is an interface port (resource-id = interface name); a
//! controller's id is its target (`tcp:IP:PORT`), since the datastore keeps
//! no other name; `lost-connection-behavior` is the fail mode. fulmar has no
//! owned certificates or flow tables to configure through OF-CONFIG: those
//! containers are neither shown nor accepted.
//!
//! Queues: a queue resource is one of a port's egress queues (`qos` in the
//! datastore); its resource-id is `PORT:ID` (the port's resource-id and the
//! queue id: fulmar keeps no queue names), `id` the queue id, `port` the
//! port's resource-id. `min-rate`/`max-rate` are tenths of a percent of the
//! port's QoS `max_rate`, as QUEUE_GET_CONFIG gives them (ports report no
//! speed): shown rounded down, left out when the rate or the port's
//! `max_rate` is 0; a value sent back as shown keeps the exact bits/s.

use std::net::IpAddr;

use datastore::{
    Config, ControllerTarget, FailMode, Op, PortKind, PortQos, PortRef, QueueConf, Transport,
};

use crate::rpc::RpcError;
use crate::xml::Element;

/// The OF-CONFIG 1.2 namespace.
pub const NS: &str = "urn:onf:config:yang";
/// The capable switch's id.
pub const SWITCH_ID: &str = "fulmar";

/// One port as the model shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSnap {
    /// Interface name (the resource-id and name).
    pub name: String,
    /// OpenFlow port number.
    pub number: u32,
    /// The port as the switch has it (its configuration bits show in
    /// get-config too, its state and rates in get only); `None` when the
    /// port is not open.
    pub live: Option<PortLive>,
    /// The port's egress queues, if it has any.
    pub qos: Option<PortQos>,
}

/// A port's live state (from the OpenFlow port description).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortLive {
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
    /// kbit/s, 0 when unknown.
    pub curr_speed: u32,
    /// kbit/s, 0 when unknown.
    pub max_speed: u32,
}

/// One controller as the model shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtlSnap {
    /// The target.
    pub target: ControllerTarget,
    /// `(connected, role)`, for `get` only.
    pub live: Option<(bool, String)>,
}

/// One bridge as the model shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeSnap {
    /// Name (the logical switch id).
    pub name: String,
    /// Datapath id.
    pub dpid: u64,
    /// Fail mode.
    pub fail_mode: FailMode,
    /// Controllers in order.
    pub controllers: Vec<CtlSnap>,
    /// Interface ports in number order.
    pub ports: Vec<PortSnap>,
}

/// What get / get-config show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Bridges in configuration order.
    pub bridges: Vec<BridgeSnap>,
}

impl Snapshot {
    /// The configuration part of `config` (patch ports are not resources).
    pub fn from_config(config: &Config) -> Snapshot {
        let bridges = config
            .bridges
            .iter()
            .map(|b| {
                let mut ports: Vec<PortSnap> = b
                    .ports
                    .iter()
                    .filter_map(|p| match &p.kind {
                        PortKind::Interface { name, .. } => Some(PortSnap {
                            name: name.clone(),
                            number: p.number,
                            live: None,
                            qos: b.qos.get(&p.number).cloned(),
                        }),
                        PortKind::Patch { .. } => None,
                    })
                    .collect();
                ports.sort_by_key(|p| p.number);
                BridgeSnap {
                    name: b.name.clone(),
                    dpid: b.dpid,
                    fail_mode: b.fail_mode,
                    controllers: b
                        .controllers
                        .iter()
                        .map(|c| CtlSnap {
                            target: c.target.clone(),
                            live: None,
                        })
                        .collect(),
                    ports,
                }
            })
            .collect();
        Snapshot { bridges }
    }

    fn bridge(&self, name: &str) -> Option<&BridgeSnap> {
        self.bridges.iter().find(|b| b.name == name)
    }
}

/// `00:00:00:00:00:00:00:01`.
pub fn dpid_text(dpid: u64) -> String {
    let b = dpid.to_be_bytes();
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `00:00:00:00:00:00:00:01` (also 16 hex digits).
pub fn parse_dpid(s: &str) -> Option<u64> {
    let hex: String = if s.len() == 23 {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 8 || parts.iter().any(|p| p.len() != 2) {
            return None;
        }
        parts.concat()
    } else if s.len() == 16 {
        s.to_string()
    } else {
        return None;
    };
    if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

fn leaf(name: &str, text: impl Into<String>) -> Element {
    Element {
        ns: Some(NS.into()),
        name: name.into(),
        text: text.into(),
        ..Element::default()
    }
}

fn node(name: &str, children: Vec<Element>) -> Element {
    Element {
        ns: Some(NS.into()),
        name: name.into(),
        children,
        ..Element::default()
    }
}

fn bool_text(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

fn fail_mode_text(m: FailMode) -> &'static str {
    match m {
        FailMode::Secure => "failSecureMode",
        FailMode::Standalone => "failStandaloneMode",
    }
}

fn target_parts(t: &ControllerTarget) -> (Transport, String, u16) {
    match t {
        ControllerTarget::Connect {
            transport,
            host,
            port,
        } => (*transport, host.clone(), *port),
        ControllerTarget::Listen {
            transport,
            addr,
            port,
        } => (*transport, addr.to_string(), *port),
    }
}

/// The capable-switch tree; `state` adds the config-false leaves of `get`.
pub fn render(snap: &Snapshot, state: bool) -> Element {
    let mut ports = Vec::new();
    for b in &snap.bridges {
        for p in &b.ports {
            let mut c = vec![
                leaf("resource-id", &p.name),
                leaf("number", p.number.to_string()),
                leaf("name", &p.name),
            ];
            let live = p.live.clone().unwrap_or_default();
            if state && live.curr_speed > 0 {
                c.push(leaf("current-rate", live.curr_speed.to_string()));
            }
            if state && live.max_speed > 0 {
                c.push(leaf("max-rate", live.max_speed.to_string()));
            }
            c.push(node(
                "configuration",
                vec![
                    leaf(
                        "admin-state",
                        if live.config & 1 != 0 { "down" } else { "up" },
                    ),
                    leaf("no-receive", bool_text(live.config & (1 << 2) != 0)),
                    leaf("no-forward", bool_text(live.config & (1 << 5) != 0)),
                    leaf("no-packet-in", bool_text(live.config & (1 << 6) != 0)),
                ],
            ));
            if state {
                if let Some(l) = &p.live {
                    c.push(node(
                        "state",
                        vec![
                            leaf("oper-state", if l.state & 1 != 0 { "down" } else { "up" }),
                            leaf("blocked", bool_text(l.state & 2 != 0)),
                            leaf("live", bool_text(l.state & 4 != 0)),
                        ],
                    ));
                }
            }
            ports.push(node("port", c));
        }
    }
    for b in &snap.bridges {
        for p in &b.ports {
            ports.extend(queue_resources(p));
        }
    }
    let switches = snap
        .bridges
        .iter()
        .map(|b| {
            let ctls = b
                .controllers
                .iter()
                .map(|c| {
                    let (tr, ip, port) = target_parts(&c.target);
                    let mut ch = vec![leaf("id", c.target.to_string())];
                    if let (true, Some((_, role))) = (state, &c.live) {
                        if role == "master" || role == "slave" || role == "equal" {
                            ch.push(leaf("role", role));
                        }
                    }
                    ch.push(leaf("ip-address", ip));
                    ch.push(leaf("port", port.to_string()));
                    ch.push(leaf("protocol", tr.as_str()));
                    if let (true, Some((up, _))) = (state, &c.live) {
                        ch.push(node(
                            "state",
                            vec![
                                leaf("connection-state", if *up { "up" } else { "down" }),
                                leaf("current-version", if *up { "1.3" } else { "" }),
                            ]
                            .into_iter()
                            .filter(|e| !e.text.is_empty())
                            .collect(),
                        ));
                    }
                    node("controller", ch)
                })
                .collect();
            node(
                "switch",
                vec![
                    leaf("id", &b.name),
                    leaf("datapath-id", dpid_text(b.dpid)),
                    leaf("enabled", "true"),
                    leaf("lost-connection-behavior", fail_mode_text(b.fail_mode)),
                    node("controllers", ctls),
                    node(
                        "resources",
                        b.ports
                            .iter()
                            .map(|p| leaf("port", &p.name))
                            .chain(b.ports.iter().flat_map(|p| {
                                p.qos.iter().flat_map(move |q| {
                                    q.queues
                                        .iter()
                                        .map(move |c| leaf("queue", queue_rid(&p.name, c.id)))
                                })
                            }))
                            .collect(),
                    ),
                ],
            )
        })
        .collect();
    let mut top = vec![leaf("id", SWITCH_ID)];
    if state {
        top.push(leaf("config-version", "1.2"));
    }
    top.push(node("resources", ports));
    top.push(node("logical-switches", switches));
    node("capable-switch", top)
}

/// A queue's resource-id: `PORT:ID`.
pub fn queue_rid(port: &str, id: u32) -> String {
    format!("{port}:{id}")
}

/// The port resource-id and queue id in a queue's resource-id.
fn parse_queue_rid(rid: &str) -> Option<(&str, u32)> {
    let (port, id) = rid.rsplit_once(':')?;
    let id: u32 = id.parse().ok().filter(|&i| i != u32::MAX)?;
    (!port.is_empty() && id.to_string() == rid[port.len() + 1..]).then_some((port, id))
}

/// A rate in tenths of a percent of `reference` (rounded down, at most
/// 1000), as QUEUE_GET_CONFIG gives it; `None` for no rate or no reference.
pub fn permille(rate: u64, reference: u64) -> Option<u16> {
    if rate == 0 || reference == 0 {
        return None;
    }
    let v = (u128::from(rate) * 1000 / u128::from(reference)).min(1000);
    u16::try_from(v).ok()
}

/// A port's queue resources.
fn queue_resources(p: &PortSnap) -> Vec<Element> {
    let Some(q) = &p.qos else {
        return Vec::new();
    };
    q.queues
        .iter()
        .map(|c| {
            let props: Vec<Element> = [("min-rate", c.min_rate), ("max-rate", c.max_rate)]
                .into_iter()
                .filter_map(|(n, r)| permille(r, q.max_rate).map(|v| leaf(n, v.to_string())))
                .collect();
            let mut ch = vec![
                leaf("resource-id", queue_rid(&p.name, c.id)),
                leaf("id", c.id.to_string()),
                leaf("port", &p.name),
            ];
            if !props.is_empty() {
                ch.push(node("properties", props));
            }
            node("queue", ch)
        })
        .collect()
}

/// RFC 6241 §6 subtree filtering of `data` by `filter` (same element
/// name): `None` when nothing is selected.
pub fn subtree(data: &Element, filter: &Element) -> Option<Element> {
    if data.name != filter.name || (filter.ns.is_some() && filter.ns != data.ns) {
        return None;
    }
    if filter.children.is_empty() {
        if filter.text.is_empty() || filter.text == data.text {
            return Some(data.clone());
        }
        return None;
    }
    let (matches, others): (Vec<&Element>, Vec<&Element>) = filter
        .children
        .iter()
        .partition(|f| f.children.is_empty() && !f.text.is_empty());
    for m in &matches {
        if !data
            .children
            .iter()
            .any(|d| d.name == m.name && d.text == m.text)
        {
            return None;
        }
    }
    if others.is_empty() {
        return Some(data.clone());
    }
    let mut out = Element {
        children: Vec::new(),
        ..data.clone()
    };
    let mut selected = false;
    for d in &data.children {
        if matches.iter().any(|m| m.name == d.name) {
            out.children.push(d.clone());
            continue;
        }
        for f in &others {
            if let Some(x) = subtree(d, f) {
                out.children.push(x);
                selected = true;
                break;
            }
        }
    }
    if selected || matches.is_empty() && data.children.is_empty() {
        Some(out)
    } else if !matches.is_empty() {
        // A list entry whose keys matched: keys only.
        Some(out)
    } else {
        None
    }
}

/// The `edit-config` operations (RFC 6241 §7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditOp {
    /// Merge into what is there.
    Merge,
    /// Replace what is there.
    Replace,
    /// Create; an error when it exists.
    Create,
    /// Delete; an error when missing.
    Delete,
    /// Delete if there.
    Remove,
    /// Only descend.
    None,
}

impl EditOp {
    /// The attribute's spelling.
    pub fn parse(s: &str) -> Option<EditOp> {
        Some(match s {
            "merge" => EditOp::Merge,
            "replace" => EditOp::Replace,
            "create" => EditOp::Create,
            "delete" => EditOp::Delete,
            "remove" => EditOp::Remove,
            "none" => EditOp::None,
            _ => return None,
        })
    }
}

fn op_of(el: &Element, inherited: EditOp) -> Result<EditOp, RpcError> {
    match el.attr("operation") {
        None => Ok(inherited),
        Some(s) => match EditOp::parse(s) {
            Some(EditOp::None) | None => Err(RpcError::bad_attribute(&el.name, "operation", s)),
            Some(op) => Ok(op),
        },
    }
}

fn allow(el: &Element, names: &[&str]) -> Result<(), RpcError> {
    for c in &el.children {
        if c.ns.as_deref() != Some(NS) {
            return Err(RpcError::unknown_namespace(
                &c.name,
                c.ns.as_deref().unwrap_or(""),
            ));
        }
        if !names.contains(&c.name.as_str()) {
            return Err(RpcError::unknown_element(&c.name, &el.name));
        }
    }
    Ok(())
}

fn required<'a>(el: &'a Element, key: &str) -> Result<&'a str, RpcError> {
    match el.child_text(key) {
        Some(t) if !t.is_empty() => Ok(t),
        _ => Err(RpcError::missing_element(key, &el.name)),
    }
}

/// Turns an edit-config `<config>`'s capable-switch into datastore ops
/// against `snap` (the running configuration). `default` is the
/// default-operation.
pub fn edit_ops(snap: &Snapshot, cs: &Element, default: EditOp) -> Result<Vec<Op>, RpcError> {
    if cs.name != "capable-switch" || cs.ns.as_deref() != Some(NS) {
        return Err(RpcError::unknown_element(&cs.name, "config"));
    }
    allow(cs, &["id", "resources", "logical-switches"])?;
    let op = op_of(cs, default)?;
    if matches!(op, EditOp::Delete | EditOp::Remove | EditOp::Create) {
        return Err(RpcError::not_supported(
            "the capable-switch itself can be neither created nor deleted",
        ));
    }
    if let Some(id) = cs.child("id") {
        if id.text != SWITCH_ID {
            return Err(RpcError::invalid_value(
                "id",
                &format!("the capable switch's id is {SWITCH_ID}"),
            ));
        }
    }
    let mut ops = Vec::new();
    // Port resources: numbers for ports logical switches add, deletions.
    let mut numbers: Vec<(String, u32)> = Vec::new();
    // New port resources: each must be referenced by a logical switch.
    let mut unattached: Vec<String> = Vec::new();
    if let Some(res) = cs.child("resources") {
        allow(res, &["port", "queue"])?;
        let rop = op_of(res, op)?;
        for p in res.children_named("port") {
            allow(
                p,
                &[
                    "resource-id",
                    "number",
                    "name",
                    "configuration",
                    "requested-number",
                ],
            )?;
            let pop = op_of(p, rop)?;
            let id = required(p, "resource-id")?;
            let owner = snap
                .bridges
                .iter()
                .find(|b| b.ports.iter().any(|x| x.name == id));
            if let Some(n) = p.child_text("number").or(p.child_text("requested-number")) {
                let n: u32 = n
                    .parse()
                    .ok()
                    .filter(|&n| (1..=0xffff_ff00).contains(&n))
                    .ok_or_else(|| RpcError::invalid_value("number", n))?;
                numbers.push((id.to_string(), n));
                // An attached port renumbered (datastore: interface ofport).
                let current = owner.and_then(|b| b.ports.iter().find(|x| x.name == id));
                if let Some(cur) = current {
                    if cur.number != n && !matches!(pop, EditOp::Delete | EditOp::Remove) {
                        ops.push(Op::Set {
                            object: format!("interface:{id}"),
                            key: "ofport".into(),
                            value: n.to_string(),
                        });
                    }
                }
            }
            if let Some(name) = p.child_text("name") {
                if name != id {
                    return Err(RpcError::invalid_value(
                        "name",
                        "a port's name is its interface name, the resource-id",
                    ));
                }
            }
            if let Some(c) = p.child("configuration") {
                let live = owner
                    .and_then(|b| b.ports.iter().find(|x| x.name == id))
                    .and_then(|x| x.live.clone())
                    .unwrap_or_default();
                same_port_configuration(c, live.config)?;
            }
            match pop {
                EditOp::Delete if owner.is_none() => {
                    return Err(RpcError::data_missing(&format!("port {id}")))
                }
                EditOp::Delete | EditOp::Remove => {
                    if let Some(b) = owner {
                        ops.push(Op::DelPort {
                            bridge: Some(b.name.clone()),
                            port: PortRef::Name(id.to_string()),
                        });
                    }
                }
                EditOp::Create if owner.is_some() => {
                    return Err(RpcError::data_exists(&format!("port {id}")))
                }
                _ if owner.is_none() => unattached.push(id.to_string()),
                _ => {}
            }
        }
    }
    if let Some(ls) = cs.child("logical-switches") {
        allow(ls, &["switch"])?;
        let lop = op_of(ls, op)?;
        let mut named = Vec::new();
        for sw in ls.children_named("switch") {
            let id = required(sw, "id")?;
            named.push(id.to_string());
            edit_switch(snap, sw, op_of(sw, lop)?, &numbers, &mut ops)?;
        }
        if lop == EditOp::Replace {
            for b in &snap.bridges {
                if !named.contains(&b.name) {
                    ops.push(Op::DelBridge {
                        name: b.name.clone(),
                    });
                }
            }
        }
    } else if op == EditOp::Replace {
        for b in &snap.bridges {
            ops.push(Op::DelBridge {
                name: b.name.clone(),
            });
        }
    }
    for id in unattached {
        let added = ops
            .iter()
            .any(|o| matches!(o, Op::AddPort { interface, .. } if *interface == id));
        if !added {
            return Err(RpcError::not_supported(&format!(
                "port {id}: fulmar keeps a port only on a logical switch; reference it from one in the same edit"
            )));
        }
    }
    edit_queues(snap, cs, op, &mut ops)?;
    Ok(ops)
}

/// The queues of every port as an edit leaves them.
struct QueueEdit<'a> {
    /// `(bridge, port, queues now, changed)`.
    ports: Vec<(&'a str, &'a PortSnap, Option<PortQos>, bool)>,
}

impl<'a> QueueEdit<'a> {
    fn port(&mut self, name: &str) -> Option<&mut (&'a str, &'a PortSnap, Option<PortQos>, bool)> {
        self.ports.iter_mut().find(|(_, p, _, _)| p.name == name)
    }

    /// Removes queue `id` of `port`; false when it has none such.
    fn remove(&mut self, port: &str, id: u32) -> bool {
        let Some((_, _, Some(q), changed)) = self.port(port) else {
            return false;
        };
        let before = q.queues.len();
        q.queues.retain(|c| c.id != id);
        *changed |= q.queues.len() != before;
        q.queues.len() != before
    }

    fn exists(&self, port: &str, id: u32) -> bool {
        self.ports.iter().any(|(_, p, q, _)| {
            p.name == port
                && q.as_ref()
                    .is_some_and(|q| q.queues.iter().any(|c| c.id == id))
        })
    }
}

/// The queue resources of an edit (capable-switch `resources/queue`, and
/// the logical switches' references to them) as one `SetQos` per port
/// whose queues change, appended to `ops` (after the port operations, so a
/// renumbered port keeps its queues; ports the edit deletes are skipped).
fn edit_queues(
    snap: &Snapshot,
    cs: &Element,
    op: EditOp,
    ops: &mut Vec<Op>,
) -> Result<(), RpcError> {
    let mut st = QueueEdit {
        ports: snap
            .bridges
            .iter()
            .flat_map(|b| {
                b.ports
                    .iter()
                    .map(move |p| (b.name.as_str(), p, p.qos.clone(), false))
            })
            .collect(),
    };
    let res = cs.child("resources");
    let rop = match res {
        Some(r) => op_of(r, op)?,
        None => op,
    };
    let mut listed: Vec<(String, u32)> = Vec::new();
    for q in res.iter().flat_map(|r| r.children_named("queue")) {
        let (port, id) = edit_queue(&mut st, q, op_of(q, rop)?)?;
        listed.push((port, id));
    }
    if rop == EditOp::Replace {
        // What replaces the resources and does not list a queue drops it.
        for (_, p, q, changed) in &mut st.ports {
            if let Some(q) = q {
                let before = q.queues.len();
                q.queues
                    .retain(|c| listed.iter().any(|(n, i)| *n == p.name && *i == c.id));
                *changed |= q.queues.len() != before;
            }
        }
    }
    if let Some(ls) = cs.child("logical-switches") {
        let lop = op_of(ls, op)?;
        for sw in ls.children_named("switch") {
            let sop = op_of(sw, lop)?;
            let Some(bridge) = sw.child_text("id") else {
                continue;
            };
            if matches!(sop, EditOp::Delete | EditOp::Remove) {
                continue;
            }
            let sres = sw.child("resources");
            let qop = match sres {
                Some(r) => op_of(r, sop)?,
                None => sop,
            };
            let mut refs: Vec<(String, u32)> = Vec::new();
            for r in sres.iter().flat_map(|r| r.children_named("queue")) {
                let eop = op_of(r, qop)?;
                let rid = r.text.as_str();
                let (port, id) = parse_queue_rid(rid).ok_or_else(|| {
                    RpcError::invalid_value("queue", "a queue reference is a resource-id PORT:ID")
                })?;
                if !st
                    .ports
                    .iter()
                    .any(|(b, p, _, _)| *b == bridge && p.name == port)
                {
                    return Err(RpcError::data_missing(&format!(
                        "queue {rid}: logical switch {bridge} has no port {port}"
                    )));
                }
                refs.push((port.to_string(), id));
                match eop {
                    EditOp::Delete | EditOp::Remove
                        if !st.remove(port, id) && eop == EditOp::Delete =>
                    {
                        return Err(RpcError::data_missing(&format!("queue {rid}")));
                    }
                    EditOp::Delete | EditOp::Remove => {}
                    EditOp::Create
                        if snap.bridges.iter().any(|b| {
                            b.ports.iter().any(|p| {
                                p.name == port
                                    && p.qos
                                        .as_ref()
                                        .is_some_and(|q| q.queues.iter().any(|c| c.id == id))
                            })
                        }) =>
                    {
                        return Err(RpcError::data_exists(&format!(
                            "queue {rid} on logical switch {bridge}"
                        )))
                    }
                    _ if !st.exists(port, id) => {
                        return Err(RpcError::data_missing(&format!(
                            "queue {rid}: create it under the capable switch's resources"
                        )))
                    }
                    _ => {}
                }
            }
            if qop == EditOp::Replace {
                for (b, p, q, changed) in &mut st.ports {
                    if *b != bridge {
                        continue;
                    }
                    if let Some(q) = q {
                        let before = q.queues.len();
                        q.queues
                            .retain(|c| refs.iter().any(|(n, i)| *n == p.name && *i == c.id));
                        *changed |= q.queues.len() != before;
                    }
                }
            }
        }
    }
    for (bridge, p, q, changed) in st.ports {
        // The datastore keeps queues by port number: a port this edit
        // renumbers takes its queues along.
        let renumbered = ops.iter().any(|o| {
            matches!(o, Op::Set { object, key, .. }
                if key == "ofport" && object.strip_prefix("interface:") == Some(p.name.as_str()))
        });
        if !(changed && q != p.qos || renumbered && q.is_some()) {
            continue;
        }
        let gone = ops.iter().any(|o| match o {
            Op::DelBridge { name } => name == bridge,
            Op::DelPort {
                port: PortRef::Name(n),
                ..
            } => *n == p.name,
            _ => false,
        });
        if gone {
            continue;
        }
        // No queues and no port ceiling left: the port sends directly.
        let q = q.filter(|q| !q.queues.is_empty() || q.max_rate != 0);
        if let Some(q) = &q {
            q.check()
                .map_err(|m| RpcError::invalid_value("queue", &format!("port {}: {m}", p.name)))?;
        }
        ops.push(Op::SetQos {
            bridge: bridge.to_string(),
            port: PortRef::Name(p.name.clone()),
            qos: q,
        });
    }
    Ok(())
}

/// One capable-switch queue resource applied to `st`: its port and id.
fn edit_queue(st: &mut QueueEdit, q: &Element, qop: EditOp) -> Result<(String, u32), RpcError> {
    allow(q, &["resource-id", "id", "port", "properties"])?;
    let rid = required(q, "resource-id")?;
    let (port, id) = parse_queue_rid(rid).ok_or_else(|| {
        RpcError::invalid_value(
            "resource-id",
            "a queue's resource-id is PORT:ID, the port's resource-id and the queue id \
             (0..4294967294; fulmar keeps no queue names)",
        )
    })?;
    if let Some(t) = q.child_text("id") {
        if t.parse::<u64>().ok() != Some(u64::from(id)) {
            return Err(RpcError::invalid_value(
                "id",
                &format!("queue {rid} has id {id} (the number after the resource-id's colon)"),
            ));
        }
    }
    if let Some(t) = q.child_text("port") {
        if t != port {
            return Err(RpcError::invalid_value(
                "port",
                &format!("queue {rid} is on port {port} (the resource-id before its colon)"),
            ));
        }
    }
    let exists = st.exists(port, id);
    match qop {
        EditOp::Delete | EditOp::Remove => {
            if !st.remove(port, id) && qop == EditOp::Delete {
                return Err(RpcError::data_missing(&format!("queue {rid}")));
            }
            return Ok((port.to_string(), id));
        }
        EditOp::Create if exists => return Err(RpcError::data_exists(&format!("queue {rid}"))),
        EditOp::None if !exists => return Err(RpcError::data_missing(&format!("queue {rid}"))),
        _ => {}
    }
    let Some((_, _, qos, changed)) = st.port(port) else {
        return Err(RpcError::data_missing(&format!(
            "queue {rid}: there is no port {port}"
        )));
    };
    let qos = qos.get_or_insert_with(|| PortQos {
        kind: Default::default(),
        max_rate: 0,
        queues: Vec::new(),
    });
    let reference = qos.max_rate;
    let old = qos.queues.iter().find(|c| c.id == id).copied();
    let mut conf = match (old, qop) {
        // Replace: the rates not given are none, but a rate that cannot be
        // shown (no port max_rate) is not dropped for not being shown.
        (Some(o), EditOp::Replace) if reference != 0 => QueueConf {
            min_rate: 0,
            max_rate: 0,
            ..o
        },
        (Some(o), _) => o,
        (None, _) => QueueConf {
            id,
            min_rate: 0,
            max_rate: 0,
            priority: 0,
        },
    };
    if let Some(props) = q.child("properties") {
        allow(props, &["min-rate", "max-rate", "experimenter"])?;
        let pop = op_of(props, qop)?;
        if pop == EditOp::Replace && reference != 0 {
            conf.min_rate = 0;
            conf.max_rate = 0;
        }
        for leafe in &props.children {
            let lop = op_of(leafe, pop)?;
            if lop == EditOp::None {
                continue;
            }
            if leafe.name == "experimenter" {
                if !matches!(lop, EditOp::Delete | EditOp::Remove) {
                    return Err(RpcError::not_supported(
                        "experimenter: fulmar's queues have no experimenter properties",
                    ));
                }
                continue;
            }
            let slot = if leafe.name == "min-rate" {
                &mut conf.min_rate
            } else {
                &mut conf.max_rate
            };
            if matches!(lop, EditOp::Delete | EditOp::Remove) {
                *slot = 0;
                continue;
            }
            let v: u16 = leafe
                .text
                .parse()
                .ok()
                .filter(|&v| v <= 1000)
                .ok_or_else(|| {
                    RpcError::invalid_value(
                        &leafe.name,
                        &format!("{:?} is not a tenth of a percent (0..1000)", leafe.text),
                    )
                })?;
            if v != 0 && reference == 0 {
                return Err(RpcError::invalid_value(
                    &leafe.name,
                    &format!(
                        "port {port} has no QoS max_rate to take tenths of a percent of \
                         (set one: fulmar ctl set-qos BRIDGE {port} max_rate=BITS ...)"
                    ),
                ));
            }
            // The value shown for the current rate keeps its exact bits/s.
            let current = old.map_or(0, |o| {
                if leafe.name == "min-rate" {
                    o.min_rate
                } else {
                    o.max_rate
                }
            });
            *slot = if permille(current, reference).unwrap_or(0) == v {
                current
            } else {
                u64::try_from(u128::from(reference) * u128::from(v) / 1000).unwrap_or(u64::MAX)
            };
        }
    }
    match qos.queues.iter_mut().find(|c| c.id == id) {
        Some(c) => {
            *changed |= *c != conf;
            *c = conf;
        }
        None => {
            qos.queues.push(conf);
            *changed = true;
        }
    }
    Ok((port.to_string(), id))
}

/// A port's `configuration` in an edit must say what the port has: the
/// bits are OpenFlow port-mod's to change, not the datastore's (so a
/// get-config sent back unchanged is accepted).
fn same_port_configuration(c: &Element, config: u32) -> Result<(), RpcError> {
    allow(
        c,
        &["admin-state", "no-receive", "no-forward", "no-packet-in"],
    )?;
    for leafe in &c.children {
        let (want, bit) = match leafe.name.as_str() {
            "admin-state" => (
                match leafe.text.as_str() {
                    "up" => false,
                    "down" => true,
                    v => return Err(RpcError::invalid_value("admin-state", v)),
                },
                1,
            ),
            name => (
                match leafe.text.as_str() {
                    "true" => true,
                    "false" => false,
                    v => return Err(RpcError::invalid_value(name, v)),
                },
                match name {
                    "no-receive" => 1 << 2,
                    "no-forward" => 1 << 5,
                    _ => 1 << 6,
                },
            ),
        };
        if want != (config & bit != 0) {
            return Err(RpcError::not_supported(&format!(
                "changing a port's {} (OpenFlow port-mod sets it; it is not stored)",
                leafe.name
            )));
        }
    }
    Ok(())
}

fn edit_switch(
    snap: &Snapshot,
    sw: &Element,
    op: EditOp,
    numbers: &[(String, u32)],
    ops: &mut Vec<Op>,
) -> Result<(), RpcError> {
    allow(
        sw,
        &[
            "id",
            "capabilities",
            "datapath-id",
            "enabled",
            "check-controller-certificate",
            "lost-connection-behavior",
            "controllers",
            "resources",
        ],
    )?;
    let name = required(sw, "id")?;
    let existing = snap.bridge(name);
    match op {
        EditOp::Delete | EditOp::Remove => {
            if existing.is_none() && op == EditOp::Delete {
                return Err(RpcError::data_missing(&format!("logical switch {name}")));
            }
            if existing.is_some() {
                ops.push(Op::DelBridge { name: name.into() });
            }
            return Ok(());
        }
        EditOp::Create if existing.is_some() => {
            return Err(RpcError::data_exists(&format!("logical switch {name}")));
        }
        EditOp::None if existing.is_none() => {
            return Err(RpcError::data_missing(&format!("logical switch {name}")));
        }
        _ => {}
    }
    let replace = op == EditOp::Replace;
    let dpid = match sw.child("datapath-id") {
        Some(d) => {
            if matches!(op_of(d, op)?, EditOp::Delete | EditOp::Remove) {
                return Err(RpcError::not_supported(
                    "a logical switch always has a datapath-id",
                ));
            }
            Some(parse_dpid(&d.text).ok_or_else(|| {
                RpcError::invalid_value(
                    "datapath-id",
                    &format!("{:?} is not 8 colon-separated hex octets", d.text),
                )
            })?)
        }
        None => None,
    };
    if let Some(e) = sw.child("enabled") {
        match e.text.as_str() {
            "true" => {}
            "false" => {
                return Err(RpcError::not_supported(
                    "a logical switch cannot be disabled (delete it instead)",
                ))
            }
            v => return Err(RpcError::invalid_value("enabled", v)),
        }
    }
    if let Some(e) = sw.child("check-controller-certificate") {
        if e.text != "false" {
            return Err(RpcError::not_supported(
                "check-controller-certificate (the TLS files decide)",
            ));
        }
    }
    if let Some(c) = sw.child("capabilities") {
        if !c.children.is_empty() {
            return Err(RpcError::not_supported("capabilities are read-only"));
        }
    }
    let fail = match sw.child("lost-connection-behavior") {
        Some(f) => match op_of(f, op)? {
            EditOp::Delete | EditOp::Remove => Some(None),
            _ => Some(Some(match f.text.as_str() {
                "failSecureMode" => FailMode::Secure,
                "failStandaloneMode" => FailMode::Standalone,
                v => return Err(RpcError::invalid_value("lost-connection-behavior", v)),
            })),
        },
        None if replace => Some(None),
        None => None,
    };
    match existing {
        None => ops.push(Op::AddBridge {
            name: name.into(),
            dpid,
            fail_mode: fail.flatten(),
        }),
        Some(b) => {
            if let Some(d) = dpid {
                if d != b.dpid {
                    ops.push(Op::Set {
                        object: format!("bridge:{name}"),
                        key: "other_config:datapath-id".into(),
                        value: format!("{d:016x}"),
                    });
                }
            }
            match fail {
                Some(Some(m)) if m != b.fail_mode => ops.push(Op::SetFailMode {
                    bridge: name.into(),
                    mode: m,
                }),
                Some(None) if b.fail_mode != FailMode::Secure => ops.push(Op::DelFailMode {
                    bridge: name.into(),
                }),
                _ => {}
            }
        }
    }
    edit_controllers(sw, name, existing, op, ops)?;
    edit_ports(sw, name, existing, op, numbers, ops)
}

fn edit_controllers(
    sw: &Element,
    bridge: &str,
    existing: Option<&crate::model::BridgeSnap>,
    op: EditOp,
    ops: &mut Vec<Op>,
) -> Result<(), RpcError> {
    let before: Vec<ControllerTarget> = existing
        .map(|b| b.controllers.iter().map(|c| c.target.clone()).collect())
        .unwrap_or_default();
    let Some(ctls) = sw.child("controllers") else {
        if op == EditOp::Replace && !before.is_empty() {
            ops.push(Op::DelController {
                bridge: bridge.into(),
            });
        }
        return Ok(());
    };
    allow(ctls, &["controller"])?;
    let cop = op_of(ctls, op)?;
    let mut list = match cop {
        EditOp::Replace | EditOp::Delete | EditOp::Remove => Vec::new(),
        _ => before.clone(),
    };
    if cop == EditOp::Delete && before.is_empty() {
        return Err(RpcError::data_missing(&format!(
            "controllers of logical switch {bridge}"
        )));
    }
    if !matches!(cop, EditOp::Delete | EditOp::Remove) {
        for c in ctls.children_named("controller") {
            allow(
                c,
                &[
                    "id",
                    "role",
                    "ip-address",
                    "port",
                    "local-ip-address",
                    "local-port",
                    "protocol",
                ],
            )?;
            let eop = op_of(c, cop)?;
            let id = required(c, "id")?;
            let pos = list.iter().position(|t| t.to_string() == id);
            let pos = match pos {
                Some(p) => Some(p),
                None if c.child("ip-address").is_some() => {
                    let t = controller_target(c, None)?;
                    list.iter().position(|x| *x == t)
                }
                None => None,
            };
            if let Some(r) = c.child_text("role") {
                if !matches!(r, "master" | "slave" | "equal") {
                    return Err(RpcError::invalid_value("role", r));
                }
            }
            match eop {
                EditOp::Delete | EditOp::Remove => match pos {
                    Some(p) => {
                        list.remove(p);
                    }
                    None if eop == EditOp::Delete => {
                        return Err(RpcError::data_missing(&format!("controller {id}")))
                    }
                    None => {}
                },
                EditOp::Create if pos.is_some() => {
                    return Err(RpcError::data_exists(&format!("controller {id}")))
                }
                _ => {
                    let base = pos.map(|p| list[p].clone());
                    let t = controller_target(c, base.as_ref())?;
                    match pos {
                        Some(p) => list[p] = t,
                        None => list.push(t),
                    }
                }
            }
        }
    }
    if list != before {
        if list.is_empty() {
            ops.push(Op::DelController {
                bridge: bridge.into(),
            });
        } else {
            ops.push(Op::SetController {
                bridge: bridge.into(),
                targets: list.iter().map(|t| t.to_string()).collect(),
            });
        }
    }
    Ok(())
}

fn controller_target(
    c: &Element,
    base: Option<&ControllerTarget>,
) -> Result<ControllerTarget, RpcError> {
    let (btr, bip, bport) = match base {
        Some(t) => {
            let (a, b, c) = target_parts(t);
            (Some(a), Some(b), Some(c))
        }
        None => (None, None, None),
    };
    let transport = match c.child_text("protocol") {
        Some("tcp") => Transport::Tcp,
        Some("tls") => Transport::Tls,
        Some(v) => return Err(RpcError::invalid_value("protocol", v)),
        // The YANG model's default.
        None => btr.unwrap_or(Transport::Tls),
    };
    let ip = match c.child_text("ip-address") {
        Some(v) => {
            let a: IpAddr = v
                .parse()
                .map_err(|_| RpcError::invalid_value("ip-address", v))?;
            a.to_string()
        }
        None => bip.ok_or_else(|| RpcError::missing_element("ip-address", "controller"))?,
    };
    let port = match c.child_text("port") {
        Some(v) => v
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| RpcError::invalid_value("port", v))?,
        // The YANG model's default.
        None => bport.unwrap_or(6633),
    };
    if matches!(base, Some(ControllerTarget::Listen { .. })) {
        // A listening target keeps listening; OF-CONFIG has no word for it.
        let addr: IpAddr = ip
            .parse()
            .map_err(|_| RpcError::invalid_value("ip-address", &ip))?;
        return Ok(ControllerTarget::Listen {
            transport,
            addr,
            port,
        });
    }
    Ok(ControllerTarget::Connect {
        transport,
        host: ip,
        port,
    })
}

fn edit_ports(
    sw: &Element,
    bridge: &str,
    existing: Option<&BridgeSnap>,
    op: EditOp,
    numbers: &[(String, u32)],
    ops: &mut Vec<Op>,
) -> Result<(), RpcError> {
    let before: Vec<String> = existing
        .map(|b| b.ports.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_default();
    let Some(res) = sw.child("resources") else {
        if op == EditOp::Replace {
            for p in &before {
                ops.push(Op::DelPort {
                    bridge: Some(bridge.into()),
                    port: PortRef::Name(p.clone()),
                });
            }
        }
        return Ok(());
    };
    allow(res, &["port", "queue", "certificate", "flow-table"])?;
    // Queue references: see edit_queues.
    for other in ["certificate", "flow-table"] {
        if res.child(other).is_some() {
            return Err(RpcError::not_supported(&format!(
                "logical switch {other} resources (fulmar has none to configure)"
            )));
        }
    }
    let rop = op_of(res, op)?;
    let mut listed = Vec::new();
    for p in res.children_named("port") {
        let pop = op_of(p, rop)?;
        let id = p.text.as_str();
        if id.is_empty() {
            return Err(RpcError::invalid_value(
                "port",
                "a port reference is a resource-id",
            ));
        }
        listed.push(id.to_string());
        let here = before.iter().any(|x| x == id);
        match pop {
            EditOp::Delete | EditOp::Remove => {
                if here {
                    ops.push(Op::DelPort {
                        bridge: Some(bridge.into()),
                        port: PortRef::Name(id.into()),
                    });
                } else if pop == EditOp::Delete {
                    return Err(RpcError::data_missing(&format!(
                        "port {id} on logical switch {bridge}"
                    )));
                }
            }
            EditOp::Create if here => {
                return Err(RpcError::data_exists(&format!(
                    "port {id} on logical switch {bridge}"
                )))
            }
            EditOp::None if !here => {
                return Err(RpcError::data_missing(&format!(
                    "port {id} on logical switch {bridge}"
                )))
            }
            _ if !here => ops.push(Op::AddPort {
                bridge: bridge.into(),
                interface: id.into(),
                number: numbers.iter().find(|(n, _)| n == id).map(|(_, n)| *n),
                options: Vec::new(),
            }),
            _ => {}
        }
    }
    if rop == EditOp::Replace {
        for p in &before {
            if !listed.contains(p) {
                ops.push(Op::DelPort {
                    bridge: Some(bridge.into()),
                    port: PortRef::Name(p.clone()),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml::parse;

    fn snap() -> Snapshot {
        Snapshot {
            bridges: vec![BridgeSnap {
                name: "br0".into(),
                dpid: 1,
                fail_mode: FailMode::Secure,
                controllers: vec![CtlSnap {
                    target: ControllerTarget::parse_target("tcp:10.0.0.1:6653").unwrap(),
                    live: None,
                }],
                ports: vec![
                    PortSnap {
                        name: "eth1".into(),
                        number: 1,
                        live: None,
                        qos: None,
                    },
                    PortSnap {
                        name: "eth2".into(),
                        number: 2,
                        live: Some(PortLive {
                            config: 1,
                            state: 1,
                            curr_speed: 10_000_000,
                            max_speed: 0,
                        }),
                        qos: Some(PortQos {
                            kind: Default::default(),
                            max_rate: 10_000_000,
                            queues: vec![
                                QueueConf {
                                    id: 1,
                                    min_rate: 1_000_000,
                                    max_rate: 0,
                                    priority: 0,
                                },
                                QueueConf {
                                    id: 2,
                                    min_rate: 0,
                                    max_rate: 3_333_333,
                                    priority: 1,
                                },
                            ],
                        }),
                    },
                ],
            }],
        }
    }

    fn edit(body: &str, default: EditOp) -> Result<Vec<Op>, RpcError> {
        let doc = format!(
            r#"<capable-switch xmlns="{NS}" xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><id>fulmar</id>{body}</capable-switch>"#
        );
        edit_ops(&snap(), &parse(doc.as_bytes()).unwrap(), default)
    }

    fn ls(body: &str) -> String {
        format!("<logical-switches>{body}</logical-switches>")
    }

    #[test]
    fn dpid_both_ways() {
        assert_eq!(dpid_text(0x0102), "00:00:00:00:00:00:01:02");
        assert_eq!(parse_dpid("00:00:00:00:00:00:01:02"), Some(0x0102));
        assert_eq!(parse_dpid("0000000000000102"), Some(0x0102));
        for bad in [
            "",
            "00:00",
            "0:00:00:00:00:00:001:02",
            "zz:00:00:00:00:00:00:00",
        ] {
            assert_eq!(parse_dpid(bad), None, "{bad}");
        }
    }

    #[test]
    fn renders_config_and_state() {
        let mut out = String::new();
        crate::xml::write(&render(&snap(), false), None, &mut out);
        assert!(out.starts_with(r#"<capable-switch xmlns="urn:onf:config:yang"><id>fulmar</id>"#));
        assert!(out.contains("<port><resource-id>eth1</resource-id><number>1</number><name>eth1</name><configuration><admin-state>up</admin-state>"));
        assert!(out.contains("<datapath-id>00:00:00:00:00:00:00:01</datapath-id>"));
        assert!(out.contains("<lost-connection-behavior>failSecureMode</lost-connection-behavior>"));
        assert!(out.contains("<controller><id>tcp:10.0.0.1:6653</id><ip-address>10.0.0.1</ip-address><port>6653</port><protocol>tcp</protocol></controller>"));
        assert!(out.contains("<resources><port>eth1</port><port>eth2</port><queue>eth2:1</queue><queue>eth2:2</queue></resources>"));
        // Queue resources after the ports: rates in tenths of a percent
        // of the port's max_rate, rounded down; a zero rate left out.
        assert!(out.contains("</port><queue><resource-id>eth2:1</resource-id><id>1</id><port>eth2</port><properties><min-rate>100</min-rate></properties></queue><queue><resource-id>eth2:2</resource-id><id>2</id><port>eth2</port><properties><max-rate>333</max-rate></properties></queue></resources><logical-switches>"));
        assert!(!out.contains("<state>") && !out.contains("current-rate"));
        assert!(out.contains("<name>eth2</name><configuration><admin-state>down</admin-state>"));
        let mut out = String::new();
        crate::xml::write(&render(&snap(), true), None, &mut out);
        assert!(out.contains(
            "<current-rate>10000000</current-rate><configuration><admin-state>down</admin-state>"
        ));
        assert!(out.contains("<state><oper-state>down</oper-state><blocked>false</blocked><live>false</live></state>"));
    }

    #[test]
    fn subtree_filters() {
        let tree = render(&snap(), false);
        let f = parse(
            format!(r#"<capable-switch xmlns="{NS}"><logical-switches/></capable-switch>"#)
                .as_bytes(),
        )
        .unwrap();
        let got = subtree(&tree, &f).unwrap();
        assert_eq!(got.children.len(), 1);
        assert_eq!(got.children[0].name, "logical-switches");
        // Content match on a list key: that entry only.
        let f = parse(format!(r#"<capable-switch xmlns="{NS}"><resources><port><resource-id>eth2</resource-id></port></resources></capable-switch>"#).as_bytes()).unwrap();
        let got = subtree(&tree, &f).unwrap();
        let ports: Vec<_> = got.children[0].children_named("port").collect();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].child_text("number"), Some("2"));
        let f = parse(br#"<capable-switch xmlns="urn:other"/>"#).unwrap();
        assert!(subtree(&tree, &f).is_none());
    }

    #[test]
    fn new_switch_with_everything() {
        let ops = edit(
            &ls("<switch><id>br1</id><datapath-id>00:00:00:00:00:00:00:0a</datapath-id><lost-connection-behavior>failStandaloneMode</lost-connection-behavior><controllers><controller><id>c</id><ip-address>10.0.0.9</ip-address><port>6633</port><protocol>tls</protocol></controller></controllers><resources><port>eth9</port></resources></switch>"),
            EditOp::Merge,
        )
        .unwrap();
        assert_eq!(
            ops,
            vec![
                Op::AddBridge {
                    name: "br1".into(),
                    dpid: Some(10),
                    fail_mode: Some(FailMode::Standalone)
                },
                Op::SetController {
                    bridge: "br1".into(),
                    targets: vec!["tls:10.0.0.9:6633".into()]
                },
                Op::AddPort {
                    bridge: "br1".into(),
                    interface: "eth9".into(),
                    number: None,
                    options: vec![]
                },
            ]
        );
    }

    #[test]
    fn merge_into_existing_switch() {
        let ops = edit(
            &format!(
                r#"<resources><port><resource-id>eth3</resource-id><number>7</number></port></resources>{}"#,
                ls("<switch><id>br0</id><datapath-id>00:00:00:00:00:00:00:02</datapath-id><lost-connection-behavior>failStandaloneMode</lost-connection-behavior><controllers><controller><id>x</id><ip-address>10.0.0.2</ip-address></controller></controllers><resources><port>eth3</port><port>eth1</port></resources></switch>")
            ),
            EditOp::Merge,
        )
        .unwrap();
        assert_eq!(
            ops,
            vec![
                Op::Set {
                    object: "bridge:br0".into(),
                    key: "other_config:datapath-id".into(),
                    value: "0000000000000002".into()
                },
                Op::SetFailMode {
                    bridge: "br0".into(),
                    mode: FailMode::Standalone
                },
                Op::SetController {
                    bridge: "br0".into(),
                    targets: vec!["tcp:10.0.0.1:6653".into(), "tls:10.0.0.2:6633".into()]
                },
                Op::AddPort {
                    bridge: "br0".into(),
                    interface: "eth3".into(),
                    number: Some(7),
                    options: vec![]
                },
            ]
        );
        // The same values again: nothing to do.
        let same = ls("<switch><id>br0</id><datapath-id>00:00:00:00:00:00:00:01</datapath-id><controllers><controller><id>tcp:10.0.0.1:6653</id></controller></controllers><resources><port>eth1</port></resources></switch>");
        assert_eq!(edit(&same, EditOp::Merge).unwrap(), vec![]);
    }

    #[test]
    fn get_config_sent_back_changes_nothing() {
        let tree = render(&snap(), false);
        for default in [EditOp::Merge, EditOp::Replace] {
            assert_eq!(
                edit_ops(&snap(), &tree, default).unwrap(),
                vec![],
                "{default:?}"
            );
        }
        // Renumbering an attached port (eth1: eth2 has queues, see
        // renumbered_port_takes_its_queues_along).
        assert_eq!(
            edit(
                "<resources><port><resource-id>eth1</resource-id><number>9</number></port></resources>",
                EditOp::Merge
            )
            .unwrap(),
            vec![Op::Set {
                object: "interface:eth1".into(),
                key: "ofport".into(),
                value: "9".into()
            }]
        );
    }

    #[test]
    fn delete_remove_and_replace() {
        let del = |body: &str| edit(&ls(body), EditOp::Merge);
        assert_eq!(
            del(r#"<switch nc:operation="delete"><id>br0</id></switch>"#).unwrap(),
            vec![Op::DelBridge { name: "br0".into() }]
        );
        assert_eq!(
            del(r#"<switch nc:operation="remove"><id>nope</id></switch>"#).unwrap(),
            vec![]
        );
        assert_eq!(
            del(r#"<switch nc:operation="delete"><id>nope</id></switch>"#)
                .unwrap_err()
                .tag,
            "data-missing"
        );
        assert_eq!(
            del(r#"<switch nc:operation="create"><id>br0</id></switch>"#)
                .unwrap_err()
                .tag,
            "data-exists"
        );
        assert_eq!(
            del(r#"<switch><id>br0</id><controllers><controller nc:operation="delete"><id>tcp:10.0.0.1:6653</id></controller></controllers><resources><port nc:operation="delete">eth2</port></resources></switch>"#).unwrap(),
            vec![
                Op::DelController { bridge: "br0".into() },
                Op::DelPort { bridge: Some("br0".into()), port: PortRef::Name("eth2".into()) },
            ]
        );
        assert_eq!(
            del(r#"<switch><id>br0</id><resources><port nc:operation="delete">eth7</port></resources></switch>"#).unwrap_err().tag,
            "data-missing"
        );
        assert_eq!(
            del(
                r#"<switch><id>br0</id><lost-connection-behavior nc:operation="delete"/></switch>"#
            )
            .unwrap(),
            vec![]
        );
        // replace: what is not listed goes.
        assert_eq!(
            edit(
                &ls("<switch><id>br0</id><resources><port>eth1</port></resources></switch>"),
                EditOp::Replace
            )
            .unwrap(),
            vec![
                Op::DelController {
                    bridge: "br0".into()
                },
                Op::DelPort {
                    bridge: Some("br0".into()),
                    port: PortRef::Name("eth2".into())
                },
            ]
        );
        assert_eq!(
            edit(&ls("<switch><id>br5</id></switch>"), EditOp::Replace).unwrap(),
            vec![
                Op::AddBridge {
                    name: "br5".into(),
                    dpid: None,
                    fail_mode: None
                },
                Op::DelBridge { name: "br0".into() },
            ]
        );
        // none: only descend; a missing switch is an error.
        assert_eq!(
            edit(&ls("<switch><id>br0</id></switch>"), EditOp::None).unwrap(),
            vec![]
        );
        assert_eq!(
            edit(&ls("<switch><id>br9</id></switch>"), EditOp::None)
                .unwrap_err()
                .tag,
            "data-missing"
        );
        assert_eq!(
            edit(r#"<resources><port nc:operation="delete"><resource-id>eth1</resource-id></port></resources>"#, EditOp::Merge).unwrap(),
            vec![Op::DelPort { bridge: Some("br0".into()), port: PortRef::Name("eth1".into()) }]
        );
    }

    #[test]
    fn bad_edits_are_rpc_errors() {
        for (body, tag) in [
            (ls("<switch><id>br0</id><bogus/></switch>"), "unknown-element"),
            (ls("<switch><bogus/></switch>"), "missing-element"),
            (ls("<switch><datapath-id>00:00:00:00:00:00:00:01</datapath-id></switch>"), "missing-element"),
            (ls("<switch><id>br0</id><datapath-id>1</datapath-id></switch>"), "invalid-value"),
            (ls("<switch><id>br0</id><enabled>maybe</enabled></switch>"), "invalid-value"),
            (ls("<switch><id>br0</id><enabled>false</enabled></switch>"), "operation-not-supported"),
            (ls("<switch><id>br0</id><lost-connection-behavior>x</lost-connection-behavior></switch>"), "invalid-value"),
            (ls("<switch><id>br0</id><controllers><controller><id>n</id></controller></controllers></switch>"), "missing-element"),
            (ls("<switch><id>br0</id><controllers><controller><id>n</id><ip-address>x</ip-address></controller></controllers></switch>"), "invalid-value"),
            (ls("<switch><id>br0</id><controllers><controller><id>n</id><ip-address>1.2.3.4</ip-address><port>70000</port></controller></controllers></switch>"), "invalid-value"),
            (ls("<switch><id>br0</id><controllers><controller><id>n</id><ip-address>1.2.3.4</ip-address><protocol>udp</protocol></controller></controllers></switch>"), "invalid-value"),
            (ls(r#"<switch nc:operation="frobnicate"><id>br0</id></switch>"#), "bad-attribute"),
            (ls("<switch><id>br0</id><resources><queue>q</queue></resources></switch>"), "invalid-value"),
            ("<resources><port><resource-id>eth1</resource-id><configuration><admin-state>down</admin-state></configuration></port></resources>".into(), "operation-not-supported"),
            ("<resources><port><resource-id>eth2</resource-id><configuration><admin-state>up</admin-state></configuration></port></resources>".into(), "operation-not-supported"),
            ("<resources><port><resource-id>eth2</resource-id><configuration><no-forward>maybe</no-forward></configuration></port></resources>".into(), "invalid-value"),
            ("<resources><port><resource-id>eth2</resource-id><configuration><speed/></configuration></port></resources>".into(), "unknown-element"),
            ("<resources><port><resource-id>eth1</resource-id><number>0</number></port></resources>".into(), "invalid-value"),
            ("<resources><port><resource-id>eth8</resource-id></port></resources>".into(), "operation-not-supported"),
            ("<other/>".into(), "unknown-element"),
            (r#"<logical-switches><switch xmlns="urn:x"/></logical-switches>"#.into(), "unknown-namespace"),
        ] {
            assert_eq!(edit(&body, EditOp::Merge).unwrap_err().tag, tag, "{body}");
        }
        let wrong_id = parse(
            format!(r#"<capable-switch xmlns="{NS}"><id>other</id></capable-switch>"#).as_bytes(),
        )
        .unwrap();
        assert_eq!(
            edit_ops(&snap(), &wrong_id, EditOp::Merge).unwrap_err().tag,
            "invalid-value"
        );
    }

    fn queues(body: &str) -> String {
        format!("<resources>{body}</resources>")
    }

    fn eth2_qos(queues: Vec<QueueConf>) -> Op {
        Op::SetQos {
            bridge: "br0".into(),
            port: PortRef::Name("eth2".into()),
            qos: Some(PortQos {
                kind: Default::default(),
                max_rate: 10_000_000,
                queues,
            }),
        }
    }

    const Q1: QueueConf = QueueConf {
        id: 1,
        min_rate: 1_000_000,
        max_rate: 0,
        priority: 0,
    };
    const Q2: QueueConf = QueueConf {
        id: 2,
        min_rate: 0,
        max_rate: 3_333_333,
        priority: 1,
    };

    #[test]
    fn queue_permille_and_resource_ids() {
        assert_eq!(permille(0, 10), None);
        assert_eq!(permille(5, 0), None);
        assert_eq!(permille(3_333_333, 10_000_000), Some(333));
        assert_eq!(permille(u64::MAX, 1), Some(1000));
        assert_eq!(parse_queue_rid("eth1:2"), Some(("eth1", 2)));
        assert_eq!(parse_queue_rid("a:b:7"), Some(("a:b", 7)));
        for bad in [
            "eth1",
            ":2",
            "eth1:",
            "eth1:x",
            "eth1:02",
            "eth1:4294967295",
            "eth1:+2",
        ] {
            assert_eq!(parse_queue_rid(bad), None, "{bad}");
        }
    }

    #[test]
    fn queue_edits_set_the_ports_queues() {
        // Create a queue: tenths of a percent of the port's max_rate.
        let ops = edit(
            &queues("<queue><resource-id>eth2:5</resource-id><id>5</id><port>eth2</port><properties><min-rate>250</min-rate><max-rate>500</max-rate></properties></queue>"),
            EditOp::Merge,
        )
        .unwrap();
        let q5 = QueueConf {
            id: 5,
            min_rate: 2_500_000,
            max_rate: 5_000_000,
            priority: 0,
        };
        assert_eq!(ops, vec![eth2_qos(vec![Q1, Q2, q5])]);
        // create of an existing one; delete of a missing one.
        assert_eq!(
            edit(
                &queues(
                    r#"<queue nc:operation="create"><resource-id>eth2:1</resource-id></queue>"#
                ),
                EditOp::Merge
            )
            .unwrap_err()
            .tag,
            "data-exists"
        );
        assert_eq!(
            edit(
                &queues(
                    r#"<queue nc:operation="delete"><resource-id>eth2:9</resource-id></queue>"#
                ),
                EditOp::Merge
            )
            .unwrap_err()
            .tag,
            "data-missing"
        );
        assert_eq!(
            edit(
                &queues(
                    r#"<queue nc:operation="remove"><resource-id>eth2:9</resource-id></queue>"#
                ),
                EditOp::Merge
            )
            .unwrap(),
            vec![]
        );
        // Merge changes only what it names; priority is kept.
        assert_eq!(
            edit(&queues("<queue><resource-id>eth2:2</resource-id><properties><min-rate>100</min-rate></properties></queue>"), EditOp::Merge).unwrap(),
            vec![eth2_qos(vec![Q1, QueueConf { min_rate: 1_000_000, ..Q2 }])]
        );
        // Replace of a queue: rates not given are none.
        assert_eq!(
            edit(&queues(r#"<queue nc:operation="replace"><resource-id>eth2:2</resource-id><properties><min-rate>100</min-rate></properties></queue>"#), EditOp::Merge).unwrap(),
            vec![eth2_qos(vec![Q1, QueueConf { min_rate: 1_000_000, max_rate: 0, ..Q2 }])]
        );
        // A rate leaf deleted.
        assert_eq!(
            edit(&queues(r#"<queue><resource-id>eth2:1</resource-id><properties><min-rate nc:operation="delete"/></properties></queue>"#), EditOp::Merge).unwrap(),
            vec![eth2_qos(vec![QueueConf { min_rate: 0, ..Q1 }, Q2])]
        );
        // Delete: one SetQos with the rest.
        assert_eq!(
            edit(
                &queues(
                    r#"<queue nc:operation="delete"><resource-id>eth2:1</resource-id></queue>"#
                ),
                EditOp::Merge
            )
            .unwrap(),
            vec![eth2_qos(vec![Q2])]
        );
        // Through the logical switch's reference too.
        assert_eq!(
            edit(&ls(r#"<switch><id>br0</id><resources><queue nc:operation="delete">eth2:2</queue></resources></switch>"#), EditOp::Merge).unwrap(),
            vec![eth2_qos(vec![Q1])]
        );
        // A new queue on a port without queues, no rates: the port gets
        // queues (no max_rate, so no rates can be given).
        assert_eq!(
            edit(
                &queues("<queue><resource-id>eth1:0</resource-id></queue>"),
                EditOp::Merge
            )
            .unwrap(),
            vec![Op::SetQos {
                bridge: "br0".into(),
                port: PortRef::Name("eth1".into()),
                qos: Some(PortQos {
                    kind: Default::default(),
                    max_rate: 0,
                    queues: vec![QueueConf {
                        id: 0,
                        min_rate: 0,
                        max_rate: 0,
                        priority: 0
                    }],
                }),
            }]
        );
        // The resources replaced: queues not listed go.
        assert_eq!(
            edit(r#"<resources nc:operation="replace"><port><resource-id>eth1</resource-id></port><port><resource-id>eth2</resource-id></port><queue><resource-id>eth2:2</resource-id><properties><max-rate>333</max-rate></properties></queue></resources>"#, EditOp::Merge).unwrap(),
            vec![eth2_qos(vec![Q2])]
        );
        // A switch replaced with only its ports: its queues go; the port
        // deleted in the same edit gets no SetQos.
        assert_eq!(
            edit(&ls("<switch><id>br0</id><controllers><controller><id>tcp:10.0.0.1:6653</id><ip-address>10.0.0.1</ip-address><port>6653</port><protocol>tcp</protocol></controller></controllers><resources><port>eth1</port><port>eth2</port></resources></switch>"), EditOp::Replace).unwrap(),
            vec![eth2_qos(vec![])]
        );
        assert_eq!(
            edit(&ls("<switch><id>br0</id><controllers><controller><id>tcp:10.0.0.1:6653</id><ip-address>10.0.0.1</ip-address><port>6653</port><protocol>tcp</protocol></controller></controllers><resources><port>eth1</port></resources></switch>"), EditOp::Replace).unwrap(),
            vec![Op::DelPort { bridge: Some("br0".into()), port: PortRef::Name("eth2".into()) }]
        );
    }

    #[test]
    fn renumbered_port_takes_its_queues_along() {
        assert_eq!(
            edit(
                "<resources><port><resource-id>eth2</resource-id><number>9</number></port></resources>",
                EditOp::Merge
            )
            .unwrap(),
            vec![
                Op::Set {
                    object: "interface:eth2".into(),
                    key: "ofport".into(),
                    value: "9".into()
                },
                eth2_qos(vec![Q1, Q2]),
            ]
        );
        // default-operation none: a rate without its own operation is
        // left alone.
        assert_eq!(
            edit(
                &queues("<queue><resource-id>eth2:1</resource-id><properties><min-rate>900</min-rate></properties></queue>"),
                EditOp::None
            )
            .unwrap(),
            vec![]
        );
    }

    #[test]
    fn last_queue_of_a_port_without_ceiling_clears_its_qos() {
        let mut s = snap();
        s.bridges[0].ports[1].qos.as_mut().unwrap().max_rate = 0;
        let doc = format!(
            r#"<capable-switch xmlns="{NS}" xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><resources><queue nc:operation="delete"><resource-id>eth2:1</resource-id></queue><queue nc:operation="delete"><resource-id>eth2:2</resource-id></queue></resources></capable-switch>"#
        );
        assert_eq!(
            edit_ops(&s, &parse(doc.as_bytes()).unwrap(), EditOp::Merge).unwrap(),
            vec![Op::SetQos {
                bridge: "br0".into(),
                port: PortRef::Name("eth2".into()),
                qos: None
            }]
        );
        // Rates it cannot show are not dropped by a replace that omits them.
        let tree = render(&s, false);
        assert_eq!(edit_ops(&s, &tree, EditOp::Replace).unwrap(), vec![]);
        let doc = format!(
            r#"<capable-switch xmlns="{NS}"><resources><queue><resource-id>eth2:1</resource-id><properties><min-rate>5</min-rate></properties></queue></resources></capable-switch>"#
        );
        let e = edit_ops(&s, &parse(doc.as_bytes()).unwrap(), EditOp::Merge).unwrap_err();
        assert_eq!(e.tag, "invalid-value");
    }

    #[test]
    fn bad_queue_edits_are_rpc_errors() {
        for (body, tag) in [
            (queues("<queue><resource-id>q1</resource-id></queue>"), "invalid-value"),
            (queues("<queue><id>1</id></queue>"), "missing-element"),
            (queues("<queue><resource-id>eth2:1</resource-id><id>2</id></queue>"), "invalid-value"),
            (queues("<queue><resource-id>eth2:1</resource-id><port>eth1</port></queue>"), "invalid-value"),
            (queues("<queue><resource-id>eth9:1</resource-id></queue>"), "data-missing"),
            (queues("<queue><resource-id>eth2:1</resource-id><bogus/></queue>"), "unknown-element"),
            (queues("<queue><resource-id>eth2:1</resource-id><properties><min-rate>1001</min-rate></properties></queue>"), "invalid-value"),
            (queues("<queue><resource-id>eth2:1</resource-id><properties><max-rate>-1</max-rate></properties></queue>"), "invalid-value"),
            (queues("<queue><resource-id>eth2:1</resource-id><properties><experimenter>7</experimenter></properties></queue>"), "operation-not-supported"),
            (queues("<queue><resource-id>eth2:1</resource-id><properties><weight>7</weight></properties></queue>"), "unknown-element"),
            // min above max (the datastore's check, before any transaction).
            (queues("<queue><resource-id>eth2:1</resource-id><properties><min-rate>500</min-rate><max-rate>100</max-rate></properties></queue>"), "invalid-value"),
            (ls("<switch><id>br0</id><resources><queue>eth2:9</queue></resources></switch>"), "data-missing"),
            (ls("<switch><id>br0</id><resources><queue>eth7:1</queue></resources></switch>"), "data-missing"),
            (ls(r#"<switch><id>br0</id><resources><queue nc:operation="create">eth2:1</queue></resources></switch>"#), "data-exists"),
        ] {
            assert_eq!(edit(&body, EditOp::Merge).unwrap_err().tag, tag, "{body}");
        }
        // A queue and its reference in one edit.
        assert!(edit(
            &format!(
                "{}{}",
                queues("<queue><resource-id>eth2:7</resource-id></queue>"),
                ls("<switch><id>br0</id><resources><queue>eth2:7</queue></resources></switch>")
            ),
            EditOp::Merge
        )
        .is_ok());
    }
}
