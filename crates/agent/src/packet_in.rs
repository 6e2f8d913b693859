//! [`PacketInQueues`]: the packet-in path between the datapath and the
//! controller channels, built so that a flood of packet-ins can neither
//! grow memory nor starve the handling of controller messages.
//!
//! Two stages, each with a named drop counter:
//!
//! 1. Admission: a token bucket (`rate_pps` tokens a second, at most
//!    `burst` stored). A packet-in that finds no token is dropped and
//!    counted as `packet_in_rate_limited`. `rate_pps == 0` disables it.
//! 2. Queuing: one FIFO per `(reason, in_port)`, each at most `queue_len`
//!    long, at most `max_queues` of them at once. A packet-in whose queue
//!    is full (or that would need a queue beyond `max_queues`) is dropped
//!    and counted as `packet_in_queue_full`.
//!
//! [`PacketInQueues::pop`] serves the non-empty queues round-robin, so one
//! port (or one reason, such as table misses) flooding cannot starve the
//! packet-ins of the others. Memory is bounded by
//! `queue_len * max_queues` packet-ins; the caller pops only as fast as the
//! channels take them.

use ofp::{OxmField, OxmValue, PacketIn};
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// Settings of the packet-in path.
#[derive(Clone, Debug)]
pub struct PacketInConfig {
    /// Packet-ins admitted per second; 0 for no limit.
    pub rate_pps: u32,
    /// Most tokens the bucket stores (the largest burst admitted at once).
    pub burst: u32,
    /// Longest queue per `(reason, in_port)`.
    pub queue_len: usize,
    /// Most queues at once.
    pub max_queues: usize,
}

impl Default for PacketInConfig {
    fn default() -> Self {
        PacketInConfig {
            rate_pps: 1000,
            burst: 100,
            queue_len: 100,
            max_queues: 256,
        }
    }
}

/// Counters of the packet-in path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketInStats {
    /// Admitted into a queue.
    pub packet_in_queued: u64,
    /// Dropped because their queue was full.
    pub packet_in_queue_full: u64,
    /// Dropped by the token bucket.
    pub packet_in_rate_limited: u64,
    /// Queued now (at most [`PacketInQueues::capacity`]).
    pub packet_in_queue_depth: u64,
}

/// Why [`PacketInQueues::offer`] dropped a packet-in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketInDrop {
    /// No token.
    RateLimited,
    /// Its queue was full.
    QueueFull,
}

type Key = (u8, u32);

/// Bounded, rate-limited, fair packet-in queues.
#[derive(Debug)]
pub struct PacketInQueues {
    config: PacketInConfig,
    queues: HashMap<Key, VecDeque<PacketIn>>,
    /// Keys of the non-empty queues, in service order.
    order: VecDeque<Key>,
    len: usize,
    tokens: f64,
    last_refill: Option<Instant>,
    stats: PacketInStats,
}

/// The `in_port` of a packet-in's match (0 when absent).
pub fn in_port(pi: &PacketIn) -> u32 {
    pi.match_
        .fields
        .iter()
        .find_map(|o| match o {
            ofp::Oxm::Basic {
                field: OxmField::InPort,
                value: OxmValue::U32(p),
                ..
            } => Some(*p),
            _ => None,
        })
        .unwrap_or(0)
}

impl PacketInQueues {
    /// Empty queues with a full bucket.
    pub fn new(config: PacketInConfig) -> Self {
        let tokens = f64::from(config.burst.max(1));
        PacketInQueues {
            config,
            queues: HashMap::new(),
            order: VecDeque::new(),
            len: 0,
            tokens,
            last_refill: None,
            stats: PacketInStats::default(),
        }
    }

    /// Packet-ins queued now.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most packet-ins ever queued at once.
    pub fn capacity(&self) -> usize {
        self.config.queue_len.saturating_mul(self.config.max_queues)
    }

    /// The counters.
    pub fn stats(&self) -> PacketInStats {
        PacketInStats {
            packet_in_queue_depth: self.len as u64,
            ..self.stats
        }
    }

    fn take_token(&mut self, now: Instant) -> bool {
        if self.config.rate_pps == 0 {
            return true;
        }
        let burst = f64::from(self.config.burst.max(1));
        if let Some(last) = self.last_refill {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + dt * f64::from(self.config.rate_pps)).min(burst);
        }
        self.last_refill = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Admits `pi` or drops it (and counts why).
    pub fn offer(&mut self, pi: PacketIn, now: Instant) -> Result<(), PacketInDrop> {
        if !self.take_token(now) {
            self.stats.packet_in_rate_limited += 1;
            return Err(PacketInDrop::RateLimited);
        }
        let key = (pi.reason, in_port(&pi));
        let n_queues = self.queues.len();
        let full = match self.queues.get(&key) {
            Some(q) => q.len() >= self.config.queue_len,
            None => n_queues >= self.config.max_queues || self.config.queue_len == 0,
        };
        if full {
            self.stats.packet_in_queue_full += 1;
            return Err(PacketInDrop::QueueFull);
        }
        let q = self.queues.entry(key).or_default();
        if q.is_empty() {
            self.order.push_back(key);
        }
        q.push_back(pi);
        self.len += 1;
        self.stats.packet_in_queued += 1;
        Ok(())
    }

    /// The next packet-in, round-robin over the queues.
    pub fn pop(&mut self) -> Option<PacketIn> {
        let key = self.order.pop_front()?;
        let q = self.queues.get_mut(&key)?;
        let pi = q.pop_front();
        if q.is_empty() {
            self.queues.remove(&key);
        } else {
            self.order.push_back(key);
        }
        if pi.is_some() {
            self.len -= 1;
        }
        pi
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::packet_in::packet_in_reason as r;
    use std::time::Duration;

    /// Queues admitting `rate_pps` (0: no limit) with `burst` stored,
    /// `queue_len` per key, `max_queues` keys.
    fn queues(rate_pps: u32, burst: u32, queue_len: usize, max_queues: usize) -> PacketInQueues {
        PacketInQueues::new(PacketInConfig {
            rate_pps,
            burst,
            queue_len,
            max_queues,
        })
    }

    fn pi(reason: u8, port: u32, tag: u8) -> PacketIn {
        PacketIn {
            reason,
            match_: ofp::Match {
                fields: vec![ofp::Oxm::Basic {
                    field: OxmField::InPort,
                    value: OxmValue::U32(port),
                    mask: None,
                }],
            },
            data: vec![tag],
            ..PacketIn::default()
        }
    }

    #[test]
    fn token_bucket_admits_burst_then_rate() {
        let mut q = queues(100, 10, 1000, 4);
        let t0 = Instant::now();
        let admitted = (0..50)
            .filter(|_| q.offer(pi(r::NO_MATCH, 1, 0), t0).is_ok())
            .count();
        assert_eq!(admitted, 10);
        assert_eq!(q.stats().packet_in_rate_limited, 40);
        // 100 ms later: 10 more tokens.
        let t1 = t0 + Duration::from_millis(100);
        let admitted = (0..50)
            .filter(|_| q.offer(pi(r::NO_MATCH, 1, 0), t1).is_ok())
            .count();
        assert_eq!(admitted, 10);
        // Never more than the burst stored, however long the pause.
        let t2 = t1 + Duration::from_secs(100);
        let admitted = (0..50)
            .filter(|_| q.offer(pi(r::NO_MATCH, 1, 0), t2).is_ok())
            .count();
        assert_eq!(admitted, 10);
    }

    #[test]
    fn queues_are_bounded_per_key_and_in_number() {
        let mut q = queues(0, 1, 3, 2);
        let t = Instant::now();
        for _ in 0..10 {
            let _ = q.offer(pi(r::NO_MATCH, 1, 0), t);
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.offer(pi(r::ACTION, 1, 0), t), Ok(()));
        // A third key does not fit.
        assert_eq!(
            q.offer(pi(r::NO_MATCH, 2, 0), t),
            Err(PacketInDrop::QueueFull)
        );
        assert_eq!(q.stats().packet_in_queue_full, 8);
        assert!(q.len() <= q.capacity());
    }

    #[test]
    fn flood_on_one_port_does_not_starve_another() {
        let mut q = queues(0, 1, 100, 16);
        let t = Instant::now();
        for i in 0..1_000_000u32 {
            let _ = q.offer(pi(r::NO_MATCH, 1, (i % 200) as u8), t);
        }
        q.offer(pi(r::ACTION, 2, 77), t).unwrap();
        assert_eq!(q.len(), 101);
        assert_eq!(q.stats().packet_in_queue_full, 1_000_000 - 100);
        let first_two: Vec<_> = (0..2).map(|_| q.pop().unwrap()).collect();
        assert!(first_two.iter().any(|p| in_port(p) == 2 && p.data == [77]));
        let mut n = 2;
        while q.pop().is_some() {
            n += 1;
        }
        assert_eq!(n, 101);
        assert!(q.is_empty());
        assert_eq!(q.queues.len(), 0, "empty queues are freed");
    }
}
