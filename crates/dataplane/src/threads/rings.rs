//! Staged bursts toward the SPSC rings between threads.
//!
//! A ring keeps its capacity whatever a port's `max_queue_delay_us`:
//! where the RX, worker and TX threads share CPUs, a ring bounded to a
//! fraction of a millisecond at its consumer's rate drops whenever the
//! consumer loses its CPU for a scheduler slice, and the split mode then
//! forwards a fraction of what deep rings carry (docs/results.md, "Delay
//! at saturation"). The kernel's receive buffer, still bounded
//! ([`crate::delay`]), keeps the delay before the RX thread short, and a
//! ring adds at most its capacity at the worker's rate. What does not fit
//! is counted as a full ring (`rx_ring_full`, `tx_ring_full`).
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
