//! How a worker measures meters: with private copies when it is the only
//! worker, with the token buckets the published meters share otherwise
//! (see the module comment of [`super::worker`]).

use crate::tables::meters::{Meter, MeterVerdict, Meters};
use crate::Time;
use std::collections::HashMap;

/// How a worker measures meters (see the module comment): with private
/// copies when it is the only worker, with the buckets the published
/// meters share otherwise.
#[derive(Clone, Debug, Default)]
pub struct LocalMeters {
    /// Other workers measure the same meters: use the shared buckets.
    shared: bool,
    /// Private copies (single worker only).
    meters: HashMap<u32, Meter>,
}

impl LocalMeters {
    /// For one of `workers` workers over the same published meters.
    pub fn new(workers: u32) -> LocalMeters {
        LocalMeters {
            shared: workers > 1,
            meters: HashMap::new(),
        }
    }

    /// Measures one packet with meter `id` of `published` (a private copy
    /// made or refreshed as needed, or the shared buckets); `None` when
    /// the published table has no such meter.
    pub fn apply(
        &mut self,
        published: &Meters,
        id: u32,
        now: Time,
        len: u32,
    ) -> Option<MeterVerdict> {
        let meter = published.get(id)?;
        if self.shared {
            return Some(meter.apply_shared(now, len));
        }
        let local = self
            .meters
            .entry(id)
            .and_modify(|m| {
                if m.generation() != meter.generation() {
                    *m = meter.worker_copy();
                }
            })
            .or_insert_with(|| meter.worker_copy());
        Some(local.apply(now, len))
    }

    /// Drops the copies of meters `published` no longer has (call now and
    /// then; a stale copy is otherwise only replaced when used).
    pub fn prune(&mut self, published: &Meters) {
        self.meters.retain(|id, m| {
            published
                .get(*id)
                .is_some_and(|p| p.generation() == m.generation())
        });
    }

    /// Number of copies held.
    pub fn len(&self) -> usize {
        self.meters.len()
    }

    /// True when no copy is held.
    pub fn is_empty(&self) -> bool {
        self.meters.is_empty()
    }
}
