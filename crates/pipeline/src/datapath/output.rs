//! What processing produces: packets to transmit, packet-ins, drops, and
//! (when tracing) the steps each packet took.

use super::counters::{DropCounters, DropReason};
use crate::model::flow_entry::FlowId;
use crate::tables::meters::MeterVerdict;
use ofp::Action;
use packet::buffer::{Outbox, PacketBuf};
use packet::flow_key::FlowKey;
use packet::ActionError;

/// A packet to transmit, taken out of a [`BurstOutput`]
/// ([`BurstOutput::take_tx`]) by those that keep or inspect what a burst
/// sent (the in-memory switch, the control side's injections).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// Output port (a standard port or `OFPP_LOCAL`).
    pub port: u32,
    /// Queue chosen by set_queue (0 when none; also in the packet's
    /// `meta.queue_id`).
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
    /// Packets to transmit with their ports, in the order the actions
    /// emitted them, each with the egress queue set_queue chose (0: none)
    /// in its `meta.queue_id`. An [`Outbox`]: a runtime hands it to the
    /// dataplane whole, no buffer moved.
    pub tx: Outbox,
    /// The `tunnel_id` of each packet of `tx` whose `tunnel_id` is not 0
    /// as it leaves (the key a `key=flow` tunnel port wraps it in), by
    /// index into `tx`, ascending. Beside `tx` rather than in it: a
    /// field there made every output larger, and the express path
    /// measurably slower (`fulmar bench gateway-vlan2mpls`).
    pub tx_tunnel_ids: Vec<(usize, u64)>,
    /// Packet-ins, in order.
    pub packet_ins: Vec<PacketInEvent>,
    /// Drops by cause during this burst (count them with
    /// [`BurstOutput::count_drop`]).
    pub drops: DropCounters,
    /// How many drops `drops` holds: one number to compare per packet
    /// where `drops` would be ten. Kept by [`BurstOutput::count_drop`]
    /// and `clear`, so only the datapath writes it.
    pub(super) dropped: u64,
}

impl BurstOutput {
    /// Empties the output, keeping capacity.
    pub fn clear(&mut self) {
        self.tx.clear();
        self.tx_tunnel_ids.clear();
        self.packet_ins.clear();
        self.drops = DropCounters::default();
        self.dropped = 0;
    }

    /// Takes the packets to transmit out, each with its port and queue.
    pub fn take_tx(&mut self) -> Vec<TxPacket> {
        self.tx
            .drain()
            .map(|(port, packet)| TxPacket {
                port,
                queue_id: packet.meta.queue_id,
                packet,
            })
            .collect()
    }

    /// Counts one drop for `reason`.
    #[inline]
    pub fn count_drop(&mut self, reason: DropReason) {
        self.drops.bump(reason);
        self.dropped += 1;
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
