//! Packet traces through a pipeline instance: the readable trace (each
//! table visited with the packet's fields, the entry hit as flow text, the
//! actions executed, the action set, the outputs) and the JSON lines form.
//! `fulmar trace` runs them on tables built from files, `fulmar ctl trace`
//! on a copy of a running bridge's tables; both print through here, so the
//! two agree on the same flows.

use std::fmt::Write as _;
use std::io::Write;

use ofp::consts::{port_no, OFP_NO_BUFFER};
use ofp::packet_in::packet_in_reason;
use ofp::{Match, Oxm, OxmField, OxmValue};
use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;
use pipeline::datapath::{BurstOutput, Datapath, TraceEvent};
use pipeline::{FlowEntry, MeterVerdict, Time};

/// Parses hex, ignoring white space, colons and a leading `0x`.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':')
        .collect();
    let nibble = |c: u8| -> Result<u8, String> {
        Ok(match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return Err(format!("not a hex digit: {:?}", char::from(c))),
        })
    };
    digits
        .chunks(2)
        .map(|p| match p {
            [h, l] => Ok(nibble(*h)? << 4 | nibble(*l)?),
            _ => Err("odd number of hex digits in packet".to_string()),
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

pub fn port_name(p: u32) -> String {
    match p {
        port_no::LOCAL => "LOCAL".into(),
        port_no::CONTROLLER => "CONTROLLER".into(),
        port_no::IN_PORT => "IN_PORT".into(),
        _ => p.to_string(),
    }
}

fn reason_name(r: u8) -> &'static str {
    match r {
        packet_in_reason::NO_MATCH => "no_match",
        packet_in_reason::ACTION => "action",
        packet_in_reason::INVALID_TTL => "invalid_ttl",
        _ => "unknown",
    }
}

/// The packet's fields as a match (for printing).
fn key_match(k: &FlowKey) -> Match {
    let mut fields = Vec::new();
    for f in 0..64u8 {
        let (Some(field), Some(v)) = (OxmField::from_u8(f), k.get(f)) else {
            continue;
        };
        // Pipeline fields that are zero say nothing.
        if matches!(
            field,
            OxmField::Metadata | OxmField::TunnelId | OxmField::InPhyPort
        ) && v == 0
        {
            continue;
        }
        if field == OxmField::InPhyPort && v == u128::from(k.in_port) {
            continue;
        }
        fields.push(Oxm::basic(field, OxmValue::from_u128(field.kind(), v)));
    }
    Match { fields }
}

fn entry_text(e: &FlowEntry) -> String {
    flowtext::format_flow(&e.to_flow_mod())
}

pub fn print_json(out: &BurstOutput, w: &mut impl Write) -> std::io::Result<()> {
    for (port, packet) in &out.tx {
        let port_json = if port <= port_no::MAX {
            serde_json::json!(port)
        } else {
            serde_json::json!(port_name(port))
        };
        let line = serde_json::json!({
            "port": port_json,
            "queue_id": packet.meta.queue_id,
            "packet": hex(packet.as_slice()),
        });
        writeln!(w, "{line}")?;
    }
    for pi in &out.packet_ins {
        let m = &pi.message;
        let buffer_id = if m.buffer_id == OFP_NO_BUFFER {
            serde_json::Value::Null
        } else {
            serde_json::json!(m.buffer_id)
        };
        let line = serde_json::json!({
            "port": "CONTROLLER",
            "reason": reason_name(m.reason),
            "table_id": m.table_id,
            "cookie": m.cookie,
            "buffer_id": buffer_id,
            "total_len": m.total_len,
            "in_port": pi.in_port,
            "packet": hex(&m.data),
        });
        writeln!(w, "{line}")?;
    }
    Ok(())
}

pub fn print_trace(
    dp: &Datapath,
    steps: &[TraceEvent],
    out: &BurstOutput,
    w: &mut impl Write,
) -> std::io::Result<()> {
    for s in steps {
        match s {
            TraceEvent::Lookup {
                table_id,
                entry,
                key,
            } => {
                writeln!(
                    w,
                    "table {table_id}: {}",
                    flowtext::format_match(&key_match(key))
                )?;
                match entry.and_then(|id| dp.state.tables.entry(id)) {
                    Some(e) => writeln!(w, "  hit: {}", entry_text(e))?,
                    None => writeln!(w, "  no match")?,
                }
            }
            TraceEvent::Meter { meter_id, verdict } => {
                let v = match verdict {
                    MeterVerdict::Pass => "pass".to_string(),
                    MeterVerdict::Drop { band } => format!("drop (band {band})"),
                    MeterVerdict::DscpRemark { band, prec_level } => {
                        format!("dscp_remark +{prec_level} (band {band})")
                    }
                };
                writeln!(w, "  meter {meter_id}: {v}")?;
            }
            TraceEvent::Action { action, error } => {
                let a = flowtext::format_actions(std::slice::from_ref(action));
                match error {
                    None => writeln!(w, "  action: {a}")?,
                    Some(e) => writeln!(w, "  action: {a}  (skipped: {e})")?,
                }
            }
            TraceEvent::ClearActions => writeln!(w, "  clear_actions")?,
            TraceEvent::WriteActions { actions } => {
                writeln!(w, "  write_actions({})", flowtext::format_actions(actions))?
            }
            TraceEvent::WriteMetadata { metadata } => writeln!(w, "  metadata now 0x{metadata:x}")?,
            TraceEvent::ActionSet { actions } => {
                let text = if actions.is_empty() {
                    "(empty)".to_string()
                } else {
                    flowtext::format_actions(actions)
                };
                writeln!(w, "action set: {text}")?
            }
            TraceEvent::Group { group_id, bucket } => match bucket {
                Some(b) => writeln!(w, "  group {group_id}: bucket {b}")?,
                None => writeln!(w, "  group {group_id}: no live bucket")?,
            },
            TraceEvent::Output { port, queue_id } => {
                if *queue_id != 0 {
                    writeln!(
                        w,
                        "  -> output to port {} queue {queue_id}",
                        port_name(*port)
                    )?
                } else {
                    writeln!(w, "  -> output to port {}", port_name(*port))?
                }
            }
            TraceEvent::Skipped { port } => writeln!(
                w,
                "  -> output to ingress port {port} skipped (use IN_PORT)"
            )?,
            TraceEvent::PacketIn { reason } => {
                writeln!(w, "  -> packet-in ({})", reason_name(*reason))?
            }
            TraceEvent::Drop { reason } => writeln!(w, "  -> dropped: {reason}")?,
        }
    }
    writeln!(w, "final:")?;
    for (port, packet) in &out.tx {
        writeln!(w, "  port {}: {}", port_name(port), hex(packet.as_slice()))?;
    }
    for pi in &out.packet_ins {
        let m = &pi.message;
        writeln!(
            w,
            "  CONTROLLER ({}, table {}, cookie 0x{:x}, {} of {} bytes): {}",
            reason_name(m.reason),
            m.table_id,
            m.cookie,
            m.data.len(),
            m.total_len,
            hex(&m.data)
        )?;
    }
    if out.tx.is_empty() && out.packet_ins.is_empty() {
        writeln!(w, "  (nothing emitted)")?;
    }
    let drops: Vec<String> = out
        .drops
        .named()
        .iter()
        .filter(|(_, v)| *v != 0)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    if !drops.is_empty() {
        writeln!(w, "drops: {}", drops.join(" "))?;
    }
    Ok(())
}

/// For a readable trace of bridge `b`: a line for each tunnel port the
/// trace outputs to (`  port N: ...` under `final:`), saying how the
/// port wraps the frame it was given — the encapsulation is the port's,
/// after the pipeline, so the frames above are the inner ones.
pub fn tunnel_notes(b: &datastore::Bridge, trace: &str) -> String {
    let mut notes = String::new();
    for p in &b.ports {
        let datastore::PortKind::Interface {
            name,
            backend: backend @ (datastore::Backend::Vxlan(t) | datastore::Backend::Gre(t)),
        } = &p.kind
        else {
            continue;
        };
        if !trace.contains(&format!("\n  port {}: ", p.number)) {
            continue;
        }
        let remote = t.remote_ip.map_or("?".to_string(), |a| a.to_string());
        let local = t
            .local_ip
            .map_or("the route's source".to_string(), |a| a.to_string());
        let how = match backend {
            datastore::Backend::Vxlan(_) if t.key_flow => format!(
                "IPv4/UDP port {}/VXLAN VNI from the packet's tunnel_id (key=flow)",
                t.dst_port
            ),
            _ if t.key_flow => {
                "IPv4/GRE key from the packet's tunnel_id (key=flow, 0x6558)".to_string()
            }
            datastore::Backend::Vxlan(_) => format!(
                "IPv4/UDP port {}/VXLAN VNI {}",
                t.dst_port,
                t.key.unwrap_or(0)
            ),
            _ => match t.key {
                Some(k) => format!("IPv4/GRE key {k} (0x6558)"),
                None => "IPv4/GRE no key (0x6558)".to_string(),
            },
        };
        notes.push_str(&format!(
            "tunnel: port {} ({name}) sends it in {how} from {local} to {remote}\n",
            p.number
        ));
    }
    notes
}

/// Sends `packets` (each with its time) one by one into `dp` on
/// `in_port` and writes what happens: the readable trace, or with `json`
/// one line per emitted packet.
pub fn run(
    dp: &mut Datapath,
    in_port: u32,
    packets: &[(Time, Vec<u8>)],
    json: bool,
    w: &mut impl Write,
) -> std::io::Result<()> {
    dp.set_tracing(!json);
    let mut burst = Vec::with_capacity(1);
    let mut out = BurstOutput::default();
    for (i, (t, bytes)) in packets.iter().enumerate() {
        out.clear();
        burst.push(PacketBuf::from_slice(bytes));
        dp.process_burst_into(in_port, &mut burst, *t, &mut out);
        if json {
            print_json(&out, w)?;
        } else {
            if i > 0 {
                writeln!(w)?;
            }
            writeln!(
                w,
                "packet {}: in_port {}, {} bytes",
                i + 1,
                port_name(in_port),
                bytes.len()
            )?;
            let steps = dp.take_trace();
            print_trace(dp, &steps, &out, w)?;
        }
    }
    Ok(())
}
