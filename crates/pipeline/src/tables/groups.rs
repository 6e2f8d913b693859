//! The group table (spec 1.3.5 §5.6, §6.5, §7.3.4.3): GROUP_MOD semantics,
//! per-group and per-bucket counters, and the GROUP_DESC, GROUP and
//! GROUP_FEATURES statistics answers.
//!
//! Decisions where the spec leaves room:
//!
//! * An indirect group must have exactly one bucket, and a non-select
//!   group's buckets must have weight 0; both answer
//!   `GROUP_MOD_FAILED/INVALID_GROUP` (spec §6.5: a group "that includes
//!   fields such as weight that are undefined for the specified group
//!   type" is invalid; the OFTest suite expects the same code).
//!   `WEIGHT_UNSUPPORTED` is for a switch without unequal load sharing in
//!   *select* groups, which we support, so it is not used.
//! * A fast-failover bucket must watch a port or a group (`BAD_WATCH`
//!   otherwise); a watched port must be a real port number (`1..=MAX`)
//!   and a watched group must exist (`BAD_WATCH`). Liveness is only
//!   implemented for fast-failover groups, so a watch in a bucket of any
//!   other type is `WATCH_UNSUPPORTED` (spec §6.5: "specifying watch_port
//!   or watch_group for a group that does not support liveness").
//! * A group action in a bucket is checked like one in a flow: a group
//!   that does not exist is `BAD_ACTION/BAD_OUT_GROUP`; one that leads
//!   back to the group being added or modified is `LOOP`.
//! * Deleting a group another group forwards to fails with
//!   `CHAINED_GROUP` (its spec comment: "Group not deleted because another
//!   group is forwarding to it") unless the request deletes all groups.
//!   Deleting an absent group is not an error. Flows forwarding to a
//!   deleted group are removed with reason `GROUP_DELETE`.
//! * `BAD_TYPE` and `BAD_COMMAND` cannot arise here: the decoder only
//!   produces the four types and three commands, and all are supported.
//!   `BAD_BUCKET` is not used.
//! * MODIFY removes the group, type and buckets included, and adds the new
//!   one (spec §6.5): counters and duration restart; flows and groups that
//!   forward to it keep doing so.

use crate::tables::validate::{validate_action_list, ActionPolicy, ACTIONS};
use crate::Time;
use ofp::consts::{group_no, port_no};
use ofp::error::GroupModFailedCode;
use ofp::stats::{BucketCounter, GroupDesc, GroupFeatures, GroupStats};
use ofp::{Action, Bucket, GroupMod, GroupModCommand, GroupType, OfpError};
use std::collections::{BTreeMap, BTreeSet};

/// Size limits of the group table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupsConfig {
    /// Most groups (all types together): `OUT_OF_GROUPS` beyond it.
    pub max_groups: usize,
    /// Most buckets in one group: `OUT_OF_BUCKETS` beyond it.
    pub max_buckets: usize,
    /// Which output ports bucket actions may name.
    pub policy: ActionPolicy,
}

impl Default for GroupsConfig {
    /// 65536 groups of up to 256 buckets.
    fn default() -> Self {
        GroupsConfig {
            max_groups: 65536,
            max_buckets: 256,
            policy: ActionPolicy::default(),
        }
    }
}

/// One group entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub group_id: u32,
    pub group_type: GroupType,
    pub buckets: Vec<Bucket>,
    /// When it was added.
    pub installed_at: Time,
    pub packet_count: u64,
    pub byte_count: u64,
    /// `(packets, bytes)` per bucket, same order as `buckets`.
    pub bucket_counts: Vec<(u64, u64)>,
}

impl Group {
    /// The groups its buckets' group actions forward to.
    pub fn forwards_to(&self) -> impl Iterator<Item = u32> + '_ {
        bucket_groups(&self.buckets)
    }
}

fn bucket_groups(buckets: &[Bucket]) -> impl Iterator<Item = u32> + '_ {
    buckets.iter().flat_map(|b| {
        b.actions.iter().filter_map(|a| match a {
            Action::Group { group_id } => Some(*group_id),
            _ => None,
        })
    })
}

/// `OFPGFC_SELECT_WEIGHT`.
pub const OFPGFC_SELECT_WEIGHT: u32 = 1 << 0;
/// `OFPGFC_SELECT_LIVENESS`.
pub const OFPGFC_SELECT_LIVENESS: u32 = 1 << 1;
/// `OFPGFC_CHAINING`.
pub const OFPGFC_CHAINING: u32 = 1 << 2;
/// `OFPGFC_CHAINING_CHECKS`.
pub const OFPGFC_CHAINING_CHECKS: u32 = 1 << 3;

/// The group table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    config: GroupsConfig,
    groups: BTreeMap<u32, Group>,
}

const fn gm_failed(code: GroupModFailedCode) -> OfpError {
    OfpError::GroupModFailed(code)
}

impl Groups {
    /// An empty group table.
    pub fn new(config: GroupsConfig) -> Groups {
        Groups {
            config,
            groups: BTreeMap::new(),
        }
    }

    /// Whether group `id` exists.
    pub fn contains(&self, id: u32) -> bool {
        self.groups.contains_key(&id)
    }

    /// A group by id.
    pub fn get(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id)
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// True when there is no group.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Applies one GROUP_MOD at `now`. Returns the groups deleted: the
    /// caller removes the flow entries that forward to them
    /// ([`crate::SwitchState::group_mod`]). On error nothing has changed.
    pub fn apply_group_mod(&mut self, gm: &GroupMod, now: Time) -> Result<Vec<u32>, OfpError> {
        match gm.command {
            GroupModCommand::Add | GroupModCommand::Modify => {
                self.check(gm)?;
                self.groups.insert(
                    gm.group_id,
                    Group {
                        group_id: gm.group_id,
                        group_type: gm.group_type,
                        buckets: gm.buckets.clone(),
                        installed_at: now,
                        packet_count: 0,
                        byte_count: 0,
                        bucket_counts: vec![(0, 0); gm.buckets.len()],
                    },
                );
                Ok(Vec::new())
            }
            GroupModCommand::Delete => self.delete(gm.group_id),
        }
    }

    /// Every check of an ADD or MODIFY, before anything changes.
    fn check(&self, gm: &GroupMod) -> Result<(), OfpError> {
        let id = gm.group_id;
        if id > group_no::MAX {
            return Err(gm_failed(GroupModFailedCode::InvalidGroup));
        }
        let exists = self.groups.contains_key(&id);
        match gm.command {
            GroupModCommand::Add if exists => {
                return Err(gm_failed(GroupModFailedCode::GroupExists));
            }
            GroupModCommand::Add if self.groups.len() >= self.config.max_groups => {
                return Err(gm_failed(GroupModFailedCode::OutOfGroups));
            }
            GroupModCommand::Modify if !exists => {
                return Err(gm_failed(GroupModFailedCode::UnknownGroup));
            }
            _ => {}
        }
        if gm.buckets.len() > self.config.max_buckets {
            return Err(gm_failed(GroupModFailedCode::OutOfBuckets));
        }
        if gm.group_type == GroupType::Indirect && gm.buckets.len() != 1 {
            return Err(gm_failed(GroupModFailedCode::InvalidGroup));
        }
        if gm.group_type != GroupType::Select && gm.buckets.iter().any(|b| b.weight != 0) {
            return Err(gm_failed(GroupModFailedCode::InvalidGroup));
        }
        if gm.group_type != GroupType::FastFailover
            && gm
                .buckets
                .iter()
                .any(|b| b.watch_port != port_no::ANY || b.watch_group != group_no::ANY)
        {
            return Err(gm_failed(GroupModFailedCode::WatchUnsupported));
        }
        if gm.group_type == GroupType::FastFailover {
            for b in &gm.buckets {
                let port_ok = b.watch_port == port_no::ANY
                    || (b.watch_port != 0 && b.watch_port <= port_no::MAX);
                let group_ok = b.watch_group == group_no::ANY
                    || (b.watch_group != id && self.groups.contains_key(&b.watch_group));
                let watches = b.watch_port != port_no::ANY || b.watch_group != group_no::ANY;
                if !(port_ok && group_ok && watches) {
                    return Err(gm_failed(GroupModFailedCode::BadWatch));
                }
            }
        }
        // The group itself counts as existing so that a self-reference is
        // reported as the loop it is.
        let known = |g: u32| g == id || self.groups.contains_key(&g);
        for b in &gm.buckets {
            validate_action_list(&b.actions, None, &known, self.config.policy)?;
        }
        if self.reaches(bucket_groups(&gm.buckets).collect(), id) {
            return Err(gm_failed(GroupModFailedCode::Loop));
        }
        Ok(())
    }

    /// True when following group actions from `start` (through the
    /// current table, where the group `target` is about to get new
    /// buckets whose targets `start` is) arrives at `target`.
    fn reaches(&self, start: Vec<u32>, target: u32) -> bool {
        let mut seen = BTreeSet::new();
        let mut stack = start;
        while let Some(g) = stack.pop() {
            if g == target {
                return true;
            }
            if !seen.insert(g) {
                continue;
            }
            if let Some(group) = self.groups.get(&g) {
                stack.extend(group.forwards_to());
            }
        }
        false
    }

    fn delete(&mut self, id: u32) -> Result<Vec<u32>, OfpError> {
        if id == group_no::ALL {
            let ids: Vec<u32> = self.groups.keys().copied().collect();
            self.groups.clear();
            return Ok(ids);
        }
        if id > group_no::MAX {
            return Err(gm_failed(GroupModFailedCode::InvalidGroup));
        }
        if !self.groups.contains_key(&id) {
            return Ok(Vec::new());
        }
        if self
            .groups
            .values()
            .any(|g| g.group_id != id && g.forwards_to().any(|t| t == id))
        {
            return Err(gm_failed(GroupModFailedCode::ChainedGroup));
        }
        self.groups.remove(&id);
        Ok(vec![id])
    }

    /// Records that a packet of `bytes` bytes was processed by `group`
    /// (once per packet, however many buckets it went through). False if
    /// there is no such group.
    pub fn note_group_hit(&mut self, group: u32, bytes: u64) -> bool {
        let Some(g) = self.groups.get_mut(&group) else {
            return false;
        };
        g.packet_count = g.packet_count.wrapping_add(1);
        g.byte_count = g.byte_count.wrapping_add(bytes);
        true
    }

    /// Records that a packet of `bytes` bytes went through `bucket` of
    /// `group` (bucket counters only; see [`Groups::note_group_hit`]).
    /// False if there is no such group or bucket.
    pub fn note_bucket_hit(&mut self, group: u32, bucket: usize, bytes: u64) -> bool {
        let Some(c) = self
            .groups
            .get_mut(&group)
            .and_then(|g| g.bucket_counts.get_mut(bucket))
        else {
            return false;
        };
        c.0 = c.0.wrapping_add(1);
        c.1 = c.1.wrapping_add(bytes);
        true
    }

    /// Adds `packets` packets of `bytes` bytes to `group`'s counters and
    /// `(packets, bytes)` per bucket index to its bucket counters (the bulk
    /// form of [`Groups::note_group_hit`] and [`Groups::note_bucket_hit`]);
    /// bucket indexes the group does not have are ignored. False if there
    /// is no such group.
    pub fn add_counts(
        &mut self,
        group: u32,
        packets: u64,
        bytes: u64,
        buckets: &[(u64, u64)],
    ) -> bool {
        let Some(g) = self.groups.get_mut(&group) else {
            return false;
        };
        g.packet_count = g.packet_count.wrapping_add(packets);
        g.byte_count = g.byte_count.wrapping_add(bytes);
        for (c, (p, b)) in g.bucket_counts.iter_mut().zip(buckets) {
            c.0 = c.0.wrapping_add(*p);
            c.1 = c.1.wrapping_add(*b);
        }
        true
    }

    /// The GROUP_DESC multipart reply body: every group, by id.
    pub fn desc(&self) -> Vec<GroupDesc> {
        self.groups
            .values()
            .map(|g| GroupDesc {
                group_type: g.group_type,
                group_id: g.group_id,
                buckets: g.buckets.clone(),
            })
            .collect()
    }

    /// The GROUP multipart reply body for `group_id` (`OFPG_ALL` for
    /// every group; a group that does not exist gives an empty list).
    /// `flow_refs(g)` is the number of flow entries forwarding to `g`.
    pub fn stats(
        &self,
        group_id: u32,
        flow_refs: impl Fn(u32) -> usize,
        now: Time,
    ) -> Vec<GroupStats> {
        self.groups
            .values()
            .filter(|g| group_id == group_no::ALL || g.group_id == group_id)
            .map(|g| {
                let from_groups = self
                    .groups
                    .values()
                    .filter(|o| o.forwards_to().any(|t| t == g.group_id))
                    .count();
                let refs = flow_refs(g.group_id) + from_groups;
                let (duration_sec, duration_nsec) = now.duration_since(g.installed_at);
                GroupStats {
                    group_id: g.group_id,
                    ref_count: u32::try_from(refs).unwrap_or(u32::MAX),
                    packet_count: g.packet_count,
                    byte_count: g.byte_count,
                    duration_sec,
                    duration_nsec,
                    bucket_stats: g
                        .bucket_counts
                        .iter()
                        .map(|(p, b)| BucketCounter {
                            packet_count: *p,
                            byte_count: *b,
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The GROUP_FEATURES reply: all four types, weights, chaining with
    /// loop checks; no select liveness (not implemented yet).
    pub fn features(&self) -> GroupFeatures {
        let actions: u32 = ACTIONS.iter().fold(0, |acc, t| acc | (1u32 << t));
        let max = u32::try_from(self.config.max_groups).unwrap_or(u32::MAX);
        GroupFeatures {
            types: (1 << GroupType::All as u32)
                | (1 << GroupType::Select as u32)
                | (1 << GroupType::Indirect as u32)
                | (1 << GroupType::FastFailover as u32),
            capabilities: OFPGFC_SELECT_WEIGHT | OFPGFC_CHAINING | OFPGFC_CHAINING_CHECKS,
            max_groups: [max; 4],
            actions: [actions; 4],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::flow_entry::FlowRemoved;
    use crate::tables::meters::Meters;
    use crate::tables::{Tables, TablesConfig};
    use ofp::error::BadActionCode;
    use ofp::{FlowMod, Instruction, Oxm, OxmField, OxmValue};

    fn bucket(actions: Vec<Action>) -> Bucket {
        Bucket {
            actions,
            ..Bucket::default()
        }
    }

    fn out(port: u32) -> Vec<Action> {
        vec![Action::Output { port, max_len: 0 }]
    }

    fn to_group(g: u32) -> Vec<Action> {
        vec![Action::Group { group_id: g }]
    }

    fn gm(
        command: GroupModCommand,
        group_type: GroupType,
        id: u32,
        buckets: Vec<Bucket>,
    ) -> GroupMod {
        GroupMod {
            command,
            group_type,
            group_id: id,
            buckets,
        }
    }

    fn add(id: u32, buckets: Vec<Bucket>) -> GroupMod {
        gm(GroupModCommand::Add, GroupType::All, id, buckets)
    }

    fn delete(id: u32) -> GroupMod {
        gm(GroupModCommand::Delete, GroupType::All, id, vec![])
    }

    struct Sw {
        groups: Groups,
        tables: Tables,
    }

    impl Sw {
        fn new(config: GroupsConfig) -> Sw {
            Sw {
                groups: Groups::new(config),
                tables: Tables::new(TablesConfig {
                    n_tables: 2,
                    ..TablesConfig::default()
                }),
            }
        }

        fn apply(&mut self, m: &GroupMod) -> Result<Vec<FlowRemoved>, OfpError> {
            let now = Time::from_secs(10);
            let deleted = self.groups.apply_group_mod(m, now)?;
            Ok(deleted
                .into_iter()
                .flat_map(|g| self.tables.remove_group_users(g, now))
                .collect())
        }

        fn ok(&mut self, m: &GroupMod) {
            self.apply(m).unwrap();
        }

        fn refuse(&mut self, m: &GroupMod, err: GroupModFailedCode) {
            self.refuse_with(m, OfpError::GroupModFailed(err));
        }

        fn refuse_with(&mut self, m: &GroupMod, err: OfpError) {
            let before = self.groups.clone();
            let flows = self.tables.snapshot();
            assert_eq!(self.apply(m), Err(err), "{m:?}");
            assert_eq!(self.groups, before, "failed group mod changed groups");
            assert_eq!(
                self.tables.snapshot(),
                flows,
                "failed group mod changed flows"
            );
        }

        fn flow_to_group(&mut self, table: u8, port: u32, g: u32, flags: u16) {
            let fm = FlowMod {
                table_id: table,
                flags,
                match_: ofp::Match {
                    fields: vec![Oxm::Basic {
                        field: OxmField::InPort,
                        value: OxmValue::U32(port),
                        mask: None,
                    }],
                },
                instructions: vec![Instruction::ApplyActions {
                    actions: to_group(g),
                }],
                ..FlowMod::default()
            };
            self.tables
                .apply_flow_mod(&fm, Time(0), &self.groups, &Meters::default())
                .unwrap();
        }
    }

    #[test]
    fn add_modify_delete_and_desc() {
        let mut sw = Sw::new(GroupsConfig::default());
        sw.ok(&add(1, vec![bucket(out(1)), bucket(out(2))]));
        sw.refuse(&add(1, vec![]), GroupModFailedCode::GroupExists);
        sw.refuse(
            &gm(GroupModCommand::Modify, GroupType::All, 2, vec![]),
            GroupModFailedCode::UnknownGroup,
        );
        assert_eq!(
            sw.groups.desc(),
            vec![GroupDesc {
                group_type: GroupType::All,
                group_id: 1,
                buckets: vec![bucket(out(1)), bucket(out(2))],
            }]
        );
        // An ALL group: one packet, both buckets.
        assert!(sw.groups.note_group_hit(1, 100));
        assert!(sw.groups.note_bucket_hit(1, 0, 100));
        assert!(sw.groups.note_bucket_hit(1, 1, 100));
        assert!(!sw.groups.note_bucket_hit(1, 2, 100));
        assert!(!sw.groups.note_bucket_hit(9, 0, 100));
        assert!(!sw.groups.note_group_hit(9, 100));
        let st = sw
            .groups
            .stats(1, |g| sw.tables.group_ref_count(g), Time::from_secs(10));
        assert_eq!((st[0].packet_count, st[0].byte_count), (1, 100));
        let buckets: Vec<(u64, u64)> = st[0]
            .bucket_stats
            .iter()
            .map(|b| (b.packet_count, b.byte_count))
            .collect();
        assert_eq!(buckets, vec![(1, 100), (1, 100)]);
        let select = Bucket {
            weight: 3,
            ..bucket(out(3))
        };
        sw.ok(&gm(
            GroupModCommand::Modify,
            GroupType::Select,
            1,
            vec![select.clone()],
        ));
        let g = sw.groups.get(1).unwrap();
        assert_eq!(
            (g.group_type, g.buckets.clone()),
            (GroupType::Select, vec![select])
        );
        assert_eq!((g.packet_count, g.byte_count), (0, 0), "counters restart");
        assert_eq!(g.bucket_counts, vec![(0, 0)]);
        // Deleting an absent group is fine; deleting a present one works.
        assert_eq!(sw.apply(&delete(5)), Ok(vec![]));
        sw.ok(&delete(1));
        assert!(sw.groups.is_empty());
    }

    #[test]
    fn reserved_and_out_of_range_ids_are_invalid() {
        let mut sw = Sw::new(GroupsConfig::default());
        for id in [group_no::MAX + 1, group_no::ALL, group_no::ANY] {
            sw.refuse(&add(id, vec![]), GroupModFailedCode::InvalidGroup);
            sw.refuse(
                &gm(GroupModCommand::Modify, GroupType::All, id, vec![]),
                GroupModFailedCode::InvalidGroup,
            );
        }
        sw.refuse(&delete(group_no::ANY), GroupModFailedCode::InvalidGroup);
        sw.ok(&add(group_no::MAX, vec![]));
        sw.ok(&add(0, vec![]));
        assert_eq!(sw.groups.len(), 2);
    }

    #[test]
    fn type_rules_for_buckets_weights_and_watches() {
        let mut sw = Sw::new(GroupsConfig::default());
        let ind = |buckets| gm(GroupModCommand::Add, GroupType::Indirect, 1, buckets);
        sw.refuse(&ind(vec![]), GroupModFailedCode::InvalidGroup);
        sw.refuse(
            &ind(vec![bucket(out(1)), bucket(out(2))]),
            GroupModFailedCode::InvalidGroup,
        );
        let weighted = Bucket {
            weight: 1,
            ..bucket(out(1))
        };
        for t in [GroupType::All, GroupType::Indirect] {
            sw.refuse(
                &gm(GroupModCommand::Add, t, 1, vec![weighted.clone()]),
                GroupModFailedCode::InvalidGroup,
            );
        }
        sw.ok(&ind(vec![bucket(out(1))]));
        sw.ok(&gm(
            GroupModCommand::Add,
            GroupType::Select,
            2,
            vec![
                weighted.clone(),
                Bucket {
                    weight: 0,
                    ..bucket(out(2))
                },
            ],
        ));

        let ff = |id, buckets| gm(GroupModCommand::Add, GroupType::FastFailover, id, buckets);
        sw.refuse(&ff(3, vec![bucket(out(1))]), GroupModFailedCode::BadWatch);
        let watch_port = |p| Bucket {
            watch_port: p,
            ..bucket(out(1))
        };
        let watch_group = |g| Bucket {
            watch_group: g,
            ..bucket(out(1))
        };
        sw.refuse(&ff(3, vec![watch_port(0)]), GroupModFailedCode::BadWatch);
        sw.refuse(
            &ff(3, vec![watch_port(port_no::CONTROLLER)]),
            GroupModFailedCode::BadWatch,
        );
        sw.refuse(&ff(3, vec![watch_group(9)]), GroupModFailedCode::BadWatch);
        sw.refuse(&ff(3, vec![watch_group(3)]), GroupModFailedCode::BadWatch);
        sw.refuse(
            &ff(
                3,
                vec![Bucket {
                    weight: 2,
                    ..watch_port(1)
                }],
            ),
            GroupModFailedCode::InvalidGroup,
        );
        sw.ok(&ff(3, vec![watch_port(1), watch_group(2)]));
        // Only fast-failover groups watch.
        for t in [GroupType::All, GroupType::Select, GroupType::Indirect] {
            for b in [watch_port(1), watch_group(2), watch_port(0)] {
                sw.refuse(
                    &gm(GroupModCommand::Add, t, 4, vec![b]),
                    GroupModFailedCode::WatchUnsupported,
                );
            }
        }
    }

    #[test]
    fn bucket_actions_are_validated() {
        let mut sw = Sw::new(GroupsConfig::default());
        let ba = OfpError::BadAction;
        sw.refuse_with(&add(1, vec![bucket(out(0))]), ba(BadActionCode::BadOutPort));
        sw.refuse_with(
            &add(1, vec![bucket(to_group(2))]),
            ba(BadActionCode::BadOutGroup),
        );
        sw.refuse_with(
            &add(
                1,
                vec![bucket(vec![Action::Experimenter {
                    experimenter: 9,
                    data: vec![],
                }])],
            ),
            ba(BadActionCode::BadExperimenter),
        );
        let set = |field, value| Action::SetField {
            field: Oxm::Basic {
                field,
                value,
                mask: None,
            },
        };
        sw.refuse_with(
            &add(
                1,
                vec![bucket(vec![set(OxmField::InPort, OxmValue::U32(1))])],
            ),
            ba(BadActionCode::BadSetType),
        );
        // No match in a bucket: prerequisites are the flow's business.
        sw.ok(&add(
            1,
            vec![bucket(vec![set(
                OxmField::Ipv4Src,
                OxmValue::Ipv4(std::net::Ipv4Addr::LOCALHOST),
            )])],
        ));
    }

    #[test]
    fn chaining_is_allowed_but_loops_are_not() {
        let mut sw = Sw::new(GroupsConfig::default());
        sw.ok(&add(1, vec![bucket(out(1))]));
        sw.ok(&add(2, vec![bucket(to_group(1))]));
        sw.ok(&add(3, vec![bucket(to_group(2)), bucket(to_group(1))]));
        sw.refuse(&add(4, vec![bucket(to_group(4))]), GroupModFailedCode::Loop);
        let modify = |id, buckets| gm(GroupModCommand::Modify, GroupType::All, id, buckets);
        sw.refuse(
            &modify(1, vec![bucket(to_group(1))]),
            GroupModFailedCode::Loop,
        );
        sw.refuse(
            &modify(1, vec![bucket(to_group(3))]),
            GroupModFailedCode::Loop,
        );
        sw.refuse(
            &modify(2, vec![bucket(out(1)), bucket(to_group(3))]),
            GroupModFailedCode::Loop,
        );
        // Re-pointing without a cycle is fine.
        sw.ok(&modify(2, vec![bucket(out(5))]));
        sw.ok(&modify(1, vec![bucket(to_group(2))]));
    }

    #[test]
    fn delete_refuses_chained_groups_and_removes_flows() {
        let mut sw = Sw::new(GroupsConfig::default());
        sw.ok(&add(1, vec![bucket(out(1))]));
        sw.ok(&add(2, vec![bucket(to_group(1))]));
        sw.flow_to_group(0, 1, 1, ofp::flow_mod::flow_mod_flags::SEND_FLOW_REM);
        sw.flow_to_group(1, 1, 1, 0);
        sw.flow_to_group(1, 2, 2, ofp::flow_mod::flow_mod_flags::SEND_FLOW_REM);
        let stats = sw.groups.stats(
            group_no::ALL,
            |g| sw.tables.group_ref_count(g),
            Time::from_secs(12),
        );
        assert_eq!(stats.len(), 2);
        assert_eq!(
            (stats[0].group_id, stats[0].ref_count),
            (1, 3),
            "2 flows + group 2"
        );
        assert_eq!((stats[1].group_id, stats[1].ref_count), (2, 1));
        assert_eq!(stats[0].duration_sec, 2);
        assert_eq!(stats[0].bucket_stats.len(), 1);
        assert_eq!(
            sw.groups
                .stats(2, |g| sw.tables.group_ref_count(g), Time(0))
                .len(),
            1
        );
        assert!(sw
            .groups
            .stats(7, |g| sw.tables.group_ref_count(g), Time(0))
            .is_empty());

        sw.refuse(&delete(1), GroupModFailedCode::ChainedGroup);
        let ev = sw.apply(&delete(2)).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].reason, ev[0].body.table_id),
            (crate::RemovalReason::GroupDelete, 1)
        );
        assert_eq!(sw.tables.len(), 2);
        let ev = sw.apply(&delete(1)).unwrap();
        assert_eq!(ev.len(), 1, "only the flow with SEND_FLOW_REM reports");
        assert!(sw.tables.is_empty());
        sw.tables.check_invariants();

        // ALL deletes chains too.
        sw.ok(&add(1, vec![bucket(out(1))]));
        sw.ok(&add(2, vec![bucket(to_group(1))]));
        sw.ok(&delete(group_no::ALL));
        assert!(sw.groups.is_empty());
    }

    #[test]
    fn limits_on_groups_and_buckets() {
        let mut sw = Sw::new(GroupsConfig {
            max_groups: 2,
            max_buckets: 2,
            policy: ActionPolicy::default(),
        });
        sw.ok(&add(1, vec![bucket(out(1)), bucket(out(2))]));
        sw.refuse(
            &add(2, vec![bucket(out(1)), bucket(out(2)), bucket(out(3))]),
            GroupModFailedCode::OutOfBuckets,
        );
        sw.refuse(
            &gm(
                GroupModCommand::Modify,
                GroupType::All,
                1,
                vec![bucket(out(1)), bucket(out(2)), bucket(out(3))],
            ),
            GroupModFailedCode::OutOfBuckets,
        );
        sw.ok(&add(2, vec![]));
        sw.refuse(&add(3, vec![]), GroupModFailedCode::OutOfGroups);
        // Modify never needs a new slot.
        sw.ok(&gm(
            GroupModCommand::Modify,
            GroupType::All,
            2,
            vec![bucket(out(4))],
        ));
        let f = sw.groups.features();
        assert_eq!(f.max_groups, [2; 4]);
    }

    #[test]
    fn features_tell_what_is_supported() {
        let f = Groups::default().features();
        assert_eq!(f.types, 0b1111);
        assert_eq!(
            f.capabilities,
            OFPGFC_SELECT_WEIGHT | OFPGFC_CHAINING | OFPGFC_CHAINING_CHECKS
        );
        assert_eq!(f.capabilities & OFPGFC_SELECT_LIVENESS, 0);
        // Output (0) and group (22) supported, experimenter not.
        assert_ne!(f.actions[0] & 1, 0);
        assert_ne!(f.actions[1] & (1 << 22), 0);
        assert_eq!(f.actions[0] & (1 << 1), 0, "1 is not an action type");
    }

    fn arb_group_mod() -> impl proptest::strategy::Strategy<Value = GroupMod> {
        use proptest::prelude::*;
        let action = prop_oneof![
            (0u32..4).prop_map(|p| Action::Output {
                port: p,
                max_len: 0
            }),
            (0u32..5).prop_map(|g| Action::Group { group_id: g }),
        ];
        let bucket = (
            0u16..2,
            prop_oneof![3 => Just(port_no::ANY), 1 => 0u32..3],
            prop_oneof![3 => Just(group_no::ANY), 1 => 0u32..5],
            proptest::collection::vec(action, 0..3),
        )
            .prop_map(|(weight, watch_port, watch_group, actions)| Bucket {
                weight,
                watch_port,
                watch_group,
                actions,
            });
        let command = prop_oneof![
            3 => Just(GroupModCommand::Add),
            1 => Just(GroupModCommand::Modify),
            2 => Just(GroupModCommand::Delete),
        ];
        let group_type = prop_oneof![
            Just(GroupType::All),
            Just(GroupType::Select),
            Just(GroupType::Indirect),
            Just(GroupType::FastFailover),
        ];
        let id = prop_oneof![8 => 0u32..5, 1 => Just(group_no::ALL)];
        let buckets = proptest::collection::vec(bucket, 0..3);
        (command, group_type, id, buckets).prop_map(|(command, group_type, group_id, buckets)| {
            GroupMod {
                command,
                group_type,
                group_id,
                buckets,
            }
        })
    }

    proptest::proptest! {
        /// Any sequence of group-mods (with flows forwarding to groups in
        /// between): a refused one changes nothing; every group action in
        /// a bucket or a flow names a group that exists; following group
        /// actions never comes back to where it started.
        #[test]
        fn random_group_mods_keep_the_graph_sound(
            mods in proptest::collection::vec(arb_group_mod(), 1..30)
        ) {
            let mut sw = Sw::new(GroupsConfig { max_groups: 4, max_buckets: 2, policy: ActionPolicy::default() });
            for (i, m) in mods.iter().enumerate() {
                let before = sw.groups.clone();
                let flows = sw.tables.snapshot();
                if sw.apply(m).is_err() {
                    proptest::prop_assert_eq!(&sw.groups, &before);
                    proptest::prop_assert_eq!(sw.tables.snapshot(), flows);
                }
                if let Some(g) = sw.groups.groups.keys().next().copied() {
                    sw.flow_to_group(0, i as u32 + 1, g, 0);
                }
                sw.tables.check_invariants();
                for g in sw.groups.groups.values() {
                    for t in g.forwards_to() {
                        proptest::prop_assert!(sw.groups.contains(t), "dangling {t}");
                    }
                    proptest::prop_assert!(!sw.groups.reaches(g.forwards_to().collect(), g.group_id));
                }
                for t in 0..2u8 {
                    for e in sw.tables.table(t).unwrap().entries() {
                        for g in e.groups() {
                            proptest::prop_assert!(sw.groups.contains(g), "flow to deleted {g}");
                        }
                    }
                }
            }
        }
    }
}
