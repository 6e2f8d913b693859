//! An open-addressing hash table that one writer changes in place while
//! many readers look it up, each reader seeing exactly the entries of the
//! version it acknowledged: the line, version and reclamation protocol of
//! issue #35 ("Planned: in-place tables" in docs/design.md), standalone.
//! The pipeline does not use the table yet; its registry of versions and
//! readers ([`Versions`], [`Reader`], [`Watch`]: `readers.rs`, which
//! states that part of the protocol) is what `dataplane::snapshot`'s
//! publishing and barriers run on.
//!
//! # Structure
//!
//! A table is a power-of-two array of 64-byte, 64-byte-aligned lines, each
//! eight `AtomicU64` words. A key has two candidate lines, from two parts
//! of its hash; it is in one of them, or, rarely, in the overflow run
//! ("Placement" below):
//!
//! ```text
//!   word 0  seq (bits 0..16, odd while the writer rewrites the line)
//!           flags (bits 16..24: bit 16 occupied, bit 17 spill; the rest
//!           reserved)
//!           priority (bits 24..40), entry slot (bits 40..64, 24 bits)
//!   word 1  added (bits 0..32), removed (bits 32..64): versions
//!   word 2  key word 0
//!   word 3  key word 1 (0 for one-word keys)
//!   word 4  action word 0 (opaque to the table)
//!   word 5  action word 1
//!   word 6  owner (bits 56..64: reader id, 0 unclaimed), packets (0..56)
//!   word 7  bytes
//! ```
//!
//! The entry slot is the caller's (the control side's `FlowEntry`); the
//! action words are whatever the caller compiles the entry's actions to.
//!
//! # Versions
//!
//! Lines compare versions as `u32` serial numbers ([`serial_le`]), the
//! low 32 bits of the registry's `u64` version (`readers.rs`): `a` is at
//! or before `b` when `b - a`, wrapping, is below 2^31.
//! [`Versions::publish`] moves the published version `V` to the next one
//! whose low 32 bits are not 0, which lines reserve: `added` = 0 means "settled, visible at every version a reader
//! may hold", `removed` = 0 means "never". A line is visible at version
//! `v` when `added` is 0 or at or before `v`, and `removed` is 0 or after
//! `v`. A line whose `added` equals its nonzero `removed` is *dead*:
//! visible at no version whatever the wrap, free for reuse.
//!
//! The writer's changes are made at the pending version `V+1`:
//!
//! - [`Table::insert`]: a free line (an empty one, or a dead one) gets the
//!   entry with `added = V+1`, `removed = 0` ("Placement").
//! - [`Table::modify`]: `removed = V+1` on the key's live line and a new
//!   line with `added = V+1`, so that a reader at `V` finds the old line
//!   and one at `V+1` the new: at most one line of a key is visible at any
//!   version, and a lookup takes the first visible one it reads.
//! - [`Table::remove`]: `removed = V+1` (a tombstone). Nothing moves, so a
//!   reader at `V` still finds the line.
//!
//! A line added at the pending version and removed at it again (a modify
//! or remove in the batch that added it) is dead at once: no reader ever
//! saw it.
//!
//! # Placement
//!
//! A key's candidate lines are `c0 = hash & mask` and
//! `c1 = c0 ^ (((hash >> 32) & mask) | 1)`: two different lines. A lookup
//! reads `c0`, then `c1`; a burst reads the `c0` of all its keys first,
//! then `c1` of those not found ([`View::prefetch`],
//! [`View::lookup_first`]). An insert writes the first free candidate, so
//! a key whose `c0` is empty is in no line. When both are taken, it looks
//! for a chain of moves that ends in a free line: the occupant of `c0`
//! to its other candidate, that one's occupant to its own other
//! candidate, and so on (cuckoo placement, at most `MAX_KICKS` moves);
//! when that chain meets a line it cannot move or comes back on itself,
//! the chain from `c1`. It makes the moves from the free end back. Only
//! occupants added at the pending version move: no reader sees them
//! yet, so rewriting them elsewhere changes nothing a reader finds. A
//! line a reader may see cannot move within one version (its old place
//! must stay visible until reclaimed); nor, in effect, can the new line
//! of a key modified in this version, whose other candidate holds its
//! earlier line. When neither chain ends free, the key goes to the
//! *overflow run*: the first free line after `c1`, going forward, and the
//! writer sets the spill bit of both its candidates before the version is
//! published. A lookup that finds the key in neither candidate reads the
//! run only when one of them has the bit, up to the first empty line (lines
//! never become empty again, so the run only grows).
//!
//! The bit belongs to the line's place (a rewrite keeps it). The writer
//! records which overflow lines each bit stands for, and clears a bit when
//! the last of them is dead: a dead line is visible at no version a reader
//! may hold, so no reader needs the bit any more. The bit is set and
//! cleared with one store of word 0 and no `seq` bump; a reader that read
//! the old word acts on a bit that was right for its version. When reclaim
//! makes a line dead and a live key of the overflow run has it as a
//! candidate, the key moves back into it (added at `V+1` there, removed at
//! `V+1` from the run, as a modify).
//!
//! The array grows when an insert finds no free candidate and half the
//! lines are occupied; a rebuild places every line afresh (any line may
//! move in an array no reader has loaded). Inserting 3,000 keys into
//! 8,192 lines one publish at a time, 138 (4.6 %) overflow; inserted in
//! one batch, where the moves apply, none do; nor do any of 1M keys in 2M
//! lines, or of 131,071 in 262,144 (one chain, from `c0` only, left 4
//! and 9 there). A batch that modifies each of 1,000 keys in 4,096
//! lines while a reader sees their earlier lines overflows 447 of them:
//! transient, as reclaim moves them back once the earlier lines die
//! (`a_batch_of_modifies_overflows_until_the_old_lines_go`).
//!
//! # Readers and the seqlock
//!
//! A reader ([`Reader`]) loads the published version and stores it in its
//! acknowledgement word ([`Reader::refresh`], between bursts); every lookup
//! of the burst ([`View::lookup`]) is at that version. A lookup reads a
//! line's words 0–5 between two loads of word 0 (acquire load, relaxed
//! loads, acquire fence, relaxed load) and takes them only when the `seq`
//! was even and did not move; otherwise it reads the line again. The
//! writer rewrites a whole line as: `seq` odd (relaxed), release fence, the
//! words (relaxed), `seq` even with the other fields of word 0 (release).
//! So a lookup never returns a line mixed from two writes. The writer
//! changes word 1 alone (a removal, a reclaim, a settle) with one store and
//! no `seq` bump: each of those stores leaves the line's visibility at
//! every version a reader may hold unchanged, so either value is
//! consistent. With this writer the `seq` check is a second guard: the
//! only lines it rewrites whole are empty, dead or added at the pending
//! version, and a mix of such a line is invisible by its word 1 either
//! way. It is what keeps lookups whole once lines are rewritten in place
//! (a group's best changing), and loom checks it on its own. Every shared word is an atomic; readers write nothing but
//! their acknowledgement and the counters of the lines they own.
//!
//! A reader waits for nothing but a line the writer is rewriting (the
//! length of eight stores); it never takes a lock and never frees
//! anything.
//!
//! # Reclaiming (quiescent-state-based)
//!
//! A tombstone and a retired array are still reachable by a reader whose
//! version is before the removal or retirement. [`Versions::oldest_in_use`]
//! is the oldest version a live, unparked reader acknowledges (the
//! published version when there is none); [`Table::reclaim`] then
//!
//! - makes dead every tombstone removed at or before it (its counts folded
//!   into the writer's per-slot totals first), so that a later insert may
//!   reuse the line;
//! - frees every array retired at or before it.
//!
//! A reader at or past a removal cannot find the removed line, and one at
//! or past a retirement cannot load the retired array (the array pointer
//! was swapped before that version was published, and a reader loads the
//! pointer after the version), so neither is freed while a reader can
//! reach it. A parked reader ([`Reader::park`]) holds nothing; on waking
//! it first marks its word "unparking" (and [`Versions::oldest_in_use`]
//! then answers `None`: reclaim nothing now), then loads the version, then
//! acknowledges it, all sequentially consistent and the mark fenced from
//! the load (`readers.rs`, "Fences"), so it cannot load a version older
//! than one the writer counted it past. The cost is the one
//! of every epoch scheme: a stalled reader holds back reclamation.
//!
//! [`Table::rebuild`] (growth, or clean-up of dead lines) copies every line
//! that is not dead into a new array, swaps the array pointer, and retires
//! the old array at the pending version. Growth happens inside an insert
//! ("Placement").
//!
//! # Wrap
//!
//! Serial comparison is exact only within 2^31 versions. Dead lines are
//! immune (`added` = `removed`); tombstones are reclaimed once readers pass
//! them; live lines are settled: [`Table::reclaim`] sweeps the array every
//! 2^29 versions and sets `added` = 0 on every line added at or before the
//! oldest version in use (unchanged visibility for every reader, one store
//! of word 1). The requirement, stated once: every live reader acknowledges
//! or parks within 2^30 versions of the published one
//! ([`Reclaimed::lagging`] says when one does not). Then every nonzero
//! `added` and `removed` a reader compares is within 2^31 of its version.
//!
//! # Counters
//!
//! The first reader to count a hit on a line ([`Reader::count`]) claims it
//! with one compare-and-swap of word 6 (owner 0 → its id with the
//! packets); from then on it adds with a relaxed load and store, no locked
//! instruction. Any other reader is told `false` and counts elsewhere (its
//! own per-worker array, as all do today). A count is accepted only for a
//! hit of the reader's current burst (same version, not parked): that is
//! what makes the line's memory and its entry stable during the count. The
//! writer reads the sum of what owners wrote ([`Table::counters`]): the
//! key's lines with that slot in the current and retired arrays, plus the
//! counts folded from tombstones and freed arrays.
//!
//! # Why
//!
//! A hit costs one cache line (two for the keys at their second
//! candidate): key, visibility, priority, entry slot, the compiled action
//! and, for the owning worker, the counters. Today's hit
//! costs three (the subtable slot, the `FastEntry` and the counter array),
//! and a second copy of every written table lives beside the published one
//! (`tables/cow.rs`), cold in the workers' caches after each publish.

use crate::key::hash_words;
use crate::sync::{fence, spin, Arc, AtomicPtr, AtomicU64, Mutex, Ordering};
use packet::huge::HugeVec;
use readers::Registry;
#[cfg(all(test, not(loom)))]
use readers::UNPARKING;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::ptr::NonNull;

mod readers;
pub use readers::{Reader, Versions, Watch, IDLE};

const SEQ_MASK: u64 = 0xffff;
const OCCUPIED: u64 = 1 << 16;
/// A key that has this line as a candidate lies in the overflow run (see
/// the module comment, "Placement"). It belongs to the line's place, not
/// to its entry: rewriting the line keeps it.
const SPILL: u64 = 1 << 17;
/// The priority and slot fields of word 0.
const FIELDS: u64 = !((1 << PRIO_SHIFT) - 1);
const PRIO_SHIFT: u32 = 24;
const SLOT_SHIFT: u32 = 40;
/// Width of the entry slot a line holds.
pub const SLOT_BITS: u32 = 24;
const OWNER_SHIFT: u32 = 56;
const COUNT_MASK: u64 = (1 << OWNER_SHIFT) - 1;

/// The fewest lines of an array (fewer under loom, whose models stay
/// small).
const MIN_CAP: usize = if cfg!(loom) { 2 } else { 8 };

/// The most occupants one chain of moves may move before the insert
/// tries the other candidate's chain or the overflow run. Fewer under
/// Miri, where each step interprets slowly and a chain that ends in the
/// overflow run anyway (a small array near half load) took seconds of its
/// threaded tests' minutes; how long a chain may be does not change
/// which paths run.
const MAX_KICKS: usize = if cfg!(miri) { 8 } else { 64 };

/// The two candidate lines of a key hashing to `hash`, in an array of
/// `mask + 1` lines (at least two): different lines, from different bits
/// of the hash.
#[inline]
fn candidates(hash: u64, mask: usize) -> (usize, usize) {
    let a = hash as usize & mask;
    (a, a ^ (((hash >> 32) as usize & mask) | 1))
}

/// Versions between settle sweeps (see the module comment, "Wrap").
pub const SETTLE_EVERY: u32 = 1 << 29;
/// The most a reader may lag behind the published version.
pub const MAX_LAG: u32 = 1 << 30;

/// `a` is at or before `b` in serial order (exact when they are less than
/// 2^31 apart).
#[inline]
pub fn serial_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// `a` is strictly before `b` in serial order.
#[inline]
pub fn serial_lt(a: u32, b: u32) -> bool {
    a != b && serial_le(a, b)
}

/// The version after `v` (0 is reserved and skipped).
#[inline]
pub fn next_version(v: u32) -> u32 {
    match v.wrapping_add(1) {
        0 => 1,
        n => n,
    }
}

/// Whether word 1 (`added`, `removed`) makes a line visible at `v`.
#[inline]
fn visible(w1: u64, v: u32) -> bool {
    let added = w1 as u32;
    let removed = (w1 >> 32) as u32;
    (added == 0 || serial_le(added, v)) && (removed == 0 || serial_lt(v, removed))
}

/// Whether word 1 marks a dead line (visible at no version).
#[inline]
fn dead(w1: u64) -> bool {
    let added = w1 as u32;
    added != 0 && added == (w1 >> 32) as u32
}

#[inline]
fn versions_word(added: u32, removed: u32) -> u64 {
    added as u64 | (removed as u64) << 32
}

// ---------------------------------------------------------------------------
// Versions and readers (`readers.rs`), and what a reader counts

impl Reader {
    /// Counts `packets` and `bytes` on `hit`'s line if this reader owns it
    /// or claims it now; false when another reader owns it, when this
    /// reader has id 0 (it owns none), or when `hit` is not of this
    /// reader's current burst (then the caller counts elsewhere).
    pub fn count(&self, hit: &Hit<'_>, packets: u64, bytes: u64) -> bool {
        if self.parked
            || self.ack.id == 0
            || hit.version != self.seen
            || hit.reg != Arc::as_ptr(&self.reg)
        {
            return false;
        }
        // SAFETY: `hit` was found by a lookup at version `self.seen` of
        // this registry, so its line was visible at that version in an
        // array a reader at that version could load. This reader
        // acknowledges that version and is not parked (checked above), so
        // `Versions::oldest_in_use` is at or before it: the line is not
        // reclaimed (its `removed` is after the version) and its array is
        // not freed (retired after the version), and `Hit<'v>` borrows the
        // `View` whose `Arc` keeps the table's arrays from being dropped.
        let line = unsafe { hit.ptr.as_ref() };
        let me = (self.ack.id as u64) << OWNER_SHIFT;
        let w6 = line.w[6].load(Ordering::Relaxed);
        if w6 >> OWNER_SHIFT == 0 {
            // Unclaimed lines have no counts: the writer zeroes both words
            // when it writes a line, and only an owner adds.
            if line.w[6]
                .compare_exchange(
                    w6,
                    me | (packets & COUNT_MASK),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                return false;
            }
        } else if w6 & !COUNT_MASK == me {
            line.w[6].store(
                me | (w6.wrapping_add(packets) & COUNT_MASK),
                Ordering::Relaxed,
            );
        } else {
            return false;
        }
        let b = line.w[7].load(Ordering::Relaxed);
        line.w[7].store(b.wrapping_add(bytes), Ordering::Relaxed);
        true
    }
}

// ---------------------------------------------------------------------------
// Lines and arrays

#[repr(C, align(64))]
struct Line {
    w: [AtomicU64; 8],
}

impl Line {
    fn new() -> Line {
        Line {
            w: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Rewrites the whole line under its `seq` (writer only); the counters
    /// start at 0 and the line's [`SPILL`] bit stays as it was.
    fn write(&self, d: &LineData) {
        let LineData {
            w0,
            w1,
            key,
            actions,
        } = *d;
        let old = self.w[0].load(Ordering::Relaxed);
        let odd = (old.wrapping_add(1)) & SEQ_MASK;
        debug_assert!(odd & 1 == 1);
        self.w[0].store((old & !SEQ_MASK) | odd, Ordering::Relaxed);
        fence(Ordering::Release);
        self.w[1].store(w1, Ordering::Relaxed);
        self.w[2].store(key[0], Ordering::Relaxed);
        self.w[3].store(key[1], Ordering::Relaxed);
        self.w[4].store(actions[0], Ordering::Relaxed);
        self.w[5].store(actions[1], Ordering::Relaxed);
        self.w[6].store(0, Ordering::Relaxed);
        self.w[7].store(0, Ordering::Relaxed);
        let even = (odd + 1) & SEQ_MASK;
        self.w[0].store(
            (w0 & FIELDS) | (old & SPILL) | OCCUPIED | even,
            Ordering::Release,
        );
    }

    /// A consistent copy of words 0–5, `None` when the line is empty.
    #[inline]
    fn read(&self) -> Option<[u64; 6]> {
        loop {
            let s0 = self.w[0].load(Ordering::Acquire);
            // A line never goes back to empty, and the writer fills an
            // empty one only at the pending version, which no reader holds.
            if s0 & OCCUPIED == 0 {
                return None;
            }
            if s0 & 1 != 0 {
                spin();
                continue;
            }
            let w = [
                s0,
                self.w[1].load(Ordering::Relaxed),
                self.w[2].load(Ordering::Relaxed),
                self.w[3].load(Ordering::Relaxed),
                self.w[4].load(Ordering::Relaxed),
                self.w[5].load(Ordering::Relaxed),
            ];
            fence(Ordering::Acquire);
            let s1 = self.w[0].load(Ordering::Relaxed);
            if s1 & SEQ_MASK == s0 & SEQ_MASK {
                return Some(w);
            }
            spin();
        }
    }

    /// The writer's plain reads (it is the only one that writes words
    /// 0–5, so they need no `seq` check).
    fn word(&self, i: usize) -> u64 {
        self.w[i].load(Ordering::Relaxed)
    }

    /// Whether an insert may write the line: empty, or dead.
    fn free(&self) -> bool {
        self.word(0) & OCCUPIED == 0 || dead(self.word(1))
    }

    /// Whether the line is `key`'s live one (`removed` = 0), by the writer.
    fn live_of(&self, key: [u64; 2]) -> bool {
        self.word(0) & OCCUPIED != 0
            && self.word(1) >> 32 == 0
            && self.word(2) == key[0]
            && self.word(3) == key[1]
    }

    /// Sets or clears the line's [`SPILL`] bit (writer only: one store, no
    /// `seq` bump; a reader that read the word before the store acts on
    /// the old bit, which is right for the versions it may hold, see the
    /// module comment, "Placement").
    fn set_spill(&self, on: bool) {
        let w0 = self.word(0);
        let w = if on { w0 | SPILL } else { w0 & !SPILL };
        self.w[0].store(w, Ordering::Release);
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.w[6].load(Ordering::Relaxed) & COUNT_MASK,
            self.w[7].load(Ordering::Relaxed),
        )
    }
}

/// What the writer writes into a line (word 0's priority and slot, word 1,
/// the key and the actions).
#[derive(Clone, Copy)]
struct LineData {
    w0: u64,
    w1: u64,
    key: [u64; 2],
    actions: [u64; 2],
}

impl LineData {
    fn of(l: &Line) -> LineData {
        LineData {
            w0: l.word(0) & FIELDS,
            w1: l.word(1),
            key: [l.word(2), l.word(3)],
            actions: [l.word(4), l.word(5)],
        }
    }
}

struct Array {
    /// Huge-page backed (`packet::huge`): a burst's lookups hit random
    /// lines of an array of up to hundreds of MiB.
    lines: HugeVec<Line>,
    mask: usize,
    /// Set instead of freeing under loom, and asserted clear on every read
    /// of a line, so the model checks that nothing freed is reachable.
    #[cfg(loom)]
    freed: crate::sync::AtomicBool,
}

impl Array {
    fn new(cap: usize) -> Box<Array> {
        debug_assert!(cap.is_power_of_two());
        Box::new(Array {
            lines: {
                let mut v = HugeVec::with_capacity(cap);
                v.extend((0..cap).map(|_| Line::new()));
                v
            },
            mask: cap - 1,
            #[cfg(loom)]
            freed: crate::sync::AtomicBool::new(false),
        })
    }

    #[inline]
    fn line(&self, i: usize) -> &Line {
        &self.lines[i & self.mask]
    }

    /// A consistent copy of line `i`'s words 0–5 (`Line::read`); under
    /// loom, asserts that the array is not freed.
    #[inline]
    fn read(&self, i: usize) -> Option<[u64; 6]> {
        let w = self.line(i).read();
        #[cfg(loom)]
        assert!(
            !self.freed.load(Ordering::SeqCst),
            "a line of a freed array was read"
        );
        w
    }

    /// A reader's (or the writer's) search for the line of `key` (hashing
    /// to `hash`) visible at `v`: its index and words 0–5. Its two
    /// candidate lines, then, when either has the [`SPILL`] bit, the
    /// overflow run.
    #[inline]
    fn find(&self, key: [u64; 2], hash: u64, v: u32) -> Option<(usize, [u64; 6])> {
        let (c0, c1) = candidates(hash, self.mask);
        let mut flags = 0;
        for i in [c0, c1] {
            if let Some(w) = self.read(i) {
                if w[2] == key[0] && w[3] == key[1] && visible(w[1], v) {
                    return Some((i, w));
                }
                flags |= w[0];
            }
        }
        if flags & SPILL == 0 {
            return None;
        }
        self.find_in_run(key, c1, v)
    }

    /// The overflow run's part of [`Array::find`]: the lines after `c1`
    /// up to the first empty one.
    #[cold]
    fn find_in_run(&self, key: [u64; 2], c1: usize, v: u32) -> Option<(usize, [u64; 6])> {
        let mut i = (c1 + 1) & self.mask;
        for _ in 0..self.mask {
            let w = self.read(i)?;
            if w[2] == key[0] && w[3] == key[1] && visible(w[1], v) {
                return Some((i, w));
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// The writer's walk over every line that may hold `key` (hashing to
    /// `hash`), whatever its visibility: the two candidates, and the
    /// overflow run when either has the [`SPILL`] bit. Stops when `f`
    /// returns true.
    fn key_lines(&self, hash: u64, mut f: impl FnMut(usize, &Line) -> bool) {
        let (c0, c1) = candidates(hash, self.mask);
        let mut flags = 0;
        for i in [c0, c1] {
            let l = self.line(i);
            flags |= l.word(0);
            if l.word(0) & OCCUPIED != 0 && f(i, l) {
                return;
            }
        }
        if flags & SPILL == 0 {
            return;
        }
        let mut i = (c1 + 1) & self.mask;
        for _ in 0..self.mask {
            let l = self.line(i);
            if l.word(0) & OCCUPIED == 0 || f(i, l) {
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The candidate lines of the key line `i` holds, by the writer.
    fn candidates_of(&self, sh: &Shared, i: usize) -> (usize, usize) {
        let l = self.line(i);
        candidates(sh.hash([l.word(2), l.word(3)]), self.mask)
    }

    /// Whether line `i` holds a key that has it as a candidate (not an
    /// overflow placement), by the writer (the tests' `check_spill`).
    #[cfg(all(test, not(loom)))]
    fn at_candidate(&self, sh: &Shared, i: usize) -> bool {
        let (c0, c1) = self.candidates_of(sh, i);
        i == c0 || i == c1
    }

    /// Writes `d` into the array: into a free candidate line; else along
    /// a chain of moves that ends in a free line (see [`Array::chain`]),
    /// tried from the first candidate and then from the second; else into
    /// the first free line of the overflow run after the second
    /// candidate. Returns how many empty lines it filled and the overflow
    /// line, if one was taken (the caller sets the [`SPILL`] bits). The
    /// array must have an empty line.
    fn place(
        &self,
        sh: &Shared,
        d: LineData,
        movable: impl Fn(&Line) -> bool,
    ) -> (usize, Option<usize>) {
        let (c0, c1) = candidates(sh.hash(d.key), self.mask);
        if let Some(i) = [c0, c1].into_iter().find(|&i| self.line(i).free()) {
            return (self.fill(i, &d), None);
        }
        let mut chain = Vec::new();
        for start in [c0, c1] {
            if self.chain(sh, start, &movable, &mut chain) {
                // From the free end back: each occupant is written at its
                // other candidate before its own line is overwritten (only
                // the free end can be empty).
                let filled = chain
                    .windows(2)
                    .rev()
                    .map(|w| self.fill(w[1], &LineData::of(self.line(w[0]))))
                    .sum();
                self.line(start).write(&d);
                return (filled, None);
            }
        }
        let mut i = (c1 + 1) & self.mask;
        while !self.line(i).free() {
            i = (i + 1) & self.mask;
        }
        debug_assert!(i != c0 && i != c1, "an overflow line at a candidate");
        (self.fill(i, &d), Some(i))
    }

    /// Writes `d` into line `i`: 1 when the line was empty, else 0.
    fn fill(&self, i: usize, d: &LineData) -> usize {
        let l = self.line(i);
        let empty = usize::from(l.word(0) & OCCUPIED == 0);
        l.write(d);
        empty
    }

    /// Finds, in `chain`, lines `start = p0, p1, ..., pk` where each `pj`
    /// before the last holds a live key at one of its candidates that
    /// `movable` allows, `pj+1` is that key's other candidate, and `pk`
    /// is free: moving each occupant one step along frees `start`. At
    /// most [`MAX_KICKS`] moves, and no line twice (with one line a key's
    /// place, a chain that comes back to a line has met a cycle). An
    /// occupant that cannot move ends the chain; so does one whose other
    /// candidate holds another line of its own key that cannot move (a
    /// key modified while readers see its earlier line), which the chain
    /// from the key's other candidate then goes around.
    fn chain(
        &self,
        sh: &Shared,
        start: usize,
        movable: &impl Fn(&Line) -> bool,
        chain: &mut Vec<usize>,
    ) -> bool {
        chain.clear();
        let mut at = start;
        while chain.len() <= MAX_KICKS {
            // `at` is not free (a candidate of a key with none free, or a
            // `next` found taken): occupied, and not dead.
            chain.push(at);
            if !movable(self.line(at)) {
                return false;
            }
            let (a, b) = self.candidates_of(sh, at);
            let next = if at == a {
                b
            } else if at == b {
                a
            } else {
                return false;
            };
            if self.line(next).free() {
                chain.push(next);
                return true;
            }
            if chain.contains(&next) {
                return false;
            }
            at = next;
        }
        false
    }
}

/// The writer's record of overflow placements in one array: for each
/// line with the [`SPILL`] bit, the overflow lines (not dead) of keys
/// that have it as a candidate.
#[derive(Default)]
struct Spill {
    waiting: HashMap<usize, Vec<usize>>,
    lines: usize,
}

impl Spill {
    /// Records overflow line `o` and sets the bits of its key's candidates.
    fn add(&mut self, a: &Array, sh: &Shared, o: usize) {
        let (c0, c1) = a.candidates_of(sh, o);
        for c in [c0, c1] {
            self.waiting.entry(c).or_default().push(o);
            a.line(c).set_spill(true);
        }
        self.lines += 1;
    }

    /// Line `o` is dead now: when it was an overflow line, forgets it and
    /// clears the bits that no other overflow line needs.
    fn dead(&mut self, a: &Array, sh: &Shared, o: usize) {
        let (c0, c1) = a.candidates_of(sh, o);
        if o == c0 || o == c1 {
            return;
        }
        for c in [c0, c1] {
            if let Some(v) = self.waiting.get_mut(&c) {
                v.retain(|&x| x != o);
                if v.is_empty() {
                    self.waiting.remove(&c);
                    a.line(c).set_spill(false);
                }
            }
        }
        self.lines -= 1;
    }
}

/// An owned array pointer kept by the table until it is freed.
struct ArrayPtr(NonNull<Array>);

// SAFETY: an `Array` is made of atomics (it is `Send` and `Sync`); the
// pointer is owned (made by `Box::into_raw`, freed once by `Box::from_raw`
// in `free_array`), so sending or sharing it is sending or sharing a
// `Box<Array>`.
unsafe impl Send for ArrayPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for ArrayPtr {}

/// Frees an array the table no longer reaches (under loom: poisons it and
/// keeps it, freed with the table).
fn free_array(p: ArrayPtr, graveyard: &mut Vec<ArrayPtr>) {
    #[cfg(loom)]
    {
        // SAFETY: `p` is owned and not freed yet (see `ArrayPtr`).
        unsafe { p.0.as_ref() }.freed.store(true, Ordering::SeqCst);
        graveyard.push(p);
    }
    #[cfg(not(loom))]
    {
        let _ = graveyard;
        // SAFETY: `p` came from `Box::into_raw`, is freed only here, once,
        // and no reader can reach it any more: the caller frees only
        // arrays retired at or before the oldest version in use (see the
        // module comment, "Reclaiming"), or everything when the last `Arc`
        // of the table goes (no `View`, so no reader, and no writer).
        drop(unsafe { Box::from_raw(p.0.as_ptr()) });
    }
}

struct Shared {
    reg: Arc<Registry>,
    current: AtomicPtr<Array>,
    key_words: usize,
    seed: u64,
    /// Arrays replaced by a rebuild, with the version that retired them.
    retired: Mutex<Vec<(u32, ArrayPtr)>>,
    /// Poisoned arrays (loom only; empty otherwise).
    graveyard: Mutex<Vec<ArrayPtr>>,
}

impl Shared {
    #[inline]
    fn hash(&self, key: [u64; 2]) -> u64 {
        hash_words(&key[..self.key_words], self.seed)
    }

    fn key(&self, key: &[u64]) -> [u64; 2] {
        assert_eq!(key.len(), self.key_words, "key of the wrong width");
        [key[0], key.get(1).copied().unwrap_or(0)]
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let mut grave = std::mem::take(self.graveyard.get_mut().unwrap_or_else(|e| e.into_inner()));
        if let Some(p) = NonNull::new(self.current.load(Ordering::Acquire)) {
            grave.push(ArrayPtr(p));
        }
        let retired = std::mem::take(self.retired.get_mut().unwrap_or_else(|e| e.into_inner()));
        grave.extend(retired.into_iter().map(|(_, p)| p));
        for p in grave {
            // SAFETY: the last `Arc` of the table is going: no `View`
            // (hence no lookup, and no `Hit`, which borrows a `View`) and
            // no `Table` remains, so nothing reaches these arrays; each was
            // made by `Box::into_raw` and is listed once.
            drop(unsafe { Box::from_raw(p.0.as_ptr()) });
        }
    }
}

// ---------------------------------------------------------------------------
// The table

/// What a lookup found: a consistent copy of a line visible at the
/// reader's version, and where to count it ([`Reader::count`]). Valid for
/// the reader's current burst only; it borrows the [`View`] it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit<'v> {
    /// The entry's priority.
    pub priority: u16,
    /// The entry's slot (the caller's entry number).
    pub slot: u32,
    /// The two action words.
    pub actions: [u64; 2],
    /// The line's index in the array it was found in.
    pub line: usize,
    version: u32,
    ptr: NonNull<Line>,
    reg: *const Registry,
    view: PhantomData<&'v View>,
}

/// What [`View::lookup_first`] found in a key's first candidate line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum First<'v> {
    /// The key's line visible at the reader's version.
    Hit(Hit<'v>),
    /// The first candidate is empty: no line holds the key.
    Absent,
    /// The key may be further: its second candidate is prefetched now;
    /// finish with [`View::lookup_hashed`].
    Later,
}

/// What the writer's own lookup ([`Table::lookup_at`]) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The entry's priority.
    pub priority: u16,
    /// The entry's slot.
    pub slot: u32,
    /// The two action words.
    pub actions: [u64; 2],
}

fn entry_of(w: &[u64; 6]) -> Entry {
    Entry {
        priority: (w[0] >> PRIO_SHIFT) as u16,
        slot: (w[0] >> SLOT_SHIFT) as u32,
        actions: [w[4], w[5]],
    }
}

/// A reader's handle on a table: lookups at a [`Reader`]'s version.
#[derive(Clone)]
pub struct View {
    sh: Arc<Shared>,
}

impl View {
    /// The line of `key` (as many words as the table's keys) visible at
    /// `r`'s version. Panics when `r` is parked or of other versions than
    /// the table's.
    #[inline]
    pub fn lookup<'v>(&'v self, r: &Reader, key: &[u64]) -> Option<Hit<'v>> {
        let k = self.sh.key(key);
        self.find(r, k, self.sh.hash(k))
    }

    /// The first step of a burst's lookup: `key`'s hash, with its first
    /// candidate line prefetched. Then [`View::lookup_first`] with the
    /// hash, the same key and reader (the array may change in between:
    /// the prefetch is only a hint). Panics as [`View::lookup`] does.
    ///
    /// A burst reads first candidates only, and second lines only for
    /// the keys not found there: most keys sit at their first candidate
    /// (73 % of 1M gateway keys in 2M lines, 80 % of 100K in 256K), so a
    /// packet asks for about 1.3 lines instead of 2. With both
    /// candidates prefetched up front, `fulmar bench gateway-vlan2mpls
    /// --reference --reference-lines` took 43-44 ns a packet at 1M rules
    /// and 29.5 at 100K; in two passes, 33-35 and 25-26.
    #[inline]
    pub fn prefetch(&self, r: &Reader, key: &[u64]) -> u64 {
        let k = self.sh.key(key);
        let hash = self.sh.hash(k);
        let a = self.array(r);
        crate::subtable::prefetch(a.line(candidates(hash, a.mask).0));
        hash
    }

    /// The second step: `key` in its first candidate line. When it is not
    /// there, [`First::Later`] prefetches the second, and the burst finishes
    /// the key with [`View::lookup_hashed`] after its other keys' first
    /// steps.
    #[inline]
    pub fn lookup_first<'v>(&'v self, r: &Reader, key: &[u64], hash: u64) -> First<'v> {
        let k = self.sh.key(key);
        let a = self.array(r);
        let (c0, c1) = candidates(hash, a.mask);
        match a.read(c0) {
            // An insert takes the first candidate whenever it is free, and
            // a line never becomes empty again: a key whose first
            // candidate is empty was never placed anywhere else.
            None => First::Absent,
            Some(w) if w[2] == k[0] && w[3] == k[1] && visible(w[1], r.seen) => {
                First::Hit(self.hit(r, a, c0, &w))
            }
            Some(_) => {
                crate::subtable::prefetch(a.line(c1));
                First::Later
            }
        }
    }

    /// The whole lookup of `key` given its hash (from [`View::prefetch`]):
    /// what [`View::lookup`] answers.
    #[inline]
    pub fn lookup_hashed<'v>(&'v self, r: &Reader, key: &[u64], hash: u64) -> Option<Hit<'v>> {
        self.find(r, self.sh.key(key), hash)
    }

    /// The array a lookup by `r` reads. Panics when `r` is parked or of
    /// other versions than the table's.
    #[inline]
    fn array(&self, r: &Reader) -> &Array {
        assert!(!r.parked, "lookup by a parked reader");
        assert!(
            Arc::ptr_eq(&r.reg, &self.sh.reg),
            "a reader of other versions than the table's"
        );
        let ptr = self.sh.current.load(Ordering::Acquire);
        // SAFETY: `r` acknowledges `r.seen` and is not parked (asserted
        // above), and this load comes after the version load that
        // acknowledgement was made from, so the array is the current one
        // at `r.seen` or a newer one; it is retired, if ever, at a version
        // after `r.seen`, and freed only once every unparked reader
        // acknowledges that version or a later one (`Table::reclaim`).
        // `r` is borrowed for as long as the reference is used (within
        // the calling lookup; `Hit` keeps a raw pointer, used under the
        // same condition in `Reader::count`), so it cannot refresh or park
        // meanwhile.
        unsafe { &*ptr }
    }

    #[inline]
    fn find<'v>(&'v self, r: &Reader, k: [u64; 2], hash: u64) -> Option<Hit<'v>> {
        let a = self.array(r);
        let (i, w) = a.find(k, hash, r.seen)?;
        Some(self.hit(r, a, i, &w))
    }

    /// The hit on line `i` of `a` (read as `w`) by `r`.
    #[inline]
    fn hit<'v>(&'v self, r: &Reader, a: &Array, i: usize, w: &[u64; 6]) -> Hit<'v> {
        let e = entry_of(w);
        Hit {
            priority: e.priority,
            slot: e.slot,
            actions: e.actions,
            line: i,
            version: r.seen,
            ptr: NonNull::from(a.line(i)),
            reg: Arc::as_ptr(&r.reg),
            view: PhantomData,
        }
    }
}

/// What [`Table::reclaim`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// The oldest version in use it reclaimed up to (`None`: a reader was
    /// leaving the parked state, nothing was reclaimed).
    pub oldest: Option<u32>,
    /// Tombstones made dead (reusable).
    pub lines: usize,
    /// Retired arrays freed.
    pub arrays: usize,
    /// Lines settled (`added` = 0) by a settle sweep.
    pub settled: usize,
    /// A reader lags the published version by [`MAX_LAG`] or more: the
    /// serial comparison's premise is broken (see the module comment).
    pub lagging: bool,
}

/// The writer's side of one table (single writer; the same thread as its
/// [`Versions`]).
pub struct Table {
    sh: Arc<Shared>,
    /// Occupied lines of the current array (live, tombstones, dead).
    used: usize,
    /// Live lines (`removed` = 0).
    live: usize,
    /// Tombstones of the current array not yet made dead: (removed, line).
    tombs: Vec<(u32, usize)>,
    /// Overflow placements of the current array.
    spill: Spill,
    /// Counts of lines the table no longer holds, per entry slot.
    folded: HashMap<u32, (u64, u64)>,
    last_settle: u32,
    settle_every: u32,
}

impl Table {
    /// An empty table of keys of `key_words` words (1 or 2), versioned by
    /// `versions`.
    pub fn new(versions: &Versions, key_words: usize) -> Table {
        Self::with_capacity(versions, key_words, 0)
    }

    /// An empty table sized for `n` entries without growing (at most half
    /// full).
    pub fn with_capacity(versions: &Versions, key_words: usize, n: usize) -> Table {
        assert!((1..=2).contains(&key_words), "keys of 1 or 2 words");
        let cap = (n.saturating_mul(2) + 1).next_power_of_two().max(MIN_CAP);
        let array = Box::into_raw(Array::new(cap));
        Table {
            sh: Arc::new(Shared {
                reg: versions.reg.clone(),
                current: AtomicPtr::new(array),
                key_words,
                seed: 0x9d_2c_5f_11_7a_e4_03_b9 ^ key_words as u64,
                retired: Mutex::new(Vec::new()),
                graveyard: Mutex::new(Vec::new()),
            }),
            used: 0,
            live: 0,
            tombs: Vec::new(),
            spill: Spill::default(),
            folded: HashMap::new(),
            last_settle: versions.version(),
            settle_every: SETTLE_EVERY,
        }
    }

    /// A reader's handle on this table.
    pub fn view(&self) -> View {
        View {
            sh: self.sh.clone(),
        }
    }

    /// Sets the settle sweep's period (tests use a short one).
    pub fn set_settle_every(&mut self, versions: u32) {
        assert!(versions > 0 && versions <= SETTLE_EVERY);
        self.settle_every = versions;
    }

    /// The current array.
    fn array(&self) -> &Array {
        // SAFETY: the writer frees an array only after retiring it (it is
        // then no longer `current`) or when the table is dropped, in both
        // cases with `&mut self`, so the current array lives at least as
        // long as this borrow of `self`.
        unsafe { &*self.sh.current.load(Ordering::Acquire) }
    }

    fn pending(&self) -> u32 {
        next_version(self.sh.reg.version32())
    }

    /// Live entries (visible at the pending version).
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no entry is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Lines of the current array.
    pub fn capacity(&self) -> usize {
        self.array().mask + 1
    }

    /// Tombstones not yet reclaimed.
    pub fn tombstones(&self) -> usize {
        self.tombs.len()
    }

    /// Lines of the current array in the overflow run (not dead): keys
    /// that a lookup finds past their two candidate lines.
    pub fn spilled(&self) -> usize {
        self.spill.lines
    }

    /// Retired arrays not yet freed.
    pub fn retired(&self) -> usize {
        self.sh
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Checks the overflow record against the array (tests): every line
    /// that is not dead and not at one of its key's candidates is recorded
    /// under both candidates, which have the [`SPILL`] bit, and every line
    /// with the bit has a record; `used` counts the occupied lines.
    #[cfg(all(test, not(loom)))]
    fn check_spill(&self) {
        let a = self.array();
        let mut over = 0;
        let mut used = 0;
        for (i, l) in a.lines.iter().enumerate() {
            let w0 = l.word(0);
            if w0 & OCCUPIED == 0 {
                assert_eq!(w0 & SPILL, 0, "line {i}: empty with the bit");
                continue;
            }
            used += 1;
            assert_eq!(
                w0 & SPILL != 0,
                self.spill.waiting.contains_key(&i),
                "line {i}: the bit and the record disagree"
            );
            if dead(l.word(1)) || a.at_candidate(&self.sh, i) {
                continue;
            }
            over += 1;
            let (c0, c1) = a.candidates_of(&self.sh, i);
            for c in [c0, c1] {
                assert!(
                    self.spill.waiting.get(&c).is_some_and(|v| v.contains(&i)),
                    "overflow line {i} not recorded under its candidate {c}"
                );
            }
        }
        assert_eq!(over, self.spill.lines);
        assert_eq!(used, self.used);
    }

    /// The key's live line in the current array.
    fn live_line(&self, key: [u64; 2]) -> Option<usize> {
        let mut at = None;
        self.array().key_lines(self.sh.hash(key), |i, l| {
            if l.live_of(key) {
                at = Some(i);
            }
            at.is_some()
        });
        at
    }

    /// Writes a new live line for `key` at the pending version (see the
    /// module comment, "Placement"), growing the array first when no
    /// candidate is free and it is half full.
    fn place(&mut self, key: [u64; 2], priority: u16, slot: u32, actions: [u64; 2]) {
        assert!(
            slot < 1 << SLOT_BITS,
            "entry slot wider than {SLOT_BITS} bits"
        );
        let (c0, c1) = candidates(self.sh.hash(key), self.array().mask);
        let free = self.array().line(c0).free() || self.array().line(c1).free();
        if !free && (self.used + 1) * 2 > self.capacity() {
            self.rebuild();
        }
        let pending = self.pending();
        let d = LineData {
            w0: (priority as u64) << PRIO_SHIFT | (slot as u64) << SLOT_SHIFT,
            w1: versions_word(pending, 0),
            key,
            actions,
        };
        // Only lines added at the pending version move: no reader can see
        // them yet, so rewriting them elsewhere changes nothing it finds.
        let sh = self.sh.clone();
        // SAFETY: as in `Table::array`; `self.spill` and `self.used` are
        // written below, never the array pointer.
        let a = unsafe { &*sh.current.load(Ordering::Acquire) };
        let (filled, over) = a.place(&sh, d, |l| l.word(1) == versions_word(pending, 0));
        self.used += filled;
        if let Some(o) = over {
            self.spill.add(a, &sh, o);
        }
    }

    /// Adds `key` at the pending version; false (and nothing done) when
    /// the key has a live line.
    pub fn insert(&mut self, key: &[u64], priority: u16, slot: u32, actions: [u64; 2]) -> bool {
        let k = self.sh.key(key);
        if self.live_line(k).is_some() {
            return false;
        }
        self.place(k, priority, slot, actions);
        self.live += 1;
        true
    }

    /// Ends line `i` (a live one) at the pending version: a tombstone, or
    /// dead at once when it was added at the pending version.
    fn end(&mut self, i: usize) {
        let v = self.pending();
        let sh = self.sh.clone();
        // SAFETY: as in `Table::place`.
        let a = unsafe { &*sh.current.load(Ordering::Acquire) };
        let l = a.line(i);
        let added = l.word(1) as u32;
        l.w[1].store(versions_word(added, v), Ordering::Release);
        if added != v {
            self.tombs.push((v, i));
        } else {
            self.spill.dead(a, &sh, i);
        }
    }

    /// Replaces the key's live line from the pending version on: readers
    /// at the published version keep the old line, readers at the next
    /// one get the new. False when the key has no live line.
    pub fn modify(&mut self, key: &[u64], priority: u16, slot: u32, actions: [u64; 2]) -> bool {
        let k = self.sh.key(key);
        let Some(i) = self.live_line(k) else {
            return false;
        };
        self.end(i);
        self.place(k, priority, slot, actions);
        true
    }

    /// Removes the key at the pending version (a tombstone: readers at the
    /// published version still find it). False when it has no live line.
    pub fn remove(&mut self, key: &[u64]) -> bool {
        let k = self.sh.key(key);
        let Some(i) = self.live_line(k) else {
            return false;
        };
        self.end(i);
        self.live -= 1;
        true
    }

    /// The entry of `key` visible at `version`, by the writer. Exact for
    /// versions from the oldest in use at the last reclaim to the pending
    /// one (older tombstones may be dead by then).
    pub fn lookup_at(&self, key: &[u64], version: u32) -> Option<Entry> {
        let k = self.sh.key(key);
        self.array()
            .find(k, self.sh.hash(k), version)
            .map(|(_, w)| entry_of(&w))
    }

    /// Packets and bytes counted on `key`'s lines of entry `slot`: the
    /// lines of the current and retired arrays, plus what was folded from
    /// lines and arrays no longer held. Counts a reader is adding at this
    /// moment may be seen in part (packets before bytes).
    pub fn counters(&self, key: &[u64], slot: u32) -> (u64, u64) {
        let k = self.sh.key(key);
        let hash = self.sh.hash(k);
        let (mut p, mut b) = self.folded.get(&slot).copied().unwrap_or((0, 0));
        let mut add = |a: &Array| {
            a.key_lines(hash, |_, l| {
                if l.word(2) == k[0]
                    && l.word(3) == k[1]
                    && (l.word(0) >> SLOT_SHIFT) as u32 == slot
                {
                    let (lp, lb) = l.counts();
                    p += lp;
                    b += lb;
                }
                false
            });
        };
        add(self.array());
        for (_, r) in self
            .sh
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            // SAFETY: a retired array is freed only by `reclaim`, which
            // takes `&mut self`; it is alive during this `&self` call.
            add(unsafe { r.0.as_ref() });
        }
        (p, b)
    }

    /// Takes (and forgets) the counts folded for entry `slot`: call it once
    /// the entry is removed and reclaimed, before the slot number is used
    /// for another entry.
    pub fn take_counters(&mut self, slot: u32) -> (u64, u64) {
        self.folded.remove(&slot).unwrap_or((0, 0))
    }

    fn fold(folded: &mut HashMap<u32, (u64, u64)>, l: &Line) {
        let (p, b) = l.counts();
        if p != 0 || b != 0 {
            let slot = (l.word(0) >> SLOT_SHIFT) as u32;
            let e = folded.entry(slot).or_insert((0, 0));
            e.0 += p;
            e.1 += b;
        }
    }

    /// Reclaims what no reader can reach any more: tombstones removed at or
    /// before the oldest version in use become dead (reusable), their
    /// counts folded; arrays retired at or before it are freed, theirs
    /// folded. A line made dead that is a candidate of a key in the
    /// overflow run takes that key back (moved as a modify is, at the
    /// pending version: published with the next version, and invisible in
    /// what any lookup answers). Runs the settle sweep when it is due.
    pub fn reclaim(&mut self) -> Reclaimed {
        let Some(oldest) = self.sh.reg.oldest_in_use().map(|v| v as u32) else {
            return Reclaimed::default();
        };
        let pending = self.pending();
        let mut r = Reclaimed {
            oldest: Some(oldest),
            lagging: pending.wrapping_sub(oldest) >= MAX_LAG,
            ..Reclaimed::default()
        };
        // Tombstones.
        let sh = self.sh.clone();
        // SAFETY: as in `Table::array`: the current array is freed only
        // with `&mut self`, which this function holds and does not use to
        // free the current array.
        let a = unsafe { &*sh.current.load(Ordering::Acquire) };
        let folded = &mut self.folded;
        let spill = &mut self.spill;
        let mut freed = Vec::new();
        self.tombs.retain(|&(removed, i)| {
            if !serial_le(removed, oldest) {
                return true;
            }
            let l = a.line(i);
            // No reader can count on the line any more: a count needs a
            // hit at the counting reader's version, every such version is
            // at or past `removed`, and the line is invisible there.
            Self::fold(folded, l);
            l.w[6].store(0, Ordering::Relaxed);
            l.w[7].store(0, Ordering::Relaxed);
            l.w[1].store(versions_word(removed, removed), Ordering::Release);
            spill.dead(a, &sh, i);
            freed.push(i);
            r.lines += 1;
            false
        });
        // Keys of the overflow run back to their candidate lines.
        for i in freed {
            let back = self
                .spill
                .waiting
                .get(&i)
                .and_then(|v| v.iter().copied().find(|&o| a.line(o).word(1) >> 32 == 0));
            if let (Some(o), true) = (back, a.line(i).free()) {
                let mut d = LineData::of(a.line(o));
                d.w1 = versions_word(pending, 0);
                a.line(i).write(&d);
                self.end(o);
            }
        }
        // Retired arrays.
        let folded = &mut self.folded;
        let mut retired = sh.retired.lock().unwrap_or_else(|e| e.into_inner());
        let mut grave = sh.graveyard.lock().unwrap_or_else(|e| e.into_inner());
        let mut keep = Vec::with_capacity(retired.len());
        for (v, p) in retired.drain(..) {
            if serial_le(v, oldest) {
                // SAFETY: `p` is owned and not freed yet; readers no longer
                // write its counters (every reader is at or past `v`, so
                // none holds a hit in it), and reads are all atomic.
                let old = unsafe { p.0.as_ref() };
                for l in old.lines.iter() {
                    if l.word(0) & OCCUPIED != 0 {
                        Self::fold(folded, l);
                    }
                }
                free_array(p, &mut grave);
                r.arrays += 1;
            } else {
                keep.push((v, p));
            }
        }
        *retired = keep;
        drop(grave);
        drop(retired);
        // Settle.
        if pending.wrapping_sub(self.last_settle) >= self.settle_every {
            for l in a.lines.iter() {
                if l.word(0) & OCCUPIED == 0 {
                    continue;
                }
                let w1 = l.word(1);
                let added = w1 as u32;
                if added != 0 && !dead(w1) && serial_le(added, oldest) {
                    l.w[1].store(w1 & !0xffff_ffff, Ordering::Release);
                    r.settled += 1;
                }
            }
            self.last_settle = pending;
        }
        r
    }

    /// Copies every line that is not dead into a new array (of at least
    /// twice as many lines as it copies, placed afresh: any line may move
    /// there, no reader sees it yet), swaps the array pointer, and retires
    /// the old array at the pending version (freed by a later
    /// [`Table::reclaim`]). Reclaims first, so that what can be dropped is.
    pub fn rebuild(&mut self) {
        self.reclaim();
        let sh = self.sh.clone();
        let keep: Vec<LineData> = self
            .array()
            .lines
            .iter()
            .filter(|l| l.word(0) & OCCUPIED != 0 && !dead(l.word(1)))
            .map(LineData::of)
            .collect();
        let n = keep.len();
        let cap = ((n + 1) * 2).next_power_of_two().max(MIN_CAP);
        let new = Array::new(cap);
        let mut spill = Spill::default();
        for d in keep {
            if let (_, Some(o)) = new.place(&sh, d, |_| true) {
                spill.add(&new, &sh, o);
            }
        }
        let mut tombs = Vec::new();
        for (i, l) in new.lines.iter().enumerate() {
            let w1 = l.word(1);
            if l.word(0) & OCCUPIED != 0 && w1 >> 32 != 0 {
                tombs.push(((w1 >> 32) as u32, i));
            }
        }
        let v = self.pending();
        tombs.sort_by_key(|&(r, _)| r.wrapping_sub(v));
        self.used = n;
        self.tombs = tombs;
        self.spill = spill;
        let new = Box::into_raw(new);
        // The swap comes before the publish of `v`, so a reader at `v` or
        // later loads the new array.
        let old = self.sh.current.swap(new, Ordering::AcqRel);
        let old = ArrayPtr(NonNull::new(old).expect("the current array is never null"));
        self.sh
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((v, old));
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod loom;
