//! One flow table as the workers read it: the entries in slots (shared
//! with every other copy of the table), the compiled form of each, and
//! the classifier index over their rules. The control side's indexes of
//! the same table (by id, by priority and match, the free slots, the
//! counters) are in [`super::set`].

use super::compiled::FastEntry;
use super::cow::Replay;
use crate::model::flow_entry::{FlowEntry, FlowId};
use crate::model::match_key::KeyField;
use packet::flow_key::FlowKey;
use packet::huge::HugeVec;
use std::sync::Arc;

/// Tables with at most this many entries are copied (copy-on-write) by
/// rebuilding their classifier index from the rules instead of cloning
/// it: a routing table's DIR-24-8 engine is 64 MiB whatever its size, and
/// a fresh zeroed one costs nothing until written.
pub(super) const REBUILD_INDEX_BELOW: usize = 16384;

/// A table whose whole index is one hash subtable keyed on link-layer
/// fields and the ingress port, beside at most table-miss entries
/// ([`FlowTable::l2_index`]): a frame's key
/// is packed from its header ([`packet::flow_key::L2Fields`]), and the
/// lookup is one probe, split in two so a burst's probes overlap
/// ([`L2Index::home`] for every frame, then [`L2Index::slot`]). The
/// answer is the entry slot the general lookup gives.
#[derive(Clone, Copy, Debug)]
pub struct L2Index<'a> {
    sub: &'a classifier::Subtable,
    layout: &'a classifier::L2Layout,
    /// The best table-miss entry (empty match), if the table has one.
    catch_all: Option<classifier::Hit>,
}

impl L2Index<'_> {
    /// Words of the table's packed keys (at most
    /// [`classifier::L2_WORDS`]).
    #[inline]
    pub fn words(&self) -> usize {
        self.layout.words()
    }

    /// The packed key of frame `data` received on `in_port` (`W`:
    /// [`L2Index::words`]), given `port` = [`L2Index::port_bits`] of
    /// `in_port` (placed once for a burst); `None` when the frame is not
    /// one the short parse reads or lacks a field of the table's mask
    /// (the general path then looks it up).
    #[inline]
    pub fn key<const W: usize>(
        &self,
        port: [u64; W],
        in_port: u32,
        data: &[u8],
    ) -> Option<[u64; W]> {
        self.layout.pack_frame_on(port, in_port, data)
    }

    /// What `in_port` puts in the keys of the frames it receives (see
    /// [`classifier::L2Layout::port_bits`]).
    #[inline]
    pub fn port_bits<const W: usize>(&self, in_port: u32) -> [u64; W] {
        self.layout.port_bits(in_port)
    }

    /// The home slot of `key` in the subtable, its line prefetched.
    #[inline]
    pub fn home<const W: usize>(&self, key: &[u64; W]) -> usize {
        self.sub.home_of(key)
    }

    /// The entry slot `key` hits, probing from `home`: the subtable's
    /// answer or the table-miss entry, whichever is better.
    #[inline]
    pub fn slot<const W: usize>(&self, home: usize, key: &[u64; W]) -> Option<u32> {
        classifier::Hit::best(self.sub.probe_from(home, key), self.catch_all)
            .map(|h| slot_of_rule(h.id))
    }
}

/// A table whose whole index is the IPv4 route engine, beside at most
/// table-miss entries, where a frame's IPv4 destination alone decides
/// its route ([`FlowTable::route_index`]): a frame's address is read
/// from its header ([`packet::flow_key::plain_ipv4_dst`]) and looked up
/// with the engine's burst passes. The answer is the entry slot the
/// general lookup gives.
#[derive(Clone, Copy, Debug)]
pub struct RouteIndex<'a> {
    lpm: &'a classifier::lpm::Lpm,
    /// The best table-miss entry (empty match), if the table has one.
    catch_all: Option<classifier::Hit>,
}

impl RouteIndex<'_> {
    /// The route engine's hit for each address, `hits[i]` for
    /// `addrs[i]` (`hits` at least as long), with its burst passes;
    /// `None` for a `None` address.
    #[inline]
    pub fn hits(&self, addrs: &[Option<u32>], hits: &mut [Option<classifier::Hit>]) {
        self.lpm.lookup_burst_addrs(addrs, hits);
    }

    /// The entry slot of a frame with an address, given the route
    /// engine's hit for it ([`RouteIndex::hits`]): the route's or the
    /// table-miss entry's, whichever is better.
    #[inline]
    pub fn slot(&self, hit: Option<classifier::Hit>) -> Option<u32> {
        classifier::Hit::best(hit, self.catch_all).map(|h| slot_of_rule(h.id))
    }
}

/// One flow table, as published (see the module comment).
#[derive(Debug, Default)]
pub struct FlowTable {
    /// The entries, by slot; the control side chooses the slots.
    slots: Vec<Option<Arc<FlowEntry>>>,
    /// The compiled form of each slot's entry (default when empty).
    fast: HugeVec<FastEntry>,
    /// One bit per slot, set when the slot holds an entry that did not
    /// compile: the burst prefetch asks this (a few KiB, cached) instead
    /// of the compiled line it has only just asked the CPU to load.
    general: Vec<u64>,
    /// The classifier's lookup structures over the entries' (rule id,
    /// priority, match); rule id = `FlowId << SLOT_BITS | slot`.
    index: classifier::Table,
    /// Set when the index refused a rule (cannot happen for a valid
    /// `MatchKey`; kept as a guard): lookups then scan linearly.
    index_broken: bool,
    /// Changes so far (flow caches compare it); kept here, not taken from
    /// the index, because a copy may rebuild the index.
    generation: u64,
    /// Entries held.
    len: usize,
    /// Entries whose compiled form ends the pipeline with an output to a
    /// standard port ([`FastEntry::leaves_by_port`]): with none, table
    /// 0's express path would only find the first frame of every burst
    /// going on, after packing and probing the whole burst (a Faucet
    /// VLAN table: every entry a goto), so it is not offered.
    leaving: usize,
}

impl Clone for FlowTable {
    fn clone(&self) -> Self {
        let index = if self.len <= REBUILD_INDEX_BELOW && !self.index_broken {
            let mut t = classifier::Table::new();
            match t.insert_many(self.index.rules()) {
                Ok(_) => t,
                Err(_) => self.index.clone(),
            }
        } else {
            self.index.clone()
        };
        FlowTable {
            slots: self.slots.clone(),
            fast: self.fast.clone(),
            general: self.general.clone(),
            index,
            index_broken: self.index_broken,
            generation: self.generation,
            len: self.len,
            leaving: self.leaving,
        }
    }
}

/// A change of one [`FlowTable`]: the control side's slot choice travels
/// with it, so every copy that replays it agrees on the slots.
#[derive(Clone, Debug)]
pub(super) enum TableOp {
    /// Puts an entry in an empty slot (a reference count: every copy
    /// shares the entry), with its compiled form, compiled once for every
    /// copy that replays the op (compiling was half of what the copy-on-
    /// write tables spent a second time per flow-mod).
    Put(u32, Arc<FlowEntry>, FastEntry),
    /// Empties a slot.
    Take(u32),
}

impl Replay for FlowTable {
    type Op = TableOp;
    /// `Take`: the entry removed.
    type Out = Option<Arc<FlowEntry>>;

    fn size(&self) -> usize {
        self.len
    }

    fn apply(&mut self, op: &TableOp) -> Option<Arc<FlowEntry>> {
        match op {
            TableOp::Put(slot, e, f) => {
                self.put(*slot, e.clone(), f);
                None
            }
            TableOp::Take(slot) => self.take(*slot),
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

/// The slot of classifier rule id `rid` (see [`rule_id`]).
#[inline]
fn slot_of_rule(rid: u64) -> u32 {
    (rid & SLOT_MASK) as u32
}

/// The classifier rule of an entry in slot `slot`: id, priority and match
/// fields.
pub(super) fn rule_of(e: &FlowEntry, id: u64) -> classifier::Rule {
    let fields = e.key.fields().iter().map(field_match).collect();
    let priority = e.priority;
    classifier::Rule {
        id,
        priority,
        fields,
    }
}

/// A match key's field as the classifier takes it.
fn field_match(f: &KeyField) -> classifier::FieldMatch {
    let (field, value, mask) = (f.field as u8, f.value, f.mask);
    classifier::FieldMatch { field, value, mask }
}

impl FlowTable {
    /// Puts an entry into `slot` (empty), its compiled form and its rule.
    fn put(&mut self, slot: u32, e: Arc<FlowEntry>, fast: &FastEntry) {
        self.generation += 1;
        if self.slot(slot).is_some() {
            // Never done (the control side frees a slot first); kept
            // exact anyway.
            self.take(slot);
        }
        let i = slot as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
            self.fast.grow(i + 1, FastEntry::default());
        }
        if let Some(f) = self.fast.get_mut(i) {
            *f = *fast;
            let compiled = f.ops().is_some();
            self.leaving += usize::from(f.leaves_by_port());
            self.set_general(slot, !compiled);
        }
        let ok = rule_id(e.id, slot).is_some_and(|rid| self.index.insert(rule_of(&e, rid)).is_ok());
        if !ok {
            self.index_broken = true;
        }
        if let Some(s) = self.slots.get_mut(i) {
            *s = Some(e);
        }
        self.len += 1;
    }

    /// Empties `slot`: the entry, its compiled form and its rule.
    fn take(&mut self, slot: u32) -> Option<Arc<FlowEntry>> {
        let e = self.slots.get_mut(slot as usize)?.take()?;
        if let Some(f) = self.fast.get_mut(slot as usize) {
            self.leaving = self.leaving.saturating_sub(usize::from(f.leaves_by_port()));
            *f = FastEntry::default();
        }
        self.set_general(slot, false);
        self.generation += 1;
        self.len -= 1;
        // The classifier keeps no copy of the rule: it is handed back. Not
        // finding it would break the mirror; lookups then scan instead.
        let removed = rule_id(e.id, slot).is_some_and(|rid| self.index.remove(&rule_of(&e, rid)));
        if !removed {
            self.index_broken = true;
        }
        Some(e)
    }

    /// The slot of entry `id`, by a scan (the control side keeps an index;
    /// used only when the classifier index is broken).
    fn slot_of(&self, id: FlowId) -> Option<u32> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|e| e.id == id))
            .and_then(|i| u32::try_from(i).ok())
    }

    /// The entry in slot `slot` (as [`FlowTable::lookup_burst_slots`]
    /// answers), if any. Slots are reused after removals, so a slot names
    /// an entry only for one [`FlowTable::generation`].
    #[inline]
    pub fn slot(&self, slot: u32) -> Option<&FlowEntry> {
        self.slots.get(slot as usize)?.as_deref()
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
        let e = self.slot(slot_of_rule(rid))?;
        (e.id.0 == rid >> SLOT_BITS).then_some(e)
    }

    /// The entry `packet` hits: highest priority, then oldest (smallest
    /// id), through the fast classifier. Equals
    /// [`FlowTable::lookup_linear`].
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
            return self.slot_of(e.id);
        }
        let hit = self.index.lookup(packet)?;
        Some(slot_of_rule(hit.id))
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
                *o = self.lookup(k.borrow()).and_then(|e| self.slot_of(e.id));
            }
            return;
        }
        let mut hits = [None; 32];
        for (keys, outs) in packets.chunks(32).zip(out.chunks_mut(32)) {
            let hits = &mut hits[..keys.len()];
            self.index.lookup_burst(keys, hits);
            for (o, h) in outs.iter_mut().zip(hits.iter()) {
                *o = h.map(|h| slot_of_rule(h.id));
            }
        }
    }

    /// Whether table 0's express path may take this table at all: its
    /// index mirrors the entries and some entry leaves by a port (see
    /// `leaving`).
    #[inline]
    fn offers_express(&self) -> bool {
        !self.index_broken && self.leaving > 0
    }

    /// The table's index as one subtable keyed on link-layer fields and
    /// the ingress port, beside at most table-miss entries ([`L2Index`]),
    /// when it is that and some entry leaves by a port (see `leaving`):
    /// table 0's express path packs its keys straight from the frames.
    #[inline]
    pub fn l2_index(&self) -> Option<L2Index<'_>> {
        if !self.offers_express() {
            return None;
        }
        let (sub, catch_all) = self.index.exact_and_catch_all()?;
        Some(L2Index {
            layout: sub.l2_layout()?,
            sub,
            catch_all,
        })
    }

    /// The table's index as the IPv4 route engine beside at most
    /// table-miss entries ([`RouteIndex`]), when it is that and some entry
    /// leaves by a port: table 0's express path reads the destinations
    /// straight from the frames.
    #[inline]
    pub fn route_index(&self) -> Option<RouteIndex<'_>> {
        if !self.offers_express() {
            return None;
        }
        let (lpm, catch_all) = self.index.route_and_catch_all()?;
        Some(RouteIndex { lpm, catch_all })
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

    /// True when the index refused a rule and lookups scan.
    pub fn index_broken(&self) -> bool {
        self.index_broken
    }

    /// The entries, in slot order.
    pub fn entries(&self) -> impl Iterator<Item = &FlowEntry> {
        self.slots.iter().filter_map(|s| s.as_deref())
    }

    /// The entries with their slots, in slot order.
    pub fn slots(&self) -> impl Iterator<Item = (u32, &Arc<FlowEntry>)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((u32::try_from(i).ok()?, s.as_ref()?)))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the table has no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
