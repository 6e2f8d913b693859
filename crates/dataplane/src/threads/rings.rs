//! Staged bursts toward the SPSC rings between threads, and the time
//! bound a producer keeps on them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::delay::{bound_packets, DrainCell, QueueDelay};
use crate::flush::FlushPolicy;
use crate::spsc::Producer;
use crate::wake::Doorbell;

use super::counters::{DropMap, RingItem};

/// A staged burst toward a ring.
pub(super) struct Stage<T> {
    pub(super) ring: Producer<T>,
    pub(super) bell: Arc<Doorbell>,
    pub(super) pending: Vec<T>,
    pub(super) limit: usize,
    pub(super) first_at: Option<Instant>,
    /// The ring's time bound, if it has one.
    pub(super) gate: Option<Gate>,
}

/// A ring's time bound as its producer keeps it: the consumer's published
/// drain rate, and the room left under the bound when last computed.
pub(super) struct Gate {
    pub(super) drain: Arc<DrainCell>,
    pub(super) delay: Duration,
    /// Rings the consumer drains (they share its rate).
    pub(super) inputs: usize,
    pub(super) room: usize,
}

impl Gate {
    pub(super) fn new(drain: Arc<DrainCell>, delay: QueueDelay, inputs: usize) -> Option<Gate> {
        delay.limit().map(|delay| Gate {
            drain,
            delay,
            inputs,
            room: 0,
        })
    }

    /// Whether one more packet fits under the bound, `staged` packets
    /// being on their way into `ring` already. Looks at the ring (the
    /// consumer's index) only when the room last computed is used up.
    pub(super) fn admit<T>(&mut self, ring: &mut Producer<T>, staged: usize) -> bool {
        if self.room == 0 {
            let cap = ring.capacity();
            let fill = cap - ring.free();
            let bound = bound_packets(self.delay, self.drain.get(), self.inputs, cap);
            self.room = bound.saturating_sub(fill + staged);
            if self.room == 0 {
                return false;
            }
        }
        self.room -= 1;
        true
    }
}

impl<T: RingItem> Stage<T> {
    pub(super) fn new(
        ring: Producer<T>,
        bell: Arc<Doorbell>,
        limit: usize,
        gate: Option<Gate>,
    ) -> Stage<T> {
        Stage {
            ring,
            bell,
            pending: Vec::with_capacity(limit),
            limit,
            first_at: None,
            gate,
        }
    }

    pub(super) fn push(&mut self, v: T, now: Instant, drops: &DropMap) {
        if let Some(g) = &mut self.gate {
            if !g.admit(&mut self.ring, self.pending.len()) {
                drops.count(v.port(), 1, T::delay_cell);
                return;
            }
        }
        self.pending.push(v);
        self.first_at.get_or_insert(now);
        if self.pending.len() >= self.limit {
            self.flush(drops);
        }
    }

    pub(super) fn flush(&mut self, drops: &DropMap) {
        if self.pending.is_empty() {
            return;
        }
        self.ring.push_from_vec(&mut self.pending);
        // What did not fit is dropped, counted against its port.
        for v in self.pending.drain(..) {
            drops.count(v.port(), 1, T::cell);
        }
        self.first_at = None;
        self.bell.ring_if_sleeping();
    }

    pub(super) fn flush_due(
        &mut self,
        now: Instant,
        last_input: Instant,
        drained: bool,
        policy: &FlushPolicy,
        drops: &DropMap,
    ) {
        if let Some(first) = self.first_at {
            if policy.due(now, first, last_input, drained) {
                self.flush(drops);
            }
        }
    }
}
