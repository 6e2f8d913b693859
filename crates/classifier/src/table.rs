//! [`Table`]: the rule set of one flow table and its lookup structures.
//!
//! # Structure
//!
//! The table keeps no copy of its rules: its caller (the pipeline's flow
//! table) holds them, and hands a rule back to remove it. Each rule lives
//! in exactly one lookup structure, which holds what its lookups need and
//! no more (an exact subtable: the packed key words and the hit; the LPM
//! engine: prefix, extra fields and hits; the merged tables: the fields,
//! checked in full). [`Table::rules`] rebuilds the rules from them. A
//! copy of each rule (id, priority and a `Vec` of 48-byte fields, in an
//! id-keyed map) would cost hundreds of bytes a rule, a large share of a
//! million-rule switch's memory (docs/results.md, "Rates and memory").
//! Rule ids must be distinct within a table: the caller's invariant (the
//! pipeline's rule id carries its entry's unique `FlowId`); the table
//! cannot check it without the id map it no longer has.
//!
//! The structures:
//!
//! - the IPv4 longest-prefix engine ([`crate::lpm::Lpm`]) when the rule is
//!   "route shaped" (an `IPV4_DST` prefix of length 1..=32 plus exactly the
//!   same other fields as the routes already there, typically
//!   `ETH_TYPE=0x0800`) and its priority agrees with prefix order (every
//!   shorter prefix length has strictly lower priorities, every longer one
//!   strictly higher), so that "longest prefix" and "highest priority"
//!   pick the same rule;
//! - otherwise tuple-space search: one [`Subtable`] per distinct mask,
//!   visited in descending order of the subtable's highest priority, and
//!   abandoned as soon as the best hit so far has a priority strictly
//!   above the next subtable's maximum (equal maxima are still visited, as
//!   they can hold a smaller id at the same priority). It holds the
//!   empty mask plus at most [`EXACT_SUBTABLES`] other masks;
//! - a rule of any further mask goes to the merged tables
//!   ([`crate::merged`], TupleMerge): a few hash tables on coarser masks
//!   whose buckets hold short priority-sorted candidate lists checked in
//!   full. An ACL (ClassBench-acl1-like) has hundreds of masks, and plain
//!   tuple-space search one probe per mask (docs/results.md, "The
//!   classifier alone").
//!
//! A lookup takes the LPM engine's hit (if it has routes) as the initial
//! best and then runs tuple-space search, so mixed tables (routes plus a
//! table-miss rule, or routes whose priorities contradict prefix order)
//! stay exact: each structure returns the best of its own rules, and the
//! best of them is the best of all. The merged tables come last, with the
//! best so far pruning them the same way.
//!
//! # Shape selection
//!
//! Placement is decided per rule at insert, which makes the choice follow
//! the table's shape as it changes without rebuilds: a table of one mask
//! is a tuple space with one subtable and takes the burst path of
//! [`Subtable::lookup_burst`] (shape (a)); a routing table lives in the
//! LPM engine (shape (b)); anything else is tuple-space search plus merged
//! tables (shape (c)). A rule that does not fit the LPM engine's current
//! extra fields or priority order goes to the other structures, never
//! evicting routes. When the LPM engine empties it forgets its extra
//! fields, so the next route may choose again.
//!
//! Per-rule placement can go stale: an ARP rule installed first takes the
//! one exact subtable, and the million gateway rules that follow land in
//! the merged tables. Every [`RESHAPE_CHECK_EVERY`] changes (and after
//! [`Table::insert_many`]) an O(masks) check compares the largest mask
//! living in the merged tables with the smallest exact subtable and, when
//! it is at least [`RESHAPE_MIN_RULES`] rules and twice as large, rebuilds
//! everything ([`Table::reshape`], O(rules), amortized O(1) per change):
//! routes first, then the most common masks into exact subtables, the
//! rest merged. [`Table::shape`] reports the result.
//!
//! # Ties
//!
//! Among matching rules of equal priority the smallest id wins,
//! everywhere (subtable groups, LPM routes, the merge of the two). This is
//! the linear scan's rule when ids are given in installation order.
//!
//! # Generations
//!
//! Every successful insert, remove or modify bumps [`Table::generation`];
//! flow caches record it and ignore their entries once it moved.

use crate::fast_hash::FastMap;
use crate::key::BURST_WORDS;
use crate::lpm::Lpm;
use crate::merged::Merged;
use crate::rule::{Hit, Rule, RuleError};
use crate::subtable::Subtable;
use packet::flow_key::FlowKey;
use std::borrow::Borrow;

/// Which lookup structures a table currently uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// No rules.
    Empty,
    /// One mask shared by all rules: one hash table, burst lookups.
    SingleMask,
    /// Only IPv4 routes: longest-prefix match.
    Lpm,
    /// Tuple-space search over this many subtables.
    Tss(usize),
    /// Routes in the LPM engine plus this many tuple-space subtables.
    LpmPlusTss(usize),
    /// Some rules in merged tables (wildcard tables with many masks).
    Merged {
        /// Routes in the LPM engine.
        lpm: bool,
        /// Exact-mask tuple-space subtables.
        subtables: usize,
        /// Merged tables.
        merged: usize,
    },
}

/// Exact-mask subtables (not counting the empty mask's) a table keeps
/// before sending rules of new masks to the merged tables
/// ([`crate::merged`]): every exact subtable is one more probe per
/// lookup, so only the commonest mask gets one (the acl scenario with 1
/// and with 4 is in docs/results.md, "The classifier alone").
pub const EXACT_SUBTABLES: usize = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Lpm,
    Tss,
    Merged,
}

/// The rules of one flow table with their lookup structures.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Rules held (in all structures).
    count: usize,
    subtables: Vec<Option<Subtable>>,
    free: Vec<usize>,
    by_mask: FastMap<Vec<(u8, u128)>, usize>,
    /// Live subtables, highest `max_priority` first.
    order: Vec<usize>,
    lpm: Lpm,
    merged: Merged,
    generation: u64,
    /// Rules per mask, for rules outside the LPM engine.
    mask_counts: FastMap<Vec<(u8, u128)>, usize>,
    /// Masks the last reshape reserved for exact subtables.
    preferred: Vec<Vec<(u8, u128)>>,
    /// Changes since the last reshape check.
    changes: usize,
}

/// Changes between two checks of whether the placement went stale.
pub const RESHAPE_CHECK_EVERY: usize = 1024;
/// Rules a merged-away mask needs before a reshape moves it to an exact
/// subtable.
pub const RESHAPE_MIN_RULES: usize = 64;

/// A packed key's words: on the stack up to 32 words (every mask of a
/// handful of fields), on the heap beyond; saves an allocation per insert
/// and remove.
// Lives on the stack for one call, never stored: the size is the point.
#[allow(clippy::large_enum_variant)]
enum KeyBuf {
    Inline([u64; 32], usize),
    Heap(Vec<u64>),
}

impl KeyBuf {
    fn new(words: usize) -> KeyBuf {
        if words <= 32 {
            KeyBuf::Inline([0; 32], words)
        } else {
            KeyBuf::Heap(vec![0; words])
        }
    }

    /// `rule`'s values packed for subtable `st` (the rule has its mask).
    fn packed(st: &Subtable, rule: &Rule) -> KeyBuf {
        let mut buf = KeyBuf::new(st.layout().words());
        st.layout().pack_rule(&rule.fields, buf.as_mut());
        buf
    }

    fn as_mut(&mut self) -> &mut [u64] {
        match self {
            KeyBuf::Inline(a, n) => a.get_mut(..*n).unwrap_or_default(),
            KeyBuf::Heap(v) => v,
        }
    }
}

fn mask_of(rule: &Rule) -> Vec<(u8, u128)> {
    rule.fields.iter().map(|f| (f.field, f.mask)).collect()
}

impl Table {
    /// An empty table.
    pub fn new() -> Table {
        Table::default()
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bumped by every successful change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// True when `rule` is held: same id, priority and fields (compared
    /// in canonical form).
    pub fn contains(&self, rule: &Rule) -> bool {
        let mut rule = rule.clone();
        if rule.canonicalize().is_err() {
            return false;
        }
        self.lpm.contains(&rule) || self.tss_contains(&rule) || self.merged.contains(&rule)
    }

    fn tss_contains(&self, rule: &Rule) -> bool {
        let Some(st) = self
            .by_mask
            .get(&mask_of(rule))
            .and_then(|&i| self.subtables.get(i))
            .and_then(Option::as_ref)
        else {
            return false;
        };
        let mut key = KeyBuf::packed(st, rule);
        st.contains(key.as_mut(), rule.hit())
    }

    /// Every rule (canonical form), in no particular order, rebuilt from
    /// the lookup structures. O(rules), allocates each rule's fields.
    pub fn rules(&self) -> Vec<Rule> {
        let mut out = Vec::with_capacity(self.count);
        self.lpm.rules_into(&mut out);
        self.tss_rules_into(&mut out);
        self.merged.rules_into(&mut out);
        out
    }

    fn tss_rules_into(&self, out: &mut Vec<Rule>) {
        for st in self.subtables.iter().flatten() {
            st.rules_into(out);
        }
    }

    /// Whether a lookup is about one probe: no rules, only routes, or one
    /// exact mask, each possibly beside the empty mask's rules (a table-
    /// miss entry, whose lookup is pruned or trivial). Flow caches are not
    /// worth consulting in front of such a table.
    pub fn one_probe(&self) -> bool {
        if !self.merged.is_empty() {
            return false;
        }
        let catch_all = usize::from(self.by_mask.contains_key(&[][..]));
        let exact = self.order.len().saturating_sub(catch_all);
        exact == 0 || (exact == 1 && self.lpm.is_empty())
    }

    /// The table's lookup as one hash subtable beside, at most, the
    /// empty mask's rules (table-miss entries): that subtable and the
    /// best rule of the empty mask, which matches every packet. A lookup
    /// is then the better ([`Hit::best`]) of the subtable's answer and
    /// that rule. `None` with a route engine, a merged table or another
    /// mask.
    pub fn exact_and_catch_all(&self) -> Option<(&Subtable, Option<Hit>)> {
        if !self.merged.is_empty() || !self.lpm.is_empty() {
            return None;
        }
        let sub = |i: usize| self.subtables.get(i).and_then(Option::as_ref);
        match *self.order.as_slice() {
            [i] => Some((sub(i)?, None)),
            [a, b] => {
                let (empty, all) = self.catch_all()?;
                let other = match (a == empty, b == empty) {
                    (true, false) => b,
                    (false, true) => a,
                    _ => return None,
                };
                Some((sub(other)?, Some(all)))
            }
            _ => None,
        }
    }

    /// The empty mask's subtable (its place in `subtables`) and its best
    /// rule, which matches every packet: the table-miss entries.
    fn catch_all(&self) -> Option<(usize, Hit)> {
        let i = self.by_mask.get(&[][..]).copied()?;
        let all = self.subtables.get(i)?.as_ref()?.lookup_packed(&[0])?;
        Some((i, all))
    }

    /// The table as the route engine beside at most table-miss rules:
    /// the engine and the best rule of the empty mask (if any), when
    /// that is all it holds and a frame's IPv4 destination alone decides
    /// its route ([`Lpm::needs_only_ipv4_dst`]). The answer for a frame
    /// whose key has IPv4 addresses is then the better ([`Hit::best`]) of
    /// the engine's and that rule, as [`Table::lookup`] gives it.
    pub fn route_and_catch_all(&self) -> Option<(&Lpm, Option<Hit>)> {
        if !self.merged.is_empty() || self.lpm.is_empty() || !self.lpm.needs_only_ipv4_dst() {
            return None;
        }
        match *self.order.as_slice() {
            [] => Some((&self.lpm, None)),
            [i] => {
                let (empty, all) = self.catch_all()?;
                (i == empty).then_some((&self.lpm, Some(all)))
            }
            _ => None,
        }
    }

    /// The structures in use.
    pub fn shape(&self) -> Shape {
        let n = self.order.len();
        if !self.merged.is_empty() {
            return Shape::Merged {
                lpm: !self.lpm.is_empty(),
                subtables: n,
                merged: self.merged.tables(),
            };
        }
        match (self.lpm.is_empty(), n) {
            (true, 0) => Shape::Empty,
            (true, 1) => Shape::SingleMask,
            (true, n) => Shape::Tss(n),
            (false, 0) => Shape::Lpm,
            (false, n) => Shape::LpmPlusTss(n),
        }
    }

    /// Adds a rule. Refuses a duplicate id or a malformed rule (see
    /// [`Rule::canonicalize`]); the table is unchanged then.
    pub fn insert(&mut self, rule: Rule) -> Result<(), RuleError> {
        self.insert_inner(rule, true)?;
        self.note_change();
        Ok(())
    }

    /// Adds many rules; stops at the first refused one (those before it
    /// stay). Returns how many were added. Faster than one `insert` per
    /// rule: the subtable order is rebuilt once at the end.
    pub fn insert_many(
        &mut self,
        rules: impl IntoIterator<Item = Rule>,
    ) -> Result<usize, RuleError> {
        let it = rules.into_iter();
        let mut n = 0;
        let mut res = Ok(());
        for r in it {
            if let Err(e) = self.insert_inner(r, false) {
                res = Err(e);
                break;
            }
            n += 1;
        }
        self.resort();
        self.merged.finish_batch();
        self.maybe_reshape();
        res.map(|()| n)
    }

    fn note_change(&mut self) {
        self.changes += 1;
        if self.changes >= RESHAPE_CHECK_EVERY {
            self.changes = 0;
            self.maybe_reshape();
        }
    }

    /// Reshapes when a mask living in the merged tables has grown well
    /// past the smallest exact subtable (or an exact slot is free): e.g.
    /// an ARP rule installed first took the exact subtable, then a
    /// million gateway rules arrived. O(masks) per check.
    fn maybe_reshape(&mut self) {
        let mut lens: Vec<usize> = self
            .by_mask
            .iter()
            .filter(|(m, _)| !m.is_empty())
            .filter_map(|(_, &i)| self.subtables.get(i).and_then(Option::as_ref))
            .map(Subtable::len)
            .collect();
        lens.sort_unstable();
        let min_exact = if lens.len() < EXACT_SUBTABLES {
            0
        } else {
            lens.first().copied().unwrap_or(0)
        };
        let best_merged = self
            .mask_counts
            .iter()
            .filter(|(m, _)| !m.is_empty() && !self.by_mask.contains_key(*m))
            .map(|(_, &c)| c)
            .max()
            .unwrap_or(0);
        if best_merged >= RESHAPE_MIN_RULES && best_merged > 2 * min_exact {
            self.reshape();
        }
    }

    /// Rebuilds every structure from the rule store: routes to the LPM
    /// engine, the [`EXACT_SUBTABLES`] most common other masks to exact
    /// subtables, the rest to merged tables. Lookup results do not
    /// change, so the generation stays. O(rules); run automatically by
    /// the checks above and after [`Table::insert_many`], callable after
    /// any batch of changes.
    pub fn reshape(&mut self) {
        let mut top: Vec<(&Vec<(u8, u128)>, usize)> = self
            .mask_counts
            .iter()
            .filter(|(m, _)| !m.is_empty())
            .map(|(m, &c)| (m, c))
            .collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let preferred: Vec<Vec<(u8, u128)>> = top
            .into_iter()
            .take(EXACT_SUBTABLES)
            .map(|(m, _)| m.clone())
            .collect();
        let generation = self.generation;
        let mut first = Vec::new();
        self.lpm.rules_into(&mut first);
        let mut others = Vec::new();
        self.tss_rules_into(&mut others);
        self.merged.rules_into(&mut others);
        let (second, rest): (Vec<Rule>, Vec<Rule>) = others
            .into_iter()
            .partition(|r| preferred.contains(&mask_of(r)));
        *self = Table {
            preferred,
            ..Table::new()
        };
        for r in first.into_iter().chain(second).chain(rest) {
            // Canonical rules with distinct ids: cannot be refused.
            let _ = self.insert_inner(r, false);
        }
        self.resort();
        self.merged.finish_batch();
        self.generation = generation;
    }

    fn insert_inner(&mut self, mut rule: Rule, resort: bool) -> Result<(), RuleError> {
        rule.canonicalize()?;
        let mask = mask_of(&rule);
        let place = if self.lpm.try_insert(&rule) {
            Place::Lpm
        } else if rule.fields.is_empty()
            || self.by_mask.contains_key(&mask)
            || self.preferred.contains(&mask)
            || self.order.len() - usize::from(self.by_mask.contains_key(&[][..])) < EXACT_SUBTABLES
        {
            self.tss_insert(&rule, &mask, resort);
            Place::Tss
        } else {
            self.merged.insert(&rule, resort);
            Place::Merged
        };
        if place != Place::Lpm {
            match self.mask_counts.get_mut(&mask) {
                Some(c) => *c += 1,
                None => {
                    self.mask_counts.insert(mask, 1);
                }
            }
        }
        self.count += 1;
        self.generation += 1;
        Ok(())
    }

    fn tss_insert(&mut self, rule: &Rule, mask: &[(u8, u128)], resort: bool) {
        let idx = match self.by_mask.get(mask) {
            Some(&i) => i,
            None => {
                let st = Subtable::new(mask.to_vec());
                let i = crate::put_in_slot(&mut self.subtables, &mut self.free, st);
                self.by_mask.insert(mask.to_vec(), i);
                self.order.push(i);
                i
            }
        };
        let Some(st) = self.subtables.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        let before = st.max_priority();
        let mut key = KeyBuf::packed(st, rule);
        st.insert(key.as_mut(), rule.hit());
        if resort && (st.max_priority() != before || st.len() == 1) {
            self.resort();
        }
    }

    fn resort(&mut self) {
        let subs = &self.subtables;
        let maxp = |i: &usize| {
            subs.get(*i)
                .and_then(Option::as_ref)
                .map_or(0, Subtable::max_priority)
        };
        self.order
            .sort_by(|a, b| maxp(b).cmp(&maxp(a)).then(a.cmp(b)));
    }

    /// Removes `rule` (as inserted: id, priority and fields; compared in
    /// canonical form). False, and nothing changed, when the table does
    /// not hold it.
    pub fn remove(&mut self, rule: &Rule) -> bool {
        let mut rule = rule.clone();
        if rule.canonicalize().is_err() || !self.remove_inner(&rule) {
            return false;
        }
        self.note_change();
        true
    }

    /// Removes canonical `rule` from whichever structure holds it.
    fn remove_inner(&mut self, rule: &Rule) -> bool {
        let place = if self.lpm.remove(rule) {
            Place::Lpm
        } else if self.tss_remove(rule) {
            Place::Tss
        } else if self.merged.remove(rule) {
            Place::Merged
        } else {
            return false;
        };
        if place != Place::Lpm {
            let mask = mask_of(rule);
            if let Some(c) = self.mask_counts.get_mut(&mask) {
                *c -= 1;
                if *c == 0 {
                    self.mask_counts.remove(&mask);
                }
            }
        }
        self.count -= 1;
        self.generation += 1;
        true
    }

    fn tss_remove(&mut self, rule: &Rule) -> bool {
        let mask = mask_of(rule);
        let Some(&idx) = self.by_mask.get(&mask) else {
            return false;
        };
        let Some(st) = self.subtables.get_mut(idx).and_then(Option::as_mut) else {
            return false;
        };
        let before = st.max_priority();
        let mut key = KeyBuf::packed(st, rule);
        if !st.remove(key.as_mut(), rule.id, rule.priority) {
            return false;
        }
        if st.is_empty() {
            self.subtables[idx] = None;
            self.free.push(idx);
            self.by_mask.remove(&mask);
            self.order.retain(|&i| i != idx);
        } else if st.max_priority() != before {
            self.resort();
        }
        true
    }

    /// Replaces `old` by `new` (the same id or not): `old` is removed when
    /// held, then `new` added. On error (malformed `new`) the table is
    /// unchanged. Returns whether `old` was held.
    pub fn replace(&mut self, old: &Rule, mut new: Rule) -> Result<bool, RuleError> {
        new.canonicalize()?;
        let mut old = old.clone();
        let had = old.canonicalize().is_ok() && self.remove_inner(&old);
        self.insert_inner(new, true)?;
        self.note_change();
        Ok(had)
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        let g = self.generation + 1;
        *self = Table::new();
        self.generation = g;
    }

    /// Bytes of heap held by the lookup structures (not the rule store).
    pub fn lookup_heap_bytes(&self) -> usize {
        self.subtables
            .iter()
            .flatten()
            .map(Subtable::heap_bytes)
            .sum::<usize>()
            + self.lpm.heap_bytes()
            + self.merged.heap_bytes()
    }

    #[inline]
    fn tss_lookup(&self, k: &FlowKey, best: Option<Hit>) -> Option<Hit> {
        self.tss_lookup_from(k, best, 0)
    }

    /// Tuple-space search over `order[start..]`, starting from `best`.
    #[inline]
    fn tss_lookup_from(&self, k: &FlowKey, mut best: Option<Hit>, start: usize) -> Option<Hit> {
        for &i in self.order.get(start..).unwrap_or(&[]) {
            let Some(st) = self.subtables.get(i).and_then(Option::as_ref) else {
                continue;
            };
            if let Some(b) = best {
                if st.max_priority() < b.priority {
                    break;
                }
            }
            if let Some(h) = st.lookup(k) {
                best = Hit::best(best, Some(h));
            }
        }
        best
    }

    /// The rule `k` hits: highest priority, then smallest id; `None` when
    /// nothing matches.
    #[inline]
    pub fn lookup(&self, k: &FlowKey) -> Option<Hit> {
        let best = if self.lpm.is_empty() {
            None
        } else {
            self.lpm.lookup(k)
        };
        let best = self.tss_lookup(k, best);
        if self.merged.is_empty() {
            best
        } else {
            self.merged.lookup(k, best)
        }
    }

    /// Looks up every key of `keys` into `out[i]` (`out` at least as long
    /// as `keys`). Same results as [`Table::lookup`] one by one, faster on
    /// single-mask and LPM tables (hashes or indexes of a burst computed
    /// first, their cache lines prefetched before any probe).
    pub fn lookup_burst<K: Borrow<FlowKey>>(&self, keys: &[K], out: &mut [Option<Hit>]) {
        if !self.merged.is_empty() {
            // Wildcard tables: measured no faster with the LPM burst in
            // front (acl scenario: 4.1 burst vs 5.9 Mpps one by one), so
            // key by key.
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.lookup(k.borrow());
            }
            return;
        }
        // First structure for the whole burst (prefetching), then the rest
        // key by key, pruned by what the first found.
        let mut start = 0;
        if !self.lpm.is_empty() {
            self.lpm.lookup_burst(keys, out);
        } else {
            match self.order.first().and_then(|&i| self.subtables.get(i)) {
                Some(Some(st)) if st.layout().words() <= BURST_WORDS => {
                    st.lookup_burst(keys, out);
                    start = 1;
                }
                _ => out.iter_mut().for_each(|o| *o = None),
            }
        }
        if start < self.order.len() || !self.merged.is_empty() {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                let k = k.borrow();
                let best = self.tss_lookup_from(k, *o, start);
                *o = if self.merged.is_empty() {
                    best
                } else {
                    self.merged.lookup(k, best)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{FieldMatch, LinearRef};
    use packet::flow_key::field;
    use proptest::prelude::*;

    /// Small deterministic RNG driven by the proptest seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
            xs[self.below(xs.len() as u64) as usize]
        }
    }

    const ADDRS: [u32; 6] = [
        0x0a00_0000,
        0x0a00_0001,
        0x0a01_0080,
        0x0a01_00ff,
        0xc0a8_0101,
        0,
    ];

    fn fm(field: u8, value: u128, mask: u128) -> FieldMatch {
        FieldMatch { field, value, mask }
    }

    fn pfx(r: &mut Rng) -> (u128, u128) {
        let len = r.pick(&[1u32, 8, 15, 16, 24, 25, 31, 32]);
        let m = u32::MAX << (32 - len);
        ((r.pick(&ADDRS) & m).into(), m.into())
    }

    /// A rule of the given shape: 0 single mask, 1 routes, 2 anything.
    fn rule(r: &mut Rng, shape: u32, id: u64) -> Rule {
        let mut fields = Vec::new();
        let mut priority = r.below(4) as u16;
        match shape {
            0 => {
                fields.push(fm(field::IN_PORT, r.below(3).into(), 0xffff_ffff));
                fields.push(fm(field::VLAN_VID, 0x1000 | r.below(3) as u128, 0x1fff));
            }
            1 => {
                if r.below(10) == 0 {
                    // a table-miss rule
                    priority = 0;
                } else {
                    let (v, m) = pfx(r);
                    fields.push(fm(field::ETH_TYPE, 0x800, 0xffff));
                    fields.push(fm(field::IPV4_DST, v, m));
                    priority = if r.below(8) == 0 {
                        r.below(40) as u16
                    } else {
                        m.count_ones() as u16 + 1
                    };
                }
            }
            _ => {
                if r.below(2) == 0 {
                    fields.push(fm(
                        field::IN_PORT,
                        r.below(3).into(),
                        r.pick(&[1, 3, 0xffff_ffff]),
                    ));
                }
                if r.below(2) == 0 {
                    fields.push(fm(field::ETH_TYPE, r.pick(&[0x800, 0x86dd]), 0xffff));
                }
                if r.below(2) == 0 {
                    fields.push(fm(field::IP_PROTO, r.pick(&[6, 17]), 0xff));
                }
                if r.below(2) == 0 {
                    let (v, m) = pfx(r);
                    fields.push(fm(field::IPV4_SRC, v, m));
                }
                if r.below(2) == 0 {
                    let (v, m) = pfx(r);
                    fields.push(fm(field::IPV4_DST, v, m));
                }
                if r.below(3) == 0 {
                    fields.push(fm(
                        field::TCP_DST,
                        r.pick(&[80, 81, 443]),
                        r.pick(&[0xffff, 0xfffe]),
                    ));
                }
                if r.below(4) == 0 {
                    fields.push(fm(field::IPV6_DST, r.below(2).into(), u128::MAX));
                }
            }
        }
        Rule {
            id,
            priority,
            fields,
        }
    }

    fn packet(r: &mut Rng) -> FlowKey {
        let mut k = FlowKey::default();
        k.set_metadata_fields(r.below(3) as u32, 0, 0, 0);
        k.present |= 1 << field::VLAN_VID;
        k.vlan_vid = r.pick(&[0, 0x1000, 0x1001, 0x1002]);
        if r.below(8) != 0 {
            k.present |= 1 << field::ETH_TYPE;
            k.eth_type = r.pick(&[0x800, 0x800, 0x86dd, 0x806]);
            if k.eth_type == 0x800 {
                k.present |=
                    (1 << field::IPV4_SRC) | (1 << field::IPV4_DST) | (1 << field::IP_PROTO);
                k.ipv4_src = r.pick(&ADDRS) | r.pick(&[0, 1, 0x80, 0x100]);
                k.ipv4_dst = r.pick(&ADDRS) | r.pick(&[0, 1, 0x80, 0x100]);
            }
            if k.eth_type == 0x86dd {
                k.present |= (1 << field::IPV6_DST) | (1 << field::IP_PROTO);
                k.ipv6_dst = r.below(2).into();
            }
            if k.present & (1 << field::IP_PROTO) != 0 {
                k.ip_proto = r.pick(&[6, 17, 1]);
                if k.ip_proto == 6 {
                    k.present |= (1 << field::TCP_SRC) | (1 << field::TCP_DST);
                    k.tp_dst = r.pick(&[80, 81, 443, 22]);
                }
            }
        }
        k
    }

    fn check(t: &Table, reference: &LinearRef, r: &mut Rng) -> Result<(), TestCaseError> {
        let keys: Vec<FlowKey> = (0..40).map(|_| packet(r)).collect();
        let mut out = vec![None; keys.len()];
        t.lookup_burst(&keys, &mut out);
        for (k, o) in keys.iter().zip(&out) {
            let want = reference.lookup(k);
            prop_assert_eq!(t.lookup(k), want, "shape {:?} key {:?}", t.shape(), k);
            prop_assert_eq!(*o, want, "burst, shape {:?}", t.shape());
        }
        Ok(())
    }

    /// The table's rules, rebuilt from its structures, equal the
    /// reference's.
    fn same_rules(t: &Table, reference: &LinearRef) -> Result<(), TestCaseError> {
        let mut got = t.rules();
        got.sort_by_key(|r| r.id);
        let want: Vec<&Rule> = reference.rules().collect();
        prop_assert_eq!(got.iter().collect::<Vec<_>>(), want);
        for r in &got {
            prop_assert!(t.contains(r));
        }
        Ok(())
    }

    fn run(seed: u64, shape: u32) -> Result<(), TestCaseError> {
        let mut r = Rng(seed | 1);
        let mut t = Table::new();
        let mut reference = LinearRef::new();
        let mut live: Vec<Rule> = Vec::new();
        let mut next = 0u64;
        for _ in 0..(20 + r.below(60)) {
            let s = if shape == 3 { r.below(3) as u32 } else { shape };
            match r.below(10) {
                0..=5 => {
                    // Ids are not always ascending, so ties test "smallest id".
                    next += 1;
                    let id = next * 7 % 1000 + r.below(3) * 1000;
                    let rl = rule(&mut r, s, id);
                    let a = t.insert(rl.clone());
                    let b = reference.insert(rl.clone());
                    prop_assert_eq!(a.is_ok(), b.is_ok());
                    if a.is_ok() {
                        live.push(rl);
                    }
                }
                6..=7 if !live.is_empty() => {
                    let rl = live.swap_remove(r.below(live.len() as u64) as usize);
                    let mut other = rl.clone();
                    other.priority ^= 1;
                    prop_assert!(!t.remove(&other), "another priority is another rule");
                    prop_assert!(t.remove(&rl));
                    prop_assert!(reference.remove(rl.id).is_some());
                    prop_assert!(!t.remove(&rl), "removed twice");
                }
                8 if !live.is_empty() => {
                    let i = r.below(live.len() as u64) as usize;
                    let rl = rule(&mut r, s, live[i].id);
                    reference.remove(rl.id);
                    reference.insert(rl.clone()).unwrap();
                    prop_assert!(t.replace(&live[i], rl.clone()).unwrap());
                    live[i] = rl;
                }
                9 => {
                    let g = t.generation();
                    t.reshape();
                    prop_assert_eq!(t.generation(), g);
                }
                _ => {}
            }
            prop_assert_eq!(t.len(), reference.len());
            check(&t, &reference, &mut r)?;
        }
        same_rules(&t, &reference)?;
        for rl in live {
            prop_assert!(t.remove(&rl));
        }
        prop_assert_eq!(t.shape(), Shape::Empty);
        Ok(())
    }

    proptest! {
        // Route tables with /1 prefixes rewrite 2^23 entries per insert
        // (slow in debug builds): fewer cases, each with many operations.
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn single_mask_equals_linear(seed in any::<u64>()) { run(seed, 0)?; }
        #[test]
        fn routes_equal_linear(seed in any::<u64>()) { run(seed, 1)?; }
        #[test]
        fn any_shape_equals_linear(seed in any::<u64>()) { run(seed, 2)?; }
        #[test]
        fn mixed_shapes_equal_linear(seed in any::<u64>()) { run(seed, 3)?; }
    }

    /// Hundreds of wildcard rules over a small value domain: buckets of
    /// merged tables overflow, so every placement path is taken.
    #[test]
    fn many_wildcard_rules_equal_linear() {
        for seed in [3u64, 77, 1234] {
            let mut r = Rng(seed);
            let mut t = Table::new();
            let mut reference = LinearRef::new();
            let mut live = Vec::new();
            for id in 0..600u64 {
                let rl = rule(&mut r, 2 + (id % 5 == 0) as u32 * 7, id * 13 % 1009);
                t.insert(rl.clone()).unwrap();
                reference.insert(rl.clone()).unwrap();
                live.push(rl);
            }
            same_rules(&t, &reference).unwrap();
            assert!(matches!(t.shape(), Shape::Merged { .. }), "{:?}", t.shape());
            for _ in 0..20 {
                check(&t, &reference, &mut r).unwrap();
            }
            for rl in live.iter().step_by(3) {
                assert!(t.remove(rl));
                assert!(reference.remove(rl.id).is_some());
            }
            same_rules(&t, &reference).unwrap();
            for _ in 0..20 {
                check(&t, &reference, &mut r).unwrap();
            }
        }
    }

    /// An odd rule installed first must not push a big single-mask table
    /// into the merged tables for good.
    #[test]
    fn reshape_moves_the_common_mask_to_the_exact_subtable() {
        let mut t = Table::new();
        let mut reference = LinearRef::new();
        let arp = Rule {
            id: 0,
            priority: 5,
            fields: vec![fm(field::ETH_TYPE, 0x806, 0xffff)],
        };
        t.insert(arp.clone()).unwrap();
        reference.insert(arp).unwrap();
        for id in 1..3000u64 {
            let r = Rule {
                id,
                priority: 1,
                fields: vec![
                    fm(field::IN_PORT, (id % 3).into(), 0xffff_ffff),
                    fm(field::VLAN_VID, 0x1000 | (id / 3) as u128, 0x1fff),
                ],
            };
            t.insert(r.clone()).unwrap();
            reference.insert(r).unwrap();
        }
        assert_eq!(
            t.shape(),
            Shape::Merged {
                lpm: false,
                subtables: 1,
                merged: 1
            }
        );
        let in_exact = t
            .order
            .first()
            .and_then(|&i| t.subtables[i].as_ref())
            .map(|s| s.len());
        assert_eq!(
            in_exact,
            Some(2999),
            "gateway rules moved to the exact subtable"
        );
        let mut r = Rng(5);
        for _ in 0..10 {
            check(&t, &reference, &mut r).unwrap();
        }
        let g = t.generation();
        t.reshape();
        assert_eq!(t.generation(), g, "reshape changes no result");
        check(&t, &reference, &mut r).unwrap();
    }

    #[test]
    fn shapes_are_chosen_from_the_rules() {
        let mut t = Table::new();
        assert_eq!(t.shape(), Shape::Empty);
        assert!(t.one_probe());
        let gw = |id: u64, port: u32| Rule {
            id,
            priority: 1,
            fields: vec![fm(field::MPLS_LABEL, port.into(), 0xfffff)],
        };
        t.insert(gw(1, 5)).unwrap();
        t.insert(gw(2, 6)).unwrap();
        assert_eq!(t.shape(), Shape::SingleMask);
        assert!(t.one_probe());
        let (st, all) = t.exact_and_catch_all().expect("one mask");
        assert_eq!((st.len(), all), (2, None));
        let miss = |id: u64| Rule {
            id,
            priority: 0,
            fields: vec![],
        };
        // A table-miss entry beside one mask: still one probe.
        t.insert(miss(9)).unwrap();
        assert_eq!(t.shape(), Shape::Tss(2));
        assert!(t.one_probe());
        let (st, all) = t.exact_and_catch_all().expect("one mask and the miss");
        assert_eq!((st.len(), all.map(|h| h.id)), (2, Some(9)));
        t.insert(Rule {
            id: 10,
            priority: 1,
            fields: vec![fm(field::IN_PORT, 1, 0xffff_ffff)],
        })
        .unwrap();
        assert!(!t.one_probe(), "two exact masks");
        assert!(t.exact_and_catch_all().is_none(), "two exact masks");
        assert!(t.remove(&miss(9)));
        assert!(t.remove(&Rule {
            id: 10,
            priority: 1,
            fields: vec![fm(field::IN_PORT, 1, 0xffff_ffff)],
        }));
        let g0 = t.generation();
        assert!(!t.remove(&gw(2, 7)), "same id, other fields: not held");
        assert_eq!(t.generation(), g0, "a refused remove changes nothing");
        t.clear();
        let route = |id: u64, p: u32, len: u32, prio: u16| Rule {
            id,
            priority: prio,
            fields: vec![
                fm(field::ETH_TYPE, 0x800, 0xffff),
                fm(field::IPV4_DST, p.into(), (u32::MAX << (32 - len)).into()),
            ],
        };
        t.insert(route(1, 0x0a00_0000, 8, 8)).unwrap();
        t.insert(route(2, 0x0a01_0000, 16, 16)).unwrap();
        assert_eq!(t.shape(), Shape::Lpm);
        let (lpm, all) = t.route_and_catch_all().expect("routes only");
        assert_eq!((lpm.len(), all), (2, None));
        t.insert(Rule {
            id: 3,
            priority: 0,
            fields: vec![],
        })
        .unwrap();
        assert_eq!(t.shape(), Shape::LpmPlusTss(1));
        assert!(t.one_probe(), "routes and a table-miss entry");
        let (lpm, all) = t.route_and_catch_all().expect("routes and the miss");
        assert_eq!(all.map(|h| h.id), Some(3));
        // The address burst answers as the key lookup does, for frames
        // whose key has the IPv4 destination (`None` in, `None` out).
        let addrs = [
            Some(0x0a01_0203),
            Some(0x0a02_0000),
            Some(0x0b00_0000),
            None,
        ];
        let mut hits = [Some(Hit {
            id: 99,
            priority: 1,
        }); 4];
        lpm.lookup_burst_addrs(&addrs, &mut hits);
        for (a, h) in addrs.iter().zip(hits) {
            let want = a.and_then(|a| {
                t.lookup(&FlowKey {
                    present: (1 << field::ETH_TYPE) | (1 << field::IPV4_DST),
                    eth_type: 0x800,
                    ipv4_dst: a,
                    ..Default::default()
                })
            });
            assert_eq!(a.and_then(|_| Hit::best(h, all)), want, "{a:x?}");
        }
        assert_eq!(hits[3], None);
        // A /24 with a priority below the /16: contradicts prefix order.
        t.insert(route(4, 0x0a01_0100, 24, 10)).unwrap();
        assert_eq!(t.shape(), Shape::LpmPlusTss(2));
        assert!(!t.one_probe(), "routes and an exact subtable");
        assert!(
            t.route_and_catch_all().is_none(),
            "routes and an exact subtable"
        );
        let mut k = FlowKey {
            present: (1 << field::ETH_TYPE) | (1 << field::IPV4_DST),
            eth_type: 0x800,
            ipv4_dst: 0x0a01_0101,
            ..Default::default()
        };
        assert_eq!(
            t.lookup(&k).map(|h| h.id),
            Some(2),
            "priority, not length, wins"
        );
        assert!(t.remove(&route(2, 0x0a01_0000, 16, 16)));
        assert_eq!(t.lookup(&k).map(|h| h.id), Some(4));
        k.ipv4_dst = 0x0b00_0000;
        assert_eq!(t.lookup(&k).map(|h| h.id), Some(3));
    }
}
