//! Timeouts (spec 1.3.5 §5.5): removing entries whose idle or hard
//! timeout has run out.

use super::set::Tables;
use crate::model::flow_entry::{FlowEntry, FlowId, FlowRemoved, RemovalReason};
use crate::Time;

impl Tables {
    /// Removes every entry whose idle or hard timeout has run out at `now`,
    /// returning FLOW_REMOVED events for those installed with
    /// SEND_FLOW_REM (all expired entries are removed). Looks only at the
    /// entries that have a timeout, in table then installation order.
    pub fn expire(&mut self, now: Time) -> Vec<FlowRemoved> {
        let mut timed: Vec<&FlowEntry> =
            self.timed.iter().filter_map(|id| self.entry(*id)).collect();
        timed.sort_by_key(|e| (e.table_id, e.id));
        let due: Vec<(FlowId, RemovalReason)> = timed
            .into_iter()
            .filter_map(|e| {
                let last = self.counter(e.id).map_or(e.installed_at, |c| c.last_used);
                e.expired(now, last).map(|r| (e.id, r))
            })
            .collect();
        let mut events = Vec::new();
        for (id, reason) in due {
            events.extend(self.remove_ids(&[id], reason, now));
        }
        events
    }
}
