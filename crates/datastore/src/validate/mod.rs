//! From the raw, spanned file to the validated model. Every check runs
//! and every error is collected (each naming file, line, column and field
//! path, the path both shown and typed, see [`FieldPath`]); only when there are none is a model built, so a configuration is
//! taken whole or not at all.
//!
//! Order: bridges one by one (identity, ports, controllers, then groups and
//! meters, then flows, which may refer to both), then what spans bridges
//! (names, dpids, interfaces, listeners, patch links, TLS), then the
//! dataplane threads.
//!
//! This file holds the [`Checker`] (where findings go, the integer and
//! path helpers) and the order of the whole; each concern is a file of
//! its own, adding methods to the checker:
//!
//! - `bridges`: a bridge's identity and controllers, what must be unique
//!   across bridges, patch links, TLS;
//! - `ports`: ports and their backends, VLANs, egress queues, DPDK and the
//!   placement of port queues;
//! - `flows`: static flows, groups and meters and the checks between them;
//! - `dataplane`: the `[dataplane]` section.

use std::collections::{HashMap, HashSet};
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ofp::consts::{group_no, meter_no, port_no};
use ofp::{
    Action, FlowMod, FlowModCommand, GroupModCommand, Instruction, MeterModCommand, Oxm, OxmField,
    OxmValue,
};
use toml::Spanned;

use crate::error::{Diagnostic, SourceText};
use crate::model::*;
use crate::path::FieldPath;
use crate::raw::*;

mod bridges;
mod dataplane;
mod dpid;
mod flows;
mod ports;

pub(crate) use dpid::parse_dpid;

type S<T> = Spanned<T>;

/// Where a finding is: a value of the TOML document, or a line of another
/// file.
enum At {
    Span(Range<usize>),
    Line {
        file: Arc<Path>,
        line: usize,
        column: Option<usize>,
    },
}

/// The validation state: the document, the directory relative paths are
/// taken from, the machine, and what was found.
pub(crate) struct Checker<'a> {
    src: SourceText<'a>,
    dir: PathBuf,
    host: Host,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// Warnings past [`MAX_WARNINGS`], counted and not kept: a flows file
    /// of a million rules that all name an absent port would otherwise
    /// hold and print a million lines.
    warnings_not_kept: usize,
    /// Whether field paths are shown (in `Diagnostic::field` and in
    /// messages) naming bridges and ports by name
    /// (`bridges.br0.ports.eth3`, for a model a transaction changed)
    /// rather than by position in the file (`bridges[0].ports[1]`); the
    /// typed path each diagnostic carries is the same either way.
    by_name: bool,
    /// Who takes the flows-file flows as they are checked.
    handover: Option<&'a mut dyn crate::FlowHandover>,
}

/// The most warnings a configuration keeps and reports one by one.
pub(crate) const MAX_WARNINGS: usize = 100;

/// A port as read, before patch links are resolved.
struct PortDraft {
    number: u32,
    kind: PortKind,
    vlan: VlanSettings,
    /// Its egress queues, if given.
    qos: Option<PortQos>,
    /// Where the port's number was written (for link errors).
    span: Range<usize>,
    path: FieldPath,
}

impl<'a> Checker<'a> {
    pub fn new(src: SourceText<'a>, dir: PathBuf, host: Host) -> Checker<'a> {
        Checker {
            src,
            dir,
            host,
            errors: Vec::new(),
            warnings: Vec::new(),
            warnings_not_kept: 0,
            by_name: false,
            handover: None,
        }
    }

    /// Hands each bridge's flows-file flows to `h` as they are checked.
    pub fn handing_over(mut self, h: &'a mut dyn crate::FlowHandover) -> Checker<'a> {
        self.handover = Some(h);
        self
    }

    /// Field paths by name: bridges by their names, ports by their
    /// interfaces (a patch port by its number); see [`Checker`].
    pub fn by_name(mut self) -> Checker<'a> {
        self.by_name = true;
        self
    }

    /// The path of bridge `bi`.
    pub(super) fn bridge_path(&self, bi: usize, rb: &RawBridge) -> FieldPath {
        FieldPath::bridge(Some(bi), rb.name.get_ref())
    }

    /// The path of port `pi` of the bridge at `bridge`, labelled by its
    /// interface (a port without one by its number).
    pub(super) fn port_path(&self, bridge: &FieldPath, pi: usize, rp: &RawPort) -> FieldPath {
        let label = match &rp.interface {
            Some(i) => i.get_ref().clone(),
            None => rp.port.get_ref().to_string(),
        };
        bridge.port(Some(pi), label)
    }

    /// A path as messages show it: by position, or by name for a
    /// transaction.
    pub(super) fn show(&self, p: &FieldPath) -> String {
        p.render(self.by_name)
    }

    fn diag(&self, at: &At, field: &FieldPath, message: String) -> Diagnostic {
        let mut d = match at {
            At::Span(span) => self.src.diag(span, &self.show(field), message),
            At::Line { file, line, column } => Diagnostic {
                file: file.to_path_buf(),
                line: Some(*line),
                column: *column,
                field: self.show(field),
                message,
                ..Diagnostic::default()
            },
        };
        d.path = field.clone();
        d
    }

    fn err(&mut self, span: &Range<usize>, field: &FieldPath, message: impl Into<String>) {
        let d = self.diag(&At::Span(span.clone()), field, message.into());
        self.errors.push(d);
    }

    /// An error about a duplicate: `message` ends where the path of the
    /// first use, `prev`, is shown; the error names it as related.
    fn err_dup(
        &mut self,
        span: &Range<usize>,
        field: &FieldPath,
        message: impl Into<String>,
        prev: &FieldPath,
    ) {
        let mut d = self.diag(
            &At::Span(span.clone()),
            field,
            format!("{}{}", message.into(), self.show(prev)),
        );
        d.related.push(prev.clone());
        self.errors.push(d);
    }

    fn err_at(&mut self, at: &At, field: &FieldPath, message: impl Into<String>) {
        let d = self.diag(at, field, message.into());
        self.errors.push(d);
    }

    /// A warning whose message is made only when it is kept (a flows file
    /// of a million lines can warn twice a line; only the first
    /// [`MAX_WARNINGS`] are kept).
    fn warn_at(&mut self, at: &At, field: &FieldPath, message: impl FnOnce() -> String) {
        if self.room_for_warning() {
            let d = self.diag(at, field, message());
            self.warnings.push(d);
        }
    }

    fn warn(&mut self, span: &Range<usize>, field: &FieldPath, message: impl Into<String>) {
        if self.room_for_warning() {
            let d = self.diag(&At::Span(span.clone()), field, message.into());
            self.warnings.push(d);
        }
    }

    /// Whether one more warning is kept; else it is counted
    /// ([`MAX_WARNINGS`]).
    fn room_for_warning(&mut self) -> bool {
        let room = self.warnings.len() < MAX_WARNINGS;
        if !room {
            self.warnings_not_kept += 1;
        }
        room
    }

    /// The kept warnings, and one more that counts those not kept.
    fn take_warnings(&mut self) -> Vec<Diagnostic> {
        let mut w = std::mem::take(&mut self.warnings);
        if self.warnings_not_kept > 0 {
            w.push(Diagnostic {
                file: self.src.name.clone(),
                line: None,
                column: None,
                field: String::new(),
                message: format!(
                    "{} more warning(s) not listed (only the first {MAX_WARNINGS} are kept)",
                    self.warnings_not_kept
                ),
                ..Diagnostic::default()
            });
            self.warnings_not_kept = 0;
        }
        w
    }

    /// An integer in `range`, else an error `WHAT N is not valid (LO..=HI)`.
    fn int(
        &mut self,
        v: &S<i64>,
        field: &FieldPath,
        what: &str,
        range: RangeInclusive<i64>,
    ) -> Option<i64> {
        let n = *v.get_ref();
        if range.contains(&n) {
            Some(n)
        } else {
            self.err(
                &v.span(),
                field,
                format!(
                    "{what} {n} is not valid ({}..={})",
                    range.start(),
                    range.end()
                ),
            );
            None
        }
    }

    /// An optional integer with a default.
    fn int_or(
        &mut self,
        v: &Option<S<i64>>,
        field: &FieldPath,
        range: RangeInclusive<i64>,
        default: i64,
    ) -> Option<i64> {
        match v {
            Some(v) => self.int(v, field, field.leaf(), range),
            None => Some(default),
        }
    }

    /// A path relative to the config file's directory.
    fn resolve(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    /// A non-empty path string, resolved.
    fn path_value(&mut self, v: &S<String>, field: &FieldPath) -> Option<PathBuf> {
        if v.get_ref().is_empty() {
            self.err(&v.span(), field, "the path is empty");
            None
        } else {
            Some(self.resolve(v.get_ref()))
        }
    }

    /// The whole configuration. `None` when there were errors.
    pub fn config(&mut self, raw: &RawConfig) -> Option<Config> {
        let mut bridges = Vec::new();
        let mut drafts = Vec::new();
        for (bi, rb) in raw.bridges.iter().enumerate() {
            let (bridge, ports) = self.bridge(bi, rb.get_ref());
            bridges.push(bridge);
            drafts.push(ports);
        }
        self.across_bridges(raw, &bridges, &drafts);
        let links = self.patch_links(raw, &mut drafts);
        let tls = self.tls(raw, &bridges);
        let dataplane = self.dataplane(raw.dataplane.as_ref());
        let dpdk = self.dpdk(raw);
        if let Some(d) = &dataplane {
            self.queue_placement(raw, &drafts, d);
        }
        if !self.errors.is_empty() {
            return None;
        }
        let bridges = bridges
            .into_iter()
            .zip(drafts)
            .map(|(b, ports)| {
                let mut b = b?;
                b.qos = ports
                    .iter()
                    .flatten()
                    .filter_map(|p| Some((p.number, p.qos.clone()?)))
                    .collect();
                b.ports = ports
                    .into_iter()
                    .map(|p| {
                        p.map(|p| Port {
                            number: p.number,
                            kind: p.kind,
                            vlan: p.vlan,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(b)
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Config {
            bridges,
            patch_links: links,
            dataplane: dataplane?,
            tls: tls?,
            dpdk: dpdk?,
            warnings: self.take_warnings(),
        })
    }
}

/// The field path of the value at `offset` in a TOML document, found by
/// walking the parsed document for the deepest key or value whose span
/// holds it (`bridges[0].ports[1].speed`). Empty when the document does not
/// parse or nothing holds the offset.
pub(crate) fn path_at(text: &str, offset: usize) -> String {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return String::new();
    };
    let mut best = (0usize, String::new());
    walk_table(doc.get_ref(), offset, "", 0, &mut best);
    best.1
}

fn holds(span: &Range<usize>, offset: usize) -> bool {
    span.contains(&offset) || (span.start == offset && span.end == offset)
}

fn walk_table(
    t: &toml::de::DeTable<'_>,
    offset: usize,
    prefix: &str,
    depth: usize,
    best: &mut (usize, String),
) {
    for (k, v) in t.iter() {
        let key: &str = k.get_ref();
        let p = if prefix.is_empty() {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        };
        if (holds(&k.span(), offset) || holds(&v.span(), offset)) && depth + 1 > best.0 {
            *best = (depth + 1, p.clone());
        }
        walk_value(v, offset, &p, depth + 1, best);
    }
}

fn walk_value(
    v: &S<toml::de::DeValue<'_>>,
    offset: usize,
    p: &str,
    depth: usize,
    best: &mut (usize, String),
) {
    match v.get_ref() {
        toml::de::DeValue::Table(t) => walk_table(t, offset, p, depth, best),
        toml::de::DeValue::Array(a) => {
            for (i, e) in a.iter().enumerate() {
                let pi = format!("{p}[{i}]");
                if holds(&e.span(), offset) && depth + 1 > best.0 {
                    *best = (depth + 1, pi.clone());
                }
                walk_value(e, offset, &pi, depth + 1, best);
            }
        }
        _ => {}
    }
}

/// A top-level field path (`dataplane.rx_threads`, `patch_links[0].a`).
pub(super) fn top(rest: impl AsRef<str>) -> FieldPath {
    FieldPath::root().at(rest)
}

/// The directory relative paths in a config file are taken from.
pub(crate) fn config_dir(origin: &Path) -> PathBuf {
    origin.parent().map(Path::to_path_buf).unwrap_or_default()
}
