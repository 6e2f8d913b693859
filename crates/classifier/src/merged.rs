//! Tuple merging: the long tail of masks of a wildcard table (ACLs) in a
//! few hash tables with coarser masks, after TupleMerge (Daly, Liu and
//! Torng, "TupleMerge: Fast Software Packet Processing for Online Packet
//! Classification", IEEE/ACM ToN 2019).
//!
//! # Structure
//!
//! Plain tuple-space search needs one hash probe per distinct mask; a
//! ClassBench-acl1-like set of 10K rules has a few hundred masks, so a
//! miss-heavy lookup costs hundreds of probes. Here a
//! [`MergedTable`] has a mask `M` that may be *less specific* than the
//! masks of the rules it holds: a rule `R` may live in it when every field
//! of `M` is a field of `R` with `M`'s mask bits a subset of `R`'s. A
//! packet matching `R` then has the same masked key under `M` as `R`'s
//! values, so `R` is found in the bucket of that key; the bucket holds
//! every rule sharing it, sorted by priority (descending, then id
//! ascending), and each candidate is checked in full. The first full match
//! is the bucket's best.
//!
//! # Placement (online, as in TupleMerge)
//!
//! A new rule goes to the first existing table (in creation order) whose
//! mask it is compatible with and whose bucket for it has fewer than
//! [`BUCKET_LIMIT`] rules. Otherwise a table is created with the rule's
//! *relaxed* mask: IPv4/IPv6 address prefixes rounded down to a multiple
//! of 8 (IPv4) or 16 (IPv6) bits, transport ports kept only when exact,
//! every other field kept. If that table exists already (its bucket being
//! full), the rule's exact mask is used instead; if that exists too the
//! rule joins it regardless of the limit (same exact mask and same key
//! means an identical match, differing only in priority or id).
//!
//! # Invariants
//!
//! - Every rule is in exactly one bucket of exactly one table, the one
//!   `location` names; its table's mask is compatible with its own.
//! - Buckets are sorted by (priority desc, id asc), and never empty.
//! - `order` lists live tables by descending maximum priority; a lookup
//!   stops when the best hit so far outranks the next table's maximum.

use crate::key::{field_value, Layout, BURST_WORDS};
use crate::rule::{FieldMatch, Hit, Rule};
use packet::flow_key::{field, FlowKey};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// Bucket size above which a compatible table is not used for a new rule.
pub const BUCKET_LIMIT: usize = 16;

/// Word hasher for packed keys (keys come from the table's own rules and
/// packets; the mixing is the same as the subtables').
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^ (h >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 ^= self.0 >> 29;
    }
    fn write_usize(&mut self, w: usize) {
        self.write_u64(w as u64);
    }
}

type Buckets = HashMap<Box<[u64]>, Vec<Cand>, BuildHasherDefault<WordHasher>>;

#[derive(Clone, Debug)]
struct Cand {
    hit: Hit,
    fields: Box<[FieldMatch]>,
}

impl Cand {
    #[inline]
    fn matches(&self, k: &FlowKey) -> bool {
        self.fields
            .iter()
            .all(|f| k.has(f.field) && field_value(k, f.field) & f.mask == f.value)
    }
}

/// One merged table: a mask and buckets of candidate rules.
#[derive(Clone, Debug)]
pub struct MergedTable {
    mask: Vec<(u8, u128)>,
    layout: Layout,
    buckets: Buckets,
    prios: BTreeMap<u16, u32>,
    max_prio: u16,
    rules: usize,
}

/// True when a table of mask `m` may hold a rule of mask `r` (both
/// sorted by field).
fn compatible(m: &[(u8, u128)], r: &[(u8, u128)]) -> bool {
    m.iter().all(|&(f, mm)| {
        r.iter()
            .find(|x| x.0 == f)
            .is_some_and(|&(_, rm)| rm & mm == mm)
    })
}

fn is_addr(f: u8) -> bool {
    matches!(
        f,
        field::IPV4_SRC | field::IPV4_DST | field::IPV6_SRC | field::IPV6_DST
    )
}

fn is_l4(f: u8) -> bool {
    matches!(
        f,
        field::IP_PROTO
            | field::TCP_SRC
            | field::TCP_DST
            | field::UDP_SRC
            | field::UDP_DST
            | field::SCTP_SRC
            | field::SCTP_DST
    )
}

/// The coarse mask tried first for a new table: one address field (the
/// destination when it has at least 16 prefix bits, else the source)
/// cut to 16 bits (IPv4) or 32 (IPv6), plus the rule's fields that are
/// neither addresses nor IP_PROTO/ports. None when no address field has
/// that many prefix bits.
fn relax_coarse(r: &[(u8, u128)]) -> Option<Vec<(u8, u128)>> {
    let plen = |f: u8, m: u128| -> u32 {
        if matches!(f, field::IPV4_SRC | field::IPV4_DST) {
            (m << 96).leading_ones().min(32)
        } else {
            m.leading_ones()
        }
    };
    let pick = [
        field::IPV4_DST,
        field::IPV6_DST,
        field::IPV4_SRC,
        field::IPV6_SRC,
    ]
    .into_iter()
    .find_map(|f| {
        r.iter().find(|x| x.0 == f).and_then(|&(f, m)| {
            let v4 = matches!(f, field::IPV4_SRC | field::IPV4_DST);
            let want = if v4 { 16 } else { 32 };
            (plen(f, m) >= want).then(|| {
                let mm = if v4 { 0xffff_0000u128 } else { u128::MAX << 96 };
                (f, mm)
            })
        })
    })?;
    let mut out: Vec<(u8, u128)> = r
        .iter()
        .copied()
        .filter(|&(f, _)| !is_addr(f) && !is_l4(f))
        .collect();
    out.push(pick);
    out.sort();
    Some(out)
}

/// The milder relaxed mask of a rule mask (see the module comment).
fn relax(r: &[(u8, u128)]) -> Vec<(u8, u128)> {
    let prefix = |m: u128, width: u32, step: u32| -> u128 {
        let full = if width == 128 {
            u128::MAX
        } else {
            (1u128 << width) - 1
        };
        let len = (m << (128 - width)).leading_ones().min(width);
        let len = len - len % step;
        if len == 0 {
            0
        } else {
            full & !full.checked_shr(len).unwrap_or(0)
        }
    };
    r.iter()
        .map(|&(f, m)| match f {
            field::IPV4_SRC | field::IPV4_DST => (f, prefix(m, 32, 8)),
            field::IPV6_SRC | field::IPV6_DST => (f, prefix(m, 128, 16)),
            field::TCP_SRC
            | field::TCP_DST
            | field::UDP_SRC
            | field::UDP_DST
            | field::SCTP_SRC
            | field::SCTP_DST => (f, if m == 0xffff { m } else { 0 }),
            _ => (f, m),
        })
        .filter(|&(_, m)| m != 0)
        .collect()
}

impl MergedTable {
    fn new(mask: Vec<(u8, u128)>) -> MergedTable {
        MergedTable {
            layout: Layout::new(&mask),
            mask,
            buckets: Buckets::default(),
            prios: BTreeMap::new(),
            max_prio: 0,
            rules: 0,
        }
    }

    fn key_of(&self, fields: &[FieldMatch]) -> Box<[u64]> {
        let mut key = vec![0u64; self.layout.words()];
        // Values under the table's (coarser) mask: pack_rule masks them.
        self.layout.pack_rule(fields, &mut key);
        key.into_boxed_slice()
    }

    fn bucket_len(&self, key: &[u64]) -> usize {
        self.buckets.get(key).map_or(0, Vec::len)
    }

    fn insert(&mut self, key: Box<[u64]>, c: Cand) {
        *self.prios.entry(c.hit.priority).or_insert(0) += 1;
        self.max_prio = self.prios.keys().next_back().copied().unwrap_or(0);
        self.rules += 1;
        let b = self.buckets.entry(key).or_default();
        let pos = b.partition_point(|x| x.hit.beats(&c.hit));
        b.insert(pos, c);
    }

    /// Removes `rule` (canonical) from the bucket `key`; false when it
    /// is not there with the same id, priority and fields.
    fn remove(&mut self, key: &[u64], rule: &Rule) -> bool {
        let Some(b) = self.buckets.get_mut(key) else {
            return false;
        };
        let Some(pos) = b
            .iter()
            .position(|x| x.hit == rule.hit() && *x.fields == *rule.fields)
        else {
            return false;
        };
        let priority = rule.priority;
        b.remove(pos);
        if b.is_empty() {
            self.buckets.remove(key);
        }
        if let Some(n) = self.prios.get_mut(&priority) {
            *n -= 1;
            if *n == 0 {
                self.prios.remove(&priority);
            }
        }
        self.max_prio = self.prios.keys().next_back().copied().unwrap_or(0);
        self.rules -= 1;
        true
    }

    #[inline]
    fn lookup(&self, k: &FlowKey, best: Option<Hit>) -> Option<Hit> {
        let mut buf = [0u64; BURST_WORDS];
        let mut long;
        let key: &mut [u64] = if self.layout.words() <= BURST_WORDS {
            &mut buf[..self.layout.words()]
        } else {
            long = vec![0u64; self.layout.words()];
            &mut long
        };
        if !self.layout.extract(k, key) {
            return None;
        }
        let b = self.buckets.get(&*key)?;
        for c in b {
            if best.is_some_and(|b| !c.hit.beats(&b)) {
                return None;
            }
            if c.matches(k) {
                return Some(c.hit);
            }
        }
        None
    }
}

/// The merged tables of one flow table.
#[derive(Clone, Debug, Default)]
pub struct Merged {
    tables: Vec<Option<MergedTable>>,
    free: Vec<usize>,
    by_mask: crate::fast_hash::FastMap<Vec<(u8, u128)>, usize>,
    order: Vec<usize>,
    location: crate::fast_hash::FastMap<u64, usize>,
}

impl Merged {
    /// Number of live merged tables.
    pub fn tables(&self) -> usize {
        self.order.len()
    }

    /// True when no rule is held.
    pub fn is_empty(&self) -> bool {
        self.location.is_empty()
    }

    fn resort(&mut self) {
        let t = &self.tables;
        let maxp = |i: &usize| t.get(*i).and_then(Option::as_ref).map_or(0, |t| t.max_prio);
        self.order
            .sort_by(|a, b| maxp(b).cmp(&maxp(a)).then(a.cmp(b)));
    }

    fn new_table(&mut self, mask: Vec<(u8, u128)>) -> usize {
        let t = MergedTable::new(mask.clone());
        let i = crate::put_in_slot(&mut self.tables, &mut self.free, t);
        self.by_mask.insert(mask, i);
        self.order.push(i);
        i
    }

    /// Adds a canonical rule (its id not already here).
    pub fn insert(&mut self, rule: &Rule, resort: bool) {
        let rmask: Vec<(u8, u128)> = rule.fields.iter().map(|f| (f.field, f.mask)).collect();
        let mut chosen = None;
        for (i, t) in self.tables.iter().enumerate() {
            let Some(t) = t else { continue };
            if compatible(&t.mask, &rmask) {
                let key = t.key_of(&rule.fields);
                if t.bucket_len(&key) < BUCKET_LIMIT {
                    chosen = Some((i, key));
                    break;
                }
            }
        }
        let (i, key) = match chosen {
            Some(c) => c,
            None => {
                let tries = [relax_coarse(&rmask), Some(relax(&rmask))];
                let fresh = tries
                    .into_iter()
                    .flatten()
                    .find(|m| !self.by_mask.contains_key(m));
                let i = match (fresh, self.by_mask.get(&rmask)) {
                    (Some(m), _) => self.new_table(m),
                    (None, None) => self.new_table(rmask),
                    (None, Some(&e)) => e,
                };
                let key = self.tables[i]
                    .as_ref()
                    .map(|t| t.key_of(&rule.fields))
                    .unwrap_or_default();
                (i, key)
            }
        };
        if let Some(t) = self.tables.get_mut(i).and_then(Option::as_mut) {
            let before = t.max_prio;
            t.insert(
                key,
                Cand {
                    hit: rule.hit(),
                    fields: rule.fields.clone().into_boxed_slice(),
                },
            );
            self.location.insert(rule.id, i);
            if resort && (t.max_prio != before || t.rules == 1) {
                self.resort();
            }
        }
    }

    /// True when `rule` (canonical) is held here: same id, priority and
    /// fields.
    pub fn contains(&self, rule: &Rule) -> bool {
        let Some(t) = self
            .location
            .get(&rule.id)
            .and_then(|&i| self.tables.get(i))
            .and_then(Option::as_ref)
        else {
            return false;
        };
        t.buckets.get(&t.key_of(&rule.fields)).is_some_and(|b| {
            b.iter()
                .any(|c| c.hit == rule.hit() && *c.fields == *rule.fields)
        })
    }

    /// Appends every rule held to `out`.
    pub fn rules_into(&self, out: &mut Vec<Rule>) {
        for t in self.tables.iter().flatten() {
            for c in t.buckets.values().flatten() {
                out.push(Rule {
                    id: c.hit.id,
                    priority: c.hit.priority,
                    fields: c.fields.to_vec(),
                });
            }
        }
    }

    /// Removes `rule` (canonical). False, and nothing changed, when it is
    /// not held here (see [`Merged::contains`]).
    pub fn remove(&mut self, rule: &Rule) -> bool {
        let Some(&i) = self.location.get(&rule.id) else {
            return false;
        };
        let Some(t) = self.tables.get_mut(i).and_then(Option::as_mut) else {
            return false;
        };
        let before = t.max_prio;
        let key = t.key_of(&rule.fields);
        if !t.remove(&key, rule) {
            return false;
        }
        self.location.remove(&rule.id);
        if t.rules == 0 {
            let mask = t.mask.clone();
            self.tables[i] = None;
            self.free.push(i);
            self.by_mask.remove(&mask);
            self.order.retain(|&x| x != i);
        } else if t.max_prio != before {
            self.resort();
        }
        true
    }

    /// Re-sorts tables after a batch of inserts made with `resort: false`.
    pub fn finish_batch(&mut self) {
        self.resort();
    }

    /// The best hit among `best` and this structure's rules.
    #[inline]
    pub fn lookup(&self, k: &FlowKey, mut best: Option<Hit>) -> Option<Hit> {
        for &i in &self.order {
            let Some(t) = self.tables.get(i).and_then(Option::as_ref) else {
                continue;
            };
            if best.is_some_and(|b| t.max_prio < b.priority) {
                break;
            }
            if let Some(h) = t.lookup(k, best) {
                best = Hit::best(best, Some(h));
            }
        }
        best
    }

    /// Heap bytes, roughly.
    pub fn heap_bytes(&self) -> usize {
        self.tables
            .iter()
            .flatten()
            .map(|t| {
                t.buckets
                    .values()
                    .map(|b| 64 + b.iter().map(|c| 40 + c.fields.len() * 48).sum::<usize>())
                    .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relax_and_compatible() {
        let r = vec![
            (field::ETH_TYPE, 0xffff),
            (field::IPV4_SRC, 0xffff_fff0),
            (field::IPV4_DST, 0xfe00_0000),
            (field::TCP_DST, 0xff00),
            (field::TCP_SRC, 0xffff),
        ];
        let x = relax(&r);
        assert_eq!(
            x,
            vec![
                (field::ETH_TYPE, 0xffff),
                (field::IPV4_SRC, 0xffff_ff00),
                (field::TCP_SRC, 0xffff),
            ]
        );
        assert!(compatible(&x, &r));
        assert!(!compatible(&r, &x));
        assert!(compatible(&[], &r));
        assert_eq!(
            relax(&[(field::IPV6_DST, u128::MAX << 8)]),
            vec![(field::IPV6_DST, u128::MAX << 16)]
        );
        assert_eq!(
            relax_coarse(&r),
            Some(vec![
                (field::ETH_TYPE, 0xffff),
                (field::IPV4_SRC, 0xffff_0000)
            ])
        );
        assert!(compatible(&relax_coarse(&r).unwrap(), &r));
        assert_eq!(relax_coarse(&[(field::IPV4_DST, 0xff00_0000)]), None);
    }
}
