//! OpenFlow 1.3 switch semantics (spec 1.3.5 §5–§6): flow tables, groups
//! and meters, and the packet processing that reads them.
//!
//! The control side ([`SwitchState`]) holds the state a controller changes
//! with FLOW_MOD, GROUP_MOD, METER_MOD and PORT_MOD (tables, groups,
//! meters, the [`PortTable`] with queues, the switch description),
//! validates every change completely before it applies anything (a failed
//! modification leaves the state exactly as it was), and answers every
//! multipart request, TABLE_MOD and QUEUE_GET_CONFIG ([`features`] derives
//! the table features from what the implementation does). The packet side
//! ([`datapath`]) runs bursts of packets through the tables (lookup,
//! instructions, action set, groups, meters, packet-ins) with no I/O and
//! no threads of its own; several workers can share one read-only state,
//! each with its own [`datapath::WorkerState`], and the control side folds
//! their counters back ([`SwitchState::fold`]).
//!
//! Time is never read from a clock here: every operation that needs it is
//! handed a [`Time`] (nanoseconds on some monotonic clock the caller
//! chooses), so tests drive timeouts and meters with a simulated clock.

pub mod datapath;
pub mod features;
pub mod flow_entry;
pub mod flow_table;
pub mod group_table;
pub mod match_key;
pub mod meter_table;
pub mod port_table;
pub mod switch_state;
pub mod validate;

pub use flow_entry::{FlowEntry, FlowId, FlowRemoved, RemovalReason};
pub use flow_table::{
    any_flow, FlowFilter, FlowModOutcome, FlowPos, Tables, TablesConfig, MAX_TABLE_ENTRIES,
};
pub use group_table::{Groups, GroupsConfig};
pub use match_key::MatchKey;
pub use meter_table::{Meter, MeterVerdict, Meters, MetersConfig};
pub use port_table::{PortTable, QueueConfig};
pub use switch_state::SwitchState;
pub use validate::ActionPolicy;

/// A point in time: nanoseconds since an arbitrary epoch of a monotonic
/// clock chosen by the caller. Only differences between two `Time`s mean
/// anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// `secs` whole seconds after the epoch.
    pub const fn from_secs(secs: u64) -> Time {
        Time(secs.saturating_mul(1_000_000_000))
    }

    /// `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1_000_000))
    }

    /// Nanoseconds from `earlier` to `self`; zero if `earlier` is later
    /// (a caller's clock never runs backwards, but nothing breaks if it does).
    pub const fn nanos_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self` plus `secs` seconds, saturating.
    pub const fn plus_secs(self, secs: u64) -> Time {
        Time(self.0.saturating_add(secs.saturating_mul(1_000_000_000)))
    }

    /// The `(duration_sec, duration_nsec)` pair OpenFlow statistics report
    /// for the time from `since` to `self`.
    pub fn duration_since(self, since: Time) -> (u32, u32) {
        let ns = self.nanos_since(since);
        let secs = ns / 1_000_000_000;
        (
            u32::try_from(secs).unwrap_or(u32::MAX),
            (ns % 1_000_000_000) as u32,
        )
    }
}

/// The value OpenFlow statistics report for a counter the switch does not
/// keep (spec 1.3.5 §7.3.5: "all bits set").
pub const COUNTER_UNAVAILABLE: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_splits_seconds_and_nanoseconds() {
        let t0 = Time(5);
        let t1 = Time(5 + 3 * 1_000_000_000 + 250);
        assert_eq!(t1.duration_since(t0), (3, 250));
        assert_eq!(t0.duration_since(t1), (0, 0));
        assert_eq!(Time::from_secs(2).plus_secs(3), Time::from_secs(5));
        assert_eq!(
            Time::from_millis(1500).duration_since(Time(0)),
            (1, 500_000_000)
        );
    }
}
