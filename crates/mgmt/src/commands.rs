//! The commands of the control socket (`fulmar ctl COMMAND …`,
//! `ovs-appctl -t SOCKET COMMAND …`), over the running switch
//! ([`runtime::daemon::Daemon`]).
//!
//! - Configuration commands (`add-br`, `add-port`, `set-controller`, …)
//!   are parsed by the datastore into one transaction (several commands
//!   joined by `--`, as with `ovs-vsctl`) and committed whole;
//!   `--dry-run` validates and says what would change.
//! - Flow commands go through the same path as a controller's
//!   FLOW_MOD/GROUP_MOD (the bridge's OpenFlow switch, then a barrier),
//!   in `ovs-ofctl` syntax.
//! - Reading commands (`show`, `stats`, `dump-*`, `trace`, `memory`)
//!   answer in text, or JSON with `--json`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
use ofp::stats::FlowStatsRequest;
use ofp::FlowModCommand;
use runtime::daemon::{Daemon, Outcome, TxnError};

/// Sets the log filter; returns the filter now in force.
pub type SetLogFilter = Box<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// Hooks into the process that owns the switch.
pub struct Hooks {
    /// Sets the log filter (`info`, `debug`, `runtime=debug,info`);
    /// returns the filter now in force.
    pub log_level: SetLogFilter,
    /// The log filter now in force.
    pub log_filter: Box<dyn Fn() -> String + Send + Sync>,
    /// Asks the process to stop (as SIGTERM does).
    pub exit: Box<dyn Fn() + Send + Sync>,
    /// The version line (`fulmar 0.1.0 (commit abc123)`).
    pub version: String,
}

/// The control socket's command set.
pub struct Ctl {
    daemon: Arc<Daemon>,
    hooks: Hooks,
}

fn flag(params: &[String], name: &str) -> (bool, Vec<String>) {
    let has = params.iter().any(|p| p == name);
    (has, params.iter().filter(|p| *p != name).cloned().collect())
}

fn need<'a>(params: &'a [String], i: usize, what: &str) -> Result<&'a str, String> {
    params
        .get(i)
        .map(String::as_str)
        .ok_or_else(|| format!("missing {what}"))
}

/// Takes `--name VALUE` out of `params`.
fn option(params: &[String], name: &str) -> Result<(Option<String>, Vec<String>), String> {
    let mut rest = Vec::new();
    let mut value = None;
    let mut it = params.iter();
    while let Some(p) = it.next() {
        if p == name {
            value = Some(it.next().cloned().ok_or(format!("{name} needs a value"))?);
        } else {
            rest.push(p.clone());
        }
    }
    Ok((value, rest))
}

fn number(v: Option<String>, name: &str, default: u64) -> Result<u64, String> {
    v.map_or(Ok(default), |v| {
        v.parse()
            .map_err(|_| format!("{name} {v:?}: expected a number"))
    })
}

fn json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string_pretty(v).map_err(|e| e.to_string())
}

fn outcome_text(o: &Outcome) -> String {
    let mut s = String::new();
    if o.changes.is_empty() {
        s.push_str("no change\n");
    }
    for c in &o.changes {
        let _ = writeln!(s, "{}{c}", if o.dry_run { "would " } else { "" });
    }
    if !o.dry_run {
        let _ = writeln!(s, "datastore version {}", o.version);
    }
    s
}

fn txn_error(e: TxnError) -> String {
    e.to_string()
}

// Each command's method has the registry's shape, `fn(&Ctl, name,
// params)`, whether or not it needs the name.
impl Ctl {
    /// Commands over `daemon`.
    pub fn new(daemon: Arc<Daemon>, hooks: Hooks) -> Ctl {
        Ctl { daemon, hooks }
    }

    /// A multipart request to a bridge, answered as a controller's would be.
    fn multipart(
        &self,
        bridge: &str,
        req: &MultipartRequestBody,
    ) -> Result<MultipartReplyBody, String> {
        self.daemon
            .multipart(bridge, req)
            .map_err(|e| e.to_string())
    }

    pub(crate) fn version(&self, _: &str, _: &[String]) -> Result<String, String> {
        Ok(format!("{}\n", self.hooks.version))
    }

    pub(crate) fn show(&self, _: &str, params: &[String]) -> Result<String, String> {
        let (as_json, _) = flag(params, "--json");
        let show = self.daemon.show();
        if as_json {
            json(&show)
        } else {
            Ok(show.text())
        }
    }

    pub(crate) fn check(&self, _: &str, params: &[String]) -> Result<String, String> {
        let path = need(params, 0, "file")?;
        let cfg = datastore::Config::load(path).map_err(|e| e.to_string())?;
        let mut s = format!("{path}: valid\n");
        for w in &cfg.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        Ok(s)
    }

    pub(crate) fn dump_flows(&self, _: &str, params: &[String]) -> Result<String, String> {
        let bridge = need(params, 0, "bridge")?;
        let filter = params.get(1).map(String::as_str).unwrap_or("");
        let fm = flowtext::parse_flow_command(filter, FlowModCommand::Delete)
            .map_err(|e| format!("{filter:?}: {e}"))?;
        let req = MultipartRequestBody::Flow(FlowStatsRequest {
            table_id: fm.table_id,
            out_port: fm.out_port,
            out_group: fm.out_group,
            cookie: fm.cookie,
            cookie_mask: fm.cookie_mask,
            match_: fm.match_,
        });
        let MultipartReplyBody::Flow { stats } = self.multipart(bridge, &req)? else {
            return Err("unexpected reply".into());
        };
        // As `ovs-ofctl dump-flows` prints them.
        let mut s = String::new();
        for f in stats {
            let _ = writeln!(s, " {}", flowtext::ovs::format_flow_stats(&f));
        }
        Ok(s)
    }

    /// `add-flow`, `mod-flows`, `del-flows`: one flow-mod through the
    /// bridge's OpenFlow path, then a barrier.
    pub(crate) fn flow_command(&self, name: &str, params: &[String]) -> Result<String, String> {
        let (strict, params) = flag(params, "--strict");
        let bridge = need(&params, 0, "bridge")?;
        let text = params.get(1..).unwrap_or_default().join(" ");
        let command = match (name, strict) {
            ("add-flow", _) => FlowModCommand::Add,
            ("mod-flows", false) => FlowModCommand::Modify,
            ("mod-flows", true) => FlowModCommand::ModifyStrict,
            (_, false) => FlowModCommand::Delete,
            (_, true) => FlowModCommand::DeleteStrict,
        };
        let fm =
            flowtext::parse_flow_command(&text, command).map_err(|e| format!("{text:?}: {e}"))?;
        self.daemon
            .flow_mods(bridge, &[fm])
            .map_err(|e| e.to_string())?;
        Ok(String::new())
    }

    pub(crate) fn add_flows(&self, _: &str, params: &[String]) -> Result<String, String> {
        let bridge = need(params, 0, "bridge")?;
        let path = need(params, 1, "file")?;
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let mods =
            flowtext::parse_flow_file(&text).map_err(|(line, e)| format!("{path}:{line}: {e}"))?;
        self.daemon
            .flow_mods(bridge, &mods)
            .map_err(|e| e.to_string())?;
        Ok(String::new())
    }

    pub(crate) fn dump_groups(&self, _: &str, params: &[String]) -> Result<String, String> {
        let bridge = need(params, 0, "bridge")?;
        let MultipartReplyBody::GroupDesc { groups } =
            self.multipart(bridge, &MultipartRequestBody::GroupDesc)?
        else {
            return Err("unexpected reply".into());
        };
        let mut s = String::new();
        for g in groups {
            let _ = writeln!(s, " {}", flowtext::ovs::format_group_desc(&g));
        }
        Ok(s)
    }

    pub(crate) fn dump_meters(&self, _: &str, params: &[String]) -> Result<String, String> {
        let bridge = need(params, 0, "bridge")?;
        let all = MultipartRequestBody::MeterConfig {
            meter_id: ofp::consts::meter_no::ALL,
        };
        let MultipartReplyBody::MeterConfig { configs } = self.multipart(bridge, &all)? else {
            return Err("unexpected reply".into());
        };
        let mut s = String::new();
        for m in configs {
            let _ = writeln!(s, "{}", flowtext::ovs::format_meter_config(&m));
        }
        Ok(s)
    }

    pub(crate) fn trace(&self, _: &str, params: &[String]) -> Result<String, String> {
        let (as_json, params) = flag(params, "--json");
        let bridge = need(&params, 0, "bridge")?;
        let port = need(&params, 1, "in_port=N")?;
        let in_port = port
            .strip_prefix("in_port=")
            .unwrap_or(port)
            .parse::<u32>()
            .map_err(|_| format!("{port:?}: expected in_port=N"))?;
        let hex = params.get(2..).unwrap_or_default().join("");
        if hex.is_empty() {
            return Err("missing the packet (hex)".into());
        }
        let bytes = crate::trace::parse_hex(&hex)?;
        self.daemon
            .trace(bridge, in_port, bytes, as_json)
            .map_err(|e| e.to_string())
    }

    pub(crate) fn stats(&self, _: &str, params: &[String]) -> Result<String, String> {
        let (as_json, params) = flag(params, "--json");
        let rt = self.daemon.runtime();
        let names = match params.first() {
            Some(b) => vec![b.clone()],
            None => rt.bridge_names(),
        };
        let mut reports = Vec::new();
        for n in &names {
            reports.push(
                self.daemon
                    .bridge_report(n, 10, true)
                    .ok_or_else(|| format!("no bridge named {n:?}"))?,
            );
        }
        if as_json {
            return json(&reports);
        }
        let mut s = String::new();
        for r in &reports {
            r.text(&mut s);
            for t in &r.threads {
                let total = (t.busy_ns + t.idle_ns).max(1);
                let _ = writeln!(
                    s,
                    "  thread {} ({}{}{}): packets {}, bursts {}, busy {:.1}% ({:.3} s), idle {:.3} s{}{}",
                    t.name,
                    t.role,
                    t.core.map(|c| format!(", core {c}")).unwrap_or_default(),
                    if t.yields { ", yields" } else { "" },
                    t.packets,
                    t.bursts,
                    100.0 * t.busy_ns as f64 / total as f64,
                    t.busy_ns as f64 / 1e9,
                    t.idle_ns as f64 / 1e9,
                    if t.ring_capacity > 0 {
                        format!(", input rings {}/{}", t.ring_fill, t.ring_capacity)
                    } else {
                        String::new()
                    },
                    if t.reads.is_empty() {
                        String::new()
                    } else {
                        format!(", reads {}", t.reads.join(" "))
                    }
                );
            }
            cycles_section(&mut s, r);
            let (hits, misses) = r.flow_cache;
            if hits + misses > 0 {
                let _ = writeln!(
                    s,
                    "  flow cache: hits {hits}, misses {misses} ({:.1}% hit)",
                    100.0 * hits as f64 / (hits + misses) as f64
                );
            }
            for (id, active, lookups, matched) in &r.tables {
                let _ = writeln!(
                    s,
                    "  table {id}: active {active}, lookups {lookups}, matched {matched}"
                );
            }
        }
        Ok(s)
    }

    /// Writes a pcapng of what a port receives and sends, until `--count`
    /// frames (default 100) or `--seconds` (default 60) pass.
    pub(crate) fn capture(&self, _: &str, params: &[String]) -> Result<String, String> {
        let (count, params) = option(params, "--count")?;
        let (seconds, params) = option(&params, "--seconds")?;
        let count = number(count, "--count", 100)?;
        let seconds = number(seconds, "--seconds", 60)?;
        let port = need(&params, 0, "port (an interface, or BR:PORT)")?;
        let path = need(&params, 1, "file")?;
        let c = self
            .daemon
            .capture(port, Path::new(path), count, seconds)
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "{} frames of {} (bridge {} port {}) written to {path}; {} lost\n",
            c.written, c.name, c.bridge, c.port, c.lost
        ))
    }

    /// NORMAL's learnt addresses, one line each, as `ovs-appctl
    /// fdb/show` prints them (`--json`: a list of objects).
    pub(crate) fn fdb_show(&self, _: &str, params: &[String]) -> Result<String, String> {
        let (as_json, params) = flag(params, "--json");
        let bridge = need(&params, 0, "bridge")?;
        let (entries, capacity, aging) = self
            .daemon
            .runtime()
            .fdb(bridge)
            .ok_or_else(|| format!("no bridge named {bridge:?}"))?;
        let mac = |m: &[u8; 6]| {
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        };
        if as_json {
            let v: Vec<serde_json::Value> = entries
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "port": e.port,
                        "vlan": e.vlan,
                        "mac": mac(&e.mac),
                        "age": e.age_secs,
                    })
                })
                .collect();
            return json(&serde_json::json!({
                "bridge": bridge,
                "capacity": capacity,
                "aging_secs": aging.as_secs(),
                "entries": v,
            }));
        }
        let mut s = String::from(" port  VLAN  MAC                Age\n");
        for e in &entries {
            let port = match e.port {
                ofp::consts::port_no::LOCAL => "LOCAL".to_string(),
                p => p.to_string(),
            };
            let _ = writeln!(
                s,
                "{port:>5}  {:>4}  {}  {:>3}",
                e.vlan,
                mac(&e.mac),
                e.age_secs
            );
        }
        Ok(s)
    }

    pub(crate) fn memory(&self, _: &str, _: &[String]) -> Result<String, String> {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .unwrap_or("?")
                .to_string()
        };
        let rt = self.daemon.runtime();
        let flows: usize = rt
            .bridge_names()
            .iter()
            .filter_map(|b| rt.flow_count(b))
            .sum();
        Ok(format!(
            "rss_kb:{} hwm_kb:{} bridges:{} flows:{}\n",
            field("VmRSS:"),
            field("VmHWM:"),
            rt.bridge_names().len(),
            flows
        ))
    }

    /// A configuration command (and any joined to it by `--`): one
    /// transaction.
    pub(crate) fn transaction(&self, name: &str, params: &[String]) -> Result<String, String> {
        let (dry_run, params) = flag(params, "--dry-run");
        let (as_json, params) = flag(&params, "--json");
        let mut refs: Vec<&str> = vec![name];
        refs.extend(params.iter().map(String::as_str));
        let ops = datastore::parse_ctl(&refs)?;
        let o = self.daemon.transact(&ops, dry_run).map_err(txn_error)?;
        if as_json {
            json(&o)
        } else {
            Ok(outcome_text(&o))
        }
    }

    pub(crate) fn load(&self, _: &str, params: &[String]) -> Result<String, String> {
        let (dry_run, params) = flag(params, "--dry-run");
        let path = need(&params, 0, "file")?;
        let cfg = datastore::Config::load(path).map_err(|e| e.to_string())?;
        let o = self.daemon.replace(cfg, dry_run).map_err(txn_error)?;
        Ok(outcome_text(&o))
    }

    pub(crate) fn save(&self, _: &str, params: &[String]) -> Result<String, String> {
        let path = match params.first() {
            Some(p) => Path::new(p).to_path_buf(),
            None => self
                .daemon
                .state_file()
                .map(Path::to_path_buf)
                .ok_or("no state file: give FILE")?,
        };
        self.daemon
            .save(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(format!("saved to {}\n", path.display()))
    }

    /// With no argument the filter in force; else sets it.
    pub(crate) fn log_level(&self, _: &str, params: &[String]) -> Result<String, String> {
        if params.is_empty() {
            return Ok(format!("{}\n", (self.hooks.log_filter)()));
        }
        let filter = match params {
            [level] => level.clone(),
            [level, target] => format!("{target}={level}"),
            _ => return Err("usage: log-level LEVEL [TARGET]".into()),
        };
        (self.hooks.log_level)(&filter).map(|f| format!("log filter now {f}\n"))
    }

    pub(crate) fn exit(&self, _: &str, _: &[String]) -> Result<String, String> {
        (self.hooks.exit)();
        Ok(String::new())
    }
}

/// `ctl stats`' cycles section: per thread, the cycles per packet it spent
/// in each stage (`dataplane::threads::StageCycles`), and the counter's
/// rate to turn them into time.
fn cycles_section(s: &mut String, r: &runtime::BridgeReport) {
    if r.threads.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "  cycles per packet, by thread (TSC {:.3} GHz):",
        r.tsc_hz as f64 / 1e9
    );
    for t in &r.threads {
        if t.packets == 0 {
            let _ = writeln!(s, "    {} ({}): no packets yet", t.name, t.role);
            continue;
        }
        let per = |c: u64| c as f64 / t.packets as f64;
        let _ = writeln!(
            s,
            "    {} ({}): rx {:.0}, pipeline {:.0}, tx {:.0}, total {:.0}",
            t.name,
            t.role,
            per(t.rx_cycles),
            per(t.pipeline_cycles),
            per(t.tx_cycles),
            per(t.rx_cycles + t.pipeline_cycles + t.tx_cycles)
        );
    }
}
