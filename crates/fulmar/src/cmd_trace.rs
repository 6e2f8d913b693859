//! `fulmar trace`: sends packets through an in-memory OpenFlow pipeline
//! built from flow, group and meter text files, and shows what happens.
//!
//! ```text
//! fulmar trace --flows FILE [--groups FILE] [--meters FILE] --in-port N
//!              (--packet HEX ... | --pcap FILE) [--json] [--ports N]
//!              [--port-down P ...] [--invalid-ttl-to-controller]
//!              [--miss-send-len N] [--buffers N]
//! ```
//!
//! The simulated switch has ports `1..=N` (`--ports`, default 16), all up
//! unless named by `--port-down`. Packets from `--packet` are sent at time
//! 1 s, one after the other; packets from a pcap file at their capture
//! times (so meters see the capture's rate).
//!
//! With `--json`, one line per emitted packet:
//! `{"port": N | "LOCAL", "queue_id": Q, "packet": "HEX"}`, and for each
//! packet-in `{"port": "CONTROLLER", "reason": "no_match"|"action"|
//! "invalid_ttl", "table_id": T, "cookie": C, "buffer_id": B,
//! "total_len": L, "packet": "HEX"}` (the packet-in's data), in order of
//! input packet (transmissions, then packet-ins). Without it, a readable
//! trace: each table visited with the packet's fields, the entry hit (as
//! flow text), the actions executed, the action set and the outputs.
//!
//! A bad line in a file is reported as `FILE:LINE: MESSAGE` (the message
//! of the text parser, with its column, or the OpenFlow error the switch
//! refused the entry with), and the exit status is 2.

use anyhow::{bail, Context};
use clap::Args;
use ofp::consts::{port_no, OFP_NO_BUFFER};
use ofp::packet_in::packet_in_reason;
use ofp::{FlowMod, Match, Oxm, OxmField, OxmValue};
use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;
use pipeline::datapath::{
    BurstOutput, Datapath, DatapathConfig, PortInfo, Ports, TraceEvent,
    OFPC_INVALID_TTL_TO_CONTROLLER,
};
use pipeline::TablesConfig;
use pipeline::{FlowEntry, GroupsConfig, MeterVerdict, MetersConfig, SwitchState, Time};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `fulmar trace`.
#[derive(Args)]
pub struct TraceArgs {
    /// Flow file (one flow per line, ovs-ofctl syntax).
    #[arg(long)]
    pub flows: PathBuf,
    /// Group file.
    #[arg(long)]
    pub groups: Option<PathBuf>,
    /// Meter file.
    #[arg(long)]
    pub meters: Option<PathBuf>,
    /// Ingress port of the packets (a number, or LOCAL / CONTROLLER).
    #[arg(long, value_parser = parse_port)]
    pub in_port: u32,
    /// A packet as hex (spaces and colons ignored); may be repeated.
    #[arg(long, required_unless_present = "pcap", conflicts_with = "pcap")]
    pub packet: Vec<String>,
    /// A classic libpcap file of Ethernet frames.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// One JSON object per emitted packet.
    #[arg(long)]
    pub json: bool,
    /// Number of ports (1..=N exist and are up).
    #[arg(long, default_value_t = 16)]
    pub ports: u32,
    /// A port whose link is down (may be repeated).
    #[arg(long)]
    pub port_down: Vec<u32>,
    /// Send packets whose TTL expires to the controller (OFPC_INVALID_TTL_TO_CONTROLLER).
    #[arg(long)]
    pub invalid_ttl_to_controller: bool,
    /// miss_send_len of the switch config.
    #[arg(long, default_value_t = 128)]
    pub miss_send_len: u16,
    /// Packet buffers (0: packet-ins carry whole packets, unbuffered).
    #[arg(long, default_value_t = 256)]
    pub buffers: usize,
}

fn parse_port(s: &str) -> Result<u32, String> {
    match s.to_ascii_uppercase().as_str() {
        "LOCAL" => Ok(port_no::LOCAL),
        "CONTROLLER" => Ok(port_no::CONTROLLER),
        _ => parse_number(s).ok_or_else(|| format!("not a port: {s:?}")),
    }
}

fn parse_number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A problem in an input file, reported as `FILE:LINE: MESSAGE`.
#[derive(Debug)]
struct LineError(String);

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LineError {}

/// Runs `fulmar trace`.
pub fn run(args: &TraceArgs) -> anyhow::Result<ExitCode> {
    match trace(args, &mut std::io::stdout().lock()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => match e.downcast_ref::<LineError>() {
            Some(le) => {
                eprintln!("{le}");
                Ok(ExitCode::from(2))
            }
            None => Err(e),
        },
    }
}

/// The non-comment lines of a file with their 1-based numbers (the same
/// lines `flowtext::parse_*_file` reads).
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let t = l.trim();
        (!t.is_empty() && !t.starts_with('#')).then_some((i + 1, l))
    })
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn line_error(path: &Path, line: usize, msg: impl std::fmt::Display) -> anyhow::Error {
    LineError(format!("{}:{line}: {msg}", path.display())).into()
}

/// Builds the switch state from the files (meters, then groups, then
/// flows, so references resolve).
fn load(args: &TraceArgs, now: Time) -> anyhow::Result<SwitchState> {
    let mut state = SwitchState::new(
        TablesConfig::default(),
        GroupsConfig::default(),
        MetersConfig::default(),
    );
    if let Some(path) = &args.meters {
        let text = read(path)?;
        for (n, l) in lines(&text) {
            let m = flowtext::parse_meter(l).map_err(|e| line_error(path, n, e))?;
            state
                .meter_mod(&m, now)
                .map_err(|e| line_error(path, n, format!("meter refused: {e}")))?;
        }
    }
    if let Some(path) = &args.groups {
        let text = read(path)?;
        for (n, l) in lines(&text) {
            let g = flowtext::parse_group(l).map_err(|e| line_error(path, n, e))?;
            state
                .group_mod(&g, now)
                .map_err(|e| line_error(path, n, format!("group refused: {e}")))?;
        }
    }
    let path = &args.flows;
    let text = read(path)?;
    for (n, l) in lines(&text) {
        let f = flowtext::parse_flow(l).map_err(|e| line_error(path, n, e))?;
        state
            .flow_mod(&f, now)
            .map_err(|e| line_error(path, n, format!("flow refused: {e}")))?;
    }
    Ok(state)
}

/// Parses hex, ignoring white space, colons and a leading `0x`.
pub fn parse_hex(s: &str) -> anyhow::Result<Vec<u8>> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':')
        .collect();
    let nibble = |c: u8| -> anyhow::Result<u8> {
        Ok(match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => bail!("not a hex digit: {:?}", char::from(c)),
        })
    };
    digits
        .chunks(2)
        .map(|p| match p {
            [h, l] => Ok(nibble(*h)? << 4 | nibble(*l)?),
            _ => bail!("odd number of hex digits in packet"),
        })
        .collect()
}

/// Reads a classic libpcap file: `(time, frame)` for each record, with the
/// dataplane's pcap reader (microsecond and nanosecond files in either byte
/// order; the link type must be Ethernet).
pub fn read_pcap(mut data: &[u8]) -> anyhow::Result<Vec<(Time, Vec<u8>)>> {
    let header = dataplane::pcap::read_file_header(&mut data)?;
    let mut out = Vec::new();
    let mut frame = Vec::new();
    while let Some(record) = dataplane::pcap::read_record(&mut data, &header, &mut frame)? {
        out.push((Time(record.timestamp_ns), std::mem::take(&mut frame)));
    }
    Ok(out)
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

fn port_name(p: u32) -> String {
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
    flowtext::format_flow(&FlowMod {
        table_id: e.table_id,
        priority: e.priority,
        cookie: e.cookie,
        idle_timeout: e.idle_timeout,
        hard_timeout: e.hard_timeout,
        flags: e.flags,
        match_: e.match_.clone(),
        instructions: e.instructions.clone(),
        ..FlowMod::default()
    })
}

fn print_json(out: &BurstOutput, w: &mut impl Write) -> anyhow::Result<()> {
    for t in &out.tx {
        let port = if t.port <= port_no::MAX {
            serde_json::json!(t.port)
        } else {
            serde_json::json!(port_name(t.port))
        };
        let line = serde_json::json!({
            "port": port,
            "queue_id": t.queue_id,
            "packet": hex(t.packet.as_slice()),
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

fn print_trace(
    dp: &Datapath,
    steps: &[TraceEvent],
    out: &BurstOutput,
    w: &mut impl Write,
) -> anyhow::Result<()> {
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
    for t in &out.tx {
        writeln!(
            w,
            "  port {}: {}",
            port_name(t.port),
            hex(t.packet.as_slice())
        )?;
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

/// Loads the files, sends the packets, writes the result to `w`.
pub fn trace(args: &TraceArgs, w: &mut impl Write) -> anyhow::Result<()> {
    let start = Time::from_secs(1);
    let state = load(args, start)?;
    let mut ports = Ports::with_range(args.ports);
    for p in &args.port_down {
        ports.set(
            *p,
            PortInfo {
                config: 0,
                state: ofp::port::port_state::LINK_DOWN,
            },
        );
    }
    let config = DatapathConfig {
        n_buffers: args.buffers,
        miss_send_len: args.miss_send_len,
        flags: if args.invalid_ttl_to_controller {
            OFPC_INVALID_TTL_TO_CONTROLLER
        } else {
            0
        },
        ..DatapathConfig::default()
    };
    let mut dp = Datapath::new(state, ports, config);
    dp.set_tracing(!args.json);
    let packets: Vec<(Time, Vec<u8>)> = match &args.pcap {
        Some(path) => {
            let data =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            read_pcap(&data).with_context(|| path.display().to_string())?
        }
        None => args
            .packet
            .iter()
            .map(|h| parse_hex(h).map(|b| (start, b)))
            .collect::<anyhow::Result<_>>()?,
    };
    let mut burst = Vec::with_capacity(1);
    let mut out = BurstOutput::default();
    for (i, (t, bytes)) in packets.iter().enumerate() {
        out.clear();
        burst.push(PacketBuf::from_slice(bytes));
        dp.process_burst_into(args.in_port, &mut burst, *t, &mut out);
        if args.json {
            print_json(&out, w)?;
        } else {
            if i > 0 {
                writeln!(w)?;
            }
            writeln!(
                w,
                "packet {}: in_port {}, {} bytes",
                i + 1,
                port_name(args.in_port),
                bytes.len()
            )?;
            let steps = dp.take_trace();
            print_trace(&dp, &steps, &out, w)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_parsing() {
        assert_eq!(parse_hex("0x0a:0B 0c\n").unwrap(), vec![10, 11, 12]);
        assert!(parse_hex("abc").is_err());
        assert!(parse_hex("zz").is_err());
    }

    #[test]
    fn pcap_reading_both_byte_orders() {
        let mut le = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        le.extend([0; 8]);
        le.extend(65535u32.to_le_bytes());
        le.extend(1u32.to_le_bytes());
        le.extend(3u32.to_le_bytes()); // 3 s
        le.extend(5u32.to_le_bytes()); // 5 us
        le.extend(2u32.to_le_bytes());
        le.extend(2u32.to_le_bytes());
        le.extend([0xaa, 0xbb]);
        let v = read_pcap(&le).unwrap();
        assert_eq!(v, vec![(Time(3_000_005_000), vec![0xaa, 0xbb])]);
        let mut cut = le.clone();
        cut.pop();
        assert!(read_pcap(&cut).is_err());
        let mut be = vec![0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4];
        be.extend([0; 8]);
        be.extend(65535u32.to_be_bytes());
        be.extend(1u32.to_be_bytes());
        be.extend(1u32.to_be_bytes());
        be.extend(7u32.to_be_bytes()); // 7 ns
        be.extend(1u32.to_be_bytes());
        be.extend(1u32.to_be_bytes());
        be.push(0xcc);
        assert_eq!(
            read_pcap(&be).unwrap(),
            vec![(Time(1_000_000_007), vec![0xcc])]
        );
        let mut other = le.clone();
        other[20] = 101;
        assert!(read_pcap(&other).is_err());
        assert!(read_pcap(&[1, 2, 3]).is_err());
    }
}
