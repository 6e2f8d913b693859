//! Staged bursts toward the SPSC rings between threads.
//!
//! A ring keeps its capacity whatever a port's `max_queue_delay_us`
//! (dropping at a small bound whenever the consumer loses its CPU for a
//! scheduler slice made split mode forward a fraction of what deep rings
//! carry: docs/results.md, "Delay at saturation"). Under a time bound the
//! RX thread instead stops reading its ports while a worker's ring holds
//! a burst or more ([`Stage::queued`], `split`): the backlog then waits in
//! the ports, whose bound drops by age and spares sparse frames, and not
//! in a ring where a ping would wait for every frame before it. What does
//! not fit is counted as a full ring (`rx_ring_full`, `tx_ring_full`).
//!
//! Between the set's own threads a lost turn is shorter now: threads that
//! share a CPU yield after every busy round (`spawn::crowded`), so each
//! waits for the others' bursts, not their slices. Other processes on the
//! CPU still take whole slices, which the deep rings bridge.

use std::sync::Arc;
use std::time::Instant;

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
}

impl<T: RingItem> Stage<T> {
    pub(super) fn new(ring: Producer<T>, bell: Arc<Doorbell>, limit: usize) -> Stage<T> {
        Stage {
            ring,
            bell,
            pending: Vec::with_capacity(limit),
            limit,
            first_at: None,
        }
    }

    pub(super) fn push(&mut self, v: T, now: Instant, drops: &DropMap) {
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

    /// Items in the ring, published and not yet taken by the consumer
    /// (not those staged here: the consumer cannot drain those, so a wait
    /// on them could last forever).
    pub(super) fn queued(&mut self) -> usize {
        self.ring.capacity() - self.ring.free()
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
