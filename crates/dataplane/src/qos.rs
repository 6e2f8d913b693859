//! Egress queues: a port's packets sorted into queues by the queue id the
//! pipeline chose (`set_queue`), served by strict priority under per-queue
//! minimum and maximum rates and an optional port maximum rate.
//!
//! [`Scheduler`] is a plain struct with no I/O and no clock of its own:
//! every call that depends on time is handed the time, in nanoseconds of
//! any monotonic clock, so its tests run on a simulated clock. The
//! threads ([`crate::threads`]) hold one per port that has queues
//! configured, behind a mutex only dataplane threads take, once per burst.
//!
//! # The model
//!
//! - A queue has an id (the OpenFlow queue id), a `priority` (a lower
//!   number is served first, as Open vSwitch's linux-htb/linux-hfsc
//!   `priority`), an optional minimum rate, an optional maximum rate and a
//!   bounded length in packets (drop-tail: a packet that finds its queue
//!   full is dropped and counted in that queue's `dropped`).
//! - The port may have a maximum rate: nothing leaves faster than that,
//!   minimum rates included.
//! - The default queue takes packets without a queue id (0) and packets
//!   whose queue id the port does not have (Open vSwitch does the same).
//!   It is queue 0's configuration when queue 0 is configured; otherwise an
//!   implicit queue 0 with the lowest priority and no rates of its own.
//!
//! # Rates: token buckets in bytes
//!
//! Each rate is a bucket that fills at the rate (bytes per second) up to
//! its burst ([`burst_for`]: 10 ms at that rate, at least two 1518-byte
//! frames). A packet may leave through a bucket while the bucket holds
//! more than zero bytes; sending takes its length from every bucket it
//! passes (port, the queue's maximum and minimum), which may leave a
//! bucket below zero by less than one packet. So a packet larger than a
//! burst still leaves, and the long-run rate is the configured one.
//!
//! # One pick ([`Scheduler::dequeue`])
//!
//! 1. Nothing leaves while the port bucket is empty.
//! 2. The first non-empty queue, in priority order, whose minimum-rate
//!    bucket is not empty (a queue below its guaranteed rate), and whose
//!    maximum-rate bucket is not empty either.
//! 3. Otherwise the first non-empty queue, in priority order, whose
//!    maximum-rate bucket is not empty (or which has no maximum).
//!
//! Queues of equal priority are ordered by id: there is no round robin or
//! weighted sharing between them.
//!
//! Invariants: `order` lists every queue once, sorted by (priority, id);
//! `len` is the sum of the queues' lengths; a queue never holds more than
//! its `limit`.

use std::collections::VecDeque;

/// Packets a queue holds at most unless configured otherwise.
pub const DEFAULT_QUEUE_LEN: usize = 1000;

/// Bytes of the largest frame the bursts are sized for.
const FRAME: u64 = 1518;

/// The burst, in bytes, of a bucket filling at `rate_bps` bits per second:
/// 10 ms at that rate, at least two full Ethernet frames.
pub fn burst_for(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 100).max(2 * FRAME)
}

/// One queue's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSpec {
    /// The queue id `set_queue` names (0: the default queue).
    pub id: u32,
    /// Served before queues with a larger number.
    pub priority: u32,
    /// Guaranteed rate in bits per second (0: none).
    pub min_rate: u64,
    /// Ceiling in bits per second (0: none but the port's).
    pub max_rate: u64,
    /// Packets held at most (drop-tail beyond).
    pub limit: usize,
}

impl QueueSpec {
    /// A queue with no rates, priority 0 and the default length.
    pub fn new(id: u32) -> QueueSpec {
        QueueSpec {
            id,
            priority: 0,
            min_rate: 0,
            max_rate: 0,
            limit: DEFAULT_QUEUE_LEN,
        }
    }
}

/// A port's queue configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QosSpec {
    /// The port's ceiling in bits per second (0: none).
    pub max_rate: u64,
    /// The queues, in any order, ids unique.
    pub queues: Vec<QueueSpec>,
}

/// Errors in a [`QosSpec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QosError {
    /// Two queues with one id.
    DuplicateQueue(u32),
    /// A queue's minimum rate above its maximum.
    MinAboveMax(u32),
    /// A queue of length 0.
    ZeroLimit(u32),
}

impl std::fmt::Display for QosError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QosError::DuplicateQueue(q) => write!(f, "queue {q} is configured twice"),
            QosError::MinAboveMax(q) => {
                write!(f, "queue {q}: min_rate is above max_rate")
            }
            QosError::ZeroLimit(q) => write!(f, "queue {q}: a length of 0 holds nothing"),
        }
    }
}

impl std::error::Error for QosError {}

impl QosSpec {
    /// Checks the spec (see [`QosError`]).
    pub fn check(&self) -> Result<(), QosError> {
        let mut seen = std::collections::BTreeSet::new();
        for q in &self.queues {
            if !seen.insert(q.id) {
                return Err(QosError::DuplicateQueue(q.id));
            }
            if q.max_rate != 0 && q.min_rate > q.max_rate {
                return Err(QosError::MinAboveMax(q.id));
            }
            if q.limit == 0 {
                return Err(QosError::ZeroLimit(q.id));
            }
        }
        Ok(())
    }
}

/// A token bucket in bytes. `tokens` may go below zero by less than one
/// packet (see the module comment).
#[derive(Clone, Debug)]
struct Bucket {
    /// Bytes per second.
    rate: u64,
    /// Bytes it holds at most.
    burst: i64,
    tokens: i64,
    /// Nanoseconds of refill not yet turned into a whole byte, times rate.
    rem: u128,
}

impl Bucket {
    fn new(rate_bps: u64) -> Bucket {
        let burst = i64::try_from(burst_for(rate_bps)).unwrap_or(i64::MAX);
        Bucket {
            rate: (rate_bps / 8).max(1),
            burst,
            tokens: burst,
            rem: 0,
        }
    }

    fn refill(&mut self, dt_ns: u64) {
        if self.tokens >= self.burst {
            self.rem = 0;
            return;
        }
        let total = u128::from(dt_ns) * u128::from(self.rate) + self.rem;
        let bytes = total / 1_000_000_000;
        self.rem = total % 1_000_000_000;
        let add = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.tokens = self.tokens.saturating_add(add).min(self.burst);
    }

    fn open(&self) -> bool {
        self.tokens > 0
    }

    fn take(&mut self, len: u64) {
        self.tokens = self
            .tokens
            .saturating_sub(i64::try_from(len).unwrap_or(i64::MAX));
    }

    /// Nanoseconds until the bucket is open again (0 when it is).
    fn wait_ns(&self) -> u64 {
        if self.tokens > 0 {
            return 0;
        }
        let need = u128::from(self.tokens.unsigned_abs()) + 1;
        let ns = (need * 1_000_000_000).saturating_sub(self.rem) / u128::from(self.rate) + 1;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// One queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// The queue id.
    pub id: u32,
    /// Packets the scheduler let out.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Packets dropped because the queue was full (drop-tail).
    pub dropped: u64,
}

struct Queue<T> {
    spec: QueueSpec,
    min: Option<Bucket>,
    max: Option<Bucket>,
    fifo: VecDeque<(T, u32)>,
    counters: QueueCounters,
}

/// The scheduler of one port. See the module comment.
pub struct Scheduler<T> {
    port: Option<Bucket>,
    /// Sorted by (priority, id).
    queues: Vec<Queue<T>>,
    /// Index in `queues` of the default queue.
    default: usize,
    /// Packets held in all queues.
    len: usize,
    /// The last time handed in.
    last_ns: u64,
}

impl<T> Scheduler<T> {
    /// A scheduler for `spec` (checked first), its buckets full at `now_ns`.
    pub fn new(spec: &QosSpec, now_ns: u64) -> Result<Scheduler<T>, QosError> {
        spec.check()?;
        let mut specs = spec.queues.clone();
        if !specs.iter().any(|q| q.id == 0) {
            specs.push(QueueSpec {
                priority: u32::MAX,
                ..QueueSpec::new(0)
            });
        }
        specs.sort_by_key(|q| (q.priority, q.id));
        let queues: Vec<Queue<T>> = specs
            .into_iter()
            .map(|s| Queue {
                min: (s.min_rate > 0).then(|| Bucket::new(s.min_rate)),
                max: (s.max_rate > 0).then(|| Bucket::new(s.max_rate)),
                fifo: VecDeque::new(),
                counters: QueueCounters {
                    id: s.id,
                    ..QueueCounters::default()
                },
                spec: s,
            })
            .collect();
        let default = queues.iter().position(|q| q.spec.id == 0).unwrap_or(0);
        Ok(Scheduler {
            port: (spec.max_rate > 0).then(|| Bucket::new(spec.max_rate)),
            queues,
            default,
            len: 0,
            last_ns: now_ns,
        })
    }

    /// Packets held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn index_of(&self, queue_id: u32) -> usize {
        // A handful of queues: a scan beats a map.
        self.queues
            .iter()
            .position(|q| q.spec.id == queue_id)
            .unwrap_or(self.default)
    }

    /// Queues `item` of `len` bytes on queue `queue_id` (the default queue
    /// when the port has no such queue). A full queue drops it (counted):
    /// the item comes back as `Err` for the caller to free.
    pub fn enqueue(&mut self, queue_id: u32, item: T, len: u32) -> Result<(), T> {
        let i = self.index_of(queue_id);
        let Some(q) = self.queues.get_mut(i) else {
            return Err(item);
        };
        if q.fifo.len() >= q.spec.limit {
            q.counters.dropped += 1;
            return Err(item);
        }
        q.fifo.push_back((item, len));
        self.len += 1;
        Ok(())
    }

    fn advance(&mut self, now_ns: u64) {
        let dt = now_ns.saturating_sub(self.last_ns);
        if dt == 0 {
            return;
        }
        self.last_ns = now_ns;
        if let Some(b) = &mut self.port {
            b.refill(dt);
        }
        for q in &mut self.queues {
            for b in [&mut q.min, &mut q.max].into_iter().flatten() {
                b.refill(dt);
            }
        }
    }

    /// The next packet to send at `now_ns`, if the rates let one leave.
    pub fn dequeue(&mut self, now_ns: u64) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.advance(now_ns);
        if self.port.as_ref().is_some_and(|b| !b.open()) {
            return None;
        }
        let under_max = |q: &Queue<T>| !matches!(&q.max, Some(b) if !b.open());
        let i = self
            .queues
            .iter()
            .position(|q| {
                !q.fifo.is_empty() && q.min.as_ref().is_some_and(Bucket::open) && under_max(q)
            })
            .or_else(|| {
                self.queues
                    .iter()
                    .position(|q| !q.fifo.is_empty() && under_max(q))
            })?;
        let q = self.queues.get_mut(i)?;
        let (item, len) = q.fifo.pop_front()?;
        let len = u64::from(len);
        for b in [&mut q.min, &mut q.max].into_iter().flatten() {
            b.take(len);
        }
        if let Some(b) = &mut self.port {
            b.take(len);
        }
        q.counters.tx_packets += 1;
        q.counters.tx_bytes += len;
        self.len -= 1;
        Some(item)
    }

    /// Nanoseconds after the last time handed in until a held packet may
    /// leave (0: now; `None`: nothing held).
    pub fn wait_ns(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let queue = self
            .queues
            .iter()
            .filter(|q| !q.fifo.is_empty())
            .map(|q| q.max.as_ref().map_or(0, Bucket::wait_ns))
            .min()
            .unwrap_or(0);
        let port = self.port.as_ref().map_or(0, Bucket::wait_ns);
        Some(queue.max(port))
    }

    /// Every queue's counters, the default queue included, by priority.
    pub fn counters(&self) -> impl Iterator<Item = QueueCounters> + '_ {
        self.queues.iter().map(|q| q.counters)
    }

    /// Takes every held packet out (port removal, shutdown), counting
    /// none of them.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.len = 0;
        self.queues
            .iter_mut()
            .flat_map(|q| q.fifo.drain(..).map(|(t, _)| t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000_000_000;

    fn q(id: u32, priority: u32, min: u64, max: u64) -> QueueSpec {
        QueueSpec {
            priority,
            min_rate: min,
            max_rate: max,
            ..QueueSpec::new(id)
        }
    }

    /// A scheduler for a port of `max_rate` bits/s (0: unlimited) with
    /// `queues`, at time 0.
    fn scheduler<T>(max_rate: u64, queues: Vec<QueueSpec>) -> Scheduler<T> {
        Scheduler::new(&QosSpec { max_rate, queues }, 0).unwrap()
    }

    /// Keeps `queue` filled with `len`-byte packets (tagged by queue id)
    /// and drains the scheduler every `step` nanoseconds for `secs`
    /// simulated seconds; bytes sent per queue id.
    fn run(
        s: &mut Scheduler<u32>,
        feed: &[(u32, u32)],
        step: u64,
        secs: u64,
    ) -> std::collections::BTreeMap<u32, u64> {
        let mut sent = std::collections::BTreeMap::new();
        let mut now = 0;
        while now < secs * SEC {
            for &(id, len) in feed {
                while s.enqueue(id, id, len).is_ok() {}
            }
            while let Some(id) = s.dequeue(now) {
                let len = feed.iter().find(|f| f.0 == id).map_or(0, |f| f.1);
                *sent.entry(id).or_insert(0) += u64::from(len);
            }
            now += step;
        }
        sent
    }

    fn rate(bytes: u64, secs: u64) -> u64 {
        bytes * 8 / secs
    }

    fn near(got: u64, want: u64) -> bool {
        // Within 2 % plus one burst's worth over the run.
        got.abs_diff(want) <= want / 50 + 2 * burst_for(want) * 8
    }

    #[test]
    fn strict_priority_serves_the_lower_number_first() {
        let mut s = scheduler(0, vec![q(1, 0, 0, 0), q(2, 5, 0, 0)]);
        for i in 0..3 {
            s.enqueue(2, 20 + i, 100).unwrap();
        }
        for i in 0..3 {
            s.enqueue(1, 10 + i, 100).unwrap();
        }
        let order: Vec<u32> = std::iter::from_fn(|| s.dequeue(0)).collect();
        assert_eq!(order, vec![10, 11, 12, 20, 21, 22]);
        assert!(s.is_empty());
    }

    #[test]
    fn the_port_rate_caps_everything_and_priority_takes_it_all() {
        // 10 Mbit/s port, both queues always full: the high one gets it all.
        let mut s = scheduler(10_000_000, vec![q(1, 0, 0, 0), q(2, 1, 0, 0)]);
        let sent = run(&mut s, &[(1, 1000), (2, 1000)], MS, 4);
        assert!(near(rate(sent[&1], 4), 10_000_000), "{sent:?}");
        // Only the first burst's leftovers, if any, reach queue 2.
        assert!(
            sent.get(&2).copied().unwrap_or(0) <= burst_for(10_000_000),
            "{sent:?}"
        );
    }

    #[test]
    fn a_min_rate_is_kept_under_a_higher_priority_flood() {
        let mut s = scheduler(10_000_000, vec![q(1, 0, 0, 0), q(2, 1, 3_000_000, 0)]);
        let sent = run(&mut s, &[(1, 1000), (2, 1000)], MS, 4);
        assert!(near(rate(sent[&2], 4), 3_000_000), "{sent:?}");
        assert!(near(rate(sent[&1], 4), 7_000_000), "{sent:?}");
    }

    #[test]
    fn a_max_rate_caps_a_queue_and_the_rest_goes_to_the_next() {
        let mut s = scheduler(10_000_000, vec![q(1, 0, 0, 4_000_000), q(2, 1, 0, 0)]);
        let sent = run(&mut s, &[(1, 500), (2, 1500)], MS, 4);
        assert!(near(rate(sent[&1], 4), 4_000_000), "{sent:?}");
        assert!(near(rate(sent[&2], 4), 6_000_000), "{sent:?}");
    }

    #[test]
    fn without_a_port_rate_a_max_rate_alone_shapes() {
        let mut s = scheduler(0, vec![q(3, 0, 0, 2_000_000)]);
        let sent = run(&mut s, &[(3, 1200)], 3 * MS, 5);
        assert!(near(rate(sent[&3], 5), 2_000_000), "{sent:?}");
    }

    #[test]
    fn a_full_queue_drops_at_the_tail_and_counts_it() {
        // 1000 bytes/s: nothing much leaves
        let mut s = scheduler(
            8_000,
            vec![QueueSpec {
                limit: 3,
                ..q(1, 0, 0, 0)
            }],
        );
        for i in 0..5 {
            let r = s.enqueue(1, i, 100);
            assert_eq!(r.is_ok(), i < 3, "{i}");
            if i >= 3 {
                assert_eq!(r, Err(i));
            }
        }
        assert_eq!(s.len(), 3);
        let c: Vec<QueueCounters> = s.counters().collect();
        assert_eq!(c[0].id, 1);
        assert_eq!(c[0].dropped, 2);
        // The head leaves first: drop-tail keeps the oldest.
        assert_eq!(s.dequeue(0), Some(0));
    }

    #[test]
    fn unknown_and_zero_queue_ids_use_the_default_queue() {
        let mut s = scheduler(0, vec![q(1, 0, 0, 0)]);
        s.enqueue(0, 100, 64).unwrap();
        s.enqueue(77, 177, 64).unwrap();
        s.enqueue(1, 1, 64).unwrap();
        // The implicit default queue comes last.
        let order: Vec<u32> = std::iter::from_fn(|| s.dequeue(0)).collect();
        assert_eq!(order, vec![1, 100, 177]);
        let c: Vec<QueueCounters> = s.counters().collect();
        assert_eq!((c[1].id, c[1].tx_packets, c[1].tx_bytes), (0, 2, 128));
    }

    #[test]
    fn a_configured_queue_0_is_the_default_with_its_own_priority() {
        let mut s = scheduler(0, vec![q(0, 0, 0, 0), q(1, 7, 0, 0)]);
        s.enqueue(1, 1, 64).unwrap();
        s.enqueue(9, 9, 64).unwrap();
        let order: Vec<u32> = std::iter::from_fn(|| s.dequeue(0)).collect();
        assert_eq!(order, vec![9, 1]);
    }

    #[test]
    fn wait_says_when_the_port_bucket_opens() {
        // 1 byte per microsecond
        let mut s = scheduler(8_000_000, vec![]);
        assert_eq!(s.wait_ns(), None);
        let burst = burst_for(8_000_000);
        // Empty the bucket exactly, then one more packet is held.
        let n = burst / 1000;
        for i in 0..=n {
            s.enqueue(0, i as u32, 1000).unwrap();
        }
        let mut out = 0;
        while s.dequeue(0).is_some() {
            out += 1;
        }
        assert!(out >= n && out <= n + 1, "{out} of {n}");
        if let Some(w) = s.wait_ns() {
            assert!(w > 0 && w <= 1001 * 1000, "{w}");
            assert_eq!(s.dequeue(0), None);
            assert!(s.dequeue(w).is_some());
        }
    }

    #[test]
    fn a_packet_larger_than_a_burst_still_leaves() {
        // burst: two frames
        let mut s = scheduler(8_000, vec![]);
        s.enqueue(0, 1, 9000).unwrap();
        s.enqueue(0, 2, 9000).unwrap();
        assert_eq!(s.dequeue(0), Some(1));
        assert_eq!(s.dequeue(0), None);
        // 9000 - 3036 bytes in debt at 1000 bytes/s: about 6 s.
        assert_eq!(s.dequeue(5 * SEC), None);
        assert_eq!(s.dequeue(7 * SEC), Some(2));
    }

    #[test]
    fn bad_specs_are_refused() {
        let dup = QosSpec {
            max_rate: 0,
            queues: vec![q(1, 0, 0, 0), q(1, 1, 0, 0)],
        };
        assert_eq!(
            Scheduler::<u32>::new(&dup, 0).err(),
            Some(QosError::DuplicateQueue(1))
        );
        let minmax = QosSpec {
            max_rate: 0,
            queues: vec![q(2, 0, 5, 4)],
        };
        assert_eq!(minmax.check(), Err(QosError::MinAboveMax(2)));
        let zero = QosSpec {
            max_rate: 0,
            queues: vec![QueueSpec {
                limit: 0,
                ..q(3, 0, 0, 0)
            }],
        };
        assert_eq!(zero.check(), Err(QosError::ZeroLimit(3)));
    }

    #[test]
    fn drain_empties_every_queue() {
        let mut s = scheduler(8_000, vec![q(1, 0, 0, 0)]);
        for i in 0..4 {
            s.enqueue(i % 2, i, 5000).unwrap();
        }
        assert_eq!(s.drain().count(), 4);
        assert!(s.is_empty());
        assert_eq!(s.wait_ns(), None);
    }
}
