//! The switch as the agent sees it: the [`Switch`] trait the protocol state
//! machine drives (one method per controller operation), the
//! [`SwitchEvent`]s that flow the other way (packet-in, flow-removed,
//! port-status), and [`MemorySwitch`], an implementation over
//! [`pipeline::SwitchState`] with no datapath behind it.
//!
//! The runtime plugs the real datapath in later by implementing [`Switch`]
//! for it. Every method except [`Switch::barrier`] is synchronous and must
//! return quickly (it runs on the connection's task); `barrier` resolves
//! once every operation handed over before it is fully applied, which for
//! an in-memory state is at once.

use ofp::consts::{port_no, table_no, OFP_NO_BUFFER};
use ofp::error::{
    BadRequestCode, PortModFailedCode, SwitchConfigFailedCode, TableFeaturesFailedCode,
    TableModFailedCode,
};
use ofp::multipart::{Desc, MultipartReplyBody, MultipartRequestBody};
use ofp::stats::{PortStats, QueueStats};
use ofp::switch_config::{capabilities, config_flags};
use ofp::table_features::TableFeatures;
use ofp::{
    FeaturesReply, FlowMod, GroupMod, MeterMod, OfpError, PacketIn, PacketOut, PacketQueue, Port,
    PortMod, PortStatus, SwitchConfig, TableMod,
};
use pipeline::{SwitchState, Time};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::mpsc;

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
    /// QUEUE_GET_CONFIG for `port` (or `OFPP_ANY`).
    fn queue_config(&self, port: u32) -> Result<Vec<PacketQueue>, OfpError>;
    /// The ports, for PORT_DESC and port checks.
    fn ports(&self) -> Vec<Port>;
    /// Resolves once every operation handed to the switch before this call
    /// is fully applied (BARRIER).
    fn barrier(&self) -> impl Future<Output = ()> + Send;
    /// Housekeeping the agent calls about once a second (flow timeouts).
    fn tick(&self) {}
}

/// Settings of a [`MemorySwitch`].
#[derive(Clone, Debug)]
pub struct MemorySwitchConfig {
    /// Datapath id.
    pub datapath_id: u64,
    /// Flow table limits.
    pub tables: pipeline::TablesConfig,
    /// Group table limits.
    pub groups: pipeline::GroupsConfig,
    /// Meter table limits.
    pub meters: pipeline::MetersConfig,
    /// The ports (PORT_DESC, PORT_MOD).
    pub ports: Vec<Port>,
    /// DESC reply.
    pub desc: Desc,
}

impl Default for MemorySwitchConfig {
    fn default() -> Self {
        MemorySwitchConfig {
            datapath_id: 1,
            tables: pipeline::TablesConfig::default(),
            groups: pipeline::GroupsConfig::default(),
            meters: pipeline::MetersConfig::default(),
            ports: Vec::new(),
            desc: Desc {
                mfr_desc: "fulmar".into(),
                hw_desc: "userspace software switch".into(),
                sw_desc: env!("CARGO_PKG_VERSION").into(),
                serial_num: "None".into(),
                dp_desc: "fulmar in-memory switch".into(),
            },
        }
    }
}

struct Inner {
    state: SwitchState,
    ports: Vec<Port>,
    config: SwitchConfig,
}

/// A [`Switch`] over [`pipeline::SwitchState`] alone: flow, group and meter
/// tables with their statistics, a fixed port list, no queues, no packet
/// buffers, and no datapath (PACKET_OUT is refused with
/// `BAD_REQUEST/EPERM` until one is plugged in). FLOW_REMOVED and
/// PORT_STATUS events go to the channel given at construction; when it is
/// full they are dropped and counted ([`MemorySwitch::events_dropped`]).
pub struct MemorySwitch {
    inner: Mutex<Inner>,
    datapath_id: u64,
    desc: Desc,
    epoch: Instant,
    events: Option<mpsc::Sender<SwitchEvent>>,
    events_dropped: AtomicU64,
}

impl MemorySwitch {
    /// A switch with `config`, sending events to `events` when given.
    pub fn new(config: MemorySwitchConfig, events: Option<mpsc::Sender<SwitchEvent>>) -> Self {
        MemorySwitch {
            inner: Mutex::new(Inner {
                state: SwitchState::new(config.tables, config.groups, config.meters),
                ports: config.ports,
                config: SwitchConfig {
                    flags: config_flags::FRAG_NORMAL,
                    miss_send_len: 128,
                },
            }),
            datapath_id: config.datapath_id,
            desc: config.desc,
            epoch: Instant::now(),
            events,
            events_dropped: AtomicU64::new(0),
        }
    }

    /// Events dropped because the event channel was full.
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped.load(Ordering::Relaxed)
    }

    /// Runs `f` on the pipeline state (for tests and the runtime).
    pub fn with_state<R>(&self, f: impl FnOnce(&mut SwitchState) -> R) -> R {
        f(&mut self.lock().state)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent state (every
        // pipeline operation validates before it changes anything).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Time {
        Time(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn emit(&self, ev: SwitchEvent) {
        if let Some(tx) = &self.events {
            if tx.try_send(ev).is_err() {
                self.events_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn emit_removed(&self, removed: Vec<pipeline::FlowRemoved>) {
        for r in removed {
            self.emit(SwitchEvent::FlowRemoved(r.to_message()));
        }
    }

    fn table_features(&self, n_tables: u8, max_entries: usize) -> Vec<TableFeatures> {
        (0..n_tables)
            .map(|t| TableFeatures {
                table_id: t,
                name: format!("table{t}"),
                metadata_match: u64::MAX,
                metadata_write: u64::MAX,
                config: 0,
                max_entries: u32::try_from(max_entries).unwrap_or(u32::MAX),
                properties: Vec::new(),
            })
            .collect()
    }
}

fn counters_unavailable(port: u32) -> PortStats {
    let na = pipeline::COUNTER_UNAVAILABLE;
    PortStats {
        port_no: port,
        rx_packets: na,
        tx_packets: na,
        rx_bytes: na,
        tx_bytes: na,
        rx_dropped: na,
        tx_dropped: na,
        rx_errors: na,
        tx_errors: na,
        rx_frame_err: na,
        rx_over_err: na,
        rx_crc_err: na,
        collisions: na,
        duration_sec: 0,
        duration_nsec: 0,
    }
}

impl Switch for MemorySwitch {
    fn features(&self) -> FeaturesReply {
        let n_tables = self.lock().state.tables.n_tables();
        FeaturesReply {
            datapath_id: self.datapath_id,
            n_buffers: 0,
            n_tables,
            auxiliary_id: 0,
            // What this implementation really answers: flow, table and
            // group statistics. No port counters, queues or reassembly.
            capabilities: capabilities::FLOW_STATS
                | capabilities::TABLE_STATS
                | capabilities::GROUP_STATS,
            reserved: 0,
        }
    }

    fn config(&self) -> SwitchConfig {
        self.lock().config.clone()
    }

    fn set_config(&self, config: &SwitchConfig) -> Result<(), OfpError> {
        let frag = config.flags & config_flags::FRAG_MASK;
        if config.flags & !config_flags::FRAG_MASK != 0 || frag == config_flags::FRAG_REASM {
            // Reassembly is not implemented (no IP_REASM capability);
            // value 3 is undefined.
            return Err(OfpError::SwitchConfigFailed(
                SwitchConfigFailedCode::BadFlags,
            ));
        }
        if frag == config_flags::FRAG_MASK {
            return Err(OfpError::SwitchConfigFailed(
                SwitchConfigFailedCode::BadFlags,
            ));
        }
        self.lock().config = config.clone();
        Ok(())
    }

    fn flow_mod(&self, fm: &FlowMod) -> Result<(), OfpError> {
        let now = self.now();
        let outcome = self.lock().state.flow_mod(fm, now)?;
        self.emit_removed(outcome.flow_removed);
        if outcome.release_buffer.is_some() {
            // The flow-mod is applied; there are no buffers to release.
            return Err(OfpError::BadRequest(BadRequestCode::BufferUnknown));
        }
        Ok(())
    }

    fn group_mod(&self, gm: &GroupMod) -> Result<(), OfpError> {
        let now = self.now();
        let removed = self.lock().state.group_mod(gm, now)?;
        self.emit_removed(removed);
        Ok(())
    }

    fn meter_mod(&self, mm: &MeterMod) -> Result<(), OfpError> {
        let now = self.now();
        let removed = self.lock().state.meter_mod(mm, now)?;
        self.emit_removed(removed);
        Ok(())
    }

    fn port_mod(&self, pm: &PortMod) -> Result<(), OfpError> {
        let status = {
            let mut inner = self.lock();
            let port = inner
                .ports
                .iter_mut()
                .find(|p| p.port_no == pm.port_no)
                .ok_or(OfpError::PortModFailed(PortModFailedCode::BadPort))?;
            if port.hw_addr != pm.hw_addr {
                return Err(OfpError::PortModFailed(PortModFailedCode::BadHwAddr));
            }
            use ofp::port::port_config as pc;
            let settable = pc::PORT_DOWN | pc::NO_RECV | pc::NO_FWD | pc::NO_PACKET_IN;
            if pm.mask & !settable != 0 {
                return Err(OfpError::PortModFailed(PortModFailedCode::BadConfig));
            }
            if pm.advertise & !port.supported != 0 {
                return Err(OfpError::PortModFailed(PortModFailedCode::BadAdvertise));
            }
            let before = port.clone();
            port.config = (port.config & !pm.mask) | (pm.config & pm.mask);
            if pm.advertise != 0 {
                port.advertised = pm.advertise;
            }
            (*port != before).then(|| PortStatus {
                reason: ofp::port_status::port_reason::MODIFY,
                desc: port.clone(),
            })
        };
        if let Some(s) = status {
            self.emit(SwitchEvent::PortStatus(s));
        }
        Ok(())
    }

    fn table_mod(&self, tm: &TableMod) -> Result<(), OfpError> {
        let n = self.lock().state.tables.n_tables();
        if tm.table_id != table_no::ALL && tm.table_id >= n {
            return Err(OfpError::TableModFailed(TableModFailedCode::BadTable));
        }
        // Only the deprecated OFPTC_DEPRECATED_MASK bits exist in 1.3.
        if tm.config & !3 != 0 {
            return Err(OfpError::TableModFailed(TableModFailedCode::BadConfig));
        }
        Ok(())
    }

    fn packet_out(&self, po: &PacketOut) -> Result<(), OfpError> {
        if po.buffer_id != OFP_NO_BUFFER {
            return Err(OfpError::BadRequest(BadRequestCode::BufferUnknown));
        }
        // No datapath behind this switch yet.
        Err(OfpError::BadRequest(BadRequestCode::Eperm))
    }

    fn multipart(&self, req: &MultipartRequestBody) -> Result<MultipartReplyBody, OfpError> {
        use MultipartReplyBody as Rep;
        use MultipartRequestBody as Req;
        let now = self.now();
        let inner = self.lock();
        if let Some(answer) = inner.state.multipart(req, now) {
            return answer;
        }
        let known_port = |p: u32| p == port_no::ANY || inner.ports.iter().any(|x| x.port_no == p);
        match req {
            Req::Desc => Ok(Rep::Desc(self.desc.clone())),
            Req::PortDesc => Ok(Rep::PortDesc {
                ports: inner.ports.clone(),
            }),
            Req::PortStats { port_no: p } => {
                if !known_port(*p) {
                    return Err(OfpError::BadRequest(BadRequestCode::BadPort));
                }
                let stats = inner
                    .ports
                    .iter()
                    .filter(|x| *p == port_no::ANY || x.port_no == *p)
                    .map(|x| counters_unavailable(x.port_no))
                    .collect();
                Ok(Rep::PortStats { stats })
            }
            Req::Queue { port_no: p, .. } => {
                if !known_port(*p) {
                    return Err(OfpError::BadRequest(BadRequestCode::BadPort));
                }
                Ok(Rep::Queue {
                    stats: Vec::<QueueStats>::new(),
                })
            }
            Req::TableFeatures { tables } => {
                if !tables.is_empty() {
                    // The table layout is fixed.
                    return Err(OfpError::TableFeaturesFailed(
                        TableFeaturesFailedCode::Eperm,
                    ));
                }
                let cfg = inner.state.tables.config();
                Ok(Rep::TableFeatures {
                    tables: self.table_features(inner.state.tables.n_tables(), cfg.max_entries),
                })
            }
            _ => Err(OfpError::BadRequest(BadRequestCode::BadMultipart)),
        }
    }

    fn queue_config(&self, port: u32) -> Result<Vec<PacketQueue>, OfpError> {
        let inner = self.lock();
        if port == port_no::ANY || inner.ports.iter().any(|p| p.port_no == port) {
            Ok(Vec::new())
        } else {
            Err(OfpError::QueueOpFailed(
                ofp::error::QueueOpFailedCode::BadPort,
            ))
        }
    }

    fn ports(&self) -> Vec<Port> {
        self.lock().ports.clone()
    }

    fn barrier(&self) -> impl Future<Output = ()> + Send {
        // Every operation above is applied before it returns.
        std::future::ready(())
    }

    fn tick(&self) {
        let now = self.now();
        let removed = self.lock().state.expire(now);
        self.emit_removed(removed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::oxm::MacAddr;

    fn port(n: u32) -> Port {
        Port {
            port_no: n,
            hw_addr: MacAddr([0, 0, 0, 0, 0, n as u8]),
            name: format!("p{n}"),
            supported: 0xff,
            ..Port::default()
        }
    }

    #[test]
    fn port_mod_checks_and_reports() {
        let (tx, mut rx) = mpsc::channel(4);
        let sw = MemorySwitch::new(
            MemorySwitchConfig {
                ports: vec![port(1)],
                ..Default::default()
            },
            Some(tx),
        );
        let mut pm = PortMod {
            port_no: 2,
            hw_addr: port(1).hw_addr,
            config: ofp::port::port_config::PORT_DOWN,
            mask: ofp::port::port_config::PORT_DOWN,
            advertise: 0,
        };
        assert_eq!(
            sw.port_mod(&pm),
            Err(OfpError::PortModFailed(PortModFailedCode::BadPort))
        );
        pm.port_no = 1;
        pm.hw_addr = MacAddr([9; 6]);
        assert_eq!(
            sw.port_mod(&pm),
            Err(OfpError::PortModFailed(PortModFailedCode::BadHwAddr))
        );
        pm.hw_addr = port(1).hw_addr;
        sw.port_mod(&pm).unwrap();
        match rx.try_recv().unwrap() {
            SwitchEvent::PortStatus(s) => assert_eq!(s.desc.config, pm.config),
            other => panic!("{other:?}"),
        }
        assert_eq!(sw.ports()[0].config, pm.config);
    }

    #[test]
    fn config_refuses_reassembly() {
        let sw = MemorySwitch::new(MemorySwitchConfig::default(), None);
        let bad = OfpError::SwitchConfigFailed(SwitchConfigFailedCode::BadFlags);
        for flags in [config_flags::FRAG_REASM, 3, 0x10] {
            assert_eq!(
                sw.set_config(&SwitchConfig {
                    flags,
                    miss_send_len: 1
                }),
                Err(bad)
            );
        }
        let ok = SwitchConfig {
            flags: config_flags::FRAG_DROP,
            miss_send_len: 0xffff,
        };
        sw.set_config(&ok).unwrap();
        assert_eq!(sw.config(), ok);
    }

    #[test]
    fn table_mod_and_packet_out_errors() {
        let sw = MemorySwitch::new(
            MemorySwitchConfig {
                tables: pipeline::TablesConfig {
                    n_tables: 4,
                    ..Default::default()
                },
                ..Default::default()
            },
            None,
        );
        assert_eq!(
            sw.table_mod(&TableMod {
                table_id: 4,
                config: 0
            }),
            Err(OfpError::TableModFailed(TableModFailedCode::BadTable))
        );
        sw.table_mod(&TableMod {
            table_id: table_no::ALL,
            config: 3,
        })
        .unwrap();
        assert_eq!(
            sw.packet_out(&PacketOut {
                buffer_id: 7,
                ..PacketOut::default()
            }),
            Err(OfpError::BadRequest(BadRequestCode::BufferUnknown))
        );
        assert_eq!(sw.features().n_tables, 4);
    }
}
