//! IPv4 longest-prefix match (DIR-24-8) for route-shaped rules.
//!
//! # Structure
//!
//! The engine holds rules of one shape: an `IPV4_DST` prefix of length
//! 1..=32 plus a fixed set of extra fields (`extra`, the same for every
//! route, typically `ETH_TYPE=0x0800`), checked once per lookup.
//!
//! - `tbl24`: 2^24 entries (64 MiB of address space, allocated zeroed so
//!   untouched pages cost nothing), indexed by the top 24 address bits.
//!   From `HUGE_FROM_RULES` rules on it is moved once into huge pages
//!   ([`packet::huge`]; a lookup's TLB miss was a nested page walk in a
//!   VM); below that it stays sparse, since a 2 MiB page is zeroed whole
//!   for the first route written into it (a small table rebuilt for
//!   each published copy would zero 64 MiB every flow-mod).
//! - `tbl8`: groups of 256 entries for the /24s that hold a longer prefix,
//!   indexed by the low 8 bits.
//!
//! An entry is a `u32`: bit 31 valid, bit 30 "points at a tbl8 group",
//! bits 24..30 the prefix length that wrote it, bits 0..24 the route (or
//! group) number. A lookup reads one tbl24 entry, one tbl8 entry when the
//! /24 is split, and the route's best rule: at most three dependent loads,
//! the first two prefetched across a burst.
//!
//! A route is one distinct prefix; rules with the same prefix share it
//! (`members`), and `best[route]` is their best (highest priority, then
//! smallest id). `by_len[l]` maps each prefix of length `l` to its route;
//! it is what a removal consults to find the covering prefix that takes
//! the freed entries back.
//!
//! # Invariants
//!
//! - Every entry holds the longest route covering its addresses, with the
//!   route's length in its depth bits (0 and invalid when none covers).
//! - A tbl8 group exists only while some entry in it differs from the
//!   others or has depth > 24; a group whose 256 entries are equal with
//!   depth <= 24 is folded back into its tbl24 entry.
//! - Priorities agree with prefix order: every rule of length `l` has a
//!   priority strictly above every rule of any shorter length and strictly
//!   below every rule of any longer one. `try_insert` refuses a rule that
//!   would break this (the table then puts it in tuple-space search), so
//!   the longest matching prefix always carries the highest priority.
//!
//! # Why
//!
//! Routing tables are many prefixes of a few dozen lengths; tuple-space
//! search would probe up to 32 subtables per packet. DIR-24-8 answers in
//! one or two loads for any number of routes, with updates proportional
//! to the address range a prefix covers (a /8 rewrites 65536 entries; a
//! /24 or longer one, one to 256). Figures are in the crate's top comment.

use crate::key::field_value;
use crate::rule::{FieldMatch, Hit, Rule};
use crate::subtable::prefetch;
use packet::flow_key::{field, FlowKey};
use packet::huge::HugeVec;
use std::borrow::Borrow;
use std::collections::BTreeMap;

const VALID: u32 = 1 << 31;
const GROUP: u32 = 1 << 30;
const IDX: u32 = (1 << 24) - 1;
const BURST: usize = 32;

#[inline]
fn depth(e: u32) -> u32 {
    (e >> 24) & 0x3f
}

#[inline]
fn entry(route: u32, len: u32) -> u32 {
    VALID | (len << 24) | route
}

/// The prefix length of an IPv4 mask, if it is a prefix mask of 1..=32.
fn prefix_len(mask: u128) -> Option<u32> {
    let m = u32::try_from(mask).ok()?;
    let len = m.leading_ones();
    (len >= 1 && m == u32::MAX << (32 - len)).then_some(len)
}

#[inline]
fn net(addr: u32, len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        addr & (u32::MAX << (32 - len))
    }
}

/// Rules from which tbl24 lives in huge pages. The pipeline's tables of
/// fewer entries (`REBUILD_INDEX_BELOW`, 16384) rebuild their index for
/// each published copy, so their tbl24 stays sparse; bigger ones are
/// copied whole, every page of the 64 MiB written anyway.
const HUGE_FROM_RULES: usize = 16384;

/// tbl24's storage: zeroed and sparse, or (from [`HUGE_FROM_RULES`]
/// routes on) a copy in huge pages. Reads and writes go through `Deref`.
#[derive(Clone, Debug)]
enum Tbl24 {
    Sparse(Vec<u32>),
    Huge(HugeVec<u32>),
}

impl Default for Tbl24 {
    fn default() -> Self {
        Tbl24::Sparse(Vec::new())
    }
}

impl Tbl24 {
    /// Moves the table into huge pages (once; one 64 MiB copy).
    fn make_huge(&mut self) {
        if let Tbl24::Sparse(v) = self {
            *self = Tbl24::Huge(HugeVec::from_slice(v));
        }
    }
}

impl std::ops::Deref for Tbl24 {
    type Target = Vec<u32>;
    fn deref(&self) -> &Vec<u32> {
        match self {
            Tbl24::Sparse(v) => v,
            Tbl24::Huge(h) => h,
        }
    }
}

impl std::ops::DerefMut for Tbl24 {
    fn deref_mut(&mut self) -> &mut Vec<u32> {
        match self {
            Tbl24::Sparse(v) => v,
            Tbl24::Huge(h) => h,
        }
    }
}

/// The IPv4 route engine. Empty until its first route.
#[derive(Clone, Debug, Default)]
pub struct Lpm {
    extra: Vec<FieldMatch>,
    required: u64,
    tbl24: Tbl24,
    tbl8: HugeVec<u32>,
    free8: Vec<u32>,
    best: Vec<Hit>,
    members: Vec<Vec<Hit>>,
    free_routes: Vec<u32>,
    by_len: Vec<crate::fast_hash::FastMap<u32, u32>>,
    prios: Vec<BTreeMap<u16, u32>>,
    count: usize,
}

impl Lpm {
    /// Number of rules held.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no rule is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Heap bytes held (tbl24 counted whole, though pages never written
    /// are not resident).
    pub fn heap_bytes(&self) -> usize {
        (self.tbl24.capacity() + self.tbl8.capacity()) * 4
            + self.best.capacity() * 16
            + self
                .members
                .iter()
                .map(|m| m.capacity() * 16 + 24)
                .sum::<usize>()
    }

    /// The prefix (network, length) and extra fields of a route-shaped
    /// rule.
    fn shape(rule: &Rule) -> Option<(u32, u32, Vec<FieldMatch>)> {
        let mut pfx = None;
        let mut extra = Vec::new();
        for f in &rule.fields {
            if f.field == field::IPV4_DST {
                let len = prefix_len(f.mask)?;
                pfx = Some((net(f.value as u32, len), len));
            } else {
                extra.push(*f);
            }
        }
        pfx.map(|(p, l)| (p, l, extra))
    }

    fn prio_fits(&self, len: u32, p: u16) -> bool {
        self.prios.iter().enumerate().all(|(l, m)| {
            let l = l as u32;
            if l < len {
                m.keys().next_back().is_none_or(|&mx| mx < p)
            } else if l > len {
                m.keys().next().is_none_or(|&mn| mn > p)
            } else {
                true
            }
        })
    }

    /// Adds `rule` (canonical) when it is route shaped, matches the
    /// engine's extra fields (any, when empty) and keeps priorities in
    /// prefix order. False, and nothing changed, otherwise.
    pub fn try_insert(&mut self, rule: &Rule) -> bool {
        let Some((pfx, len, extra)) = Self::shape(rule) else {
            return false;
        };
        if self.count == 0 {
            self.extra = extra;
            self.required = self
                .extra
                .iter()
                .fold(1u64 << field::IPV4_DST, |a, f| a | (1u64 << f.field));
            if self.tbl24.is_empty() {
                self.tbl24 = Tbl24::Sparse(vec![0; 1 << 24]);
                self.by_len = vec![crate::fast_hash::FastMap::default(); 33];
                self.prios = vec![BTreeMap::new(); 33];
            }
        } else if extra != self.extra {
            return false;
        }
        if !self.prio_fits(len, rule.priority) {
            return false;
        }
        let hit = rule.hit();
        let Some(map) = self.by_len.get_mut(len as usize) else {
            return false;
        };
        if let Some(&r) = map.get(&pfx) {
            let r = r as usize;
            if let (Some(m), Some(b)) = (self.members.get_mut(r), self.best.get_mut(r)) {
                m.push(hit);
                if hit.beats(b) {
                    *b = hit;
                }
            }
        } else {
            let r = match self.free_routes.pop() {
                Some(r) => r,
                None => {
                    if self.best.len() >= IDX as usize || self.tbl8.len() >= (IDX as usize) << 8 {
                        return false;
                    }
                    self.best.push(hit);
                    self.members.push(Vec::new());
                    (self.best.len() - 1) as u32
                }
            };
            self.best[r as usize] = hit;
            self.members[r as usize] = vec![hit];
            map.insert(pfx, r);
            self.write(pfx, len, entry(r, len), |d| d <= len);
        }
        *self.prios[len as usize].entry(rule.priority).or_insert(0) += 1;
        self.count += 1;
        if self.count >= HUGE_FROM_RULES {
            self.tbl24.make_huge();
        }
        true
    }

    /// The route (index into `members`) of `rule`, its prefix and length,
    /// and its place among the route's members, when `rule` (canonical)
    /// is held here exactly: same prefix, extra fields, id and priority.
    fn find(&self, rule: &Rule) -> Option<(usize, u32, u32, usize)> {
        if self.count == 0 {
            return None;
        }
        let (pfx, len, extra) = Self::shape(rule)?;
        if extra != self.extra {
            return None;
        }
        let r = *self.by_len.get(len as usize)?.get(&pfx)? as usize;
        let pos = self.members.get(r)?.iter().position(|h| *h == rule.hit())?;
        Some((r, pfx, len, pos))
    }

    /// True when `rule` (canonical) is held here.
    pub fn contains(&self, rule: &Rule) -> bool {
        self.find(rule).is_some()
    }

    /// Appends every rule held (canonical form) to `out`.
    pub fn rules_into(&self, out: &mut Vec<Rule>) {
        for (len, map) in self.by_len.iter().enumerate() {
            let len = len as u32;
            for (&pfx, &r) in map {
                let mut fields = self.extra.clone();
                fields.push(FieldMatch {
                    field: field::IPV4_DST,
                    value: pfx.into(),
                    mask: (u32::MAX << (32 - len)).into(),
                });
                fields.sort();
                for h in self.members.get(r as usize).into_iter().flatten() {
                    out.push(Rule {
                        id: h.id,
                        priority: h.priority,
                        fields: fields.clone(),
                    });
                }
            }
        }
    }

    /// Removes `rule` (canonical). False, and nothing changed, when it is
    /// not held here exactly (see [`Lpm::contains`]).
    pub fn remove(&mut self, rule: &Rule) -> bool {
        let Some((ri, pfx, len, pos)) = self.find(rule) else {
            return false;
        };
        let r = ri as u32;
        let Some(m) = self.members.get_mut(ri) else {
            return false;
        };
        m.swap_remove(pos);
        if let Some(c) = self.prios[len as usize].get_mut(&rule.priority) {
            *c -= 1;
            if *c == 0 {
                self.prios[len as usize].remove(&rule.priority);
            }
        }
        self.count -= 1;
        if let Some(first) = m.first().copied() {
            let b = m
                .iter()
                .fold(first, |b, h| if h.beats(&b) { *h } else { b });
            self.best[ri] = b;
            return true;
        }
        // Last rule of the route: give its addresses to the covering route.
        self.by_len[len as usize].remove(&pfx);
        self.free_routes.push(r);
        let mut rep = 0;
        for l in (1..len).rev() {
            if let Some(&c) = self.by_len[l as usize].get(&net(pfx, l)) {
                rep = entry(c, l);
                break;
            }
        }
        self.write(pfx, len, rep, |d| d == len);
        if self.count == 0 {
            self.extra.clear();
        }
        true
    }

    /// Writes `e` into every entry of `pfx/len` whose depth passes `take`,
    /// creating or folding tbl8 groups as needed.
    fn write(&mut self, pfx: u32, len: u32, e: u32, take: impl Fn(u32) -> bool) {
        if len <= 24 {
            let base = (pfx >> 8) as usize;
            for i in base..base + (1usize << (24 - len)) {
                let cur = self.tbl24[i];
                if cur & GROUP != 0 {
                    let g = ((cur & IDX) as usize) << 8;
                    for x in &mut self.tbl8[g..g + 256] {
                        if take(depth(*x)) {
                            *x = e;
                        }
                    }
                    self.fold(i);
                } else if take(depth(cur)) {
                    self.tbl24[i] = e;
                }
            }
        } else {
            let i = (pfx >> 8) as usize;
            let cur = self.tbl24[i];
            let g = if cur & GROUP != 0 {
                cur & IDX
            } else {
                let g = match self.free8.pop() {
                    Some(g) => {
                        let b = (g as usize) << 8;
                        self.tbl8[b..b + 256].fill(cur);
                        g
                    }
                    None => {
                        let g = (self.tbl8.len() >> 8) as u32;
                        let n = self.tbl8.len() + 256;
                        self.tbl8.grow(n, cur);
                        g
                    }
                };
                self.tbl24[i] = VALID | GROUP | g;
                g
            };
            let b = ((g as usize) << 8) + (pfx & 0xff) as usize;
            for x in &mut self.tbl8[b..b + (1usize << (32 - len))] {
                if take(depth(*x)) {
                    *x = e;
                }
            }
            self.fold(i);
        }
    }

    /// Folds the tbl8 group behind `tbl24[i]` back when it is uniform.
    fn fold(&mut self, i: usize) {
        let cur = self.tbl24[i];
        if cur & GROUP == 0 {
            return;
        }
        let g = (cur & IDX) as usize;
        let grp = &self.tbl8[g << 8..(g << 8) + 256];
        let first = grp[0];
        if depth(first) <= 24 && grp.iter().all(|&x| x == first) {
            self.tbl24[i] = first;
            self.free8.push(g as u32);
        }
    }

    #[inline]
    fn extra_match(&self, k: &FlowKey) -> bool {
        k.present & self.required == self.required
            && self
                .extra
                .iter()
                .all(|f| field_value(k, f.field) & f.mask == f.value)
    }

    #[inline]
    fn resolve(&self, mut e: u32, addr: u32) -> Option<Hit> {
        if e & GROUP != 0 {
            e = self
                .tbl8
                .get(self.tbl8_index(e, addr))
                .copied()
                .unwrap_or(0);
        }
        self.best_of(e).copied()
    }

    /// The best route rule for `k`.
    #[inline]
    pub fn lookup(&self, k: &FlowKey) -> Option<Hit> {
        if !self.extra_match(k) {
            return None;
        }
        let a = k.ipv4_dst;
        let e = self.tbl24.get((a >> 8) as usize).copied().unwrap_or(0);
        self.resolve(e, a)
    }

    /// [`Lpm::lookup`] for every key, in passes over each burst so that
    /// its loads overlap instead of stalling key by key: the tbl24
    /// entries are prefetched, then read (prefetching the tbl8 entry or
    /// the route they name), then the tbl8 entries read (prefetching their
    /// routes), then the routes read.
    ///
    /// `fulmar bench l3 --rules 100000 --seconds 3`, same minutes: with
    /// only tbl24 prefetched, 33 % of this function's samples waited on
    /// the route and 20 % on the tbl8 entry.
    pub fn lookup_burst<K: Borrow<FlowKey>>(&self, keys: &[K], out: &mut [Option<Hit>]) {
        let mut addr = [None; BURST];
        for (kc, oc) in keys.chunks(BURST).zip(out.chunks_mut(BURST)) {
            for (a, k) in addr.iter_mut().zip(kc) {
                let k = k.borrow();
                *a = self.extra_match(k).then_some(k.ipv4_dst);
            }
            self.lookup_chunk(&addr[..kc.len()], oc);
        }
    }

    /// True when a frame's IPv4 destination alone decides what it hits:
    /// the engine's extra fields are at most `ETH_TYPE` = IPv4 (what
    /// every route's prerequisite adds), so every frame whose key has
    /// IPv4 addresses passes them.
    pub fn needs_only_ipv4_dst(&self) -> bool {
        self.extra.iter().all(|f| {
            f.field == field::ETH_TYPE
                && f.value == u128::from(packet::ethernet::ethertype::IPV4)
                && f.mask == 0xffff
        })
    }

    /// [`Lpm::lookup_burst`] for IPv4 destinations known to pass the
    /// extra fields (see [`Lpm::needs_only_ipv4_dst`]): `out[i]` for
    /// `addrs[i]`, `None` in and out for a frame that cannot match.
    pub fn lookup_burst_addrs(&self, addrs: &[Option<u32>], out: &mut [Option<Hit>]) {
        for (ac, oc) in addrs.chunks(BURST).zip(out.chunks_mut(BURST)) {
            self.lookup_chunk(ac, oc);
        }
    }

    /// The burst lookup's passes over at most [`BURST`] addresses
    /// (`None`: cannot match).
    #[inline]
    fn lookup_chunk(&self, addrs: &[Option<u32>], out: &mut [Option<Hit>]) {
        // Per address: 0 when it cannot match, else its tbl24 entry,
        // then its final entry.
        let mut ent = [0u32; BURST];
        for (e, a) in ent.iter_mut().zip(addrs) {
            *e = 0;
            if let Some(x) = a.and_then(|a| self.tbl24.get((a >> 8) as usize)) {
                prefetch(x);
                *e = VALID;
            }
        }
        let n = addrs.len().min(BURST);
        for (e, a) in ent.iter_mut().zip(addrs).take(n) {
            let (true, Some(a)) = (*e != 0, *a) else {
                continue;
            };
            *e = self.tbl24.get((a >> 8) as usize).copied().unwrap_or(0);
            if *e & GROUP != 0 {
                if let Some(x) = self.tbl8.get(self.tbl8_index(*e, a)) {
                    prefetch(x);
                }
            } else if let Some(b) = self.best_of(*e) {
                prefetch(b);
            }
        }
        for (e, a) in ent.iter_mut().zip(addrs).take(n) {
            if let (true, Some(a)) = (*e & GROUP != 0, *a) {
                *e = self.tbl8.get(self.tbl8_index(*e, a)).copied().unwrap_or(0);
                if let Some(b) = self.best_of(*e) {
                    prefetch(b);
                }
            }
        }
        for (e, o) in ent.iter().zip(out.iter_mut()).take(n) {
            *o = self.best_of(*e).copied();
        }
    }

    /// Where in tbl8 the address `addr` of tbl24 group entry `e` is.
    #[inline]
    fn tbl8_index(&self, e: u32, addr: u32) -> usize {
        (((e & IDX) as usize) << 8) | (addr & 0xff) as usize
    }

    /// The route a final (not group) entry names, if it is valid.
    #[inline]
    fn best_of(&self, e: u32) -> Option<&Hit> {
        if e & VALID == 0 || e & GROUP != 0 {
            return None;
        }
        self.best.get((e & IDX) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(id: u64, p: u32, len: u32) -> Rule {
        Rule {
            id,
            priority: len as u16,
            fields: vec![
                FieldMatch {
                    field: field::ETH_TYPE,
                    value: 0x800,
                    mask: 0xffff,
                },
                FieldMatch {
                    field: field::IPV4_DST,
                    value: p.into(),
                    mask: (u32::MAX << (32 - len)).into(),
                },
            ],
        }
    }

    fn pkt(a: u32) -> FlowKey {
        FlowKey {
            present: (1 << field::ETH_TYPE) | (1 << field::IPV4_DST),
            eth_type: 0x800,
            ipv4_dst: a,
            ..Default::default()
        }
    }

    #[test]
    fn tbl24_moves_to_huge_pages_only_for_big_tables() {
        let mut l = Lpm::default();
        let n = HUGE_FROM_RULES as u32;
        for i in 0..n - 1 {
            assert!(l.try_insert(&route(u64::from(i), (i * 977) << 8, 24)));
        }
        assert!(matches!(l.tbl24, Tbl24::Sparse(_)));
        let before = l.clone();
        assert!(l.try_insert(&route(u64::from(n), 0x0a01_0180, 25)));
        assert!(matches!(l.tbl24, Tbl24::Huge(_)));
        // The move changed no entry; a clone of a big table stays huge.
        let id = |l: &Lpm, a| l.lookup(&pkt(a)).map(|h| h.id);
        for i in (0..n - 1).step_by(97) {
            assert_eq!(id(&l, (i * 977) << 8 | 5), Some(u64::from(i)));
            assert_eq!(id(&before, (i * 977) << 8 | 5), Some(u64::from(i)));
        }
        assert_eq!(id(&l, 0x0a01_0181), Some(u64::from(n)));
        assert!(matches!(l.clone().tbl24, Tbl24::Huge(_)));
    }

    #[test]
    fn nested_prefixes_insert_and_remove() {
        let mut l = Lpm::default();
        let rs = [
            route(1, 0x0a00_0000, 8),
            route(2, 0x0a01_0000, 16),
            route(3, 0x0a01_0100, 24),
            route(4, 0x0a01_0180, 25),
            route(5, 0x0a01_0181, 32),
        ];
        for r in &rs {
            assert!(l.try_insert(r));
        }
        let id = |l: &Lpm, a| l.lookup(&pkt(a)).map(|h| h.id);
        assert_eq!(id(&l, 0x0a01_0181), Some(5));
        assert_eq!(id(&l, 0x0a01_0182), Some(4));
        assert_eq!(id(&l, 0x0a01_0101), Some(3));
        assert_eq!(id(&l, 0x0a01_0201), Some(2));
        assert_eq!(id(&l, 0x0a02_0000), Some(1));
        assert_eq!(id(&l, 0x0b00_0000), None);
        // Priority against prefix order is refused.
        let mut bad = route(9, 0x0a01_0100, 28);
        bad.priority = 3;
        assert!(!l.try_insert(&bad));
        // Different extra fields are refused.
        let mut other = route(10, 0x0c00_0000, 8);
        other.fields[0].value = 0x86dd;
        assert!(!l.try_insert(&other));
        l.remove(&rs[3]);
        assert_eq!(id(&l, 0x0a01_0182), Some(3));
        assert_eq!(id(&l, 0x0a01_0181), Some(5));
        l.remove(&rs[4]);
        assert_eq!(id(&l, 0x0a01_0181), Some(3));
        assert!(l.free8.len() == 1, "group folded back");
        l.remove(&rs[1]);
        assert_eq!(id(&l, 0x0a01_0201), Some(1));
        assert_eq!(id(&l, 0x0a01_0101), Some(3));
        let mut np = pkt(0x0a01_0101);
        np.present &= !(1 << field::ETH_TYPE);
        assert_eq!(l.lookup(&np), None, "extra field absent");
        let mut out = [None; 3];
        l.lookup_burst(
            &[pkt(0x0a01_0101), pkt(0x0a05_0000), pkt(0x0b00_0000)],
            &mut out,
        );
        assert_eq!(out.map(|h| h.map(|h| h.id)), [Some(3), Some(1), None]);
    }
}
