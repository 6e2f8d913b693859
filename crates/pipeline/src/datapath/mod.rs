//! The packet-processing half of the OpenFlow 1.3.5 pipeline (spec §5):
//! table lookup, instructions (§5.9), the action set (§5.10), actions
//! (§5.12), groups (§5.6, §6.5), meters (§5.7), packet-ins with buffer
//! ids, and per-worker counters.
//!
//! A [`Datapath`] is one pipeline instance, owned by one worker: it holds
//! the control-side [`SwitchState`] it reads (tables, groups, meters), the
//! port table, and a [`WorkerState`] (bounded buffer pool, meter token
//! buckets, its own [`Counters`]). Several workers over one shared,
//! read-only state use [`WorkerState`] and [`PipelineView`] directly (see
//! [`worker`]). It does no I/O, spawns no thread and never reads a
//! clock: [`Datapath::process_burst`] takes the ingress port, a burst of
//! packets and the time, and returns what to transmit, what to send to the
//! controller and what was dropped.
//!
//! Lookups go through each table's classifier index (the reference linear
//! scan instead with [`Datapath::set_reference_lookup`], for differential
//! tests: a flag, not a trait object on the packet path). A table 0 of
//! one exact link-layer mask or of IPv4 routes takes the express path
//! first (see
//! [`worker`]); otherwise a burst is parsed first; table 0 is answered
//! by the worker's flow cache or one
//! prefetching burst lookup, the entries hit are prefetched and run from
//! their compiled form ([`crate::tables::compiled`]) when they have one,
//! later tables packet by packet (see [`worker`], "A burst, stage by
//! stage").
//!
//! Decisions where the spec leaves room:
//! - Group bucket actions run in list order, as in Open vSwitch (the spec
//!   calls them an action set; the two agree on every bucket that lists
//!   its actions in set order, and list order allows several outputs).
//! - An action that cannot apply to this packet (pop_vlan of an untagged
//!   frame reached through an earlier apply-action, a set-field whose
//!   prerequisite no longer holds) is skipped and counted
//!   (`action_failed`); the packet goes on.
//! - A packet-in carries the output action's `max_len` whatever the reason
//!   (a table-miss entry's `output:CONTROLLER` included); `miss_send_len`
//!   is used for packet-ins that no output action made (`OFPR_INVALID_TTL`),
//!   as spec 1.3.5 §7.3.2 defines it ("when not using an output action to
//!   the OFPP_CONTROLLER logical port"). Open vSwitch does the same.
//! - Packet-ins not caused by a flow entry (from a packet-out) report table
//!   0 and cookie `0xffffffffffffffff`.
//! - DSCP remark raises the AF drop precedence (DSCP bits 1-2) by the
//!   band's `prec_level`, capped at 3.
//! - Select groups hash the L2 addresses, EtherType, VLAN, IP addresses,
//!   IP protocol, transport ports and MPLS label, skip buckets of weight 0
//!   and dead buckets (watch port/group), and pick by weight.

pub mod action_set;
pub mod buffers;
mod config;
pub mod counters;
mod exec;
mod instance;
mod local_meters;
mod normal;
mod output;

#[cfg(test)]
mod tests;
pub mod worker;

pub use crate::model::ports::{PortInfo, Ports};
pub use action_set::ActionSet;
pub use buffers::BufferPool;
pub use classifier::CacheStats;
pub use counters::{Counters, DropCounters, DropReason, FlowMap, SlotHits, HAND_OVER_LIMIT};
pub use exec::remark_dscp;
pub use worker::{
    PipelineView, Snapshot, WorkerState, CACHE_BYPASS, CACHE_MIN_HIT_DIV, CACHE_WINDOW,
    DEFAULT_FLOW_CACHE,
};

pub use config::{DatapathConfig, OFPC_INVALID_TTL_TO_CONTROLLER};
pub use instance::Datapath;
pub use local_meters::LocalMeters;
pub use output::{BurstOutput, PacketInEvent, TraceEvent, TxPacket};
