//! Saved tables: what lets a restart forward again without a controller
//! (the gap, `bench/restart_gap.py`, grows with the tables, most of it
//! this file being read back; docs/results.md, "Restarts and faults").
//!
//! At a graceful stop the daemon writes each bridge's flow entries (the
//! static ones and those controllers installed), groups and meters to
//! `DIR/BRIDGE.tables`, in the `ovs-ofctl` text syntax, one message a
//! line:
//!
//! ```text
//! # fulmar: the tables of bridge br0 at a graceful stop ...
//! static-digest 5c1e0c3a9d2b7f10
//! meter meter=1,kbps,bands=type=drop,rate=1000
//! group group_id=1,type=all,bucket=actions=output:1
//! flow table=0,priority=10,in_port=1,actions=output:2
//! flow-msg 040e0068...
//! ```
//!
//! An entry the switch holds but whose text does not read back as the
//! same message (the text syntax is stricter than the wire in places) is
//! written as its OpenFlow message in hex (`flow-msg`, `group-msg`,
//! `meter-msg`), so nothing is lost or changed by the trip.
//!
//! At the next start, a bridge of the same name whose static flows,
//! groups and meters (and table count) are what they were at the save
//! (the digest) gets these instead of its static ones, before its ports
//! forward: traffic resumes without waiting for a controller, and a
//! controller that connects finds the tables as it left them (and may
//! replace them). A bridge whose static configuration changed meanwhile
//! starts from the new configuration, and the saved file is set aside
//! with a warning: what the operator wrote wins over what was running.
//!
//! When the runtime starts, only each file's digest is read; the bridge
//! that takes a file reads it as it installs it (`tables::restore_state`,
//! or at `fulmar run` while the configuration is checked,
//! `tables::Prebuild`). The files are removed once the bridges started (a
//! crash later cannot bring back tables older than what ran since). A
//! bridge that is not in the configuration at start (an OVSDB-managed
//! switch adds its bridges a moment later) finds its saved tables for
//! [`PENDING_FOR`] after the start.
//!
//! What is not restored: counters and entry ages (they start again from
//! zero, and timeouts count from the restart), and the learning switch's
//! table of standalone mode.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
use ofp::{FlowMod, GroupMod, MeterMod};

/// How long after the start saved tables wait for a bridge that was not
/// in the configuration at start.
pub const PENDING_FOR: Duration = Duration::from_secs(60);

/// A bridge's saved tables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SavedTables {
    /// Meters, installed first.
    pub meters: Vec<MeterMod>,
    /// Groups (a group may name another: in saved order).
    pub groups: Vec<GroupMod>,
    /// Flow entries, all tables.
    pub flows: Vec<FlowMod>,
}

/// A digest of what a bridge's tables start from: its table count, the
/// text of its static meters, groups and inline flows, and its flows
/// file's SHA-256 (FNV-1a, 64 bits: not a security measure, a change
/// detector).
pub fn static_digest(br: &datastore::Bridge) -> u64 {
    static_digest_of(
        br.n_tables,
        &br.meters,
        &br.groups,
        &br.flows,
        br.flows_file.as_ref(),
    )
}

/// [`static_digest`] of a bridge whose tables start from `head` and
/// `file`.
pub(crate) fn head_digest(
    head: &datastore::TablesHead,
    file: Option<&datastore::FlowsFile>,
) -> u64 {
    static_digest_of(head.n_tables, &head.meters, &head.groups, &head.flows, file)
}

fn static_digest_of(
    n_tables: u8,
    meters: &[datastore::StaticMeter],
    groups: &[datastore::StaticGroup],
    flows: &[datastore::StaticFlow],
    flows_file: Option<&datastore::FlowsFile>,
) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // A separator no text contains, so ("ab","c") differs from ("a","bc").
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(&n_tables.to_le_bytes());
    for m in meters {
        eat(m.text.as_bytes());
    }
    eat(b"groups");
    for g in groups {
        eat(g.text.as_bytes());
    }
    eat(b"flows");
    for f in flows {
        eat(f.text.as_bytes());
    }
    if let Some(file) = flows_file {
        eat(b"flows_file");
        eat(&file.sha256);
    }
    h
}

/// The saved file of `bridge` in `dir`.
pub fn file_of(dir: &Path, bridge: &str) -> PathBuf {
    dir.join(format!("{bridge}.tables"))
}

/// The text of a bridge's saved tables.
pub fn render(tables: &SavedTables, digest: u64, bridge: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# fulmar: the tables of bridge {bridge} at a graceful stop, restored once at the next\n\
         # start if the bridge's static flows, groups and meters are as they were (the digest)."
    );
    let _ = writeln!(s, "static-digest {digest:016x}");
    for m in &tables.meters {
        line(
            &mut s,
            "meter",
            flowtext::format_meter(m),
            flowtext::parse_meter,
            m,
            || ofp::Message::MeterMod(m.clone()),
        );
    }
    for g in &tables.groups {
        line(
            &mut s,
            "group",
            flowtext::format_group(g),
            flowtext::parse_group,
            g,
            || ofp::Message::GroupMod(g.clone()),
        );
    }
    for f in &tables.flows {
        line(
            &mut s,
            "flow",
            flowtext::format_flow(f),
            flowtext::parse_flow,
            f,
            || ofp::Message::FlowMod(f.clone()),
        );
    }
    s
}

/// Writes `KIND TEXT` when the text reads back as `value`, else
/// `KIND-msg HEX` of the message itself.
fn line<T: PartialEq, E>(
    s: &mut String,
    kind: &str,
    text: String,
    parse: impl Fn(&str) -> Result<T, E>,
    value: &T,
    message: impl Fn() -> ofp::Message,
) {
    if parse(&text).is_ok_and(|v| v == *value) {
        let _ = writeln!(s, "{kind} {text}");
    } else {
        let _ = write!(s, "{kind}-msg ");
        for b in message().encode(0) {
            let _ = write!(s, "{b:02x}");
        }
        s.push('\n');
    }
}

/// The message written by [`line`] as `KIND-msg HEX`.
fn message_of(hex: &str) -> Result<ofp::Message, String> {
    let hex = hex.trim();
    if !hex.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("?"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|e| e.to_string())?;
    ofp::Message::decode(&bytes)
        .map(|(_, m)| m)
        .map_err(|e| format!("{e:?}"))
}

/// One line of a saved file (neither blank nor a comment).
#[derive(Debug)]
pub(crate) enum SavedLine {
    Digest(u64),
    Meter(MeterMod),
    Group(GroupMod),
    Flow(FlowMod),
}

/// Reads one line of what [`render`] wrote; the error's message is the
/// whole of what is wrong (a text parser's with its column).
pub(crate) fn parse_line(line: &str) -> Result<SavedLine, flowtext::ParseError> {
    let line = line.trim();
    let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
    let wrong = |message: String| flowtext::ParseError {
        message,
        token: String::new(),
        position: 0,
    };
    let text = |e: flowtext::ParseError| wrong(e.to_string());
    Ok(match kind {
        "static-digest" => SavedLine::Digest(
            u64::from_str_radix(rest.trim(), 16).map_err(|e| wrong(e.to_string()))?,
        ),
        "meter" => SavedLine::Meter(flowtext::parse_meter(rest).map_err(text)?),
        "group" => SavedLine::Group(flowtext::parse_group(rest).map_err(text)?),
        "flow" => SavedLine::Flow(flowtext::parse_flow(rest).map_err(text)?),
        "meter-msg" | "group-msg" | "flow-msg" => match message_of(rest).map_err(wrong)? {
            ofp::Message::MeterMod(m) if kind == "meter-msg" => SavedLine::Meter(m),
            ofp::Message::GroupMod(g) if kind == "group-msg" => SavedLine::Group(g),
            ofp::Message::FlowMod(f) if kind == "flow-msg" => SavedLine::Flow(f),
            _ => return Err(wrong(format!("{kind} holds another message"))),
        },
        other => return Err(wrong(format!("unknown line kind {other:?}"))),
    })
}

/// Reads what [`render`] wrote: the digest and the tables, or the first
/// error with its line: the tests' round trip. (A start reads a saved
/// file block by block instead, installing as it reads:
/// `tables::restore_state`.)
#[cfg(test)]
fn parse(text: &str) -> Result<(u64, SavedTables), String> {
    let mut digest = None;
    let mut t = SavedTables::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line).map_err(|e| format!("line {}: {}", n + 1, e.message))? {
            SavedLine::Digest(d) => digest = Some(d),
            SavedLine::Meter(m) => t.meters.push(m),
            SavedLine::Group(g) => t.groups.push(g),
            SavedLine::Flow(f) => t.flows.push(f),
        }
    }
    let digest = digest.ok_or("no static-digest line")?;
    Ok((digest, t))
}

/// The digest a saved file was written for: its first line that is
/// neither blank nor a comment, read without reading the rest.
pub(crate) fn digest_of(path: &Path) -> Result<u64, String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    for line in io::BufReader::new(file).lines() {
        let line = line.map_err(|e| e.to_string())?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        return match parse_line(line) {
            Ok(SavedLine::Digest(d)) => Ok(d),
            Ok(_) => Err("no static-digest line".into()),
            Err(e) => Err(format!("static-digest: {}", e.message)),
        };
    }
    Err("no static-digest line".into())
}

/// The FLOW stats request for every entry of every table.
pub(crate) fn every_flow() -> MultipartRequestBody {
    MultipartRequestBody::Flow(ofp::stats::FlowStatsRequest {
        table_id: ofp::consts::table_no::ALL,
        out_port: ofp::consts::port_no::ANY,
        out_group: ofp::consts::group_no::ANY,
        cookie: 0,
        cookie_mask: 0,
        match_: ofp::Match::default(),
    })
}

/// A bridge's tables now, read through its OpenFlow side (what a
/// controller would read: every table, every group, every meter).
pub(crate) fn read(sw: &impl agent::Switch) -> Result<SavedTables, String> {
    let ask = |req: &MultipartRequestBody| sw.multipart(req).map_err(|e| format!("{e:?}"));
    let flows = match ask(&every_flow())? {
        MultipartReplyBody::Flow { stats } => {
            stats.into_iter().map(|f| f.into_flow_mod()).collect()
        }
        _ => return Err("unexpected reply to a flow request".into()),
    };
    let groups = match ask(&MultipartRequestBody::GroupDesc)? {
        MultipartReplyBody::GroupDesc { groups } => {
            groups.into_iter().map(|g| g.into_group_mod()).collect()
        }
        _ => return Err("unexpected reply to a group request".into()),
    };
    let meters = match ask(&MultipartRequestBody::MeterConfig {
        meter_id: ofp::consts::meter_no::ALL,
    })? {
        MultipartReplyBody::MeterConfig { configs } => {
            configs.into_iter().map(|m| m.into_meter_mod()).collect()
        }
        _ => return Err("unexpected reply to a meter request".into()),
    };
    Ok(SavedTables {
        meters,
        groups,
        flows,
    })
}

/// Saved tables found at start, waiting for their bridges (only their
/// digests are read then: a bridge that takes its tables reads the file
/// as it installs them).
#[derive(Default)]
pub(crate) struct Pending {
    /// Bridge → (digest, file).
    by_bridge: HashMap<String, (u64, PathBuf)>,
    since: Option<Instant>,
}

impl Pending {
    /// Finds every `*.tables` file of `dir` and reads its digest (a
    /// missing directory is none; a file without one is set aside with a
    /// warning).
    pub(crate) fn load(dir: &Path) -> Pending {
        let mut p = Pending {
            since: Some(Instant::now()),
            ..Pending::default()
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return p,
            Err(e) => {
                tracing::warn!("saved tables in {}: {e}", dir.display());
                return p;
            }
        };
        for e in entries.flatten() {
            let path = e.path();
            let Some(bridge) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".tables"))
                .map(str::to_string)
            else {
                continue;
            };
            match digest_of(&path) {
                Ok(digest) => {
                    p.by_bridge.insert(bridge, (digest, path));
                }
                Err(e) => set_aside(&path, &format!("cannot be read: {e}")),
            }
        }
        p
    }

    /// The saved file of `br` if it was saved from the same static
    /// configuration (and still waits); taken, so at most once.
    pub(crate) fn take(&mut self, br: &datastore::Bridge) -> Option<PathBuf> {
        if self.since.is_some_and(|s| s.elapsed() > PENDING_FOR) {
            self.expire();
            return None;
        }
        let (digest, path) = self.by_bridge.remove(&br.name)?;
        if digest != static_digest(br) {
            set_aside(
                &path,
                "the bridge's static flows, groups or meters changed since they were saved; \
                 it starts from its configuration",
            );
            return None;
        }
        Some(path)
    }

    /// Forgets `bridge`'s saved file (it was read while the
    /// configuration was checked: `tables::Prebuild`).
    pub(crate) fn forget(&mut self, bridge: &str) {
        self.by_bridge.remove(bridge);
    }

    /// True once the saved tables have waited [`PENDING_FOR`] (and some
    /// are left).
    pub(crate) fn is_expired(&self) -> bool {
        !self.by_bridge.is_empty() && self.since.is_some_and(|s| s.elapsed() > PENDING_FOR)
    }

    /// Forgets (and sets aside) what no bridge took in time.
    pub(crate) fn expire(&mut self) {
        for (bridge, (_, path)) in self.by_bridge.drain() {
            set_aside(
                &path,
                &format!("no bridge {bridge} came within {PENDING_FOR:?} of the start"),
            );
        }
    }
}

/// Renames a saved file that is not used to `FILE.unused`, saying why.
pub(crate) fn set_aside(path: &Path, why: &str) {
    let mut to = path.as_os_str().to_owned();
    to.push(".unused");
    let to = PathBuf::from(to);
    match std::fs::rename(path, &to) {
        Ok(()) => tracing::warn!(
            "saved tables {} not restored: {why} (kept as {})",
            path.display(),
            to.display()
        ),
        Err(e) => tracing::warn!("saved tables {} not restored: {why} ({e})", path.display()),
    }
}

/// How many entries of each kind a restore installed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Restored {
    pub(crate) meters: usize,
    pub(crate) groups: usize,
    pub(crate) flows: usize,
}

/// Removes a saved file once its tables are in force.
pub(crate) fn consumed(path: &Path, bridge: &str, n: &Restored) {
    tracing::info!(
        bridge,
        "restored {} flows, {} groups and {} meters saved at the last stop ({})",
        n.flows,
        n.groups,
        n.meters,
        path.display()
    );
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!("cannot remove {}: {e}", path.display());
    }
}

/// Writes `tables` of bridge `br` to `dir` atomically.
pub fn write(dir: &Path, br: &datastore::Bridge, tables: &SavedTables) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = file_of(dir, &br.name);
    datastore::write_atomic(&path, &render(tables, static_digest(br), &br.name))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> SavedTables {
        SavedTables {
            meters: vec![flowtext::parse_meter("meter=1,kbps,bands=type=drop,rate=1000").unwrap()],
            groups: vec![
                flowtext::parse_group("group_id=1,type=all,bucket=actions=output:1").unwrap(),
            ],
            flows: vec![
                flowtext::parse_flow(
                    "table=0,priority=10,cookie=0x5,idle_timeout=30,send_flow_rem,in_port=1,actions=meter:1,group:1",
                )
                .unwrap(),
                flowtext::parse_flow("table=3,priority=0,actions=drop").unwrap(),
            ],
        }
    }

    #[test]
    fn render_and_parse_round_trip() {
        let t = tables();
        let text = render(&t, 0x0123_4567_89ab_cdef, "br0");
        assert_eq!(parse(&text), Ok((0x0123_4567_89ab_cdef, t)));
    }

    /// A flow whose text would not read back the same (here: a set_field
    /// of vlan_vid without the present bit, which the wire allows) is
    /// kept as its message.
    #[test]
    fn entries_the_text_cannot_carry_go_as_messages() {
        let mut f = flowtext::parse_flow("table=0,priority=5,in_port=1,actions=output:2").unwrap();
        f.instructions = vec![ofp::Instruction::ApplyActions {
            actions: vec![ofp::Action::SetField {
                field: ofp::Oxm::Basic {
                    field: ofp::OxmField::VlanVid,
                    value: ofp::OxmValue::U16(0x0005),
                    mask: None,
                },
            }],
        }];
        let t = SavedTables {
            flows: vec![f],
            ..tables()
        };
        let text = render(&t, 7, "br0");
        assert_eq!(parse(&text), Ok((7, t)));
        let e = parse("static-digest 1\nflow-msg 0400000800000001\n").unwrap_err();
        assert!(e.contains("another message"), "{e}");
    }

    #[test]
    fn bad_files_name_the_line() {
        assert_eq!(
            parse("flow actions=drop\n"),
            Err("no static-digest line".into())
        );
        let e = parse("static-digest 1\nflow in_port=x,actions=drop\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = parse("static-digest 1\nbogus x\n").unwrap_err();
        assert!(e.contains("unknown line kind"), "{e}");
    }

    #[test]
    fn the_digest_follows_static_content() {
        let config = |flows: &str| {
            let text = format!(
                "[[bridges]]\nname = \"br0\"\nflows = [{flows}]\n[[bridges.ports]]\nport = 1\ninterface = \"a\"\nbackend = \"memory\"\n"
            );
            datastore::Config::from_str_for(&text, "t.toml", datastore::Host { cpus: 2 }).unwrap()
        };
        let a = config("\"priority=1,actions=drop\"");
        let b = config("\"priority=2,actions=drop\"");
        assert_eq!(
            static_digest(&a.bridges[0]),
            static_digest(&a.bridges[0].clone())
        );
        assert_ne!(static_digest(&a.bridges[0]), static_digest(&b.bridges[0]));
    }
}
