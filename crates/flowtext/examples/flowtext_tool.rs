//! The flow, group and meter text of `flowtext` as OpenFlow bytes and back,
//! one line in, one line out, for tests that compare fulmar with
//! `ovs-ofctl` (tests/flowtext_ovs).
//!
//! ```text
//! flowtext_tool parse-flow   < lines of flow text   # "ok HEX" | "err MESSAGE"
//! flowtext_tool parse-group  < lines of group text  # the GROUP_MOD
//! flowtext_tool parse-meter  < lines of meter text  # the METER_MOD
//! flowtext_tool print        < lines of HEX          # "ok TEXT" | "err MESSAGE"
//! ```
//!
//! `parse-*` encode what `flowtext` parses (an add unless the text starts
//! with a command word) as one OpenFlow 1.3 message with xid 1, in hex.
//! `print` decodes one message per line and prints it as `ovs-ofctl`
//! does: a FLOW_MOD or a flow-statistics reply as `dump-flows` lines, a
//! GROUP_MOD or group-description reply as `dump-groups` lines, a
//! METER_MOD or meter-configuration reply as `dump-meters` text (entries
//! joined by " | ", line breaks as spaces).

use ofp::multipart::MultipartReplyBody;
use ofp::Message;
use std::io::{BufRead, Write};
use std::process::ExitCode;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !s.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("bad hex at {i}"))
        })
        .collect()
}

fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}

fn parse(mode: &str, line: &str) -> Result<String, String> {
    let msg = match mode {
        "parse-flow" => Message::FlowMod(flowtext::parse_flow(line).map_err(|e| e.to_string())?),
        "parse-group" => Message::GroupMod(flowtext::parse_group(line).map_err(|e| e.to_string())?),
        "parse-meter" => Message::MeterMod(flowtext::parse_meter(line).map_err(|e| e.to_string())?),
        _ => return Err(format!("unknown mode {mode:?}")),
    };
    Ok(hex(&msg.encode(1)))
}

fn print(line: &str) -> Result<String, String> {
    let bytes = unhex(line)?;
    let (_, msg) = Message::decode(&bytes).map_err(|e| format!("{e:?}"))?;
    Ok(match msg {
        Message::FlowMod(fm) => flowtext::ovs::format_flow(&fm),
        Message::GroupMod(gm) => flowtext::ovs::format_group(&gm),
        Message::MeterMod(mm) => flowtext::ovs::format_meter(&mm),
        Message::MultipartReply(r) => match r.body {
            MultipartReplyBody::Flow { stats } => stats
                .iter()
                .map(flowtext::ovs::format_flow_stats)
                .collect::<Vec<_>>()
                .join(" | "),
            MultipartReplyBody::GroupDesc { groups } => groups
                .iter()
                .map(flowtext::ovs::format_group_desc)
                .collect::<Vec<_>>()
                .join(" | "),
            MultipartReplyBody::MeterConfig { configs } => configs
                .iter()
                .map(flowtext::ovs::format_meter_config)
                .collect::<Vec<_>>()
                .join(" | "),
            other => return Err(format!("no printer for {other:?}")),
        },
        other => return Err(format!("no printer for {}", other.type_name())),
    })
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if !matches!(
        mode.as_str(),
        "parse-flow" | "parse-group" | "parse-meter" | "print"
    ) {
        eprintln!("usage: flowtext_tool parse-flow|parse-group|parse-meter|print < LINES");
        return ExitCode::from(2);
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            eprintln!("flowtext_tool: input is not UTF-8 text");
            return ExitCode::from(2);
        };
        let r = if mode == "print" {
            print(&line)
        } else {
            parse(&mode, &line)
        };
        let text = match r {
            Ok(s) => format!("ok {}", one_line(&s)),
            Err(e) => format!("err {}", one_line(&e)),
        };
        if writeln!(out, "{text}").is_err() {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
