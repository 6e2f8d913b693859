//! Tests of the flow tables.

use super::flow_mod::*;
use super::set::*;
use super::stats::*;
use super::table::*;
use crate::model::flow_entry::{EntryCounter, FlowEntry, FlowId, RemovalReason};
use crate::model::match_key::MatchKey;
use crate::tables::compiled::FastEntry;
use crate::tables::groups::{Groups, GroupsConfig};
use crate::tables::meters::{Meters, MetersConfig};
use crate::Time;
use ofp::consts::table_no;
use ofp::consts::OFP_NO_BUFFER;
use ofp::consts::{group_no, port_no};
use ofp::error::BadRequestCode;
use ofp::error::FlowModFailedCode;
use ofp::error::{BadActionCode, BadInstructionCode, BadMatchCode, MeterModFailedCode};
use ofp::flow_mod::flow_mod_flags;
use ofp::stats::AggregateStats;
use ofp::stats::{FlowStats, TableStats};
use ofp::{Action, GroupMod, GroupModCommand, GroupType, Instruction, MeterBand, MeterMod};
use ofp::{FlowMod, FlowModCommand, Match, OfpError};
use ofp::{MeterModCommand, Oxm, OxmField, OxmValue};
use packet::flow_key::FlowKey;
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

impl Tables {
    /// Everything observable, in a canonical order: for "a failed
    /// modification changed nothing" checks. For tests.
    pub(crate) fn snapshot(&self) -> (Vec<(FlowEntry, EntryCounter)>, Vec<TableStats>, u64) {
        let entries = self
            .entries()
            .map(|e| (e.clone(), self.counter(e.id).unwrap_or_default()))
            .collect();
        (entries, self.table_stats(), self.next_id)
    }

    /// Checks every invariant of the module comment; panics naming the
    /// broken one. For tests.
    pub(crate) fn check_invariants(&self) {
        let mut total = 0;
        let mut groups: HashMap<u32, BTreeSet<FlowId>> = HashMap::new();
        let mut meters: HashMap<u32, BTreeSet<FlowId>> = HashMap::new();
        for (t, book) in self.books.iter().enumerate() {
            let table = self.table(t as u8).expect("a table per book");
            let n = book.order.len();
            assert!(n <= self.config().max_entries, "5: capacity");
            assert_eq!(table.len(), n, "1: published size");
            assert_eq!(
                book.by_key.len() + book.by_key_overflow.len(),
                n,
                "2: by_key size"
            );
            assert_eq!(table.index().len(), n, "7: index size");
            assert!(!table.index_broken(), "7: index refused a rule");
            assert_eq!(
                n + book.free.len(),
                book.next_slot as usize,
                "9: slots used and free"
            );
            for &slot in &book.free {
                assert!(table.slot(slot).is_none(), "9: a free slot is empty");
                assert!(!table.is_general(slot), "9: general bit of a free slot");
                assert!(
                    book.counters
                        .get(slot as usize)
                        .is_none_or(|s| s.id == FlowId(0)),
                    "10: a free slot counts for no entry"
                );
            }
            assert!(
                table.slot_count() <= book.next_slot as usize,
                "9: slot count"
            );
            for (id, &slot) in &book.order {
                let place = self.location.get(id).expect("8: order holds placed ids");
                assert_eq!(usize::from(place.table), t, "1: location");
                assert_eq!(place.slot, slot, "8: order's slot");
                let e = table.slot(slot).expect("9: slot of an entry");
                assert_eq!(table.fast(slot), Some(&FastEntry::compile(e)), "9: fast");
                let compiled = FastEntry::compile(e).ops().is_some();
                assert_eq!(table.is_general(slot), !compiled, "9: general bit");
                assert_eq!(
                    book.counters.get(slot as usize).map(|s| s.id),
                    Some(*id),
                    "10: counters"
                );
                total += 1;
                assert_eq!(*id, e.id, "1: id");
                assert_eq!(usize::from(e.table_id), t, "1: table id");
                assert_eq!(self.find_key(t as u8, e.priority, &e.key), Some(*id), "2");
                assert_eq!(MatchKey::new(&e.match_()).as_ref(), Ok(&e.key), "3");
                let rid = rule_id(*id, slot).expect("7: rule id");
                let mut rule = rule_of(e, rid);
                rule.canonicalize().unwrap();
                assert!(table.index().contains(&rule), "7: index rule");
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

impl TableSet {
    /// Table `t` as shared with the snapshots.
    fn set_shared(&self, t: u8) -> &Arc<FlowTable> {
        self.shared(t).unwrap()
    }

    /// The published content: every entry with its table and slot.
    pub(crate) fn content(&self) -> Vec<(u8, u32, FlowEntry)> {
        (0..self.n_tables())
            .filter_map(|t| Some((t, self.table(t)?)))
            .flat_map(|(t, table)| table.slots().map(move |(s, e)| (t, s, FlowEntry::clone(e))))
            .collect()
    }

    /// Each table's compiled entries and index mirror its slots.
    pub(crate) fn check_invariants(&self) {
        for t in 0..self.n_tables() {
            let table = self.table(t).unwrap();
            assert_eq!(table.index().len(), table.len(), "index size");
            assert!(!table.index_broken());
            for (slot, e) in table.slots() {
                assert_eq!(table.fast(slot), Some(&FastEntry::compile(e)), "fast");
                let mut rule = rule_of(e, rule_id(e.id, slot).unwrap());
                rule.canonicalize().unwrap();
                assert!(table.index().contains(&rule), "index rule");
            }
        }
    }
}

const SEND: u16 = flow_mod_flags::SEND_FLOW_REM;

fn exact(field: OxmField, value: OxmValue) -> Oxm {
    Oxm::Basic {
        field,
        value,
        mask: None,
    }
}

fn in_port(p: u32) -> Oxm {
    exact(OxmField::InPort, OxmValue::U32(p))
}

fn eth_type(t: u16) -> Oxm {
    exact(OxmField::EthType, OxmValue::U16(t))
}

fn ipv4_dst(a: [u8; 4], prefix: u32) -> Oxm {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    Oxm::Basic {
        field: OxmField::Ipv4Dst,
        value: OxmValue::Ipv4(Ipv4Addr::from(u32::from(Ipv4Addr::from(a)) & mask)),
        mask: Some(OxmValue::Ipv4(Ipv4Addr::from(mask))),
    }
}

fn output(port: u32) -> Vec<Instruction> {
    vec![Instruction::ApplyActions {
        actions: vec![Action::Output { port, max_len: 0 }],
    }]
}

fn flow(command: FlowModCommand, table_id: u8, priority: u16, fields: Vec<Oxm>) -> FlowMod {
    FlowMod {
        command,
        table_id,
        priority,
        match_: Match { fields },
        ..FlowMod::default()
    }
}

fn add(table_id: u8, priority: u16, fields: Vec<Oxm>, port: u32) -> FlowMod {
    FlowMod {
        instructions: output(port),
        ..flow(FlowModCommand::Add, table_id, priority, fields)
    }
}

struct Switch {
    tables: Tables,
    groups: Groups,
    meters: Meters,
}

impl Switch {
    fn new(n_tables: u8, max_entries: usize) -> Switch {
        Switch {
            tables: Tables::new(TablesConfig {
                n_tables,
                max_entries,
                ..TablesConfig::default()
            }),
            groups: Groups::new(GroupsConfig::default()),
            meters: Meters::new(MetersConfig::default()),
        }
    }

    fn apply(&mut self, fm: &FlowMod, now: Time) -> Result<FlowModOutcome, OfpError> {
        let r = self
            .tables
            .apply_flow_mod(fm, now, &self.groups, &self.meters);
        self.tables.check_invariants();
        r
    }

    /// Applies a modification that must fail with `err` and checks
    /// that it changed nothing.
    fn refuse(&mut self, fm: &FlowMod, err: OfpError) {
        let before = self.tables.snapshot();
        assert_eq!(self.apply(fm, Time::from_secs(99)), Err(err), "{fm:?}");
        assert_eq!(self.tables.snapshot(), before, "failed mod changed state");
    }

    fn ok(&mut self, fm: &FlowMod, now: Time) -> FlowModOutcome {
        self.apply(fm, now).unwrap()
    }

    fn add_group(&mut self, id: u32) {
        let gm = GroupMod {
            command: GroupModCommand::Add,
            group_type: GroupType::All,
            group_id: id,
            buckets: vec![],
        };
        self.groups.apply_group_mod(&gm, Time(0)).unwrap();
    }

    fn add_meter(&mut self, id: u32) {
        let mm = MeterMod {
            command: MeterModCommand::Add,
            flags: ofp::meter_mod::meter_flags::KBPS,
            meter_id: id,
            bands: vec![MeterBand::Drop {
                rate: 1000,
                burst_size: 0,
            }],
        };
        self.meters.apply_meter_mod(&mm, Time(0)).unwrap();
    }

    fn stats(&self, filter: &FlowFilter, now: Time) -> Vec<FlowStats> {
        self.tables.flow_stats(filter, now).unwrap()
    }

    fn all(&self) -> Vec<FlowStats> {
        self.stats(&any_flow(), Time::from_secs(1000))
    }
}

fn fmf(code: FlowModFailedCode) -> OfpError {
    OfpError::FlowModFailed(code)
}

#[test]
fn add_installs_an_entry_that_stats_report_as_sent() {
    let mut sw = Switch::new(4, 100);
    // Prerequisite after the field that needs it: order kept as sent.
    let fields = vec![ipv4_dst([10, 0, 0, 0], 8), eth_type(0x0800), in_port(3)];
    let mut fm = add(1, 100, fields.clone(), 2);
    fm.cookie = 0xabc;
    fm.idle_timeout = 10;
    fm.hard_timeout = 20;
    fm.flags = SEND;
    let out = sw.ok(&fm, Time::from_secs(5));
    assert!(out.installed.is_some() && !out.replaced);
    assert_eq!(out.release_buffer, None);
    let stats = sw.stats(&any_flow(), Time(5_000_000_000 + 2_500_000_000));
    assert_eq!(stats.len(), 1);
    let s = &stats[0];
    assert_eq!(s.match_.fields, fields);
    assert_eq!(
        (
            s.table_id,
            s.priority,
            s.cookie,
            s.idle_timeout,
            s.hard_timeout,
            s.flags
        ),
        (1, 100, 0xabc, 10, 20, SEND)
    );
    assert_eq!((s.duration_sec, s.duration_nsec), (2, 500_000_000));
    assert_eq!((s.packet_count, s.byte_count), (0, 0));
    assert_eq!(s.instructions, output(2));
}

#[test]
fn a_match_in_field_order_is_not_stored_twice_and_reads_back_as_sent() {
    let mut sw = Switch::new(1, 100);
    let ip = |a: [u8; 4], m: [u8; 4]| Oxm::Basic {
        field: OxmField::Ipv4Dst,
        value: OxmValue::Ipv4(Ipv4Addr::from(a)),
        mask: Some(OxmValue::Ipv4(Ipv4Addr::from(m))),
    };
    let cases = [
        // In field order, exact fields unmasked: the key gives it back.
        (
            vec![in_port(1), eth_type(0x0800), ipv4_dst([10, 1, 0, 0], 16)],
            false,
        ),
        // Out of order.
        (vec![eth_type(0x0800), in_port(2)], true),
        // An explicit all-ones mask.
        (vec![eth_type(0x0800), ip([10, 0, 0, 3], [255; 4])], true),
    ];
    for (priority, (fields, kept)) in cases.into_iter().enumerate() {
        let fm = add(0, priority as u16, fields.clone(), 2);
        let id = sw.ok(&fm, Time(0)).installed.unwrap();
        let e = sw.tables.entry(id).unwrap();
        assert_eq!(e.sent.is_some(), kept, "{fields:?}");
        assert_eq!(e.match_().fields, fields);
        assert_eq!(e.to_flow_mod().match_.fields, fields);
    }
}

#[test]
fn add_with_identical_match_replaces_and_keeps_counters_unless_reset() {
    let mut sw = Switch::new(4, 100);
    let a = vec![in_port(1), eth_type(0x0800)];
    let b = vec![eth_type(0x0800), in_port(1)]; // same set, other order
    let mut first = add(0, 10, a, 2);
    first.flags = SEND;
    let id = sw.ok(&first, Time::from_secs(1)).installed.unwrap();
    assert!(sw.tables.note_hit(id, Time::from_secs(2), 100));
    assert!(sw.tables.note_hit(id, Time::from_secs(2), 60));

    let mut second = add(0, 10, b.clone(), 3);
    second.cookie = 7;
    let out = sw.ok(&second, Time::from_secs(4));
    assert_eq!((out.installed, out.replaced), (Some(id), true));
    assert!(out.flow_removed.is_empty(), "no FLOW_REMOVED on replace");
    let s = sw.stats(&any_flow(), Time::from_secs(5));
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].packet_count, s[0].byte_count), (2, 160));
    assert_eq!(s[0].duration_sec, 1, "duration restarts");
    assert_eq!((s[0].cookie, s[0].flags), (7, 0), "new cookie and flags");
    assert_eq!(s[0].match_.fields, b, "new match TLVs as sent");
    assert_eq!(s[0].instructions, output(3));

    let mut third = add(0, 10, b, 4);
    third.flags = flow_mod_flags::RESET_COUNTS;
    assert!(sw.ok(&third, Time::from_secs(6)).replaced);
    let s = sw.all();
    assert_eq!((s[0].packet_count, s[0].byte_count), (0, 0));

    // A different priority is a different entry.
    let other = sw.ok(&add(0, 11, vec![in_port(1)], 2), Time(0));
    assert!(!other.replaced);
    assert_eq!(sw.tables.len(), 2);
}

#[test]
fn check_overlap_refuses_entries_a_packet_could_match_together() {
    let mut sw = Switch::new(2, 100);
    sw.ok(
        &add(0, 5, vec![eth_type(0x0800), ipv4_dst([10, 0, 0, 0], 8)], 1),
        Time(0),
    );
    let mut fm = add(0, 5, vec![in_port(1)], 1);
    fm.flags = flow_mod_flags::CHECK_OVERLAP;
    sw.refuse(&fm, fmf(FlowModFailedCode::Overlap));
    let mut narrower = add(0, 5, vec![eth_type(0x0800), ipv4_dst([10, 1, 0, 0], 16)], 1);
    narrower.flags = flow_mod_flags::CHECK_OVERLAP;
    sw.refuse(&narrower, fmf(FlowModFailedCode::Overlap));
    let mut identical = add(0, 5, vec![ipv4_dst([10, 0, 0, 0], 8), eth_type(0x0800)], 1);
    identical.flags = flow_mod_flags::CHECK_OVERLAP;
    sw.refuse(&identical, fmf(FlowModFailedCode::Overlap));
    // Disjoint, other priority or other table: fine.
    let mut disjoint = add(0, 5, vec![eth_type(0x0800), ipv4_dst([11, 0, 0, 0], 8)], 1);
    disjoint.flags = flow_mod_flags::CHECK_OVERLAP;
    sw.ok(&disjoint, Time(0));
    let mut ipv6 = add(0, 5, vec![eth_type(0x86dd)], 1);
    ipv6.flags = flow_mod_flags::CHECK_OVERLAP;
    sw.ok(&ipv6, Time(0));
    fm.priority = 6;
    sw.ok(&fm, Time(0));
    fm.table_id = 1;
    fm.priority = 5;
    sw.ok(&fm, Time(0));
    assert_eq!(sw.tables.len(), 5);
}

#[test]
fn a_full_table_refuses_new_entries_but_accepts_replacements() {
    let mut sw = Switch::new(2, 2);
    sw.ok(&add(0, 1, vec![in_port(1)], 2), Time(0));
    sw.ok(&add(0, 1, vec![in_port(2)], 2), Time(0));
    sw.refuse(
        &add(0, 1, vec![in_port(3)], 2),
        fmf(FlowModFailedCode::TableFull),
    );
    assert!(sw.ok(&add(0, 1, vec![in_port(2)], 5), Time(0)).replaced);
    sw.ok(&add(1, 1, vec![in_port(3)], 2), Time(0));
    assert_eq!(sw.tables.len(), 3);
}

#[test]
fn a_memory_budget_refuses_new_entries_past_it_and_counts_replacements() {
    let mut sw = Switch::new(2, MAX_TABLE_ENTRIES);
    let one = entry_bytes(
        &MatchKey::new(&Match {
            fields: vec![in_port(1)],
        })
        .unwrap(),
        crate::model::instructions::counts_of(&output(2)),
    );
    sw.tables.set.config.max_bytes = 3 * one + one / 2;
    for p in 1..=3 {
        sw.ok(&add(0, 10, vec![in_port(p)], 2), Time(0));
    }
    assert_eq!(sw.tables.memory_estimate(), 3 * one);
    sw.refuse(
        &add(1, 10, vec![in_port(4)], 2),
        fmf(FlowModFailedCode::TableFull),
    );
    // Replacing an entry frees what it held first.
    sw.ok(&add(0, 10, vec![in_port(3)], 5), Time(1));
    // Deleting makes room.
    let mut del = flow(FlowModCommand::DeleteStrict, 0, 10, vec![in_port(1)]);
    del.out_port = port_no::ANY;
    del.out_group = group_no::ANY;
    sw.ok(&del, Time(2));
    assert_eq!(sw.tables.memory_estimate(), 2 * one);
    sw.ok(&add(1, 10, vec![in_port(4)], 2), Time(3));
}

#[test]
fn table_ids_and_flags_are_checked() {
    let mut sw = Switch::new(4, 10);
    sw.ok(&add(3, 1, vec![], 1), Time(0));
    sw.refuse(&add(4, 1, vec![], 1), fmf(FlowModFailedCode::BadTableId));
    sw.refuse(
        &add(table_no::ALL, 1, vec![], 1),
        fmf(FlowModFailedCode::BadTableId),
    );
    for cmd in [FlowModCommand::Modify, FlowModCommand::ModifyStrict] {
        sw.refuse(
            &flow(cmd, table_no::ALL, 1, vec![]),
            fmf(FlowModFailedCode::BadTableId),
        );
    }
    for cmd in [FlowModCommand::Delete, FlowModCommand::DeleteStrict] {
        sw.refuse(
            &flow(cmd, 200, 1, vec![]),
            fmf(FlowModFailedCode::BadTableId),
        );
    }
    for bit in 5..16 {
        let mut fm = add(0, 1, vec![], 1);
        fm.flags = 1 << bit;
        sw.refuse(&fm, fmf(FlowModFailedCode::BadFlags));
        let mut del = flow(FlowModCommand::Delete, 0, 1, vec![]);
        del.flags = 1 << bit;
        sw.refuse(&del, fmf(FlowModFailedCode::BadFlags));
    }
    assert_eq!(sw.tables.len(), 1);
    let out = sw.ok(
        &flow(FlowModCommand::Delete, table_no::ALL, 0, vec![]),
        Time(0),
    );
    assert_eq!(out.deleted.len(), 1);
}

#[test]
fn bad_matches_and_instructions_are_refused_with_their_codes() {
    let mut sw = Switch::new(4, 10);
    sw.add_group(7);
    sw.add_meter(3);
    sw.ok(&add(0, 1, vec![in_port(1)], 1), Time(0));
    let with = |instructions: Vec<Instruction>| FlowMod {
        instructions,
        ..flow(FlowModCommand::Add, 1, 1, vec![])
    };
    sw.refuse(
        &add(0, 1, vec![ipv4_dst([10, 0, 0, 0], 8)], 1),
        OfpError::BadMatch(BadMatchCode::BadPrereq),
    );
    sw.refuse(
        &add(0, 1, vec![in_port(1), in_port(2)], 1),
        OfpError::BadMatch(BadMatchCode::DupField),
    );
    // Match errors also for modify and delete.
    sw.refuse(
        &flow(FlowModCommand::Delete, 0, 1, vec![in_port(1), in_port(1)]),
        OfpError::BadMatch(BadMatchCode::DupField),
    );
    sw.refuse(
        &flow(
            FlowModCommand::Modify,
            0,
            1,
            vec![ipv4_dst([1, 0, 0, 0], 8)],
        ),
        OfpError::BadMatch(BadMatchCode::BadPrereq),
    );
    sw.refuse(
        &with(vec![Instruction::GotoTable { table_id: 1 }]),
        OfpError::BadInstruction(BadInstructionCode::BadTableId),
    );
    sw.refuse(
        &with(vec![Instruction::GotoTable { table_id: 4 }]),
        OfpError::BadInstruction(BadInstructionCode::BadTableId),
    );
    sw.refuse(
        &with(vec![Instruction::ClearActions, Instruction::ClearActions]),
        OfpError::BadInstruction(BadInstructionCode::UnsupInst),
    );
    sw.refuse(
        &with(vec![Instruction::Experimenter {
            experimenter: 1,
            data: vec![],
        }]),
        OfpError::BadInstruction(BadInstructionCode::UnsupInst),
    );
    sw.refuse(
        &with(vec![Instruction::Meter { meter_id: 4 }]),
        OfpError::MeterModFailed(MeterModFailedCode::UnknownMeter),
    );
    sw.refuse(
        &with(vec![Instruction::WriteActions {
            actions: vec![Action::Group { group_id: 8 }],
        }]),
        OfpError::BadAction(BadActionCode::BadOutGroup),
    );
    sw.refuse(
        &with(output(0)),
        OfpError::BadAction(BadActionCode::BadOutPort),
    );
    sw.refuse(
        &with(output(port_no::TABLE)),
        OfpError::BadAction(BadActionCode::BadOutPort),
    );
    sw.refuse(
        &with(vec![Instruction::ApplyActions {
            actions: vec![Action::Experimenter {
                experimenter: 1,
                data: vec![],
            }],
        }]),
        OfpError::BadAction(BadActionCode::BadExperimenter),
    );
    sw.refuse(
        &with(vec![Instruction::ApplyActions {
            actions: vec![Action::SetField {
                field: exact(OxmField::Ipv4Src, OxmValue::Ipv4(Ipv4Addr::LOCALHOST)),
            }],
        }]),
        OfpError::BadAction(BadActionCode::MatchInconsistent),
    );
    // Instruction errors on MODIFY too, and nothing changes.
    let mut m = flow(FlowModCommand::Modify, 0, 1, vec![]);
    m.instructions = output(0);
    sw.refuse(&m, OfpError::BadAction(BadActionCode::BadOutPort));
    // The same instructions with existing group and meter pass.
    let good = with(vec![
        Instruction::Meter { meter_id: 3 },
        Instruction::WriteActions {
            actions: vec![Action::Group { group_id: 7 }],
        },
        Instruction::GotoTable { table_id: 3 },
    ]);
    sw.ok(&good, Time(0));
    assert_eq!(sw.tables.group_ref_count(7), 1);
    assert_eq!(sw.tables.meter_flow_count(3), 1);
    // DELETE ignores its (invalid) instructions.
    let mut del = flow(FlowModCommand::Delete, table_no::ALL, 0, vec![]);
    del.instructions = output(0);
    assert_eq!(sw.ok(&del, Time(0)).deleted.len(), 2);
    assert_eq!(sw.tables.group_ref_count(7), 0);
}

#[test]
fn modify_changes_instructions_of_selected_entries_only() {
    let mut sw = Switch::new(2, 100);
    let mut wide = add(0, 1, vec![eth_type(0x0800), ipv4_dst([10, 0, 0, 0], 8)], 1);
    wide.cookie = 0x10;
    wide.idle_timeout = 30;
    wide.flags = SEND;
    let a = sw.ok(&wide, Time::from_secs(1)).installed.unwrap();
    let mut narrow = add(0, 2, vec![eth_type(0x0800), ipv4_dst([10, 1, 0, 0], 16)], 1);
    narrow.cookie = 0x20;
    let b = sw.ok(&narrow, Time::from_secs(1)).installed.unwrap();
    let c = sw
        .ok(&add(0, 3, vec![eth_type(0x86dd)], 1), Time::from_secs(1))
        .installed
        .unwrap();
    sw.tables.note_hit(a, Time::from_secs(2), 10);

    // Non-strict with a /8: both IPv4 entries, not the IPv6 one.
    let mut m = flow(
        FlowModCommand::Modify,
        0,
        999,
        vec![eth_type(0x0800), ipv4_dst([10, 0, 0, 0], 8)],
    );
    m.instructions = output(9);
    m.idle_timeout = 1; // ignored by modify
    m.cookie = 0x99; // not a filter: cookie_mask is 0
    let out = sw.ok(&m, Time::from_secs(3));
    assert_eq!(out.modified, vec![a, b]);
    let e = sw.tables.entry(a).unwrap();
    assert_eq!(e.instructions.to_vec(), output(9));
    assert_eq!((e.cookie, e.idle_timeout, e.flags), (0x10, 30, SEND));
    assert_eq!(sw.tables.counter(a).unwrap().packets, 1, "counters kept");
    assert_eq!(e.installed_at, Time::from_secs(1), "duration kept");
    assert_eq!(sw.tables.entry(c).unwrap().instructions.to_vec(), output(1));

    // Cookie filter.
    m.cookie = 0x20;
    m.cookie_mask = 0xff;
    m.instructions = output(8);
    assert_eq!(sw.ok(&m, Time(0)).modified, vec![b]);

    // RESET_COUNTS.
    let mut r = flow(FlowModCommand::Modify, 0, 0, vec![]);
    r.instructions = output(7);
    r.flags = flow_mod_flags::RESET_COUNTS;
    assert_eq!(sw.ok(&r, Time(0)).modified, vec![a, b, c]);
    assert_eq!(sw.tables.counter(a).unwrap().packets, 0);

    // Selecting nothing adds nothing (1.3) and is not an error, but a
    // buffered packet is still released.
    let mut none = flow(FlowModCommand::Modify, 1, 0, vec![in_port(4)]);
    none.instructions = output(7);
    none.buffer_id = 42;
    let out = sw.ok(&none, Time(0));
    assert!(out.modified.is_empty());
    assert_eq!(out.release_buffer, Some(42));
    assert_eq!(sw.tables.len(), 3);
}

#[test]
fn modify_strict_needs_the_same_match_set_and_priority() {
    let mut sw = Switch::new(1, 100);
    let a = sw
        .ok(&add(0, 5, vec![in_port(1), eth_type(0x0800)], 1), Time(0))
        .installed
        .unwrap();
    sw.ok(&add(0, 6, vec![in_port(1), eth_type(0x0800)], 1), Time(0));
    sw.ok(&add(0, 5, vec![in_port(1)], 1), Time(0));
    let mut m = flow(
        FlowModCommand::ModifyStrict,
        0,
        5,
        vec![eth_type(0x0800), in_port(1)],
    );
    m.instructions = output(3);
    assert_eq!(sw.ok(&m, Time(0)).modified, vec![a]);
    m.cookie_mask = u64::MAX;
    m.cookie = 1;
    assert!(sw.ok(&m, Time(0)).modified.is_empty(), "cookie filter");
    let mut wider = flow(FlowModCommand::ModifyStrict, 0, 5, vec![eth_type(0x0800)]);
    wider.instructions = output(3);
    assert!(sw.ok(&wider, Time(0)).modified.is_empty());
}

#[test]
fn delete_filters_by_match_cookie_out_port_and_out_group() {
    let mut sw = Switch::new(3, 100);
    sw.add_group(1);
    let mut ids = Vec::new();
    for (table, prio, port, cookie, flags) in [
        (0u8, 1u16, 1u32, 0x100u64, SEND),
        (0, 2, 2, 0x200, 0),
        (1, 1, 1, 0x100, SEND),
        (2, 1, 3, 0x300, SEND),
    ] {
        let mut fm = add(
            table,
            prio,
            vec![in_port(u32::from(prio) + u32::from(table))],
            port,
        );
        fm.cookie = cookie;
        fm.flags = flags;
        ids.push(sw.ok(&fm, Time::from_secs(1)).installed.unwrap());
    }
    let mut g = add(2, 9, vec![], 0);
    g.instructions = vec![Instruction::WriteActions {
        actions: vec![Action::Group { group_id: 1 }],
    }];
    let gid = sw.ok(&g, Time(0)).installed.unwrap();
    sw.tables.note_hit(ids[0], Time::from_secs(2), 64);

    // out_port 1 across all tables.
    let mut d = flow(FlowModCommand::Delete, table_no::ALL, 0, vec![]);
    d.out_port = 1;
    d.buffer_id = 5;
    let out = sw.ok(&d, Time::from_secs(4));
    assert_eq!(out.deleted, vec![ids[0], ids[2]]);
    assert_eq!(out.release_buffer, None, "DELETE ignores buffer_id");
    assert_eq!(out.flow_removed.len(), 2);
    let ev = &out.flow_removed[0];
    assert_eq!(ev.reason, RemovalReason::Delete);
    assert_eq!(ev.reason.wire_v13(), 2);
    assert_eq!((ev.body.packet_count, ev.body.byte_count), (1, 64));
    assert_eq!(
        (ev.body.duration_sec, ev.body.cookie, ev.body.table_id),
        (3, 0x100, 0)
    );
    assert_eq!(ev.body.match_.fields, vec![in_port(1)]);

    // out_group.
    let mut d = flow(FlowModCommand::Delete, table_no::ALL, 0, vec![]);
    d.out_group = 1;
    assert_eq!(sw.ok(&d, Time(0)).deleted, vec![gid]);

    // Cookie filter; no SEND_FLOW_REM -> no event.
    let mut d = flow(FlowModCommand::Delete, 0, 0, vec![]);
    d.cookie = 0x200;
    d.cookie_mask = 0xf00;
    let out = sw.ok(&d, Time(0));
    assert_eq!(out.deleted, vec![ids[1]]);
    assert!(out.flow_removed.is_empty());

    // Delete with a match selecting nothing is not an error.
    let out = sw.ok(
        &flow(FlowModCommand::Delete, 2, 0, vec![in_port(77)]),
        Time(0),
    );
    assert!(out.deleted.is_empty());
    assert_eq!(sw.tables.len(), 1);
}

#[test]
fn delete_strict_removes_exactly_one_entry_in_any_table() {
    let mut sw = Switch::new(3, 100);
    let a = sw
        .ok(&add(0, 5, vec![in_port(1)], 1), Time(0))
        .installed
        .unwrap();
    let b = sw
        .ok(&add(2, 5, vec![in_port(1)], 1), Time(0))
        .installed
        .unwrap();
    sw.ok(&add(2, 5, vec![in_port(1), eth_type(0x0800)], 1), Time(0));
    sw.ok(&add(2, 4, vec![in_port(1)], 1), Time(0));
    let d = flow(FlowModCommand::DeleteStrict, 2, 5, vec![in_port(1)]);
    assert_eq!(sw.ok(&d, Time(0)).deleted, vec![b]);
    let d = flow(
        FlowModCommand::DeleteStrict,
        table_no::ALL,
        5,
        vec![in_port(1)],
    );
    assert_eq!(sw.ok(&d, Time(0)).deleted, vec![a]);
    let mut d = flow(
        FlowModCommand::DeleteStrict,
        table_no::ALL,
        4,
        vec![in_port(1)],
    );
    d.out_port = 9;
    assert!(sw.ok(&d, Time(0)).deleted.is_empty(), "out_port filter");
    assert_eq!(sw.tables.len(), 2);
}

#[test]
fn buffered_packets_are_released_after_add() {
    let mut sw = Switch::new(1, 10);
    let mut fm = add(0, 1, vec![], 1);
    fm.buffer_id = 77;
    assert_eq!(sw.ok(&fm, Time(0)).release_buffer, Some(77));
    fm.buffer_id = OFP_NO_BUFFER;
    assert_eq!(sw.ok(&fm, Time(0)).release_buffer, None);
}

#[test]
fn timeouts_expire_entries_on_the_simulated_clock() {
    let mut sw = Switch::new(1, 10);
    let mut idle = add(0, 1, vec![in_port(1)], 1);
    idle.idle_timeout = 10;
    idle.flags = SEND;
    let idle_id = sw.ok(&idle, Time::from_secs(0)).installed.unwrap();
    let mut hard = add(0, 1, vec![in_port(2)], 1);
    hard.hard_timeout = 15;
    hard.idle_timeout = 5;
    hard.flags = SEND;
    let hard_id = sw.ok(&hard, Time::from_secs(0)).installed.unwrap();
    let mut quiet = add(0, 1, vec![in_port(3)], 1);
    quiet.hard_timeout = 3; // no SEND_FLOW_REM: removed silently
    sw.ok(&quiet, Time::from_secs(0));
    sw.ok(&add(0, 1, vec![in_port(4)], 1), Time(0)); // permanent

    assert!(sw.tables.expire(Time::from_millis(2999)).is_empty());
    assert_eq!(sw.tables.len(), 4);
    assert!(sw.tables.expire(Time::from_secs(3)).is_empty());
    assert_eq!(sw.tables.len(), 3, "silent expiry");

    // Traffic keeps both busy.
    for s in [4, 8, 12] {
        sw.tables.note_hit(idle_id, Time::from_secs(s), 1);
        sw.tables.note_hit(hard_id, Time::from_secs(s), 1);
        assert!(sw.tables.expire(Time::from_secs(s)).is_empty());
    }
    let ev = sw.tables.expire(Time::from_secs(15));
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].id, ev[0].reason),
        (hard_id, RemovalReason::HardTimeout)
    );
    assert_eq!((ev[0].body.duration_sec, ev[0].body.packet_count), (15, 3));
    assert!(sw.tables.expire(Time::from_millis(21_999)).is_empty());
    let ev = sw.tables.expire(Time::from_secs(22));
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].id, ev[0].reason),
        (idle_id, RemovalReason::IdleTimeout)
    );
    assert_eq!(ev[0].reason.wire_v13(), 0);
    assert_eq!(sw.tables.len(), 1);
    sw.tables.check_invariants();
    assert!(sw.tables.expire(Time::from_secs(1_000_000)).is_empty());
}

#[test]
fn hard_timeout_wins_when_both_run_out_together() {
    let mut sw = Switch::new(1, 10);
    let mut fm = add(0, 1, vec![], 1);
    fm.idle_timeout = 5;
    fm.hard_timeout = 5;
    fm.flags = SEND;
    sw.ok(&fm, Time(0));
    let ev = sw.tables.expire(Time::from_secs(5));
    assert_eq!(ev[0].reason, RemovalReason::HardTimeout);
    assert_eq!(ev[0].reason.wire_v13(), 1);
}

#[test]
fn unavailable_counters_read_all_ones() {
    let mut sw = Switch::new(1, 10);
    let mut fm = add(0, 1, vec![in_port(1)], 1);
    fm.flags = flow_mod_flags::NO_PKT_COUNTS | SEND;
    let a = sw.ok(&fm, Time(0)).installed.unwrap();
    let mut fm = add(0, 1, vec![in_port(2)], 1);
    fm.flags = flow_mod_flags::NO_BYT_COUNTS;
    let b = sw.ok(&fm, Time(0)).installed.unwrap();
    let c = sw
        .ok(&add(0, 1, vec![in_port(3)], 1), Time(0))
        .installed
        .unwrap();
    for id in [a, b, c] {
        sw.tables.note_hit(id, Time(1), 100);
    }
    let s = sw.all();
    assert_eq!((s[0].packet_count, s[0].byte_count), (u64::MAX, 100));
    assert_eq!((s[1].packet_count, s[1].byte_count), (1, u64::MAX));
    assert_eq!((s[2].packet_count, s[2].byte_count), (1, 100));
    let agg = sw.tables.aggregate_stats(&any_flow()).unwrap();
    assert_eq!(
        agg,
        AggregateStats {
            packet_count: 2,
            byte_count: 200,
            flow_count: 3
        }
    );
    let out = sw.ok(
        &flow(FlowModCommand::DeleteStrict, 0, 1, vec![in_port(1)]),
        Time(2),
    );
    assert_eq!(out.flow_removed[0].body.packet_count, u64::MAX);
    assert_eq!(out.flow_removed[0].body.byte_count, 100);
}

#[test]
fn flow_and_aggregate_stats_apply_every_filter() {
    let mut sw = Switch::new(3, 100);
    sw.add_group(4);
    let mut specs = vec![
        (0u8, vec![in_port(1), eth_type(0x0800)], 1u32, 0x1u64),
        (0, vec![in_port(2)], 2, 0x2),
        (1, vec![in_port(1)], 1, 0x3),
        (2, vec![eth_type(0x0806)], 3, 0x1),
    ];
    for (i, (t, fields, port, cookie)) in specs.drain(..).enumerate() {
        let mut fm = add(t, 1, fields, port);
        fm.cookie = cookie;
        let id = sw.ok(&fm, Time(0)).installed.unwrap();
        sw.tables.note_hit(id, Time(1), 10 * (i as u64 + 1));
    }
    let mut g = add(2, 2, vec![], 1);
    g.instructions.push(Instruction::WriteActions {
        actions: vec![Action::Group { group_id: 4 }],
    });
    sw.ok(&g, Time(0));

    let count = |f: &FlowFilter| sw.stats(f, Time(5)).len();
    let all = any_flow();
    assert_eq!(count(&all), 5);
    assert_eq!(
        count(&FlowFilter {
            table_id: 0,
            ..all.clone()
        }),
        2
    );
    assert_eq!(
        count(&FlowFilter {
            out_port: 1,
            ..all.clone()
        }),
        3
    );
    assert_eq!(
        count(&FlowFilter {
            out_group: 4,
            ..all.clone()
        }),
        1
    );
    let c1 = FlowFilter {
        cookie: 1,
        cookie_mask: 0xf,
        ..all.clone()
    };
    assert_eq!(count(&c1), 2);
    let m = FlowFilter {
        match_: Match {
            fields: vec![in_port(1)],
        },
        ..all.clone()
    };
    assert_eq!(count(&m), 2);
    let agg = sw.tables.aggregate_stats(&m).unwrap();
    assert_eq!(
        (agg.flow_count, agg.packet_count, agg.byte_count),
        (2, 2, 40)
    );
    let stats = sw.stats(
        &FlowFilter {
            table_id: 2,
            ..all.clone()
        },
        Time(5),
    );
    assert_eq!(stats[0].cookie, 1);
    assert_eq!(
        sw.tables.flow_stats(
            &FlowFilter {
                table_id: 3,
                ..all.clone()
            },
            Time(0)
        ),
        Err(OfpError::BadRequest(BadRequestCode::BadTableId))
    );
    let bad = FlowFilter {
        match_: Match {
            fields: vec![ipv4_dst([1, 2, 3, 4], 32)],
        },
        ..all
    };
    assert_eq!(
        sw.tables.aggregate_stats(&bad),
        Err(OfpError::BadMatch(BadMatchCode::BadPrereq))
    );
}

#[test]
fn table_stats_count_entries_and_lookups() {
    let mut sw = Switch::new(3, 100);
    sw.ok(&add(0, 1, vec![in_port(1)], 1), Time(0));
    sw.ok(&add(0, 1, vec![in_port(2)], 1), Time(0));
    sw.ok(&add(2, 1, vec![in_port(2)], 1), Time(0));
    sw.tables.note_lookup(0, true);
    sw.tables.note_lookup(0, false);
    sw.tables.note_lookup(2, true);
    sw.tables.note_lookup(200, true); // no such table: ignored
    let ts = sw.tables.table_stats();
    assert_eq!(ts.len(), 3);
    assert_eq!(
        ts[0],
        TableStats {
            table_id: 0,
            active_count: 2,
            lookup_count: 2,
            matched_count: 1
        }
    );
    assert_eq!((ts[1].active_count, ts[1].lookup_count), (0, 0));
    assert_eq!(
        (ts[2].table_id, ts[2].active_count, ts[2].matched_count),
        (2, 1, 1)
    );
    assert_eq!(Tables::default().table_stats().len(), 255);
}

#[test]
fn note_hit_on_a_removed_entry_is_harmless() {
    let mut sw = Switch::new(1, 10);
    let id = sw.ok(&add(0, 1, vec![], 1), Time(0)).installed.unwrap();
    sw.ok(&flow(FlowModCommand::Delete, 0, 0, vec![]), Time(0));
    assert!(!sw.tables.note_hit(id, Time(1), 1));
    assert!(!sw.tables.note_hit(FlowId(12345), Time(1), 1));
}

#[test]
fn deleting_groups_and_meters_removes_their_flows() {
    let mut sw = Switch::new(2, 10);
    sw.add_group(1);
    sw.add_meter(2);
    let mut fg = add(0, 1, vec![in_port(1)], 1);
    fg.flags = SEND;
    fg.instructions.push(Instruction::WriteActions {
        actions: vec![Action::Group { group_id: 1 }],
    });
    sw.ok(&fg, Time(0));
    let mut fm = add(1, 1, vec![in_port(1)], 1);
    fm.flags = SEND;
    fm.instructions.push(Instruction::Meter { meter_id: 2 });
    sw.ok(&fm, Time(0));
    sw.ok(&add(1, 1, vec![in_port(2)], 1), Time(0));

    let gd = GroupMod {
        command: GroupModCommand::Delete,
        group_type: GroupType::All,
        group_id: group_no::ALL,
        buckets: vec![],
    };
    let deleted = sw.groups.apply_group_mod(&gd, Time::from_secs(2)).unwrap();
    let ev: Vec<_> = deleted
        .into_iter()
        .flat_map(|g| sw.tables.remove_group_users(g, Time::from_secs(2)))
        .collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].reason, RemovalReason::GroupDelete);
    assert_eq!((ev[0].reason.wire_v13(), ev[0].body.table_id), (3, 0));
    sw.tables.check_invariants();

    let md = MeterMod {
        command: MeterModCommand::Delete,
        flags: 0,
        meter_id: 2,
        bands: vec![],
    };
    let deleted = sw.meters.apply_meter_mod(&md, Time::from_secs(3)).unwrap();
    let ev: Vec<_> = deleted
        .into_iter()
        .flat_map(|m| sw.tables.remove_meter_users(m, Time::from_secs(3)))
        .collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].reason, ev[0].body.table_id),
        (RemovalReason::MeterDelete, 1)
    );
    assert_eq!(ev[0].reason.wire_v13(), 2, "1.3 has no METER_DELETE");
    sw.tables.check_invariants();
    assert_eq!(sw.tables.len(), 1);
}

/// One random flow-mod over a small field space, so that commands
/// collide with each other often.
fn arb_flow_mod() -> impl Strategy<Value = FlowMod> {
    let cmd = prop_oneof![
        3 => Just(FlowModCommand::Add),
        1 => Just(FlowModCommand::Modify),
        1 => Just(FlowModCommand::ModifyStrict),
        1 => Just(FlowModCommand::Delete),
        1 => Just(FlowModCommand::DeleteStrict),
    ];
    let field = prop_oneof![
        (1u32..4).prop_map(in_port),
        Just(eth_type(0x0800)),
        (0u32..3).prop_map(|p| ipv4_dst([10, p as u8, 0, 0], 8 + 8 * p)),
        Just(exact(OxmField::TcpDst, OxmValue::U16(80))),
    ];
    let table = prop_oneof![4 => 0u8..3, 1 => Just(table_no::ALL), 1 => Just(5u8)];
    let port = prop_oneof![4 => 1u32..4, 1 => Just(0u32), 1 => Just(port_no::ANY)];
    let flags = prop_oneof![
        4 => Just(0u16),
        2 => Just(flow_mod_flags::CHECK_OVERLAP),
        1 => Just(SEND),
        1 => Just(flow_mod_flags::RESET_COUNTS),
        1 => Just(1u16 << 7),
    ];
    (
        cmd,
        table,
        0u16..3,
        proptest::collection::vec(field, 0..4),
        port,
        flags,
        0u64..3,
    )
        .prop_map(
            |(command, table_id, priority, fields, port, flags, cookie)| FlowMod {
                command,
                table_id,
                priority,
                flags,
                cookie,
                cookie_mask: if cookie == 2 { 0 } else { 3 },
                out_port: if port == 0 { port_no::ANY } else { port },
                match_: Match { fields },
                instructions: output(port),
                ..FlowMod::default()
            },
        )
}

proptest! {
    /// Any sequence of flow-mods keeps every invariant; a refused one
    /// changes nothing; an accepted ADD leaves an entry with its exact
    /// match and priority; a DELETE of the same leaves none.
    #[test]
    fn random_flow_mods_keep_invariants(mods in proptest::collection::vec(arb_flow_mod(), 1..40)) {
        let mut sw = Switch::new(3, 6);
        for (i, fm) in mods.iter().enumerate() {
            let before = sw.tables.snapshot();
            let now = Time::from_secs(i as u64);
            match sw.apply(fm, now) {
                Err(_) => prop_assert_eq!(sw.tables.snapshot(), before),
                Ok(out) => {
                    let key = MatchKey::new(&fm.match_).unwrap();
                    let here = |sw: &Switch| sw.tables.table(fm.table_id).map_or(0, |t| {
                        t.entries().filter(|e| e.key == key && e.priority == fm.priority).count()
                    });
                    match fm.command {
                        FlowModCommand::Add => {
                            prop_assert_eq!(here(&sw), 1);
                            let e = sw.tables.entry(out.installed.unwrap()).unwrap();
                            prop_assert_eq!(&*e.match_(), &fm.match_);
                            prop_assert_eq!(&e.instructions.to_vec(), &fm.instructions);
                        }
                        FlowModCommand::DeleteStrict | FlowModCommand::Delete
                            if fm.out_port == port_no::ANY && fm.cookie_mask == 0 =>
                        {
                            prop_assert_eq!(here(&sw), 0);
                        }
                        _ => {}
                    }
                    // Events only for entries that asked.
                    prop_assert!(out.flow_removed.len() <= out.deleted.len());
                }
            }
        }
    }
}

/// A flow entry as the naive model below keeps it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ModelEntry {
    table: u8,
    priority: u16,
    key: MatchKey,
    cookie: u64,
    port: u32,
}

fn first_output(instructions: &[Instruction]) -> u32 {
    crate::model::instructions::instruction_actions(instructions)
        .find_map(|a| match a {
            Action::Output { port, .. } => Some(*port),
            _ => None,
        })
        .unwrap_or(0)
}

/// The spec's flow-mod rules written as plainly as possible over a
/// list, for the model test.
fn model_apply(model: &mut Vec<ModelEntry>, fm: &FlowMod) -> Result<usize, ()> {
    const N_TABLES: u8 = 3;
    const MAX: usize = 6;
    if fm.flags & !KNOWN_FLAGS != 0 {
        return Err(());
    }
    let delete = matches!(
        fm.command,
        FlowModCommand::Delete | FlowModCommand::DeleteStrict
    );
    if !(delete && fm.table_id == table_no::ALL) && fm.table_id >= N_TABLES {
        return Err(());
    }
    let key = MatchKey::new(&fm.match_).map_err(|_| ())?;
    let port = first_output(&fm.instructions);
    if !delete && (port == 0 || port > ofp::consts::port_no::MAX) {
        return Err(());
    }
    let strict = matches!(
        fm.command,
        FlowModCommand::ModifyStrict | FlowModCommand::DeleteStrict
    );
    let selected = |m: &ModelEntry| {
        (fm.table_id == table_no::ALL || m.table == fm.table_id)
            && m.cookie & fm.cookie_mask == fm.cookie & fm.cookie_mask
            && if strict {
                m.priority == fm.priority && m.key == key
            } else {
                m.key.is_within(&key)
            }
    };
    match fm.command {
        FlowModCommand::Add => {
            let same_table = |m: &&ModelEntry| m.table == fm.table_id;
            if fm.flags & flow_mod_flags::CHECK_OVERLAP != 0
                && model
                    .iter()
                    .filter(same_table)
                    .any(|m| m.priority == fm.priority && m.key.overlaps(&key))
            {
                return Err(());
            }
            let new = ModelEntry {
                table: fm.table_id,
                priority: fm.priority,
                key: key.clone(),
                cookie: fm.cookie,
                port,
            };
            if let Some(m) = model
                .iter_mut()
                .find(|m| m.table == fm.table_id && m.priority == fm.priority && m.key == key)
            {
                *m = new;
            } else if model.iter().filter(same_table).count() >= MAX {
                return Err(());
            } else {
                model.push(new);
            }
            Ok(0)
        }
        FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
            for m in model.iter_mut().filter(|m| selected(m)) {
                m.port = port;
            }
            Ok(0)
        }
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
            let before = model.len();
            model.retain(|m| {
                !(selected(m)
                    && (fm.out_port == ofp::consts::port_no::ANY || m.port == fm.out_port))
            });
            Ok(before - model.len())
        }
    }
}

proptest! {
    /// The tables agree with the naive model after every flow-mod of a
    /// random sequence: same refusals, same entries, same deletions.
    #[test]
    fn tables_agree_with_a_naive_model(mods in proptest::collection::vec(arb_flow_mod(), 1..60)) {
        let mut sw = Switch::new(3, 6);
        let mut model = Vec::new();
        for fm in &mods {
            let real = sw.apply(fm, Time(0));
            let want = model_apply(&mut model, fm);
            prop_assert_eq!(real.is_ok(), want.is_ok(), "{:?}: {:?}", fm, real);
            if let (Ok(out), Ok(n)) = (&real, &want) {
                if !out.deleted.is_empty() || *n != 0 {
                    prop_assert_eq!(out.deleted.len(), *n);
                }
            }
            let mut have: Vec<ModelEntry> = (0..3)
                .flat_map(|t| sw.tables.table(t).unwrap().entries())
                .map(|e| ModelEntry {
                    table: e.table_id,
                    priority: e.priority,
                    key: e.key.clone(),
                    cookie: e.cookie,
                    port: first_output(&e.instructions.to_vec()),
                })
                .collect();
            have.sort();
            let mut want_entries = model.clone();
            want_entries.sort();
            prop_assert_eq!(have, want_entries);
        }
    }
}

#[test]
fn all_255_tables_are_usable() {
    let mut sw = Switch::new(255, 10);
    let mut fm = add(0, 1, vec![], 1);
    fm.instructions
        .push(Instruction::GotoTable { table_id: 254 });
    sw.ok(&fm, Time(0));
    sw.ok(&add(254, 1, vec![], 1), Time(0));
    let mut last = add(254, 2, vec![], 1);
    last.instructions
        .push(Instruction::GotoTable { table_id: 254 });
    sw.refuse(
        &last,
        OfpError::BadInstruction(BadInstructionCode::BadTableId),
    );
    assert_eq!(sw.tables.table_stats()[254].active_count, 1);
}

proptest! {
    /// An entry leaves exactly when one of its timeouts has run out
    /// since install (hard) or since its last hit (idle), whatever the
    /// timeouts and hits.
    #[test]
    fn expiry_follows_the_timeouts(
        idle in 0u16..5, hard in 0u16..8, hits in proptest::collection::vec(0u64..8000, 0..5),
        at in 0u64..9000
    ) {
        let mut sw = Switch::new(1, 10);
        let mut fm = add(0, 1, vec![], 1);
        fm.idle_timeout = idle;
        fm.hard_timeout = hard;
        fm.flags = SEND;
        let id = sw.ok(&fm, Time(0)).installed.unwrap();
        let mut hits = hits;
        hits.sort();
        let mut last = 0;
        for h in hits.iter().copied().filter(|h| *h < at) {
            // Expire as time goes by, as a timer would.
            if !sw.tables.expire(Time::from_millis(h)).is_empty() {
                break;
            }
            sw.tables.note_hit(id, Time::from_millis(h), 1);
            last = h;
        }
        let gone_before = sw.tables.is_empty();
        let ev = sw.tables.expire(Time::from_millis(at));
        let hard_due = hard != 0 && at >= u64::from(hard) * 1000;
        let idle_due = idle != 0 && at >= last + u64::from(idle) * 1000;
        if !gone_before {
            prop_assert_eq!(ev.len(), usize::from(hard_due || idle_due));
            if let Some(e) = ev.first() {
                let want = if hard_due { RemovalReason::HardTimeout } else { RemovalReason::IdleTimeout };
                prop_assert_eq!(e.reason, want);
            }
        } else {
            prop_assert!(hard_due || idle_due);
        }
    }
}

/// A route-shaped ADD (ETH_TYPE=IPv4, IPV4_DST prefix), with a random
/// priority that may or may not follow prefix order and a hard
/// timeout, for the classifier's LPM engine.
fn arb_route_mod() -> impl Strategy<Value = FlowMod> {
    (
        0u8..3,
        prop_oneof![Just(8u32), Just(16), Just(24), Just(32), 1u32..33],
        0u8..4,
        0u8..4,
        prop_oneof![2 => Just(None), 1 => (0u16..40).prop_map(Some)],
        0u16..3,
    )
        .prop_map(|(table_id, len, b1, b2, prio, hard)| {
            let mut fm = add(
                table_id,
                prio.unwrap_or(len as u16),
                vec![eth_type(0x0800), ipv4_dst([10, b1, b2, 1], len)],
                1,
            );
            fm.hard_timeout = hard;
            fm
        })
}

/// A packet over the same small field space as the flow-mods.
fn arb_packet() -> impl Strategy<Value = FlowKey> {
    use packet::flow_key::field;
    (1u32..5, 0u8..3, 0u8..4, 0u8..4, any::<bool>(), 0u64..3).prop_map(
        |(port, kind, b1, b2, http, md)| {
            let mut k = FlowKey::default();
            k.set_metadata_fields(port, port, md, 0);
            k.present |= 1 << field::ETH_TYPE;
            if kind == 0 {
                k.eth_type = 0x0806;
                return k;
            }
            k.eth_type = 0x0800;
            k.present |= (1 << field::IP_PROTO) | (1 << field::IPV4_SRC) | (1 << field::IPV4_DST);
            k.ipv4_dst = u32::from_be_bytes([10, b1, b2, 1]);
            if kind == 1 {
                k.ip_proto = 6;
                k.present |= (1 << field::TCP_SRC) | (1 << field::TCP_DST);
                k.tp_dst = if http { 80 } else { 443 };
            } else {
                k.ip_proto = 17;
                k.present |= (1 << field::UDP_SRC) | (1 << field::UDP_DST);
            }
            k
        },
    )
}

proptest! {
    /// After any sequence of flow-mods (adds, replacing adds, modifies,
    /// deletes, routes) and expiries, the fast classifier (one packet
    /// and burst) picks exactly the linear scan's entry in every table.
    #[test]
    fn fast_lookup_equals_the_linear_scan(
        mods in proptest::collection::vec(prop_oneof![arb_flow_mod(), arb_route_mod()], 1..80),
        expire_at in proptest::option::of(0u64..4),
        packets in proptest::collection::vec(arb_packet(), 1..40),
    ) {
        let mut sw = Switch::new(3, 1000);
        for fm in &mods {
            let _ = sw.apply(fm, Time(0));
        }
        if let Some(t) = expire_at {
            sw.tables.expire(Time::from_secs(t));
        }
        sw.tables.check_invariants();
        for t in 0..3u8 {
            let table = sw.tables.table(t).unwrap();
            let mut burst = vec![None; packets.len()];
            table.lookup_burst(&packets, &mut burst);
            for (p, b) in packets.iter().zip(&burst) {
                let want = table.lookup_linear(p).map(|e| e.id);
                prop_assert_eq!(table.lookup(p).map(|e| e.id), want);
                prop_assert_eq!(*b, want);
            }
        }
    }
}

/// Publishing copies the [`TableSet`]: the copy shares every table (Arc),
/// so it is O(tables) whatever the entry count, and a mod after it
/// copies only the table it changes (the published copy unchanged);
/// folding counters changes no published table.
#[test]
fn published_copies_share_tables_until_one_is_changed() {
    let mut sw = Switch::new(3, 1000);
    for i in 0..100u32 {
        sw.ok(&add(0, 1, vec![in_port(i + 1)], 1), Time(0));
    }
    sw.ok(&add(1, 1, vec![], 1), Time(0));
    let published = sw.tables.published();
    assert!(Arc::ptr_eq(
        published.set_shared(0),
        sw.tables.set.set_shared(0)
    ));
    let id = sw.tables.entries().next().unwrap().id;
    assert!(sw.tables.add_hits(id, 3, 300, Time(5)));
    sw.tables.note_lookups(0, 9, 4);
    assert!(
        Arc::ptr_eq(published.set_shared(0), sw.tables.set.set_shared(0)),
        "counters are not published"
    );
    sw.ok(&add(1, 2, vec![in_port(7)], 1), Time(0));
    assert!(Arc::ptr_eq(
        published.set_shared(0),
        sw.tables.set.set_shared(0)
    ));
    assert!(!Arc::ptr_eq(
        published.set_shared(1),
        sw.tables.set.set_shared(1)
    ));
    assert_eq!(published.table(1).unwrap().len(), 1);
    assert_eq!(sw.tables.table(1).unwrap().len(), 2);
    assert_ne!(
        published.table(1).unwrap().generation(),
        sw.tables.table(1).unwrap().generation()
    );
    // The entries themselves are shared, not copied.
    let a = published.table(0).unwrap().slots().next().unwrap().1;
    let b = sw.tables.table(0).unwrap().slots().next().unwrap().1;
    assert!(Arc::ptr_eq(a, b));
    assert_eq!(published.instance(), sw.tables.instance());
    assert_ne!(Tables::default().instance(), sw.tables.instance());
    published.check_invariants();
    sw.tables.check_invariants();
}

/// Tables are published sixteen to a chunk: a write copies only its own
/// chunk (and its table), so the other chunks and the other tables of its
/// chunk stay shared with the snapshot, which does not change.
#[test]
fn a_write_after_a_publish_copies_only_its_chunk_and_its_table() {
    let mut sw = Switch::new(40, 1000);
    for t in [0u8, 16, 17, 39] {
        sw.ok(&add(t, 1, vec![in_port(1)], 1), Time(0));
    }
    let published = sw.tables.published();
    sw.ok(&add(17, 1, vec![in_port(2)], 1), Time(0));
    let same = |t: u8| Arc::ptr_eq(published.set_shared(t), sw.tables.set.set_shared(t));
    assert!(!same(17), "the written table is a new copy");
    assert!(same(16) && same(0) && same(39), "the others are shared");
    assert!(Arc::ptr_eq(&published.chunks[0], &sw.tables.set.chunks[0]));
    assert!(!Arc::ptr_eq(&published.chunks[1], &sw.tables.set.chunks[1]));
    assert!(Arc::ptr_eq(&published.chunks[2], &sw.tables.set.chunks[2]));
    assert_eq!(published.table(17).unwrap().len(), 1);
    assert_eq!(sw.tables.table(17).unwrap().len(), 2);
    assert!(published.table(40).is_none() && sw.tables.table(40).is_none());
    assert_eq!((published.len(), sw.tables.set().len()), (4, 5));
    published.check_invariants();
    sw.tables.check_invariants();
}

/// Publish cost at 100K and 1M entries (one table, in_port + VLAN
/// rules): clone (publish), the first flow-mod after it (copies the
/// table and `location`: no spare yet), a later one, and the steady
/// publish / drop / 10 flow-mods cycle (spare caught up by replay). Figures, not assertions:
/// `cargo test -p pipeline --release publish_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn publish_cost() {
    use std::time::Instant;
    for n in [100_000u32, 1_000_000] {
        let mut sw = Switch::new(2, 2_000_000);
        let vlan = |i: u32| {
            exact(
                OxmField::VlanVid,
                OxmValue::U16(0x1000 | (i % 4094 + 1) as u16),
            )
        };
        for i in 0..n {
            let fm = add(0, 1, vec![in_port(i / 4094 + 1), vlan(i)], 1);
            sw.tables
                .apply_flow_mod(&fm, Time(0), &sw.groups, &sw.meters)
                .unwrap();
        }
        let t = Instant::now();
        let mut published = sw.tables.published();
        let clone = t.elapsed();
        let mut prio = 2;
        let mut mod_once = |sw: &mut Switch| {
            prio += 1;
            let fm = add(0, prio, vec![in_port(1), vlan(7)], 2);
            let t = Instant::now();
            sw.tables
                .apply_flow_mod(&fm, Time(0), &sw.groups, &sw.meters)
                .unwrap();
            t.elapsed()
        };
        let first = mod_once(&mut sw);
        let later = mod_once(&mut sw);
        // Steady state: publish, workers drop the previous snapshot,
        // 10 flow-mods; the first of them catches the spare up.
        let mut cycle = std::time::Duration::ZERO;
        for _ in 0..20 {
            let t = Instant::now();
            let next = sw.tables.published();
            drop(std::mem::replace(&mut published, next));
            for _ in 0..10 {
                mod_once(&mut sw);
            }
            cycle += t.elapsed();
        }
        let t = Instant::now();
        let deep = sw.tables.set.table(0).unwrap().clone();
        let table_copy = t.elapsed();
        println!(
            "{n} entries: publish (clone) {clone:?}; first flow-mod after the first \
             publish (copies) {first:?}; next flow-mod {later:?}; steady cycle \
             (publish + drop old + 10 flow-mods) {:?}; full copy of the table alone \
             {table_copy:?}",
            cycle / 20
        );
        drop((published, deep));
    }
}

/// Pages of any size, read one after another, give exactly the whole
/// answer, for every table and filter; a page is never empty unless
/// the answer is, and only a full page names a position.
#[test]
fn flow_stats_pages_add_up_to_the_whole_answer() {
    let mut sw = Switch::new(3, 1000);
    for i in 0..40u32 {
        let mut fm = add(
            (i % 3) as u8,
            (i % 4) as u16,
            vec![in_port(i % 11 + 1)],
            i % 5 + 1,
        );
        fm.cookie = u64::from(i % 2);
        // Duplicates of (table, priority, match) replace: fewer than 40.
        sw.ok(&fm, Time::from_secs(u64::from(i)));
    }
    let filters = [
        any_flow(),
        FlowFilter {
            table_id: 1,
            ..any_flow()
        },
        FlowFilter {
            cookie: 1,
            cookie_mask: 1,
            ..any_flow()
        },
        FlowFilter {
            match_: Match {
                fields: vec![in_port(3)],
            },
            ..any_flow()
        },
    ];
    let now = Time::from_secs(100);
    for f in &filters {
        let whole = sw.tables.flow_stats(f, now).unwrap();
        for limit in [1, 2, 3, 7, 100] {
            let (mut got, mut at) = sw.tables.flow_stats_page(f, now, None, limit).unwrap();
            assert!(got.len() <= limit);
            while let Some(pos) = at {
                let (page, next) = sw.tables.flow_stats_page(f, now, Some(pos), limit).unwrap();
                assert!(page.len() <= limit);
                assert!(
                    next.is_none() || page.len() == limit,
                    "only a full page goes on"
                );
                got.extend(page);
                at = next;
            }
            assert_eq!(got, whole, "filter {f:?}, pages of {limit}");
        }
    }
    assert_eq!(
        sw.tables.flow_stats_page(
            &FlowFilter {
                table_id: 3,
                ..any_flow()
            },
            now,
            None,
            5
        ),
        Err(OfpError::BadRequest(BadRequestCode::BadTableId))
    );
}

/// The encoded pages (what the agent sends) are, byte for byte, the
/// records `FlowStats::encode` writes for the same pages: for matches kept
/// as sent (fields out of canonical order) and rebuilt from the key, for
/// counters reported and unavailable, with and without instructions.
#[test]
fn encoded_flow_stats_pages_are_the_encoded_stats() {
    let mut sw = Switch::new(2, 1000);
    for i in 0..30u32 {
        let fields = match i % 3 {
            0 => vec![in_port(i + 1)],
            // Out of canonical order: the match is kept as sent.
            1 => vec![
                ipv4_dst([10, 0, 0, i as u8], 32),
                eth_type(0x0800),
                in_port(i),
            ],
            _ => vec![eth_type(0x0800), ipv4_dst([10, 1, 0, 0], 16 + i % 8)],
        };
        let mut fm = add((i % 2) as u8, (i % 7) as u16, fields, i % 4 + 1);
        if i % 5 == 0 {
            fm.flags |= flow_mod_flags::NO_PKT_COUNTS | flow_mod_flags::NO_BYT_COUNTS;
        }
        if i % 4 == 0 {
            fm.instructions.clear();
        }
        sw.ok(&fm, Time::from_secs(u64::from(i)));
    }
    let ids: Vec<FlowId> = sw
        .tables
        .filter(&any_flow())
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    for (n, id) in ids.iter().enumerate() {
        sw.tables
            .add_hits(*id, n as u64, 64 * n as u64, Time::from_secs(50));
    }
    let now = Time(100_123_456_789);
    for f in [
        any_flow(),
        FlowFilter {
            table_id: 1,
            ..any_flow()
        },
    ] {
        for limit in [1, 4, 100] {
            let mut at = None;
            loop {
                let (stats, next) = sw.tables.flow_stats_page(&f, now, at, limit).unwrap();
                let (records, next2) = sw.tables.flow_stats_records(&f, now, at, limit).unwrap();
                let mut want = Vec::new();
                for s in &stats {
                    s.encode(&mut want);
                }
                assert_eq!(records, want, "filter {f:?}, limit {limit}, after {at:?}");
                assert_eq!(next, next2);
                match next {
                    Some(p) => at = Some(p),
                    None => break,
                }
            }
        }
    }
}

/// Memory per entry: the inline sizes of the per-entry structures and
/// the VmRSS growth of installing 1M in_port+ipv4_dst entries (one
/// copy of the tables, nothing published). Figures, not assertions:
/// `cargo test -p pipeline --release bytes_per_rule -- --ignored --nocapture`.
#[test]
#[ignore]
fn bytes_per_rule() {
    fn rss() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        s.lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    }
    println!(
        "sizes: FlowEntry {} Oxm {} KeyField {} Instruction {} Action {} FastEntry {} \
         classifier::Rule {} FieldMatch {}",
        std::mem::size_of::<FlowEntry>(),
        std::mem::size_of::<ofp::Oxm>(),
        std::mem::size_of::<crate::model::match_key::KeyField>(),
        std::mem::size_of::<ofp::Instruction>(),
        std::mem::size_of::<ofp::Action>(),
        std::mem::size_of::<FastEntry>(),
        std::mem::size_of::<classifier::Rule>(),
        std::mem::size_of::<classifier::FieldMatch>(),
    );
    KEY_HASH_MASK.with(|m| m.set(u64::MAX));
    let n = 1_000_000u32;
    let mut sw = Switch::new(1, 2_000_000);
    let before = rss();
    for i in 0..n {
        let dst = exact(
            OxmField::Ipv4Dst,
            OxmValue::Ipv4(std::net::Ipv4Addr::from(0x0b00_0000 + i)),
        );
        let fm = add(
            0,
            100,
            vec![
                in_port(i % 48 + 1),
                exact(OxmField::EthType, OxmValue::U16(0x0800)),
                dst,
            ],
            i % 47 + 1,
        );
        sw.tables
            .apply_flow_mod(&fm, Time(0), &sw.groups, &sw.meters)
            .unwrap();
    }
    let grown = rss().saturating_sub(before);
    println!(
        "{n} entries: VmRSS +{:.0} MiB, {} bytes per entry",
        grown as f64 / (1 << 20) as f64,
        grown / u64::from(n)
    );
}

/// A bulk install of 1M entries with a publish every 100K flow-mods,
/// the previous snapshot dropped at each (as workers move on): total
/// time and rate. Figures, not assertions:
/// `cargo test -p pipeline --release bulk_install_with_publishes -- --ignored --nocapture`.
#[test]
#[ignore]
fn bulk_install_with_publishes() {
    use std::time::Instant;
    KEY_HASH_MASK.with(|m| m.set(u64::MAX));
    let n = 1_000_000u32;
    let mut sw = Switch::new(1, 2_000_000);
    let mut published = sw.tables.published();
    let t = Instant::now();
    for i in 0..n {
        if i % 100_000 == 0 {
            let next = sw.tables.published();
            drop(std::mem::replace(&mut published, next));
        }
        let dst = exact(
            OxmField::Ipv4Dst,
            OxmValue::Ipv4(std::net::Ipv4Addr::from(0x0b00_0000 + i)),
        );
        let fm = add(0, 100, vec![in_port(i % 48 + 1), eth_type(0x0800), dst], 1);
        sw.tables
            .apply_flow_mod(&fm, Time(0), &sw.groups, &sw.meters)
            .unwrap();
    }
    let d = t.elapsed();
    println!(
        "{n} adds, publish every 100K: {d:?}, {:.0} flow-mods/s",
        f64::from(n) / d.as_secs_f64()
    );
    drop(published);
}

/// One step of the publishing property below.
#[derive(Clone, Debug)]
enum Step {
    Mod(FlowMod),
    Publish,
    DropOldest,
    Hit(u64),
    Lookups,
}

proptest! {
    /// With publishes (clones held as snapshots), snapshot drops and
    /// counter folds between flow-mods, the control side always equals
    /// a twin that never publishes (so replaying the log onto the
    /// spare copy is exact), and no held snapshot ever changes.
    #[test]
    fn double_buffered_publishing_is_exact(
        steps in proptest::collection::vec(prop_oneof![
            4 => arb_flow_mod().prop_map(Step::Mod),
            4 => arb_route_mod().prop_map(Step::Mod),
            2 => Just(Step::Publish),
            2 => Just(Step::DropOldest),
            2 => (1u64..30).prop_map(Step::Hit),
            1 => Just(Step::Lookups),
        ], 1..80),
    ) {
        let mut sw = Switch::new(3, 1000);
        let mut twin = Switch::new(3, 1000);
        let mut held = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            let now = Time::from_secs(i as u64);
            match step {
                Step::Mod(fm) => {
                    let a = sw.apply(fm, now);
                    let b = twin.apply(fm, now);
                    prop_assert_eq!(a, b);
                }
                Step::Publish => {
                    let p = sw.tables.published();
                    let content = p.content();
                    held.push((p, content));
                }
                Step::DropOldest => {
                    if !held.is_empty() {
                        held.remove(0);
                    }
                }
                Step::Hit(id) => {
                    let a = sw.tables.add_hits(FlowId(*id), 2, 100, now);
                    let b = twin.tables.add_hits(FlowId(*id), 2, 100, now);
                    prop_assert_eq!(a, b);
                }
                Step::Lookups => {
                    sw.tables.note_lookups(1, 5, 3);
                    twin.tables.note_lookups(1, 5, 3);
                }
            }
            prop_assert_eq!(sw.tables.snapshot(), twin.tables.snapshot());
            prop_assert_eq!(sw.tables.set().content(), twin.tables.set().content());
            for (t, content) in &held {
                prop_assert_eq!(&t.content(), content);
            }
        }
        sw.tables.check_invariants();
        for (t, _) in &held {
            t.check_invariants();
        }
    }
}

/// After a publish whose snapshot is dropped, the next write catches
/// the spare copy up instead of copying the table.
#[test]
fn a_released_spare_is_reused_not_copied() {
    let mut sw = Switch::new(1, 1000);
    sw.ok(&add(0, 1, vec![in_port(1)], 1), Time(0));
    drop(sw.tables.published());
    let published = sw.tables.published();
    sw.ok(&add(0, 1, vec![in_port(2)], 1), Time(0)); // copies (no spare yet)
    let spare = Arc::as_ptr(&sw.tables.cow[0].spares[0].0);
    assert_eq!(spare, Arc::as_ptr(published.set_shared(0)));
    let again = sw.tables.published();
    drop(published);
    sw.ok(&add(0, 1, vec![in_port(3)], 1), Time(0)); // replays onto the spare
    assert_eq!(Arc::as_ptr(sw.tables.set.set_shared(0)), spare);
    assert_eq!(sw.tables.table(0).unwrap().len(), 3);
    assert_eq!(again.table(0).unwrap().len(), 2);
    sw.tables.check_invariants();
}

/// Expiry looks only at the entries with a timeout: the index follows
/// adds, replacements, modifications and deletions, and what expires is
/// what the timeouts say, in table then installation order.
#[test]
fn expiry_index_holds_exactly_the_timed_entries() {
    let mut sw = Switch::new(4, 1000);
    for p in 0..50 {
        sw.ok(&add(0, 10, vec![in_port(p)], 1), Time::from_secs(1));
    }
    let mut hard = add(2, 10, vec![in_port(1)], 1);
    hard.hard_timeout = 5;
    hard.flags = SEND;
    let h = sw.ok(&hard, Time::from_secs(1)).installed.unwrap();
    let mut idle = add(1, 10, vec![in_port(2)], 1);
    idle.idle_timeout = 3;
    idle.flags = SEND;
    let i = sw.ok(&idle, Time::from_secs(1)).installed.unwrap();
    assert_eq!(sw.tables.timed, BTreeSet::from([h, i]));
    // Replacing a timed entry by a permanent one takes it out.
    let perm = add(1, 10, vec![in_port(2)], 3);
    sw.ok(&perm, Time::from_secs(1));
    assert_eq!(sw.tables.timed, BTreeSet::from([h]));
    // And back: a timed replacement is in again.
    let i3 = sw.ok(&idle, Time::from_secs(1)).installed.unwrap();
    assert_eq!(sw.tables.timed, BTreeSet::from([h, i3]));
    // Nothing due at 2 s; at 6 s both, table 1 before table 2.
    assert!(sw.tables.expire(Time::from_secs(2)).is_empty());
    let gone = sw.tables.expire(Time::from_secs(6));
    let reasons: Vec<(u8, RemovalReason)> =
        gone.iter().map(|r| (r.body.table_id, r.reason)).collect();
    assert_eq!(
        reasons,
        vec![
            (1, RemovalReason::IdleTimeout),
            (2, RemovalReason::HardTimeout)
        ]
    );
    assert!(sw.tables.timed.is_empty());
    assert_eq!(sw.tables.len(), 50);
    // A deleted timed entry leaves the index.
    let t = sw.ok(&hard, Time::from_secs(10)).installed.unwrap();
    assert_eq!(sw.tables.timed, BTreeSet::from([t]));
    let del = flow(FlowModCommand::Delete, 2, 0, vec![]);
    sw.ok(&del, Time::from_secs(10));
    assert!(sw.tables.timed.is_empty());
}

#[test]
fn any_send_flow_rem_follows_adds_replacements_and_deletes() {
    let mut sw = Switch::new(2, 100);
    let t = Time::from_secs(1);
    sw.ok(&add(0, 10, vec![in_port(1)], 2), t);
    assert!(!sw.tables.any_send_flow_rem(), "no entry asked");
    let asking = |p: u32| FlowMod {
        flags: SEND,
        ..add(0, 10, vec![in_port(p)], 2)
    };
    sw.ok(&asking(2), t);
    sw.ok(&asking(3), t);
    assert!(sw.tables.any_send_flow_rem());
    // Replaced by an entry that does not ask: one asker left.
    sw.ok(&add(0, 10, vec![in_port(2)], 2), t);
    assert!(sw.tables.any_send_flow_rem());
    let gone = sw.ok(
        &flow(FlowModCommand::DeleteStrict, 0, 10, vec![in_port(3)]),
        t,
    );
    assert_eq!(gone.flow_removed.len(), 1);
    assert!(!sw.tables.any_send_flow_rem(), "the last asker was deleted");
}

/// What encoding a FLOW reply over 1M entries costs the control side
/// (the records of every page, as the agent asks for them: 4,096 entries
/// a page; in_port + VLAN entries, one output each). Figures, not
/// assertions: `cargo test -p pipeline --release flow_stats_reply_cost
/// -- --ignored --nocapture`.
#[test]
#[ignore]
fn flow_stats_reply_cost() {
    use std::time::Instant;
    let n = 1_000_000u32;
    let mut sw = Switch::new(2, 2_000_000);
    for i in 0..n {
        let vlan = exact(
            OxmField::VlanVid,
            OxmValue::U16(0x1000 | (i % 4094 + 1) as u16),
        );
        let fm = add(0, 1, vec![in_port(i / 4094 + 1), vlan], 1);
        sw.tables
            .apply_flow_mod(&fm, Time(0), &sw.groups, &sw.meters)
            .unwrap();
    }
    let filter = crate::any_flow();
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        let (mut at, mut bytes) = (None, 0);
        loop {
            let (records, next) = sw
                .tables
                .flow_stats_records(&filter, Time(5), at, 4096)
                .unwrap();
            bytes += records.len();
            match next {
                Some(p) => at = Some(p),
                None => break,
            }
        }
        let s = t.elapsed().as_secs_f64();
        assert!(bytes > n as usize * 80);
        best = best.min(s);
    }
    println!(
        "flow_stats_records over {n} entries: best of 7 {:.1} ms ({:.1} ns an entry)",
        best * 1e3,
        best * 1e9 / f64::from(n)
    );
}
