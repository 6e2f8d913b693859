//! [`Datapath`]: one pipeline instance over its own [`SwitchState`] and
//! one [`WorkerState`] — what the control side, the in-memory switch and
//! traces use (the runtime's workers share a published snapshot instead).

use super::buffers::BufferPool;
use super::config::DatapathConfig;
use super::counters::Counters;
use super::output::{BurstOutput, TraceEvent};
use super::worker::{PipelineView, WorkerState};
use crate::model::ports::{PortInfo, Ports};
use crate::{SwitchState, Time};
use ofp::{OfpError, PacketOut};
use packet::buffer::PacketBuf;

/// One pipeline instance. See the module comment.
pub struct Datapath {
    /// The control-side state this instance reads. The agent applies
    /// flow/group/meter mods here.
    pub state: SwitchState,
    /// The ports.
    pub ports: Ports,
    /// Settings.
    pub config: DatapathConfig,
    reference: bool,
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
            reference: false,
        }
    }

    /// Looks entries up with the reference linear scan instead of the
    /// tables' indexes (for differential tests).
    pub fn set_reference_lookup(&mut self, on: bool) {
        self.reference = on;
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

    /// One page of a FLOW statistics reply, encoded (see
    /// [`crate::Tables::flow_stats_records`]); counters are folded first on
    /// the first page only (`after` is `None`), as [`Datapath::multipart`]
    /// does for a whole reply.
    pub fn flow_stats_records(
        &mut self,
        filter: &crate::FlowFilter,
        now: Time,
        after: Option<crate::FlowPos>,
        limit: usize,
    ) -> Result<(Vec<u8>, Option<crate::FlowPos>), OfpError> {
        if after.is_none() {
            self.sync_counters();
        }
        self.state
            .tables
            .flow_stats_records(filter, now, after, limit)
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
                reference: self.reference,
                ..PipelineView::of(&self.state, &self.ports, &self.config)
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
