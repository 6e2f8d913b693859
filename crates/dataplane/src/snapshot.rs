//! Publishing immutable versions of shared state (the pipeline's tables) to
//! dataplane threads without stopping them, and barriers over them.
//!
//! # Versions
//!
//! The control side builds a complete new value, wraps it in an `Arc` and
//! [`Publisher::publish`]es it: the `Arc` is swapped into a slot and the
//! version moves, both under the slot's lock. A worker holds its own
//! [`Reader`] with the `Arc` it is using; between bursts it calls
//! [`Reader::refresh`], which costs one atomic load when nothing changed.
//! When the version moved it takes the slot's lock with `try_lock` —
//! never `lock` — so a busy worker never blocks on the control side: if
//! the publisher happens to hold the lock (for the few nanoseconds of an
//! `Arc` swap) the worker keeps the old version for one more burst. Under
//! the lock the version cannot move, so the version a reader acknowledges
//! is always the one of the value it took. The old version is freed by
//! plain `Arc` reference counting when the last reader drops it.
//!
//! # Acknowledgements and barriers
//!
//! The versions and the readers' acknowledgement words are
//! `classifier::versioned`'s registry (its `readers` module states the
//! protocol and its invariants, and its loom models check them): the same
//! words the in-place tables of issue #35 reclaim by, so a snapshot and a
//! table version are one number. Each [`Reader`] holds one of its
//! readers; [`Publisher::barrier`] returns once every live reader is
//! caught up: it acknowledges the version or a newer one, it is parked,
//! or it is gone (dropped).
//!
//! A reader whose thread is about to sleep [`Reader::park`]s: it drops the
//! snapshot it held (so an idle worker pins no old version, and the
//! control side's copy-on-write tables find their spare copies free) and
//! says so. Before its next burst it must take the newest version
//! ([`Reader::get`] or [`Reader::refresh`] do, blocking on the slot's lock
//! for the length of an `Arc` clone if they have to), so counting a parked
//! reader as caught up is exact: it processes nothing older than what was
//! published before the barrier looked. A barrier therefore costs
//! microseconds when the workers sleep (no wake-up), and about one burst
//! when they are busy (each acknowledges between bursts). A waiting
//! barrier sleeps on a condition variable that readers ring when their
//! acknowledgement moves; no polling.

use classifier::versioned::{self, Versions, Watch};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The value in force and the versions (which only the holder of the
/// slot's lock moves).
struct Current<T> {
    versions: Versions,
    value: Arc<T>,
}

struct Slot<T> {
    current: Mutex<Current<T>>,
    watch: Watch,
}

/// The control side: publishes new versions.
pub struct Publisher<T> {
    slot: Arc<Slot<T>>,
}

impl<T> Clone for Publisher<T> {
    fn clone(&self) -> Self {
        Publisher {
            slot: self.slot.clone(),
        }
    }
}

/// A dataplane thread's view: the version it is using now.
pub struct Reader<T> {
    slot: Arc<Slot<T>>,
    /// `None` while parked.
    current: Option<Arc<T>>,
    ack: versioned::Reader,
}

impl<T> Publisher<T> {
    /// A publisher whose version 1 is `initial`.
    pub fn new(initial: T) -> Publisher<T> {
        let versions = Versions::new();
        let watch = versions.watch();
        Publisher {
            slot: Arc::new(Slot {
                current: Mutex::new(Current {
                    versions,
                    value: Arc::new(initial),
                }),
                watch,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current<T>> {
        self.slot.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `value` as the next version and returns its number.
    pub fn publish(&self, value: T) -> u64 {
        let value = Arc::new(value);
        let mut cur = self.lock();
        let v = cur.versions.publish_full();
        let old = std::mem::replace(&mut cur.value, value);
        drop(cur);
        // The old version is freed (if no reader holds it) outside the lock.
        drop(old);
        v
    }

    /// The newest version and its value.
    pub fn current(&self) -> (u64, Arc<T>) {
        let cur = self.lock();
        (cur.versions.full_version(), cur.value.clone())
    }

    /// The newest version's number.
    pub fn version(&self) -> u64 {
        self.slot.watch.version()
    }

    /// Calls `f` with the versions this publisher moves, under the slot's
    /// lock: an in-place table (`versioned::Table::new`) made from them
    /// is read at the version of the snapshot its reader holds.
    pub fn versions<R>(&self, f: impl FnOnce(&Versions) -> R) -> R {
        f(&self.lock().versions)
    }

    /// A reader starting at the current version.
    pub fn reader(&self) -> Reader<T> {
        let mut cur = self.lock();
        let ack = cur.versions.reader();
        let current = Some(cur.value.clone());
        drop(cur);
        Reader {
            slot: self.slot.clone(),
            current,
            ack,
        }
    }

    /// The oldest version any live reader that is not parked still uses
    /// (the newest when there is none); `None` while a reader is leaving
    /// the parked state.
    pub fn oldest_in_use(&self) -> Option<u64> {
        self.slot.watch.oldest_in_use()
    }

    /// Live readers, and how many of them are parked now.
    pub fn readers(&self) -> (usize, usize) {
        self.slot.watch.readers()
    }

    /// True when every live reader is caught up with `version` now: it
    /// uses it or a newer one, or it is parked (see the module comment).
    pub fn caught_up(&self, version: u64) -> bool {
        self.slot.watch.caught_up(version)
    }

    /// Waits until every live reader is caught up with `version` (see
    /// [`Publisher::caught_up`]); false if `timeout` passed first. Sleeps
    /// until a reader moves, no polling.
    pub fn barrier(&self, version: u64, timeout: Duration) -> bool {
        self.slot.watch.barrier(version, timeout)
    }
}

impl<T> Reader<T> {
    /// Moves to the newest version if there is one and the slot is free
    /// right now; never blocks unless the reader is parked (then it takes
    /// the newest version whatever it costs, see the module comment).
    /// Returns true when the version changed.
    #[inline]
    pub fn refresh(&mut self) -> bool {
        if self.current.is_none() {
            return self.unpark();
        }
        if !self.ack.stale() {
            return false;
        }
        let Ok(cur) = self.slot.current.try_lock() else {
            return false;
        };
        // The version cannot move while the lock is held: the one
        // acknowledged is the value's.
        self.ack.refresh();
        self.current = Some(cur.value.clone());
        true
    }

    /// Leaves the parked state: takes the newest version (waiting for the
    /// slot's lock if the publisher holds it) and acknowledges it.
    fn unpark(&mut self) -> bool {
        let cur = self.slot.current.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.ack.full_version();
        self.ack.refresh();
        self.current = Some(cur.value.clone());
        self.ack.full_version() != before
    }

    /// Parks the reader: its thread processes nothing until it calls
    /// [`Reader::get`] or [`Reader::refresh`]. The snapshot it held is
    /// dropped, and barriers count it as caught up meanwhile.
    pub fn park(&mut self) {
        if self.current.is_none() {
            return;
        }
        self.ack.park();
        self.current = None;
    }

    /// True while parked.
    pub fn is_parked(&self) -> bool {
        self.current.is_none()
    }

    /// The value in use (the newest, taken now, if the reader was parked).
    pub fn get(&mut self) -> &Arc<T> {
        if self.current.is_none() {
            self.unpark();
        }
        let slot = &self.slot;
        self.current.get_or_insert_with(|| {
            slot.current
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .value
                .clone()
        })
    }

    /// The version in use (the last one taken, if parked).
    pub fn version(&self) -> u64 {
        self.ack.full_version()
    }

    /// The acknowledgement this reader's lookups in an in-place table of
    /// this publisher's versions are made with: at the version of the
    /// snapshot it holds ([`Reader::get`]).
    pub fn versioned(&self) -> &versioned::Reader {
        &self.ack
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    #[test]
    fn readers_see_new_versions_between_bursts() {
        let p = Publisher::new(vec![1u32]);
        let mut r = p.reader();
        assert_eq!((r.version(), r.get().as_slice()), (1, &[1][..]));
        assert!(!r.refresh());
        let v = p.publish(vec![2, 3]);
        assert_eq!(v, 2);
        // The reader keeps the old version until it refreshes.
        assert_eq!(r.get().as_slice(), &[1]);
        assert!(r.refresh());
        assert_eq!((r.version(), r.get().as_slice()), (2, &[2, 3][..]));
    }

    #[test]
    fn barrier_waits_for_every_live_reader() {
        let p = Publisher::new(0u64);
        let mut a = p.reader();
        let b = p.reader();
        let v = p.publish(5);
        assert!(!p.barrier(v, Duration::from_millis(5)));
        a.refresh();
        assert!(!p.barrier(v, Duration::from_millis(5)), "b still at 1");
        drop(b);
        assert!(p.barrier(v, Duration::from_millis(5)));
        assert_eq!(p.oldest_in_use(), Some(v));
    }

    #[test]
    fn a_parked_reader_is_caught_up_and_takes_the_newest_before_reading() {
        let p = Publisher::new(Arc::new(1u64));
        let mut r = p.reader();
        let first = r.get().clone();
        r.park();
        assert!(r.is_parked());
        assert_eq!(Arc::strong_count(&first), 2, "publisher and this test only");
        let v = p.publish(Arc::new(2));
        assert_eq!(Arc::strong_count(&first), 1, "nobody holds version 1");
        assert!(p.caught_up(v));
        assert!(p.barrier(v, Duration::ZERO));
        assert_eq!(p.readers(), (1, 1));
        assert_eq!(**r.get().as_ref(), 2);
        assert_eq!(r.version(), v);
        assert!(!r.is_parked());
        assert_eq!(p.readers(), (1, 0));
        // Parked again, refresh also takes the newest.
        r.park();
        let v = p.publish(Arc::new(3));
        assert!(r.refresh());
        assert_eq!((r.version(), **r.get().as_ref()), (v, 3));
    }

    #[test]
    fn a_stalled_reader_holds_a_barrier_until_it_moves() {
        let p = Publisher::new(0u64);
        let stalled = p.reader();
        let v = p.publish(1);
        assert!(!p.caught_up(v));
        assert!(!p.barrier(v, Duration::from_millis(20)));
        // Released from another thread while the barrier sleeps: it wakes
        // at once, not at its timeout.
        let waiter = {
            let p = p.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                let ok = p.barrier(v, Duration::from_secs(60));
                (ok, t.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let mut stalled = stalled;
        assert!(stalled.refresh());
        let (ok, waited) = waiter.join().unwrap();
        assert!(ok);
        assert!(waited < Duration::from_secs(30), "{waited:?}");
    }

    #[test]
    fn old_version_freed_when_last_reader_moves_on() {
        let p = Publisher::new(Arc::new(()));
        let mut r = p.reader();
        let first = r.get().clone();
        p.publish(Arc::new(()));
        assert_eq!(Arc::strong_count(&first), 2, "reader still holds v1");
        r.refresh();
        assert_eq!(Arc::strong_count(&first), 1);
    }

    /// A snapshot and an in-place table published through one
    /// publisher are read at one version: readers that refresh, park and
    /// wake find in the table exactly what the snapshot they hold says,
    /// while the writer changes both in batches, rebuilds the table and
    /// reclaims behind them.
    #[test]
    fn a_snapshot_and_an_in_place_table_are_read_at_one_version() {
        use classifier::versioned::Table;
        use std::collections::BTreeMap;
        const KEYS: u64 = 48;
        let p = Publisher::new(BTreeMap::<u64, u64>::new());
        let mut t = p.versions(|v| Table::new(v, 1));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3u64)
            .map(|i| {
                let mut r = p.reader();
                let view = t.view();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut checked = 0u64;
                    let mut round = i;
                    while !stop.load(Ordering::Relaxed) {
                        if round % 5 == 4 {
                            r.park();
                        }
                        r.refresh();
                        let snap = r.get().clone();
                        for k in 0..KEYS {
                            let got = view.lookup(r.versioned(), &[k]).map(|h| h.actions[0]);
                            assert_eq!(
                                got,
                                snap.get(&k).copied(),
                                "key {k} at version {}",
                                r.version()
                            );
                        }
                        checked += 1;
                        round += 1;
                        std::thread::yield_now();
                    }
                    checked
                })
            })
            .collect();
        let mut model = BTreeMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let steps = if cfg!(miri) { 60 } else { 3000u64 };
        for step in 0..steps {
            for _ in 0..next() % 6 {
                let k = next() % KEYS;
                if next() % 3 == 0 {
                    if model.remove(&k).is_some() {
                        assert!(t.remove(&[k]));
                    }
                } else {
                    let val = step << 8 | k;
                    let fresh = model.insert(k, val).is_none();
                    let done = if fresh {
                        t.insert(&[k], 1, 0, [val, 0])
                    } else {
                        t.modify(&[k], 1, 0, [val, 0])
                    };
                    assert!(done);
                }
            }
            if step % 101 == 50 {
                t.rebuild();
            }
            p.publish(model.clone());
            if step % 7 == 0 {
                t.reclaim();
            }
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        for h in readers {
            assert!(h.join().unwrap() > 0, "every reader checked some version");
        }
        // Every reader gone: everything removed can be reclaimed. A
        // reclaim may move keys back from the table's overflow run, which
        // leaves tombstones at the pending version: a few publishes and
        // reclaims clear those too.
        for _ in 0..10 {
            t.reclaim();
            if (t.tombstones(), t.retired()) == (0, 0) {
                break;
            }
            p.publish(model.clone());
        }
        assert_eq!((t.tombstones(), t.retired()), (0, 0));
    }

    #[test]
    fn threads_converge_while_versions_change() {
        let p = Publisher::new(1u64);
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for _ in 0..3 {
            let mut r = p.reader();
            let stop = stop.clone();
            handles.push(std::thread::spawn(move || {
                let mut last = 0;
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Sometimes parked in between, as a sleeping worker.
                    if round % 3 == 2 {
                        r.park();
                    } else {
                        r.refresh();
                    }
                    round += 1;
                    // Versions only move forward and carry their value.
                    let value = **r.get();
                    assert!(value >= last);
                    assert_eq!(value, r.version());
                    last = value;
                    std::thread::yield_now();
                }
            }));
        }
        let mut v = 0;
        for i in 2..200u64 {
            v = p.publish(i);
            assert_eq!(v, i);
        }
        assert!(p.barrier(v, Duration::from_secs(10)));
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
    }
}
