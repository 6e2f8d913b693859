//! [`SwitchState`]: the flow tables, group table and meter table of one
//! switch together, with one entry point per controller operation, so the
//! agent never has to wire the three together itself (a flow-mod is
//! checked against the groups and meters; deleting a group or meter
//! removes flows). It also holds the port table and the switch
//! description, so that every multipart request, TABLE_MOD, PORT_MOD and
//! QUEUE_GET_CONFIG is answered here.

use crate::datapath::Counters;
use crate::features;
use crate::flow_entry::FlowRemoved;
use crate::flow_table::{FlowModOutcome, Tables, TablesConfig};
use crate::group_table::{Groups, GroupsConfig};
use crate::meter_table::{Meters, MetersConfig};
use crate::port_table::PortTable;
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
    /// counter: flows, tables, groups, meters ([`Counters::fold_into`]),
    /// ports and queues ([`PortTable::fold`]). O(keys in `c`).
    pub fn fold(&mut self, c: &Counters) {
        c.fold_into(self);
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
        self.groups.apply_group_mod(gm, &mut self.tables, now)
    }

    /// Applies a METER_MOD (see [`Meters::apply_meter_mod`]).
    pub fn meter_mod(&mut self, mm: &MeterMod, now: Time) -> Result<Vec<FlowRemoved>, OfpError> {
        self.meters.apply_meter_mod(mm, &mut self.tables, now)
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
                stats: self.groups.stats(*group_id, &self.tables, now),
            }),
            Req::GroupDesc => Ok(Rep::GroupDesc {
                groups: self.groups.desc(),
            }),
            Req::GroupFeatures => Ok(Rep::GroupFeatures(self.groups.features())),
            Req::Meter { meter_id } => Ok(Rep::Meter {
                stats: self.meters.stats(*meter_id, &self.tables, now),
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
    use crate::flow_table::any_flow;
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
