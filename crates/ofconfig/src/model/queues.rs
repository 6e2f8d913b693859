//! The queue resources of an `edit-config`: a port's egress queues
//! (`qos` in the datastore) as the edit leaves them.

use datastore::{Op, PortQos, PortRef, QueueConf};

use crate::error::RpcError;
use crate::xml::Element;

use super::edit_op::{allow, op_of, required, EditOp};
use super::render::{parse_queue_rid, permille};
use super::snapshot::{PortSnap, Snapshot};

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
pub(super) fn edit_queues(
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
    let rop = res.map_or(Ok(op), |r| op_of(r, op))?;
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
            let qop = sres.map_or(Ok(sop), |r| op_of(r, sop))?;
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
