//! The switch as the agent sees it: the [`Switch`] trait the protocol state
//! machine drives (one method per controller operation), the
//! [`SwitchEvent`]s that flow the other way (packet-in, flow-removed,
//! port-status), and [`MemorySwitch`], an implementation over
//! [`pipeline::datapath::Datapath`] (which owns the
//! [`pipeline::SwitchState`]) with no port I/O behind it.
//!
//! The runtime plugs the real datapath in later by implementing [`Switch`]
//! for it. Every method except [`Switch::barrier`] is synchronous and must
//! return quickly (it runs on the connection's task); `barrier` resolves
//! once every operation handed over before it is fully applied, which for
//! an in-memory state is at once.

use ofp::consts::{port_no, table_no};
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
use pipeline::datapath::counters::PortCounter;
use pipeline::datapath::{BurstOutput, Datapath, DatapathConfig, PortInfo, Ports, TxPacket};
use pipeline::{SwitchState, Time};
use std::collections::{HashMap, VecDeque};
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
    /// Packet buffers, miss_send_len and flags of the datapath.
    pub datapath: DatapathConfig,
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
            datapath: DatapathConfig::default(),
        }
    }
}

struct Inner {
    dp: Datapath,
    ports: Vec<Port>,
    transmitted: VecDeque<TxPacket>,
    port_totals: HashMap<u32, PortCounter>,
}

/// Most transmitted packets a [`MemorySwitch`] keeps for inspection.
pub const TRANSMITTED_KEPT: usize = 1024;

/// A [`Switch`] over one [`Datapath`] with no port I/O: flow, group and
/// meter tables with their statistics, packet buffers, a fixed port list
/// and no queues. PACKET_OUT (and a FLOW_MOD naming a buffer) runs through
/// the datapath; what it transmits is kept (the last
/// [`TRANSMITTED_KEPT`] packets, [`MemorySwitch::take_transmitted`]) and
/// its packet-ins become events. Packets can be injected with
/// [`MemorySwitch::inject`]. PACKET_IN, FLOW_REMOVED and PORT_STATUS
/// events go to the channel given at construction; when it is full they
/// are dropped and counted ([`MemorySwitch::events_dropped`]).
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
                dp: Datapath::new(
                    SwitchState::new(config.tables, config.groups, config.meters),
                    dp_ports(&config.ports),
                    config.datapath,
                ),
                ports: config.ports,
                transmitted: VecDeque::new(),
                port_totals: HashMap::new(),
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
        f(&mut self.lock().dp.state)
    }

    /// Runs `f` on the datapath.
    pub fn with_datapath<R>(&self, f: impl FnOnce(&mut Datapath) -> R) -> R {
        f(&mut self.lock().dp)
    }

    /// Sends `packets` received on `in_port` through the pipeline; their
    /// packet-ins become events, what they transmit is returned.
    pub fn inject(&self, in_port: u32, packets: &[&[u8]]) -> Vec<TxPacket> {
        let now = self.now();
        let mut bufs: Vec<_> = packets
            .iter()
            .map(|p| packet::buffer::PacketBuf::from_slice(p))
            .collect();
        let out = self.lock().dp.process_burst(in_port, &mut bufs, now);
        for pi in out.packet_ins {
            self.emit(SwitchEvent::PacketIn(pi.message));
        }
        out.tx
    }

    /// Takes the packets PACKET_OUTs and released buffers transmitted.
    pub fn take_transmitted(&self) -> Vec<TxPacket> {
        self.lock().transmitted.drain(..).collect()
    }

    /// Keeps what `out` transmitted, and returns its packet-ins as events.
    fn absorb(inner: &mut Inner, out: BurstOutput) -> Vec<SwitchEvent> {
        for tx in out.tx {
            if inner.transmitted.len() >= TRANSMITTED_KEPT {
                inner.transmitted.pop_front();
            }
            inner.transmitted.push_back(tx);
        }
        out.packet_ins
            .into_iter()
            .map(|p| SwitchEvent::PacketIn(p.message))
            .collect()
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
            .map(|t| table_features(t, n_tables, max_entries))
            .collect()
    }
}

/// What one table of the pipeline supports, as TABLE_FEATURES reports
/// it: every instruction (GOTO_TABLE only to later tables), every action
/// in both action lists and sets, every basic OXM field of 1.3 for
/// matching (masks where the spec allows them) and wildcarding, and every
/// settable field for set-field. The `*_MISS` properties are left out:
/// the table-miss entry supports the same.
pub fn table_features(table_id: u8, n_tables: u8, max_entries: usize) -> TableFeatures {
    use ofp::action::action_type as at;
    use ofp::instruction::instruction_type as it;
    use ofp::table_features::{ActionId, InstructionId, OxmId, TableFeatureProp as P};
    let last = table_id.saturating_add(1) >= n_tables;
    let instruction_ids = [
        it::GOTO_TABLE,
        it::WRITE_METADATA,
        it::WRITE_ACTIONS,
        it::APPLY_ACTIONS,
        it::CLEAR_ACTIONS,
        it::METER,
    ]
    .into_iter()
    .filter(|t| !(last && *t == it::GOTO_TABLE))
    .map(|instruction_type| InstructionId {
        instruction_type,
        data: Vec::new(),
    })
    .collect();
    let action_ids: Vec<ActionId> = [
        at::OUTPUT,
        at::COPY_TTL_OUT,
        at::COPY_TTL_IN,
        at::SET_MPLS_TTL,
        at::DEC_MPLS_TTL,
        at::PUSH_VLAN,
        at::POP_VLAN,
        at::PUSH_MPLS,
        at::POP_MPLS,
        at::SET_QUEUE,
        at::GROUP,
        at::SET_NW_TTL,
        at::DEC_NW_TTL,
        at::SET_FIELD,
        at::PUSH_PBB,
        at::POP_PBB,
    ]
    .into_iter()
    .map(|action_type| ActionId {
        action_type,
        data: Vec::new(),
    })
    .collect();
    // The fields of OpenFlow 1.3 (numbers 0..=39).
    let fields = || {
        ofp::OxmField::ALL
            .iter()
            .copied()
            .filter(|f| (*f as u8) <= 39)
    };
    let id = |f: ofp::OxmField, hasmask: bool| {
        let len = f.kind().len() as u8;
        OxmId {
            class: 0x8000,
            field: f as u8,
            hasmask,
            length: if hasmask { len * 2 } else { len },
            experimenter: None,
        }
    };
    let matchable = fields().map(|f| id(f, f.maskable())).collect();
    let wildcards = fields().map(|f| id(f, false)).collect();
    let settable: Vec<OxmId> = fields()
        .filter(|f| f.settable())
        .map(|f| id(f, false))
        .collect();
    TableFeatures {
        table_id,
        name: format!("table{table_id}"),
        metadata_match: u64::MAX,
        metadata_write: u64::MAX,
        config: 0,
        max_entries: u32::try_from(max_entries).unwrap_or(u32::MAX),
        properties: vec![
            P::Instructions { instruction_ids },
            P::NextTables {
                table_ids: (table_id.saturating_add(1)..n_tables).collect(),
            },
            P::WriteActions {
                action_ids: action_ids.clone(),
            },
            P::ApplyActions { action_ids },
            P::Match { oxm_ids: matchable },
            P::Wildcards { oxm_ids: wildcards },
            P::WriteSetfield {
                oxm_ids: settable.clone(),
            },
            P::ApplySetfield { oxm_ids: settable },
        ],
    }
}

fn dp_ports(ports: &[Port]) -> Ports {
    let mut p = Ports::default();
    for port in ports {
        p.set(
            port.port_no,
            PortInfo {
                config: port.config,
                state: port.state,
            },
        );
    }
    p
}

/// Port statistics from the datapath's counters; the error counters it
/// does not keep are reported as unavailable (all ones).
fn port_stats(port: u32, c: Option<&PortCounter>, (sec, nsec): (u32, u32)) -> PortStats {
    let na = pipeline::COUNTER_UNAVAILABLE;
    let c = c.copied().unwrap_or_default();
    PortStats {
        port_no: port,
        rx_packets: c.rx_packets,
        tx_packets: c.tx_packets,
        rx_bytes: c.rx_bytes,
        tx_bytes: c.tx_bytes,
        rx_dropped: c.rx_dropped,
        tx_dropped: c.tx_dropped,
        rx_errors: na,
        tx_errors: na,
        rx_frame_err: na,
        rx_over_err: na,
        rx_crc_err: na,
        collisions: na,
        duration_sec: sec,
        duration_nsec: nsec,
    }
}

impl Switch for MemorySwitch {
    fn features(&self) -> FeaturesReply {
        let inner = self.lock();
        let n_tables = inner.dp.state.tables.n_tables();
        FeaturesReply {
            datapath_id: self.datapath_id,
            n_buffers: u32::try_from(inner.dp.buffers().capacity()).unwrap_or(u32::MAX),
            n_tables,
            auxiliary_id: 0,
            // What this implementation really answers: flow, table, group
            // and port statistics. No queue statistics or reassembly.
            capabilities: capabilities::FLOW_STATS
                | capabilities::TABLE_STATS
                | capabilities::PORT_STATS
                | capabilities::GROUP_STATS,
            reserved: 0,
        }
    }

    fn config(&self) -> SwitchConfig {
        let inner = self.lock();
        SwitchConfig {
            flags: inner.dp.config.flags,
            miss_send_len: inner.dp.config.miss_send_len,
        }
    }

    fn set_config(&self, config: &SwitchConfig) -> Result<(), OfpError> {
        let frag = config.flags & config_flags::FRAG_MASK;
        let known = config_flags::FRAG_MASK | pipeline::datapath::OFPC_INVALID_TTL_TO_CONTROLLER;
        if config.flags & !known != 0 || frag == config_flags::FRAG_REASM {
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
        let mut inner = self.lock();
        inner.dp.config.flags = config.flags;
        inner.dp.config.miss_send_len = config.miss_send_len;
        Ok(())
    }

    fn flow_mod(&self, fm: &FlowMod) -> Result<(), OfpError> {
        let now = self.now();
        let (removed, released) = {
            let mut inner = self.lock();
            let outcome = inner.dp.state.flow_mod(fm, now)?;
            // The flow-mod is applied even when its buffer is unknown
            // (spec 1.3.5 §6.4); the error still goes back.
            let released = match outcome.release_buffer {
                None => Ok(Vec::new()),
                Some(id) => inner
                    .dp
                    .release_buffer(id, now)
                    .map(|out| Self::absorb(&mut inner, out)),
            };
            (outcome.flow_removed, released)
        };
        self.emit_removed(removed);
        for ev in released? {
            self.emit(ev);
        }
        Ok(())
    }

    fn group_mod(&self, gm: &GroupMod) -> Result<(), OfpError> {
        let now = self.now();
        let removed = self.lock().dp.state.group_mod(gm, now)?;
        self.emit_removed(removed);
        Ok(())
    }

    fn meter_mod(&self, mm: &MeterMod) -> Result<(), OfpError> {
        let now = self.now();
        let removed = self.lock().dp.state.meter_mod(mm, now)?;
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
            let changed = *port != before;
            let (port_no, info) = (
                port.port_no,
                PortInfo {
                    config: port.config,
                    state: port.state,
                },
            );
            let status = changed.then(|| PortStatus {
                reason: ofp::port_status::port_reason::MODIFY,
                desc: port.clone(),
            });
            inner.dp.ports.set(port_no, info);
            status
        };
        if let Some(s) = status {
            self.emit(SwitchEvent::PortStatus(s));
        }
        Ok(())
    }

    fn table_mod(&self, tm: &TableMod) -> Result<(), OfpError> {
        let n = self.lock().dp.state.tables.n_tables();
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
        let now = self.now();
        let events = {
            let mut inner = self.lock();
            let out = inner.dp.packet_out(po, now)?;
            Self::absorb(&mut inner, out)
        };
        for ev in events {
            self.emit(ev);
        }
        Ok(())
    }

    fn multipart(&self, req: &MultipartRequestBody) -> Result<MultipartReplyBody, OfpError> {
        use MultipartReplyBody as Rep;
        use MultipartRequestBody as Req;
        let now = self.now();
        let mut inner = self.lock();
        // Fold the datapath's flow, table and group counters into the
        // state, and its port counters into the running totals.
        let taken = inner.dp.sync_counters();
        for (port, c) in taken.ports {
            let t = inner.port_totals.entry(port).or_default();
            t.rx_packets += c.rx_packets;
            t.rx_bytes += c.rx_bytes;
            t.tx_packets += c.tx_packets;
            t.tx_bytes += c.tx_bytes;
            t.rx_dropped += c.rx_dropped;
            t.tx_dropped += c.tx_dropped;
        }
        let inner = inner;
        if let Some(answer) = inner.dp.state.multipart(req, now) {
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
                    .map(|x| {
                        port_stats(
                            x.port_no,
                            inner.port_totals.get(&x.port_no),
                            now.duration_since(Time(0)),
                        )
                    })
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
                let cfg = inner.dp.state.tables.config();
                Ok(Rep::TableFeatures {
                    tables: self.table_features(inner.dp.state.tables.n_tables(), cfg.max_entries),
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
        let removed = self.lock().dp.state.expire(now);
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
        assert_eq!(sw.features().n_buffers, 256);
    }
}
