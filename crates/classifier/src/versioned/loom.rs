//! loom models of the protocol (`scripts/loom.sh`): one writer against one
//! or two readers, every interleaving up to a preemption bound. Each line
//! the writer writes holds `[key, version added at]` as its actions, so a
//! reader checks that what it found is whole and belongs to its version;
//! arrays are poisoned rather than freed under loom, and every line read
//! asserts that its array is not (`Array::find`).
//!
//! The writer runs on the model's main thread and the readers on spawned
//! ones, so the first schedule loom tries has the writer's stores before
//! the readers' loads, and loom backtracks from each load to the store it
//! read. The other way round it can miss interleavings: loom 0.7 keeps one
//! last access per atomic, so a writer's load between a reader's load and
//! the writer's store hides that pair (a seqlock model with the reader on
//! the main thread ran one schedule and missed a deliberately broken
//! `seq`).
#![cfg(loom)]

use super::*;
use ::loom::thread;

/// Runs `f` under loom: every interleaving with at most `bound`
/// preemptions (LOOM_MAX_PREEMPTIONS overrides it). The bounds below keep
/// each model to about twenty seconds on one core: 4 for one reader, 2 for
/// two (at 3 the two-reader model takes minutes).
fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = ::loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

/// What key 1 looks like at each version in the models below: `None`, or
/// the version its line was added at.
fn check(view: &View, r: &Reader, expect: &dyn Fn(u32) -> Option<u32>) {
    let v = r.version();
    let got = view.lookup(r, &[1]);
    match (got, expect(v)) {
        (None, None) => {}
        (Some(h), Some(added)) => {
            assert_eq!(h.actions, [1, added as u64], "key 1 at {v}");
            assert_eq!(h.priority as u32, added, "a line mixed from two writes");
        }
        (got, want) => panic!("key 1 at {v}: found {got:?}, want added at {want:?}"),
    }
}

/// The start of the models that change key 1 once: the key added at the
/// first pending version `v1` and published, and what a lookup finds
/// at `v1` and at `v1 + 1` (after [`modify_rebuild_publish`]).
fn key_added() -> (
    Versions,
    Table,
    impl Fn(u32) -> Option<u32> + Copy + Send + 'static,
) {
    let mut vs = Versions::new();
    let mut t = Table::new(&vs, 1);
    let v1 = vs.pending();
    t.insert(&[1], v1 as u16, 1, [1, v1 as u64]);
    vs.publish();
    let v2 = v1 + 1;
    let expect = move |v: u32| match v {
        v if v == v1 => Some(v1),
        v if v == v2 => Some(v2),
        _ => unreachable!("version {v}"),
    };
    (vs, t, expect)
}

/// The writer's change of those models: key 1 modified at the pending
/// version, the array rebuilt (the old one retired at it), published.
fn modify_rebuild_publish(vs: &mut Versions, t: &mut Table) {
    let v = vs.pending();
    t.modify(&[1], v as u16, 1, [1, v as u64]);
    t.rebuild();
    vs.publish();
}

/// Insert, modify, remove, reclaim and reuse of the dead line, against a
/// reader refreshing and looking up twice.
#[test]
fn modify_remove_reuse() {
    model(4, || {
        let mut vs = Versions::new();
        let mut t = Table::new(&vs, 1);
        let v1 = vs.pending();
        t.insert(&[1], v1 as u16, 1, [1, v1 as u64]);
        vs.publish();
        let (v2, v3, v4) = (v1 + 1, v1 + 2, v1 + 3);
        let expect = move |v: u32| match v {
            v if v == v1 => Some(v1),
            v if v == v2 => Some(v2),
            v if v == v3 => None,
            v if v == v4 => Some(v4),
            _ => unreachable!("version {v}"),
        };
        let mut r = vs.reader();
        let view = t.view();
        let reader = thread::spawn(move || {
            for _ in 0..2 {
                r.refresh();
                check(&view, &r, &expect);
            }
        });
        t.modify(&[1], v2 as u16, 1, [1, v2 as u64]);
        vs.publish();
        t.remove(&[1]);
        vs.publish();
        t.reclaim();
        t.insert(&[1], v4 as u16, 1, [1, v4 as u64]);
        vs.publish();
        reader.join().unwrap();
    });
}

/// A rebuild (the array pointer swapped, the old array retired) and
/// reclaims that free it as soon as the reader moves past, against a
/// reader that looks up, parks, wakes and looks up again.
#[test]
fn rebuild_retire_free_with_park() {
    model(4, || {
        let (mut vs, mut t, expect) = key_added();
        let mut r = vs.reader();
        let view = t.view();
        let reader = thread::spawn(move || {
            r.refresh();
            check(&view, &r, &expect);
            r.park();
            r.refresh();
            check(&view, &r, &expect);
        });
        modify_rebuild_publish(&mut vs, &mut t);
        t.reclaim();
        t.reclaim();
        reader.join().unwrap();
    });
}

/// Reclaiming against a reader that wakes (`readers.rs`): the writer
/// frees the array a rebuild retired as soon as no unparked reader can
/// be before it; a reader parked at that moment that wakes meanwhile must
/// never reach the freed array (`Array::find` asserts that). It fails
/// when `reclaim` frees a retired array whatever the readers hold; it
/// does not find a missing fence between a waking reader's `UNPARKING`
/// store and its load of the version (the barrier model below does).
#[test]
fn reclaim_against_a_waking_reader() {
    model(4, || {
        let (mut vs, mut t, expect) = key_added();
        let mut r = vs.reader();
        r.park();
        let view = t.view();
        let reader = thread::spawn(move || {
            r.refresh();
            check(&view, &r, &expect);
        });
        modify_rebuild_publish(&mut vs, &mut t);
        t.reclaim();
        reader.join().unwrap();
    });
}

/// Two readers, each refreshing once and looking up, while the writer
/// modifies, rebuilds, publishes and reclaims; then each counts on its hit
/// (one owner per line).
#[test]
fn two_readers_and_counters() {
    model(2, || {
        let (mut vs, mut t, expect) = key_added();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let mut r = vs.reader();
                let view = t.view();
                thread::spawn(move || {
                    r.refresh();
                    check(&view, &r, &expect);
                    let h = view.lookup(&r, &[1]).unwrap();
                    r.count(&h, 1, 10)
                })
            })
            .collect();
        modify_rebuild_publish(&mut vs, &mut t);
        t.reclaim();
        let owned: usize = readers
            .into_iter()
            .map(|h| h.join().unwrap() as usize)
            .sum();
        assert!(owned >= 1, "at least one reader owns a line");
        t.reclaim();
        // Both lines' counts, wherever they were counted and folded.
        let (p, b) = t.counters(&[1], 1);
        assert_eq!((p, b), (owned as u64, 10 * owned as u64));
    });
}

/// Three one-word keys for a table of 8 lines: the first two, inserted
/// into the empty table in order, take both candidate lines of the third.
fn overflow_triple(t: &Table) -> [u64; 3] {
    let mask = t.capacity() - 1;
    let cand = |k: u64| candidates(t.sh.hash([k, 0]), mask);
    for c in 1..64u64 {
        let (c0, c1) = cand(c);
        for a in (1..64u64).filter(|&a| a != c) {
            // `a` goes to its first candidate.
            if cand(a).0 != c0 {
                continue;
            }
            for b in (1..64u64).filter(|&b| b != a && b != c) {
                let (b0, b1) = cand(b);
                // `b` goes to its first candidate unless `a` has it.
                let at = if b0 == c0 { b1 } else { b0 };
                if at == c1 {
                    return [a, b, c];
                }
            }
        }
    }
    unreachable!("no three keys overflow a table of {} lines", mask + 1)
}

/// The overflow run and its bits: keys `a` and `b` take both candidate
/// lines of `c`, so the writer puts `c` in the overflow run and sets the
/// bits of its candidates before publishing it, then removes it and, once
/// the reader has moved past, reclaims its line and clears the bits. A
/// reader refreshing and looking up twice must find `c` exactly at the
/// version it was live at, and `a` and `b` always. It fails when the bits
/// are set after the publish, or cleared before reclaim may.
#[test]
fn overflow_bits_publish_and_clear_with_the_key() {
    model(3, || {
        let mut vs = Versions::new();
        let mut t = Table::with_capacity(&vs, 1, 3);
        assert_eq!(t.capacity(), 8);
        let [a, b, c] = overflow_triple(&t);
        t.insert(&[a], 1, 1, [a, 0]);
        t.insert(&[b], 1, 2, [b, 0]);
        let v1 = vs.publish();
        let (v2, v3) = (v1 + 1, v1 + 2);
        let mut r = vs.reader();
        let view = t.view();
        let reader = thread::spawn(move || {
            for _ in 0..2 {
                r.refresh();
                let v = r.version();
                for k in [a, b] {
                    assert_eq!(view.lookup(&r, &[k]).map(|h| h.actions), Some([k, 0]));
                }
                let want = (v == v2).then_some([c, v2 as u64]);
                assert_eq!(
                    view.lookup(&r, &[c]).map(|h| h.actions),
                    want,
                    "key {c} at {v}"
                );
            }
        });
        t.insert(&[c], 1, 3, [c, v2 as u64]);
        assert_eq!(t.spilled(), 1);
        vs.publish();
        t.remove(&[c]);
        assert_eq!(vs.publish(), v3);
        t.reclaim();
        reader.join().unwrap();
        t.reclaim();
    });
}

/// The seqlock alone: a writer rewriting one line twice against a reader
/// reading it. The table's writer never rewrites a line a reader could
/// take (see the module comment), so the models above cannot tell whether
/// the `seq` check works; this one can: every word of a line written here
/// comes from one value, and a read must return words of one write.
#[test]
fn seqlock_reads_whole_lines() {
    model(4, || {
        let line = Arc::new(Line::new());
        let l = line.clone();
        let reader = thread::spawn(move || {
            if let Some(w) = l.read() {
                let x = (w[0] >> PRIO_SHIFT) & 0xffff;
                assert_eq!(w[1..], [x; 5], "a line mixed from two writes");
            }
        });
        for x in 1..=2u64 {
            line.write(&LineData {
                w0: x << PRIO_SHIFT,
                w1: x,
                key: [x, x],
                actions: [x, x],
            });
        }
        reader.join().unwrap();
    });
}

/// The barrier a BARRIER_REPLY waits for (`readers.rs`): the writer adds
/// an entry, publishes, waits for the barrier and then "replies"; a reader
/// that refreshes, parks and wakes must never start a burst after the
/// reply that misses the entry. A lost ring would leave the barrier asleep
/// with the reader done, which loom reports as a deadlock.
#[test]
fn barrier_reply_means_every_later_burst_sees_the_change() {
    model(3, || {
        let mut vs = Versions::new();
        let mut t = Table::new(&vs, 1);
        let watch = vs.watch();
        let replied = Arc::new(crate::sync::AtomicBool::new(false));
        let mut r = vs.reader();
        let view = t.view();
        let rep = replied.clone();
        let reader = thread::spawn(move || {
            for round in 0..2 {
                if round == 1 {
                    r.park();
                }
                r.refresh();
                // A packet read in this burst, after or before the reply.
                let after_reply = rep.load(Ordering::SeqCst);
                let hit = view.lookup(&r, &[1]);
                assert!(
                    hit.is_some() || !after_reply,
                    "a burst after the reply missed the change (at {})",
                    r.version()
                );
            }
        });
        t.insert(&[1], 1, 1, [1, 1]);
        let v = vs.publish_full();
        assert!(watch.barrier(v, std::time::Duration::from_secs(60)));
        replied.store(true, Ordering::SeqCst);
        reader.join().unwrap();
    });
}
