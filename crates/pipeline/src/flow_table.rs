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
//! * `slots: Vec<Option<FlowEntry>>` (with a free list), `entries:
//!   HashMap<FlowId, slot>` and `order: BTreeSet<FlowId>` — the entries,
//!   each in a slot of a dense vector (see "Entry slots" below), found by
//!   id in O(1) and iterated in id (= installation) order so statistics
//!   replies are deterministic;
//! * `by_key: FastMap<hash of (priority, MatchKey), FlowId>` plus
//!   `by_key_overflow: FastMap<(priority, MatchKey), FlowId>` — the strict
//!   index: an entry's identity in OpenFlow is its table, priority and
//!   match as a set of fields, so ADD finds the entry it replaces and the
//!   strict commands find their one entry in O(1) ([`FlowTable::find_key`]:
//!   the hash's entry is checked against its stored key, a different one
//!   falls through to the overflow map, which holds entries whose hash was
//!   taken — empty in practice; tests keep 4 bits of the hash so that it
//!   is not). Keyed by the hash it holds 16 bytes a slot instead of a
//!   second copy of every match: 1339 -> 1129 bytes per entry at 1M
//!   (849 once the classifier stopped keeping its own copy of each rule)
//!   (`bytes_per_rule` test below);
//! * `lookup_count` / `matched_count` — the table counters the data side
//!   feeds through [`Tables::note_lookup`] or, folded in bulk,
//!   [`Tables::note_lookups`];
//! * `index: classifier::Table` — the fast classifier over every entry's
//!   (id, priority, match fields), rule id = `FlowId << SLOT_BITS | slot`;
//!   it holds only its lookup structures, no copy of the rules, so
//!   removing an entry hands its rule back (`rule_of`). It is
//!   changed in exactly two places, `FlowTable::put` and
//!   `FlowTable::take`, through which every path that adds, replaces,
//!   modifies (detach + attach), deletes, expires or removes entries for a
//!   deleted group or meter goes; invariant 7 checks it. The classifier's
//!   tie rule (smallest id) is the linear scan's (oldest entry) because
//!   ids grow with installation. [`FlowTable::lookup`] and
//!   [`FlowTable::lookup_burst`] use it; its generation
//!   ([`FlowTable::generation`]) moves with every change and keys the
//!   workers' flow caches.
//!
//! # Entry slots
//!
//! The classifier's rule id for an entry is `FlowId << SLOT_BITS | slot`,
//! so a hit names the entry's slot directly: the datapath reads the entry
//! with one indexed load ([`FlowTable::slot`]), can prefetch it across a
//! burst ([`FlowTable::prefetch_slot`]) and keeps its per-flow counters in
//! a plain per-worker array indexed by slot (`datapath::counters`).
//! Before, a hit went through `HashMap<FlowId, FlowEntry>`: two dependent
//! cache misses per packet with 100K entries (about 17% of the gateway
//! benchmark's time, measured with perf). The FlowId in the high bits
//! keeps "smallest rule id wins" equal to "oldest entry wins". Slots are
//! reused (last freed first), deterministically, so replayed copies agree
//! on them; a slot names an entry only within one table generation, which
//! is what the flow caches key on. Beside the slots, `fast` holds each
//! entry's compiled form (`datapath::fast::FastEntry`, one cache line,
//! made in `put`), which is all the forwarding loop reads for entries made
//! of one apply-actions list. Limits: 2^24 slots per table and ids
//! below 2^40; past them the table falls back to the linear scan
//! (`index_broken`).
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
//! 2. `by_key` + `by_key_overflow` hold exactly one key per entry, found by
//!    `find_key(e.priority, e.key)`, and no two entries of a table share one.
//! 3. `e.key == MatchKey::new(&e.match_)`; `e.match_` is the TLV list as
//!    the controller sent it.
//! 4. `group_refs[g]` holds `id` exactly when entry `id` has a group
//!    action to `g`; likewise `meter_refs`. Empty sets are removed.
//! 5. No table has more than `max_entries` entries.
//! 6. A modification that returns an error has changed nothing: every
//!    check (flags, table id, match, instructions, overlap, capacity) runs
//!    before the first write.
//! 7. `index` holds exactly one rule per entry, equal to the entry's id,
//!    priority and (canonical) match fields.
//! 8. `order` holds exactly the ids of `entries`.
//! 9. `entries[id]` is a slot holding entry `id`; every other slot is
//!    empty and on the free list exactly once.
//!
//! # Publishing: multi-buffered copy-on-write per table
//!
//! Workers read an immutable copy of the switch (`datapath::Snapshot`,
//! published as an `Arc`), so every publish clones `Tables`. Each
//! `FlowTable` (entries, strict index, classifier index) and the
//! `location` index sit in a `Dual`: the control side's copy `cur` behind
//! an `Arc`, up to `MAX_SPARES` (2) older copies left by earlier
//! publishes, and a log of the changes the oldest of them has not seen.
//! Every write is an operation (`TableOp`: put, take, add hits, add
//! lookups; `LocOp`: insert, remove), applied to `cur` and logged.
//!
//! * A publish clones `Tables`: `n_tables + 3` pointer copies, O(1) in
//!   entries (measured ~200 ns at 100K and 1M entries).
//! * The first write to a structure after a publish finds `cur` shared.
//!   It takes a spare no snapshot holds anymore (the workers moved on),
//!   replays the operations that spare missed and swaps it in:
//!   O(changes since that spare's publish). Two spares let a worker still
//!   hold the previous snapshot while the one before it is reused. When
//!   no spare is free (first publish, or workers hold them all), the
//!   structure is copied, O(entries), and the published one becomes a
//!   spare. A table of at most `REBUILD_INDEX_BELOW` entries is copied by
//!   rebuilding its classifier index from the rules rather than cloning
//!   it (a routing table's DIR-24-8 engine is 64 MiB at any size; a fresh
//!   one costs nothing until written).
//! * The log is bounded (`MAX_LOG` operations or half the structure's
//!   size, whichever is larger: replaying that many costs about one copy);
//!   beyond it the spares are dropped and the next write after a publish
//!   copies. Sizing it by the table keeps a long bulk install, published
//!   every second, from copying the growing table at each publish:
//!   1M adds with a publish every 100K went from 133-135K to 211-217K
//!   flow-mods/s (`bulk_install_with_publishes` test, --release).
//!
//! Measured (`cargo test -p pipeline --release publish_cost -- --ignored
//! --nocapture`, one table of in_port+VLAN entries, shared 2-core VM):
//! at 100K entries a copy costs ~110 ms and the steady cycle (publish,
//! previous snapshot dropped, 10 flow-mods) ~50 µs; at 1M entries a copy
//! costs ~1.0-1.3 s and the steady cycle ~60 µs.
//!
//! Costs of the scheme: up to three copies of every table written after
//! publishes (memory); `group_refs` and `meter_refs` stay plain
//! `Arc::make_mut` (copied on the first write after a publish, only when
//! the entry uses groups or meters); folding counters (`add_hits`,
//! `note_lookups`) is a write like any other. A worker that keeps an old
//! snapshot for long forces copies. Not done: a persistent (chunked/HAMT)
//! map, which would bound the copies too.
//!
//! Every `Tables::new` draws a fresh [`Tables::instance`] number shared by
//! its clones; a worker's flow cache is cleared when the instance of the
//! tables it reads changes, since generations of unrelated tables are not
//! comparable. (Two clones of one instance changed independently can
//! reach the same generation with different contents; the runtime never
//! does that — it publishes clones of one control-side copy.)
//!
//! # Costs
//!
//! ADD/strict commands are O(1) plus instruction validation and the
//! classifier insert (amortized O(1); see `classifier::table`);
//! CHECK_OVERLAP and the non-strict commands scan the table;
//! [`Tables::expire`] scans every entry.

use crate::datapath::fast::FastEntry;
use crate::flow_entry::{FlowEntry, FlowId, FlowRemoved, RemovalReason};
use crate::group_table::Groups;
use crate::match_key::MatchKey;
use crate::meter_table::Meters;
use crate::validate::{validate_instructions, ActionPolicy, InstructionContext};
use crate::Time;
use classifier::FastMap;
use ofp::consts::{table_no, OFP_NO_BUFFER};
use ofp::error::{BadRequestCode, FlowModFailedCode};
use ofp::flow_mod::flow_mod_flags;
use ofp::stats::{AggregateStats, FlowStats, TableStats};
use ofp::{FlowMod, FlowModCommand, Match, OfpError};
use packet::flow_key::FlowKey;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Source of [`Tables::instance`] numbers.
static INSTANCES: AtomicU64 = AtomicU64::new(1);

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
    /// `FLOW_MOD_FAILED/TABLE_FULL`. At most [`MAX_TABLE_ENTRIES`].
    pub max_entries: usize,
    /// A memory budget for the entries of all tables, in bytes (0: none):
    /// an ADD that would take [`Tables::memory_estimate`] past it fails
    /// with `FLOW_MOD_FAILED/TABLE_FULL`.
    pub max_bytes: usize,
    /// Which output ports actions may name.
    pub policy: ActionPolicy,
}

/// The most entries one table can hold: its lookup index names an entry's
/// slot in 24 bits. The default limit, so that nothing below what memory
/// holds refuses an entry unless configured to.
pub const MAX_TABLE_ENTRIES: usize = 1 << 24;

/// What one entry costs besides its match fields and instructions, for
/// [`Tables::memory_estimate`]: the entry record, its compiled form, the
/// strict and id indexes and the classifier's slot, measured at about
/// 600 bytes for a two-field gateway entry at 1M entries (the
/// `bytes_per_rule` test).
pub const ENTRY_BYTES: usize = 480;

/// The estimated memory of an entry with `match_` and `instructions`.
fn entry_bytes(match_: &Match, instructions: &[ofp::Instruction]) -> usize {
    use ofp::Instruction as I;
    let actions: usize = instructions
        .iter()
        .map(|i| match i {
            I::ApplyActions { actions } | I::WriteActions { actions } => actions.len(),
            _ => 0,
        })
        .sum();
    ENTRY_BYTES + 48 * match_.fields.len() + 40 * instructions.len() + 40 * actions
}

impl Default for TablesConfig {
    /// 255 tables of up to [`MAX_TABLE_ENTRIES`] entries each, no memory
    /// budget, no `OFPP_NORMAL`.
    fn default() -> Self {
        TablesConfig {
            n_tables: 255,
            max_entries: MAX_TABLE_ENTRIES,
            max_bytes: 0,
            policy: ActionPolicy::default(),
        }
    }
}

/// Tables with at most this many entries are copied (copy-on-write) by
/// rebuilding their classifier index from the rules instead of cloning
/// it: a routing table's DIR-24-8 engine is 64 MiB whatever its size, and
/// a fresh zeroed one costs nothing until written.
const REBUILD_INDEX_BELOW: usize = 16384;

/// One flow table.
#[derive(Debug, Default)]
pub struct FlowTable {
    /// Where each entry lives in `slots`.
    entries: FastMap<FlowId, u32>,
    /// The entries, by slot (see "Entry slots" in the module comment).
    slots: Vec<Option<FlowEntry>>,
    /// Empty slots, reused last-freed first.
    free: Vec<u32>,
    /// The compiled form of each slot's entry (default when empty).
    fast: Vec<FastEntry>,
    /// One bit per slot, set when the slot holds an entry that did not
    /// compile: the burst prefetch asks this (a few KiB, cached) instead
    /// of the compiled line it has only just asked the CPU to load.
    general: Vec<u64>,
    /// The ids of `entries`, in order.
    order: BTreeSet<FlowId>,
    /// The strict index, by hash of `(priority, key)` (see `find_key`):
    /// 16 bytes a slot instead of a second copy of every match.
    by_key: FastMap<u64, FlowId>,
    /// Entries whose hash `by_key` already gives to another entry (a
    /// 64-bit collision: in practice empty).
    by_key_overflow: FastMap<(u16, MatchKey), FlowId>,
    lookup_count: u64,
    matched_count: u64,
    /// The fast classifier's copy of the entries' (id, priority, match).
    index: classifier::Table,
    /// Set when the index refused a rule (cannot happen for a valid
    /// `MatchKey`; kept as a guard): lookups then scan linearly.
    index_broken: bool,
    /// Changes so far (flow caches compare it); kept here, not taken from
    /// the index, because a copy may rebuild the index.
    generation: u64,
}

impl Clone for FlowTable {
    fn clone(&self) -> Self {
        let index = if self.entries.len() <= REBUILD_INDEX_BELOW && !self.index_broken {
            let mut t = classifier::Table::new();
            match t.insert_many(self.index.rules()) {
                Ok(_) => t,
                Err(_) => self.index.clone(),
            }
        } else {
            self.index.clone()
        };
        FlowTable {
            entries: self.entries.clone(),
            slots: self.slots.clone(),
            free: self.free.clone(),
            fast: self.fast.clone(),
            general: self.general.clone(),
            order: self.order.clone(),
            by_key: self.by_key.clone(),
            by_key_overflow: self.by_key_overflow.clone(),
            lookup_count: self.lookup_count,
            matched_count: self.matched_count,
            index,
            index_broken: self.index_broken,
            generation: self.generation,
        }
    }
}

/// A structure changed only through replayable operations, so that a
/// second copy can be caught up by replaying them (see [`Dual`]).
trait Replay: Clone {
    /// One change.
    type Op;
    /// What applying a change answers.
    type Out;
    /// Applies one change.
    fn apply(&mut self, op: &Self::Op) -> Self::Out;
    /// Applies one change the caller no longer needs (the control side's
    /// copy, after logging): may move out of it instead of cloning.
    fn apply_owned(&mut self, op: Self::Op) -> Self::Out {
        self.apply(&op)
    }
    /// Number of elements a full copy clones (sizes the log, see `Dual`).
    fn size(&self) -> usize;
}

/// Most logged operations (per structure) kept for catching up old
/// copies; beyond it they are dropped (the next write after a publish
/// copies instead).
const MAX_LOG: usize = 1 << 16;

/// The log may also grow to a structure's size over this: replaying
/// that many operations costs about what a full copy does (measured:
/// `bulk_install_with_publishes` below), so a long bulk install with
/// publishes in between catches spares up instead of copying the growing
/// table at every publish.
const LOG_PER_COPY: usize = 2;

/// Most old copies a [`Dual`] keeps for reuse.
const MAX_SPARES: usize = 2;

/// Multi-buffered copy-on-write (see the module comment, "Publishing"):
/// `cur` is the control side's copy, shared with published snapshots
/// after a clone; `spares` are copies earlier publishes left behind, each
/// with the number of operations it has seen; `log` holds the operations
/// from number `log_start` on, `applied` counts those `cur` has seen.
/// When `cur` is shared, a write takes a spare no snapshot holds anymore,
/// replays the operations it missed and swaps it in: O(changes since
/// that spare's publish) instead of O(structure). Keeping two spares lets
/// a worker still hold the previous snapshot while the one before it is
/// reused.
#[derive(Debug)]
struct Dual<T: Replay> {
    cur: Arc<T>,
    spares: Vec<(Arc<T>, usize)>,
    log: std::collections::VecDeque<T::Op>,
    log_start: usize,
    applied: usize,
}

impl<T: Replay> Clone for Dual<T> {
    /// A clone shares `cur` (a publish): O(1).
    fn clone(&self) -> Self {
        Dual {
            cur: self.cur.clone(),
            spares: Vec::new(),
            log: Default::default(),
            log_start: 0,
            applied: 0,
        }
    }
}

impl<T: Replay + Default> Default for Dual<T> {
    fn default() -> Self {
        Dual {
            cur: Arc::default(),
            spares: Vec::new(),
            log: Default::default(),
            log_start: 0,
            applied: 0,
        }
    }
}

impl<T: Replay> Dual<T>
where
    T::Op: Clone,
{
    fn get(&self) -> &T {
        &self.cur
    }

    /// Applies `op` to the control side's copy.
    fn write(&mut self, op: T::Op) -> T::Out {
        if Arc::get_mut(&mut self.cur).is_none() {
            // Published: reuse a spare nothing reads anymore, else copy.
            let free = self
                .spares
                .iter_mut()
                .position(|(c, _)| Arc::get_mut(c).is_some());
            let fresh = match free {
                Some(i) => {
                    let (mut copy, at) = self.spares.swap_remove(i);
                    if let Some(c) = Arc::get_mut(&mut copy) {
                        for o in self.log.iter().skip(at.saturating_sub(self.log_start)) {
                            c.apply(o);
                        }
                    }
                    copy
                }
                None => Arc::new(T::clone(&self.cur)),
            };
            let old = std::mem::replace(&mut self.cur, fresh);
            self.spares.push((old, self.applied));
            if self.spares.len() > MAX_SPARES {
                // Drop the copy that lags most.
                if let Some(i) = (0..self.spares.len()).min_by_key(|&i| self.spares[i].1) {
                    self.spares.swap_remove(i);
                }
            }
        }
        self.applied += 1;
        if self.spares.is_empty() || self.log.len() >= MAX_LOG.max(self.cur.size() / LOG_PER_COPY) {
            self.spares.clear();
            self.log.clear();
            self.log_start = self.applied;
        } else {
            self.log.push_back(op.clone());
            // Forget operations every spare has seen.
            let oldest = self
                .spares
                .iter()
                .map(|s| s.1)
                .min()
                .unwrap_or(self.applied);
            while self.log_start < oldest && self.log.pop_front().is_some() {
                self.log_start += 1;
            }
        }
        match Arc::get_mut(&mut self.cur) {
            Some(cur) => cur.apply_owned(op),
            // Unreachable: `cur` was made unique above.
            None => Arc::make_mut(&mut self.cur).apply_owned(op),
        }
    }
}

/// A change of one [`FlowTable`].
#[derive(Clone, Debug)]
enum TableOp {
    /// Shared with the log: logging it is a reference count, and the
    /// control side's copy takes the entry without a clone when no spare
    /// needs it (`apply_owned`); each spare's replay clones it once.
    Put(Arc<FlowEntry>),
    Take(FlowId),
    Hits {
        id: FlowId,
        packets: u64,
        bytes: u64,
        last_hit: Time,
    },
    Lookups {
        lookups: u64,
        matched: u64,
    },
}

impl Replay for FlowTable {
    type Op = TableOp;
    /// `Take`: the entry removed; `Hits`: whether the entry exists.
    type Out = (Option<FlowEntry>, bool);

    fn apply_owned(&mut self, op: TableOp) -> (Option<FlowEntry>, bool) {
        match op {
            TableOp::Put(e) => {
                self.put(Arc::try_unwrap(e).unwrap_or_else(|e| FlowEntry::clone(&e)));
                (None, true)
            }
            op => self.apply(&op),
        }
    }

    fn size(&self) -> usize {
        self.entries.len()
    }

    fn apply(&mut self, op: &TableOp) -> (Option<FlowEntry>, bool) {
        match op {
            TableOp::Put(e) => {
                self.put(FlowEntry::clone(e));
                (None, true)
            }
            TableOp::Take(id) => {
                let e = self.take(*id);
                let found = e.is_some();
                (e, found)
            }
            TableOp::Hits {
                id,
                packets,
                bytes,
                last_hit,
            } => {
                let Some(e) = self.entry_mut(*id) else {
                    return (None, false);
                };
                e.packet_count = e.packet_count.wrapping_add(*packets);
                e.byte_count = e.byte_count.wrapping_add(*bytes);
                if *packets > 0 && *last_hit > e.last_used {
                    e.last_used = *last_hit;
                }
                (None, true)
            }
            TableOp::Lookups { lookups, matched } => {
                self.lookup_count = self.lookup_count.wrapping_add(*lookups);
                self.matched_count = self.matched_count.wrapping_add(*matched);
                (None, true)
            }
        }
    }
}

/// A change of the `location` index.
#[derive(Clone, Copy, Debug)]
enum LocOp {
    Insert(FlowId, u8),
    Remove(FlowId),
}

/// `FlowId -> table id`.
#[derive(Clone, Debug, Default)]
struct Location(FastMap<FlowId, u8>);

impl Replay for Location {
    type Op = LocOp;
    type Out = Option<u8>;

    fn apply(&mut self, op: &LocOp) -> Option<u8> {
        match *op {
            LocOp::Insert(id, t) => self.0.insert(id, t),
            LocOp::Remove(id) => self.0.remove(&id),
        }
    }

    fn size(&self) -> usize {
        self.0.len()
    }
}

/// Bits of a classifier rule id that hold the entry's slot (the rest hold
/// its [`FlowId`], so the classifier's "smallest id wins" stays "oldest
/// entry wins").
pub const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// The classifier rule id of entry `id` in slot `slot`; `None` when one
/// does not fit (a slot past 2^24 or an id past 2^40: the table then falls
/// back to the linear scan).
fn rule_id(id: FlowId, slot: u32) -> Option<u64> {
    (u64::from(slot) <= SLOT_MASK && id.0 < 1 << (64 - SLOT_BITS))
        .then(|| (id.0 << SLOT_BITS) | u64::from(slot))
}

/// The strict index's hash of `(priority, key)`.
fn key_hash(priority: u16, key: &MatchKey) -> u64 {
    use std::hash::BuildHasher;
    let h = classifier::FastBuild::default().hash_one((priority, key));
    #[cfg(test)]
    let h = h & KEY_HASH_MASK.with(std::cell::Cell::get);
    h
}

#[cfg(test)]
thread_local! {
    /// Tests keep 4 bits of `key_hash`, so that collisions are common and
    /// every test exercises `by_key_overflow` too.
    static KEY_HASH_MASK: std::cell::Cell<u64> = const { std::cell::Cell::new(0xf) };
}

/// The classifier rule of an entry in slot `slot`: id, priority and match
/// fields.
fn rule_of(e: &FlowEntry, id: u64) -> classifier::Rule {
    classifier::Rule {
        id,
        priority: e.priority,
        fields: e
            .key
            .fields()
            .iter()
            .map(|f| classifier::FieldMatch {
                field: f.field as u8,
                value: f.value,
                mask: f.mask,
            })
            .collect(),
    }
}

impl FlowTable {
    /// Adds an entry to the table, its strict index and the classifier.
    fn put(&mut self, e: FlowEntry) {
        self.generation += 1;
        if self.entries.contains_key(&e.id) {
            // Never done (a replacement takes the old entry first); kept
            // exact anyway.
            self.take(e.id);
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.fast.push(FastEntry::default());
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        if let Some(f) = self.fast.get_mut(slot as usize) {
            *f = FastEntry::compile(&e);
            let compiled = f.ops().is_some();
            self.set_general(slot, !compiled);
        }
        let ok = rule_id(e.id, slot).is_some_and(|rid| self.index.insert(rule_of(&e, rid)).is_ok());
        if !ok {
            self.index_broken = true;
        }
        self.index_key(&e);
        self.order.insert(e.id);
        self.entries.insert(e.id, slot);
        if let Some(s) = self.slots.get_mut(slot as usize) {
            *s = Some(e);
        }
    }

    /// Takes an entry out of the table, its strict index and the
    /// classifier.
    fn take(&mut self, id: FlowId) -> Option<FlowEntry> {
        let slot = self.entries.remove(&id)?;
        let e = self.slots.get_mut(slot as usize)?.take()?;
        if let Some(f) = self.fast.get_mut(slot as usize) {
            *f = FastEntry::default();
        }
        self.set_general(slot, false);
        self.free.push(slot);
        self.generation += 1;
        self.order.remove(&id);
        self.unindex_key(&e);
        // The classifier keeps no copy of the rule: it is handed back. Not
        // finding it would break invariant 7; lookups then scan instead.
        let removed = rule_id(id, slot).is_some_and(|rid| self.index.remove(&rule_of(&e, rid)));
        if !removed {
            self.index_broken = true;
        }
        Some(e)
    }

    /// The id of the entry with exactly this priority and match (the
    /// strict index).
    pub fn find_key(&self, priority: u16, key: &MatchKey) -> Option<FlowId> {
        let same = |id: &FlowId| {
            self.entry(*id)
                .is_some_and(|e| e.priority == priority && e.key == *key)
        };
        if let Some(id) = self
            .by_key
            .get(&key_hash(priority, key))
            .filter(|id| same(id))
        {
            return Some(*id);
        }
        if self.by_key_overflow.is_empty() {
            return None;
        }
        self.by_key_overflow.get(&(priority, key.clone())).copied()
    }

    /// Adds `e` to the strict index (before it is in `slots`: a hash
    /// already taken belongs to another entry, since a replaced entry is
    /// taken out first).
    fn index_key(&mut self, e: &FlowEntry) {
        match self.by_key.entry(key_hash(e.priority, &e.key)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(e.id);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.by_key_overflow
                    .insert((e.priority, e.key.clone()), e.id);
            }
        }
    }

    /// Removes `e` from the strict index.
    fn unindex_key(&mut self, e: &FlowEntry) {
        let h = key_hash(e.priority, &e.key);
        if self.by_key.get(&h) == Some(&e.id) {
            self.by_key.remove(&h);
        } else {
            self.by_key_overflow.remove(&(e.priority, e.key.clone()));
        }
    }

    /// The entry with id `id`, if it is in this table.
    pub fn entry(&self, id: FlowId) -> Option<&FlowEntry> {
        let slot = *self.entries.get(&id)?;
        self.slots.get(slot as usize)?.as_ref()
    }

    fn entry_mut(&mut self, id: FlowId) -> Option<&mut FlowEntry> {
        let slot = *self.entries.get(&id)?;
        self.slots.get_mut(slot as usize)?.as_mut()
    }

    /// The entry in slot `slot` (as [`FlowTable::lookup_burst_slots`]
    /// answers), if any. Slots are reused after removals, so a slot names
    /// an entry only for one [`FlowTable::generation`].
    #[inline]
    pub fn slot(&self, slot: u32) -> Option<&FlowEntry> {
        self.slots.get(slot as usize)?.as_ref()
    }

    /// Hints the CPU to load slot `slot`'s entry (not what it points to).
    #[inline]
    pub fn prefetch_slot(&self, slot: u32) {
        if let Some(s) = self.slots.get(slot as usize) {
            classifier::prefetch_all(s);
        }
    }

    /// The compiled form of slot `slot`'s entry (see
    /// [`crate::datapath::fast`]).
    #[inline]
    pub fn fast(&self, slot: u32) -> Option<&FastEntry> {
        self.fast.get(slot as usize)
    }

    /// Whether slot `slot` holds an entry that did not compile (so
    /// executing it reads the full entry, see [`FlowTable::slot`]).
    #[inline]
    pub fn is_general(&self, slot: u32) -> bool {
        self.general
            .get(slot as usize / 64)
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }

    fn set_general(&mut self, slot: u32, on: bool) {
        let i = slot as usize / 64;
        if self.general.len() <= i {
            self.general.resize(i + 1, 0);
        }
        if let Some(w) = self.general.get_mut(i) {
            let bit = 1u64 << (slot % 64);
            if on {
                *w |= bit;
            } else {
                *w &= !bit;
            }
        }
    }

    /// Hints the CPU to load slot `slot`'s compiled entry.
    #[inline]
    pub fn prefetch_fast(&self, slot: u32) {
        if let Some(f) = self.fast.get(slot as usize) {
            classifier::prefetch(f);
        }
    }

    /// The number of slots (every slot number is below it).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The entry a classifier hit names (checked against the id, which
    /// cannot differ while the index mirrors the table).
    #[inline]
    fn entry_of_hit(&self, rid: u64) -> Option<&FlowEntry> {
        let e = self.slot((rid & SLOT_MASK) as u32)?;
        (e.id.0 == rid >> SLOT_BITS).then_some(e)
    }

    /// The entry `packet` hits: highest priority, then oldest (smallest
    /// id), through the fast classifier. Equals
    /// [`crate::datapath::lookup::LinearScan::lookup_table`].
    pub fn lookup(&self, packet: &FlowKey) -> Option<&FlowEntry> {
        if self.index_broken {
            return crate::datapath::lookup::LinearScan::lookup_table(self, packet);
        }
        let hit = self.index.lookup(packet)?;
        self.entry_of_hit(hit.id)
    }

    /// The slot of the entry `packet` hits (see [`FlowTable::lookup`]).
    #[inline]
    pub fn lookup_slot(&self, packet: &FlowKey) -> Option<u32> {
        if self.index_broken {
            let e = self.lookup(packet)?;
            return self.entries.get(&e.id).copied();
        }
        let hit = self.index.lookup(packet)?;
        Some((hit.id & SLOT_MASK) as u32)
    }

    /// The entry slots a burst of packets hit, `out[i]` for `packets[i]`
    /// (`out` at least as long as `packets`), with the classifier's burst
    /// lookup (prefetching across the burst). Read the entries with
    /// [`FlowTable::slot`].
    pub fn lookup_burst_slots<K: std::borrow::Borrow<FlowKey>>(
        &self,
        packets: &[K],
        out: &mut [Option<u32>],
    ) {
        if self.index_broken {
            for (k, o) in packets.iter().zip(out.iter_mut()) {
                *o = self
                    .lookup(k.borrow())
                    .and_then(|e| self.entries.get(&e.id).copied());
            }
            return;
        }
        let mut hits = [None; 32];
        for (keys, outs) in packets.chunks(32).zip(out.chunks_mut(32)) {
            let hits = &mut hits[..keys.len()];
            self.index.lookup_burst(keys, hits);
            for (o, h) in outs.iter_mut().zip(hits.iter()) {
                *o = h.map(|h| (h.id & SLOT_MASK) as u32);
            }
        }
    }

    /// The entry ids a burst of packets hit, `out[i]` for `packets[i]`
    /// (`out` at least as long as `packets`), with the classifier's burst
    /// lookup (prefetching across the burst).
    pub fn lookup_burst(&self, packets: &[FlowKey], out: &mut [Option<FlowId>]) {
        let mut slots = vec![None; packets.len()];
        self.lookup_burst_slots(packets, &mut slots);
        for (o, s) in out.iter_mut().zip(slots) {
            *o = s.and_then(|s| self.slot(s)).map(|e| e.id);
        }
    }

    /// The table's generation: changes with every entry added, changed
    /// or removed (flow caches compare it).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The classifier index (for shape reports and benchmarks).
    pub fn index(&self) -> &classifier::Table {
        &self.index
    }

    /// The entries in installation order.
    pub fn entries(&self) -> impl Iterator<Item = &FlowEntry> {
        self.order.iter().filter_map(|id| self.entry(*id))
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
/// §7.3.5.2): table (or `OFPTT_ALL`), out_port (or `OFPP_ANY`), out_group
/// (or `OFPG_ANY`), cookie/cookie_mask, and a match that selected entries
/// are at least as specific as. It is the request body itself.
pub type FlowFilter = ofp::stats::FlowStatsRequest;

/// Where a page of a FLOW statistics reply ended: the table and the id of
/// its last entry (see [`Tables::flow_stats_page`]).
pub type FlowPos = (u8, FlowId);

/// Whether `e` passes a request's cookie, out_port and out_group
/// conditions (its match is the caller's to check).
fn passes(e: &FlowEntry, cookie: u64, cookie_mask: u64, out_port: u32, out_group: u32) -> bool {
    e.cookie_matches(cookie, cookie_mask)
        && e.outputs_to(out_port)
        && e.forwards_to_group(out_group)
}

/// The statistics of one entry at `now`.
fn flow_stats_of(e: &FlowEntry, now: Time) -> FlowStats {
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
}

/// A filter selecting every entry of every table.
pub fn any_flow() -> FlowFilter {
    FlowFilter {
        table_id: table_no::ALL,
        out_port: ofp::consts::port_no::ANY,
        out_group: ofp::consts::group_no::ANY,
        cookie: 0,
        cookie_mask: 0,
        match_: Match::default(),
    }
}

/// All flow tables of one switch. See the module comment.
#[derive(Clone, Debug)]
pub struct Tables {
    config: TablesConfig,
    tables: Vec<Dual<FlowTable>>,
    next_id: u64,
    location: Dual<Location>,
    group_refs: Arc<HashMap<u32, BTreeSet<FlowId>>>,
    meter_refs: Arc<HashMap<u32, BTreeSet<FlowId>>>,
    instance: u64,
    /// [`Tables::memory_estimate`].
    bytes: usize,
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
            tables: (0..config.n_tables).map(|_| Dual::default()).collect(),
            config,
            next_id: 1,
            location: Dual::default(),
            group_refs: Arc::default(),
            meter_refs: Arc::default(),
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            bytes: 0,
        }
    }

    /// A number identifying this set of tables and its clones (fresh for
    /// every [`Tables::new`]): table generations are comparable only
    /// between tables of the same instance.
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// Applies one change to table `table_id` (see [`Dual`]).
    fn write(&mut self, table_id: u8, op: TableOp) -> (Option<FlowEntry>, bool) {
        match self.tables.get_mut(usize::from(table_id)) {
            Some(t) => t.write(op),
            None => (None, false),
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
        self.tables.get(usize::from(table_id)).map(Dual::get)
    }

    /// An entry by id.
    pub fn entry(&self, id: FlowId) -> Option<&FlowEntry> {
        let t = self.location.get().0.get(&id)?;
        self.table(*t)?.entry(id)
    }

    /// Total entries in all tables.
    pub fn len(&self) -> usize {
        self.location.get().0.len()
    }

    /// True when no table has an entry.
    pub fn is_empty(&self) -> bool {
        self.location.get().0.is_empty()
    }

    /// Number of entries forwarding to `group`.
    pub fn group_ref_count(&self, group: u32) -> usize {
        self.group_refs.get(&group).map_or(0, BTreeSet::len)
    }

    /// The estimated memory of every entry (see [`ENTRY_BYTES`]): what a
    /// memory budget ([`TablesConfig::max_bytes`]) is checked against.
    pub fn memory_estimate(&self) -> usize {
        self.bytes
    }

    /// Number of entries using `meter`.
    pub fn meter_flow_count(&self, meter: u32) -> usize {
        self.meter_refs.get(&meter).map_or(0, BTreeSet::len)
    }

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
        let max_entries = self.config.max_entries;
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
        let slot = (fm.priority, key);
        let existing = table.find_key(slot.0, &slot.1);
        let max_entries = max_entries.min(MAX_TABLE_ENTRIES);
        if existing.is_none() && table.entries.len() >= max_entries {
            return Err(fm_failed(FlowModFailedCode::TableFull));
        }
        if self.config.max_bytes > 0 {
            let freed = existing
                .and_then(|id| table.entry(id))
                .map_or(0, |e| entry_bytes(&e.match_, &e.instructions));
            let after =
                self.bytes - freed.min(self.bytes) + entry_bytes(&fm.match_, &fm.instructions);
            if after > self.config.max_bytes {
                return Err(fm_failed(FlowModFailedCode::TableFull));
            }
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
            self.tables.iter().map(Dual::get).collect()
        } else {
            self.table(table_id).into_iter().collect()
        };
        let keep = |e: &FlowEntry| passes(e, cookie, cookie_mask, out_port, out_group);
        let mut ids = Vec::new();
        for table in tables {
            match priority {
                Some(p) => {
                    if let Some(e) = table.find_key(p, key).and_then(|id| table.entry(id)) {
                        if keep(e) {
                            ids.push(e.id);
                        }
                    }
                }
                None => ids.extend(
                    table
                        .entries()
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
        self.bytes += entry_bytes(&e.match_, &e.instructions);
        for g in e.groups() {
            Arc::make_mut(&mut self.group_refs)
                .entry(g)
                .or_default()
                .insert(id);
        }
        if let Some(m) = e.meter() {
            Arc::make_mut(&mut self.meter_refs)
                .entry(m)
                .or_default()
                .insert(id);
        }
        self.location.write(LocOp::Insert(id, e.table_id));
        self.write(e.table_id, TableOp::Put(Arc::new(e)));
    }

    /// Takes an entry out of its table and every index.
    fn detach(&mut self, id: FlowId) -> Option<FlowEntry> {
        let t = self.location.write(LocOp::Remove(id))?;
        let e = self.write(t, TableOp::Take(id)).0?;
        self.bytes = self
            .bytes
            .saturating_sub(entry_bytes(&e.match_, &e.instructions));
        for g in e.groups() {
            unref(Arc::make_mut(&mut self.group_refs), g, id);
        }
        if let Some(m) = e.meter() {
            unref(Arc::make_mut(&mut self.meter_refs), m, id);
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
            .map(Dual::get)
            .flat_map(|t| t.entries())
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
        self.add_hits(id, 1, bytes, now)
    }

    /// Records `packets` packets of `bytes` bytes in total matching entry
    /// `id`, the latest at `last_hit` (the bulk form of
    /// [`Tables::note_hit`], for folding worker counters: O(1) whatever the
    /// packet count). False if no such entry.
    pub fn add_hits(&mut self, id: FlowId, packets: u64, bytes: u64, last_hit: Time) -> bool {
        let Some(&t) = self.location.get().0.get(&id) else {
            return false;
        };
        let op = TableOp::Hits {
            id,
            packets,
            bytes,
            last_hit,
        };
        self.write(t, op).1
    }

    /// Records `lookups` lookups in `table_id`, `matched` of which hit an
    /// entry (the bulk form of [`Tables::note_lookup`]).
    pub fn note_lookups(&mut self, table_id: u8, lookups: u64, matched: u64) {
        self.write(table_id, TableOp::Lookups { lookups, matched });
    }

    /// Records one lookup in `table_id` and whether it matched an entry.
    pub fn note_lookup(&mut self, table_id: u8, matched: bool) {
        self.note_lookups(table_id, 1, u64::from(matched));
    }

    /// The entries a statistics request selects, in table then
    /// installation order. Errors: `BAD_REQUEST/BAD_TABLE_ID` for a table
    /// that does not exist, `BAD_MATCH/*` for an invalid match.
    pub fn filter(&self, filter: &FlowFilter) -> Result<Vec<&FlowEntry>, OfpError> {
        Ok(self.selected(filter, None)?.collect())
    }

    /// The entries [`Tables::filter`] gives, lazily, and only those after
    /// position `after` when it is given (see
    /// [`Tables::flow_stats_page`]). Errors as [`Tables::filter`].
    fn selected<'s>(
        &'s self,
        filter: &FlowFilter,
        after: Option<FlowPos>,
    ) -> Result<impl Iterator<Item = &'s FlowEntry> + 's, OfpError> {
        if filter.table_id != table_no::ALL && filter.table_id >= self.config.n_tables {
            return Err(OfpError::BadRequest(BadRequestCode::BadTableId));
        }
        let key = MatchKey::new(&filter.match_)?;
        let FlowFilter {
            table_id,
            cookie,
            cookie_mask,
            out_port,
            out_group,
            ..
        } = *filter;
        let tables = self
            .tables
            .iter()
            .map(Dual::get)
            .enumerate()
            .filter_map(|(t, table)| Some((u8::try_from(t).ok()?, table)));
        Ok(tables
            .filter(move |(t, _)| {
                (table_id == table_no::ALL || table_id == *t)
                    && after.is_none_or(|(at, _)| *t >= at)
            })
            .flat_map(move |(t, table)| {
                let ids: Box<dyn Iterator<Item = &FlowId>> = match after {
                    Some((at, id)) if t == at => Box::new(
                        table
                            .order
                            .range((std::ops::Bound::Excluded(id), std::ops::Bound::Unbounded)),
                    ),
                    _ => Box::new(table.order.iter()),
                };
                ids.filter_map(move |id| table.entry(*id))
            })
            .filter(move |e| {
                e.key.is_within(&key) && passes(e, cookie, cookie_mask, out_port, out_group)
            }))
    }

    /// The FLOW multipart reply body for a request.
    pub fn flow_stats(&self, filter: &FlowFilter, now: Time) -> Result<Vec<FlowStats>, OfpError> {
        self.flow_stats_page(filter, now, None, usize::MAX)
            .map(|(stats, _)| stats)
    }

    /// One page of the FLOW multipart reply body: at most `limit` entries
    /// (at least one) of those [`Tables::flow_stats`] gives, starting after
    /// position `after` (from the start when `None`), and the position of
    /// the last one when the page is full (`None` when the answer ended in
    /// this page). Entries are in table then installation order, so a
    /// reply read page by page gives each entry that lived throughout at
    /// most once and in order, while entries installed meanwhile (newer
    /// ids) may appear and removed ones may be missing — with a few
    /// thousand entries per page, a 1M-entry dump holds one page at a
    /// time instead of a copy of every entry's match and instructions.
    pub fn flow_stats_page(
        &self,
        filter: &FlowFilter,
        now: Time,
        after: Option<FlowPos>,
        limit: usize,
    ) -> Result<(Vec<FlowStats>, Option<FlowPos>), OfpError> {
        let limit = limit.max(1);
        let mut out = Vec::new();
        for e in self.selected(filter, after)? {
            out.push(flow_stats_of(e, now));
            if out.len() >= limit {
                return Ok((out, Some((e.table_id, e.id))));
            }
        }
        Ok((out, None))
    }

    /// The AGGREGATE multipart reply body for a request. Entries whose
    /// counters are unavailable (`NO_PKT_COUNTS` / `NO_BYT_COUNTS`) add
    /// nothing to that sum.
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
            .map(Dual::get)
            .enumerate()
            .map(|(i, t)| TableStats {
                table_id: u8::try_from(i).unwrap_or(table_no::MAX),
                active_count: u32::try_from(t.entries.len()).unwrap_or(u32::MAX),
                lookup_count: t.lookup_count,
                matched_count: t.matched_count,
            })
            .collect()
    }

    /// Everything observable, in a canonical order: for "a failed
    /// modification changed nothing" checks. For tests.
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> (Vec<FlowEntry>, Vec<TableStats>, u64) {
        let entries = self
            .tables
            .iter()
            .map(Dual::get)
            .flat_map(|t| t.entries().cloned())
            .collect();
        (entries, self.table_stats(), self.next_id)
    }

    /// Checks every invariant of the module comment; panics naming the
    /// broken one. For tests.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut total = 0;
        let mut groups: HashMap<u32, BTreeSet<FlowId>> = HashMap::new();
        let mut meters: HashMap<u32, BTreeSet<FlowId>> = HashMap::new();
        for (t, table) in self.tables.iter().map(Dual::get).enumerate() {
            assert!(
                table.entries.len() <= self.config.max_entries,
                "5: capacity"
            );
            assert_eq!(
                table.by_key.len() + table.by_key_overflow.len(),
                table.entries.len(),
                "2: by_key size"
            );
            assert_eq!(table.index.len(), table.entries.len(), "7: index size");
            assert!(!table.index_broken, "7: index refused a rule");
            assert!(
                table
                    .order
                    .iter()
                    .eq(table.entries.keys().collect::<BTreeSet<_>>()),
                "8: order"
            );
            let used = table.slots.iter().filter(|s| s.is_some()).count();
            assert_eq!(used + table.free.len(), table.slots.len(), "9: slots");
            assert_eq!(table.fast.len(), table.slots.len(), "9: fast size");
            for &slot in &table.free {
                assert!(!table.is_general(slot), "9: general bit of a free slot");
            }
            for (id, &slot) in &table.entries {
                let e = table.slot(slot).expect("9: slot of an entry");
                assert_eq!(table.fast(slot), Some(&FastEntry::compile(e)), "9: fast");
                let compiled = FastEntry::compile(e).ops().is_some();
                assert_eq!(table.is_general(slot), !compiled, "9: general bit");
                total += 1;
                assert_eq!(*id, e.id, "1: id");
                assert_eq!(usize::from(e.table_id), t, "1: table id");
                assert_eq!(
                    self.location.get().0.get(id).map(|x| usize::from(*x)),
                    Some(t),
                    "1"
                );
                assert_eq!(table.find_key(e.priority, &e.key), Some(*id), "2");
                assert_eq!(MatchKey::new(&e.match_).as_ref(), Ok(&e.key), "3");
                let rid = rule_id(*id, slot).expect("7: rule id");
                let mut rule = rule_of(e, rid);
                rule.canonicalize().unwrap();
                assert!(table.index.contains(&rule), "7: index rule");
                for g in e.groups() {
                    groups.entry(g).or_default().insert(*id);
                }
                if let Some(m) = e.meter() {
                    meters.entry(m).or_default().insert(*id);
                }
            }
        }
        assert_eq!(total, self.location.get().0.len(), "1: location size");
        assert_eq!(groups, *self.group_refs, "4: group refs");
        assert_eq!(meters, *self.meter_refs, "4: meter refs");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group_table::GroupsConfig;
    use crate::meter_table::MetersConfig;
    use ofp::consts::{group_no, port_no};
    use ofp::error::{BadActionCode, BadInstructionCode, BadMatchCode, MeterModFailedCode};
    use ofp::{Action, GroupMod, GroupModCommand, GroupType, Instruction, MeterBand, MeterMod};
    use ofp::{MeterModCommand, Oxm, OxmField, OxmValue};
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

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
            self.groups
                .apply_group_mod(&gm, &mut self.tables, Time(0))
                .unwrap();
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
            self.meters
                .apply_meter_mod(&mm, &mut self.tables, Time(0))
                .unwrap();
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
            &Match {
                fields: vec![in_port(1)],
            },
            &output(2),
        );
        sw.tables.config.max_bytes = 3 * one + one / 2;
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
        assert_eq!(e.instructions, output(9));
        assert_eq!((e.cookie, e.idle_timeout, e.flags), (0x10, 30, SEND));
        assert_eq!(e.packet_count, 1, "counters kept");
        assert_eq!(e.installed_at, Time::from_secs(1), "duration kept");
        assert_eq!(sw.tables.entry(c).unwrap().instructions, output(1));

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
        assert_eq!(sw.tables.entry(a).unwrap().packet_count, 0);

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
        assert_eq!((ev.packet_count, ev.byte_count), (1, 64));
        assert_eq!((ev.duration_sec, ev.cookie, ev.table_id), (3, 0x100, 0));
        assert_eq!(ev.match_.fields, vec![in_port(1)]);

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
        assert_eq!((ev[0].duration_sec, ev[0].packet_count), (15, 3));
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
        assert_eq!(out.flow_removed[0].packet_count, u64::MAX);
        assert_eq!(out.flow_removed[0].byte_count, 100);
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
        let ev = sw
            .groups
            .apply_group_mod(&gd, &mut sw.tables, Time::from_secs(2))
            .unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].reason, RemovalReason::GroupDelete);
        assert_eq!((ev[0].reason.wire_v13(), ev[0].table_id), (3, 0));
        sw.tables.check_invariants();

        let md = MeterMod {
            command: MeterModCommand::Delete,
            flags: 0,
            meter_id: 2,
            bands: vec![],
        };
        let ev = sw
            .meters
            .apply_meter_mod(&md, &mut sw.tables, Time::from_secs(3))
            .unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].reason, ev[0].table_id),
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
                                prop_assert_eq!(&e.match_, &fm.match_);
                                prop_assert_eq!(&e.instructions, &fm.instructions);
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
        crate::flow_entry::instruction_actions(instructions)
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
                        port: first_output(&e.instructions),
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
                k.present |=
                    (1 << field::IP_PROTO) | (1 << field::IPV4_SRC) | (1 << field::IPV4_DST);
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
            use crate::datapath::lookup::{Classifier, FastClassifier, LinearScan};
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
                    let want = LinearScan.lookup(&sw.tables, t, p).map(|e| e.id);
                    prop_assert_eq!(FastClassifier.lookup(&sw.tables, t, p).map(|e| e.id), want);
                    prop_assert_eq!(*b, want);
                }
            }
        }
    }

    /// Publishing clones `Tables`: the clone shares every table and index
    /// (Arc), so it is O(tables) whatever the entry count, and a mod after
    /// it copies only the table it changes (the published copy unchanged).
    #[test]
    fn clones_share_tables_until_one_is_changed() {
        let mut sw = Switch::new(3, 1000);
        for i in 0..100u32 {
            sw.ok(&add(0, 1, vec![in_port(i + 1)], 1), Time(0));
        }
        sw.ok(&add(1, 1, vec![], 1), Time(0));
        let published = sw.tables.clone();
        assert!(Arc::ptr_eq(
            &published.tables[0].cur,
            &sw.tables.tables[0].cur
        ));
        assert!(Arc::ptr_eq(
            &published.location.cur,
            &sw.tables.location.cur
        ));
        sw.ok(&add(1, 2, vec![in_port(7)], 1), Time(0));
        assert!(Arc::ptr_eq(
            &published.tables[0].cur,
            &sw.tables.tables[0].cur
        ));
        assert!(!Arc::ptr_eq(
            &published.tables[1].cur,
            &sw.tables.tables[1].cur
        ));
        assert_eq!(published.table(1).unwrap().len(), 1);
        assert_eq!(sw.tables.table(1).unwrap().len(), 2);
        assert_ne!(
            published.table(1).unwrap().generation(),
            sw.tables.table(1).unwrap().generation()
        );
        assert_eq!(published.instance(), sw.tables.instance());
        assert_ne!(Tables::default().instance(), sw.tables.instance());
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
            let mut published = sw.tables.clone();
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
                let next = sw.tables.clone();
                drop(std::mem::replace(&mut published, next));
                for _ in 0..10 {
                    mod_once(&mut sw);
                }
                cycle += t.elapsed();
            }
            let t = Instant::now();
            let deep = sw.tables.tables[0].get().clone();
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
            std::mem::size_of::<crate::match_key::KeyField>(),
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
        let mut published = sw.tables.clone();
        let t = Instant::now();
        for i in 0..n {
            if i % 100_000 == 0 {
                let next = sw.tables.clone();
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
                    Step::Publish => held.push((sw.tables.clone(), sw.tables.snapshot())),
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
                for (t, snap) in &held {
                    prop_assert_eq!(&t.snapshot(), snap);
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
        drop(sw.tables.clone());
        let published = sw.tables.clone();
        sw.ok(&add(0, 1, vec![in_port(2)], 1), Time(0)); // copies (no spare yet)
        let spare = Arc::as_ptr(&sw.tables.tables[0].spares[0].0);
        assert_eq!(spare, Arc::as_ptr(&published.tables[0].cur));
        let again = sw.tables.clone();
        drop(published);
        sw.ok(&add(0, 1, vec![in_port(3)], 1), Time(0)); // replays onto the spare
        assert_eq!(Arc::as_ptr(&sw.tables.tables[0].cur), spare);
        assert_eq!(sw.tables.table(0).unwrap().len(), 3);
        assert_eq!(again.table(0).unwrap().len(), 2);
        sw.tables.check_invariants();
    }
}
