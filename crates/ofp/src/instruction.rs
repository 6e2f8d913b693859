//! Instructions (spec 1.3.5 §7.2.4).

use crate::action::Action;
use serde::Serialize;

/// `OFPIT_*` instruction type numbers.
pub mod instruction_type {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Instruction {
    GotoTable {
        table_id: u8,
    },
    WriteMetadata {
        metadata: u64,
        metadata_mask: u64,
    },
    WriteActions {
        actions: Vec<Action>,
    },
    ApplyActions {
        actions: Vec<Action>,
    },
    ClearActions,
    Meter {
        meter_id: u32,
    },
    /// `OFPIT_EXPERIMENTER`: `data` is everything after the experimenter id.
    Experimenter {
        experimenter: u32,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

// Codec: the bodies are written by the instruction work (placeholders until then).
impl Instruction {
    /// Decodes one instruction.
    pub fn decode(_r: &mut crate::wire::Reader) -> Result<Instruction, crate::DecodeError> {
        unimplemented!("instruction codec")
    }
    /// Encodes one instruction.
    pub fn encode(&self, _w: &mut Vec<u8>) {
        unimplemented!("instruction codec")
    }
    /// Decodes instructions until the reader is empty.
    pub fn decode_list(
        _r: &mut crate::wire::Reader,
    ) -> Result<Vec<Instruction>, crate::DecodeError> {
        unimplemented!("instruction codec")
    }
    /// Encodes a list of instructions.
    pub fn encode_list(instructions: &[Instruction], _w: &mut Vec<u8>) {
        let _ = instructions;
        unimplemented!("instruction codec")
    }
}
