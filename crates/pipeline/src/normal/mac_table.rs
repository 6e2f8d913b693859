//! The NORMAL switch's MAC learning table: (VLAN, MAC address) → port,
//! shared by every worker of a bridge, read and written without a lock
//! that anyone waits for.
//!
//! # Layout
//!
//! A fixed array of buckets chosen by a hash of the key, each of
//! [`WAYS`] slots. A slot holds the key (`1 << 63 | vlan << 48 | mac`; 0
//! is an empty slot), the port, the time the address was last seen, and
//! a sequence number that makes the three one unit:
//!
//! - a writer (a worker learning, or the control side flushing) claims a
//!   slot by moving its sequence from even to odd with one compare and
//!   swap, writes the fields, and publishes with the next even number
//!   (release). A worker that finds the slot claimed does not wait: it
//!   skips learning this frame (the next frame from the address learns
//!   it). The control side retries, yielding, until it gets the slot.
//! - a reader loads the sequence (acquire), the fields, and the sequence
//!   again behind an acquire fence; a slot whose sequence was odd or
//!   moved is treated as not matching (NORMAL floods the frame, which is
//!   always correct), so a reader never acts on a half-written entry.
//!
//! Every field is an atomic, so there is no `unsafe` and no data race in
//! the Rust sense; the sequence only keeps the fields of a slot
//! consistent with each other.
//!
//! # Learning, aging, size
//!
//! A source address already in its bucket on the same port is refreshed
//! at most once a second (a hit writes no cache line in between). A new
//! address takes an empty slot, else an expired one, else the oldest of
//! its bucket. Entries expire [`MacTable::aging`] after they were last
//! seen. The table holds at most its capacity (slots are never added);
//! when one address moves between ports, the slot that holds it is
//! updated in place. Two workers learning the same new address at the
//! same instant can give it two slots; lookups take the newest, and the
//! other ages out.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::model::time::Time;

/// Slots per bucket.
pub const WAYS: usize = 4;

/// Open vSwitch's default aging time (`mac-aging-time`).
pub const DEFAULT_AGING: Duration = Duration::from_secs(300);

/// Default capacity: entries one bridge learns at most.
pub const DEFAULT_CAPACITY: usize = 8192;

/// A refresh of a known address on the same port is written at most
/// this often.
const REFRESH_NS: u64 = 1_000_000_000;

#[derive(Debug, Default)]
struct Slot {
    seq: AtomicU32,
    port: AtomicU32,
    key: AtomicU64,
    seen: AtomicU64,
}

/// One consistent read of a slot.
#[derive(Clone, Copy, Debug)]
struct Read {
    seq: u32,
    key: u64,
    port: u32,
    seen: u64,
}

impl Slot {
    /// The slot's fields, or None while a writer holds it or when it
    /// changed under the read.
    #[inline]
    fn read(&self) -> Option<Read> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 != 0 {
            return None;
        }
        let key = self.key.load(Ordering::Relaxed);
        let port = self.port.load(Ordering::Relaxed);
        let seen = self.seen.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == seq).then_some(Read {
            seq,
            key,
            port,
            seen,
        })
    }

    /// Claims the slot if its sequence is still `seq` (even).
    #[inline]
    fn claim(&self, seq: u32) -> bool {
        self.seq
            .compare_exchange(
                seq,
                seq.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok_and(|_| {
                // Orders the odd sequence before the field stores, so a
                // reader that sees a new field sees the sequence move.
                fence(Ordering::Release);
                true
            })
    }

    /// Writes the fields of a slot claimed at `seq` and publishes them.
    #[inline]
    fn write(&self, seq: u32, key: u64, port: u32, seen: u64) {
        self.key.store(key, Ordering::Relaxed);
        self.port.store(port, Ordering::Relaxed);
        self.seen.store(seen, Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

/// One learnt address, as `fdb-show` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FdbEntry {
    /// The port it was last seen on.
    pub port: u32,
    /// Its VLAN.
    pub vlan: u16,
    /// The address.
    pub mac: [u8; 6],
    /// Seconds since it was last seen.
    pub age_secs: u64,
}

/// The learning table (see the module comment).
#[derive(Debug)]
pub struct MacTable {
    slots: Box<[Slot]>,
    /// Buckets − 1 (a power of two minus one).
    mask: usize,
    aging_ns: u64,
}

impl Default for MacTable {
    fn default() -> Self {
        MacTable::new(DEFAULT_CAPACITY, DEFAULT_AGING)
    }
}

#[inline]
fn key_of(vlan: u16, mac: [u8; 6]) -> u64 {
    let [a, b, c, d, e, f] = mac;
    1 << 63 | u64::from(vlan & 0xfff) << 48 | u64::from_be_bytes([0, 0, a, b, c, d, e, f])
}

#[inline]
fn unkey(key: u64) -> (u16, [u8; 6]) {
    let b = key.to_be_bytes();
    (
        ((key >> 48) & 0xfff) as u16,
        [b[2], b[3], b[4], b[5], b[6], b[7]],
    )
}

impl MacTable {
    /// A table of at least `capacity` entries (rounded up to a power of
    /// two of [`WAYS`]-slot buckets; at least one bucket) whose entries
    /// live `aging` after they were last seen.
    pub fn new(capacity: usize, aging: Duration) -> MacTable {
        let buckets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        MacTable {
            slots: (0..buckets * WAYS).map(|_| Slot::default()).collect(),
            mask: buckets - 1,
            aging_ns: u64::try_from(aging.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Entries the table can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// How long an entry lives unseen.
    pub fn aging(&self) -> Duration {
        Duration::from_nanos(self.aging_ns)
    }

    #[inline]
    fn bucket(&self, key: u64) -> &[Slot] {
        // A multiplicative hash of the key; the high bits pick the bucket.
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let b = (h >> 32) as usize & self.mask;
        &self.slots[b * WAYS..(b + 1) * WAYS]
    }

    #[inline]
    fn live(&self, seen: u64, now: Time) -> bool {
        now.0.saturating_sub(seen) < self.aging_ns
    }

    /// The port `mac` was last seen on in `vlan`, if that is within the
    /// aging time.
    #[inline]
    pub fn lookup(&self, vlan: u16, mac: [u8; 6], now: Time) -> Option<u32> {
        let key = key_of(vlan, mac);
        let mut best: Option<Read> = None;
        for s in self.bucket(key) {
            if let Some(r) = s.read().filter(|r| r.key == key && self.live(r.seen, now)) {
                if best.is_none_or(|b| r.seen > b.seen) {
                    best = Some(r);
                }
            }
        }
        best.map(|r| r.port)
    }

    /// Learns that `mac` in `vlan` is behind `port` now. Returns whether
    /// the table changed (false too when another writer held the slot).
    #[inline]
    pub fn learn(&self, vlan: u16, mac: [u8; 6], port: u32, now: Time) -> bool {
        let key = key_of(vlan, mac);
        let bucket = self.bucket(key);
        let mut victim: Option<(usize, Read)> = None;
        let mut found: Option<(usize, Read)> = None;
        for (i, s) in bucket.iter().enumerate() {
            let Some(r) = s.read() else { continue };
            if r.key == key {
                if found.is_none_or(|(_, f)| r.seen > f.seen) {
                    found = Some((i, r));
                }
                continue;
            }
            // Preference for a new address: empty, expired, oldest.
            let rank = |r: &Read| match r.key {
                0 => (0, 0),
                _ if !self.live(r.seen, now) => (1, r.seen),
                _ => (2, r.seen),
            };
            if victim.is_none_or(|(_, v)| rank(&r) < rank(&v)) {
                victim = Some((i, r));
            }
        }
        if let Some((i, r)) = found {
            if r.port == port && now.0.saturating_sub(r.seen) < REFRESH_NS {
                return false;
            }
            let s = &bucket[i];
            if !s.claim(r.seq) {
                return false;
            }
            s.write(r.seq, key, port, now.0);
            return true;
        }
        let Some((i, r)) = victim else { return false };
        let s = &bucket[i];
        if !s.claim(r.seq) {
            return false;
        }
        s.write(r.seq, key, port, now.0);
        true
    }

    /// Forgets the entries `f` picks (the control side: waits, yielding,
    /// for a slot a worker is writing). Returns how many went.
    pub fn forget(&self, mut f: impl FnMut(u16, [u8; 6], u32) -> bool) -> usize {
        let mut n = 0;
        for s in self.slots.iter() {
            loop {
                let seq = s.seq.load(Ordering::Acquire);
                if seq & 1 != 0 {
                    std::thread::yield_now();
                    continue;
                }
                let key = s.key.load(Ordering::Relaxed);
                let port = s.port.load(Ordering::Relaxed);
                if key == 0 {
                    break;
                }
                let (vlan, mac) = unkey(key);
                if !f(vlan, mac, port) {
                    break;
                }
                if s.claim(seq) {
                    // Re-read under the claim: the entry may have changed.
                    let (k2, p2) = (
                        s.key.load(Ordering::Relaxed),
                        s.port.load(Ordering::Relaxed),
                    );
                    if k2 == key && p2 == port {
                        s.write(seq, 0, 0, 0);
                        n += 1;
                    } else {
                        s.write(seq, k2, p2, s.seen.load(Ordering::Relaxed));
                        continue;
                    }
                    break;
                }
            }
        }
        n
    }

    /// Forgets everything learnt on `port` (a port removed or moved).
    pub fn flush_port(&self, port: u32) -> usize {
        self.forget(|_, _, p| p == port)
    }

    /// Forgets everything.
    pub fn flush(&self) -> usize {
        self.forget(|_, _, _| true)
    }

    /// The live entries, by port, VLAN and address.
    pub fn entries(&self, now: Time) -> Vec<FdbEntry> {
        let mut v: Vec<FdbEntry> = self
            .slots
            .iter()
            .filter_map(|s| s.read())
            .filter(|r| r.key != 0 && self.live(r.seen, now))
            .map(|r| {
                let (vlan, mac) = unkey(r.key);
                FdbEntry {
                    port: r.port,
                    vlan,
                    mac,
                    age_secs: now.0.saturating_sub(r.seen) / 1_000_000_000,
                }
            })
            .collect();
        v.sort();
        v.dedup_by(|a, b| (a.vlan, a.mac) == (b.vlan, b.mac));
        v
    }

    /// A copy of the live entries in a table of its own (for a trace,
    /// which must not teach the running switch anything).
    pub fn copy(&self, now: Time) -> MacTable {
        let t = MacTable {
            slots: (0..self.slots.len()).map(|_| Slot::default()).collect(),
            mask: self.mask,
            aging_ns: self.aging_ns,
        };
        for e in self.entries(now) {
            let seen = now.0.saturating_sub(e.age_secs * 1_000_000_000);
            t.learn(e.vlan, e.mac, e.port, Time(seen));
        }
        t
    }

    /// How many live entries the table holds.
    pub fn len(&self, now: Time) -> usize {
        self.entries(now).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
    const SEC: u64 = 1_000_000_000;

    #[test]
    fn learns_per_vlan_moves_ages_and_flushes() {
        let t = MacTable::new(64, Duration::from_secs(10));
        let now = Time(SEC);
        assert!(t.learn(10, A, 1, now));
        assert!(
            !t.learn(10, A, 1, now),
            "a refresh within a second writes nothing"
        );
        assert_eq!(t.lookup(10, A, now), Some(1));
        assert_eq!(t.lookup(20, A, now), None, "per VLAN");
        assert!(t.learn(20, A, 3, now));
        assert_eq!(t.lookup(20, A, now), Some(3));
        // A moves to port 2 in VLAN 10.
        assert!(t.learn(10, A, 2, Time(2 * SEC)));
        assert_eq!(t.lookup(10, A, Time(2 * SEC)), Some(2));
        // Aging.
        assert_eq!(t.lookup(10, A, Time(12 * SEC - 1)), Some(2));
        assert_eq!(t.lookup(10, A, Time(12 * SEC)), None);
        // Listing and flushing.
        t.learn(10, B, 2, Time(3 * SEC));
        let e = t.entries(Time(5 * SEC));
        assert_eq!(
            e.iter()
                .map(|e| (e.port, e.vlan, e.mac, e.age_secs))
                .collect::<Vec<_>>(),
            vec![(2, 10, A, 3), (2, 10, B, 2), (3, 20, A, 4)]
        );
        assert_eq!(t.flush_port(2), 2);
        assert_eq!(t.len(Time(5 * SEC)), 1);
        assert_eq!(t.flush(), 1);
        assert_eq!(t.len(Time(5 * SEC)), 0);
    }

    #[test]
    fn a_full_table_replaces_the_oldest_and_never_grows() {
        let t = MacTable::new(8, Duration::from_secs(300));
        assert_eq!(t.capacity(), 8);
        for i in 0..100u8 {
            t.learn(
                1,
                [2, 0, 0, 0, 1, i],
                u32::from(i),
                Time(u64::from(i) * SEC),
            );
        }
        let now = Time(100 * SEC);
        assert!(t.len(now) <= 8);
        // The newest address is always there.
        assert_eq!(t.lookup(1, [2, 0, 0, 0, 1, 99], now), Some(99));
    }

    #[test]
    fn workers_learning_and_reading_at_once_never_see_a_mixed_entry() {
        // Each address is only ever learnt on the port equal to its last
        // byte: any lookup that answers must answer that port.
        let t = std::sync::Arc::new(MacTable::new(16, Duration::from_secs(300)));
        let threads: Vec<_> = (0..4u32)
            .map(|w| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let b = ((i * 7 + u64::from(w)) % 64) as u8;
                        let mac = [2, 0, 0, 0, 0, b];
                        t.learn(1, mac, u32::from(b), Time(i * SEC / 1000));
                        if let Some(p) = t.lookup(1, [2, 0, 0, 0, 0, b ^ 1], Time(i * SEC / 1000)) {
                            assert_eq!(p, u32::from(b ^ 1));
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        for e in t.entries(Time(20 * SEC)) {
            assert_eq!(e.port, u32::from(e.mac[5]));
        }
    }
}
