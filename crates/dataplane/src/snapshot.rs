//! Publishing immutable versions of shared state (the pipeline's tables) to
//! dataplane threads without stopping them.
//!
//! # The choice: versioned `Arc` snapshots, picked up between bursts
//!
//! The control side builds a complete new value, wraps it in an `Arc` and
//! [`Publisher::publish`]es it: the `Arc` is swapped into a slot and a
//! version counter goes up. A worker holds its own [`Reader`] with the
//! `Arc` it is using; between bursts it calls [`Reader::refresh`], which
//! costs one atomic load when nothing changed. When the version moved it
//! takes the slot's lock with `try_lock` — never `lock` — so a worker can
//! never block on the control side: if the publisher happens to hold the
//! lock (for the few nanoseconds of an `Arc` swap) the worker keeps the old
//! version for one more burst. After taking the new `Arc` the reader stores
//! the version it now uses in its acknowledgement counter.
//!
//! Why this and not `arc-swap` or epoch-based reclamation: the readers here
//! check once per burst, not once per packet, so one uncontended `try_lock`
//! per *change* is free in practice, and the old version is freed by plain
//! `Arc` reference counting when the last worker drops it. No new
//! dependency and no `unsafe`. The per-reader acknowledgement counter gives
//! barriers for free: [`Publisher::barrier`] waits until every live reader
//! acknowledges a version `>= N` (a reader that was dropped no longer
//! counts). Readers that are idle must still call `refresh` now and then
//! (the dataplane threads do on every wake-up, and the publisher's owner can
//! ring their doorbells after publishing) or a barrier waits for them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Acknowledgement value of a reader that is gone.
const GONE: u64 = u64::MAX;

struct Slot<T> {
    version: AtomicU64,
    current: Mutex<(u64, Arc<T>)>,
    acks: Mutex<Vec<Arc<AtomicU64>>>,
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
    current: Arc<T>,
    ack: Arc<AtomicU64>,
}

impl<T> Publisher<T> {
    /// A publisher whose version 1 is `initial`.
    pub fn new(initial: T) -> Publisher<T> {
        Publisher {
            slot: Arc::new(Slot {
                version: AtomicU64::new(1),
                current: Mutex::new((1, Arc::new(initial))),
                acks: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Publishes `value` as the next version and returns its number.
    pub fn publish(&self, value: T) -> u64 {
        let value = Arc::new(value);
        let mut cur = self.slot.current.lock().unwrap_or_else(|e| e.into_inner());
        let v = cur.0 + 1;
        *cur = (v, value);
        self.slot.version.store(v, Ordering::Release);
        v
    }

    /// The newest version and its value.
    pub fn current(&self) -> (u64, Arc<T>) {
        let cur = self.slot.current.lock().unwrap_or_else(|e| e.into_inner());
        (cur.0, cur.1.clone())
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
            current,
            ack,
        }
    }

    /// The oldest version any live reader still uses (`u64::MAX` when there
    /// is no reader).
    pub fn oldest_in_use(&self) -> u64 {
        let mut acks = self.slot.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.retain(|a| a.load(Ordering::Acquire) != GONE);
        acks.iter()
            .map(|a| a.load(Ordering::Acquire))
            .min()
            .unwrap_or(GONE)
    }

    /// Waits until every live reader uses version `version` or newer;
    /// false if `timeout` passed first.
    pub fn barrier(&self, version: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.oldest_in_use() >= version {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

impl<T> Reader<T> {
    /// Moves to the newest version if there is one and the slot is free
    /// right now; never blocks. Returns true when the version changed.
    pub fn refresh(&mut self) -> bool {
        if self.slot.version.load(Ordering::Acquire) == self.seen {
            return false;
        }
        let Ok(cur) = self.slot.current.try_lock() else {
            return false;
        };
        self.seen = cur.0;
        self.current = cur.1.clone();
        drop(cur);
        self.ack.store(self.seen, Ordering::Release);
        true
    }

    /// The value in use.
    pub fn get(&self) -> &Arc<T> {
        &self.current
    }

    /// The version in use.
    pub fn version(&self) -> u64 {
        self.seen
    }
}

impl<T> Drop for Reader<T> {
    fn drop(&mut self) {
        self.ack.store(GONE, Ordering::Release);
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
                while !stop.load(Ordering::Relaxed) {
                    r.refresh();
                    // Versions only move forward and carry their value.
                    assert!(**r.get() >= last);
                    assert_eq!(**r.get(), r.version());
                    last = **r.get();
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
