//! [`MemorySwitch`]: a [`Switch`] over one [`pipeline::datapath::Datapath`]
//! (which owns the [`pipeline::SwitchState`]) with no port I/O behind it,
//! for tests, examples and benchmarks of the agent (the `memory-switch`
//! feature, on by default; the runtime builds the agent without it).

use crate::switch::{FlowStatsPage, FlowStatsPos, Switch, SwitchEvent};
use ofp::error::BadRequestCode;
use ofp::multipart::{MultipartReplyBody, MultipartRequestBody};
use ofp::stats::FlowStatsRequest;
use ofp::{
    FeaturesReply, FlowMod, GroupMod, MeterMod, OfpError, PacketOut, PacketQueue, Port, PortMod,
    PortStatus, SwitchConfig, TableMod,
};
use pipeline::datapath::{BurstOutput, Datapath, DatapathConfig, TxPacket};
use pipeline::{FlowId, FlowPos, SwitchState, Time};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::mpsc;

/// The opaque form of a pipeline position (table, entry id).
pub fn pos_to_agent(p: FlowPos) -> FlowStatsPos {
    FlowStatsPos((u128::from(p.0) << 64) | u128::from(p.1 .0))
}

/// The pipeline position an opaque one stands for.
pub fn pos_from_agent(p: FlowStatsPos) -> FlowPos {
    ((p.0 >> 64) as u8, FlowId(p.0 as u64))
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
    /// The ports (PORT_DESC, PORT_MOD, PORT_STATS).
    pub ports: Vec<Port>,
    /// The DESC reply's datapath description.
    pub dp_desc: String,
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
            dp_desc: "fulmar in-memory switch".into(),
            datapath: DatapathConfig::default(),
        }
    }
}

struct Inner {
    dp: Datapath,
    transmitted: VecDeque<TxPacket>,
}

/// Most transmitted packets a [`MemorySwitch`] keeps for inspection.
pub const TRANSMITTED_KEPT: usize = 1024;

/// A [`Switch`] over one [`Datapath`] with no port I/O. Everything the
/// controller asks is answered by the pipeline crate
/// ([`pipeline::SwitchState`]: flow, group, meter and port tables, their
/// statistics, table features, DESC; [`pipeline::features`]: the
/// FEATURES_REPLY); this type only wires it to the agent. PACKET_OUT (and
/// a FLOW_MOD naming a buffer) runs through the datapath; what it
/// transmits is kept (the last [`TRANSMITTED_KEPT`] packets,
/// [`MemorySwitch::take_transmitted`]) and its packet-ins become events.
/// Packets can be injected with [`MemorySwitch::inject`]. PACKET_IN,
/// FLOW_REMOVED and PORT_STATUS events go to the channel given at
/// construction; when it is full they are dropped and counted
/// ([`MemorySwitch::events_dropped`]).
pub struct MemorySwitch {
    inner: Mutex<Inner>,
    datapath_id: u64,
    epoch: Instant,
    events: Option<mpsc::Sender<SwitchEvent>>,
    events_dropped: AtomicU64,
}

impl MemorySwitch {
    /// A switch with `config`, sending events to `events` when given.
    pub fn new(config: MemorySwitchConfig, events: Option<mpsc::Sender<SwitchEvent>>) -> Self {
        let mut state = SwitchState::new(config.tables, config.groups, config.meters);
        state.desc = pipeline::features::default_desc(&config.dp_desc);
        for port in config.ports {
            state.port_table.add_port(port, Time(0));
        }
        let ports = state.port_table.datapath_ports();
        MemorySwitch {
            inner: Mutex::new(Inner {
                dp: Datapath::new(state, ports, config.datapath),
                transmitted: VecDeque::new(),
            }),
            datapath_id: config.datapath_id,
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
        let mut out = self.lock().dp.process_burst(in_port, &mut bufs, now);
        for pi in std::mem::take(&mut out.packet_ins) {
            self.emit(SwitchEvent::PacketIn(pi.message));
        }
        out.take_tx()
    }

    /// Takes the packets PACKET_OUTs and released buffers transmitted.
    pub fn take_transmitted(&self) -> Vec<TxPacket> {
        self.lock().transmitted.drain(..).collect()
    }

    /// Keeps what `out` transmitted, and returns its packet-ins as events.
    fn absorb(inner: &mut Inner, mut out: BurstOutput) -> Vec<SwitchEvent> {
        for tx in out.take_tx() {
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
        Time::from_duration(self.epoch.elapsed())
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
}

impl Switch for MemorySwitch {
    fn features(&self) -> FeaturesReply {
        let inner = self.lock();
        let n_buffers = u32::try_from(inner.dp.buffers().capacity()).unwrap_or(u32::MAX);
        pipeline::features::features_reply(&inner.dp.state.tables, self.datapath_id, n_buffers)
    }

    fn config(&self) -> SwitchConfig {
        self.lock().dp.config.switch_config()
    }

    fn set_config(&self, config: &SwitchConfig) -> Result<(), OfpError> {
        self.lock().dp.config.set_switch_config(config)
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
        let changed = self.lock().dp.port_mod(pm)?;
        if let Some(desc) = changed {
            self.emit(SwitchEvent::PortStatus(PortStatus {
                reason: ofp::port_status::port_reason::MODIFY,
                desc,
            }));
        }
        Ok(())
    }

    fn table_mod(&self, tm: &TableMod) -> Result<(), OfpError> {
        self.lock().dp.state.table_mod(tm)
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
        let now = self.now();
        self.lock()
            .dp
            .multipart(req, now)
            .unwrap_or(Err(OfpError::BadRequest(BadRequestCode::BadExperimenter)))
    }

    fn flow_stats_page(
        &self,
        filter: &FlowStatsRequest,
        after: Option<FlowStatsPos>,
        limit: usize,
    ) -> Result<FlowStatsPage, OfpError> {
        let now = self.now();
        let (records, next) =
            self.lock()
                .dp
                .flow_stats_records(filter, now, after.map(pos_from_agent), limit)?;
        Ok((records, next.map(pos_to_agent)))
    }

    fn queue_config(&self, port: u32) -> Result<Vec<PacketQueue>, OfpError> {
        self.lock()
            .dp
            .state
            .queue_get_config(port)
            .map(|r| r.queues)
    }

    fn ports(&self) -> Vec<Port> {
        self.lock().dp.state.port_table.port_desc()
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
    use ofp::consts::table_no;
    use ofp::error::{PortModFailedCode, TableModFailedCode};
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
        use ofp::error::SwitchConfigFailedCode;
        use ofp::switch_config::config_flags;
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
        let sw = crate::testutil::four_table_switch();
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
