//! One flow table: its entries in slots, the strict index by (priority,
//! match), the classifier index over its rules, and the compiled form of
//! each entry (see the module comment of [`super`]).

use super::compiled::FastEntry;
use super::cow::Replay;
use crate::model::flow_entry::{FlowEntry, FlowId};
use crate::model::match_key::MatchKey;
use crate::Time;
use classifier::FastMap;
use packet::flow_key::FlowKey;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Tables with at most this many entries are copied (copy-on-write) by
/// rebuilding their classifier index from the rules instead of cloning
/// it: a routing table's DIR-24-8 engine is 64 MiB whatever its size, and
/// a fresh zeroed one costs nothing until written.
pub(super) const REBUILD_INDEX_BELOW: usize = 16384;

/// One flow table.
#[derive(Debug, Default)]
pub struct FlowTable {
    /// Where each entry lives in `slots`.
    pub(super) entries: FastMap<FlowId, u32>,
    /// The entries, by slot (see "Entry slots" in the module comment).
    pub(super) slots: Vec<Option<FlowEntry>>,
    /// Empty slots, reused last-freed first.
    pub(super) free: Vec<u32>,
    /// The compiled form of each slot's entry (default when empty).
    pub(super) fast: Vec<FastEntry>,
    /// One bit per slot, set when the slot holds an entry that did not
    /// compile: the burst prefetch asks this (a few KiB, cached) instead
    /// of the compiled line it has only just asked the CPU to load.
    pub(super) general: Vec<u64>,
    /// The ids of `entries`, in order.
    pub(super) order: BTreeSet<FlowId>,
    /// The strict index, by hash of `(priority, key)` (see `find_key`):
    /// 16 bytes a slot instead of a second copy of every match.
    pub(super) by_key: FastMap<u64, FlowId>,
    /// Entries whose hash `by_key` already gives to another entry (a
    /// 64-bit collision: in practice empty).
    pub(super) by_key_overflow: FastMap<(u16, MatchKey), FlowId>,
    pub(super) lookup_count: u64,
    pub(super) matched_count: u64,
    /// The fast classifier's copy of the entries' (id, priority, match).
    pub(super) index: classifier::Table,
    /// Set when the index refused a rule (cannot happen for a valid
    /// `MatchKey`; kept as a guard): lookups then scan linearly.
    pub(super) index_broken: bool,
    /// Changes so far (flow caches compare it); kept here, not taken from
    /// the index, because a copy may rebuild the index.
    pub(super) generation: u64,
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

/// A change of one [`FlowTable`].
#[derive(Clone, Debug)]
pub(super) enum TableOp {
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

/// Bits of a classifier rule id that hold the entry's slot (the rest hold
/// its [`FlowId`], so the classifier's "smallest id wins" stays "oldest
/// entry wins").
pub const SLOT_BITS: u32 = 24;
pub(super) const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// The classifier rule id of entry `id` in slot `slot`; `None` when one
/// does not fit (a slot past 2^24 or an id past 2^40: the table then falls
/// back to the linear scan).
pub(super) fn rule_id(id: FlowId, slot: u32) -> Option<u64> {
    (u64::from(slot) <= SLOT_MASK && id.0 < 1 << (64 - SLOT_BITS))
        .then(|| (id.0 << SLOT_BITS) | u64::from(slot))
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

/// The classifier rule of an entry in slot `slot`: id, priority and match
/// fields.
pub(super) fn rule_of(e: &FlowEntry, id: u64) -> classifier::Rule {
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
    pub(super) fn put(&mut self, e: FlowEntry) {
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
    pub(super) fn take(&mut self, id: FlowId) -> Option<FlowEntry> {
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
    pub(super) fn index_key(&mut self, e: &FlowEntry) {
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
    pub(super) fn unindex_key(&mut self, e: &FlowEntry) {
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

    pub(super) fn entry_mut(&mut self, id: FlowId) -> Option<&mut FlowEntry> {
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
    /// [`crate::tables::compiled`]).
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

    pub(super) fn set_general(&mut self, slot: u32, on: bool) {
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
    pub(super) fn entry_of_hit(&self, rid: u64) -> Option<&FlowEntry> {
        let e = self.slot((rid & SLOT_MASK) as u32)?;
        (e.id.0 == rid >> SLOT_BITS).then_some(e)
    }

    /// The entry `packet` hits: highest priority, then oldest (smallest
    /// id), through the fast classifier. Equals
    /// [`crate::tables::linear::LinearScan::lookup_table`].
    pub fn lookup(&self, packet: &FlowKey) -> Option<&FlowEntry> {
        if self.index_broken {
            return self.lookup_linear(packet);
        }
        let hit = self.index.lookup(packet)?;
        self.entry_of_hit(hit.id)
    }

    /// The entry `packet` hits, by scanning every entry (the reference
    /// [`FlowTable::lookup`] equals).
    pub fn lookup_linear(&self, packet: &FlowKey) -> Option<&FlowEntry> {
        super::linear::best(self.entries(), packet)
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
