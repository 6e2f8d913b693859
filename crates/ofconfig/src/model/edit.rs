//! `edit-config` into one list of datastore operations: the switch,
//! its controllers and its ports ([`super::queues`]: the queue resources).

use std::net::IpAddr;

use datastore::{ControllerTarget, FailMode, Op, PortRef, Transport};

use crate::error::RpcError;
use crate::xml::Element;

use super::edit_op::{allow, op_of, required, EditOp};
use super::queues::edit_queues;
use super::render::target_parts;
use super::snapshot::{parse_dpid, BridgeSnap, Snapshot};
use super::{NS, SWITCH_ID};

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
