//! The switch as the agent sees it: the [`Switch`] trait the protocol state
//! machine drives (one method per controller operation) and the
//! [`SwitchEvent`]s that flow the other way (packet-in, flow-removed,
//! port-status). Everything in it is `ofp` types: the agent knows no
//! switch internals (a FLOW statistics page position is an opaque
//! [`FlowStatsPos`]).
//!
//! The runtime implements [`Switch`] for its running bridges; the
//! in-memory switch ([`crate::MemorySwitch`], the `memory-switch` feature)
//! for tests and examples. Every method except [`Switch::barrier`] is
//! synchronous and must return quickly (it runs on the connection's task);
//! `barrier` resolves once every operation handed over before it is fully
//! applied.

use ofp::error::BadRequestCode;
use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
use ofp::stats::FlowStatsRequest;
use ofp::{
    FeaturesReply, FlowMod, GroupMod, MeterMod, OfpError, PacketIn, PacketOut, PacketQueue, Port,
    PortMod, PortStatus, SwitchConfig, TableMod,
};
use std::future::Future;

/// Where a page of a FLOW statistics reply ended ([`Switch::flow_stats_page`]):
/// made and read by the switch, opaque to the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowStatsPos(pub u128);

/// One page of a FLOW statistics reply, as its `ofp_flow_stats` records
/// encoded back to back, and where the next one starts (see
/// [`Switch::flow_stats_page`]).
pub type FlowStatsPage = (Vec<u8>, Option<FlowStatsPos>);

/// An asynchronous message from the switch to its controllers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchEvent {
    /// `OFPT_PACKET_IN`.
    PacketIn(PacketIn),
    /// `OFPT_FLOW_REMOVED`.
    FlowRemoved(ofp::FlowRemoved),
    /// `OFPT_PORT_STATUS`.
    PortStatus(PortStatus),
}

/// What the agent needs from a switch. All methods but [`Switch::barrier`]
/// are quick and synchronous; errors are the exact OpenFlow error to send.
pub trait Switch: Send + Sync + 'static {
    /// The FEATURES_REPLY body (`auxiliary_id` is set by the agent).
    fn features(&self) -> FeaturesReply;
    /// The current switch configuration (GET_CONFIG).
    fn config(&self) -> SwitchConfig;
    /// SET_CONFIG: fragment handling and `miss_send_len`.
    fn set_config(&self, config: &SwitchConfig) -> Result<(), OfpError>;
    /// FLOW_MOD.
    fn flow_mod(&self, fm: &FlowMod) -> Result<(), OfpError>;
    /// GROUP_MOD.
    fn group_mod(&self, gm: &GroupMod) -> Result<(), OfpError>;
    /// METER_MOD.
    fn meter_mod(&self, mm: &MeterMod) -> Result<(), OfpError>;
    /// PORT_MOD.
    fn port_mod(&self, pm: &PortMod) -> Result<(), OfpError>;
    /// TABLE_MOD.
    fn table_mod(&self, tm: &TableMod) -> Result<(), OfpError>;
    /// PACKET_OUT.
    fn packet_out(&self, po: &PacketOut) -> Result<(), OfpError>;
    /// Every multipart request but experimenter ones (the agent answers
    /// those), as one reply body the agent splits as needed.
    fn multipart(&self, req: &MultipartRequestBody) -> Result<MultipartReplyBody, OfpError>;
    /// One page of a FLOW statistics reply: at most `limit` entries after
    /// `after` (from the start when `None`) and where to continue, `None`
    /// once the answer is complete (see
    /// the switch's). The agent reads a FLOW
    /// reply page by page as the channel drains, so a dump of a million
    /// entries never holds more than a page. The default answers whole,
    /// in one page, through [`Switch::multipart`].
    fn flow_stats_page(
        &self,
        filter: &FlowStatsRequest,
        after: Option<FlowStatsPos>,
        limit: usize,
    ) -> Result<FlowStatsPage, OfpError> {
        let _ = (after, limit);
        match self.multipart(&MultipartRequestBody::Flow(filter.clone()))? {
            MultipartReplyBody::Flow { stats } => {
                let mut records = Vec::new();
                for s in &stats {
                    s.encode(&mut records);
                }
                Ok((records, None))
            }
            _ => Err(OfpError::BadRequest(BadRequestCode::BadMultipart)),
        }
    }
    /// QUEUE_GET_CONFIG for `port` (or `OFPP_ANY`).
    fn queue_config(&self, port: u32) -> Result<Vec<PacketQueue>, OfpError>;
    /// The ports, for PORT_DESC and port checks.
    fn ports(&self) -> Vec<Port>;
    /// Resolves once every operation handed to the switch before this call
    /// is fully applied (BARRIER).
    fn barrier(&self) -> impl Future<Output = ()> + Send;
    /// The end of a batch of modifications: a channel calls it when it has
    /// been quiet for `flush_idle` after them, before a BARRIER, when it
    /// closes, and at least every `flush_max_delay` of a continuous stream
    /// ([`crate::ConnConfig`]). A switch may hold modifications back from
    /// its datapath until then — one publish per batch of flow-mods rather
    /// than one per message — as long as [`Switch::barrier`] also makes
    /// them visible when called directly.
    fn flush(&self) {}
    /// A FLOW statistics reply of more than one page began (`true`) or
    /// ended (`false`) on a channel; a channel's calls alternate, starting
    /// with `true`. Bulk work: a switch may run its control side at a
    /// lower priority while any such reply lasts, so that it yields a CPU
    /// it shares with forwarding.
    fn bulk_reply(&self, active: bool) {
        let _ = active;
    }
    /// Housekeeping the agent calls about once a second (flow timeouts).
    fn tick(&self) {}
}
