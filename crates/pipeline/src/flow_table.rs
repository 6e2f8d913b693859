//! The flow tables as the control side sees them: FLOW_MOD semantics,
//! timeouts, counters and the flow/aggregate/table statistics answers
//! (spec 1.3.5 §5.2–§5.5, §6.4, §7.3.4.2, §7.3.5).
//!
//! # Data structures
//!
//! [`Tables`] holds `n_tables` (1..=255, ids `0..n_tables`) [`FlowTable`]s
//! and three indexes across them:
//!
//! * `location: FlowId -> table id`, so an entry is found from its id
//!   alone (counter updates from the data side arrive by id);
//! * `group_refs: group id -> {FlowId}` and `meter_refs: meter id ->
//!   {FlowId}`: which entries forward to a group (through a group action
//!   in apply-actions or write-actions) or use a meter (meter
//!   instruction). Deleting a group or meter removes exactly those
//!   entries, and group/meter statistics report their sizes as
//!   `ref_count` / `flow_count` without a scan.
//!
//! Each [`FlowTable`] holds
//!
//! * `entries: BTreeMap<FlowId, FlowEntry>` — the entries, iterated in id
//!   (= installation) order so statistics replies are deterministic;
//! * `by_key: HashMap<(priority, MatchKey), FlowId>` — the strict index:
//!   an entry's identity in OpenFlow is its table, priority and match as a
//!   set of fields, so ADD finds the entry it replaces and the strict
//!   commands find their one entry in O(1);
//! * `lookup_count` / `matched_count` — the table counters the data side
//!   feeds through [`Tables::note_lookup`].
//!
//! [`FlowId`]s come from one counter per `Tables`, are never reused, and
//! stay with an entry when MODIFY or a replacing ADD changes its
//! instructions — the entry's (table, priority, match) cannot change, so a
//! classifier that indexes entries by id never has to move one for those.
//!
//! # Invariants (checked by `Tables::check_invariants` in tests)
//!
//! 1. `location[id] == t` exactly when `tables[t].entries` has `id`, and
//!    `entries[id].id == id`, `entries[id].table_id == t`.
//! 2. `by_key` has exactly one key per entry, `(e.priority, e.key)`, and
//!    no two entries of a table share one.
//! 3. `e.key == MatchKey::new(&e.match_)`; `e.match_` is the TLV list as
//!    the controller sent it.
//! 4. `group_refs[g]` holds `id` exactly when entry `id` has a group
//!    action to `g`; likewise `meter_refs`. Empty sets are removed.
//! 5. No table has more than `max_entries` entries.
//! 6. A modification that returns an error has changed nothing: every
//!    check (flags, table id, match, instructions, overlap, capacity) runs
//!    before the first write.
//!
//! # Costs
//!
//! ADD/strict commands are O(1) plus instruction validation; CHECK_OVERLAP
//! and the non-strict commands scan the table; [`Tables::expire`] scans
//! every entry. A timer wheel and a classifier come with packet processing.

use crate::flow_entry::{FlowEntry, FlowId, FlowRemoved, RemovalReason};
use crate::group_table::Groups;
use crate::match_key::MatchKey;
use crate::meter_table::Meters;
use crate::validate::{validate_instructions, ActionPolicy, InstructionContext};
use crate::Time;
use ofp::consts::{table_no, OFP_NO_BUFFER};
use ofp::error::{BadRequestCode, FlowModFailedCode};
use ofp::flow_mod::flow_mod_flags;
use ofp::{FlowMod, FlowModCommand, Instruction, Match, OfpError};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Every `OFPFF_*` bit OpenFlow 1.3 defines.
const KNOWN_FLAGS: u16 = flow_mod_flags::SEND_FLOW_REM
    | flow_mod_flags::CHECK_OVERLAP
    | flow_mod_flags::RESET_COUNTS
    | flow_mod_flags::NO_PKT_COUNTS
    | flow_mod_flags::NO_BYT_COUNTS;

/// Size limits and policies of the flow tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TablesConfig {
    /// Number of tables, 1..=255 (ids `0..n_tables`; 0 is treated as 1).
    pub n_tables: u8,
    /// Most entries one table holds; an ADD beyond it fails with
    /// `FLOW_MOD_FAILED/TABLE_FULL`.
    pub max_entries: usize,
    /// Which output ports actions may name.
    pub policy: ActionPolicy,
}

impl Default for TablesConfig {
    /// 255 tables of a million entries each, no `OFPP_NORMAL`.
    fn default() -> Self {
        TablesConfig {
            n_tables: 255,
            max_entries: 1 << 20,
            policy: ActionPolicy::default(),
        }
    }
}

/// One flow table.
#[derive(Clone, Debug, Default)]
pub struct FlowTable {
    entries: BTreeMap<FlowId, FlowEntry>,
    by_key: HashMap<(u16, MatchKey), FlowId>,
    lookup_count: u64,
    matched_count: u64,
}

impl FlowTable {
    /// The entries in installation order.
    pub fn entries(&self) -> impl Iterator<Item = &FlowEntry> {
        self.entries.values()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the table has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What a successful FLOW_MOD did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowModOutcome {
    /// ADD: the entry installed (a replaced entry keeps its id).
    pub installed: Option<FlowId>,
    /// ADD: true when it replaced an entry with the same match and priority.
    pub replaced: bool,
    /// MODIFY*: the entries whose instructions changed.
    pub modified: Vec<FlowId>,
    /// DELETE*: every entry removed.
    pub deleted: Vec<FlowId>,
    /// FLOW_REMOVED events to send (deleted entries with SEND_FLOW_REM).
    pub flow_removed: Vec<FlowRemoved>,
    /// ADD/MODIFY*: the buffered packet to run through the pipeline now
    /// (`buffer_id` when it was not `OFP_NO_BUFFER`; spec §6.4). DELETE*
    /// ignore `buffer_id`.
    pub release_buffer: Option<u32>,
}

/// The selection of a flow or aggregate statistics request (spec 1.3.5
/// §7.3.5.2), also usable for any other "which entries" question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowFilter {
    /// A table or `OFPTT_ALL`.
    pub table_id: u8,
    /// Entries that output to this port, or `OFPP_ANY`.
    pub out_port: u32,
    /// Entries that forward to this group, or `OFPG_ANY`.
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    /// Entries at least as specific as this match (non-strict).
    pub match_: Match,
}

impl Default for FlowFilter {
    /// Everything: all tables, any port, any group, any cookie, empty match.
    fn default() -> Self {
        FlowFilter {
            table_id: table_no::ALL,
            out_port: ofp::consts::port_no::ANY,
            out_group: ofp::consts::group_no::ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::default(),
        }
    }
}

/// One `ofp_flow_stats` (spec 1.3.5 §7.3.5.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    /// All-ones for an entry with `OFPFF_NO_PKT_COUNTS`.
    pub packet_count: u64,
    /// All-ones for an entry with `OFPFF_NO_BYT_COUNTS`.
    pub byte_count: u64,
    /// The match as the controller sent it.
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

/// `ofp_aggregate_stats_reply`. Entries whose counters are unavailable
/// (`NO_PKT_COUNTS` / `NO_BYT_COUNTS`) add nothing to that sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AggregateStats {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

/// One `ofp_table_stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

/// All flow tables of one switch. See the module comment.
#[derive(Clone, Debug)]
pub struct Tables {
    config: TablesConfig,
    tables: Vec<FlowTable>,
    next_id: u64,
    location: HashMap<FlowId, u8>,
    group_refs: HashMap<u32, BTreeSet<FlowId>>,
    meter_refs: HashMap<u32, BTreeSet<FlowId>>,
}

impl Default for Tables {
    fn default() -> Self {
        Tables::new(TablesConfig::default())
    }
}

const fn fm_failed(code: FlowModFailedCode) -> OfpError {
    OfpError::FlowModFailed(code)
}

impl Tables {
    /// Empty tables.
    pub fn new(mut config: TablesConfig) -> Tables {
        config.n_tables = config.n_tables.max(1);
        Tables {
            tables: vec![FlowTable::default(); usize::from(config.n_tables)],
            config,
            next_id: 1,
            location: HashMap::new(),
            group_refs: HashMap::new(),
            meter_refs: HashMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TablesConfig {
        &self.config
    }

    /// Number of tables.
    pub fn n_tables(&self) -> u8 {
        self.config.n_tables
    }

    /// One table.
    pub fn table(&self, table_id: u8) -> Option<&FlowTable> {
        self.tables.get(usize::from(table_id))
    }

    /// An entry by id.
    pub fn entry(&self, id: FlowId) -> Option<&FlowEntry> {
        let t = self.location.get(&id)?;
        self.tables.get(usize::from(*t))?.entries.get(&id)
    }

    /// Total entries in all tables.
    pub fn len(&self) -> usize {
        self.location.len()
    }

    /// True when no table has an entry.
    pub fn is_empty(&self) -> bool {
        self.location.is_empty()
    }

    /// Number of entries forwarding to `group`.
    pub fn group_ref_count(&self, group: u32) -> usize {
        self.group_refs.get(&group).map_or(0, BTreeSet::len)
    }

    /// Number of entries using `meter`.
    pub fn meter_flow_count(&self, meter: u32) -> usize {
        self.meter_refs.get(&meter).map_or(0, BTreeSet::len)
    }

    /// Applies one FLOW_MOD at time `now`. `groups` and `meters` are the
    /// switch's group and meter tables, against which group actions and
    /// meter instructions are checked. On error nothing has changed.
    pub fn apply_flow_mod(
        &mut self,
        fm: &FlowMod,
        now: Time,
        groups: &Groups,
        meters: &Meters,
    ) -> Result<FlowModOutcome, OfpError> {
        if fm.flags & !KNOWN_FLAGS != 0 {
            return Err(fm_failed(FlowModFailedCode::BadFlags));
        }
        let is_delete = matches!(
            fm.command,
            FlowModCommand::Delete | FlowModCommand::DeleteStrict
        );
        let all_tables = is_delete && fm.table_id == table_no::ALL;
        if !all_tables && fm.table_id >= self.config.n_tables {
            return Err(fm_failed(FlowModFailedCode::BadTableId));
        }
        let key = MatchKey::new(&fm.match_)?;
        if !is_delete {
            let group_exists = |g: u32| groups.contains(g);
            let meter_exists = |m: u32| meters.contains(m);
            let ctx = InstructionContext {
                table_id: fm.table_id,
                n_tables: self.config.n_tables,
                group_exists: &group_exists,
                meter_exists: &meter_exists,
                policy: self.config.policy,
            };
            validate_instructions(&fm.instructions, &key, &ctx)?;
        }
        let mut outcome = match fm.command {
            FlowModCommand::Add => self.add(fm, key, now)?,
            FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
                let strict = fm.command == FlowModCommand::ModifyStrict;
                self.modify(fm, &key, strict)
            }
            FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
                let strict = fm.command == FlowModCommand::DeleteStrict;
                self.delete(fm, &key, strict, now)
            }
        };
        if !is_delete && fm.buffer_id != OFP_NO_BUFFER {
            outcome.release_buffer = Some(fm.buffer_id);
        }
        Ok(outcome)
    }

    /// ADD (spec §6.4): overlap check, then replace an identical entry
    /// (same match as a set of fields and same priority) or insert.
    fn add(&mut self, fm: &FlowMod, key: MatchKey, now: Time) -> Result<FlowModOutcome, OfpError> {
        let t = usize::from(fm.table_id);
        let max_entries = self.config.max_entries;
        let table = self
            .tables
            .get(t)
            .ok_or(fm_failed(FlowModFailedCode::BadTableId))?;
        if fm.flags & flow_mod_flags::CHECK_OVERLAP != 0
            && table
                .entries
                .values()
                .any(|e| e.priority == fm.priority && e.key.overlaps(&key))
        {
            return Err(fm_failed(FlowModFailedCode::Overlap));
        }
        let slot = (fm.priority, key);
        let existing = table.by_key.get(&slot).copied();
        if existing.is_none() && table.entries.len() >= max_entries {
            return Err(fm_failed(FlowModFailedCode::TableFull));
        }
        // From here on nothing can fail.
        let (priority, key) = slot;
        let old = existing.and_then(|id| self.detach(id));
        let id = match &old {
            Some(e) => e.id,
            None => {
                let id = FlowId(self.next_id);
                self.next_id += 1;
                id
            }
        };
        let (packet_count, byte_count) = match &old {
            Some(e) if fm.flags & flow_mod_flags::RESET_COUNTS == 0 => {
                (e.packet_count, e.byte_count)
            }
            _ => (0, 0),
        };
        let entry = FlowEntry {
            id,
            table_id: fm.table_id,
            priority,
            match_: fm.match_.clone(),
            key,
            instructions: fm.instructions.clone(),
            cookie: fm.cookie,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            flags: fm.flags,
            installed_at: now,
            last_used: now,
            packet_count,
            byte_count,
        };
        self.attach(entry);
        Ok(FlowModOutcome {
            installed: Some(id),
            replaced: old.is_some(),
            ..FlowModOutcome::default()
        })
    }

    /// MODIFY / MODIFY_STRICT (spec §6.4): new instructions for every
    /// selected entry; cookie, timeouts, flags, counters and duration stay
    /// unless RESET_COUNTS clears the counters. Selecting nothing is not
    /// an error and adds nothing (OpenFlow 1.3).
    fn modify(&mut self, fm: &FlowMod, key: &MatchKey, strict: bool) -> FlowModOutcome {
        let ids = self.select(
            fm.table_id,
            key,
            strict.then_some(fm.priority),
            fm.cookie,
            fm.cookie_mask,
            ofp::consts::port_no::ANY,
            ofp::consts::group_no::ANY,
        );
        let reset = fm.flags & flow_mod_flags::RESET_COUNTS != 0;
        for id in &ids {
            if let Some(mut e) = self.detach(*id) {
                e.instructions = fm.instructions.clone();
                if reset {
                    e.packet_count = 0;
                    e.byte_count = 0;
                }
                self.attach(e);
            }
        }
        FlowModOutcome {
            modified: ids,
            ..FlowModOutcome::default()
        }
    }

    /// DELETE / DELETE_STRICT (spec §6.4), with the cookie, out_port and
    /// out_group filters; `OFPTT_ALL` covers every table.
    fn delete(&mut self, fm: &FlowMod, key: &MatchKey, strict: bool, now: Time) -> FlowModOutcome {
        let ids = self.select(
            fm.table_id,
            key,
            strict.then_some(fm.priority),
            fm.cookie,
            fm.cookie_mask,
            fm.out_port,
            fm.out_group,
        );
        let flow_removed = self.remove_ids(&ids, RemovalReason::Delete, now);
        FlowModOutcome {
            deleted: ids,
            flow_removed,
            ..FlowModOutcome::default()
        }
    }

    /// The entries a modify/delete/stats request selects. `priority` set
    /// means strict: the same match as a set of fields and the same
    /// priority; otherwise every entry at least as specific as `key`.
    #[allow(clippy::too_many_arguments)]
    fn select(
        &self,
        table_id: u8,
        key: &MatchKey,
        priority: Option<u16>,
        cookie: u64,
        cookie_mask: u64,
        out_port: u32,
        out_group: u32,
    ) -> Vec<FlowId> {
        let tables: Vec<&FlowTable> = if table_id == table_no::ALL {
            self.tables.iter().collect()
        } else {
            self.tables.get(usize::from(table_id)).into_iter().collect()
        };
        let keep = |e: &FlowEntry| {
            e.cookie_matches(cookie, cookie_mask)
                && e.outputs_to(out_port)
                && e.forwards_to_group(out_group)
        };
        let mut ids = Vec::new();
        for table in tables {
            match priority {
                Some(p) => {
                    if let Some(e) = table
                        .by_key
                        .get(&(p, key.clone()))
                        .and_then(|id| table.entries.get(id))
                    {
                        if keep(e) {
                            ids.push(e.id);
                        }
                    }
                }
                None => ids.extend(
                    table
                        .entries
                        .values()
                        .filter(|e| e.key.is_within(key) && keep(e))
                        .map(|e| e.id),
                ),
            }
        }
        ids
    }

    /// Removes entries, returning FLOW_REMOVED events for those that asked.
    fn remove_ids(&mut self, ids: &[FlowId], reason: RemovalReason, now: Time) -> Vec<FlowRemoved> {
        let mut events = Vec::new();
        for id in ids {
            if let Some(e) = self.detach(*id) {
                if e.sends_flow_removed() {
                    events.push(e.removed_event(reason, now));
                }
            }
        }
        events
    }

    /// Inserts an entry and indexes it. The caller has checked capacity
    /// and that its (priority, key) slot is free.
    fn attach(&mut self, e: FlowEntry) {
        let id = e.id;
        for g in e.groups() {
            self.group_refs.entry(g).or_default().insert(id);
        }
        if let Some(m) = e.meter() {
            self.meter_refs.entry(m).or_default().insert(id);
        }
        self.location.insert(id, e.table_id);
        if let Some(table) = self.tables.get_mut(usize::from(e.table_id)) {
            table.by_key.insert((e.priority, e.key.clone()), id);
            table.entries.insert(id, e);
        }
    }

    /// Takes an entry out of its table and every index.
    fn detach(&mut self, id: FlowId) -> Option<FlowEntry> {
        let t = self.location.remove(&id)?;
        let table = self.tables.get_mut(usize::from(t))?;
        let e = table.entries.remove(&id)?;
        table.by_key.remove(&(e.priority, e.key.clone()));
        for g in e.groups() {
            unref(&mut self.group_refs, g, id);
        }
        if let Some(m) = e.meter() {
            unref(&mut self.meter_refs, m, id);
        }
        Some(e)
    }

    /// Removes every entry forwarding to `group` (it was deleted), with
    /// reason `GROUP_DELETE`.
    pub fn remove_group_users(&mut self, group: u32, now: Time) -> Vec<FlowRemoved> {
        let ids: Vec<FlowId> = self
            .group_refs
            .get(&group)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        self.remove_ids(&ids, RemovalReason::GroupDelete, now)
    }

    /// Removes every entry using `meter` (it was deleted), with reason
    /// [`RemovalReason::MeterDelete`].
    pub fn remove_meter_users(&mut self, meter: u32, now: Time) -> Vec<FlowRemoved> {
        let ids: Vec<FlowId> = self
            .meter_refs
            .get(&meter)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        self.remove_ids(&ids, RemovalReason::MeterDelete, now)
    }

    /// Removes every entry whose idle or hard timeout has run out at `now`,
    /// returning FLOW_REMOVED events for those installed with
    /// SEND_FLOW_REM (all expired entries are removed).
    pub fn expire(&mut self, now: Time) -> Vec<FlowRemoved> {
        let due: Vec<(FlowId, RemovalReason)> = self
            .tables
            .iter()
            .flat_map(|t| t.entries.values())
            .filter_map(|e| e.expired(now).map(|r| (e.id, r)))
            .collect();
        let mut events = Vec::new();
        for (id, reason) in due {
            events.extend(self.remove_ids(&[id], reason, now));
        }
        events
    }

    /// Records that a packet of `bytes` bytes matched entry `id` at `now`:
    /// counters grow and the idle timeout restarts. False if no such entry.
    pub fn note_hit(&mut self, id: FlowId, now: Time, bytes: u64) -> bool {
        let Some(t) = self.location.get(&id) else {
            return false;
        };
        let Some(e) = self
            .tables
            .get_mut(usize::from(*t))
            .and_then(|table| table.entries.get_mut(&id))
        else {
            return false;
        };
        e.packet_count = e.packet_count.wrapping_add(1);
        e.byte_count = e.byte_count.wrapping_add(bytes);
        if now > e.last_used {
            e.last_used = now;
        }
        true
    }

    /// Records one lookup in `table_id` and whether it matched an entry.
    pub fn note_lookup(&mut self, table_id: u8, matched: bool) {
        if let Some(t) = self.tables.get_mut(usize::from(table_id)) {
            t.lookup_count = t.lookup_count.wrapping_add(1);
            if matched {
                t.matched_count = t.matched_count.wrapping_add(1);
            }
        }
    }

    /// The entries a statistics request selects, in table then
    /// installation order. Errors: `BAD_REQUEST/BAD_TABLE_ID` for a table
    /// that does not exist, `BAD_MATCH/*` for an invalid match.
    pub fn filter(&self, filter: &FlowFilter) -> Result<Vec<&FlowEntry>, OfpError> {
        if filter.table_id != table_no::ALL && filter.table_id >= self.config.n_tables {
            return Err(OfpError::BadRequest(BadRequestCode::BadTableId));
        }
        let key = MatchKey::new(&filter.match_)?;
        let ids = self.select(
            filter.table_id,
            &key,
            None,
            filter.cookie,
            filter.cookie_mask,
            filter.out_port,
            filter.out_group,
        );
        Ok(ids.iter().filter_map(|id| self.entry(*id)).collect())
    }

    /// The FLOW multipart reply body for a request.
    pub fn flow_stats(&self, filter: &FlowFilter, now: Time) -> Result<Vec<FlowStats>, OfpError> {
        Ok(self
            .filter(filter)?
            .into_iter()
            .map(|e| {
                let (duration_sec, duration_nsec) = now.duration_since(e.installed_at);
                FlowStats {
                    table_id: e.table_id,
                    duration_sec,
                    duration_nsec,
                    priority: e.priority,
                    idle_timeout: e.idle_timeout,
                    hard_timeout: e.hard_timeout,
                    flags: e.flags,
                    cookie: e.cookie,
                    packet_count: e.reported_packet_count(),
                    byte_count: e.reported_byte_count(),
                    match_: e.match_.clone(),
                    instructions: e.instructions.clone(),
                }
            })
            .collect())
    }

    /// The AGGREGATE multipart reply body for a request.
    pub fn aggregate_stats(&self, filter: &FlowFilter) -> Result<AggregateStats, OfpError> {
        let mut agg = AggregateStats::default();
        for e in self.filter(filter)? {
            agg.flow_count = agg.flow_count.saturating_add(1);
            if e.flags & flow_mod_flags::NO_PKT_COUNTS == 0 {
                agg.packet_count = agg.packet_count.wrapping_add(e.packet_count);
            }
            if e.flags & flow_mod_flags::NO_BYT_COUNTS == 0 {
                agg.byte_count = agg.byte_count.wrapping_add(e.byte_count);
            }
        }
        Ok(agg)
    }

    /// The TABLE multipart reply body: one entry per table.
    pub fn table_stats(&self) -> Vec<TableStats> {
        self.tables
            .iter()
            .enumerate()
            .map(|(i, t)| TableStats {
                table_id: u8::try_from(i).unwrap_or(table_no::MAX),
                active_count: u32::try_from(t.entries.len()).unwrap_or(u32::MAX),
                lookup_count: t.lookup_count,
                matched_count: t.matched_count,
            })
            .collect()
    }

    /// Checks every invariant of the module comment; panics naming the
    /// broken one. For tests.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut total = 0;
        let mut groups: HashMap<u32, BTreeSet<FlowId>> = HashMap::new();
        let mut meters: HashMap<u32, BTreeSet<FlowId>> = HashMap::new();
        for (t, table) in self.tables.iter().enumerate() {
            assert!(
                table.entries.len() <= self.config.max_entries,
                "5: capacity"
            );
            assert_eq!(table.by_key.len(), table.entries.len(), "2: by_key size");
            for (id, e) in &table.entries {
                total += 1;
                assert_eq!(*id, e.id, "1: id");
                assert_eq!(usize::from(e.table_id), t, "1: table id");
                assert_eq!(self.location.get(id).map(|x| usize::from(*x)), Some(t), "1");
                assert_eq!(
                    table.by_key.get(&(e.priority, e.key.clone())),
                    Some(id),
                    "2"
                );
                assert_eq!(MatchKey::new(&e.match_).as_ref(), Ok(&e.key), "3");
                for g in e.groups() {
                    groups.entry(g).or_default().insert(*id);
                }
                if let Some(m) = e.meter() {
                    meters.entry(m).or_default().insert(*id);
                }
            }
        }
        assert_eq!(total, self.location.len(), "1: location size");
        assert_eq!(groups, self.group_refs, "4: group refs");
        assert_eq!(meters, self.meter_refs, "4: meter refs");
    }
}

fn unref(index: &mut HashMap<u32, BTreeSet<FlowId>>, key: u32, id: FlowId) {
    if let Some(set) = index.get_mut(&key) {
        set.remove(&id);
        if set.is_empty() {
            index.remove(&key);
        }
    }
}
