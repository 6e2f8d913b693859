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
pub mod model;
pub mod normal;
pub mod switch_state;
pub mod tables;
#[cfg(test)]
mod test_rng;

pub use model::flow_entry::{EntryCounter, FlowEntry, FlowId, FlowRemoved, RemovalReason};
pub use model::match_key::MatchKey;
pub use model::time::{Time, COUNTER_UNAVAILABLE};
pub use switch_state::SwitchState;
pub use tables::groups::{Groups, GroupsConfig};
pub use tables::meters::{Meter, MeterVerdict, Meters, MetersConfig};
pub use tables::port_table::{PortTable, QueueConfig};
pub use tables::validate::ActionPolicy;
pub use tables::{
    any_flow, FlowFilter, FlowModOutcome, FlowPos, Tables, TablesConfig, MAX_TABLE_ENTRIES,
};
