//! Actions (spec 1.3.5 §7.2.5).

use crate::oxm::Oxm;
use serde::Serialize;

/// `OFPAT_*` action type numbers.
pub mod action_type {
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const PUSH_PBB: u16 = 26;
    pub const POP_PBB: u16 = 27;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const OFPCML_NO_BUFFER: u16 = 0xffff;
/// `OFPCML_MAX`: the largest `max_len` that asks for buffering.
pub const OFPCML_MAX: u16 = 0xffe5;

/// One action.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    Output {
        port: u32,
        max_len: u16,
    },
    CopyTtlOut,
    CopyTtlIn,
    SetMplsTtl {
        mpls_ttl: u8,
    },
    DecMplsTtl,
    PushVlan {
        ethertype: u16,
    },
    PopVlan,
    PushMpls {
        ethertype: u16,
    },
    PopMpls {
        ethertype: u16,
    },
    SetQueue {
        queue_id: u32,
    },
    Group {
        group_id: u32,
    },
    SetNwTtl {
        nw_ttl: u8,
    },
    DecNwTtl,
    /// The field is a single OXM TLV without a mask.
    SetField {
        field: Oxm,
    },
    PushPbb {
        ethertype: u16,
    },
    PopPbb,
    /// `OFPAT_EXPERIMENTER`: `data` is everything after the experimenter id,
    /// padding included, so the action round-trips.
    Experimenter {
        experimenter: u32,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

// Codec: the bodies are written by the action work (placeholders until then).
impl Action {
    /// Decodes one action.
    pub fn decode(_r: &mut crate::wire::Reader) -> Result<Action, crate::DecodeError> {
        unimplemented!("action codec")
    }
    /// Encodes one action.
    pub fn encode(&self, _w: &mut Vec<u8>) {
        unimplemented!("action codec")
    }
    /// Decodes actions until the reader is empty.
    pub fn decode_list(_r: &mut crate::wire::Reader) -> Result<Vec<Action>, crate::DecodeError> {
        unimplemented!("action codec")
    }
    /// Encodes a list of actions.
    pub fn encode_list(_actions: &[Action], _w: &mut Vec<u8>) {
        unimplemented!("action codec")
    }
}
