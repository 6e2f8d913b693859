//! [`SwitchState`]: the flow tables, group table and meter table of one
//! switch together, with one entry point per controller operation, so the
//! agent never has to wire the three together itself (a flow-mod is
//! checked against the groups and meters; deleting a group or meter
//! removes flows). It also holds the port table and the switch
//! description, so that every multipart request, TABLE_MOD, PORT_MOD and
//! QUEUE_GET_CONFIG is answered here.

use crate::features;
use crate::model::counters::Counters;
use crate::model::flow_entry::FlowRemoved;
use crate::tables::groups::{Groups, GroupsConfig};
use crate::tables::meters::{Meters, MetersConfig};
use crate::tables::port_table::PortTable;
use crate::tables::{FlowModOutcome, Tables, TablesConfig};
use crate::Time;
use ofp::multipart::{Desc, MultipartReplyBody, MultipartRequestBody};
use ofp::{FlowMod, GroupMod, MeterMod, OfpError, Port, PortMod, QueueGetConfigReply, TableMod};

/// The control-side state of one switch.
#[derive(Clone, Debug)]
pub struct SwitchState {
    /// The flow tables.
    pub tables: Tables,
    /// The group table.
    pub groups: Groups,
    /// The meter table.
    pub meters: Meters,
    /// The ports, their queues and their folded counters.
    pub port_table: PortTable,
    /// The DESC reply (set `dp_desc` and the others as configured).
    pub desc: Desc,
}

impl Default for SwitchState {
    /// Default-sized tables, no ports, [`features::default_desc`].
    fn default() -> Self {
        SwitchState::new(
            TablesConfig::default(),
            GroupsConfig::default(),
            MetersConfig::default(),
        )
    }
}

impl SwitchState {
    /// Empty tables with the given limits.
    pub fn new(tables: TablesConfig, groups: GroupsConfig, meters: MetersConfig) -> SwitchState {
        SwitchState {
            tables: Tables::new(tables),
            groups: Groups::new(groups),
            meters: Meters::new(meters),
            port_table: PortTable::default(),
            desc: features::default_desc(""),
        }
    }

    /// Folds (summed, taken) worker counters into every control-side
    /// counter: flows and tables (so flow, aggregate and table statistics
    /// report them, and idle timeouts see the last hit), groups, meters,
    /// ports and queues ([`PortTable::fold`]). Call it with counters taken
    /// from the workers, so nothing is added twice. O(keys in `c`): one
    /// bulk add per flow, table, group and meter, whatever the number of
    /// packets counted.
    pub fn fold(&mut self, c: &Counters) {
        // By slot, each fetched a few records ahead: at 1M entries the
        // slots hit are scattered over 32 MB of counters.
        const AHEAD: usize = 8;
        for (i, h) in c.by_slot.iter().enumerate() {
            if let Some(n) = c.by_slot.get(i + AHEAD) {
                self.tables.prefetch_counter(n.table, n.slot);
            }
            self.tables
                .add_hits_at(h.table, h.slot, h.id, h.packets, h.bytes, h.last_hit);
        }
        for (id, f) in &c.flows {
            self.tables.add_hits(*id, f.packets, f.bytes, f.last_hit);
        }
        for (t, n) in &c.tables {
            self.tables.note_lookups(*t, n.lookups, n.matched);
        }
        for (g, n) in &c.groups {
            self.groups.add_counts(*g, n.packets, n.bytes, &n.buckets);
        }
        for (m, n) in &c.meters {
            self.meters.add_counts(*m, n.packets, n.bytes, &n.bands);
        }
        self.port_table.fold(c);
    }

    /// The fold as it was first written: one control-side `note_*` call
    /// per counted packet. The reference [`SwitchState::fold`] is tested
    /// against.
    #[cfg(test)]
    pub(crate) fn fold_per_packet(&mut self, c: &Counters) {
        for (id, f) in &c.by_flow() {
            for i in 0..f.packets {
                let bytes = if i == 0 { f.bytes } else { 0 };
                if !self.tables.note_hit(*id, f.last_hit, bytes) {
                    break;
                }
            }
        }
        for (t, c) in &c.tables {
            for i in 0..c.lookups {
                self.tables.note_lookup(*t, i < c.matched);
            }
        }
        for (g, c) in &c.groups {
            for i in 0..c.packets {
                let n = if i == 0 { c.bytes } else { 0 };
                if !self.groups.note_group_hit(*g, n) {
                    break;
                }
            }
            for (b, (packets, bytes)) in c.buckets.iter().enumerate() {
                for i in 0..*packets {
                    let n = if i == 0 { *bytes } else { 0 };
                    if !self.groups.note_bucket_hit(*g, b, n) {
                        break;
                    }
                }
            }
        }
        for (m, c) in &c.meters {
            self.meters.add_counts(*m, c.packets, c.bytes, &c.bands);
        }
        self.port_table.fold(c);
    }

    /// Checks a TABLE_MOD (see [`crate::features`]): accepted ones have
    /// no effect in 1.3.
    pub fn table_mod(&mut self, tm: &TableMod) -> Result<(), OfpError> {
        features::check_table_mod(&self.tables, tm)
    }

    /// Applies a PORT_MOD (see [`PortTable::port_mod`]); the port's new
    /// description when it changed. The packet side must then see the
    /// new config bits ([`PortTable::datapath_ports`]).
    pub fn port_mod(&mut self, pm: &PortMod) -> Result<Option<Port>, OfpError> {
        self.port_table.port_mod(pm)
    }

    /// Answers QUEUE_GET_CONFIG for `port` (or `OFPP_ANY`).
    pub fn queue_get_config(&self, port: u32) -> Result<QueueGetConfigReply, OfpError> {
        self.port_table.queue_get_config(port)
    }

    /// Applies a FLOW_MOD (see [`Tables::apply_flow_mod`]).
    pub fn flow_mod(&mut self, fm: &FlowMod, now: Time) -> Result<FlowModOutcome, OfpError> {
        self.tables
            .apply_flow_mod(fm, now, &self.groups, &self.meters)
    }

    /// Applies a GROUP_MOD (see [`Groups::apply_group_mod`]).
    pub fn group_mod(&mut self, gm: &GroupMod, now: Time) -> Result<Vec<FlowRemoved>, OfpError> {
        let deleted = self.groups.apply_group_mod(gm, now)?;
        Ok(deleted
            .into_iter()
            .flat_map(|g| self.tables.remove_group_users(g, now))
            .collect())
    }

    /// Applies a METER_MOD (see [`Meters::apply_meter_mod`]).
    pub fn meter_mod(&mut self, mm: &MeterMod, now: Time) -> Result<Vec<FlowRemoved>, OfpError> {
        let deleted = self.meters.apply_meter_mod(mm, now)?;
        Ok(deleted
            .into_iter()
            .flat_map(|m| self.tables.remove_meter_users(m, now))
            .collect())
    }

    /// Removes the flow entries whose timeouts ran out (see
    /// [`Tables::expire`]).
    pub fn expire(&mut self, now: Time) -> Vec<FlowRemoved> {
        self.tables.expire(now)
    }

    /// Answers every multipart request but experimenter ones (`None`).
    /// Counters are those folded so far ([`SwitchState::fold`]). A
    /// TABLE_FEATURES request with a body is accepted only when it
    /// describes the pipeline as it is (see [`crate::features`]).
    pub fn multipart(
        &self,
        req: &MultipartRequestBody,
        now: Time,
    ) -> Option<Result<MultipartReplyBody, OfpError>> {
        use MultipartReplyBody as Rep;
        use MultipartRequestBody as Req;
        Some(match req {
            Req::Desc => Ok(Rep::Desc(self.desc.clone())),
            Req::Flow(filter) => self
                .tables
                .flow_stats(filter, now)
                .map(|stats| Rep::Flow { stats }),
            Req::Aggregate(filter) => self.tables.aggregate_stats(filter).map(Rep::Aggregate),
            Req::Table => Ok(Rep::Table {
                stats: self.tables.table_stats(),
            }),
            Req::PortStats { port_no } => Ok(Rep::PortStats {
                stats: self.port_table.port_stats(*port_no, now),
            }),
            Req::Queue { port_no, queue_id } => self
                .port_table
                .queue_stats(*port_no, *queue_id, now)
                .map(|stats| Rep::Queue { stats }),
            Req::Group { group_id } => Ok(Rep::Group {
                stats: self
                    .groups
                    .stats(*group_id, |g| self.tables.group_ref_count(g), now),
            }),
            Req::GroupDesc => Ok(Rep::GroupDesc {
                groups: self.groups.desc(),
            }),
            Req::GroupFeatures => Ok(Rep::GroupFeatures(self.groups.features())),
            Req::Meter { meter_id } => Ok(Rep::Meter {
                stats: self
                    .meters
                    .stats(*meter_id, |m| self.tables.meter_flow_count(m), now),
            }),
            Req::MeterConfig { meter_id } => Ok(Rep::MeterConfig {
                configs: self.meters.configs(*meter_id),
            }),
            Req::MeterFeatures => Ok(Rep::MeterFeatures(self.meters.features())),
            Req::TableFeatures { tables } if tables.is_empty() => Ok(Rep::TableFeatures {
                tables: features::all_table_features(&self.tables),
            }),
            Req::TableFeatures { tables } => {
                features::check_table_features_request(&self.tables, tables)
                    .map(|tables| Rep::TableFeatures { tables })
            }
            Req::PortDesc => Ok(Rep::PortDesc {
                ports: self.port_table.port_desc(),
            }),
            Req::Experimenter(_) => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::any_flow;
    use ofp::consts::{group_no, meter_no};
    use ofp::error::{BadRequestCode, MeterModFailedCode};
    use ofp::meter_mod::meter_flags;
    use ofp::{Action, Bucket, GroupModCommand, GroupType, Instruction, MeterBand};
    use ofp::{MeterModCommand, Oxm, OxmField, OxmValue};

    fn state() -> SwitchState {
        SwitchState::new(
            TablesConfig {
                n_tables: 2,
                ..TablesConfig::default()
            },
            GroupsConfig::default(),
            MetersConfig::default(),
        )
    }

    #[test]
    fn the_three_tables_work_together() {
        let mut s = state();
        let t = Time::from_secs(1);
        s.meter_mod(
            &MeterMod {
                command: MeterModCommand::Add,
                flags: meter_flags::PKTPS,
                meter_id: 1,
                bands: vec![MeterBand::Drop {
                    rate: 5,
                    burst_size: 0,
                }],
            },
            t,
        )
        .unwrap();
        s.group_mod(
            &GroupMod {
                command: GroupModCommand::Add,
                group_type: GroupType::Indirect,
                group_id: 2,
                buckets: vec![Bucket {
                    actions: vec![Action::Output {
                        port: 1,
                        max_len: 0,
                    }],
                    ..Bucket::default()
                }],
            },
            t,
        )
        .unwrap();
        let fm = FlowMod {
            flags: ofp::flow_mod::flow_mod_flags::SEND_FLOW_REM,
            hard_timeout: 10,
            match_: ofp::Match {
                fields: vec![Oxm::Basic {
                    field: OxmField::InPort,
                    value: OxmValue::U32(1),
                    mask: None,
                }],
            },
            instructions: vec![
                Instruction::Meter { meter_id: 1 },
                Instruction::WriteActions {
                    actions: vec![Action::Group { group_id: 2 }],
                },
            ],
            ..FlowMod::default()
        };
        s.flow_mod(&fm, t).unwrap();
        let mut unknown = fm.clone();
        unknown.instructions = vec![Instruction::Meter { meter_id: 9 }];
        assert_eq!(
            s.flow_mod(&unknown, t),
            Err(OfpError::MeterModFailed(MeterModFailedCode::UnknownMeter))
        );

        let now = Time::from_secs(3);
        let ask = |s: &SwitchState, req| s.multipart(&req, now).unwrap().unwrap();
        match ask(&s, MultipartRequestBody::Flow(any_flow())) {
            MultipartReplyBody::Flow { stats } => {
                assert_eq!(stats.len(), 1);
                assert_eq!(stats[0].duration_sec, 2);
            }
            other => panic!("{other:?}"),
        }
        match ask(&s, MultipartRequestBody::Aggregate(any_flow())) {
            MultipartReplyBody::Aggregate(a) => assert_eq!(a.flow_count, 1),
            other => panic!("{other:?}"),
        }
        match ask(&s, MultipartRequestBody::Table) {
            MultipartReplyBody::Table { stats } => assert_eq!(stats.len(), 2),
            other => panic!("{other:?}"),
        }
        match ask(
            &s,
            MultipartRequestBody::Group {
                group_id: group_no::ALL,
            },
        ) {
            MultipartReplyBody::Group { stats } => assert_eq!(stats[0].ref_count, 1),
            other => panic!("{other:?}"),
        }
        match ask(&s, MultipartRequestBody::GroupDesc) {
            MultipartReplyBody::GroupDesc { groups } => assert_eq!(groups[0].group_id, 2),
            other => panic!("{other:?}"),
        }
        match ask(&s, MultipartRequestBody::GroupFeatures) {
            MultipartReplyBody::GroupFeatures(f) => assert_eq!(f.types, 0b1111),
            other => panic!("{other:?}"),
        }
        match ask(
            &s,
            MultipartRequestBody::Meter {
                meter_id: meter_no::ALL,
            },
        ) {
            MultipartReplyBody::Meter { stats } => assert_eq!(stats[0].flow_count, 1),
            other => panic!("{other:?}"),
        }
        match ask(&s, MultipartRequestBody::MeterConfig { meter_id: 1 }) {
            MultipartReplyBody::MeterConfig { configs } => assert_eq!(configs[0].meter_id, 1),
            other => panic!("{other:?}"),
        }
        match ask(&s, MultipartRequestBody::MeterFeatures) {
            MultipartReplyBody::MeterFeatures(f) => assert_eq!(f.band_types, 0b110),
            other => panic!("{other:?}"),
        }
        let bad = ofp::stats::FlowStatsRequest {
            table_id: 5,
            ..any_flow()
        };
        assert_eq!(
            s.multipart(&MultipartRequestBody::Flow(bad), now),
            Some(Err(OfpError::BadRequest(BadRequestCode::BadTableId)))
        );
        assert!(matches!(
            s.multipart(&MultipartRequestBody::Desc, now),
            Some(Ok(MultipartReplyBody::Desc(_)))
        ));

        // Hard timeout through the facade.
        assert!(s.expire(Time::from_secs(10)).is_empty());
        let ev = s.expire(Time::from_secs(11));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].to_message().reason, 1);
    }
}

/// The answers added for ports, queues, description and table features,
/// checked after a trip through the wire format (encode the reply,
/// decode it, read the fields).
#[cfg(test)]
mod wire_tests {
    use super::*;
    use crate::tables::port_table::QueueConfig;
    use ofp::consts::{port_no, table_no, OFPQ_ALL};
    use ofp::error::{
        PortModFailedCode, QueueOpFailedCode, TableFeaturesFailedCode, TableModFailedCode,
    };
    use ofp::multipart::{MultipartReply, MultipartRequest};
    use ofp::port::{port_config, port_state};
    use ofp::table_features::{ActionId, TableFeatureProp, TableFeatures};
    use ofp::{MacAddr, Message, OxmField, QueueProperty};

    const T0: Time = Time::from_secs(100);

    fn mac(b: u8) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0, b])
    }

    fn port(n: u32) -> Port {
        Port {
            port_no: n,
            hw_addr: mac(n as u8),
            name: format!("eth{n}"),
            config: 0,
            state: 0,
            curr: 1 << 6,
            advertised: 1 << 6,
            supported: (1 << 5) | (1 << 6),
            peer: 0,
            curr_speed: 1_000_000,
            max_speed: 1_000_000,
        }
    }

    fn switch() -> SwitchState {
        let mut s = SwitchState::new(
            TablesConfig {
                n_tables: 3,
                max_entries: 1000,
                ..TablesConfig::default()
            },
            GroupsConfig::default(),
            MetersConfig::default(),
        );
        s.port_table.add_port(port(1), T0);
        s.port_table.add_port(port(2), T0);
        s.port_table.add_port(port(port_no::LOCAL), T0);
        s
    }

    /// Asks `s`, sends the reply through the wire format, decodes it.
    fn ask(s: &SwitchState, body: MultipartRequestBody, now: Time) -> MultipartReplyBody {
        // The request itself survives the wire too.
        let req = Message::MultipartRequest(MultipartRequest { flags: 0, body });
        let Ok((_, Message::MultipartRequest(req))) = Message::decode(&req.encode(7)) else {
            panic!("request did not round-trip");
        };
        let reply = s.multipart(&req.body, now).unwrap().unwrap();
        let bytes = Message::MultipartReply(MultipartReply {
            flags: 0,
            body: reply.clone(),
        })
        .encode(7);
        match Message::decode(&bytes) {
            Ok((7, Message::MultipartReply(r))) => {
                assert_eq!(r.body, reply, "reply round-trips");
                r.body
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn desc_is_fulmar_and_dp_desc_is_configurable() {
        let mut s = switch();
        s.desc.dp_desc = "edge switch 7".to_string();
        let MultipartReplyBody::Desc(d) = ask(&s, MultipartRequestBody::Desc, T0) else {
            panic!()
        };
        assert_eq!(d.mfr_desc, "fulmar project");
        assert!(d.sw_desc.starts_with("fulmar "));
        assert!(!d.hw_desc.is_empty() && !d.serial_num.is_empty());
        assert_eq!(d.dp_desc, "edge switch 7");
    }

    #[test]
    fn port_desc_lists_every_port_in_order() {
        let mut s = switch();
        let MultipartReplyBody::PortDesc { ports } = ask(&s, MultipartRequestBody::PortDesc, T0)
        else {
            panic!()
        };
        let nos: Vec<u32> = ports.iter().map(|p| p.port_no).collect();
        assert_eq!(nos, vec![1, 2, port_no::LOCAL]);
        assert_eq!(ports[1], port(2));
        assert_eq!(
            s.port_table.set_state(2, port_state::LINK_DOWN),
            Some(Port {
                state: port_state::LINK_DOWN,
                ..port(2)
            })
        );
        assert_eq!(s.port_table.set_state(2, port_state::LINK_DOWN), None);
        assert_eq!(s.port_table.remove_port(1), Some(port(1)));
        let MultipartReplyBody::PortDesc { ports } = ask(&s, MultipartRequestBody::PortDesc, T0)
        else {
            panic!()
        };
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].state, port_state::LINK_DOWN);
    }

    #[test]
    fn port_stats_report_folded_counters_and_durations() {
        let mut s = switch();
        let mut c = Counters::default();
        c.port(1).rx_packets += 5;
        c.port(1).rx_bytes += 500;
        c.port(2).tx_packets += 3;
        c.port(2).tx_bytes += 300;
        c.port(2).tx_dropped += 1;
        c.port(9).rx_packets += 1; // no such port: skipped
        s.fold(&c);
        s.fold(&c);
        let later = Time(T0.0 + 2_500_000_000);
        let MultipartReplyBody::PortStats { stats } = ask(
            &s,
            MultipartRequestBody::PortStats {
                port_no: port_no::ANY,
            },
            later,
        ) else {
            panic!()
        };
        assert_eq!(stats.len(), 3);
        assert_eq!((stats[0].port_no, stats[0].rx_packets), (1, 10));
        assert_eq!(stats[0].rx_bytes, 1000);
        assert_eq!((stats[1].tx_packets, stats[1].tx_bytes), (6, 600));
        assert_eq!(stats[1].tx_dropped, 2);
        assert_eq!(
            (stats[1].duration_sec, stats[1].duration_nsec),
            (2, 500_000_000)
        );
        assert_eq!(stats[2].rx_errors, 0);
        let MultipartReplyBody::PortStats { stats } =
            ask(&s, MultipartRequestBody::PortStats { port_no: 2 }, later)
        else {
            panic!()
        };
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].port_no, 2);
        let MultipartReplyBody::PortStats { stats } =
            ask(&s, MultipartRequestBody::PortStats { port_no: 9 }, later)
        else {
            panic!()
        };
        assert!(stats.is_empty(), "unknown port: empty reply");
    }

    fn queued() -> SwitchState {
        let mut s = switch();
        let q = |min, max| QueueConfig {
            min_rate: min,
            max_rate: max,
        };
        assert!(s.port_table.set_queue(1, 0, q(None, None), T0));
        assert!(s.port_table.set_queue(1, 5, q(Some(100), Some(500)), T0));
        assert!(s.port_table.set_queue(2, 5, q(None, Some(1000)), T0));
        assert!(!s.port_table.set_queue(7, 1, q(None, None), T0));
        let mut c = Counters::default();
        c.queue_tx(1, 5, 100);
        c.queue_tx(1, 5, 60);
        c.queue_tx(2, 5, 70);
        c.queue_tx(2, 9, 70); // a queue port 2 does not have: not counted
        s.fold(&c);
        s
    }

    #[test]
    fn scheduler_counts_replace_the_pipelines() {
        let mut s = queued();
        assert!(s.port_table.set_queue_counters(1, 5, 7, 700, 3));
        assert!(!s.port_table.set_queue_counters(1, 6, 1, 1, 1));
        let mut c = Counters::default();
        c.queue_tx(1, 5, 100);
        s.fold(&c);
        match ask(
            &s,
            MultipartRequestBody::Queue {
                port_no: 1,
                queue_id: 5,
            },
            T0.plus_secs(1),
        ) {
            MultipartReplyBody::Queue { stats } => {
                assert_eq!(
                    (stats[0].tx_packets, stats[0].tx_bytes, stats[0].tx_errors),
                    (7, 700, 3)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn queue_stats_filter_by_port_and_queue() {
        let s = queued();
        let stats_of = |port_no, queue_id| match ask(
            &s,
            MultipartRequestBody::Queue { port_no, queue_id },
            T0.plus_secs(1),
        ) {
            MultipartReplyBody::Queue { stats } => stats
                .iter()
                .map(|q| (q.port_no, q.queue_id, q.tx_packets, q.tx_bytes))
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            stats_of(port_no::ANY, OFPQ_ALL),
            vec![(1, 0, 0, 0), (1, 5, 2, 160), (2, 5, 1, 70)]
        );
        assert_eq!(
            stats_of(port_no::ANY, 5),
            vec![(1, 5, 2, 160), (2, 5, 1, 70)]
        );
        assert_eq!(stats_of(1, OFPQ_ALL), vec![(1, 0, 0, 0), (1, 5, 2, 160)]);
        assert_eq!(stats_of(2, 5), vec![(2, 5, 1, 70)]);
        assert_eq!(stats_of(port_no::LOCAL, OFPQ_ALL), vec![]);
        let err = |port_no, queue_id| {
            s.multipart(&MultipartRequestBody::Queue { port_no, queue_id }, T0)
                .unwrap()
                .unwrap_err()
        };
        assert_eq!(
            err(7, OFPQ_ALL),
            OfpError::QueueOpFailed(QueueOpFailedCode::BadPort)
        );
        assert_eq!(
            err(2, 9),
            OfpError::QueueOpFailed(QueueOpFailedCode::BadQueue)
        );
        let Ok(MultipartReplyBody::Queue { stats }) = s
            .multipart(
                &MultipartRequestBody::Queue {
                    port_no: 1,
                    queue_id: 5,
                },
                T0.plus_secs(3),
            )
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(stats[0].duration_sec, 3);
    }

    #[test]
    fn queue_get_config_lists_queues_with_rates() {
        let s = queued();
        let reply = s.queue_get_config(1).unwrap();
        let bytes = Message::QueueGetConfigReply(reply).encode(3);
        let Ok((_, Message::QueueGetConfigReply(r))) = Message::decode(&bytes) else {
            panic!()
        };
        assert_eq!(r.port, 1);
        assert_eq!(r.queues.len(), 2);
        assert_eq!((r.queues[0].queue_id, r.queues[0].port), (0, 1));
        assert!(r.queues[0].properties.is_empty());
        assert_eq!(
            r.queues[1].properties,
            vec![
                QueueProperty::MinRate { rate: 100 },
                QueueProperty::MaxRate { rate: 500 }
            ]
        );
        let all = s.queue_get_config(port_no::ANY).unwrap();
        assert_eq!(all.port, port_no::ANY);
        assert_eq!(
            all.queues
                .iter()
                .map(|q| (q.port, q.queue_id))
                .collect::<Vec<_>>(),
            vec![(1, 0), (1, 5), (2, 5)]
        );
        assert_eq!(
            s.queue_get_config(8),
            Err(OfpError::QueueOpFailed(QueueOpFailedCode::BadPort))
        );
        let mut s = s;
        assert!(s.port_table.remove_queue(1, 5));
        assert!(!s.port_table.remove_queue(1, 5));
        assert_eq!(s.queue_get_config(1).unwrap().queues.len(), 1);
    }

    fn features(s: &SwitchState) -> Vec<TableFeatures> {
        match ask(
            s,
            MultipartRequestBody::TableFeatures { tables: Vec::new() },
            T0,
        ) {
            MultipartReplyBody::TableFeatures { tables } => tables,
            other => panic!("{other:?}"),
        }
    }

    fn prop(t: &TableFeatures, ty: u16) -> &TableFeatureProp {
        use ofp::table_features::prop_type as pt;
        t.properties
            .iter()
            .find(|p| {
                let want = match p {
                    TableFeatureProp::Instructions { .. } => pt::INSTRUCTIONS,
                    TableFeatureProp::InstructionsMiss { .. } => pt::INSTRUCTIONS_MISS,
                    TableFeatureProp::NextTables { .. } => pt::NEXT_TABLES,
                    TableFeatureProp::NextTablesMiss { .. } => pt::NEXT_TABLES_MISS,
                    TableFeatureProp::WriteActions { .. } => pt::WRITE_ACTIONS,
                    TableFeatureProp::WriteActionsMiss { .. } => pt::WRITE_ACTIONS_MISS,
                    TableFeatureProp::ApplyActions { .. } => pt::APPLY_ACTIONS,
                    TableFeatureProp::ApplyActionsMiss { .. } => pt::APPLY_ACTIONS_MISS,
                    TableFeatureProp::Match { .. } => pt::MATCH,
                    TableFeatureProp::Wildcards { .. } => pt::WILDCARDS,
                    TableFeatureProp::WriteSetfield { .. } => pt::WRITE_SETFIELD,
                    TableFeatureProp::WriteSetfieldMiss { .. } => pt::WRITE_SETFIELD_MISS,
                    TableFeatureProp::ApplySetfield { .. } => pt::APPLY_SETFIELD,
                    TableFeatureProp::ApplySetfieldMiss { .. } => pt::APPLY_SETFIELD_MISS,
                    _ => u16::MAX,
                };
                want == ty
            })
            .unwrap_or_else(|| panic!("no property {ty}"))
    }

    #[test]
    fn table_features_describe_what_the_pipeline_does() {
        use ofp::instruction::instruction_type as it;
        use ofp::table_features::prop_type as pt;
        let s = switch();
        let tables = features(&s);
        assert_eq!(tables.len(), 3);
        for (i, t) in tables.iter().enumerate() {
            assert_eq!(usize::from(t.table_id), i);
            assert_eq!(t.name, format!("table{i}"));
            assert_eq!(t.max_entries, 1000);
            assert_eq!((t.metadata_match, t.metadata_write), (u64::MAX, u64::MAX));
            let TableFeatureProp::Match { oxm_ids } = prop(t, pt::MATCH) else {
                panic!()
            };
            assert_eq!(oxm_ids.len(), OxmField::ALL.len());
            for id in oxm_ids {
                let f = OxmField::from_u8(id.field).unwrap();
                assert_eq!(id.hasmask, f.maskable(), "{f:?}");
                let len = f.kind().len() * if id.hasmask { 2 } else { 1 };
                assert_eq!(usize::from(id.length), len);
                assert_eq!(id.class, 0x8000);
            }
            let TableFeatureProp::Wildcards { oxm_ids } = prop(t, pt::WILDCARDS) else {
                panic!()
            };
            assert_eq!(oxm_ids.len(), OxmField::ALL.len());
            let TableFeatureProp::ApplySetfield { oxm_ids } = prop(t, pt::APPLY_SETFIELD) else {
                panic!()
            };
            let set: Vec<u8> = oxm_ids.iter().map(|o| o.field).collect();
            assert!(set.contains(&(OxmField::EthDst as u8)));
            assert!(set.contains(&(OxmField::TunnelId as u8)));
            assert!(!set.contains(&(OxmField::InPort as u8)));
            assert!(!set.contains(&(OxmField::Metadata as u8)));
            let TableFeatureProp::NextTables { table_ids } = prop(t, pt::NEXT_TABLES) else {
                panic!()
            };
            assert_eq!(table_ids, &((i as u8 + 1)..3).collect::<Vec<u8>>());
            let TableFeatureProp::InstructionsMiss { instruction_ids } =
                prop(t, pt::INSTRUCTIONS_MISS)
            else {
                panic!()
            };
            let has_goto = instruction_ids
                .iter()
                .any(|x| x.instruction_type == it::GOTO_TABLE);
            assert_eq!(has_goto, i < 2, "goto only where a later table exists");
            assert_eq!(instruction_ids.len(), if i < 2 { 6 } else { 5 });
            let TableFeatureProp::WriteActions { action_ids } = prop(t, pt::WRITE_ACTIONS) else {
                panic!()
            };
            assert_eq!(action_ids.len(), 16);
            assert!(!action_ids.iter().any(|a| a.action_type == 0xffff));
        }
    }

    #[test]
    fn every_advertised_setfield_is_accepted_in_a_flow() {
        use ofp::table_features::prop_type as pt;
        let mut s = switch();
        let t = &features(&s)[0];
        let TableFeatureProp::ApplySetfield { oxm_ids } = prop(t, pt::APPLY_SETFIELD) else {
            panic!()
        };
        // Each one installs in an entry whose match gives its prerequisite
        // (the flowtext parser adds nothing, so use a match per family).
        let mut installed = 0;
        for id in oxm_ids {
            let f = OxmField::from_u8(id.field).unwrap();
            let name = f.name();
            let value = match f.kind().len() {
                6 => "02:00:00:00:00:01".to_string(),
                4 if name.contains("ipv4") || name.contains("arp_") => "10.0.0.1".to_string(),
                16 => "::1".to_string(),
                _ => "1".to_string(),
            };
            for m in [
                "",
                "udp,",
                "tcp,",
                "sctp,",
                "icmp,",
                "arp,",
                "udp6,",
                "icmp6,icmp_type=135,",
                "icmp6,icmp_type=136,",
                "mpls,",
                "dl_vlan=5,",
                "dl_type=0x88e7,",
            ] {
                let line = format!("priority=1,{m}actions=set_field:{value}->{name},output:1");
                let Ok(mut fms) = flowtext::parse_flow_file(&line) else {
                    continue;
                };
                if let Some(fm) = fms.pop() {
                    if s.flow_mod(&fm, T0).is_ok() {
                        installed += 1;
                        break;
                    }
                }
            }
        }
        assert_eq!(
            installed,
            oxm_ids.len(),
            "every advertised set-field installs"
        );
    }

    #[test]
    fn table_features_set_request_must_match_the_pipeline() {
        use TableFeaturesFailedCode as C;
        let s = switch();
        let ours = features(&s);
        let set = |tables: Vec<TableFeatures>| {
            s.multipart(&MultipartRequestBody::TableFeatures { tables }, T0)
                .unwrap()
        };
        // Our own features, properties in another order: accepted.
        let mut same = ours.clone();
        same[1].properties.reverse();
        assert_eq!(
            set(same),
            Ok(MultipartReplyBody::TableFeatures {
                tables: ours.clone()
            })
        );
        let tf = |c| Err(OfpError::TableFeaturesFailed(c));
        let mut bad = ours.clone();
        bad[2].table_id = 7;
        assert_eq!(set(bad), tf(C::BadTable));
        let mut bad = ours.clone();
        bad[0].properties.push(TableFeatureProp::Experimenter {
            experimenter: 1,
            exp_type: 0,
            data: vec![],
        });
        assert_eq!(set(bad), tf(C::BadType));
        // Asking for more than we do.
        let mut bad = ours.clone();
        bad[0].max_entries = 5000;
        assert_eq!(set(bad), tf(C::BadArgument));
        let mut bad = ours.clone();
        if let Some(TableFeatureProp::WriteActions { action_ids }) = bad[0].properties.get_mut(4) {
            action_ids.push(ActionId {
                action_type: 0xffff,
                data: vec![0, 0, 0, 1],
            });
        } else {
            panic!("write actions are property 4");
        }
        assert_eq!(set(bad), tf(C::BadArgument));
        let mut bad = ours.clone();
        bad[1] = bad[0].clone();
        assert_eq!(set(bad), tf(C::BadArgument), "table listed twice");
        let mut bad = ours.clone();
        bad[2]
            .properties
            .push(TableFeatureProp::NextTables { table_ids: vec![0] });
        assert_eq!(set(bad), tf(C::BadArgument), "property twice");
        // Metadata bits we do not have are impossible with all 64 bits
        // supported; fewer bits is a restriction.
        let mut less = ours.clone();
        less[0].metadata_write = 0xff;
        assert_eq!(set(less), tf(C::Eperm));
        // Asking for less than we do: restrictions we do not enforce.
        let mut less = ours.clone();
        less.pop();
        assert_eq!(set(less), tf(C::Eperm), "removing a table");
        let mut less = ours.clone();
        less[0].max_entries = 10;
        assert_eq!(set(less), tf(C::Eperm));
        let mut less = ours.clone();
        less[0].name = "acl".to_string();
        assert_eq!(set(less), tf(C::Eperm));
        let mut less = ours.clone();
        less[0].properties.remove(0);
        assert_eq!(set(less), tf(C::Eperm));
        let mut less = ours;
        if let Some(TableFeatureProp::Match { oxm_ids }) = less[0].properties.get_mut(8) {
            oxm_ids.pop();
        } else {
            panic!("match is property 8");
        }
        assert_eq!(set(less), tf(C::Eperm));
    }

    #[test]
    fn table_mod_accepts_only_deprecated_bits_on_existing_tables() {
        let mut s = switch();
        let tm = |table_id, config| TableMod { table_id, config };
        assert_eq!(s.table_mod(&tm(0, 0)), Ok(()));
        assert_eq!(s.table_mod(&tm(2, 3)), Ok(()));
        assert_eq!(s.table_mod(&tm(table_no::ALL, 0)), Ok(()));
        assert_eq!(
            s.table_mod(&tm(3, 0)),
            Err(OfpError::TableModFailed(TableModFailedCode::BadTable))
        );
        assert_eq!(
            s.table_mod(&tm(table_no::MAX, 0)),
            Err(OfpError::TableModFailed(TableModFailedCode::BadTable))
        );
        assert_eq!(
            s.table_mod(&tm(0, 4)),
            Err(OfpError::TableModFailed(TableModFailedCode::BadConfig))
        );
        assert_eq!(
            s.table_mod(&tm(table_no::ALL, 1 << 31)),
            Err(OfpError::TableModFailed(TableModFailedCode::BadConfig))
        );
    }

    #[test]
    fn port_mod_checks_then_applies_config_under_mask() {
        let mut s = switch();
        let pm = |port_no, hw, config, mask, advertise| PortMod {
            port_no,
            hw_addr: mac(hw),
            config,
            mask,
            advertise,
        };
        let fail = |c| Err(OfpError::PortModFailed(c));
        let before = s.port_table.clone();
        assert_eq!(
            s.port_mod(&pm(9, 9, 0, 0, 0)),
            fail(PortModFailedCode::BadPort)
        );
        assert_eq!(
            s.port_mod(&pm(port_no::ANY, 1, 0, 0, 0)),
            fail(PortModFailedCode::BadPort)
        );
        assert_eq!(
            s.port_mod(&pm(1, 2, 0, 0, 0)),
            fail(PortModFailedCode::BadHwAddr)
        );
        assert_eq!(
            s.port_mod(&pm(1, 1, 0, 1 << 1, 0)),
            fail(PortModFailedCode::BadConfig),
            "bit 1 is not a config bit in 1.3"
        );
        assert_eq!(
            s.port_mod(&pm(1, 1, 0, 0, 1 << 10)),
            fail(PortModFailedCode::BadAdvertise)
        );
        assert_eq!(s.port_table, before, "failures change nothing");
        // Set NO_FWD and NO_PACKET_IN; PORT_DOWN in config but not in
        // mask is ignored.
        let all = port_config::NO_FWD | port_config::NO_PACKET_IN | port_config::PORT_DOWN;
        let new = s
            .port_mod(&pm(
                1,
                1,
                all,
                port_config::NO_FWD | port_config::NO_PACKET_IN,
                1 << 5,
            ))
            .unwrap()
            .unwrap();
        assert_eq!(new.config, port_config::NO_FWD | port_config::NO_PACKET_IN);
        assert_eq!(new.advertised, 1 << 5);
        assert_eq!(s.port_table.get(1), Some(&new));
        // The same again changes nothing.
        assert_eq!(
            s.port_mod(&pm(
                1,
                1,
                all,
                port_config::NO_FWD | port_config::NO_PACKET_IN,
                0
            )),
            Ok(None)
        );
        // Clear NO_FWD only.
        let new = s
            .port_mod(&pm(1, 1, 0, port_config::NO_FWD, 0))
            .unwrap()
            .unwrap();
        assert_eq!(new.config, port_config::NO_PACKET_IN);
        assert_eq!(new.advertised, 1 << 5, "advertise 0 leaves it");
        // The packet side sees the bits.
        s.port_mod(&pm(2, 2, port_config::PORT_DOWN, port_config::PORT_DOWN, 0))
            .unwrap();
        let p = s.port_table.datapath_ports();
        assert!(!p.packet_in_allowed(1) && p.can_send(1));
        assert!(!p.is_live(2));
        assert!(p.is_live(port_no::LOCAL));
    }

    #[test]
    fn a_port_administratively_down_shows_no_link() {
        let mut s = switch();
        let down = |config| PortMod {
            port_no: 2,
            hw_addr: mac(2),
            config,
            mask: port_config::PORT_DOWN,
            advertise: 0,
        };
        let new = s.port_mod(&down(port_config::PORT_DOWN)).unwrap().unwrap();
        assert_eq!(new.config, port_config::PORT_DOWN);
        assert_eq!(new.state, port_state::LINK_DOWN, "the PORT_STATUS says so");
        // The link comes up meanwhile: still no link while down.
        assert_eq!(s.port_table.set_state(2, 0), None);
        assert_eq!(s.port_table.get(2).unwrap().state, port_state::LINK_DOWN);
        // Up again: the link's own state shows.
        let new = s.port_mod(&down(0)).unwrap().unwrap();
        assert_eq!((new.config, new.state), (0, 0));
        // Down, then the link goes down, then up administratively: no link.
        s.port_mod(&down(port_config::PORT_DOWN)).unwrap();
        assert_eq!(s.port_table.set_state(2, port_state::LINK_DOWN), None);
        let new = s.port_mod(&down(0)).unwrap().unwrap();
        assert_eq!((new.config, new.state), (0, port_state::LINK_DOWN));
    }

    /// Folding a trillion counted packets is one add per key (a
    /// per-packet fold would never finish this test).
    #[test]
    fn folding_costs_keys_not_packets() {
        use crate::model::counters::{FlowCounter, TableCounter};
        use crate::FlowId;
        let mut s = SwitchState::new(
            TablesConfig {
                n_tables: 2,
                ..TablesConfig::default()
            },
            GroupsConfig::default(),
            MetersConfig::default(),
        );
        let fm = ofp::FlowMod {
            instructions: vec![ofp::Instruction::GotoTable { table_id: 1 }],
            ..ofp::FlowMod::default()
        };
        let id = s.flow_mod(&fm, Time(0)).unwrap().installed.unwrap();
        let mut c = Counters::default();
        let huge = 1_000_000_000_000u64;
        c.flows.insert(
            id,
            FlowCounter {
                packets: huge,
                bytes: huge * 64,
                last_hit: Time(7),
            },
        );
        c.tables.insert(
            0,
            TableCounter {
                lookups: huge,
                matched: huge - 1,
            },
        );
        s.fold(&c);
        s.fold(&c);
        let e = s.tables.counter(id).unwrap();
        assert_eq!((e.packets, e.bytes), (2 * huge, 128 * huge));
        assert_eq!(e.last_used, Time(7));
        let t = &s.tables.table_stats()[0];
        assert_eq!((t.lookup_count, t.matched_count), (2 * huge, 2 * huge - 2));
        // Zero packets never moves the last hit; unknown ids are ignored.
        assert!(s.tables.add_hits(id, 0, 0, Time(99)));
        assert_eq!(s.tables.counter(id).unwrap().last_used, Time(7));
        assert!(!s.tables.add_hits(FlowId(999), 1, 1, Time(1)));
        assert!(!s.groups.add_counts(5, 1, 1, &[]));
        assert!(!s.meters.add_counts(5, 1, 1, &[]));
    }

    /// A worker's hits by slot go to the entry the slot holds only when it
    /// is the entry the worker counted for: a slot freed and taken by a
    /// new entry meanwhile does not get the old entry's hits.
    #[test]
    fn hits_by_slot_go_only_to_the_entry_counted() {
        use crate::model::counters::SlotHits;
        let mut s = SwitchState::new(
            TablesConfig::default(),
            GroupsConfig::default(),
            MetersConfig::default(),
        );
        let add = |s: &mut SwitchState, f: &str| {
            let fm = flowtext::parse_flow(f).unwrap();
            s.flow_mod(&fm, Time(0)).unwrap().installed.unwrap()
        };
        let a = add(&mut s, "priority=5,in_port=1,actions=drop");
        let hits = |id, packets| SlotHits {
            id,
            packets,
            bytes: packets * 60,
            last_hit: Time(3),
            slot: 0,
            table: 0,
        };
        let mut c = Counters::default();
        c.by_slot.push(hits(a, 2));
        c.by_slot.push(hits(a, 1));
        s.fold(&c);
        assert_eq!(s.tables.counter(a).unwrap().packets, 3);
        let del =
            flowtext::parse_flow_command("priority=5,in_port=1", ofp::FlowModCommand::DeleteStrict)
                .unwrap();
        s.flow_mod(&del, Time(4)).unwrap();
        let b = add(&mut s, "priority=6,in_port=2,actions=drop");
        let in_slot_0 = s.tables.table(0).and_then(|t| t.slot(0)).map(|e| e.id);
        assert_eq!(in_slot_0, Some(b));
        // Late hits of `a`, counted in the slot `b` now holds.
        s.fold(&c);
        assert_eq!(s.tables.counter(b).unwrap().packets, 0);
        let mut c = Counters::default();
        c.by_slot.push(hits(b, 4));
        s.fold(&c);
        assert_eq!(s.tables.counter(b).unwrap().packets, 4);
        assert!(!s.tables.add_hits_at(0, 0, a, 1, 1, Time(5)));
        // A slot that does not hold the entry: found by its id instead.
        assert!(s.tables.add_hits_at(0, 7, b, 1, 1, Time(5)));
        assert_eq!(s.tables.counter(b).unwrap().packets, 5);
    }
}
