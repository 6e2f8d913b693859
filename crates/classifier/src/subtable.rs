//! One hash subtable: every rule of one mask, in an open-addressing hash
//! table keyed on the packed masked values.
//!
//! # Structure
//!
//! The subtable owns a [`Layout`] (how its mask's fields pack into `W`
//! words) and a flat `Vec<u64>` of slots, each `W + 2` words long:
//!
//! ```text
//!   [ key word 0 .. key word W-1 | best rule id | meta ]
//!   meta: bit 63 occupied, bits 0..16 best priority,
//!         bits 16..48 group number + 1 (0: the slot holds one rule)
//! ```
//!
//! A packet is looked up by packing its fields with the layout, hashing
//! the words, and probing linearly from `hash & (capacity - 1)` until the
//! key words compare equal (hit) or an empty slot is met (miss). The best
//! rule's id and priority live in the slot itself, so a hit costs one
//! cache line (two when a slot straddles lines) and no pointer chase.
//!
//! Rules with the same mask *and* the same values (same key, different id
//! or priority) share a slot; the slot then points at a group (a small
//! vector of every such rule) and caches the group's best: highest
//! priority, then smallest id. Lone rules, the common case, need no group.
//!
//! # Invariants
//!
//! - Capacity is a power of two and load (occupied slots / capacity) stays
//!   at most 3/4; the table doubles before crossing it.
//! - Linear probing without tombstones: removal shifts later entries of
//!   the probe run back into the hole (backward-shift deletion), so a
//!   lookup may stop at the first empty slot.
//! - A slot's cached best is the best of its group after every change.
//! - `prios` counts rules per priority, so `max_priority` (what
//!   tuple-space search orders and prunes subtables by) is exact after
//!   removals.
//!
//! # Why
//!
//! One mask shared by all rules (the gateway tables: in_port+VLAN, MPLS
//! label) is the commonest OpenFlow table; it deserves a single probe on
//! packed words. Keys and results inline in the slot, and the burst
//! lookup ([`Subtable::lookup_burst`]) hashes a whole burst and prefetches
//! every home slot before probing any, so the cache misses of a large
//! table (1M rules = 48 MiB of slots) overlap instead of serializing.
//! The prefetch is the one `unsafe` block of the crate: the safe
//! alternative, an ordinary read of each home slot before probing, stalls
//! the core on each read where the prefetches do not, and loses about
//! two thirds of the lookups (docs/results.md, "The classifier alone").

use crate::key::{hash_words, L2Layout, Layout, BURST_WORDS};
use crate::rule::{Hit, Rule};
use packet::flow_key::FlowKey;
use packet::huge::HugeVec;
use std::borrow::Borrow;
use std::collections::BTreeMap;

const OCC: u64 = 1 << 63;
const BURST: usize = 32;

/// Issues a prefetch of the cache line holding `r` (a hint: no effect on
/// the program's state). Public so that the pipeline can prefetch what a
/// burst's hits name without `unsafe` of its own.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is only a hint to the cache: it never faults,
    // never reads memory into the program's state and has no other effect;
    // the pointer comes from a live reference in any case. SSE is part of
    // the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            (r as *const T).cast::<i8>(),
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// [`prefetch`] of every cache line `r` covers, at most the first four
/// (a slice's elements, a struct bigger than a line).
#[inline(always)]
pub fn prefetch_all<T: ?Sized>(r: &T) {
    let len = core::mem::size_of_val(r).min(256);
    let p = (r as *const T).cast::<u8>();
    let mut off = 0;
    while off < len {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `prefetch`: a hint that never faults, whatever the
        // address; `wrapping_add` computes the address without assuming
        // anything about it.
        unsafe {
            core::arch::x86_64::_mm_prefetch(
                p.wrapping_add(off).cast::<i8>(),
                core::arch::x86_64::_MM_HINT_T0,
            );
        }
        off += 64;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// All the rules of one mask.
#[derive(Clone, Debug)]
pub struct Subtable {
    mask: Vec<(u8, u128)>,
    layout: Layout,
    /// The layout as an [`L2Layout`], when it is one.
    l2: Option<L2Layout>,
    words: usize,
    stride: usize,
    slots: HugeVec<u64>,
    cap_mask: usize,
    occupied: usize,
    rules: usize,
    groups: Vec<Vec<Hit>>,
    free_groups: Vec<usize>,
    prios: BTreeMap<u16, u32>,
    max_prio: u16,
    seed: u64,
}

impl Subtable {
    /// An empty subtable for `mask` (sorted `(field, mask)` pairs).
    pub fn new(mask: Vec<(u8, u128)>) -> Subtable {
        Self::with_capacity(mask, 0)
    }

    /// An empty subtable sized for `n` rules without growing.
    pub fn with_capacity(mask: Vec<(u8, u128)>, n: usize) -> Subtable {
        let layout = Layout::new(&mask);
        let words = layout.words();
        let stride = words + 2;
        let cap = (n.saturating_mul(4) / 3 + 1).next_power_of_two().max(8);
        Subtable {
            seed: 0x51_7c_c1_b7_27_22_0a_95 ^ (mask.len() as u64),
            mask,
            l2: layout.l2(),
            layout,
            words,
            stride,
            slots: HugeVec::from_vec(vec![0; cap * stride]),
            cap_mask: cap - 1,
            occupied: 0,
            rules: 0,
            groups: Vec::new(),
            free_groups: Vec::new(),
            prios: BTreeMap::new(),
            max_prio: 0,
        }
    }

    /// The mask this subtable holds.
    pub fn mask(&self) -> &[(u8, u128)] {
        &self.mask
    }

    /// The packing of the mask.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules
    }

    /// The packing of the mask as an [`L2Layout`] (a frame's key packed
    /// straight from its link-layer header), when it is one.
    #[inline]
    pub fn l2_layout(&self) -> Option<&L2Layout> {
        self.l2.as_ref()
    }

    /// The home slot of packed key `key` (`W` must be this subtable's
    /// words), its line prefetched: the first half of a lookup, issued
    /// for a whole burst before any [`Subtable::probe_from`].
    #[inline]
    pub fn home_of<const W: usize>(&self, key: &[u64; W]) -> usize {
        let i = self.hash(key) as usize & self.cap_mask;
        self.prefetch_slot(i);
        i
    }

    /// Prefetches slot `i`; a slot may straddle two cache lines, so both
    /// ends.
    #[inline]
    fn prefetch_slot(&self, i: usize) {
        if let Some(s) = self.slots.get(i * self.stride) {
            prefetch(s);
        }
        if let Some(s) = self.slots.get(i * self.stride + self.stride - 1) {
            prefetch(s);
        }
    }

    /// The best rule whose packed key is `key`, probing from its home
    /// slot `home` ([`Subtable::home_of`]); `None` when `W` is not this
    /// subtable's words.
    #[inline]
    pub fn probe_from<const W: usize>(&self, home: usize, key: &[u64; W]) -> Option<Hit> {
        if self.words != W {
            return None;
        }
        let mut i = home & self.cap_mask;
        loop {
            let b = i * self.stride;
            let s: &[u64] = self.slots.get(b..b + W + 2)?;
            if s.get(W + 1).copied().unwrap_or(0) & OCC == 0 {
                return None;
            }
            // Word by word, as `lookup_burst` compares.
            if s.iter().zip(key).all(|(a, b)| a == b) {
                return Some(Hit {
                    id: s.get(W).copied().unwrap_or(0),
                    priority: s.get(W + 1).copied().unwrap_or(0) as u16,
                });
            }
            i = (i + 1) & self.cap_mask;
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.rules == 0
    }

    /// Highest priority of any rule (0 when empty).
    #[inline]
    pub fn max_priority(&self) -> u16 {
        self.max_prio
    }

    /// Bytes of heap held (slots and groups).
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 8
            + self
                .groups
                .iter()
                .map(|g| g.capacity() * 16 + 24)
                .sum::<usize>()
    }

    #[inline]
    fn hash(&self, key: &[u64]) -> u64 {
        hash_words(key, self.seed)
    }

    #[inline]
    fn slot(&self, i: usize) -> &[u64] {
        let b = i * self.stride;
        self.slots.get(b..b + self.stride).unwrap_or(&[])
    }

    /// Index of the slot holding `key`, if any.
    fn find(&self, key: &[u64], h: u64) -> Option<usize> {
        let mut i = h as usize & self.cap_mask;
        loop {
            let s = self.slot(i);
            let meta = s.get(self.words + 1).copied().unwrap_or(0);
            if meta & OCC == 0 {
                return None;
            }
            if s.get(..self.words) == Some(key) {
                return Some(i);
            }
            i = (i + 1) & self.cap_mask;
        }
    }

    #[inline]
    fn hit_of(&self, i: usize) -> Hit {
        let s = self.slot(i);
        let meta = s.get(self.words + 1).copied().unwrap_or(0);
        Hit {
            id: s.get(self.words).copied().unwrap_or(0),
            priority: meta as u16,
        }
    }

    fn set_slot(&mut self, i: usize, key: &[u64], hit: Hit, group: usize) {
        let (w, b) = (self.words, i * self.stride);
        if let Some(s) = self.slots.get_mut(b..b + self.stride) {
            s[..w].copy_from_slice(key);
            s[w] = hit.id;
            s[w + 1] = OCC | u64::from(hit.priority) | ((group as u64) << 16);
        }
    }

    fn group_of(&self, i: usize) -> usize {
        let meta = self.slot(i).get(self.words + 1).copied().unwrap_or(0);
        ((meta >> 16) & 0xffff_ffff) as usize
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut *self.slots);
        let cap = (self.cap_mask + 1) * 2;
        self.slots = HugeVec::from_vec(vec![0; cap * self.stride]);
        self.cap_mask = cap - 1;
        for s in old.chunks_exact(self.stride) {
            if s[self.words + 1] & OCC != 0 {
                let mut i = self.hash(&s[..self.words]) as usize & self.cap_mask;
                while self.slot(i).get(self.words + 1).copied().unwrap_or(0) & OCC != 0 {
                    i = (i + 1) & self.cap_mask;
                }
                let b = i * self.stride;
                self.slots[b..b + self.stride].copy_from_slice(s);
            }
        }
    }

    fn count_prio(&mut self, p: u16, add: bool) {
        if add {
            *self.prios.entry(p).or_insert(0) += 1;
        } else if let Some(c) = self.prios.get_mut(&p) {
            *c -= 1;
            if *c == 0 {
                self.prios.remove(&p);
            }
        }
        self.max_prio = self.prios.keys().next_back().copied().unwrap_or(0);
    }

    /// Adds a rule whose packed values are `key`. The caller guarantees
    /// the id is not already present.
    pub fn insert(&mut self, key: &[u64], hit: Hit) {
        self.count_prio(hit.priority, true);
        self.rules += 1;
        let h = self.hash(key);
        if let Some(i) = self.find(key, h) {
            let cur = self.hit_of(i);
            let mut g = self.group_of(i);
            if g == 0 {
                let v = vec![cur, hit];
                g = match self.free_groups.pop() {
                    Some(n) => {
                        self.groups[n] = v;
                        n
                    }
                    None => {
                        self.groups.push(v);
                        self.groups.len() - 1
                    }
                } + 1;
            } else if let Some(v) = self.groups.get_mut(g - 1) {
                v.push(hit);
            }
            let best = if hit.beats(&cur) { hit } else { cur };
            self.set_slot(i, key, best, g);
            return;
        }
        if (self.occupied + 1) * 4 > (self.cap_mask + 1) * 3 {
            self.grow();
        }
        let mut i = h as usize & self.cap_mask;
        while self.slot(i).get(self.words + 1).copied().unwrap_or(0) & OCC != 0 {
            i = (i + 1) & self.cap_mask;
        }
        self.set_slot(i, key, hit, 0);
        self.occupied += 1;
    }

    /// Removes rule `id` (with priority `priority`) whose packed values
    /// are `key`. False when it is not here.
    pub fn remove(&mut self, key: &[u64], id: u64, priority: u16) -> bool {
        let h = self.hash(key);
        let Some(i) = self.find(key, h) else {
            return false;
        };
        let g = self.group_of(i);
        let hit = Hit { id, priority };
        if g == 0 {
            if self.hit_of(i) != hit {
                return false;
            }
            self.delete_slot(i);
        } else {
            let Some(v) = self.groups.get_mut(g - 1) else {
                return false;
            };
            let Some(pos) = v.iter().position(|x| *x == hit) else {
                return false;
            };
            v.swap_remove(pos);
            let mut best = v[0];
            for x in v.iter() {
                if x.beats(&best) {
                    best = *x;
                }
            }
            let keep = if v.len() == 1 {
                v.clear();
                self.free_groups.push(g - 1);
                0
            } else {
                g
            };
            self.set_slot(i, key, best, keep);
        }
        self.rules -= 1;
        self.count_prio(priority, false);
        true
    }

    /// True when rule `hit` with packed values `key` is held here.
    pub fn contains(&self, key: &[u64], hit: Hit) -> bool {
        let Some(i) = self.find(key, self.hash(key)) else {
            return false;
        };
        match self.group_of(i) {
            0 => self.hit_of(i) == hit,
            g => self.groups.get(g - 1).is_some_and(|v| v.contains(&hit)),
        }
    }

    /// Appends every rule held to `out`, its fields unpacked from the
    /// slot's key (canonical form: the subtable keeps nothing else).
    pub fn rules_into(&self, out: &mut Vec<Rule>) {
        for s in self.slots.chunks_exact(self.stride) {
            let meta = s.get(self.words + 1).copied().unwrap_or(0);
            if meta & OCC == 0 {
                continue;
            }
            let fields = self.layout.unpack(s.get(..self.words).unwrap_or(&[]));
            let g = ((meta >> 16) & 0xffff_ffff) as usize;
            let one = [Hit {
                id: s.get(self.words).copied().unwrap_or(0),
                priority: meta as u16,
            }];
            let hits = match g {
                0 => &one[..],
                g => self.groups.get(g - 1).map_or(&[][..], Vec::as_slice),
            };
            for h in hits {
                out.push(Rule {
                    id: h.id,
                    priority: h.priority,
                    fields: fields.clone(),
                });
            }
        }
    }

    fn delete_slot(&mut self, i: usize) {
        let mut hole = i;
        let mut j = (i + 1) & self.cap_mask;
        loop {
            let s = self.slot(j);
            if s.get(self.words + 1).copied().unwrap_or(0) & OCC == 0 {
                break;
            }
            let home = self.hash(s.get(..self.words).unwrap_or(&[])) as usize & self.cap_mask;
            if (j.wrapping_sub(home) & self.cap_mask) >= (j.wrapping_sub(hole) & self.cap_mask) {
                let (src, dst) = (j * self.stride, hole * self.stride);
                self.slots.copy_within(src..src + self.stride, dst);
                hole = j;
            }
            j = (j + 1) & self.cap_mask;
        }
        let b = hole * self.stride;
        if let Some(s) = self.slots.get_mut(b..b + self.stride) {
            s.fill(0);
        }
        self.occupied -= 1;
    }

    /// The best rule whose packed key is `key`.
    #[inline]
    pub fn lookup_packed(&self, key: &[u64]) -> Option<Hit> {
        let h = self.hash(key);
        self.find(key, h).map(|i| self.hit_of(i))
    }

    /// The best rule of this subtable matching `k`.
    #[inline]
    pub fn lookup(&self, k: &FlowKey) -> Option<Hit> {
        let mut buf = [0u64; BURST_WORDS];
        if self.words <= BURST_WORDS {
            let key = &mut buf[..self.words];
            if !self.layout.extract(k, key) {
                return None;
            }
            self.lookup_packed(key)
        } else {
            let mut key = vec![0u64; self.words];
            if !self.layout.extract(k, &mut key) {
                return None;
            }
            self.lookup_packed(&key)
        }
    }

    /// Looks up every key of `keys`, writing `out[i]` for `keys[i]`
    /// (`out` must be at least as long). Per burst of 32: pack and hash
    /// all keys and prefetch each home slot, then probe.
    pub fn lookup_burst<K: Borrow<FlowKey>>(&self, keys: &[K], out: &mut [Option<Hit>]) {
        let w = self.words;
        if w > BURST_WORDS {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.lookup(k.borrow());
            }
            return;
        }
        let mut packed = [0u64; BURST * BURST_WORDS];
        let mut home = [usize::MAX; BURST];
        for (kc, oc) in keys.chunks(BURST).zip(out.chunks_mut(BURST)) {
            for (j, k) in kc.iter().enumerate() {
                let key = &mut packed[j * w..j * w + w];
                home[j] = if self.layout.extract(k.borrow(), key) {
                    let i = self.hash(key) as usize & self.cap_mask;
                    self.prefetch_slot(i);
                    i
                } else {
                    usize::MAX
                };
            }
            for (j, o) in oc.iter_mut().enumerate().take(kc.len()) {
                let mut i = home[j];
                if i == usize::MAX {
                    *o = None;
                    continue;
                }
                let key = &packed[j * w..j * w + w];
                *o = loop {
                    let s = self.slot(i);
                    if s.get(w + 1).copied().unwrap_or(0) & OCC == 0 {
                        break None;
                    }
                    // Word by word: a slice compare calls memcmp (3% of
                    // the gateway benchmark) for one or two words.
                    if s.len() > w && s.iter().zip(key).all(|(a, b)| a == b) {
                        break Some(self.hit_of(i));
                    }
                    i = (i + 1) & self.cap_mask;
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: u64, priority: u16) -> Hit {
        Hit { id, priority }
    }

    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Random inserts and removes (keys from a small domain, so
        /// groups form, and a small table, so probe runs wrap around and
        /// backward-shift deletion moves entries across the end) against
        /// a map from key to rules. (Under Miri, which interprets every
        /// step, runs are shorter and every key is looked up after every
        /// eighth step and the last, the key just changed after the
        /// others: the unsafe paths are the inserts, removes and probes,
        /// which every step takes.)
        #[test]
        fn model_of_keys_to_best_rule(ops in proptest::collection::vec((0u64..40, 0u16..4, any::<bool>()), 1..if cfg!(miri) { 80 } else { 400 })) {
            let mut t = Subtable::new(vec![(0, 0xffff_ffff), (6, 0x1fff)]);
            let mut model: BTreeMap<u64, Vec<Hit>> = BTreeMap::new();
            let steps = ops.len();
            for (n, (key, prio, remove)) in ops.into_iter().enumerate() {
                let key = key.wrapping_mul(0x9e37_79b9) & 0xffff_ffff;
                let sweep = !cfg!(miri) || n % 8 == 7 || n + 1 == steps;
                if remove {
                    if let Some(v) = model.get_mut(&key) {
                        if let Some(h) = v.pop() {
                            prop_assert!(t.remove(&[key], h.id, h.priority));
                        }
                        if v.is_empty() {
                            model.remove(&key);
                        }
                    } else {
                        prop_assert!(!t.remove(&[key], n as u64, prio));
                    }
                } else {
                    let h = hit(n as u64, prio);
                    t.insert(&[key], h);
                    model.entry(key).or_default().push(h);
                }
                prop_assert_eq!(t.len(), model.values().map(Vec::len).sum::<usize>());
                for k in 0..40u64 {
                    let k = k.wrapping_mul(0x9e37_79b9) & 0xffff_ffff;
                    if !sweep && k != key {
                        continue;
                    }
                    let want = model.get(&k).and_then(|v| {
                        v.iter().copied().reduce(|a, b| if b.beats(&a) { b } else { a })
                    });
                    prop_assert_eq!(t.lookup_packed(&[k]), want);
                    prop_assert_eq!(t.probe_from(t.home_of(&[k]), &[k]), want, "the split probe");
                    prop_assert_eq!(t.probe_from(0, &[k, 0]), None, "not its width");
                }
                let want_max = model.values().flatten().map(|h| h.priority).max().unwrap_or(0);
                prop_assert_eq!(t.max_priority(), want_max);
            }
        }
    }

    #[test]
    fn insert_group_remove_and_grow() {
        let mut t = Subtable::new(vec![(34, 0xfffff)]);
        for i in 0..1000u64 {
            t.insert(&[i], hit(i, (i % 7) as u16));
        }
        assert_eq!(t.len(), 1000);
        assert_eq!(t.max_priority(), 6);
        for i in 0..1000u64 {
            assert_eq!(t.lookup_packed(&[i]), Some(hit(i, (i % 7) as u16)));
        }
        assert_eq!(t.lookup_packed(&[5000]), None);
        // Same key, different rules: best = highest priority, then smallest id.
        t.insert(&[3], hit(2000, 3));
        t.insert(&[3], hit(2001, 9));
        t.insert(&[3], hit(1, 9));
        assert_eq!(t.lookup_packed(&[3]), Some(hit(1, 9)));
        assert_eq!(t.max_priority(), 9);
        assert!(t.remove(&[3], 1, 9));
        assert_eq!(t.lookup_packed(&[3]), Some(hit(2001, 9)));
        assert!(t.remove(&[3], 2001, 9));
        assert!(!t.remove(&[3], 2001, 9));
        assert_eq!(t.max_priority(), 6);
        assert_eq!(
            t.lookup_packed(&[3]),
            Some(hit(3, 3)),
            "tie at 3: id 3 < 2000"
        );
        for i in (0..1000u64).step_by(2) {
            assert!(t.remove(&[i], i, (i % 7) as u16), "{i}");
        }
        for i in 0..1000u64 {
            let want = (i % 2 == 1).then(|| hit(i, (i % 7) as u16));
            assert_eq!(t.lookup_packed(&[i]), want, "{i}");
        }
    }
}
