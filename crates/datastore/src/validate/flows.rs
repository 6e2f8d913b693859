//! Static flows, groups and meters: inline or from `*_file`s (parsed in
//! parallel for large files), each checked against its bridge (ports,
//! groups, meters it names; a later flow that replaces an earlier one).

use super::*;
use crate::flows_file::{for_each_parsed_block, FlowsFileError};

impl Checker<'_> {
    /// Reads a `*_file`; an error names the file and the config field.
    pub(super) fn read_list_file(
        &mut self,
        v: &S<String>,
        field: &FieldPath,
    ) -> Option<(PathBuf, String)> {
        let path = self.path_value(v, field)?;
        match std::fs::read_to_string(&path) {
            Ok(text) => Some((path, text)),
            Err(e) => {
                self.err(
                    &v.span(),
                    field,
                    format!("cannot read {}: {e}", path.display()),
                );
                None
            }
        }
    }

    /// Parses the inline strings of `items` and the lines of `file` with
    /// `parse`, reporting every parse error. The second value is the
    /// resolved file (`Some(None)`: none given; `None`: it could not be
    /// read).
    #[allow(clippy::type_complexity)]
    pub(super) fn parse_list<T>(
        &mut self,
        bridge: &FieldPath,
        what: &str,
        items: &[S<String>],
        file: &Option<S<String>>,
        parse: fn(&str) -> Result<T, flowtext::ParseError>,
    ) -> (Vec<Parsed<T>>, Option<Option<PathBuf>>) {
        let mut out = Vec::new();
        let base = bridge.at(what);
        for (i, s) in items.iter().enumerate() {
            let field = base.index(i);
            let text = s.get_ref();
            match parse(text) {
                Ok(v) => out.push(Parsed {
                    item: v,
                    text: text.trim().to_string(),
                    source: Source {
                        file: Arc::from(self.src.name.as_path()),
                        line: self.src.line_of(&s.span()),
                        inline: true,
                    },
                    span: s.span(),
                    field,
                }),
                Err(e) => {
                    let d = self.inline_parse_error(s, &field, &e);
                    self.errors.push(d);
                }
            }
        }
        let file_field = bridge.at(format!("{what}_file"));
        let resolved = match file {
            None => Some(None),
            Some(f) => match self.read_list_file(f, &file_field) {
                None => None,
                Some((path, text)) => {
                    let shared: Arc<Path> = Arc::from(path.as_path());
                    for (li, line) in text.lines().enumerate() {
                        let trimmed = line.trim();
                        if trimmed.is_empty() || trimmed.starts_with('#') {
                            continue;
                        }
                        match parse(line) {
                            Ok(v) => out.push(Parsed {
                                item: v,
                                text: trimmed.to_string(),
                                source: Source {
                                    file: shared.clone(),
                                    line: li + 1,
                                    inline: false,
                                },
                                span: f.span(),
                                field: file_field.clone(),
                            }),
                            Err(e) => self.push_line_error(&path, li, line, &file_field, e),
                        }
                    }
                    Some(Some(path))
                }
            },
        };
        (out, resolved)
    }

    /// A parse error inside an inline string: the column is that of the
    /// offending token when the string is written without escapes, else
    /// that of the string.
    pub(super) fn inline_parse_error(
        &self,
        s: &S<String>,
        field: &FieldPath,
        e: &flowtext::ParseError,
    ) -> Diagnostic {
        let span = s.span();
        let value = s.get_ref();
        let exact = self.src.slice(&span).is_some_and(|raw| {
            raw.len() == value.len() + 2
                && (raw.starts_with('"') || raw.starts_with('\''))
                && raw.get(1..raw.len() - 1) == Some(value.as_str())
        });
        let at = if exact && value.is_char_boundary(e.position.min(value.len())) {
            let off = span.start + 1 + e.position.min(value.len());
            off..off
        } else {
            span
        };
        self.diag(&At::Span(at), field, e.message.clone())
    }

    /// Static groups or meters (`kind`) of a bridge, inline and from their
    /// file: each must pass the kind's check, which gives its id, and an
    /// id is defined once.
    #[allow(clippy::type_complexity)]
    pub(super) fn static_list<T, U>(
        &mut self,
        ctx: &FlowCtx,
        kind: &StaticKind<T, U>,
        items: &[S<String>],
        file: &Option<S<String>>,
    ) -> (Vec<Parsed<U>>, Option<Option<PathBuf>>) {
        let (parsed, file) = self.parse_list(&ctx.bridge_path, kind.list, items, file, kind.parse);
        let mut seen: HashMap<u32, String> = HashMap::new();
        let mut out = Vec::new();
        for m in parsed {
            let at = source_at(&m.source, m.span.clone());
            match (kind.check)(&m.item) {
                Err(e) => self.err_at(&at, &m.field, e),
                Ok(id) => match seen.get(&id) {
                    Some(prev) => self.err_at(
                        &at,
                        &m.field,
                        format!("{} {id} is already defined at {prev}", kind.what),
                    ),
                    None => {
                        seen.insert(id, m.source.to_string());
                    }
                },
            }
            out.push(Parsed {
                item: (kind.make)(m.text.clone(), m.item, m.source.clone()),
                text: m.text,
                source: m.source,
                span: m.span,
                field: m.field,
            });
        }
        (out, file)
    }

    /// The static flows of a bridge: the inline ones (kept) and those of
    /// its flows file (checked, then counted and digested, not kept;
    /// handed over as they are checked when the checker has a
    /// [`FlowHandover`](crate::FlowHandover), after `head`, which comes
    /// back).
    #[allow(clippy::type_complexity)]
    pub(super) fn flows(
        &mut self,
        ctx: &FlowCtx,
        rb: &RawBridge,
        groups: &HashSet<u32>,
        meters: &HashSet<u32>,
        mut head: Option<TablesHead>,
    ) -> (
        Vec<StaticFlow>,
        Option<Option<FlowsFile>>,
        Option<TablesHead>,
    ) {
        let base = ctx.bridge_path.at("flows");
        let mut fc = FlowChecks {
            ctx,
            groups,
            meters,
            seen: SeenFlows::default(),
            inline: Vec::new(),
        };
        let inline_file: Arc<Path> = Arc::from(self.src.name.as_path());
        for (i, s) in rb.flows.iter().enumerate() {
            let field = base.index(i);
            let text = s.get_ref();
            match flowtext::parse_flow(text) {
                Ok(fm) => {
                    let source = Source {
                        file: inline_file.clone(),
                        line: self.src.line_of(&s.span()),
                        inline: true,
                    };
                    let at = source_at(&source, s.span());
                    self.check_flow(&mut fc, &fm, &at, source.line, &field);
                    fc.inline.push(StaticFlow {
                        text: text.trim().to_string(),
                        source,
                    });
                }
                Err(e) => {
                    let d = self.inline_parse_error(s, &field, &e);
                    self.errors.push(d);
                }
            }
        }
        let file_field = ctx.bridge_path.at("flows_file");
        let resolved = match &rb.flows_file {
            None => Some(None),
            Some(f) => match self.path_value(f, &file_field) {
                None => None,
                Some(path) => {
                    // Handed over from the start of the file to its end
                    // while the configuration has no error.
                    let mut started = false;
                    if let (Some(h), Some(head), true) =
                        (&mut self.handover, &mut head, self.errors.is_empty())
                    {
                        head.flows = fc.inline.clone();
                        started = h.start(head, &path);
                    }
                    let mut handing = started;
                    // One place for every line's messages (an `Arc` cloned
                    // and dropped per line cost more than the checks).
                    let mut at = At::Line {
                        file: Arc::from(path.as_path()),
                        line: 0,
                        column: None,
                    };
                    let read =
                        for_each_parsed_block(&path, flowtext::parse_flow, |block, parsed| {
                            for (&(li, line), r) in block.iter().zip(parsed) {
                                let Ok(fm) = r.map_err(|e| {
                                    handing = false;
                                    self.push_line_error(&path, li, line, &file_field, e)
                                }) else {
                                    continue;
                                };
                                if let At::Line { line, .. } = &mut at {
                                    *line = li + 1;
                                }
                                let errors = self.errors.len();
                                self.check_flow(&mut fc, &fm, &at, li + 1, &file_field);
                                handing &= self.errors.len() == errors;
                                if let (true, Some(h)) = (handing, &mut self.handover) {
                                    h.flow(li + 1, fm);
                                }
                            }
                            Ok::<(), std::convert::Infallible>(())
                        });
                    let file = read.as_ref().ok().map(|read| FlowsFile {
                        path: path.clone(),
                        sha256: read.sha256,
                        flows: read.lines,
                    });
                    if let (true, Some(h)) = (started, &mut self.handover) {
                        h.end(file.as_ref().filter(|_| handing));
                    }
                    match read {
                        Ok(_) => Some(file),
                        Err(FlowsFileError::Read(e)) => {
                            self.err(
                                &f.span(),
                                &file_field,
                                format!("cannot read {}: {e}", path.display()),
                            );
                            None
                        }
                        Err(FlowsFileError::Changed) => None,
                        Err(FlowsFileError::Stopped(never)) => match never {},
                    }
                }
            },
        };
        let mut out = fc.inline;
        out.shrink_to_fit();
        (out, resolved, head)
    }

    /// Checks one parsed static flow, written at `at` (its `line`),
    /// against its bridge and the flows before it.
    pub(super) fn check_flow(
        &mut self,
        fc: &mut FlowChecks,
        fm: &FlowMod,
        at: &At,
        line: usize,
        field: &FieldPath,
    ) {
        let (ctx, groups, meters) = (fc.ctx, fc.groups, fc.meters);
        if fm.command != FlowModCommand::Add {
            self.err_at(at, field, "a static flow must be an add");
            return;
        }
        if fm.table_id >= ctx.n_tables {
            self.err_at(
                at,
                field,
                format!(
                    "table {} does not exist (n_tables = {})",
                    fm.table_id, ctx.n_tables
                ),
            );
        }
        for oxm in &fm.match_.fields {
            if let Oxm::Basic {
                field: OxmField::InPort,
                value: OxmValue::U32(port),
                ..
            } = oxm
            {
                if *port <= port_no::MAX && !ctx.ports.contains(port) {
                    self.warn_at(at, field, || {
                        format!("in_port={port}: the bridge has no port {port}")
                    });
                }
            }
        }
        for ins in &fm.instructions {
            match ins {
                Instruction::GotoTable { table_id } => {
                    if *table_id <= fm.table_id {
                        self.err_at(
                            at,
                            field,
                            format!(
                                "goto_table:{table_id} must go to a table after {}",
                                fm.table_id
                            ),
                        );
                    } else if *table_id >= ctx.n_tables {
                        self.err_at(
                            at,
                            field,
                            format!(
                                "goto_table:{table_id}: table {table_id} does not exist (n_tables = {})",
                                ctx.n_tables
                            ),
                        );
                    }
                }
                Instruction::Meter { meter_id } if !meters.contains(meter_id) => {
                    self.warn_at(
                        at,
                        field,
                        || format!("meter {meter_id} is not defined in this file (a controller must add it)"),
                    );
                }
                Instruction::ApplyActions { actions } | Instruction::WriteActions { actions } => {
                    self.check_actions(ctx, at, field, actions, groups);
                }
                _ => {}
            }
        }
        let here = SeenAt {
            line,
            inline: matches!(at, At::Span(_)),
        };
        if let Some(prev) = fc.seen.first(fm, here) {
            // Inline flows come first: an earlier flow of the flows file
            // is seen only from a later one of that file.
            let file: Arc<Path> = match at {
                At::Line { file, .. } if !prev.inline => file.clone(),
                _ => Arc::from(self.src.name.as_path()),
            };
            let file = file.display();
            self.warn_at(
                at,
                field,
                || format!("this flow has the same table, priority and match as the one at {file}:{}, and replaces it", prev.line),
            );
        }
    }

    /// Warnings for actions that name groups not defined here or ports the
    /// bridge does not have.
    pub(super) fn check_actions(
        &mut self,
        ctx: &FlowCtx,
        at: &At,
        field: &FieldPath,
        actions: &[Action],
        groups: &HashSet<u32>,
    ) {
        for a in actions {
            match a {
                Action::Group { group_id } if !groups.contains(group_id) => {
                    self.warn_at(
                        at,
                        field,
                        || format!("group {group_id} is not defined in this file (a controller must add it)"),
                    );
                }
                Action::Output { port, .. }
                    if *port <= port_no::MAX && !ctx.ports.contains(port) =>
                {
                    self.warn_at(at, field, || {
                        format!("output:{port}: the bridge has no port {port}")
                    });
                }
                _ => {}
            }
        }
    }
    /// Reports a parse error on line `li` (0-based) of a flows, groups or
    /// meters file, with the column of the offending token.
    pub(super) fn push_line_error(
        &mut self,
        path: &Path,
        li: usize,
        line: &str,
        field: &FieldPath,
        e: flowtext::ParseError,
    ) {
        let column = line
            .get(..e.position)
            .map(|s| s.chars().count() + 1)
            .unwrap_or(e.position + 1);
        let field_text = self.show(field);
        self.errors.push(Diagnostic {
            file: path.to_path_buf(),
            line: Some(li + 1),
            column: Some(column),
            field: field_text,
            message: e.message,
            path: field.clone(),
            related: Vec::new(),
        });
    }
}

/// What differs between a bridge's static meters and its groups.
pub(super) struct StaticKind<T, U> {
    /// One, in messages: `meter`.
    what: &'static str,
    /// The list's field: `meters` (and `meters_file`).
    list: &'static str,
    parse: fn(&str) -> Result<T, flowtext::ParseError>,
    /// The id of a valid one, else what is wrong.
    check: fn(&T) -> Result<u32, String>,
    /// The model's item from its text, the message and where it was.
    make: fn(String, T, Source) -> U,
}

pub(super) const METERS: StaticKind<ofp::MeterMod, StaticMeter> = StaticKind {
    what: "meter",
    list: "meters",
    parse: flowtext::parse_meter,
    check: |m| {
        let id = m.meter_id;
        if m.command != MeterModCommand::Add {
            Err("a static meter must be an add".to_string())
        } else if id == 0 || id == meter_no::ALL || (id > meter_no::MAX && id < meter_no::SLOWPATH)
        {
            Err(format!("meter id {id} is not valid"))
        } else {
            Ok(id)
        }
    },
    make: |text, meter_mod, source| StaticMeter {
        text,
        meter_mod,
        source,
    },
};

pub(super) const GROUPS: StaticKind<ofp::GroupMod, StaticGroup> = StaticKind {
    what: "group",
    list: "groups",
    parse: flowtext::parse_group,
    check: |g| {
        let id = g.group_id;
        if g.command != GroupModCommand::Add {
            Err("a static group must be an add".to_string())
        } else if id > group_no::MAX {
            Err(format!("group id {id} is not valid (0..=4294967040)"))
        } else {
            Ok(id)
        }
    },
    make: |text, group_mod, source| StaticGroup {
        text,
        group_mod,
        source,
    },
};

/// What flow checks need to know about their bridge.
pub(super) struct FlowCtx {
    pub(super) bridge_path: FieldPath,
    pub(super) n_tables: u8,
    pub(super) ports: HashSet<u32>,
}

/// A parsed flow, group or meter with where it came from.
pub(super) struct Parsed<T> {
    pub(super) item: T,
    pub(super) text: String,
    pub(super) source: Source,
    /// The inline string, or the `*_file` value.
    pub(super) span: Range<usize>,
    pub(super) field: FieldPath,
}

pub(super) fn source_at(source: &Source, span: Range<usize>) -> At {
    if source.inline {
        At::Span(span)
    } else {
        At::Line {
            file: source.file.clone(),
            line: source.line,
            column: None,
        }
    }
}

/// What the flow checks of one bridge carry from flow to flow.
pub(super) struct FlowChecks<'c> {
    ctx: &'c FlowCtx,
    groups: &'c HashSet<u32>,
    meters: &'c HashSet<u32>,
    seen: SeenFlows,
    /// The inline flows so far.
    inline: Vec<StaticFlow>,
}

/// Where a flow was first seen: its line, and whether inline.
#[derive(Clone, Copy)]
pub(super) struct SeenAt {
    line: usize,
    inline: bool,
}

/// The (table, priority, match) keys of the flows so far, to find one
/// that replaces an earlier one. Keyed by a 128-bit hash of the key's
/// wire form, not by the key (a copy of a million matches would cost more
/// than the flows' text, and a flows file's earlier lines are no longer
/// held to parse again); two different keys with one hash would make a
/// wrong "replaces" warning, at odds of about 2^-128 for each pair.
#[derive(Default)]
pub(super) struct SeenFlows {
    first: HashMap<u128, SeenAt, std::hash::BuildHasherDefault<TakeLow>>,
    /// The key's bytes (reused).
    wire: Vec<u8>,
}

/// The hasher of a map whose keys are already hashes: their low bits.
#[derive(Default)]
pub(super) struct TakeLow(u64);

impl std::hash::Hasher for TakeLow {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = v as u64;
    }
}

impl SeenFlows {
    /// Where the first flow with `fm`'s key was written, if one was; else
    /// records `fm`'s (`here`) as the first.
    fn first(&mut self, fm: &FlowMod, here: SeenAt) -> Option<SeenAt> {
        use std::hash::Hasher;
        self.wire.clear();
        self.wire.push(fm.table_id);
        self.wire.extend_from_slice(&fm.priority.to_be_bytes());
        fm.match_.encode(&mut self.wire);
        let mut lo = std::hash::DefaultHasher::new();
        lo.write(&self.wire);
        // A second, independent 64 bits: the same hash after a tag.
        let mut hi = std::hash::DefaultHasher::new();
        hi.write_u8(0x5a);
        hi.write(&self.wire);
        let h = (u128::from(hi.finish()) << 64) | u128::from(lo.finish());
        match self.first.entry(h) {
            std::collections::hash_map::Entry::Occupied(o) => Some(*o.get()),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(here);
                None
            }
        }
    }
}
