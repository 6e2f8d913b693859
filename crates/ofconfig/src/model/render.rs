//! A snapshot as the OF-CONFIG element tree (`get`, `get-config`).

use datastore::{ControllerTarget, FailMode, Transport};

use crate::xml::Element;

use super::snapshot::{dpid_text, PortSnap, Snapshot};
use super::{NS, SWITCH_ID};

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

pub(super) fn target_parts(t: &ControllerTarget) -> (Transport, String, u16) {
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
pub(super) fn parse_queue_rid(rid: &str) -> Option<(&str, u32)> {
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
