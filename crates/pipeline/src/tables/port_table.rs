//! The switch's ports as the control side sees them: each port's full
//! description (`ofp_port`), its queues and their properties, and the
//! port and queue counters folded from the workers; the PORT_DESC,
//! PORT_STATS, QUEUE (stats) and QUEUE_GET_CONFIG answers and PORT_MOD
//! (spec 1.3.5 §7.2.1, §7.2.2, §7.3.4.3, §7.3.5.6–§7.3.5.8, §7.3.6).
//!
//! The runtime adds and removes ports ([`PortTable::add_port`]) and reports
//! link changes ([`PortTable::set_state`]); the packet side sees the
//! config and state bits through [`PortTable::datapath_ports`].
//!
//! Decisions:
//! - PORT_MOD: a port we do not have (reserved numbers other than LOCAL
//!   included) is `PORT_MOD_FAILED/BAD_PORT`; an `hw_addr` other than the
//!   port's is `BAD_HW_ADDR`; `mask` bits other than `PORT_DOWN`,
//!   `NO_RECV`, `NO_FWD`, `NO_PACKET_IN` are `BAD_CONFIG`; `advertise`
//!   bits the port does not support are `BAD_ADVERTISE` (0 leaves the
//!   advertised features as they are). Checks run in that order and
//!   nothing changes on error.
//! - A port administratively down (`OFPPC_PORT_DOWN`) reports no link
//!   (`OFPPS_LINK_DOWN`), as a switch that turns the port's PHY off does
//!   and Open vSwitch does (it sets the interface down); controllers such
//!   as Faucet read a port's state, not its config. The link's own state
//!   ([`PortTable::set_state`]) is kept and shows again when the port
//!   comes back up.
//! - PORT_STATS of a port we do not have: an empty reply (as Open
//!   vSwitch); `OFPP_ANY` gives every port. Counters we do not keep
//!   (errors, frame, overrun, CRC, collisions) report 0: the dataplane
//!   has none of them (not "unavailable", which would read as a fault).
//! - QUEUE stats and QUEUE_GET_CONFIG: `QUEUE_OP_FAILED/BAD_PORT` for a
//!   port we do not have, `BAD_QUEUE` for a queue id the port does not
//!   have (QUEUE stats); `OFPP_ANY` / `OFPQ_ALL` select all.
//! - Queues are only the ones configured ([`PortTable::set_queue`]); a
//!   port has none by default. A `set_queue` action naming a queue the
//!   output port does not have is not an error: the packet goes out with
//!   that queue id in its `meta.queue_id` and the dataplane
//!   sends it on the port's default queue; its bytes are counted only in
//!   the port's counters (a queue's counters count only packets sent on
//!   that configured queue). Flows are not checked against queues at
//!   FLOW_MOD (ports and queues may come later, as for output ports).

use crate::model::counters::Counters;
use crate::model::ports::{PortInfo, Ports};
use crate::Time;
use ofp::consts::{port_no, OFPQ_ALL};
use ofp::error::{PortModFailedCode, QueueOpFailedCode};
use ofp::port::{port_config, port_state};
use ofp::stats::{PortStats, QueueStats};
use ofp::{OfpError, PacketQueue, Port, PortMod, QueueGetConfigReply, QueueProperty};
use std::collections::BTreeMap;

/// The `OFPPC_*` bits PORT_MOD may change.
pub const PORT_MOD_CONFIG_BITS: u32 =
    port_config::PORT_DOWN | port_config::NO_RECV | port_config::NO_FWD | port_config::NO_PACKET_IN;

/// One queue's configuration: rates in tenths of a percent of the port's
/// speed (spec `ofp_queue_prop_min_rate`); `None` leaves it out (values
/// above 1000 mean "disabled" on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueConfig {
    /// Guaranteed minimum rate.
    pub min_rate: Option<u16>,
    /// Maximum rate.
    pub max_rate: Option<u16>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct QueueEntry {
    config: QueueConfig,
    added_at: Time,
    tx_packets: u64,
    tx_bytes: u64,
    /// Packets the egress scheduler dropped (QUEUE stats `tx_errors`).
    tx_errors: u64,
    /// Counted by the egress scheduler ([`PortTable::set_queue_counters`]):
    /// [`PortTable::fold`] leaves it alone.
    scheduled: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PortEntry {
    /// `desc.state` is `link_state`, plus `LINK_DOWN` while `desc.config`
    /// has `PORT_DOWN` ([`shown_state`]).
    desc: Port,
    /// The state bits as the link reports them ([`PortTable::set_state`]).
    link_state: u32,
    added_at: Time,
    stats: PortStats,
    queues: BTreeMap<u32, QueueEntry>,
}

/// The port table. See the module comment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortTable {
    ports: BTreeMap<u32, PortEntry>,
}

/// The state a port reports: its link's, without a link while it is
/// administratively down.
const fn shown_state(config: u32, link_state: u32) -> u32 {
    if config & port_config::PORT_DOWN != 0 {
        link_state | port_state::LINK_DOWN
    } else {
        link_state
    }
}

const fn qof(code: QueueOpFailedCode) -> OfpError {
    OfpError::QueueOpFailed(code)
}

impl PortTable {
    /// Adds a port (replacing one with the same number: its queues and
    /// counters start again).
    pub fn add_port(&mut self, mut desc: Port, now: Time) {
        let link_state = desc.state;
        desc.state = shown_state(desc.config, link_state);
        self.ports.insert(
            desc.port_no,
            PortEntry {
                stats: PortStats {
                    port_no: desc.port_no,
                    ..PortStats::default()
                },
                desc,
                link_state,
                added_at: now,
                queues: BTreeMap::new(),
            },
        );
    }

    /// Removes a port; its description, if it existed (for PORT_STATUS).
    pub fn remove_port(&mut self, port: u32) -> Option<Port> {
        self.ports.remove(&port).map(|e| e.desc)
    }

    /// A port's description.
    pub fn get(&self, port: u32) -> Option<&Port> {
        self.ports.get(&port).map(|e| &e.desc)
    }

    /// Number of ports.
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    /// True when there is no port.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Sets a port's `OFPPS_*` state bits (link up/down, blocked, live)
    /// as the link reports them; the new description when the port exists
    /// and the state it shows changed (see the module comment for a port
    /// administratively down).
    pub fn set_state(&mut self, port: u32, state: u32) -> Option<Port> {
        let e = self.ports.get_mut(&port)?;
        e.link_state = state;
        let shown = shown_state(e.desc.config, state);
        if e.desc.state == shown {
            return None;
        }
        e.desc.state = shown;
        Some(e.desc.clone())
    }

    /// Adds or replaces queue `queue_id` of `port` (counters restart when
    /// it is new). False when there is no such port.
    pub fn set_queue(&mut self, port: u32, queue_id: u32, config: QueueConfig, now: Time) -> bool {
        let Some(e) = self.ports.get_mut(&port) else {
            return false;
        };
        e.queues
            .entry(queue_id)
            .and_modify(|q| q.config = config)
            .or_insert(QueueEntry {
                config,
                added_at: now,
                tx_packets: 0,
                tx_bytes: 0,
                tx_errors: 0,
                scheduled: false,
            });
        true
    }

    /// Sets a queue's counters to what the egress scheduler counted
    /// (packets and bytes it sent, packets it dropped); from then on they
    /// come only from it (the pipeline's counts of `set_queue` outputs
    /// are no longer added). False when there is no such queue.
    pub fn set_queue_counters(
        &mut self,
        port: u32,
        queue_id: u32,
        tx_packets: u64,
        tx_bytes: u64,
        tx_errors: u64,
    ) -> bool {
        let Some(q) = self
            .ports
            .get_mut(&port)
            .and_then(|e| e.queues.get_mut(&queue_id))
        else {
            return false;
        };
        q.scheduled = true;
        q.tx_packets = tx_packets;
        q.tx_bytes = tx_bytes;
        q.tx_errors = tx_errors;
        true
    }

    /// Removes a queue; false when it did not exist.
    pub fn remove_queue(&mut self, port: u32, queue_id: u32) -> bool {
        self.ports
            .get_mut(&port)
            .is_some_and(|e| e.queues.remove(&queue_id).is_some())
    }

    /// The config and state bits the packet side reads.
    pub fn datapath_ports(&self) -> Ports {
        let mut p = Ports::default();
        for (n, e) in &self.ports {
            p.set(
                *n,
                PortInfo {
                    config: e.desc.config,
                    state: e.desc.state,
                },
            );
        }
        p
    }

    /// Applies a PORT_MOD (see the module comment); the port's new
    /// description (for a PORT_STATUS) when it changed, `None` when the
    /// message changed nothing.
    pub fn port_mod(&mut self, pm: &PortMod) -> Result<Option<Port>, OfpError> {
        let e = self
            .ports
            .get_mut(&pm.port_no)
            .ok_or(OfpError::PortModFailed(PortModFailedCode::BadPort))?;
        if e.desc.hw_addr != pm.hw_addr {
            return Err(OfpError::PortModFailed(PortModFailedCode::BadHwAddr));
        }
        if pm.mask & !PORT_MOD_CONFIG_BITS != 0 {
            return Err(OfpError::PortModFailed(PortModFailedCode::BadConfig));
        }
        if pm.advertise & !e.desc.supported != 0 {
            return Err(OfpError::PortModFailed(PortModFailedCode::BadAdvertise));
        }
        let before = e.desc.clone();
        e.desc.config = (e.desc.config & !pm.mask) | (pm.config & pm.mask);
        e.desc.state = shown_state(e.desc.config, e.link_state);
        if pm.advertise != 0 {
            e.desc.advertised = pm.advertise;
        }
        Ok((e.desc != before).then(|| e.desc.clone()))
    }

    /// The PORT_DESC reply body: every port, by number.
    pub fn port_desc(&self) -> Vec<Port> {
        self.ports.values().map(|e| e.desc.clone()).collect()
    }

    /// The PORT_STATS reply body for `port` (or `OFPP_ANY`).
    pub fn port_stats(&self, port: u32, now: Time) -> Vec<PortStats> {
        self.ports
            .iter()
            .filter(|(n, _)| port == port_no::ANY || **n == port)
            .map(|(_, e)| {
                let (duration_sec, duration_nsec) = now.duration_since(e.added_at);
                PortStats {
                    duration_sec,
                    duration_nsec,
                    ..e.stats
                }
            })
            .collect()
    }

    /// The QUEUE stats reply body for `port` / `queue_id` (`OFPP_ANY`,
    /// `OFPQ_ALL`); errors in the module comment.
    pub fn queue_stats(
        &self,
        port: u32,
        queue_id: u32,
        now: Time,
    ) -> Result<Vec<QueueStats>, OfpError> {
        if port != port_no::ANY && !self.ports.contains_key(&port) {
            return Err(qof(QueueOpFailedCode::BadPort));
        }
        let mut out = Vec::new();
        for (n, e) in &self.ports {
            if port != port_no::ANY && *n != port {
                continue;
            }
            for (q, qe) in &e.queues {
                if queue_id != OFPQ_ALL && *q != queue_id {
                    continue;
                }
                let (duration_sec, duration_nsec) = now.duration_since(qe.added_at);
                out.push(QueueStats {
                    port_no: *n,
                    queue_id: *q,
                    tx_bytes: qe.tx_bytes,
                    tx_packets: qe.tx_packets,
                    tx_errors: qe.tx_errors,
                    duration_sec,
                    duration_nsec,
                });
            }
        }
        if out.is_empty() && queue_id != OFPQ_ALL && port != port_no::ANY {
            return Err(qof(QueueOpFailedCode::BadQueue));
        }
        Ok(out)
    }

    /// The QUEUE_GET_CONFIG reply for `port` (or `OFPP_ANY`).
    pub fn queue_get_config(&self, port: u32) -> Result<QueueGetConfigReply, OfpError> {
        if port != port_no::ANY && !self.ports.contains_key(&port) {
            return Err(qof(QueueOpFailedCode::BadPort));
        }
        let queues = self
            .ports
            .iter()
            .filter(|(n, _)| port == port_no::ANY || **n == port)
            .flat_map(|(n, e)| {
                e.queues.iter().map(move |(q, qe)| {
                    let mut properties = Vec::new();
                    if let Some(rate) = qe.config.min_rate {
                        properties.push(QueueProperty::MinRate { rate });
                    }
                    if let Some(rate) = qe.config.max_rate {
                        properties.push(QueueProperty::MaxRate { rate });
                    }
                    PacketQueue {
                        queue_id: *q,
                        port: *n,
                        properties,
                    }
                })
            })
            .collect();
        Ok(QueueGetConfigReply { port, queues })
    }

    /// Adds the port and queue counters of (summed, taken) worker
    /// counters; ports and queues that no longer exist are skipped.
    pub fn fold(&mut self, c: &Counters) {
        for (n, pc) in &c.ports {
            let Some(e) = self.ports.get_mut(n) else {
                continue;
            };
            let s = &mut e.stats;
            s.rx_packets = s.rx_packets.wrapping_add(pc.rx_packets);
            s.tx_packets = s.tx_packets.wrapping_add(pc.tx_packets);
            s.rx_bytes = s.rx_bytes.wrapping_add(pc.rx_bytes);
            s.tx_bytes = s.tx_bytes.wrapping_add(pc.tx_bytes);
            s.rx_dropped = s.rx_dropped.wrapping_add(pc.rx_dropped);
            s.tx_dropped = s.tx_dropped.wrapping_add(pc.tx_dropped);
        }
        for ((n, q), qc) in &c.queues {
            let Some(qe) = self.ports.get_mut(n).and_then(|e| e.queues.get_mut(q)) else {
                continue;
            };
            if qe.scheduled {
                continue;
            }
            qe.tx_packets = qe.tx_packets.wrapping_add(qc.tx_packets);
            qe.tx_bytes = qe.tx_bytes.wrapping_add(qc.tx_bytes);
        }
    }
}
