//! `OFPT_GROUP_MOD` (spec 1.3.5 §7.3.4.3).

use crate::action::Action;
use serde::Serialize;

/// `OFPGC_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u16)]
pub enum GroupModCommand {
    Add = 0,
    Modify = 1,
    Delete = 2,
}

/// `OFPGT_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum GroupType {
    All = 0,
    Select = 1,
    Indirect = 2,
    FastFailover = 3,
}

/// `ofp_bucket`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

impl Default for Bucket {
    /// Weight 0, nothing watched (`OFPP_ANY`, `OFPG_ANY`), no actions.
    fn default() -> Self {
        Bucket {
            weight: 0,
            watch_port: crate::consts::port_no::ANY,
            watch_group: crate::consts::group_no::ANY,
            actions: Vec::new(),
        }
    }
}

/// A group table modification.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct GroupMod {
    pub command: GroupModCommand,
    pub group_type: GroupType,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}
