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

use anyhow::Context;
use clap::Args;
use mgmt::trace::parse_hex;
use ofp::consts::port_no;
use pipeline::datapath::{
    Datapath, DatapathConfig, PortInfo, Ports, OFPC_INVALID_TTL_TO_CONTROLLER,
};
use pipeline::TablesConfig;
use pipeline::{GroupsConfig, MetersConfig, SwitchState, Time};
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
    /// A capture file of Ethernet frames (classic pcap or pcapng).
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
        apply_file(path, "meter", flowtext::parse_meter, |m| {
            state.meter_mod(m, now).map(drop)
        })?;
    }
    if let Some(path) = &args.groups {
        apply_file(path, "group", flowtext::parse_group, |g| {
            state.group_mod(g, now).map(drop)
        })?;
    }
    apply_file(&args.flows, "flow", flowtext::parse_flow, |f| {
        state.flow_mod(f, now).map(drop)
    })?;
    Ok(state)
}

/// Parses each line of a flows, groups or meters file and applies it,
/// stopping at the first line that does not parse or that the tables
/// refuse, named by file and line.
fn apply_file<T, E: std::fmt::Display, R: std::fmt::Display>(
    path: &Path,
    what: &str,
    parse: impl Fn(&str) -> Result<T, E>,
    mut apply: impl FnMut(&T) -> Result<(), R>,
) -> anyhow::Result<()> {
    let text = read(path)?;
    for (n, l) in lines(&text) {
        let item = parse(l).map_err(|e| line_error(path, n, e))?;
        apply(&item).map_err(|e| line_error(path, n, format!("{what} refused: {e}")))?;
    }
    Ok(())
}

/// Reads a capture file, classic pcap or pcapng: `(time, frame)` for each
/// packet, with the dataplane's reader (the link type must be Ethernet).
pub fn read_pcap(data: &[u8]) -> anyhow::Result<Vec<(Time, Vec<u8>)>> {
    let mut reader = dataplane::pcap::CaptureReader::new(data)?;
    let mut out = Vec::new();
    let mut frame = Vec::new();
    while let Some(record) = reader.next_record(&mut frame)? {
        out.push((Time(record.timestamp_ns), std::mem::take(&mut frame)));
    }
    Ok(out)
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
    let packets: Vec<(Time, Vec<u8>)> = match &args.pcap {
        Some(path) => {
            let data =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            read_pcap(&data).with_context(|| path.display().to_string())?
        }
        None => args
            .packet
            .iter()
            .map(|h| parse_hex(h).map(|b| (start, b)).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?,
    };
    mgmt::trace::run(&mut dp, args.in_port, &packets, args.json, w)?;
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
