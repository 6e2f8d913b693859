//! A fast non-cryptographic hasher for the control side's internal maps
//! (rule ids, flow ids, canonical matches, masks): keys that come from the
//! switch's own data or from the controller, which is trusted to program
//! the switch anyway, so HashDoS resistance buys nothing there. std's
//! SipHash was the largest single item of a 1M flow-mod bulk install
//! (about 13% of the time, `perf record` of `flowmod_rate 1000000`).
//!
//! Mixing: each word is folded in with a multiply and a rotate (the
//! FxHash step), and `finish` runs the splitmix64 finalizer so that the
//! low bits (bucket index) and high bits (hashbrown's tag) both depend on
//! every input bit — sequential ids must not land in neighbouring tags.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher; see the module comment.
#[derive(Clone, Copy, Default, Debug)]
pub struct FastHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl FastHasher {
    #[inline(always)]
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// `BuildHasher` of [`FastHasher`].
pub type FastBuild = BuildHasherDefault<FastHasher>;
/// A `HashMap` with [`FastHasher`]; make one with `FastMap::default()`.
pub type FastMap<K, V> = HashMap<K, V, FastBuild>;
/// A `HashSet` with [`FastHasher`].
pub type FastSet<K> = HashSet<K, FastBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn h<T: Hash>(t: &T) -> u64 {
        FastBuild::default().hash_one(t)
    }

    #[test]
    fn equal_keys_hash_equal_and_neighbours_differ() {
        assert_eq!(h(&(7u16, vec![1u128, 2])), h(&(7u16, vec![1u128, 2])));
        assert_ne!(h(&1u64), h(&2u64));
        assert_ne!(h(&vec![1u8, 2, 3]), h(&vec![1u8, 2, 3, 0]));
        assert_ne!(h(&(1u128 << 64)), h(&1u128));
    }

    #[test]
    fn sequential_ids_spread_over_tags_and_buckets() {
        // hashbrown takes the bucket from the low bits and a 7-bit tag
        // from the top: both must vary across sequential ids.
        let mut tags = HashSet::new();
        let mut low = HashSet::new();
        for i in 0u64..4096 {
            let x = h(&i);
            tags.insert(x >> 57);
            low.insert(x & 0xfff);
        }
        assert_eq!(tags.len(), 128);
        assert!(low.len() > 2400, "{} distinct low values", low.len());
    }

    #[test]
    fn map_works() {
        let mut m: FastMap<u64, u64> = FastMap::default();
        for i in 0..10_000 {
            m.insert(i, i * 2);
        }
        assert!((0..10_000).all(|i| m.get(&i) == Some(&(i * 2))));
    }
}
