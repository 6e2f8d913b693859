//! Publishing immutable versions of shared state (the pipeline's tables) to
//! dataplane threads without stopping them, and barriers over them.
//!
//! # Versions
//!
//! The control side builds a complete new value, wraps it in an `Arc` and
//! [`Publisher::publish`]es it: the `Arc` is swapped into a slot and a
//! version counter goes up. A worker holds its own [`Reader`] with the
//! `Arc` it is using; between bursts it calls [`Reader::refresh`], which
//! costs one atomic load when nothing changed. When the version moved it
//! takes the slot's lock with `try_lock` — never `lock` — so a busy worker
//! never blocks on the control side: if the publisher happens to hold the
//! lock (for the few nanoseconds of an `Arc` swap) the worker keeps the old
//! version for one more burst. The old version is freed by plain `Arc`
//! reference counting when the last reader drops it; no new dependency
//! and no `unsafe`.
//!
//! # Acknowledgements and barriers
//!
//! Each reader publishes an acknowledgement word: the version it uses, or
//! [`IDLE`] when it is parked. [`Publisher::barrier`] returns once every
//! live reader is caught up: it acknowledges the version or a newer one,
//! it is parked, or it is gone (dropped).
//!
//! A reader whose thread is about to sleep [`Reader::park`]s: it drops the
//! snapshot it held (so an idle worker pins no old version, and the
//! control side's copy-on-write tables find their spare copies free) and
//! says so. Before its next burst it must take the newest version
//! ([`Reader::get`] or [`Reader::refresh`] do, blocking on the slot's lock
//! for the length of an `Arc` clone if they have to), so counting a parked
//! reader as caught up is exact: it processes nothing older than what was
//! published before the barrier looked. The parked flag and the version
//! are both sequentially consistent, so a barrier that sees the flag and a
//! reader that clears it cannot both miss the other's write. A barrier
//! therefore costs microseconds when the workers sleep (no wake-up), and
//! about one burst when they are busy (each acknowledges between bursts).
//!
//! A waiting barrier sleeps on a condition variable; a reader that moves
//! its acknowledgement while a barrier waits (one atomic load tells it)
//! takes the condition's lock and wakes it. No polling.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Acknowledgement value of a reader that is gone.
const GONE: u64 = u64::MAX;

/// Acknowledgement bit of a parked reader (see the module comment).
pub const IDLE: u64 = 1 << 63;

struct Slot<T> {
    version: AtomicU64,
    current: Mutex<(u64, Arc<T>)>,
    acks: Mutex<Vec<Arc<AtomicU64>>>,
    /// Barriers waiting now.
    waiting: AtomicUsize,
    /// Held by a waiting barrier while it checks; readers take it to wake.
    bell: Mutex<()>,
    rung: Condvar,
}

impl<T> Slot<T> {
    /// Wakes waiting barriers, if any (after an acknowledgement moved).
    fn ring(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _g = self.bell.lock().unwrap_or_else(|e| e.into_inner());
            self.rung.notify_all();
        }
    }
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
    seen: u64,
    /// `None` while parked.
    current: Option<Arc<T>>,
    ack: Arc<AtomicU64>,
}

/// Whether acknowledgement `a` is caught up with `version`.
fn caught_up(a: u64, version: u64) -> bool {
    a & IDLE != 0 || a >= version
}

impl<T> Publisher<T> {
    /// A publisher whose version 1 is `initial`.
    pub fn new(initial: T) -> Publisher<T> {
        Publisher {
            slot: Arc::new(Slot {
                version: AtomicU64::new(1),
                current: Mutex::new((1, Arc::new(initial))),
                acks: Mutex::new(Vec::new()),
                waiting: AtomicUsize::new(0),
                bell: Mutex::new(()),
                rung: Condvar::new(),
            }),
        }
    }

    /// Publishes `value` as the next version and returns its number.
    pub fn publish(&self, value: T) -> u64 {
        let value = Arc::new(value);
        let mut cur = self.slot.current.lock().unwrap_or_else(|e| e.into_inner());
        let v = cur.0 + 1;
        let old = std::mem::replace(&mut *cur, (v, value));
        self.slot.version.store(v, Ordering::SeqCst);
        drop(cur);
        // The old version is freed (if no reader holds it) outside the lock.
        drop(old);
        v
    }

    /// The newest version and its value.
    pub fn current(&self) -> (u64, Arc<T>) {
        let cur = self.slot.current.lock().unwrap_or_else(|e| e.into_inner());
        (cur.0, cur.1.clone())
    }

    /// The newest version's number.
    pub fn version(&self) -> u64 {
        self.slot.version.load(Ordering::SeqCst)
    }

    /// A reader starting at the current version.
    pub fn reader(&self) -> Reader<T> {
        let (seen, current) = self.current();
        let ack = Arc::new(AtomicU64::new(seen));
        self.slot
            .acks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ack.clone());
        Reader {
            slot: self.slot.clone(),
            seen,
            current: Some(current),
            ack,
        }
    }

    /// The oldest version any live reader that is not parked still uses
    /// (`u64::MAX` when there is none).
    pub fn oldest_in_use(&self) -> u64 {
        let mut acks = self.slot.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.retain(|a| a.load(Ordering::SeqCst) != GONE);
        acks.iter()
            .map(|a| a.load(Ordering::SeqCst))
            .filter(|a| a & IDLE == 0)
            .min()
            .unwrap_or(GONE)
    }

    /// Live readers, and how many of them are parked now.
    pub fn readers(&self) -> (usize, usize) {
        let mut acks = self.slot.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.retain(|a| a.load(Ordering::SeqCst) != GONE);
        let parked = acks
            .iter()
            .filter(|a| a.load(Ordering::SeqCst) & IDLE != 0)
            .count();
        (acks.len(), parked)
    }

    /// True when every live reader is caught up with `version` now: it
    /// uses it or a newer one, or it is parked (see the module comment).
    pub fn caught_up(&self, version: u64) -> bool {
        let acks = self.slot.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.iter()
            .all(|a| caught_up(a.load(Ordering::SeqCst), version))
    }

    /// Waits until every live reader is caught up with `version` (see
    /// [`Publisher::caught_up`]); false if `timeout` passed first. Sleeps
    /// until a reader moves, no polling.
    pub fn barrier(&self, version: u64, timeout: Duration) -> bool {
        if self.caught_up(version) {
            return true;
        }
        let deadline = Instant::now() + timeout;
        self.slot.waiting.fetch_add(1, Ordering::SeqCst);
        let mut bell = self.slot.bell.lock().unwrap_or_else(|e| e.into_inner());
        let done = loop {
            // Checked under the bell: a reader that moves after this
            // check rings it only once this thread waits.
            if self.caught_up(version) {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            bell = match self.slot.rung.wait_timeout(bell, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        };
        drop(bell);
        self.slot.waiting.fetch_sub(1, Ordering::SeqCst);
        done
    }
}

impl<T> Reader<T> {
    /// Moves to the newest version if there is one and the slot is free
    /// right now; never blocks unless the reader is parked (then it takes
    /// the newest version whatever it costs, see the module comment).
    /// Returns true when the version changed.
    pub fn refresh(&mut self) -> bool {
        if self.current.is_none() {
            return self.unpark();
        }
        if self.slot.version.load(Ordering::SeqCst) == self.seen {
            return false;
        }
        let Ok(cur) = self.slot.current.try_lock() else {
            return false;
        };
        self.seen = cur.0;
        self.current = Some(cur.1.clone());
        drop(cur);
        self.ack.store(self.seen, Ordering::SeqCst);
        self.slot.ring();
        true
    }

    /// Leaves the parked state: clears the flag, then takes the newest
    /// version (waiting for the slot's lock if the publisher holds it).
    fn unpark(&mut self) -> bool {
        // Flag first, then the version: see the module comment.
        self.ack.store(self.seen, Ordering::SeqCst);
        let cur = self.slot.current.lock().unwrap_or_else(|e| e.into_inner());
        let changed = cur.0 != self.seen;
        self.seen = cur.0;
        self.current = Some(cur.1.clone());
        drop(cur);
        self.ack.store(self.seen, Ordering::SeqCst);
        self.slot.ring();
        changed
    }

    /// Parks the reader: its thread processes nothing until it calls
    /// [`Reader::get`] or [`Reader::refresh`]. The snapshot it held is
    /// dropped, and barriers count it as caught up meanwhile.
    pub fn park(&mut self) {
        if self.current.is_none() {
            return;
        }
        self.ack.store(IDLE | self.seen, Ordering::SeqCst);
        self.current = None;
        self.slot.ring();
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
                .1
                .clone()
        })
    }

    /// The version in use (the last one taken, if parked).
    pub fn version(&self) -> u64 {
        self.seen
    }
}

impl<T> Drop for Reader<T> {
    fn drop(&mut self) {
        self.ack.store(GONE, Ordering::SeqCst);
        self.slot.ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

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
        assert_eq!(p.oldest_in_use(), v);
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
