//! Batching policy: when a partly filled burst leaves, and how an idle
//! thread backs off.
//!
//! # Adaptive flushing
//!
//! Every hand-over point (RX → worker ring, worker → TX ring, TX → port)
//! collects packets into a burst. A burst leaves
//!
//! 1. at once when it is full (the throughput case), or
//! 2. when the thread's input is drained — a poll round in which every
//!    read returned less than a full burst, so nothing more is queued — and
//!    it has had no new input for [`FlushPolicy::idle`] (default 0: at the
//!    end of that very round), or
//! 3. when its oldest packet has waited [`FlushPolicy::max_wait`], so
//!    input that keeps arriving in full reads while a burst toward some
//!    other port never fills is still bounded. The default is 0: at the
//!    end of the very round that built it, whether or not the input is
//!    drained.
//!
//! Under load, reads come back full and bursts toward the busy ports
//! leave full (one system call or ring publication per burst); a burst
//! toward a quiet port (a ping's reply beside a flood going the other
//! way) leaves at the end of the round, as Open vSwitch flushes its
//! output batches after each received batch. A longer `max_wait` held it
//! for rounds: each round of a saturated thread takes tens of
//! microseconds (a burst's sends), so at 100 µs a reply waited two or
//! three rounds at each stage, 0.1–0.2 ms of a ping's round trip
//! (docs/results.md, "Delay at saturation"). When the load drops, the
//! round that drains the input sends what it holds, so a single ping
//! waits for no timer at any stage. (A timer waits at every stage a ping crosses —
//! twice through a run-to-completion worker, at each of the three stages
//! of the RX / worker / TX split — and would be most of the switch's ping
//! RTT.) A non-zero `idle` (with a `max_wait` at least as long) trades
//! delay for fuller bursts under a trickle (docs/results.md,
//! "000-batching", has the delay against the setting).
//!
//! # Idle back-off
//!
//! A thread that found nothing to do keeps polling, yielding the core
//! between polls, for a poll window ([`POLL_WINDOW`], 1 ms by default;
//! `ThreadsConfig::poll_window`), then sleeps (see [`crate::wake`]) until
//! its ports' descriptors or its doorbell wake it, or a timeout. While it
//! holds a partly filled burst it neither sleeps nor yields but spins (at
//! most `max_wait`, none by default), so the flush deadline is kept even
//! on a loaded machine where a yield can cost a whole scheduler time slice.
//! It does not spin otherwise: with more dataplane threads than free cores
//! (three RX / worker / TX threads on two cores), a spinning thread keeps
//! the core from the thread that has the packet (spinning polls before a
//! yield there slow the split mode's pings).
//!
//! Waking a sleeping thread costs tens of microseconds on a virtual
//! machine (docs/results.md, "Light-load delay"), about as much as a whole
//! ping over a direct veth pair.
//! The window keeps a thread awake for the reply that follows a request
//! and for the next burst of a steady flow, so only the first packet after
//! a pause pays a wake-up; the RX / worker / TX split additionally wakes
//! its later stages in parallel (see [`crate::threads`]). An idle switch
//! costs no CPU beyond a wake-up per timeout. A window of `Duration::MAX`
//! never sleeps (busy polling, for cores given to the switch): then no
//! packet pays a wake-up, at the price of a core per thread.

use std::time::{Duration, Instant};

/// How long an idle thread keeps polling (yielding the core between polls)
/// before it sleeps, by default: see [`Backoff`].
pub const POLL_WINDOW: Duration = Duration::from_millis(1);

/// When partly filled bursts leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlushPolicy {
    /// Flush once the input is drained and the thread has had no new
    /// input this long (zero: as soon as it is drained).
    pub idle: Duration,
    /// Flush once the oldest packet of a burst has waited this long.
    pub max_wait: Duration,
}

impl Default for FlushPolicy {
    /// Flush at the end of every round (drained or not).
    fn default() -> Self {
        FlushPolicy {
            idle: Duration::ZERO,
            max_wait: Duration::ZERO,
        }
    }
}

impl FlushPolicy {
    /// Whether a burst whose first packet arrived at `first_at` leaves now,
    /// given the thread's last input at `last_input` and whether its last
    /// poll round drained its input (no read came back full).
    pub fn due(&self, now: Instant, first_at: Instant, last_input: Instant, drained: bool) -> bool {
        (drained && now.saturating_duration_since(last_input) >= self.idle)
            || now.saturating_duration_since(first_at) >= self.max_wait
    }
}

/// What an idle thread should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleStep {
    /// Spin (a pause instruction) and poll again.
    Spin,
    /// Give the core away and poll again.
    Yield,
    /// Sleep until woken or the timeout.
    Sleep,
}

/// Counts consecutive empty polls and says when to spin, yield or sleep.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// When the current idle spell began.
    since: Option<Instant>,
    window: Duration,
}

impl Default for Backoff {
    /// With the default [`POLL_WINDOW`].
    fn default() -> Self {
        Backoff::new(POLL_WINDOW)
    }
}

impl Backoff {
    /// Polls `window` before sleeping; `Duration::MAX` never sleeps (busy
    /// polling).
    pub fn new(window: Duration) -> Backoff {
        Backoff {
            since: None,
            window,
        }
    }

    /// Work was found: a new idle spell starts at the next empty poll.
    pub fn reset(&mut self) {
        self.since = None;
    }

    /// One more empty poll; `holding` says whether the thread holds a
    /// partly filled burst (then it never sleeps).
    pub fn step(&mut self, holding: bool) -> IdleStep {
        if holding {
            // Holding a partial burst: keep the core until the flush
            // deadline (at most `max_wait`); a yield on a busy machine can
            // lose it for a whole time slice (milliseconds).
            return IdleStep::Spin;
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.saturating_duration_since(since) < self.window {
            IdleStep::Yield
        } else {
            IdleStep::Sleep
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_when_drained_idle_or_old() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        // The default: at the end of every round, full reads or not.
        let p = FlushPolicy::default();
        assert!(p.due(t0, t0, t0, true), "drained");
        assert!(p.due(t0, t0, t0, false), "full reads");
        // With a max_wait: at once when drained, otherwise after it.
        let p = FlushPolicy {
            idle: Duration::ZERO,
            max_wait: us(100),
        };
        assert!(p.due(t0, t0, t0, true), "drained");
        assert!(!p.due(t0 + us(99), t0, t0 + us(99), false), "full reads");
        assert!(
            p.due(t0 + us(101), t0, t0 + us(100), false),
            "waited 101 µs"
        );
        // A non-zero idle waits that long after the last input.
        let slow = FlushPolicy {
            idle: us(50),
            max_wait: us(100),
        };
        assert!(!slow.due(t0 + us(10), t0, t0 + us(5), true));
        assert!(slow.due(t0 + us(60), t0, t0 + us(5), true), "idle 55 µs");
        assert!(!slow.due(t0 + us(60), t0, t0 + us(5), false), "not drained");
        assert!(
            slow.due(t0 + us(101), t0, t0 + us(100), true),
            "waited 101 µs"
        );
    }

    #[test]
    fn backoff_yields_for_the_window_then_sleeps_but_spins_while_holding() {
        let mut b = Backoff::new(Duration::from_millis(20));
        assert_eq!(b.step(false), IdleStep::Yield);
        assert_eq!(b.step(false), IdleStep::Yield);
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(b.step(false), IdleStep::Sleep, "window over");
        assert_eq!(b.step(true), IdleStep::Spin);
        b.reset();
        assert_eq!(b.step(false), IdleStep::Yield, "a new spell");
        // Busy polling never sleeps; a zero window sleeps at once.
        let mut busy = Backoff::new(Duration::MAX);
        assert_eq!(busy.step(false), IdleStep::Yield);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(busy.step(false), IdleStep::Yield);
        assert_eq!(Backoff::new(Duration::ZERO).step(false), IdleStep::Sleep);
    }
}
