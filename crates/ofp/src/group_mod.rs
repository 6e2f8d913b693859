//! `OFPT_GROUP_MOD` (spec 1.3.5 §7.3.4.3).

use crate::action::Action;
use crate::error::{DecodeError, GroupModFailedCode, OfpError};
use crate::wire::{wire_enum, wire_layout, Reader, Writer};
use serde::Serialize;

wire_enum! {
    /// `OFPGC_*`.
    #[serde(rename_all = "snake_case")]
    pub enum GroupModCommand: u16, from_u16 { Add = 0, Modify = 1, Delete = 2, }
    unknown: OfpError::GroupModFailed(GroupModFailedCode::BadCommand), "group-mod command";
}

wire_enum! {
    /// `OFPGT_*`.
    #[serde(rename_all = "snake_case")]
    pub enum GroupType: u8, from_u8 { All = 0, Select = 1, Indirect = 2, FastFailover = 3, }
    unknown: OfpError::GroupModFailed(GroupModFailedCode::BadType), "group type";
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

wire_layout! {
    Bucket: record(0, "bucket", 16) {
        len, weight, watch_port, watch_group, pad 4, actions,
    }
}

impl GroupMod {
    /// Fixed part of the body before the buckets (the message is at least
    /// 16 bytes).
    pub const FIXED_LEN: usize = 8;

    /// Decodes the body (everything after the header). Unknown commands are
    /// `GROUP_MOD_FAILED/BAD_COMMAND`, unknown types
    /// `GROUP_MOD_FAILED/BAD_TYPE`; action errors propagate.
    pub fn decode(r: &mut Reader) -> Result<GroupMod, DecodeError> {
        let command_at = r.offset();
        let command_raw = r.u16()?;
        let type_raw = r.u8()?;
        r.skip(1)?;
        let group_id = r.u32()?;
        let command = GroupModCommand::decoded(command_raw, command_at)?;
        let group_type = GroupType::decoded(type_raw, command_at + 2)?;
        let mut buckets = Vec::new();
        while !r.is_empty() {
            buckets.push(Bucket::decode(r)?);
        }
        Ok(GroupMod {
            command,
            group_type,
            group_id,
            buckets,
        })
    }

    /// Encodes the body (everything after the header).
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u16(self.command as u16);
        w.put_u8(self.group_type as u8);
        w.put_zeros(1);
        w.put_u32(self.group_id);
        for b in &self.buckets {
            b.encode(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BadRequestCode;
    use crate::wire::reencodes;

    fn body(command: u16, group_type: u8) -> Vec<u8> {
        let mut b = command.to_be_bytes().to_vec();
        b.extend([group_type, 0, 0, 0, 0, 7]);
        // two empty buckets
        b.extend([0, 16, 0, 5, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        b.extend([0, 16, 0, 6, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn layout_and_round_trip() {
        let b = body(1, 1);
        let g = reencodes(&b, GroupMod::decode, GroupMod::encode);
        assert_eq!(g.command, GroupModCommand::Modify);
        assert_eq!(g.group_type, GroupType::Select);
        assert_eq!(g.group_id, 7);
        assert_eq!(g.buckets.len(), 2);
        assert_eq!((g.buckets[1].weight, g.buckets[1].watch_port), (6, 2));
    }

    #[test]
    fn bad_command_type_and_bucket_len() {
        let e = GroupMod::decode(&mut Reader::new(&body(3, 0))).unwrap_err();
        assert_eq!(
            e.error,
            OfpError::GroupModFailed(GroupModFailedCode::BadCommand)
        );
        let e = GroupMod::decode(&mut Reader::new(&body(0, 4))).unwrap_err();
        assert_eq!(
            e.error,
            OfpError::GroupModFailed(GroupModFailedCode::BadType)
        );
        assert_eq!(e.offset, 2);
        let mut b = body(0, 0);
        b[9] = 8; // bucket length 8
        let e = GroupMod::decode(&mut Reader::new(&b)).unwrap_err();
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadLen));
        assert_eq!(e.offset, 8);
        let mut b = body(0, 0);
        b[25] = 24; // second bucket runs past the end
        let e = GroupMod::decode(&mut Reader::new(&b)).unwrap_err();
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadLen));
        let e = GroupMod::decode(&mut Reader::new(&b[..7])).unwrap_err();
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadLen));
    }
}
