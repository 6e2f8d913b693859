//! Cycles per stage: where a dataplane thread's busy time goes, counted in
//! time-stamp counter (TSC) cycles per stage — `rx` (taking a burst in),
//! `pipeline` (the processor) and `tx` (sending, or handing on to the next
//! thread's rings).
//!
//! A thread reads the counter at burst boundaries only — a few reads per
//! round and one around each port send, never one per packet — and adds
//! the differences into its [`Tally`](super::counters::Tally), which it
//! publishes with the rest of its statistics. Divided by the thread's
//! packets they give cycles per packet per stage; [`tsc_hz`] turns cycles
//! into time.
//!
//! What each stage holds, by role:
//!
//! | thread | rx | pipeline | tx |
//! |---|---|---|---|
//! | run-to-completion worker | port reads (empty ones too) | the processor, less the sends it triggered | port sends (bursts that filled inside the processor, and flushes) |
//! | RX thread (split) | port reads | — | choosing a worker and staging onto, and flushing, the rings toward workers |
//! | worker (split) | popping bursts off its input rings | the processor, staging onto the rings toward TX threads | flushing those rings |
//! | TX thread (split) | popping its input rings into per-port bursts, less the sends | — | port sends |
//!
//! `rx` and `pipeline` (and a split thread's ring-flushing `tx`) count in
//! rounds that carried packets only; port sends count whenever they
//! happen (a burst held for `max_wait` leaves in a round without input).
//! Bookkeeping between bursts (mailbox, table versions, publishing) is in
//! no stage, and the busy time splits rounds at other points (a round's
//! closing flush counts as the next round's time), so the three add up to
//! about the busy time, not exactly.
//!
//! The counter: `RDTSC` on x86-64 (cheaper than `Instant::now`, which
//! reads it and converts), at a constant rate on every CPU that
//! advertises `constant_tsc`; elsewhere (and under Miri, which has no TSC)
//! a monotonic clock in nanoseconds, and [`tsc_hz`] is then 10⁹.
//! Differences saturate at zero, so a thread that moves to a CPU whose
//! counter lags counts nothing for that lap rather than a wrapped value.

use std::sync::OnceLock;
#[cfg(any(not(target_arch = "x86_64"), miri))]
use std::time::Instant;

/// Cycles a thread spent in each stage (see the module comment for what
/// each holds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageCycles {
    /// Taking bursts in.
    pub rx: u64,
    /// The processor.
    pub pipeline: u64,
    /// Sending, or handing on.
    pub tx: u64,
}

impl StageCycles {
    /// The three stages, by their names (`rx`, `pipeline`, `tx`).
    pub fn named(&self) -> [(&'static str, u64); 3] {
        [
            ("rx", self.rx),
            ("pipeline", self.pipeline),
            ("tx", self.tx),
        ]
    }

    pub(super) fn add(&mut self, o: &StageCycles) {
        self.rx += o.rx;
        self.pipeline += o.pipeline;
        self.tx += o.tx;
    }
}

/// The cycle counter now.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline]
pub(super) fn now() -> u64 {
    // SAFETY: RDTSC is part of the x86-64 baseline (every x86-64 CPU has
    // it); it reads a register and touches no memory. The kernel may make
    // it fault (PR_SET_TSC), which Linux does only for processes that ask.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The cycle counter now: nanoseconds since the first call.
#[cfg(any(not(target_arch = "x86_64"), miri))]
pub(super) fn now() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Cycles since `*mark`, moving `*mark` to now.
#[inline]
pub(super) fn lap(mark: &mut u64) -> u64 {
    let t = now();
    let d = t.saturating_sub(*mark);
    *mark = t;
    d
}

/// Runs `f` and returns the cycles it took.
#[inline]
pub(super) fn timed(f: impl FnOnce()) -> u64 {
    let t = now();
    f();
    now().saturating_sub(t)
}

/// The rate of the cycle counter, in cycles per second: measured once
/// against the monotonic clock over 20 ms (the first call waits that
/// long), then remembered.
pub fn tsc_hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(calibrate)
}

#[cfg(any(not(target_arch = "x86_64"), miri))]
fn calibrate() -> u64 {
    1_000_000_000
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
fn calibrate() -> u64 {
    use std::time::{Duration, Instant};
    // A clock reading bracketed by two counter readings; of a few tries
    // the tightest bracket, so that a preemption between the readings
    // does not skew the rate.
    let pair = || {
        (0..8)
            .map(|_| {
                let a = now();
                let t = Instant::now();
                let b = now();
                (b.saturating_sub(a), a / 2 + b / 2, t)
            })
            .min_by_key(|(width, _, _)| *width)
            .map(|(_, c, t)| (c, t))
            .unwrap_or_else(|| (now(), Instant::now()))
    };
    let (c0, t0) = pair();
    std::thread::sleep(Duration::from_millis(20));
    let (c1, t1) = pair();
    let ns = t1.saturating_duration_since(t0).as_nanos().max(1);
    u64::try_from(u128::from(c1.saturating_sub(c0)) * 1_000_000_000 / ns).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_moves_forward_and_its_rate_is_plausible() {
        let mut mark = now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(lap(&mut mark) > 0);
        assert!(timed(|| std::thread::sleep(std::time::Duration::from_millis(1))) > 0);
        // Between 100 MHz and 10 GHz: anything else is a broken calibration.
        let hz = tsc_hz();
        assert!((100_000_000..10_000_000_000).contains(&hz), "{hz}");
        assert_eq!(tsc_hz(), hz, "measured once");
    }

    #[test]
    fn stages_add_and_name_themselves() {
        let mut s = StageCycles {
            rx: 1,
            pipeline: 2,
            tx: 3,
        };
        s.add(&StageCycles {
            rx: 10,
            pipeline: 20,
            tx: 30,
        });
        assert_eq!(s.named(), [("rx", 11), ("pipeline", 22), ("tx", 33)]);
    }
}
