//! [`FlowCache`]: a per-worker exact-match cache in front of the tables.
//!
//! # Structure
//!
//! A fixed array of `capacity` entries (a power of two), two-way set
//! associative: a key hashes to a pair of adjacent entries and may live
//! in either. An entry holds the full [`FlowKey`] (its presence bits and
//! every present field compared on every hit, never trusted on the hash
//! alone; absent fields cannot change a lookup's result), the caller's value
//! (e.g. the rule ids a multi-table walk hit and the actions to run) and
//! the generations of every table the value was computed from
//! ([`Deps`], at most [`MAX_DEPS`] tables).
//!
//! # Invalidation
//!
//! A hit is returned only when every recorded table generation still
//! equals the table's current one (the caller passes the current
//! generations as a slice indexed by table id). A flow-mod on table 3
//! thus silently retires only the entries that read table 3; nothing is
//! wiped, and a retired entry is overwritten by the next insert to its
//! set. Walks that touch more than [`MAX_DEPS`] tables are not cached.
//!
//! # Bounds
//!
//! Memory is `capacity` entries, allocated once; inserts replace within
//! the set (an empty or stale way first, else the way with the same key,
//! else the way chosen by one hash bit). Counters: hits, misses (absent),
//! stale (present but a generation moved: counted as a miss too),
//! inserts.

use crate::key::field_value;
use packet::flow_key::FlowKey;

/// Most tables one cached result may depend on.
pub const MAX_DEPS: usize = 8;

/// The tables (id and generation) a cached value was computed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deps {
    n: u8,
    t: [(u8, u64); MAX_DEPS],
}

impl Deps {
    /// No dependencies.
    pub fn new() -> Deps {
        Deps::default()
    }

    /// Records that the value read table `table` at `generation`. False
    /// when [`MAX_DEPS`] tables are already recorded (the value must then
    /// not be cached).
    pub fn push(&mut self, table: u8, generation: u64) -> bool {
        match self.t.get_mut(self.n as usize) {
            Some(s) => {
                *s = (table, generation);
                self.n += 1;
                true
            }
            None => false,
        }
    }

    /// The recorded (table, generation) pairs.
    pub fn as_slice(&self) -> &[(u8, u64)] {
        self.t.get(..self.n as usize).unwrap_or(&[])
    }

    /// True when every recorded generation equals `gens[table]`.
    #[inline]
    pub fn current(&self, gens: &[u64]) -> bool {
        self.as_slice()
            .iter()
            .all(|&(t, g)| gens.get(t as usize) == Some(&g))
    }
}

/// Counters of a [`FlowCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups not answered (absent or stale).
    pub misses: u64,
    /// Of the misses, those where the key was present but stale.
    pub stale: u64,
    /// Values stored.
    pub inserts: u64,
}

#[derive(Clone, Debug)]
struct Entry<V> {
    hash: u64,
    key: FlowKey,
    deps: Deps,
    value: V,
}

/// A bounded exact-match cache from a packet's [`FlowKey`] to `V`.
#[derive(Clone, Debug)]
pub struct FlowCache<V> {
    slots: Vec<Option<Entry<V>>>,
    mask: usize,
    stats: CacheStats,
}

/// Hash of the lookup-relevant part of a key: the presence bits and the
/// value of every present field (absent fields never influence a lookup,
/// and `FlowKey` keeps them zero). About ten fields for a TCP packet;
/// hashing the whole 208-byte key through `Hash` was measured 2x slower.
#[inline]
fn hash_key(k: &FlowKey) -> u64 {
    let mut h = k.present.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut bits = k.present & ((1u64 << 40) - 1);
    while bits != 0 {
        let f = bits.trailing_zeros() as u8;
        bits &= bits - 1;
        let v = field_value(k, f);
        h = (h ^ (v as u64) ^ ((v >> 64) as u64).rotate_left(17))
            .wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    h
}

/// Full comparison of the lookup-relevant part of two keys: same
/// presence bits and same value in every present field.
#[inline]
fn key_eq(a: &FlowKey, b: &FlowKey) -> bool {
    if a.present != b.present {
        return false;
    }
    let mut bits = a.present & ((1u64 << 40) - 1);
    while bits != 0 {
        let f = bits.trailing_zeros() as u8;
        bits &= bits - 1;
        if field_value(a, f) != field_value(b, f) {
            return false;
        }
    }
    true
}

impl<V> FlowCache<V> {
    /// A cache of `capacity` entries (rounded up to a power of two, at
    /// least 2).
    pub fn new(capacity: usize) -> FlowCache<V> {
        let cap = capacity.max(2).next_power_of_two();
        FlowCache {
            slots: (0..cap).map(|_| None).collect(),
            mask: cap - 1,
            stats: CacheStats::default(),
        }
    }

    /// Number of entries the cache can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Entries currently holding a value (current or stale).
    pub fn occupied(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    #[inline]
    fn set(&self, h: u64) -> usize {
        (h as usize & self.mask) & !1
    }

    /// The value cached for `key`, if present and every table it depends
    /// on still has the recorded generation (`gens[table_id]`).
    pub fn get(&mut self, key: &FlowKey, gens: &[u64]) -> Option<&V> {
        let h = hash_key(key);
        let s = self.set(h);
        let mut found = None;
        for i in [s, s + 1] {
            if let Some(Some(e)) = self.slots.get(i) {
                if e.hash == h && key_eq(&e.key, key) {
                    found = Some((i, e.deps.current(gens)));
                    break;
                }
            }
        }
        match found {
            Some((i, true)) => {
                self.stats.hits += 1;
                self.slots.get(i).and_then(Option::as_ref).map(|e| &e.value)
            }
            Some((_, false)) => {
                self.stats.misses += 1;
                self.stats.stale += 1;
                None
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Stores `value` for `key`, computed from the tables in `deps`.
    /// `gens` are the current generations, used to prefer evicting a
    /// stale entry.
    pub fn insert(&mut self, key: FlowKey, deps: Deps, value: V, gens: &[u64]) {
        let h = hash_key(&key);
        let s = self.set(h);
        let way = |e: &Option<Entry<V>>| match e {
            None => 0,
            Some(e) if e.hash == h && key_eq(&e.key, &key) => 0,
            Some(e) if !e.deps.current(gens) => 1,
            Some(_) => 2,
        };
        let w0 = self.slots.get(s).map_or(3, way);
        let w1 = self.slots.get(s + 1).map_or(3, way);
        let i = if w0 < w1 {
            s
        } else if w1 < w0 {
            s + 1
        } else {
            s + ((h >> 63) as usize)
        };
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = Some(Entry {
                hash: h,
                key,
                deps,
                value,
            });
            self.stats.inserts += 1;
        }
    }

    /// Drops every entry (counters kept).
    pub fn clear(&mut self) {
        for s in &mut self.slots {
            *s = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FieldMatch, Rule, Table};
    use packet::flow_key::field;

    fn pkt(port: u32) -> FlowKey {
        let mut k = FlowKey::default();
        k.set_metadata_fields(port, port, 0, 0);
        k
    }

    fn port_rule(id: u64, port: u32) -> Rule {
        Rule {
            id,
            priority: 1,
            fields: vec![FieldMatch {
                field: field::IN_PORT,
                value: port.into(),
                mask: 0xffff_ffff,
            }],
        }
    }

    #[test]
    fn stale_entries_never_returned() {
        let mut t0 = Table::new();
        let mut t1 = Table::new();
        t0.insert(port_rule(1, 1)).unwrap();
        t1.insert(port_rule(2, 1)).unwrap();
        let mut c: FlowCache<Vec<u64>> = FlowCache::new(64);
        let gens = |a: &Table, b: &Table| vec![a.generation(), b.generation()];
        let k = pkt(1);
        let walk = |a: &Table, b: &Table| {
            let mut d = Deps::new();
            assert!(d.push(0, a.generation()));
            assert!(d.push(1, b.generation()));
            let v: Vec<u64> = [a.lookup(&k), b.lookup(&k)]
                .iter()
                .flatten()
                .map(|h| h.id)
                .collect();
            (d, v)
        };
        let g = gens(&t0, &t1);
        assert!(c.get(&k, &g).is_none());
        let (d, v) = walk(&t0, &t1);
        c.insert(k, d, v, &g);
        assert_eq!(c.get(&k, &g), Some(&vec![1, 2]));
        // Unrelated key never hits.
        assert!(c.get(&pkt(2), &g).is_none());
        // A change in table 1 retires the entry.
        assert!(t1.replace(&port_rule(2, 1), port_rule(2, 9)).unwrap());
        let g = gens(&t0, &t1);
        assert!(c.get(&k, &g).is_none());
        assert_eq!(c.stats().stale, 1);
        let (d, v) = walk(&t0, &t1);
        c.insert(k, d, v, &g);
        assert_eq!(c.get(&k, &g), Some(&vec![1]));
        // A table the entry did not read does not retire it.
        let mut d = Deps::new();
        d.push(0, t0.generation());
        let other = pkt(7);
        c.insert(other, d, vec![42], &g);
        t1.insert(port_rule(3, 7)).unwrap();
        let g = gens(&t0, &t1);
        assert_eq!(c.get(&other, &g), Some(&vec![42]));
        assert!(c.get(&k, &g).is_none());
        let s = c.stats();
        assert_eq!(s.hits, 3);
        assert_eq!(s.misses, 4);
    }

    #[test]
    fn whole_key_compared() {
        let mut c: FlowCache<u32> = FlowCache::new(16);
        let a = pkt(1);
        c.insert(a, Deps::new(), 1, &[]);
        let mut b = a;
        b.present |= 1 << field::VLAN_VID; // same values, one more field present
        assert!(c.get(&b, &[]).is_none());
        let mut d = a;
        d.metadata = 5; // a present field differs
        assert!(c.get(&d, &[]).is_none());
        let mut e = a;
        e.ip_ttl = 9; // not a match field: same flow
        assert_eq!(c.get(&e, &[]), Some(&1));
        assert!(key_eq(&a, &e) && !key_eq(&a, &b) && !key_eq(&a, &d));
    }

    #[test]
    fn bounded_and_deps_limit() {
        let mut c: FlowCache<u32> = FlowCache::new(100);
        assert_eq!(c.capacity(), 128);
        for p in 0..10_000u32 {
            c.insert(pkt(p), Deps::new(), p, &[]);
        }
        assert!(c.occupied() <= 128);
        assert_eq!(c.stats().inserts, 10_000);
        // Whatever is still cached answers with its own value.
        let mut found = 0;
        for p in 0..10_000u32 {
            if let Some(&v) = c.get(&pkt(p), &[]) {
                assert_eq!(v, p);
                found += 1;
            }
        }
        assert!(found > 32 && found <= 128, "{found}");
        let mut d = Deps::new();
        for t in 0..MAX_DEPS as u8 {
            assert!(d.push(t, 0));
        }
        assert!(!d.push(99, 0));
        assert!(!d.current(&[0; 3]), "missing table means stale");
    }
}
