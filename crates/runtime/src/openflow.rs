//! A running bridge as the OpenFlow agent's [`Switch`].
//!
//! Every controller operation runs on the bridge's control side (its own
//! [`pipeline::datapath::Datapath`], under a mutex only control code
//! takes); mutating ones publish a new snapshot the workers pick up between
//! bursts. BARRIER waits until every worker uses the newest version or is
//! parked (asleep for want of input, holding no version: it takes the
//! newest before its next burst), so a flow mod acknowledged by a barrier
//! reply is in force for every packet the workers read after it. A worker
//! that never catches up (stalled) holds the reply back for as long as it
//! does, with a warning in the log every two seconds: the reply is never
//! sent early. Flow-mods are published once per agent batch
//! ([`Switch::flush`]: the channel went quiet, a barrier, or a second of
//! continuous stream), not one by one; the FLOW_REMOVED of the flows a
//! batch deleted go out once it is published, with what the workers
//! counted until they took it. Statistics first collect the
//! workers' counters; port statistics add the drops the dataplane made
//! outside the pipeline (see `BridgeRt::complete_port_stats`). PACKET_OUT
//! runs its actions on the control side and hands the
//! resulting packets to the dataplane through the bridge's injection port.
//! Packet-ins come straight from the workers into the agent's event queue.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent::{FlowStatsPos, Switch, SwitchEvent};
use ofp::error::BadRequestCode;
use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
use ofp::{
    FeaturesReply, FlowMod, GroupMod, MeterMod, OfpError, PacketOut, PacketQueue, Port, PortMod,
    PortStatus, SwitchConfig, TableMod,
};

use crate::bridge::{BridgeRt, Control};

/// Longest a statistics request waits for the workers' counters.
pub(crate) const COUNTER_SYNC_TIMEOUT: Duration = Duration::from_millis(200);

/// How often a BARRIER that waits for a worker says so in the log (it
/// keeps waiting: a reply would claim what is not true).
const BARRIER_WARN_EVERY: Duration = Duration::from_secs(2);

/// One bridge behind the agent (see the module comment).
pub struct BridgeSwitch {
    b: Arc<BridgeRt>,
    /// Flow-mods applied on the control side but not yet published; the
    /// agent's end of a batch ([`Switch::flush`]) or a barrier publishes.
    unpublished: AtomicBool,
}

impl BridgeSwitch {
    pub(crate) fn new(b: Arc<BridgeRt>) -> BridgeSwitch {
        BridgeSwitch {
            b,
            unpublished: AtomicBool::new(false),
        }
    }

    /// Sends what a control-side run produced: packets to the dataplane,
    /// packet-ins to the agent.
    fn absorb(&self, c: &mut Control, mut out: pipeline::datapath::BurstOutput) {
        self.b.transmit(c, out.take_tx());
        for pi in out.packet_ins {
            self.b.emit(SwitchEvent::PacketIn(pi.message));
        }
    }

    /// A group or meter change, `change` at the bridge's time: the flows
    /// it removed are held for their FLOW_REMOVED, and the tables
    /// published.
    fn remove_and_publish(
        &self,
        change: impl FnOnce(
            &mut pipeline::SwitchState,
            pipeline::Time,
        ) -> Result<Vec<pipeline::FlowRemoved>, OfpError>,
    ) -> Result<(), OfpError> {
        let mut c = self.b.control();
        let now = self.b.now();
        let removed = change(&mut c.dp.state, now)?;
        c.hold_removed(removed);
        self.b.publish_and_report(c, COUNTER_SYNC_TIMEOUT);
        Ok(())
    }
}

impl Switch for BridgeSwitch {
    fn features(&self) -> FeaturesReply {
        let c = self.b.control();
        pipeline::features::features_reply(&c.dp.state.tables, self.b.dpid, 0)
    }

    fn config(&self) -> SwitchConfig {
        self.b.control().dp.config.switch_config()
    }

    fn set_config(&self, config: &SwitchConfig) -> Result<(), OfpError> {
        let mut c = self.b.control();
        c.dp.config.set_switch_config(config)?;
        self.b.publish(&c);
        Ok(())
    }

    fn flow_mod(&self, fm: &FlowMod) -> Result<(), OfpError> {
        // A FLOW_REMOVED reports the flow's counters: what the workers
        // counted and had not handed over yet is added when they do
        // (`Control::removing`), so nothing is asked for here.
        let mut c = self.b.control();
        let now = self.b.now();
        let outcome = c.dp.state.flow_mod(fm, now)?;
        // Published at the end of the agent's batch (flush), not per
        // message: every publish makes the next write replay or copy.
        // Their FLOW_REMOVED go out after that publish.
        self.unpublished.store(true, Ordering::Release);
        c.hold_removed(outcome.flow_removed);
        drop(c);
        if outcome.release_buffer.is_some() {
            // Packet-ins are never buffered here (n_buffers 0).
            return Err(OfpError::BadRequest(BadRequestCode::BufferUnknown));
        }
        Ok(())
    }

    fn group_mod(&self, gm: &GroupMod) -> Result<(), OfpError> {
        self.remove_and_publish(|state, now| state.group_mod(gm, now))
    }

    fn meter_mod(&self, mm: &MeterMod) -> Result<(), OfpError> {
        self.remove_and_publish(|state, now| state.meter_mod(mm, now))
    }

    fn port_mod(&self, pm: &PortMod) -> Result<(), OfpError> {
        let mut c = self.b.control();
        let changed = c.dp.port_mod(pm)?;
        self.b.publish(&c);
        drop(c);
        if let Some(desc) = changed {
            self.b.emit(SwitchEvent::PortStatus(PortStatus {
                reason: ofp::port_status::port_reason::MODIFY,
                desc,
            }));
        }
        Ok(())
    }

    fn table_mod(&self, tm: &TableMod) -> Result<(), OfpError> {
        let mut c = self.b.control();
        c.dp.state.table_mod(tm)?;
        self.b.publish(&c);
        Ok(())
    }

    fn packet_out(&self, po: &PacketOut) -> Result<(), OfpError> {
        let now = self.b.now();
        let mut c = self.b.control();
        let out = c.dp.packet_out(po, now)?;
        self.absorb(&mut c, out);
        Ok(())
    }

    fn multipart(&self, req: &MultipartRequestBody) -> Result<MultipartReplyBody, OfpError> {
        // Statistics include every packet the workers forwarded before the
        // request arrived.
        self.b.request_counters(COUNTER_SYNC_TIMEOUT);
        let now = self.b.now();
        let mut c = self.b.control();
        self.b.collect(&mut c);
        let mut reply =
            c.dp.state
                .multipart(req, now)
                .unwrap_or(Err(OfpError::BadRequest(BadRequestCode::BadExperimenter)))?;
        drop(c);
        if let MultipartReplyBody::PortStats { stats } = &mut reply {
            self.b.complete_port_stats(stats);
        }
        Ok(reply)
    }

    fn flow_stats_page(
        &self,
        filter: &ofp::stats::FlowStatsRequest,
        after: Option<FlowStatsPos>,
        limit: usize,
    ) -> Result<agent::FlowStatsPage, OfpError> {
        // The first page counts every packet forwarded before the request
        // (as `multipart`); later pages read the counters folded since.
        if after.is_none() {
            self.b.request_counters(COUNTER_SYNC_TIMEOUT);
        }
        let now = self.b.now();
        let mut c = self.b.control();
        self.b.collect(&mut c);
        let after = after.map(|p| ((p.0 >> 64) as u8, pipeline::FlowId(p.0 as u64)));
        let (records, next) =
            c.dp.state
                .tables
                .flow_stats_records(filter, now, after, limit)?;
        Ok((
            records,
            next.map(|(t, id)| FlowStatsPos((u128::from(t) << 64) | u128::from(id.0))),
        ))
    }

    fn queue_config(&self, port: u32) -> Result<Vec<PacketQueue>, OfpError> {
        self.b
            .control()
            .dp
            .state
            .queue_get_config(port)
            .map(|r| r.queues)
    }

    fn ports(&self) -> Vec<Port> {
        self.b.control().dp.state.port_table.port_desc()
    }

    fn bulk_reply(&self, active: bool) {
        // The first reply lowers the priority of the thread that writes it
        // (the agent's), the last one to end gives it back.
        let mut g = self
            .b
            .bulk_replies
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if active {
            g.0 += 1;
            if g.0 == 1 {
                g.1 = Some(dataplane::placement::Yielding::enter(
                    self.b.bulk_reply_nice,
                ));
            }
        } else {
            g.0 = g.0.saturating_sub(1);
            if g.0 == 0 {
                g.1 = None;
            }
        }
    }

    fn flush(&self) {
        if self.unpublished.swap(false, Ordering::AcqRel) {
            self.b
                .publish_and_report(self.b.control(), COUNTER_SYNC_TIMEOUT);
        }
    }

    fn barrier(&self) -> impl Future<Output = ()> + Send {
        self.flush();
        let publisher = self.b.publisher.clone();
        let version = publisher.version();
        // Sleeping workers are parked and count as caught up: with idle
        // workers this answers at once, without a thread hand-off.
        let done = publisher.caught_up(version);
        let bridge = self.b.name.clone();
        async move {
            if done {
                return;
            }
            let waited = tokio::task::spawn_blocking(move || {
                let started = std::time::Instant::now();
                while !publisher.barrier(version, BARRIER_WARN_EVERY) {
                    tracing::warn!(
                        bridge = %bridge,
                        version,
                        waited_s = started.elapsed().as_secs(),
                        "a BARRIER waits for a worker that has not taken the new tables \
                         (stalled?); it is answered once every worker has"
                    );
                }
            })
            .await;
            if waited.is_err() {
                // The wait was cancelled (shutdown): never claim completion.
                std::future::pending::<()>().await;
            }
        }
    }

    fn tick(&self) {
        self.b.expire_flows(COUNTER_SYNC_TIMEOUT);
    }
}
