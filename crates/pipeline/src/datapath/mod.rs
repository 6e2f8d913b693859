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
//! Lookups go through each table's classifier index
//! ([`FastClassifier`], the default; [`LinearScan`] is the reference,
//! selectable with [`Datapath::set_classifier`]). A burst is parsed
//! first; table 0 is answered by the worker's flow cache or one
//! prefetching burst lookup, the entries hit are prefetched and run from
//! their compiled form ([`fast`]) when they have one, later tables packet
//! by packet (see [`worker`], "A burst, stage by stage").
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
pub mod counters;
mod exec;

pub mod lookup;
pub mod ports;
#[cfg(test)]
mod tests;
pub mod worker;

pub use action_set::ActionSet;
pub use buffers::BufferPool;
pub use classifier::CacheStats;
pub use counters::{Counters, DropCounters};
pub use exec::remark_dscp;
pub use lookup::{Classifier, FastClassifier, LinearScan};
pub use ports::{PortInfo, Ports};
pub use worker::{
    LocalMeters, PipelineView, Snapshot, WorkerState, CACHE_BYPASS, CACHE_MIN_HIT_DIV,
    CACHE_WINDOW, DEFAULT_FLOW_CACHE,
};

use crate::model::flow_entry::FlowId;
use crate::tables::meters::MeterVerdict;
use crate::{SwitchState, Time};
use ofp::{Action, OfpError, PacketOut};
use packet::buffer::PacketBuf;
use packet::flow_key::FlowKey;
use packet::ActionError;

/// `OFPC_INVALID_TTL_TO_CONTROLLER` (switch config flag, bit 2): send
/// packets whose TTL expires to the controller.
pub const OFPC_INVALID_TTL_TO_CONTROLLER: u16 = 1 << 2;

/// Settings of a pipeline instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatapathConfig {
    /// Packet buffers for packet-ins (0: never buffer).
    pub n_buffers: usize,
    /// `miss_send_len` of the switch config (bytes sent with packet-ins
    /// that have no action `max_len`).
    pub miss_send_len: u16,
    /// Switch config flags (`OFPC_*`).
    pub flags: u16,
    /// Deepest group chain followed (deeper: dropped, `group_drop`).
    pub max_group_depth: u8,
}

impl Default for DatapathConfig {
    /// 256 buffers, miss_send_len 128 (`OFPCML_DEFAULT`), no flags, groups
    /// nested up to 8 deep.
    fn default() -> Self {
        DatapathConfig {
            n_buffers: 256,
            miss_send_len: 128,
            flags: 0,
            max_group_depth: 8,
        }
    }
}

impl DatapathConfig {
    /// GET_CONFIG: the flags and `miss_send_len` in force.
    pub fn switch_config(&self) -> ofp::SwitchConfig {
        ofp::SwitchConfig {
            flags: self.flags,
            miss_send_len: self.miss_send_len,
        }
    }

    /// SET_CONFIG: takes the flags and `miss_send_len`, or changes nothing
    /// and answers `SWITCH_CONFIG_FAILED/BAD_FLAGS` for flags this switch
    /// does not implement: IP reassembly (no `IP_REASM` capability), the
    /// undefined fragment mode 3, and unknown bits. The fragment modes and
    /// the 1.2 `INVALID_TTL_TO_CONTROLLER` flag the datapath honours.
    pub fn set_switch_config(&mut self, c: &ofp::SwitchConfig) -> Result<(), OfpError> {
        use ofp::switch_config::config_flags;
        let frag = c.flags & config_flags::FRAG_MASK;
        let known = config_flags::FRAG_MASK | OFPC_INVALID_TTL_TO_CONTROLLER;
        if c.flags & !known != 0
            || frag == config_flags::FRAG_REASM
            || frag == config_flags::FRAG_MASK
        {
            return Err(OfpError::SwitchConfigFailed(
                ofp::error::SwitchConfigFailedCode::BadFlags,
            ));
        }
        self.flags = c.flags;
        self.miss_send_len = c.miss_send_len;
        Ok(())
    }
}

/// A packet to transmit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// Output port (a standard port or `OFPP_LOCAL`).
    pub port: u32,
    /// Queue chosen by set_queue (0 when none).
    pub queue_id: u32,
    /// The packet as it leaves.
    pub packet: PacketBuf,
}

/// A packet-in for the agent to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketInEvent {
    /// Ingress port (also in the message's match).
    pub in_port: u32,
    /// The message body.
    pub message: ofp::PacketIn,
}

/// What processing produced. Reuse one across bursts (call
/// [`BurstOutput::clear`]) so its vectors keep their capacity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BurstOutput {
    /// Packets to transmit, in the order the actions emitted them.
    pub tx: Vec<TxPacket>,
    /// Packet-ins, in order.
    pub packet_ins: Vec<PacketInEvent>,
    /// Drops by cause during this burst.
    pub drops: DropCounters,
}

impl BurstOutput {
    /// Empties the output, keeping capacity.
    pub fn clear(&mut self) {
        self.tx.clear();
        self.packet_ins.clear();
        self.drops = DropCounters::default();
    }
}

/// One step of a packet's trip, recorded when tracing is on
/// ([`Datapath::set_tracing`]) for `fulmar trace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A lookup in a table, the packet's fields then, and the entry hit.
    Lookup {
        /// Table number.
        table_id: u8,
        /// The entry hit, if any.
        entry: Option<FlowId>,
        /// The packet's fields at lookup.
        key: Box<FlowKey>,
    },
    /// A meter's verdict.
    Meter {
        /// Meter id.
        meter_id: u32,
        /// What it decided.
        verdict: MeterVerdict,
    },
    /// An action ran (apply-actions, action set, bucket or packet-out),
    /// with the reason it could not apply, if any.
    Action {
        /// The action.
        action: Action,
        /// Why it failed.
        error: Option<ActionError>,
    },
    /// The clear-actions instruction.
    ClearActions,
    /// A write-actions instruction.
    WriteActions {
        /// The actions written.
        actions: Vec<Action>,
    },
    /// Metadata after a write-metadata instruction.
    WriteMetadata {
        /// The new metadata.
        metadata: u64,
    },
    /// The action set about to run, in execution order.
    ActionSet {
        /// The actions.
        actions: Vec<Action>,
    },
    /// A group and the bucket it used (`None`: no bucket could be used).
    Group {
        /// Group id.
        group_id: u32,
        /// Bucket index.
        bucket: Option<usize>,
    },
    /// A packet transmitted.
    Output {
        /// Port.
        port: u32,
        /// Queue.
        queue_id: u32,
    },
    /// An output to the ingress port, skipped (spec §5.12).
    Skipped {
        /// The port.
        port: u32,
    },
    /// A packet-in.
    PacketIn {
        /// `OFPR_*`.
        reason: u8,
    },
    /// The packet was dropped (the name of the drop counter).
    Drop {
        /// Counter name.
        reason: &'static str,
    },
}

/// One pipeline instance. See the module comment.
pub struct Datapath {
    /// The control-side state this instance reads. The agent applies
    /// flow/group/meter mods here.
    pub state: SwitchState,
    /// The ports.
    pub ports: Ports,
    /// Settings.
    pub config: DatapathConfig,
    classifier: Box<dyn Classifier + Send>,
    worker: WorkerState,
}

impl Datapath {
    /// A pipeline over `state` with `ports`.
    pub fn new(state: SwitchState, ports: Ports, config: DatapathConfig) -> Datapath {
        Datapath {
            state,
            ports,
            worker: WorkerState::new(0, 1, config.n_buffers),
            config,
            classifier: Box::new(FastClassifier),
        }
    }

    /// Replaces the per-table lookup.
    pub fn set_classifier(&mut self, c: Box<dyn Classifier + Send>) {
        self.classifier = c;
    }

    /// This instance's counters (not yet folded into the state).
    pub fn counters(&mut self) -> &Counters {
        self.worker.counters()
    }

    /// Takes this instance's counters, leaving zeros.
    pub fn take_counters(&mut self) -> Counters {
        self.worker.take_counters()
    }

    /// Folds this instance's counters into its state (so the state's
    /// multipart answers include them: flows, tables, groups, meters,
    /// ports and queues; see [`SwitchState::fold`]) and returns the taken
    /// counters (drops are read from them).
    pub fn sync_counters(&mut self) -> Counters {
        let c = self.take_counters();
        self.state.fold(&c);
        c
    }

    /// The buffer pool.
    pub fn buffers(&self) -> &BufferPool {
        self.worker.buffers()
    }

    /// The flow cache's counters (see [`WorkerState::cache_stats`]).
    pub fn cache_stats(&self) -> classifier::CacheStats {
        self.worker.cache_stats()
    }

    /// Packets that went past the flow cache (see
    /// [`WorkerState::cache_bypassed`]).
    pub fn cache_bypassed(&self) -> u64 {
        self.worker.cache_bypassed()
    }

    /// Sets the flow cache's size (0: none; see
    /// [`WorkerState::set_flow_cache`]).
    pub fn set_flow_cache(&mut self, capacity: usize) {
        self.worker.set_flow_cache(capacity);
    }

    /// Answers a multipart request (see [`SwitchState::multipart`]) after
    /// folding this instance's counters into the state, so the answer
    /// counts every packet processed so far. `None` for experimenter
    /// requests.
    pub fn multipart(
        &mut self,
        req: &ofp::multipart::MultipartRequestBody,
        now: Time,
    ) -> Option<Result<ofp::multipart::MultipartReplyBody, OfpError>> {
        self.sync_counters();
        self.state.multipart(req, now)
    }

    /// One page of a FLOW statistics reply (see
    /// [`crate::Tables::flow_stats_page`]); counters are folded first on
    /// the first page only (`after` is `None`), as [`Datapath::multipart`]
    /// does for a whole reply.
    pub fn flow_stats_page(
        &mut self,
        filter: &crate::FlowFilter,
        now: Time,
        after: Option<crate::FlowPos>,
        limit: usize,
    ) -> Result<(Vec<ofp::stats::FlowStats>, Option<crate::FlowPos>), OfpError> {
        if after.is_none() {
            self.sync_counters();
        }
        self.state.tables.flow_stats_page(filter, now, after, limit)
    }

    /// Applies a PORT_MOD to the state's port table
    /// ([`SwitchState::port_mod`]) and gives the port's new config bits to
    /// the packet side. Returns the new description when it changed.
    pub fn port_mod(&mut self, pm: &ofp::PortMod) -> Result<Option<ofp::Port>, OfpError> {
        let changed = self.state.port_mod(pm)?;
        if let Some(p) = &changed {
            self.ports.set(
                p.port_no,
                PortInfo {
                    config: p.config,
                    state: p.state,
                },
            );
        }
        Ok(changed)
    }

    /// Turns step recording on or off (off by default; costs a branch per
    /// step when off).
    pub fn set_tracing(&mut self, on: bool) {
        self.worker.set_tracing(on);
    }

    /// The steps recorded since the last call.
    pub fn take_trace(&mut self) -> Vec<TraceEvent> {
        self.worker.take_trace()
    }

    /// The worker half (counters, buffers, meter buckets) and a view of
    /// the rest, split so both can be used at once.
    fn split(&mut self) -> (&mut WorkerState, PipelineView<'_>) {
        (
            &mut self.worker,
            PipelineView {
                state: &self.state,
                ports: &self.ports,
                config: &self.config,
                classifier: &*self.classifier,
            },
        )
    }

    /// Processes a burst received on `in_port`, draining `packets` (the
    /// vector keeps its capacity) and appending to `out`.
    pub fn process_burst_into(
        &mut self,
        in_port: u32,
        packets: &mut Vec<PacketBuf>,
        now: Time,
        out: &mut BurstOutput,
    ) {
        let (w, view) = self.split();
        w.process_burst_into(&view, in_port, packets, now, out);
    }

    /// Processes a burst received on `in_port` (see
    /// [`Self::process_burst_into`] to reuse an output).
    pub fn process_burst(
        &mut self,
        in_port: u32,
        packets: &mut Vec<PacketBuf>,
        now: Time,
    ) -> BurstOutput {
        let mut out = BurstOutput::default();
        self.process_burst_into(in_port, packets, now, &mut out);
        out
    }

    /// Executes a PACKET_OUT (spec §7.3.7): its actions run as an action
    /// list on the given or buffered packet; `output:TABLE` sends it
    /// through the pipeline from table 0.
    ///
    /// Errors: `BAD_REQUEST/BAD_PORT` for an `in_port` that is neither a
    /// standard port, LOCAL nor CONTROLLER; `BAD_REQUEST/BUFFER_UNKNOWN`
    /// for a buffer id the pool does not hold; the action errors of
    /// [`crate::tables::validate::validate_action_list`] (output to TABLE allowed
    /// here).
    pub fn packet_out(&mut self, po: &PacketOut, now: Time) -> Result<BurstOutput, OfpError> {
        let mut out = BurstOutput::default();
        self.packet_out_into(po, now, &mut out)?;
        Ok(out)
    }

    /// [`Self::packet_out`] appending to `out`.
    pub fn packet_out_into(
        &mut self,
        po: &PacketOut,
        now: Time,
        out: &mut BurstOutput,
    ) -> Result<(), OfpError> {
        let (w, view) = self.split();
        w.packet_out_into(&view, po, now, out)
    }

    /// Sends a buffered packet through the pipeline from table 0 (a
    /// FLOW_MOD that named a buffer id: [`crate::FlowModOutcome`]'s
    /// `release_buffer`). `BAD_REQUEST/BUFFER_UNKNOWN` when the pool does
    /// not hold it.
    pub fn release_buffer(&mut self, buffer_id: u32, now: Time) -> Result<BurstOutput, OfpError> {
        let mut out = BurstOutput::default();
        let (w, view) = self.split();
        w.release_buffer_into(&view, buffer_id, now, &mut out)?;
        Ok(out)
    }
}

/// `a -= b`, counter by counter (b was an earlier value of a).
pub(crate) fn subtract(a: &mut DropCounters, b: &DropCounters) {
    a.no_match = a.no_match.saturating_sub(b.no_match);
    a.meter_drop = a.meter_drop.saturating_sub(b.meter_drop);
    a.invalid_ttl = a.invalid_ttl.saturating_sub(b.invalid_ttl);
    a.port_down = a.port_down.saturating_sub(b.port_down);
    a.port_no_recv = a.port_no_recv.saturating_sub(b.port_no_recv);
    a.unsupported_output = a.unsupported_output.saturating_sub(b.unsupported_output);
    a.action_failed = a.action_failed.saturating_sub(b.action_failed);
    a.group_drop = a.group_drop.saturating_sub(b.group_drop);
    a.packet_in_blocked = a.packet_in_blocked.saturating_sub(b.packet_in_blocked);
    a.no_output = a.no_output.saturating_sub(b.no_output);
}
