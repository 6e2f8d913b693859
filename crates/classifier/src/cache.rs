//! [`FlowCache`]: a per-worker exact-match cache in front of the tables.
//!
//! # Structure
//!
//! A fixed array of `capacity` entries (a power of two), two-way set
//! associative: a key hashes to a pair of adjacent entries and may live
//! in either. An entry holds the full key, packed (`Packed`: its presence bits and
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
    key: Packed,
    deps: Deps,
    value: V,
}

/// Words of [`Packed`].
const PACKED_WORDS: usize = 21;

/// Every OXM field of a [`FlowKey`] and its presence bits, packed into
/// words read straight from the key's fields (no per-field dispatch):
/// what the cache stores, hashes and compares. Equal packed forms mean
/// equal presence bits and equal values in every field, so equality is
/// exact for the lookup-relevant part; fields that are not match fields
/// (TTLs, lengths, flags) are left out, so packets of one flow share one
/// entry. Absent fields are zero in a parsed key; were one not, two keys
/// of one flow would merely miss each other (never a wrong hit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Packed([u64; PACKED_WORDS]);

impl Packed {
    #[inline]
    fn of(k: &FlowKey) -> Packed {
        let mac = |m: [u8; 6]| -> u64 {
            let mut b = [0u8; 8];
            b[2..].copy_from_slice(&m);
            u64::from_be_bytes(b)
        };
        let (b8, b16, b32) = (u64::from, u64::from, u64::from);
        let lo = |v: u128| v as u64;
        let hi = |v: u128| (v >> 64) as u64;
        Packed([
            k.present,
            b32(k.in_port) | b32(k.in_phy_port) << 32,
            k.metadata,
            k.tunnel_id,
            mac(k.eth_dst) | b16(k.eth_type) << 48,
            mac(k.eth_src) | b16(k.vlan_vid) << 48,
            b8(k.vlan_pcp)
                | b8(k.ip_dscp) << 8
                | b8(k.ip_ecn) << 16
                | b8(k.ip_proto) << 24
                | b8(k.icmp_type) << 32
                | b8(k.icmp_code) << 40
                | b16(k.arp_op) << 48,
            b32(k.ipv4_src) | b32(k.ipv4_dst) << 32,
            b16(k.tp_src) | b16(k.tp_dst) << 16 | b32(k.ipv6_flabel) << 32,
            b32(k.arp_spa) | b32(k.arp_tpa) << 32,
            mac(k.arp_sha) | b16(k.ipv6_exthdr) << 48,
            mac(k.arp_tha) | b8(k.mpls_tc) << 48 | b8(k.mpls_bos) << 56,
            lo(k.ipv6_src),
            hi(k.ipv6_src),
            lo(k.ipv6_dst),
            hi(k.ipv6_dst),
            lo(k.nd_target),
            hi(k.nd_target),
            mac(k.nd_sll),
            mac(k.nd_tll),
            b32(k.mpls_label) | b32(k.pbb_isid) << 32,
        ])
    }

    /// Hash of the packed form: four independent multiply-xor lanes (a
    /// single chain over 21 words was the longest part of a probe).
    #[inline]
    fn hash(&self) -> u64 {
        let mut lanes = [
            0x9e37_79b9_7f4a_7c15u64,
            0xbf58_476d_1ce4_e5b9,
            0x94d0_49bb_1331_11eb,
            0x2545_f491_4f6c_dd1d,
        ];
        for (i, &w) in self.0.iter().enumerate() {
            let l = &mut lanes[i % 4];
            // The rotation feeds the product's high bits (where a
            // multiply pushes a word's differences) back to the bottom.
            *l = (*l ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        }
        let [a, b, c, d] = lanes;
        // splitmix64's finalizer: every input bit reaches the low bits
        // that choose the set.
        let mut h = a ^ b.rotate_left(16) ^ c.rotate_left(32) ^ d.rotate_left(48);
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}

/// A bounded exact-match cache from a packet's [`FlowKey`] to `V`.
#[derive(Clone, Debug)]
pub struct FlowCache<V> {
    slots: Vec<Option<Entry<V>>>,
    /// Each slot's key hash (0 when empty), beside the entries: a probe
    /// reads this dense array (8 bytes a slot, 128 KiB for the default
    /// 16384) and touches an entry (about 320 bytes) only when its hash
    /// matches, so a miss costs no entry's cache lines.
    tags: Vec<u64>,
    mask: usize,
    stats: CacheStats,
}

impl<V> FlowCache<V> {
    /// A cache of `capacity` entries (rounded up to a power of two, at
    /// least 2).
    pub fn new(capacity: usize) -> FlowCache<V> {
        let cap = capacity.max(2).next_power_of_two();
        FlowCache {
            slots: (0..cap).map(|_| None).collect(),
            tags: vec![0; cap],
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
        let key = Packed::of(key);
        let h = key.hash();
        let s = self.set(h);
        let mut found = None;
        for i in [s, s + 1] {
            // (A tag of 0 is also an empty slot's: the entry decides.)
            if self.tags.get(i) != Some(&h) {
                continue;
            }
            if let Some(Some(e)) = self.slots.get(i) {
                if e.key == key {
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
        let key = Packed::of(&key);
        let h = key.hash();
        let s = self.set(h);
        let way = |i: usize| match self.slots.get(i) {
            None => 3,
            Some(None) => 0,
            Some(Some(e)) if self.tags.get(i) == Some(&h) && e.key == key => 0,
            Some(Some(e)) if !e.deps.current(gens) => 1,
            Some(Some(_)) => 2,
        };
        let (w0, w1) = (way(s), way(s + 1));
        let i = if w0 < w1 {
            s
        } else if w1 < w0 {
            s + 1
        } else {
            s + ((h >> 63) as usize)
        };
        if let (Some(slot), Some(tag)) = (self.slots.get_mut(i), self.tags.get_mut(i)) {
            *slot = Some(Entry { key, deps, value });
            *tag = h;
            self.stats.inserts += 1;
        }
    }

    /// Drops every entry (counters kept).
    pub fn clear(&mut self) {
        for s in &mut self.slots {
            *s = None;
        }
        self.tags.fill(0);
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

    /// The reference: same presence bits, same value in every present
    /// OXM field (what the cache must decide).
    fn key_eq(a: &FlowKey, b: &FlowKey) -> bool {
        a.present == b.present
            && (0..40u8)
                .filter(|&f| a.has(f))
                .all(|f| crate::key::field_value(a, f) == crate::key::field_value(b, f))
    }

    /// A key with every field present and each field's value 0 or 1 by
    /// the bits of `bits` (one bit per struct field, non-match fields
    /// included).
    fn key_of_bits(bits: u64) -> FlowKey {
        let b = |i: u32| ((bits >> i) & 1) as u8;
        let w = |i: u32| u32::from(b(i));
        FlowKey {
            present: (1u64 << 40) - 1,
            in_port: w(0),
            in_phy_port: w(1),
            metadata: w(2).into(),
            tunnel_id: w(3).into(),
            eth_dst: [0, 0, 0, 0, 0, b(4)],
            eth_src: [b(5), 0, 0, 0, 0, 0],
            eth_type: w(6) as u16,
            vlan_vid: w(7) as u16,
            vlan_pcp: b(8),
            ip_dscp: b(9),
            ip_ecn: b(10),
            ip_proto: b(11),
            ip_ttl: b(12),
            ipv4_src: w(13),
            ipv4_dst: w(14),
            tp_src: w(15) as u16,
            tp_dst: w(16) as u16,
            icmp_type: b(17),
            icmp_code: b(18),
            arp_op: w(19) as u16,
            arp_spa: w(20),
            arp_tpa: w(21),
            arp_sha: [0, 0, 0, b(22), 0, 0],
            arp_tha: [0, b(23), 0, 0, 0, 0],
            ipv6_src: u128::from(b(24)) << 100,
            ipv6_dst: u128::from(b(25)),
            ipv6_flabel: w(26),
            nd_target: u128::from(b(27)) << 64,
            nd_sll: [0, 0, b(28), 0, 0, 0],
            nd_tll: [0, 0, 0, 0, b(29), 0],
            mpls_label: w(30),
            mpls_tc: b(31),
            mpls_bos: b(32),
            mpls_ttl: b(33),
            pbb_isid: w(34),
            ipv6_exthdr: w(35) as u16,
            ..FlowKey::default()
        }
    }

    /// Keys that differ in one field only (high bits of a word included,
    /// such as the EtherType) spread over the sets: a weak mix once sent
    /// every EtherType of one flow to one set.
    #[test]
    fn one_field_apart_keys_spread_over_sets() {
        let c: FlowCache<u32> = FlowCache::new(16384);
        let mut k = key_of_bits(0);
        let mut sets = std::collections::HashSet::new();
        for t in 0..64u16 {
            k.eth_type = t << 8;
            sets.insert(c.set(Packed::of(&k).hash()));
        }
        assert!(sets.len() > 48, "{} sets for 64 EtherTypes", sets.len());
    }

    /// The packed form decides equality exactly as the field-by-field
    /// reference does, for keys differing in any field (match or not).
    #[test]
    fn packed_equality_is_key_equality() {
        let base = key_of_bits(0);
        for i in 0..36 {
            let k = key_of_bits(1 << i);
            assert_eq!(
                Packed::of(&base) == Packed::of(&k),
                key_eq(&base, &k),
                "struct field {i}"
            );
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let (a, b) = (key_of_bits(seed), key_of_bits(seed.rotate_left(29)));
            assert_eq!(Packed::of(&a) == Packed::of(&b), key_eq(&a, &b));
            if Packed::of(&a) == Packed::of(&b) {
                assert_eq!(Packed::of(&a).hash(), Packed::of(&b).hash());
            }
        }
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
