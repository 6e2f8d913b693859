//! FLOW_MOD semantics (spec 1.3.5 §6.4): validation, ADD, MODIFY,
//! DELETE and their strict forms, and the indexes of group and meter users.

use super::set::{entry_bytes, fm_failed, Tables, KNOWN_FLAGS, MAX_TABLE_ENTRIES};
use super::stats::passes;
use crate::model::flow_entry::{EntryCounter, FlowEntry, FlowId, FlowRemoved, RemovalReason};
use crate::model::instructions;
use crate::model::match_key::MatchKey;
use crate::tables::compiled;
use crate::tables::groups::Groups;
use crate::tables::meters::Meters;
use crate::tables::validate::{validate_instructions, InstructionContext};
use crate::Time;
use ofp::consts::{table_no, OFP_NO_BUFFER};
use ofp::error::FlowModFailedCode;
use ofp::flow_mod::flow_mod_flags;
use ofp::{FlowMod, FlowModCommand, OfpError};
use std::collections::{BTreeSet, HashMap};

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

impl Tables {
    /// Applies one FLOW_MOD at time `now`. `groups` and `meters` are the
    /// switch's group and meter tables, against which group actions and
    /// meter instructions are checked. On error nothing has changed.
    ///
    /// Checks, in this order (the first failing one is answered):
    /// unknown flag bits (`FLOW_MOD_FAILED/BAD_FLAGS`); the table id
    /// (`FLOW_MOD_FAILED/BAD_TABLE_ID`, also for `OFPTT_ALL` outside
    /// DELETE*); the match (`BAD_MATCH/*`); for ADD and MODIFY*, the
    /// instructions and their actions (see [`crate::validate`]); for ADD,
    /// CHECK_OVERLAP (`FLOW_MOD_FAILED/OVERLAP`) and then room in the
    /// table (`FLOW_MOD_FAILED/TABLE_FULL`).
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
        if !all_tables && fm.table_id >= self.n_tables() {
            return Err(fm_failed(FlowModFailedCode::BadTableId));
        }
        let key = MatchKey::new(&fm.match_)?;
        if !is_delete {
            let group_exists = |g: u32| groups.contains(g);
            let meter_exists = |m: u32| meters.contains(m);
            let ctx = InstructionContext {
                table_id: fm.table_id,
                n_tables: self.n_tables(),
                group_exists: &group_exists,
                meter_exists: &meter_exists,
                policy: self.config().policy,
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
    pub(super) fn add(
        &mut self,
        fm: &FlowMod,
        key: MatchKey,
        now: Time,
    ) -> Result<FlowModOutcome, OfpError> {
        let config = *self.config();
        let table = self
            .table(fm.table_id)
            .ok_or(fm_failed(FlowModFailedCode::BadTableId))?;
        if fm.flags & flow_mod_flags::CHECK_OVERLAP != 0
            && table
                .entries()
                .any(|e| e.priority == fm.priority && e.key.overlaps(&key))
        {
            return Err(fm_failed(FlowModFailedCode::Overlap));
        }
        let existing = self.find_key(fm.table_id, fm.priority, &key);
        let max_entries = config.max_entries.min(MAX_TABLE_ENTRIES);
        if existing.is_none() && table.len() >= max_entries {
            return Err(fm_failed(FlowModFailedCode::TableFull));
        }
        if config.max_bytes > 0 {
            let freed = existing
                .and_then(|id| self.entry(id))
                .map_or(0, |e| entry_bytes(&e.key, e.instructions.counts()));
            let after = self.bytes - freed.min(self.bytes)
                + entry_bytes(&key, instructions::counts_of(&fm.instructions));
            if after > config.max_bytes {
                return Err(fm_failed(FlowModFailedCode::TableFull));
            }
        }
        // From here on nothing can fail.
        let old = existing.and_then(|id| self.detach(id));
        let id = match &old {
            Some((e, _)) => e.id,
            None => {
                let id = FlowId(self.next_id);
                self.next_id += 1;
                id
            }
        };
        let counter = match &old {
            Some((_, c)) if fm.flags & flow_mod_flags::RESET_COUNTS == 0 => EntryCounter {
                last_used: now,
                ..*c
            },
            _ => EntryCounter {
                last_used: now,
                ..EntryCounter::default()
            },
        };
        let entry = FlowEntry {
            id,
            table_id: fm.table_id,
            priority: fm.priority,
            sent: FlowEntry::sent_match(&fm.match_, &key),
            key,
            instructions: compiled::entry_instructions(&fm.instructions),
            cookie: fm.cookie,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            flags: fm.flags,
            installed_at: now,
        };
        self.attach(entry, counter);
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
    pub(super) fn modify(&mut self, fm: &FlowMod, key: &MatchKey, strict: bool) -> FlowModOutcome {
        let ids = self.select_for(
            fm,
            key,
            strict,
            ofp::consts::port_no::ANY,
            ofp::consts::group_no::ANY,
        );
        let reset = fm.flags & flow_mod_flags::RESET_COUNTS != 0;
        for id in &ids {
            if let Some((e, mut c)) = self.detach(*id) {
                let mut e = FlowEntry::clone(&e);
                e.instructions = compiled::entry_instructions(&fm.instructions);
                if reset {
                    c.packets = 0;
                    c.bytes = 0;
                }
                self.attach(e, c);
            }
        }
        FlowModOutcome {
            modified: ids,
            ..FlowModOutcome::default()
        }
    }

    /// DELETE / DELETE_STRICT (spec §6.4), with the cookie, out_port and
    /// out_group filters; `OFPTT_ALL` covers every table.
    pub(super) fn delete(
        &mut self,
        fm: &FlowMod,
        key: &MatchKey,
        strict: bool,
        now: Time,
    ) -> FlowModOutcome {
        let ids = self.select_for(fm, key, strict, fm.out_port, fm.out_group);
        let flow_removed = self.remove_ids(&ids, RemovalReason::Delete, now);
        FlowModOutcome {
            deleted: ids,
            flow_removed,
            ..FlowModOutcome::default()
        }
    }

    /// [`Self::select`] with `fm`'s table, cookie filter and (when
    /// `strict`) priority; MODIFY and DELETE differ only in the port and
    /// group filters.
    fn select_for(
        &self,
        fm: &FlowMod,
        key: &MatchKey,
        strict: bool,
        out_port: u32,
        out_group: u32,
    ) -> Vec<FlowId> {
        let priority = strict.then_some(fm.priority);
        let (cookie, mask) = (fm.cookie, fm.cookie_mask);
        self.select(
            fm.table_id,
            key,
            priority,
            cookie,
            mask,
            out_port,
            out_group,
        )
    }

    /// The entries a modify/delete/stats request selects. `priority` set
    /// means strict: the same match as a set of fields and the same
    /// priority; otherwise every entry at least as specific as `key`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn select(
        &self,
        table_id: u8,
        key: &MatchKey,
        priority: Option<u16>,
        cookie: u64,
        cookie_mask: u64,
        out_port: u32,
        out_group: u32,
    ) -> Vec<FlowId> {
        let tables: Vec<u8> = if table_id == table_no::ALL {
            (0..self.n_tables()).collect()
        } else {
            vec![table_id]
        };
        let keep = |e: &FlowEntry| passes(e, cookie, cookie_mask, out_port, out_group);
        let mut ids = Vec::new();
        for t in tables {
            match priority {
                Some(p) => {
                    if let Some(e) = self.find_key(t, p, key).and_then(|id| self.entry(id)) {
                        if keep(e) {
                            ids.push(e.id);
                        }
                    }
                }
                None => ids.extend(
                    self.entries_in(t)
                        .filter(|e| e.key.is_within(key) && keep(e))
                        .map(|e| e.id),
                ),
            }
        }
        ids
    }

    /// Removes entries, returning FLOW_REMOVED events for those that asked.
    pub(super) fn remove_ids(
        &mut self,
        ids: &[FlowId],
        reason: RemovalReason,
        now: Time,
    ) -> Vec<FlowRemoved> {
        let mut events = Vec::new();
        for id in ids {
            if let Some((e, c)) = self.detach(*id) {
                if e.sends_flow_removed() {
                    events.push(e.removed_event(reason, now, &c));
                }
            }
        }
        events
    }

    /// Removes every entry forwarding to `group` (it was deleted), with
    /// reason `GROUP_DELETE`.
    pub fn remove_group_users(&mut self, group: u32, now: Time) -> Vec<FlowRemoved> {
        let ids = users(&self.group_refs, group);
        self.remove_ids(&ids, RemovalReason::GroupDelete, now)
    }

    /// Removes every entry using `meter` (it was deleted), with reason
    /// [`RemovalReason::MeterDelete`].
    pub fn remove_meter_users(&mut self, meter: u32, now: Time) -> Vec<FlowRemoved> {
        let ids = users(&self.meter_refs, meter);
        self.remove_ids(&ids, RemovalReason::MeterDelete, now)
    }
}

/// The entries that `refs` (group_refs or meter_refs) lists under `id`.
fn users(refs: &HashMap<u32, BTreeSet<FlowId>>, id: u32) -> Vec<FlowId> {
    refs.get(&id)
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default()
}
