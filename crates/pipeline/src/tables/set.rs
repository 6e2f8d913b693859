//! [`Tables`]: every flow table of a switch as the control side keeps
//! them, and [`TableSet`], the part the workers read (published).

use super::compiled::FastEntry;
use super::cow::Dual;
use super::table::{FlowTable, TableOp};
use crate::model::flow_entry::{EntryCounter, FlowEntry, FlowId};
use crate::model::match_key::MatchKey;
use crate::tables::validate::ActionPolicy;
use classifier::FastMap;
use ofp::error::FlowModFailedCode;
use ofp::flow_mod::flow_mod_flags;
use ofp::OfpError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Source of [`Tables::instance`] numbers.
static INSTANCES: AtomicU64 = AtomicU64::new(1);

/// Every `OFPFF_*` bit OpenFlow 1.3 defines.
pub(super) const KNOWN_FLAGS: u16 = flow_mod_flags::SEND_FLOW_REM
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
/// strict and id indexes and the classifier's slot. The `bytes_per_rule`
/// test measures 674 bytes an entry for a million three-field entries with
/// one output each (their instructions packed, see
/// [`crate::model::instructions`]); [`entry_bytes`] estimates 704 for
/// them, counting instructions and actions as if decoded.
pub const ENTRY_BYTES: usize = 480;

/// The estimated memory of an entry with match `key` and a number of
/// instructions and of actions in them.
pub(super) fn entry_bytes(key: &MatchKey, (instructions, actions): (usize, usize)) -> usize {
    ENTRY_BYTES + 48 * key.fields().len() + 40 * instructions + 40 * actions
}

impl Default for TablesConfig {
    /// 255 tables of up to [`MAX_TABLE_ENTRIES`] entries each, no memory
    /// budget, `OFPP_NORMAL` accepted.
    fn default() -> Self {
        TablesConfig {
            n_tables: 255,
            max_entries: MAX_TABLE_ENTRIES,
            max_bytes: 0,
            policy: ActionPolicy::default(),
        }
    }
}

/// Tables to a published chunk (see [`TableSet`]).
const CHUNK: usize = 16;

/// [`CHUNK`] tables, shared as one.
type Chunk = [Arc<FlowTable>; CHUNK];

/// The flow tables as the workers read them: one [`FlowTable`] each,
/// behind an `Arc`, sixteen to a shared chunk. Cloning it (publishing)
/// copies one pointer a chunk (16 for 255 tables), and the first write to
/// a table after a publish copies that table's chunk (16 pointers) before
/// the table itself goes copy-on-write ([`Dual`]). One pointer a table was
/// 255 reference counts taken and dropped at every publish: with a
/// BARRIER after every flow-mod (ovs-ofctl) that was 5-7 µs of each
/// round trip.
#[derive(Clone, Debug)]
pub struct TableSet {
    pub(super) config: TablesConfig,
    pub(super) chunks: Vec<Arc<Chunk>>,
    pub(super) instance: u64,
}

impl TableSet {
    fn new(config: TablesConfig) -> TableSet {
        let n = usize::from(config.n_tables).div_ceil(CHUNK);
        TableSet {
            chunks: (0..n).map(|_| Arc::new(Default::default())).collect(),
            config,
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
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
    #[inline]
    pub fn table(&self, table_id: u8) -> Option<&FlowTable> {
        self.shared(table_id).map(|t| &**t)
    }

    /// One table as shared with the snapshots.
    #[inline]
    pub(super) fn shared(&self, table_id: u8) -> Option<&Arc<FlowTable>> {
        if table_id >= self.config.n_tables {
            return None;
        }
        let t = usize::from(table_id);
        self.chunks.get(t / CHUNK)?.get(t % CHUNK)
    }

    /// The control side's copy of a table, to write: its chunk is copied
    /// first if a snapshot shares it.
    fn shared_mut(&mut self, table_id: u8) -> Option<&mut Arc<FlowTable>> {
        if table_id >= self.config.n_tables {
            return None;
        }
        let t = usize::from(table_id);
        Arc::make_mut(self.chunks.get_mut(t / CHUNK)?).get_mut(t % CHUNK)
    }

    /// A number identifying this set of tables and its copies (fresh for
    /// every [`Tables::new`]): table generations are comparable only
    /// between tables of the same instance.
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// Entries in all tables.
    pub fn len(&self) -> usize {
        (0..self.n_tables())
            .filter_map(|t| self.table(t))
            .map(FlowTable::len)
            .sum()
    }

    /// True when no table has an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What the control side keeps about one table besides the published
/// [`FlowTable`]: where each entry is, the strict index, the free slots and
/// the counters. Never published.
#[derive(Clone, Debug, Default)]
pub(super) struct Book {
    /// The ids, in order (statistics replies in installation order), with
    /// each one's slot: a reply walks this, not the id-keyed `location`
    /// (at 1M entries each lookup there is a cache miss, half of what a
    /// flow-stats reply cost).
    pub(super) order: BTreeMap<FlowId, u32>,
    /// The strict index, by hash of `(priority, key)` (see
    /// [`Tables::find_key`]): 16 bytes an entry instead of a second copy
    /// of every match.
    pub(super) by_key: FastMap<u64, FlowId>,
    /// Entries whose hash `by_key` already gives to another entry (a
    /// 64-bit collision: in practice empty).
    pub(super) by_key_overflow: FastMap<(u16, MatchKey), FlowId>,
    /// Empty slots below `next_slot`, reused last freed first.
    pub(super) free: Vec<u32>,
    /// Slots ever used.
    pub(super) next_slot: u32,
    /// Each slot's entry and its counters (a worker's hand-over names the
    /// slot, see [`Tables::add_hits_at`]).
    pub(super) counters: Vec<SlotCount>,
    /// Lookups folded from the workers, and those that hit.
    pub(super) lookups: u64,
    pub(super) matched: u64,
}

/// A slot's entry (`FlowId(0)`, which no entry has, when empty) and its
/// counters, side by side: folding a worker's hit by slot reads one.
#[derive(Clone, Copy, Debug)]
pub(super) struct SlotCount {
    pub(super) id: FlowId,
    pub(super) c: EntryCounter,
}

impl Default for SlotCount {
    fn default() -> Self {
        SlotCount {
            id: FlowId(0),
            c: EntryCounter::default(),
        }
    }
}

/// Where an entry is: its table and its slot there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) table: u8,
    pub(super) slot: u32,
}

/// All flow tables of one switch, control side. See the module comment of
/// [`super`].
#[derive(Clone, Debug)]
pub struct Tables {
    pub(super) set: TableSet,
    /// Each table's copy-on-write state besides its current copy.
    pub(super) cow: Vec<Dual<FlowTable>>,
    pub(super) books: Vec<Book>,
    /// Entry id -> where it is: one map for table and slot, so that an
    /// install inserts into one id-keyed map, not two (at 1M entries each
    /// insert is a cache miss).
    pub(super) location: FastMap<FlowId, Place>,
    pub(super) next_id: u64,
    pub(super) group_refs: HashMap<u32, BTreeSet<FlowId>>,
    pub(super) meter_refs: HashMap<u32, BTreeSet<FlowId>>,
    /// The entries with an idle or a hard timeout, the only ones
    /// [`Tables::expire`] looks at: a million permanent entries cost the
    /// once-a-second expiry nothing.
    pub(super) timed: BTreeSet<FlowId>,
    /// [`Tables::memory_estimate`].
    pub(super) bytes: usize,
    /// Entries with SEND_FLOW_REM ([`Tables::any_send_flow_rem`]).
    pub(super) send_flow_rem: usize,
}

impl Default for Tables {
    fn default() -> Self {
        Tables::new(TablesConfig::default())
    }
}

pub(super) const fn fm_failed(code: FlowModFailedCode) -> OfpError {
    OfpError::FlowModFailed(code)
}

/// The strict index's hash of `(priority, key)`.
pub(super) fn key_hash(priority: u16, key: &MatchKey) -> u64 {
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
    pub(super) static KEY_HASH_MASK: std::cell::Cell<u64> = const { std::cell::Cell::new(0xf) };
}

impl Tables {
    /// Empty tables.
    pub fn new(mut config: TablesConfig) -> Tables {
        config.n_tables = config.n_tables.max(1);
        Tables {
            set: TableSet::new(config),
            cow: (0..config.n_tables).map(|_| Dual::default()).collect(),
            books: (0..config.n_tables).map(|_| Book::default()).collect(),
            location: FastMap::default(),
            next_id: 1,
            group_refs: HashMap::new(),
            meter_refs: HashMap::new(),
            timed: BTreeSet::new(),
            bytes: 0,
            send_flow_rem: 0,
        }
    }

    /// What the workers read: a copy sharing every table (O(n_tables)).
    pub fn published(&self) -> TableSet {
        self.set.clone()
    }

    /// The tables as published, borrowed.
    pub fn set(&self) -> &TableSet {
        &self.set
    }

    /// See [`TableSet::instance`].
    pub fn instance(&self) -> u64 {
        self.set.instance
    }

    /// The configuration.
    pub fn config(&self) -> &TablesConfig {
        &self.set.config
    }

    /// Number of tables.
    pub fn n_tables(&self) -> u8 {
        self.set.config.n_tables
    }

    /// One table.
    pub fn table(&self, table_id: u8) -> Option<&FlowTable> {
        self.set.table(table_id)
    }

    /// An entry by id.
    pub fn entry(&self, id: FlowId) -> Option<&FlowEntry> {
        let p = *self.location.get(&id)?;
        self.table(p.table)?.slot(p.slot)
    }

    /// An entry's counters by id.
    pub fn counter(&self, id: FlowId) -> Option<EntryCounter> {
        let p = *self.location.get(&id)?;
        let book = self.books.get(usize::from(p.table))?;
        book.counters.get(p.slot as usize).map(|s| s.c)
    }

    /// The entries of table `t` in installation order.
    pub fn entries_in(&self, t: u8) -> impl Iterator<Item = &FlowEntry> + '_ {
        self.in_order(t, Bound::Unbounded).map(|(_, e)| e)
    }

    /// Table `t`'s entries in installation order with their slots, from
    /// `from` on: each id's slot is beside it in the order index, so an
    /// entry is read by slot, with no lookup by id (at 1M entries each is
    /// a cache miss).
    pub(super) fn in_order(
        &self,
        t: u8,
        from: Bound<FlowId>,
    ) -> impl Iterator<Item = (u32, &FlowEntry)> + '_ {
        let table = self.table(t);
        self.books
            .get(usize::from(t))
            .into_iter()
            .flat_map(move |b| {
                b.order
                    .range((from, Bound::Unbounded))
                    .filter_map(move |(_, &slot)| Some((slot, table?.slot(slot)?)))
            })
    }

    /// Every entry, in table then installation order.
    pub fn entries(&self) -> impl Iterator<Item = &FlowEntry> + '_ {
        (0..self.n_tables()).flat_map(move |t| self.entries_in(t))
    }

    /// Whether some entry asked for a FLOW_REMOVED when it goes (a
    /// delete then needs the workers' latest counters, which the message
    /// reports).
    pub fn any_send_flow_rem(&self) -> bool {
        self.send_flow_rem > 0
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

    /// The estimated memory of every entry (see [`ENTRY_BYTES`]): what a
    /// memory budget ([`TablesConfig::max_bytes`]) is checked against.
    pub fn memory_estimate(&self) -> usize {
        self.bytes
    }

    /// Number of entries using `meter`.
    pub fn meter_flow_count(&self, meter: u32) -> usize {
        self.meter_refs.get(&meter).map_or(0, BTreeSet::len)
    }

    /// The id of the entry of table `t` with exactly this priority and
    /// match (the strict index).
    pub fn find_key(&self, t: u8, priority: u16, key: &MatchKey) -> Option<FlowId> {
        let book = self.books.get(usize::from(t))?;
        let same = |id: &FlowId| {
            self.entry(*id)
                .is_some_and(|e| e.priority == priority && e.key == *key)
        };
        if let Some(id) = book
            .by_key
            .get(&key_hash(priority, key))
            .filter(|id| same(id))
        {
            return Some(*id);
        }
        if book.by_key_overflow.is_empty() {
            return None;
        }
        book.by_key_overflow.get(&(priority, key.clone())).copied()
    }

    /// Puts `e` (with counters `c`) into its table: a slot (the last freed
    /// first, so a replaced entry gets its slot back), the published
    /// table, the strict index and the indexes of group and meter users.
    /// The caller has checked capacity and that its (priority, match) is
    /// free.
    pub(super) fn attach(&mut self, e: FlowEntry, c: EntryCounter) {
        let id = e.id;
        let t = e.table_id;
        let Some(book) = self.books.get_mut(usize::from(t)) else {
            return;
        };
        let slot = book.free.pop().unwrap_or_else(|| {
            book.next_slot += 1;
            book.next_slot - 1
        });
        let i = slot as usize;
        if book.counters.len() <= i {
            book.counters.resize(i + 1, SlotCount::default());
        }
        if let Some(x) = book.counters.get_mut(i) {
            *x = SlotCount { id, c };
        }
        match book.by_key.entry(key_hash(e.priority, &e.key)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(id);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                book.by_key_overflow.insert((e.priority, e.key.clone()), id);
            }
        }
        book.order.insert(id, slot);
        self.bytes += entry_bytes(&e.key, e.instructions.counts());
        for g in e.groups() {
            self.group_refs.entry(g).or_default().insert(id);
        }
        if let Some(m) = e.meter() {
            self.meter_refs.entry(m).or_default().insert(id);
        }
        if e.idle_timeout != 0 || e.hard_timeout != 0 {
            self.timed.insert(id);
        }
        if e.flags & flow_mod_flags::SEND_FLOW_REM != 0 {
            self.send_flow_rem += 1;
        }
        self.location.insert(id, Place { table: t, slot });
        if let Some(cur) = self.set.shared_mut(t) {
            if let Some(d) = self.cow.get_mut(usize::from(t)) {
                let fast = FastEntry::compile(&e);
                d.write(cur, TableOp::Put(slot, Arc::new(e), fast));
            }
        }
    }

    /// Takes an entry out of its table and every index; returns it with
    /// its counters.
    pub(super) fn detach(&mut self, id: FlowId) -> Option<(Arc<FlowEntry>, EntryCounter)> {
        let Place { table: t, slot } = self.location.remove(&id)?;
        let book = self.books.get_mut(usize::from(t))?;
        let cur = self.set.shared_mut(t)?;
        let e = self
            .cow
            .get_mut(usize::from(t))?
            .write(cur, TableOp::Take(slot))?;
        book.order.remove(&id);
        let h = key_hash(e.priority, &e.key);
        if book.by_key.get(&h) == Some(&id) {
            book.by_key.remove(&h);
        } else {
            book.by_key_overflow.remove(&(e.priority, e.key.clone()));
        }
        let c = book
            .counters
            .get_mut(slot as usize)
            .map(|s| std::mem::take(s).c)
            .unwrap_or_default();
        book.free.push(slot);
        self.bytes = self
            .bytes
            .saturating_sub(entry_bytes(&e.key, e.instructions.counts()));
        for g in e.groups() {
            unref(&mut self.group_refs, g, id);
        }
        if let Some(m) = e.meter() {
            unref(&mut self.meter_refs, m, id);
        }
        self.timed.remove(&id);
        if e.flags & flow_mod_flags::SEND_FLOW_REM != 0 {
            self.send_flow_rem = self.send_flow_rem.saturating_sub(1);
        }
        Some((e, c))
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
