//! The `fulmar ctl` words of a configuration transaction (`add-br`,
//! `add-port`, `set`, `set-qos`, ..., joined by `--` as with `ovs-vsctl`)
//! parsed into [`Op`]s. The control socket's command registry
//! (`mgmt::registry`) sends these commands here; a test there checks
//! that it names exactly [`CTL_COMMANDS`].

use super::{parse_fail_mode, Op, PortRef};
use crate::model::*;
use crate::raw::IntOrString;
use crate::validate::parse_dpid;

/// The commands [`parse_ctl`] knows, each with its usage (the words after
/// the name), which its errors print and `list-commands` shows.
pub const CTL_COMMANDS: &[(&str, &str)] = &[
    ("add-br", "BRIDGE [dpid=DPID] [fail_mode=MODE]"),
    ("del-br", "BRIDGE"),
    ("add-port", "BRIDGE INTERFACE [KEY=VALUE...]"),
    ("del-port", "[BRIDGE] PORT"),
    ("set-controller", "BRIDGE TARGET..."),
    ("del-controller", "BRIDGE"),
    ("set-fail-mode", "BRIDGE secure|standalone"),
    ("del-fail-mode", "BRIDGE"),
    ("set", "bridge:BR|port:BR:IF|dataplane KEY=VALUE..."),
    (
        "set-qos",
        "BRIDGE PORT [type=TYPE] [max_rate=BITS] [queue:ID=priority:N,min_rate:BITS,max_rate:BITS]...",
    ),
    ("clear-qos", "BRIDGE PORT"),
];

/// The usage of command `name` of [`CTL_COMMANDS`].
pub(crate) fn ctl_usage(name: &str) -> Option<&'static str> {
    CTL_COMMANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, u)| *u)
}

/// The names of [`CTL_COMMANDS`], for an error.
fn known() -> String {
    CTL_COMMANDS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses `fulmar ctl` words, `ovs-vsctl` style, into one transaction:
/// commands separated by `--`.
///
/// * `add-br BR [dpid=D] [fail_mode=M]`, `del-br BR`
/// * `add-port BR IF [KEY=VALUE...]` (keys of [`Op::AddPort`])
/// * `del-port BR IF|NUM`, `del-port IF`
/// * `set-controller BR TARGET...`, `del-controller BR`
/// * `set-fail-mode BR secure|standalone`, `del-fail-mode BR`
/// * `set OBJECT KEY=VALUE...` where OBJECT is `bridge:BR` (or `bridge
///   BR`), `port:BR:IF` (or `port IF`, `interface IF`), or `dataplane`
/// * `set-qos BR PORT [type=linux-htb|linux-hfsc] [max_rate=BITS]
///   [queue:ID=priority:N,min_rate:BITS,max_rate:BITS]...`,
///   `clear-qos BR PORT` (see [`Op::SetQos`])
///
/// ```
/// use datastore::{parse_ctl, Op};
/// let ops = parse_ctl(&["add-br", "br1", "--", "add-port", "br1", "p0", "type=tap"]).unwrap();
/// assert_eq!(ops.len(), 2);
/// assert!(matches!(&ops[0], Op::AddBridge { name, .. } if name == "br1"));
/// ```
pub fn parse_ctl(words: &[&str]) -> Result<Vec<Op>, String> {
    let mut ops = Vec::new();
    for cmd in words.split(|w| *w == "--") {
        let Some((&name, args)) = cmd.split_first() else {
            continue;
        };
        parse_command(name, args, &mut ops)?;
    }
    if ops.is_empty() {
        return Err(format!("no command given (expected one of {})", known()));
    }
    Ok(ops)
}

/// A rate in bits per second, at most [`MAX_QOS_RATE`].
fn parse_rate(key: &str, v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|r| *r <= MAX_QOS_RATE)
        .ok_or_else(|| format!("{key} {v:?} is not a rate in bits/s (0..={MAX_QOS_RATE})"))
}

/// The words of `set-qos` after the port.
fn parse_qos(words: &[&str]) -> Result<PortQos, String> {
    let mut q = PortQos {
        kind: QosKind::default(),
        max_rate: 0,
        queues: Vec::new(),
    };
    for w in words {
        let (k, v) = key_value("set-qos", w)?;
        match k {
            "type" => {
                q.kind = QosKind::parse(v).ok_or_else(|| {
                    format!("QoS type {v:?} is not valid (linux-htb or linux-hfsc)")
                })?
            }
            "max_rate" | "max-rate" => q.max_rate = parse_rate(k, v)?,
            _ => {
                let id = k
                    .strip_prefix("queue:")
                    .or_else(|| k.strip_prefix("queues:"))
                    .ok_or_else(|| {
                        format!("unknown key {k:?} (expected type, max_rate or queue:ID)")
                    })?;
                let id = id
                    .parse::<u32>()
                    .ok()
                    .filter(|id| *id != u32::MAX)
                    .ok_or_else(|| format!("queue id {id:?} is not valid (0..=4294967294)"))?;
                let mut c = QueueConf {
                    id,
                    min_rate: 0,
                    max_rate: 0,
                    priority: 0,
                };
                for kv in v.split(',').filter(|s| !s.is_empty()) {
                    let (qk, qv) = kv
                        .split_once(':')
                        .ok_or_else(|| format!("queue {id}: {kv:?} is not KEY:VALUE"))?;
                    match qk {
                        "min_rate" | "min-rate" => c.min_rate = parse_rate(qk, qv)?,
                        "max_rate" | "max-rate" => c.max_rate = parse_rate(qk, qv)?,
                        "priority" => {
                            c.priority = qv.parse().map_err(|_| {
                                format!("queue {id}: priority {qv:?} is not valid (0..=4294967295)")
                            })?
                        }
                        _ => {
                            return Err(format!(
                                "queue {id}: unknown key {qk:?} (expected min_rate, max_rate or priority)"
                            ))
                        }
                    }
                }
                q.queues.push(c);
            }
        }
    }
    q.check()?;
    Ok(q)
}

fn key_value<'a>(cmd: &str, word: &'a str) -> Result<(&'a str, &'a str), String> {
    word.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("{cmd}: {word:?} is not KEY=VALUE"))
}

fn parse_command(name: &str, args: &[&str], ops: &mut Vec<Op>) -> Result<(), String> {
    let usage = || format!("{name}: usage: {name} {}", ctl_usage(name).unwrap_or(""));
    let s = |w: &&str| w.to_string();
    match name {
        "add-br" => {
            let Some((br, rest)) = args.split_first() else {
                return Err(usage());
            };
            let (mut dpid, mut fail_mode) = (None, None);
            for w in rest {
                match key_value(name, w)? {
                    ("dpid", v) => {
                        dpid = Some(
                            parse_dpid(&IntOrString::Str(v.to_string()))
                                .map_err(|m| format!("{name}: {m}"))?,
                        )
                    }
                    ("fail_mode" | "fail-mode", v) => {
                        fail_mode = Some(parse_fail_mode(v).map_err(|m| format!("{name}: {m}"))?)
                    }
                    (k, _) => {
                        return Err(format!(
                            "{name}: unknown key {k:?} (expected dpid or fail_mode)"
                        ))
                    }
                }
            }
            ops.push(Op::AddBridge {
                name: br.to_string(),
                dpid,
                fail_mode,
            });
        }
        "del-br" => match args {
            [br] => ops.push(Op::DelBridge { name: s(br) }),
            _ => return Err(usage()),
        },
        "add-port" => {
            let [br, iface, rest @ ..] = args else {
                return Err(usage());
            };
            let options = rest
                .iter()
                .map(|w| key_value(name, w).map(|(k, v)| (k.to_string(), v.to_string())))
                .collect::<Result<Vec<_>, _>>()?;
            ops.push(Op::AddPort {
                bridge: s(br),
                interface: s(iface),
                number: None,
                options,
            });
        }
        "del-port" => match args {
            [port] => ops.push(Op::DelPort {
                bridge: None,
                port: PortRef::Name(s(port)),
            }),
            [br, port] => ops.push(Op::DelPort {
                bridge: Some(s(br)),
                port: PortRef::parse(port),
            }),
            _ => return Err(usage()),
        },
        "set-controller" => match args {
            [br, targets @ ..] if !targets.is_empty() => ops.push(Op::SetController {
                bridge: s(br),
                targets: targets.iter().map(s).collect(),
            }),
            _ => return Err(usage()),
        },
        "del-controller" => match args {
            [br] => ops.push(Op::DelController { bridge: s(br) }),
            _ => return Err(usage()),
        },
        "set-fail-mode" => match args {
            [br, mode] => ops.push(Op::SetFailMode {
                bridge: s(br),
                mode: parse_fail_mode(mode).map_err(|m| format!("{name}: {m}"))?,
            }),
            _ => return Err(usage()),
        },
        "del-fail-mode" => match args {
            [br] => ops.push(Op::DelFailMode { bridge: s(br) }),
            _ => return Err(usage()),
        },
        "set" => {
            let (object, rest) = match args {
                ["bridge", br, rest @ ..] => (format!("bridge:{br}"), rest),
                ["port" | "interface", iface, rest @ ..] => (format!("interface:{iface}"), rest),
                [obj, rest @ ..] => (obj.to_string(), rest),
                [] => return Err(usage()),
            };
            if rest.is_empty() {
                return Err(usage());
            }
            // The kind first, as ovs-vsctl takes `options:remote_ip=...
            // type=vxlan` in either order.
            let (kinds, others): (Vec<&&str>, Vec<&&str>) = rest
                .iter()
                .partition(|w| w.starts_with("type=") || w.starts_with("backend="));
            for w in kinds.into_iter().chain(others) {
                let (k, v) = key_value(name, w)?;
                ops.push(Op::Set {
                    object: object.clone(),
                    key: k.to_string(),
                    value: v.to_string(),
                });
            }
        }
        "set-qos" => {
            let [br, port, rest @ ..] = args else {
                return Err(usage());
            };
            let qos = parse_qos(rest).map_err(|m| format!("{name}: {m}"))?;
            ops.push(Op::SetQos {
                bridge: s(br),
                port: PortRef::parse(port),
                qos: Some(qos),
            });
        }
        "clear-qos" => match args {
            [br, port] => ops.push(Op::SetQos {
                bridge: s(br),
                port: PortRef::parse(port),
                qos: None,
            }),
            _ => return Err(usage()),
        },
        other => return Err(format!("unknown command {other:?} (known: {})", known())),
    }
    Ok(())
}
