//! `ofp_table_features` and its properties (spec 1.3.5 §7.3.5.5), the
//! body of TABLE_FEATURES requests and replies.
//!
//! A table-features record is a 64-byte fixed part followed by a list of
//! TLV properties. Each property has `type: u16, length: u16`; `length`
//! counts the header and payload but not the zero padding that brings the
//! property to a multiple of 8 bytes. Every property type the spec defines
//! is typed here; any other type is kept as opaque bytes in
//! [`TableFeatureProp::Unknown`] so it round-trips. Length problems inside
//! the property list are `TABLE_FEATURES_FAILED/BAD_LEN`.

use crate::error::{DecodeError, OfpError, TableFeaturesFailedCode};
use crate::multipart::{decode_fixed_str, encode_fixed_str};
use crate::oxm::OXM_CLASS_EXPERIMENTER;
use crate::stats::{decode_all, len_placeholder, patch_len, record};
use crate::wire::{round_up_8, Reader, Writer};
use serde::Serialize;

/// `OFP_MAX_TABLE_NAME_LEN`.
pub const MAX_TABLE_NAME_LEN: usize = 32;

/// `OFPTFPT_*` property type numbers.
pub mod prop_type {
    pub const INSTRUCTIONS: u16 = 0;
    pub const INSTRUCTIONS_MISS: u16 = 1;
    pub const NEXT_TABLES: u16 = 2;
    pub const NEXT_TABLES_MISS: u16 = 3;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const WRITE_ACTIONS_MISS: u16 = 5;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const APPLY_ACTIONS_MISS: u16 = 7;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const WRITE_SETFIELD_MISS: u16 = 13;
    pub const APPLY_SETFIELD: u16 = 14;
    pub const APPLY_SETFIELD_MISS: u16 = 15;
    pub const EXPERIMENTER: u16 = 0xfffe;
    pub const EXPERIMENTER_MISS: u16 = 0xffff;
}

/// One table's features.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct TableFeatures {
    pub table_id: u8,
    /// At most 32 bytes; NUL-padded on the wire (bytes that are not UTF-8
    /// are replaced on decode).
    pub name: String,
    /// Bits of metadata the table can match.
    pub metadata_match: u64,
    /// Bits of metadata the table can write.
    pub metadata_write: u64,
    /// `OFPTC_*` bits.
    pub config: u32,
    /// Maximum number of entries supported.
    pub max_entries: u32,
    pub properties: Vec<TableFeatureProp>,
}

/// An instruction id in an INSTRUCTIONS(_MISS) property: the instruction
/// header (`type`, `len`) and, for experimenter instructions, the bytes
/// after it (the experimenter id and anything else).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct InstructionId {
    /// `OFPIT_*`.
    #[serde(rename = "type")]
    pub instruction_type: u16,
    /// Bytes after the 4-byte header; `len` on the wire is `4 + data.len()`.
    #[serde(serialize_with = "crate::serde_hex")]
    pub data: Vec<u8>,
}

/// An action id in a WRITE/APPLY_ACTIONS(_MISS) property: the action
/// header and, for experimenter actions, the bytes after it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ActionId {
    /// `OFPAT_*`.
    #[serde(rename = "type")]
    pub action_type: u16,
    /// Bytes after the 4-byte header; `len` on the wire is `4 + data.len()`.
    #[serde(serialize_with = "crate::serde_hex")]
    pub data: Vec<u8>,
}

/// An OXM id: an OXM header without a value. Experimenter-class ids
/// (class `0xffff`) are 8 bytes on the wire: the header then the
/// experimenter id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct OxmId {
    pub class: u16,
    /// 7-bit field number.
    pub field: u8,
    pub hasmask: bool,
    /// The payload length the header announces.
    pub length: u8,
    /// Present exactly when `class` is `OFPXMC_EXPERIMENTER`; encoded as 0
    /// if missing there, ignored for other classes.
    pub experimenter: Option<u32>,
}

impl OxmId {
    /// The 32-bit OXM header.
    pub fn header(&self) -> u32 {
        (u32::from(self.class) << 16)
            | (u32::from(self.field & 0x7f) << 9)
            | (u32::from(self.hasmask) << 8)
            | u32::from(self.length)
    }

    /// The id for a 32-bit header (no experimenter id).
    pub fn from_header(h: u32) -> Self {
        OxmId {
            class: (h >> 16) as u16,
            field: ((h >> 9) & 0x7f) as u8,
            hasmask: h & 0x100 != 0,
            length: (h & 0xff) as u8,
            experimenter: None,
        }
    }
}

/// One table-features property.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TableFeatureProp {
    Instructions {
        instruction_ids: Vec<InstructionId>,
    },
    InstructionsMiss {
        instruction_ids: Vec<InstructionId>,
    },
    NextTables {
        table_ids: Vec<u8>,
    },
    NextTablesMiss {
        table_ids: Vec<u8>,
    },
    WriteActions {
        action_ids: Vec<ActionId>,
    },
    WriteActionsMiss {
        action_ids: Vec<ActionId>,
    },
    ApplyActions {
        action_ids: Vec<ActionId>,
    },
    ApplyActionsMiss {
        action_ids: Vec<ActionId>,
    },
    Match {
        oxm_ids: Vec<OxmId>,
    },
    Wildcards {
        oxm_ids: Vec<OxmId>,
    },
    WriteSetfield {
        oxm_ids: Vec<OxmId>,
    },
    WriteSetfieldMiss {
        oxm_ids: Vec<OxmId>,
    },
    ApplySetfield {
        oxm_ids: Vec<OxmId>,
    },
    ApplySetfieldMiss {
        oxm_ids: Vec<OxmId>,
    },
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        /// Everything after `exp_type`, without the padding.
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
    ExperimenterMiss {
        experimenter: u32,
        exp_type: u32,
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
    /// A property type the spec does not define, kept opaque.
    Unknown {
        prop_type: u16,
        /// The payload after the 4-byte header, without the padding.
        #[serde(serialize_with = "crate::serde_hex")]
        data: Vec<u8>,
    },
}

/// `TABLE_FEATURES_FAILED/BAD_LEN`.
const TF_BAD_LEN: OfpError = OfpError::TableFeaturesFailed(TableFeaturesFailedCode::BadLen);

fn tf_len(r: &Reader, reason: impl Into<String>) -> DecodeError {
    r.error(TF_BAD_LEN, reason)
}

/// Decodes `type, len, data[len-4]` ids (instruction and action ids).
fn decode_ids(r: &mut Reader) -> Result<Vec<(u16, Vec<u8>)>, DecodeError> {
    decode_all(r, |r| {
        let at = r.clone();
        let t = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(tf_len(&at, format!("id of type {t}: length {len} below 4")));
        }
        let data = r.bytes(len - 4)?.to_vec();
        Ok((t, data))
    })
}

fn encode_id(t: u16, data: &[u8], w: &mut Vec<u8>) {
    w.put_u16(t);
    w.put_u16((4 + data.len()) as u16);
    w.put_bytes(data);
}

fn decode_oxm_ids(r: &mut Reader) -> Result<Vec<OxmId>, DecodeError> {
    decode_all(r, |r| {
        let mut id = OxmId::from_header(r.u32()?);
        if id.class == OXM_CLASS_EXPERIMENTER {
            id.experimenter = Some(r.u32()?);
        }
        Ok(id)
    })
}

fn encode_oxm_ids(ids: &[OxmId], w: &mut Vec<u8>) {
    for id in ids {
        w.put_u32(id.header());
        if id.class == OXM_CLASS_EXPERIMENTER {
            w.put_u32(id.experimenter.unwrap_or(0));
        }
    }
}

impl TableFeatureProp {
    /// The `OFPTFPT_*` number of this property.
    pub fn prop_type(&self) -> u16 {
        use prop_type as t;
        match self {
            Self::Instructions { .. } => t::INSTRUCTIONS,
            Self::InstructionsMiss { .. } => t::INSTRUCTIONS_MISS,
            Self::NextTables { .. } => t::NEXT_TABLES,
            Self::NextTablesMiss { .. } => t::NEXT_TABLES_MISS,
            Self::WriteActions { .. } => t::WRITE_ACTIONS,
            Self::WriteActionsMiss { .. } => t::WRITE_ACTIONS_MISS,
            Self::ApplyActions { .. } => t::APPLY_ACTIONS,
            Self::ApplyActionsMiss { .. } => t::APPLY_ACTIONS_MISS,
            Self::Match { .. } => t::MATCH,
            Self::Wildcards { .. } => t::WILDCARDS,
            Self::WriteSetfield { .. } => t::WRITE_SETFIELD,
            Self::WriteSetfieldMiss { .. } => t::WRITE_SETFIELD_MISS,
            Self::ApplySetfield { .. } => t::APPLY_SETFIELD,
            Self::ApplySetfieldMiss { .. } => t::APPLY_SETFIELD_MISS,
            Self::Experimenter { .. } => t::EXPERIMENTER,
            Self::ExperimenterMiss { .. } => t::EXPERIMENTER_MISS,
            Self::Unknown { prop_type, .. } => *prop_type,
        }
    }

    /// Decodes one property and its padding.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Self::decode_inner(r).map_err(|e| e.length_error_as(TF_BAD_LEN))
    }

    fn decode_inner(r: &mut Reader) -> Result<Self, DecodeError> {
        use prop_type as t;
        let at = r.clone();
        let ptype = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 {
            return Err(tf_len(
                &at,
                format!("table feature property {ptype}: length {len} below 4"),
            ));
        }
        if len - 4 > r.remaining() {
            return Err(tf_len(
                &at,
                format!(
                    "table feature property {ptype}: length {len} runs past the {} bytes left",
                    at.remaining()
                ),
            ));
        }
        let mut p = r.sub(len - 4)?;
        r.skip(round_up_8(len) - len).map_err(|_| {
            tf_len(
                r,
                format!("table feature property {ptype}: padding to 8 bytes missing"),
            )
        })?;
        let ids = |p: &mut Reader| -> Result<Vec<InstructionId>, DecodeError> {
            Ok(decode_ids(p)?
                .into_iter()
                .map(|(instruction_type, data)| InstructionId {
                    instruction_type,
                    data,
                })
                .collect())
        };
        let aids = |p: &mut Reader| -> Result<Vec<ActionId>, DecodeError> {
            Ok(decode_ids(p)?
                .into_iter()
                .map(|(action_type, data)| ActionId { action_type, data })
                .collect())
        };
        let p = &mut p;
        Ok(match ptype {
            t::INSTRUCTIONS => Self::Instructions {
                instruction_ids: ids(p)?,
            },
            t::INSTRUCTIONS_MISS => Self::InstructionsMiss {
                instruction_ids: ids(p)?,
            },
            t::NEXT_TABLES => Self::NextTables {
                table_ids: p.rest().to_vec(),
            },
            t::NEXT_TABLES_MISS => Self::NextTablesMiss {
                table_ids: p.rest().to_vec(),
            },
            t::WRITE_ACTIONS => Self::WriteActions {
                action_ids: aids(p)?,
            },
            t::WRITE_ACTIONS_MISS => Self::WriteActionsMiss {
                action_ids: aids(p)?,
            },
            t::APPLY_ACTIONS => Self::ApplyActions {
                action_ids: aids(p)?,
            },
            t::APPLY_ACTIONS_MISS => Self::ApplyActionsMiss {
                action_ids: aids(p)?,
            },
            t::MATCH => Self::Match {
                oxm_ids: decode_oxm_ids(p)?,
            },
            t::WILDCARDS => Self::Wildcards {
                oxm_ids: decode_oxm_ids(p)?,
            },
            t::WRITE_SETFIELD => Self::WriteSetfield {
                oxm_ids: decode_oxm_ids(p)?,
            },
            t::WRITE_SETFIELD_MISS => Self::WriteSetfieldMiss {
                oxm_ids: decode_oxm_ids(p)?,
            },
            t::APPLY_SETFIELD => Self::ApplySetfield {
                oxm_ids: decode_oxm_ids(p)?,
            },
            t::APPLY_SETFIELD_MISS => Self::ApplySetfieldMiss {
                oxm_ids: decode_oxm_ids(p)?,
            },
            t::EXPERIMENTER => Self::Experimenter {
                experimenter: p.u32()?,
                exp_type: p.u32()?,
                data: p.rest().to_vec(),
            },
            t::EXPERIMENTER_MISS => Self::ExperimenterMiss {
                experimenter: p.u32()?,
                exp_type: p.u32()?,
                data: p.rest().to_vec(),
            },
            other => Self::Unknown {
                prop_type: other,
                data: p.rest().to_vec(),
            },
        })
    }

    /// Encodes the property and its zero padding.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        w.put_u16(self.prop_type());
        let at = len_placeholder(w);
        match self {
            Self::Instructions { instruction_ids } | Self::InstructionsMiss { instruction_ids } => {
                for id in instruction_ids {
                    encode_id(id.instruction_type, &id.data, w);
                }
            }
            Self::NextTables { table_ids } | Self::NextTablesMiss { table_ids } => {
                w.put_bytes(table_ids)
            }
            Self::WriteActions { action_ids }
            | Self::WriteActionsMiss { action_ids }
            | Self::ApplyActions { action_ids }
            | Self::ApplyActionsMiss { action_ids } => {
                for id in action_ids {
                    encode_id(id.action_type, &id.data, w);
                }
            }
            Self::Match { oxm_ids }
            | Self::Wildcards { oxm_ids }
            | Self::WriteSetfield { oxm_ids }
            | Self::WriteSetfieldMiss { oxm_ids }
            | Self::ApplySetfield { oxm_ids }
            | Self::ApplySetfieldMiss { oxm_ids } => encode_oxm_ids(oxm_ids, w),
            Self::Experimenter {
                experimenter,
                exp_type,
                data,
            }
            | Self::ExperimenterMiss {
                experimenter,
                exp_type,
                data,
            } => {
                w.put_u32(*experimenter);
                w.put_u32(*exp_type);
                w.put_bytes(data);
            }
            Self::Unknown { data, .. } => w.put_bytes(data),
        }
        patch_len(w, at, start);
        w.pad_to_8(start);
    }
}

impl TableFeatures {
    /// Bytes before the properties.
    pub const FIXED_LEN: usize = 64;

    /// Decodes one `ofp_table_features` record and its properties.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mut s = record(r, 0, Self::FIXED_LEN, "table features")?;
        s.skip(2)?;
        let table_id = s.u8()?;
        s.skip(5)?;
        let name = decode_fixed_str(&mut s, MAX_TABLE_NAME_LEN)?;
        let metadata_match = s.u64()?;
        let metadata_write = s.u64()?;
        let config = s.u32()?;
        let max_entries = s.u32()?;
        let properties = decode_all(&mut s, TableFeatureProp::decode)?;
        Ok(TableFeatures {
            table_id,
            name,
            metadata_match,
            metadata_write,
            config,
            max_entries,
            properties,
        })
    }

    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        let at = len_placeholder(w);
        w.put_u8(self.table_id);
        w.put_zeros(5);
        encode_fixed_str(&self.name, MAX_TABLE_NAME_LEN, w);
        w.put_u64(self.metadata_match);
        w.put_u64(self.metadata_write);
        w.put_u32(self.config);
        w.put_u32(self.max_entries);
        for p in &self.properties {
            p.encode(w);
        }
        patch_len(w, at, start);
    }
}
