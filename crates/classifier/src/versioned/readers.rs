//! The versions and the readers' acknowledgements: one registry per
//! bridge, which both the snapshots the workers read
//! (`dataplane::snapshot`) and the in-place tables ([`super::Table`])
//! count on, and the barrier a BARRIER_REPLY waits for.
//!
//! # Versions
//!
//! The published version is a `u64` that only the writer moves
//! ([`Versions::publish`]), one sequentially consistent store at a time.
//! Tables compare the low 32 bits as serial numbers (see "Versions" in
//! [`super`]), so the writer skips every version whose low 32 bits are 0:
//! the value lines reserve for "settled" and "never".
//!
//! # Acknowledgements
//!
//! Each [`Reader`] (one per dataplane thread) has an acknowledgement word:
//! the version it reads at, `IDLE` (bit 63, beside the last version) while
//! it is parked, `UNPARKING` (bit 62) between leaving the parked state and
//! acknowledging the version it then takes, and `GONE` once dropped.
//! Versions stay below 2^62, so the bits never meet a version.
//!
//! - [`Reader::refresh`] (between bursts) loads the version and, when it
//!   moved, stores it in the word: one load when nothing changed.
//! - [`Reader::park`] (before the thread sleeps) stores `IDLE`: the reader
//!   holds no version.
//! - On waking, [`Reader::refresh`] stores `UNPARKING`, then loads the
//!   version, then acknowledges it. All three are sequentially consistent.
//!
//! # What the writer may conclude
//!
//! - **Barrier** ([`Watch::barrier`]): every reader is *caught up* with
//!   `v` when its word is `GONE`, `IDLE`, or a version at or past `v`.
//!   `UNPARKING` is not caught up: such a reader may have loaded the
//!   version before `v` was published and is about to read at it. A parked
//!   reader is caught up because its next load of the version comes after
//!   its `UNPARKING` store, so after the barrier's load of its word saw
//!   `IDLE`, so after the store that published `v` (the three are in one
//!   sequentially consistent order). So once the barrier returns, every
//!   burst any reader starts reads at `v` or later: what BARRIER_REPLY
//!   promises. A reader rings the barrier's condition variable whenever its
//!   word moves while a barrier waits (one load tells it), so a barrier
//!   sleeps instead of polling, and a ring cannot be lost: the barrier
//!   checks the words while it holds the bell's lock, and a reader takes
//!   that lock to ring.
//! - **Reclaiming** ([`Versions::oldest_in_use`]): the oldest version an
//!   unparked reader acknowledges; `None` while a reader is `UNPARKING`
//!   (it may be about to read at any version since its park). Memory
//!   removed at or before that version is unreachable to every reader.
//!
//! # Fences
//!
//! Each conclusion above rests on a store-then-load pair on each side
//! (the reader: its word, then the version or the barrier count; the
//! writer: the version or the barrier count, then the words), of which
//! at least one side must see the other's store. Sequentially consistent
//! accesses give that in the C11 model, but loom models them as
//! acquire/release, under which both sides may miss (and it reports the
//! lost ring as a deadlock). So each pair has a `fence(SeqCst)` between
//! its store and its load, which loom does model: the fences are what the
//! loom models check. They cost one fence when a word moves, never on a
//! refresh that finds nothing new.

use crate::sync::{fence, Arc, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};
use std::cell::Cell;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

/// Acknowledgement bit of a parked reader (beside the last version read).
pub const IDLE: u64 = 1 << 63;
/// Acknowledgement of a reader leaving the parked state.
pub(super) const UNPARKING: u64 = 1 << 62;
/// Acknowledgement of a reader that is gone.
const GONE: u64 = u64::MAX;

/// The version after `v` whose low 32 bits are not 0.
#[inline]
fn next_full(v: u64) -> u64 {
    let n = v + 1;
    if n as u32 == 0 {
        n + 1
    } else {
        n
    }
}

pub(super) struct Ack {
    pub(super) word: AtomicU64,
    pub(super) id: u8,
}

pub(super) struct Registry {
    pub(super) version: AtomicU64,
    acks: Mutex<Vec<Arc<Ack>>>,
    /// Barriers waiting now.
    waiting: AtomicUsize,
    /// Held by a waiting barrier while it checks; readers take it to ring.
    bell: Mutex<()>,
    rung: Condvar,
}

impl Registry {
    /// The published version's low 32 bits: what lines compare.
    #[inline]
    pub(super) fn version32(&self) -> u32 {
        self.version.load(Ordering::SeqCst) as u32
    }

    /// Wakes waiting barriers, if any (after an acknowledgement moved).
    #[inline]
    fn ring(&self) {
        // The caller's store of its word, then this load: see "Fences".
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _g = self.bell.lock().unwrap_or_else(|e| e.into_inner());
            self.rung.notify_all();
        }
    }

    fn live_acks(&self) -> crate::sync::MutexGuard<'_, Vec<Arc<Ack>>> {
        let mut acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.retain(|a| a.word.load(Ordering::SeqCst) != GONE);
        acks
    }

    fn caught_up(&self, v: u64) -> bool {
        // The caller's publish (or `waiting` raise), then the words: see
        // "Fences".
        fence(Ordering::SeqCst);
        let acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.iter().all(|a| {
            let w = a.word.load(Ordering::SeqCst);
            w == GONE || (w & IDLE != 0) || (w & UNPARKING == 0 && w >= v)
        })
    }

    pub(super) fn oldest_in_use(&self) -> Option<u64> {
        // The version first: only the writer publishes, so no
        // acknowledgement read below is of a newer one. The fence: the
        // writer's publish, then the words (see "Fences").
        let cur = self.version.load(Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let acks = self.live_acks();
        let mut oldest = cur;
        for a in acks.iter() {
            let w = a.word.load(Ordering::SeqCst);
            if w == GONE || w & IDLE != 0 {
                continue;
            }
            if w & UNPARKING != 0 {
                return None;
            }
            oldest = oldest.min(w);
        }
        Some(oldest)
    }

    fn readers(&self) -> (usize, usize) {
        let acks = self.live_acks();
        let parked = acks
            .iter()
            .filter(|a| a.word.load(Ordering::SeqCst) & IDLE != 0)
            .count();
        (acks.len(), parked)
    }
}

/// The writer's side of the versions: publishes them and knows which ones
/// readers still use. One per writer; the tables it versions take it at
/// creation. The writer (this and its tables) is one thread at a time.
pub struct Versions {
    pub(super) reg: Arc<Registry>,
}

impl Default for Versions {
    fn default() -> Self {
        Self::new()
    }
}

impl Versions {
    /// Versions starting at 1.
    pub fn new() -> Versions {
        Self::starting_at(1)
    }

    /// Versions starting at `v` (not 0): tests start near the 32-bit wrap.
    pub fn starting_at(v: u32) -> Versions {
        assert!(v != 0, "version 0 is reserved");
        Versions {
            reg: Arc::new(Registry {
                version: AtomicU64::new(u64::from(v)),
                acks: Mutex::new(Vec::new()),
                waiting: AtomicUsize::new(0),
                bell: Mutex::new(()),
                rung: Condvar::new(),
            }),
        }
    }

    /// The published version's low 32 bits, which tables compare.
    pub fn version(&self) -> u32 {
        self.reg.version32()
    }

    /// The published version, whole.
    pub fn full_version(&self) -> u64 {
        self.reg.version.load(Ordering::SeqCst)
    }

    /// The version the writer's changes are made at: the next one.
    pub fn pending(&self) -> u32 {
        next_full(self.full_version()) as u32
    }

    /// Publishes the pending version (one sequentially consistent store)
    /// and returns its low 32 bits.
    pub fn publish(&mut self) -> u32 {
        self.publish_full() as u32
    }

    /// [`Versions::publish`], returning the whole version.
    pub fn publish_full(&mut self) -> u64 {
        let v = next_full(self.full_version());
        self.reg.version.store(v, Ordering::SeqCst);
        v
    }

    /// A new reader at the published version, with the smallest free id
    /// (1..=255), or 0 when 255 readers live: such a reader owns no line
    /// and counts every hit elsewhere ([`Reader::count`]).
    pub fn reader(&mut self) -> Reader {
        let mut acks = self.reg.live_acks();
        let id = (1..=u8::MAX)
            .find(|i| acks.iter().all(|a| a.id != *i))
            .unwrap_or(0);
        let seen = self.full_version();
        let ack = Arc::new(Ack {
            word: AtomicU64::new(seen),
            id,
        });
        acks.push(ack.clone());
        Reader {
            reg: self.reg.clone(),
            ack,
            seen: seen as u32,
            seen_full: seen,
            parked: false,
            not_sync: PhantomData,
        }
    }

    /// The oldest version (low 32 bits) a live, unparked reader
    /// acknowledges (the published version when there is none); `None`
    /// while a reader is leaving the parked state (nothing may be
    /// reclaimed at that moment).
    pub fn oldest_in_use(&self) -> Option<u32> {
        self.reg.oldest_in_use().map(|v| v as u32)
    }

    /// Live readers, and how many of them are parked.
    pub fn readers(&self) -> (usize, usize) {
        self.reg.readers()
    }

    /// A handle that waits for the readers from any thread.
    pub fn watch(&self) -> Watch {
        Watch {
            reg: self.reg.clone(),
        }
    }
}

/// What any thread may ask of the readers: whether they are caught up
/// with a version, and a barrier that waits until they are (see the
/// module comment).
#[derive(Clone)]
pub struct Watch {
    reg: Arc<Registry>,
}

impl Watch {
    /// The published version, whole.
    pub fn version(&self) -> u64 {
        self.reg.version.load(Ordering::SeqCst)
    }

    /// True when every live reader is caught up with `v` now: it reads at
    /// `v` or later, or it is parked.
    pub fn caught_up(&self, v: u64) -> bool {
        self.reg.caught_up(v)
    }

    /// Waits until every live reader is caught up with `v`; false if
    /// `timeout` passed first. Sleeps until a reader's word moves.
    pub fn barrier(&self, v: u64, timeout: Duration) -> bool {
        if self.reg.caught_up(v) {
            return true;
        }
        let deadline = Instant::now() + timeout;
        self.reg.waiting.fetch_add(1, Ordering::SeqCst);
        let mut bell = self.reg.bell.lock().unwrap_or_else(|e| e.into_inner());
        let done = loop {
            // Checked under the bell: a reader that moves after this check
            // rings only once this thread waits, and the `waiting` count
            // it reads was raised before.
            if self.reg.caught_up(v) {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            bell = match self.reg.rung.wait_timeout(bell, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        };
        drop(bell);
        self.reg.waiting.fetch_sub(1, Ordering::SeqCst);
        done
    }

    /// The oldest version an unparked reader acknowledges (the published
    /// one when there is none); `None` while one is leaving the parked
    /// state.
    pub fn oldest_in_use(&self) -> Option<u64> {
        self.reg.oldest_in_use()
    }

    /// Live readers, and how many of them are parked.
    pub fn readers(&self) -> (usize, usize) {
        self.reg.readers()
    }
}

/// A reader's acknowledgement and identity: one per dataplane thread. Not
/// `Sync`: the counters it owns are written by one thread.
pub struct Reader {
    pub(super) reg: Arc<Registry>,
    pub(super) ack: Arc<Ack>,
    /// The acknowledged version's low 32 bits, which lookups are made at.
    pub(super) seen: u32,
    seen_full: u64,
    pub(super) parked: bool,
    not_sync: PhantomData<Cell<()>>,
}

impl Reader {
    /// Whether [`Reader::refresh`] would move: parked, or a newer version
    /// is published. One load.
    #[inline]
    pub fn stale(&self) -> bool {
        self.parked || self.reg.version.load(Ordering::SeqCst) != self.seen_full
    }

    /// Moves to the published version and acknowledges it (between
    /// bursts); leaves the parked state first if parked. One load when
    /// nothing changed. Returns the version's low 32 bits.
    #[inline]
    pub fn refresh(&mut self) -> u32 {
        let was_parked = self.parked;
        if was_parked {
            // Before the version load: see the module comment.
            self.ack
                .word
                .store(UNPARKING | self.seen_full, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            self.parked = false;
        }
        let v = self.reg.version.load(Ordering::SeqCst);
        if was_parked || v != self.seen_full {
            self.ack.word.store(v, Ordering::SeqCst);
            self.seen_full = v;
            self.seen = v as u32;
            self.reg.ring();
        }
        self.seen
    }

    /// Parks the reader (its thread is about to sleep): it holds no
    /// version, and lookups panic until the next [`Reader::refresh`].
    pub fn park(&mut self) {
        if self.parked {
            return;
        }
        self.ack.word.store(IDLE | self.seen_full, Ordering::SeqCst);
        self.parked = true;
        self.reg.ring();
    }

    /// True while parked.
    pub fn is_parked(&self) -> bool {
        self.parked
    }

    /// The acknowledged version's low 32 bits, which lookups are made at.
    pub fn version(&self) -> u32 {
        self.seen
    }

    /// The acknowledged version, whole (the last one taken, if parked).
    pub fn full_version(&self) -> u64 {
        self.seen_full
    }

    /// The reader's id (1..=255), the owner id of the lines it counts on;
    /// 0 for a reader past the 255th, which owns none.
    pub fn id(&self) -> u8 {
        self.ack.id
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.ack.word.store(GONE, Ordering::SeqCst);
        self.reg.ring();
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
