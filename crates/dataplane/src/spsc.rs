//! A bounded, lock-free single-producer/single-consumer ring that carries
//! packets (or anything else) between two threads, with named counters.
//!
//! # Layout and invariant
//!
//! The ring is `cap` slots (a power of two) and two counters, `head` and
//! `tail`, that only grow (wrapping at `usize::MAX`, which is harmless since
//! `cap` divides 2^64). Slot `i` is `slots[i & (cap - 1)]`.
//!
//! - `tail` is written only by the producer, `head` only by the consumer;
//! - always `0 <= tail - head <= cap` (wrapping subtraction);
//! - slots in `[head, tail)` hold initialised values and belong to the
//!   consumer; slots in `[tail, head + cap)` are uninitialised and belong to
//!   the producer.
//!
//! The producer writes a slot, then publishes it with a `Release` store of
//! `tail`; the consumer's `Acquire` load of `tail` therefore sees the value.
//! Symmetrically the consumer moves a value out, then frees the slot with a
//! `Release` store of `head`, which the producer reads with `Acquire` before
//! reusing the slot. Each side caches the other side's counter and reloads
//! it only when the cache says the ring is full (or empty), so a burst costs
//! one shared-line load and one store, not one per packet. `head` and `tail`
//! live on separate cache lines to avoid false sharing.
//!
//! # Counters
//!
//! `pushed`, `popped` and `dropped_full` (values the producer discarded
//! because the ring was full, in the `*_or_drop` calls) are plain atomics,
//! each written by one side only, readable from anywhere via [`RingStats`].

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::port::{Burst, PacketBuf};

/// Pads a value to its own cache line (128 bytes covers adjacent-line
/// prefetch on x86 and the 128-byte lines of some ARM cores).
#[repr(align(128))]
struct CachePadded<T>(T);

/// Counters of one ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingCounters {
    /// Values the producer put into the ring.
    pub pushed: u64,
    /// Values the consumer took out.
    pub popped: u64,
    /// Values the producer dropped because the ring was full.
    pub dropped_full: u64,
}

struct Shared<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
    pushed: AtomicU64,
    popped: AtomicU64,
    dropped_full: AtomicU64,
    producer_dropped: AtomicBool,
    consumer_dropped: AtomicBool,
}

// SAFETY: the slots are handed between exactly two threads following the
// ownership rule in the module comment (a slot is accessed only by the side
// that owns it, and ownership moves with Release/Acquire on head/tail); T
// itself moves between threads, so it must be Send.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above; Shared owns Ts, sending it sends them.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Shared<T> {
    fn slot(&self, index: usize) -> *mut MaybeUninit<T> {
        // `index & mask` is always in bounds: slots.len() == mask + 1.
        self.slots[index & self.mask].get()
    }

    fn counters(&self) -> RingCounters {
        RingCounters {
            pushed: self.pushed.load(Ordering::Relaxed),
            popped: self.popped.load(Ordering::Relaxed),
            dropped_full: self.dropped_full.load(Ordering::Relaxed),
        }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Both sides are gone (this is the last Arc); drop what is queued.
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        let mut i = head;
        while i != tail {
            // SAFETY: slots in [head, tail) are initialised (invariant) and
            // nobody else can reach them any more.
            unsafe { (*self.slot(i)).assume_init_drop() };
            i = i.wrapping_add(1);
        }
    }
}

/// The sending half of a ring; owned by exactly one thread at a time.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    tail: usize,
    cached_head: usize,
}

/// The receiving half of a ring; owned by exactly one thread at a time.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    head: usize,
    cached_tail: usize,
}

/// A read-only view of a ring's counters and fill level, for any thread.
pub struct RingStats<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for RingStats<T> {
    fn clone(&self) -> Self {
        RingStats {
            shared: self.shared.clone(),
        }
    }
}

/// Creates a ring holding at least `capacity` values (rounded up to a power
/// of two, at least 2).
pub fn ring<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity
        .max(2)
        .checked_next_power_of_two()
        .unwrap_or(1 << (usize::BITS - 1));
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect::<Vec<_>>()
        .into_boxed_slice();
    let shared = Arc::new(Shared {
        slots,
        mask: cap - 1,
        head: CachePadded(AtomicUsize::new(0)),
        tail: CachePadded(AtomicUsize::new(0)),
        pushed: AtomicU64::new(0),
        popped: AtomicU64::new(0),
        dropped_full: AtomicU64::new(0),
        producer_dropped: AtomicBool::new(false),
        consumer_dropped: AtomicBool::new(false),
    });
    (
        Producer {
            shared: shared.clone(),
            tail: 0,
            cached_head: 0,
        },
        Consumer {
            shared,
            head: 0,
            cached_tail: 0,
        },
    )
}

impl<T> Producer<T> {
    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Free slots, refreshing the view of the consumer's progress.
    pub fn free(&mut self) -> usize {
        self.cached_head = self.shared.head.0.load(Ordering::Acquire);
        self.capacity() - self.tail.wrapping_sub(self.cached_head)
    }

    /// Free slots according to the cached head, reloading it only when the
    /// cache says fewer than `want` are free.
    fn free_for(&mut self, want: usize) -> usize {
        let free = self.capacity() - self.tail.wrapping_sub(self.cached_head);
        if free >= want {
            free
        } else {
            self.free()
        }
    }

    /// Writes `value` into the next slot without publishing it.
    ///
    /// Caller guarantees a free slot (checked through `free_for`).
    fn write(&mut self, value: T) {
        // SAFETY: the caller checked that slot `tail` is in
        // [tail, head + cap), which the producer owns and is uninitialised.
        unsafe { (*self.shared.slot(self.tail)).write(value) };
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&mut self, n: usize) {
        if n > 0 {
            self.shared.tail.0.store(self.tail, Ordering::Release);
            let c = &self.shared.pushed;
            c.store(c.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
        }
    }

    fn count_dropped(&self, n: usize) {
        if n > 0 {
            let c = &self.shared.dropped_full;
            c.store(c.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
        }
    }

    /// Pushes one value; gives it back when the ring is full.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        if self.free_for(1) == 0 {
            return Err(value);
        }
        self.write(value);
        self.publish(1);
        Ok(())
    }

    /// Pushes one value, or drops it and counts `dropped_full`. Returns
    /// whether it was queued.
    pub fn push_or_drop(&mut self, value: T) -> bool {
        match self.push(value) {
            Ok(()) => true,
            Err(v) => {
                drop(v);
                self.count_dropped(1);
                false
            }
        }
    }

    /// Pushes every value that fits, dropping the rest and counting them in
    /// `dropped_full`; publishes once. Returns how many were queued.
    pub fn push_all_or_drop<I: IntoIterator<Item = T>>(&mut self, values: I) -> usize {
        let mut queued = 0;
        let mut dropped = 0;
        let mut free = self.free_for(1);
        for v in values {
            if free == 0 {
                free = self.free();
            }
            if free == 0 {
                drop(v);
                dropped += 1;
                continue;
            }
            self.write(v);
            free -= 1;
            queued += 1;
        }
        self.publish(queued);
        self.count_dropped(dropped);
        queued
    }

    /// Moves values from the front of `values` into the ring while there is
    /// room (nothing is dropped); publishes once. Returns how many moved.
    pub fn push_from_vec(&mut self, values: &mut Vec<T>) -> usize {
        let n = self.free_for(values.len()).min(values.len());
        for v in values.drain(..n) {
            self.write(v);
        }
        self.publish(n);
        n
    }

    /// True when the consumer half has been dropped.
    pub fn is_abandoned(&self) -> bool {
        self.shared.consumer_dropped.load(Ordering::Acquire)
    }

    /// A counters view for other threads.
    pub fn stats(&self) -> RingStats<T> {
        RingStats {
            shared: self.shared.clone(),
        }
    }
}

impl Producer<PacketBuf> {
    /// Pushes a whole burst (emptying it); packets that do not fit are
    /// dropped and counted in `dropped_full`. Returns how many were queued.
    pub fn push_burst_or_drop(&mut self, burst: &mut Burst) -> usize {
        self.push_all_or_drop(burst.drain())
    }
}

impl<T> Consumer<T> {
    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Values waiting, refreshing the view of the producer's progress.
    pub fn available(&mut self) -> usize {
        self.cached_tail = self.shared.tail.0.load(Ordering::Acquire);
        self.cached_tail.wrapping_sub(self.head)
    }

    fn available_for(&mut self, want: usize) -> usize {
        let avail = self.cached_tail.wrapping_sub(self.head);
        if avail >= want {
            avail
        } else {
            self.available()
        }
    }

    fn read(&mut self) -> T {
        // SAFETY: the caller checked slot `head` is in [head, tail), which the
        // consumer owns and is initialised; moving it out leaves it
        // uninitialised, and `head` advances past it before it is published.
        let v = unsafe { (*self.shared.slot(self.head)).assume_init_read() };
        self.head = self.head.wrapping_add(1);
        v
    }

    fn release(&mut self, n: usize) {
        if n > 0 {
            self.shared.head.0.store(self.head, Ordering::Release);
            let c = &self.shared.popped;
            c.store(c.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
        }
    }

    /// Takes one value, if any.
    pub fn pop(&mut self) -> Option<T> {
        if self.available_for(1) == 0 {
            return None;
        }
        let v = self.read();
        self.release(1);
        Some(v)
    }

    /// Takes up to `max` values, handing each to `f` in order; frees their
    /// slots once at the end. Returns how many were taken.
    ///
    /// If `f` panics, the values already taken stay taken (their slots are
    /// freed during unwinding), so nothing is dropped twice.
    pub fn pop_many(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        /// Frees the slots read so far, also when `f` unwinds.
        struct Release<'a, T> {
            consumer: &'a mut Consumer<T>,
            taken: usize,
        }
        impl<T> Drop for Release<'_, T> {
            fn drop(&mut self) {
                self.consumer.release(self.taken);
            }
        }
        let n = self.available_for(max).min(max);
        let mut guard = Release {
            consumer: self,
            taken: 0,
        };
        for _ in 0..n {
            let v = guard.consumer.read();
            guard.taken += 1;
            f(v);
        }
        n
    }

    /// A counters view for other threads.
    pub fn stats(&self) -> RingStats<T> {
        RingStats {
            shared: self.shared.clone(),
        }
    }

    /// True when the producer half has been dropped (what is still queued
    /// can be popped).
    pub fn is_abandoned(&self) -> bool {
        self.shared.producer_dropped.load(Ordering::Acquire)
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.shared.producer_dropped.store(true, Ordering::Release);
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        self.shared.consumer_dropped.store(true, Ordering::Release);
    }
}

impl Consumer<PacketBuf> {
    /// Appends up to `out.room()` packets to `out`. Returns how many.
    pub fn pop_burst(&mut self, out: &mut Burst) -> usize {
        let room = out.room();
        self.pop_many(room, |p| {
            // Cannot fail: at most `room` packets are pushed.
            let _ = out.push(p);
        })
    }
}

impl<T> RingStats<T> {
    /// The ring's counters now.
    pub fn counters(&self) -> RingCounters {
        self.shared.counters()
    }

    /// Values queued now (a racy snapshot).
    pub fn len(&self) -> usize {
        let tail = self.shared.tail.0.load(Ordering::Acquire);
        let head = self.shared.head.0.load(Ordering::Acquire);
        tail.wrapping_sub(head).min(self.shared.mask + 1)
    }

    /// True when nothing is queued (a racy snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn capacity_rounds_up_to_power_of_two() {
        assert_eq!(ring::<u8>(0).0.capacity(), 2);
        assert_eq!(ring::<u8>(5).0.capacity(), 8);
        assert_eq!(ring::<u8>(8).1.capacity(), 8);
    }

    #[test]
    fn push_pop_in_order_and_full_gives_back() {
        let (mut p, mut c) = ring::<u32>(4);
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(99), Err(99));
        assert_eq!(c.pop(), Some(0));
        p.push(4).unwrap();
        let mut got = Vec::new();
        assert_eq!(c.pop_many(10, |v| got.push(v)), 4);
        assert_eq!(got, vec![1, 2, 3, 4]);
        assert_eq!(c.pop(), None);
        let s = p.stats().counters();
        assert_eq!(
            s,
            RingCounters {
                pushed: 5,
                popped: 5,
                dropped_full: 0
            }
        );
    }

    #[test]
    fn push_all_or_drop_counts_drops() {
        let (mut p, mut c) = ring::<u32>(4);
        assert_eq!(p.push_all_or_drop(0..10), 4);
        assert!(!p.push_or_drop(11));
        let stats = c.stats();
        assert_eq!(stats.counters().dropped_full, 7);
        assert_eq!(stats.len(), 4);
        let mut got = Vec::new();
        c.pop_many(usize::MAX, |v| got.push(v));
        assert_eq!(got, vec![0, 1, 2, 3]);
        assert!(stats.is_empty());
    }

    #[test]
    fn push_from_vec_leaves_what_does_not_fit() {
        let (mut p, mut c) = ring::<u32>(4);
        let mut v = vec![1, 2, 3, 4, 5, 6];
        assert_eq!(p.push_from_vec(&mut v), 4);
        assert_eq!(v, vec![5, 6]);
        assert_eq!(c.pop(), Some(1));
        assert_eq!(p.push_from_vec(&mut v), 1);
        assert_eq!(v, vec![6]);
        assert_eq!(p.stats().counters().dropped_full, 0);
    }

    #[test]
    fn bursts_of_packets_cross_the_ring() {
        let (mut p, mut c) = ring::<PacketBuf>(8);
        let mut b = Burst::with_limit(10);
        for i in 0..10u8 {
            b.push(PacketBuf::from_slice(&[i])).unwrap();
        }
        assert_eq!(p.push_burst_or_drop(&mut b), 8);
        assert!(b.is_empty());
        assert_eq!(p.stats().counters().dropped_full, 2);
        let mut out = Burst::with_limit(5);
        assert_eq!(c.pop_burst(&mut out), 5);
        let got: Vec<u8> = out.iter().map(|p| p.data()[0]).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
    }

    /// Counts live values so leaks and double drops show.
    struct Tracked(Arc<AtomicUsize>);
    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn queued_values_dropped_with_the_ring_exactly_once() {
        let live = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = ring::<Tracked>(8);
        for _ in 0..6 {
            live.fetch_add(1, Ordering::SeqCst);
            p.push(Tracked(live.clone())).map_err(|_| ()).unwrap();
        }
        drop(c.pop());
        assert_eq!(live.load(Ordering::SeqCst), 5);
        assert!(!c.is_abandoned());
        drop(p);
        assert!(c.is_abandoned());
        drop(c);
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn panic_in_pop_many_drops_nothing_twice() {
        let live = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = ring::<Tracked>(8);
        for _ in 0..5 {
            live.fetch_add(1, Ordering::SeqCst);
            p.push(Tracked(live.clone())).map_err(|_| ()).unwrap();
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut seen = 0;
            c.pop_many(5, |v| {
                seen += 1;
                drop(v);
                if seen == 2 {
                    panic!("consumer callback fails");
                }
            });
        }));
        assert!(r.is_err());
        assert_eq!(live.load(Ordering::SeqCst), 3);
        assert_eq!(c.stats().len(), 3, "the two taken slots were freed");
        drop(p);
        drop(c);
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn indices_wrap_around_usize() {
        let (mut p, mut c) = ring::<u64>(4);
        // Start both sides just below the wrap point.
        let start = usize::MAX - 2;
        p.tail = start;
        p.cached_head = start;
        c.head = start;
        c.cached_tail = start;
        p.shared.head.0.store(start, Ordering::SeqCst);
        p.shared.tail.0.store(start, Ordering::SeqCst);
        for round in 0..5u64 {
            assert_eq!(p.push_all_or_drop([round, round + 100, round + 200]), 3);
            let mut got = Vec::new();
            c.pop_many(8, |v| got.push(v));
            assert_eq!(got, vec![round, round + 100, round + 200]);
        }
    }

    #[test]
    fn rx_thread_to_tx_thread_through_ports_and_ring() {
        // generator -> RX thread -> ring -> TX thread -> sink: every packet is
        // either delivered or counted as dropped_full, none vanish.
        use crate::memory::{MemoryGenerator, MemorySink};
        use crate::port::PortBackend;
        // Miri runs the same exchange, shorter (it interprets every step,
        // and each thread's yields): still more than twice round the ring.
        const N: u64 = if cfg!(miri) { 600 } else { 200_000 };
        let mut gen = MemoryGenerator::new("gen", vec![vec![1; 64], vec![2; 128]]).with_limit(N);
        let mut sink = MemorySink::new("sink");
        let handle = sink.handle();
        let (mut p, mut c) = ring::<PacketBuf>(256);
        let stats = p.stats();
        let rx = std::thread::spawn(move || {
            let mut b = Burst::new();
            while !gen.is_exhausted() {
                gen.rx_burst(&mut b).unwrap();
                p.push_burst_or_drop(&mut b);
            }
            gen.stats()
        });
        let tx = std::thread::spawn(move || {
            let mut b = Burst::new();
            loop {
                let n = c.pop_burst(&mut b);
                while !b.is_empty() {
                    sink.tx_burst(&mut b).unwrap();
                }
                if n == 0 {
                    if c.is_abandoned() && c.available() == 0 {
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            sink.stats()
        });
        let rx_stats = rx.join().unwrap();
        let tx_stats = tx.join().unwrap();
        let rc = stats.counters();
        assert_eq!(rx_stats.rx_packets, N);
        assert_eq!(rc.pushed + rc.dropped_full, N);
        assert_eq!(rc.popped, rc.pushed);
        assert_eq!(tx_stats.tx_packets, rc.pushed);
        assert_eq!(handle.packets(), rc.pushed);
        assert_eq!(handle.bytes(), tx_stats.tx_bytes);
    }

    /// Throughput figure, not a check: `cargo test -p dataplane --release
    /// -- --ignored --nocapture spsc_throughput`.
    #[test]
    #[ignore]
    fn spsc_throughput() {
        const N: u64 = 50_000_000;
        let (mut p, mut c) = ring::<u64>(1024);
        let t0 = std::time::Instant::now();
        let prod = std::thread::spawn(move || {
            let mut batch = Vec::with_capacity(32);
            let mut next = 0;
            while next < N {
                if batch.is_empty() {
                    batch.extend(next..(next + 32).min(N));
                }
                let n = p.push_from_vec(&mut batch);
                next += n as u64;
                if n == 0 {
                    std::hint::spin_loop();
                }
            }
        });
        let mut sum = 0u64;
        let mut got = 0u64;
        while got < N {
            let n = c.pop_many(32, |v| sum = sum.wrapping_add(v));
            got += n as u64;
            if n == 0 {
                std::hint::spin_loop();
            }
        }
        prod.join().unwrap();
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!(sum, N * (N - 1) / 2);
        eprintln!(
            "spsc: {:.1} M values/s in bursts of 32",
            N as f64 / secs / 1e6
        );
    }

    #[test]
    fn two_thread_stress_keeps_order_and_loses_nothing() {
        // Miri runs the same exchange, shorter (it interprets every step).
        const N: u64 = if cfg!(miri) { 5_000 } else { 1_000_000 };
        let (mut p, mut c) = ring::<u64>(64);
        let producer = std::thread::spawn(move || {
            let mut next = 0u64;
            let mut batch = Vec::with_capacity(16);
            while next < N {
                // Mix single pushes and batches of varying size.
                if batch.is_empty() && next & 3 == 0 {
                    if p.push(next).is_ok() {
                        next += 1;
                    } else {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                if batch.is_empty() {
                    let k = (next % 16 + 1).min(N - next);
                    batch.extend(next..next + k);
                }
                let moved = p.push_from_vec(&mut batch);
                next += moved as u64;
                if moved == 0 {
                    std::thread::yield_now();
                }
            }
            assert!(batch.is_empty());
            p.stats().counters()
        });
        let mut expect = 0u64;
        let mut bad = None;
        while expect < N {
            let n = c.pop_many(7, |v| {
                if v != expect && bad.is_none() {
                    bad = Some((expect, v));
                }
                expect += 1;
            });
            if n == 0 {
                std::thread::yield_now();
            }
        }
        assert_eq!(bad, None, "out of order or lost value");
        let pc = producer.join().unwrap();
        assert_eq!(pc.pushed, N);
        assert_eq!(pc.dropped_full, 0);
        assert_eq!(c.stats().counters().popped, N);
        assert_eq!(c.pop(), None);
    }
}
