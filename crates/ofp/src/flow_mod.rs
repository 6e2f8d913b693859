//! `OFPT_FLOW_MOD` (spec 1.3.5 §7.3.4.2).

use crate::error::{DecodeError, FlowModFailedCode, OfpError};
use crate::instruction::Instruction;
use crate::oxm::Match;
use crate::wire::{wire_enum, wire_numbers, FieldList, Reader, Writer};
use serde::Serialize;

wire_enum! {
    /// `OFPFC_*`.
    #[serde(rename_all = "snake_case")]
    pub enum FlowModCommand: u8, from_u8 {
        Add = 0, Modify = 1, ModifyStrict = 2, Delete = 3, DeleteStrict = 4,
    }
    unknown: OfpError::FlowModFailed(FlowModFailedCode::BadCommand), "flow-mod command";
}

wire_numbers! {
    /// `OFPFF_*` bits of `FlowMod::flags`.
    pub mod flow_mod_flags: u16 {
        SEND_FLOW_REM = 1 << 0, CHECK_OVERLAP = 1 << 1, RESET_COUNTS = 1 << 2,
        NO_PKT_COUNTS = 1 << 3, NO_BYT_COUNTS = 1 << 4,
    }
}

/// A flow table modification.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: FlowModCommand,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    #[serde(rename = "match")]
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

impl Default for FlowMod {
    /// An ADD to table 0 at the default priority (0x8000), matching
    /// everything, no instructions, no buffer, wildcard out port/group.
    fn default() -> Self {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: FlowModCommand::Add,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 0x8000,
            buffer_id: crate::consts::OFP_NO_BUFFER,
            out_port: crate::consts::port_no::ANY,
            out_group: crate::consts::group_no::ANY,
            flags: 0,
            match_: Match::default(),
            instructions: Vec::new(),
        }
    }
}

impl FlowMod {
    /// Fixed part of the body before the match (the message is at least
    /// 8 + 40 + 8 = 56 bytes).
    pub const FIXED_LEN: usize = 40;

    /// Decodes the body (everything after the header). An unknown command
    /// is `FLOW_MOD_FAILED/BAD_COMMAND`; match and instruction errors
    /// propagate.
    pub fn decode(r: &mut Reader) -> Result<FlowMod, DecodeError> {
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let table_id = r.u8()?;
        let command_at = r.offset();
        let command_raw = r.u8()?;
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let priority = r.u16()?;
        let buffer_id = r.u32()?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        let flags = r.u16()?;
        r.skip(2)?;
        let command = FlowModCommand::decoded(command_raw, command_at)?;
        let match_ = Match::decode(r)?;
        let instructions = Instruction::decode_list(r)?;
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            match_,
            instructions,
        })
    }

    /// Encodes the body (everything after the header).
    pub fn encode(&self, w: &mut Vec<u8>) {
        w.put_u64(self.cookie);
        w.put_u64(self.cookie_mask);
        w.put_u8(self.table_id);
        w.put_u8(self.command as u8);
        w.put_u16(self.idle_timeout);
        w.put_u16(self.hard_timeout);
        w.put_u16(self.priority);
        w.put_u32(self.buffer_id);
        w.put_u32(self.out_port);
        w.put_u32(self.out_group);
        w.put_u16(self.flags);
        w.put_zeros(2);
        self.match_.encode(w);
        Instruction::encode_list(&self.instructions, w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BadRequestCode;
    use crate::wire::reencodes;

    fn body(command: u8) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0x1122u64.to_be_bytes()); // cookie
        b.extend(u64::MAX.to_be_bytes()); // cookie_mask
        b.extend([3, command, 0, 10, 0, 20, 0x80, 0]); // table, cmd, idle, hard, prio
        b.extend([0xff; 12]); // buffer_id, out_port, out_group
        b.extend([0, 1, 0, 0]); // flags, pad
        b.extend([0, 1, 0, 4, 0, 0, 0, 0]); // empty match
        b
    }

    #[test]
    fn layout_and_round_trip() {
        let b = body(4);
        let f = reencodes(&b, FlowMod::decode, FlowMod::encode);
        assert_eq!(f.cookie, 0x1122);
        assert_eq!(f.cookie_mask, u64::MAX);
        assert_eq!(f.table_id, 3);
        assert_eq!(f.command, FlowModCommand::DeleteStrict);
        assert_eq!(
            (f.idle_timeout, f.hard_timeout, f.priority),
            (10, 20, 0x8000)
        );
        assert_eq!(f.flags, flow_mod_flags::SEND_FLOW_REM);
        assert!(f.instructions.is_empty());
    }

    #[test]
    fn unknown_command_is_bad_command() {
        let e = FlowMod::decode(&mut Reader::new(&body(5))).unwrap_err();
        assert_eq!(
            e.error,
            OfpError::FlowModFailed(FlowModFailedCode::BadCommand)
        );
        assert_eq!(e.offset, 17);
    }

    #[test]
    fn short_fixed_part_is_bad_len() {
        let b = body(0);
        let e = FlowMod::decode(&mut Reader::new(&b[..39])).unwrap_err();
        assert_eq!(e.error, OfpError::BadRequest(BadRequestCode::BadLen));
    }
}
