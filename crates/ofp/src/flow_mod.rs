//! `OFPT_FLOW_MOD` (spec 1.3.5 §7.3.4.2).

use crate::instruction::Instruction;
use crate::oxm::Match;
use serde::Serialize;

/// `OFPFC_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum FlowModCommand {
    Add = 0,
    Modify = 1,
    ModifyStrict = 2,
    Delete = 3,
    DeleteStrict = 4,
}

/// `OFPFF_*` bits of `FlowMod::flags`.
pub mod flow_mod_flags {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const RESET_COUNTS: u16 = 1 << 2;
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
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
