//! Bounded queueing delay: a port's receive queue holds at most a
//! configured time's worth of packets at the rate its reader drains.
//!
//! # Why
//!
//! A queue sized in bytes is sized for the wrong thing. The 8 MiB receive
//! buffer a packet socket asks for holds about 20,000 small frames (the
//! kernel charges each about 830 bytes, its `truesize`); at the 320 kpps a
//! worker forwards on one CPU that is 63 ms of waiting for every frame,
//! a ping included, once the offered load passes what the worker drains.
//! A queue that holds `delay × drain rate` packets instead loses the same
//! frames at saturation (what is offered beyond the drain rate is lost
//! either way) but each frame it keeps waits at most `delay`.
//!
//! # How
//!
//! The thread that empties a queue knows how fast it drains: a
//! [`DrainMeter`] divides the packets it took by the time of the rounds
//! that found work (its busy time; being preempted counts, because it
//! slows the drain too), smoothed over a few publication periods. The
//! bound is then [`bound_packets`]: the delay times that rate, shared
//! among the queues the thread empties that had input, never below
//! [`MIN_BOUND_PACKETS`] (two bursts: a burst that arrives while one is
//! processed is not lost).
//!
//! - A kernel socket's receive buffer is a byte count the kernel compares
//!   against the sum of its queued frames' `truesize`; the port sets
//!   `SO_RCVBUF` to the bound times [`KERNEL_BYTES_PER_PACKET`] (the
//!   `truesize` of the smallest frames, so larger ones fill it in fewer
//!   packets, i.e. in less time). The kernel then drops beyond the bound
//!   at no cost to the switch's CPU (tail drop).
//! - A TPACKET_V2 ring cannot shrink while mapped, and should not: a deep
//!   ring lets the port see every frame, so it drops by age in user space
//!   (a frame stamped more than the delay before the newest one waiting
//!   goes back to the kernel unread) and spares sparse frames (pings,
//!   [`crate::sparse`]); see [`crate::afpacket`].
//!
//! Every such loss counts as the port's `rx_drops.queue_delay`
//! (`port_rx_queue_delay`), never mixed into the "ring full" counters that
//! mean a queue ran out of room. The rings between the split mode's
//! threads are not bounded in time (`threads::rings` says why).
//!
//! `QueueDelay::Deep` restores the byte-sized queues (for bulk transfers
//! that would rather wait than lose).

use std::time::Duration;

/// The daemon's default bound (`max_queue_delay_us`): well under a
/// millisecond, and above the few tens of microseconds a burst takes to
/// process.
pub const DEFAULT_QUEUE_DELAY: Duration = Duration::from_micros(100);

/// The largest delay bound accepted (one second).
pub const MAX_QUEUE_DELAY: Duration = Duration::from_secs(1);

/// The smallest bound in packets: two bursts of 32.
pub const MIN_BOUND_PACKETS: usize = 64;

/// What the kernel charges a packet socket's receive buffer per small frame
/// on a veth (its `truesize`: 830 bytes for 64- to 128-byte
/// frames, 1,270 for 512, 2,300 for 1,500).
pub const KERNEL_BYTES_PER_PACKET: usize = 832;

/// The drain rate assumed before a thread has measured one (1 Mpps): the
/// first bound is then `delay × 1 Mpps`, generous until a busy period
/// measures the real rate.
pub const INITIAL_RATE_PPS: u64 = 1_000_000;

/// How long queues may hold packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueDelay {
    /// At most this long at the rate each queue drains.
    Bounded(Duration),
    /// Byte-sized queues as the backends size them (8 MiB socket buffers,
    /// full rings): no early drops.
    Deep,
}

impl QueueDelay {
    /// From the configuration's `max_queue_delay_us`: 0 is `Deep`; above
    /// [`MAX_QUEUE_DELAY`] is an error naming the range.
    pub fn from_micros(us: u64) -> Result<QueueDelay, String> {
        if us == 0 {
            return Ok(QueueDelay::Deep);
        }
        let d = Duration::from_micros(us);
        if d > MAX_QUEUE_DELAY {
            return Err(format!(
                "max_queue_delay_us {us} is not valid (0 for deep buffers, or 1..={})",
                MAX_QUEUE_DELAY.as_micros()
            ));
        }
        Ok(QueueDelay::Bounded(d))
    }

    /// The bound, `None` for deep buffers.
    pub fn limit(self) -> Option<Duration> {
        match self {
            QueueDelay::Bounded(d) => Some(d),
            QueueDelay::Deep => None,
        }
    }
}

/// The bound of one receive queue, handed to its port
/// ([`crate::port::PortBackend::set_rx_bound`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxBound {
    /// Most packets the queue should hold.
    pub packets: usize,
    /// Oldest a packet may be when it is read (for queues that keep
    /// arrival times: the TPACKET ring).
    pub delay: Duration,
}

impl RxBound {
    /// A kernel receive buffer's size for this bound, in the bytes the
    /// kernel charges (the value `SO_RCVBUF` should end up with).
    pub fn kernel_bytes(&self) -> usize {
        self.packets.saturating_mul(KERNEL_BYTES_PER_PACKET)
    }
}

/// Packets a queue may hold: `delay × rate_pps`, shared by `queues` queues
/// drained by the same thread, at least [`MIN_BOUND_PACKETS`] and at most
/// `cap`.
pub fn bound_packets(delay: Duration, rate_pps: u64, queues: usize, cap: usize) -> usize {
    let per_queue = rate_pps / queues.max(1) as u64;
    let n = (u128::from(per_queue) * delay.as_nanos()).div_ceil(1_000_000_000);
    usize::try_from(n)
        .unwrap_or(usize::MAX)
        .max(MIN_BOUND_PACKETS)
        .min(cap.max(MIN_BOUND_PACKETS))
}

/// Fewest packets in a measuring period for a new rate sample: fewer say
/// more about per-round overheads than about the drain rate.
const MIN_SAMPLE_PACKETS: u64 = 256;

/// A thread's drain rate: packets over busy time, smoothed.
#[derive(Clone, Copy, Debug)]
pub struct DrainMeter {
    packets: u64,
    busy_ns: u64,
    rate_pps: u64,
}

impl Default for DrainMeter {
    fn default() -> Self {
        DrainMeter {
            packets: 0,
            busy_ns: 0,
            rate_pps: INITIAL_RATE_PPS,
        }
    }
}

impl DrainMeter {
    /// Adds `packets` handled in `busy_ns` of busy time.
    pub fn add(&mut self, packets: u64, busy_ns: u64) {
        self.packets += packets;
        self.busy_ns += busy_ns;
    }

    /// Closes a measuring period: when it saw enough packets, its rate
    /// goes into the estimate (a quarter weight). Returns the estimate.
    pub fn update(&mut self) -> u64 {
        if self.packets >= MIN_SAMPLE_PACKETS && self.busy_ns > 0 {
            let sample = u128::from(self.packets) * 1_000_000_000 / u128::from(self.busy_ns);
            let sample = u64::try_from(sample).unwrap_or(u64::MAX);
            self.rate_pps = (self.rate_pps / 4 * 3).saturating_add(sample / 4).max(1);
            self.packets = 0;
            self.busy_ns = 0;
        }
        self.rate_pps
    }

    /// The current estimate, in packets per second.
    pub fn rate_pps(&self) -> u64 {
        self.rate_pps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_is_delay_times_rate() {
        let d = Duration::from_micros(200);
        // 320 kpps × 200 µs = 64; 1 Mpps × 200 µs = 200.
        assert_eq!(bound_packets(d, 320_000, 1, 1 << 20), 64);
        assert_eq!(bound_packets(d, 1_000_000, 1, 1 << 20), 200);
        // Shared by two queues: half each (but never below the floor).
        assert_eq!(bound_packets(d, 2_000_000, 2, 1 << 20), 200);
        assert_eq!(bound_packets(d, 400_000, 2, 1 << 20), MIN_BOUND_PACKETS);
        // Rounded up, capped, floored.
        assert_eq!(
            bound_packets(Duration::from_micros(1000), 100_001, 1, 1 << 20),
            101
        );
        assert_eq!(
            bound_packets(Duration::from_secs(1), 10_000_000, 1, 1024),
            1024
        );
        assert_eq!(bound_packets(d, 0, 0, 1024), MIN_BOUND_PACKETS);
        assert_eq!(
            bound_packets(d, u64::MAX, 1, usize::MAX),
            3_689_348_814_741_911
        );
    }

    #[test]
    fn kernel_bytes_follow_the_packets() {
        let b = RxBound {
            packets: 64,
            delay: Duration::from_micros(200),
        };
        assert_eq!(b.kernel_bytes(), 64 * KERNEL_BYTES_PER_PACKET);
    }

    #[test]
    fn meter_ignores_thin_samples_and_smooths() {
        let mut m = DrainMeter::default();
        assert_eq!(m.rate_pps(), INITIAL_RATE_PPS);
        m.add(10, 1_000);
        assert_eq!(m.update(), INITIAL_RATE_PPS, "too few packets to say");
        // 1000 more packets in 5 ms: 202 kpps with the 10 from before.
        m.add(1000, 4_999_000);
        let r = m.update();
        assert_eq!(r, INITIAL_RATE_PPS / 4 * 3 + 202_000 / 4);
        for _ in 0..40 {
            m.add(1000, 5_000_000);
            m.update();
        }
        assert!(
            (199_000..=201_000).contains(&m.rate_pps()),
            "{}",
            m.rate_pps()
        );
    }

    #[test]
    fn knob_parses_and_rejects() {
        assert_eq!(QueueDelay::from_micros(0), Ok(QueueDelay::Deep));
        assert_eq!(
            QueueDelay::from_micros(250),
            Ok(QueueDelay::Bounded(Duration::from_micros(250)))
        );
        assert_eq!(
            QueueDelay::Bounded(DEFAULT_QUEUE_DELAY).limit(),
            Some(DEFAULT_QUEUE_DELAY)
        );
        assert_eq!(QueueDelay::Deep.limit(), None);
        let e = QueueDelay::from_micros(1_000_001).unwrap_err();
        assert!(e.contains("1..=1000000"), "{e}");
    }
}
