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
use crate::oxm::OXM_CLASS_EXPERIMENTER;
use crate::stats::{decode_all, len_placeholder, patch_len};
use crate::wire::{round_up_8, Reader, Writer};
use crate::wire::{wire_layout, wire_numbers};
use serde::Serialize;

/// `OFP_MAX_TABLE_NAME_LEN`.
pub const MAX_TABLE_NAME_LEN: usize = 32;

wire_numbers! {
    /// `OFPTFPT_*` property type numbers.
    pub mod prop_type: u16 {
        INSTRUCTIONS = 0, INSTRUCTIONS_MISS = 1, NEXT_TABLES = 2, NEXT_TABLES_MISS = 3,
        WRITE_ACTIONS = 4, WRITE_ACTIONS_MISS = 5, APPLY_ACTIONS = 6, APPLY_ACTIONS_MISS = 7,
        MATCH = 8, WILDCARDS = 10, WRITE_SETFIELD = 12, WRITE_SETFIELD_MISS = 13,
        APPLY_SETFIELD = 14, APPLY_SETFIELD_MISS = 15, EXPERIMENTER = 0xfffe,
        EXPERIMENTER_MISS = 0xffff,
    }
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

crate::wire::codec_field!(TableFeatureProp);

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

wire_layout! {
    TableFeatures: record(0, "table features", 64) {
        len, table_id, pad 5, name: str(MAX_TABLE_NAME_LEN), metadata_match, metadata_write, config,
        max_entries, properties,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multipart::tests::{mp_header, reply, request, request_round_trip, BAD_LEN};
    use crate::multipart::{multipart_type, MultipartRequestBody};

    /// Appends a property with payload `p`, padded to 8.
    fn prop(b: &mut Vec<u8>, t: u16, p: &[u8]) {
        let start = b.len();
        b.put_u16(t);
        b.put_u16((4 + p.len()) as u16);
        b.put_bytes(p);
        while !(b.len() - start).is_multiple_of(8) {
            b.push(0);
        }
    }

    /// A table-features record around the property bytes `props`.
    fn table(id: u8, name: &str, props: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_u16((64 + props.len()) as u16);
        b.put_u8(id);
        b.put_zeros(5);
        let mut n = name.as_bytes().to_vec();
        n.resize(32, 0);
        b.put_bytes(&n);
        b.put_u64(u64::MAX);
        b.put_u64(0xff00);
        b.put_u32(3);
        b.put_u32(1 << 20);
        b.put_bytes(props);
        b
    }

    fn be16(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_be_bytes()).collect()
    }
    fn be32(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    /// One property of every type the spec defines, plus an unknown one.
    fn every_property() -> (Vec<u8>, Vec<TableFeatureProp>) {
        use prop_type as t;
        let mut b = Vec::new();
        let mut want = Vec::new();
        // Instruction ids: goto-table (4 bytes), experimenter (8 bytes).
        let ids = [be16(&[1, 4]), be16(&[0xffff, 8]), be32(&[0x2320])].concat();
        let inst = vec![
            InstructionId {
                instruction_type: 1,
                data: vec![],
            },
            InstructionId {
                instruction_type: 0xffff,
                data: vec![0, 0, 0x23, 0x20],
            },
        ];
        prop(&mut b, t::INSTRUCTIONS, &ids);
        want.push(TableFeatureProp::Instructions {
            instruction_ids: inst.clone(),
        });
        prop(&mut b, t::INSTRUCTIONS_MISS, &ids);
        want.push(TableFeatureProp::InstructionsMiss {
            instruction_ids: inst,
        });
        prop(&mut b, t::NEXT_TABLES, &[1, 2, 3]);
        want.push(TableFeatureProp::NextTables {
            table_ids: vec![1, 2, 3],
        });
        prop(&mut b, t::NEXT_TABLES_MISS, &[]);
        want.push(TableFeatureProp::NextTablesMiss { table_ids: vec![] });
        let aids = [be16(&[0, 4, 25, 4]), be16(&[0xffff, 8]), be32(&[7])].concat();
        let acts = vec![
            ActionId {
                action_type: 0,
                data: vec![],
            },
            ActionId {
                action_type: 25,
                data: vec![],
            },
            ActionId {
                action_type: 0xffff,
                data: vec![0, 0, 0, 7],
            },
        ];
        for (ty, mk) in [
            (t::WRITE_ACTIONS, 0),
            (t::WRITE_ACTIONS_MISS, 1),
            (t::APPLY_ACTIONS, 2),
            (t::APPLY_ACTIONS_MISS, 3),
        ] {
            prop(&mut b, ty, &aids);
            let action_ids = acts.clone();
            want.push(match mk {
                0 => TableFeatureProp::WriteActions { action_ids },
                1 => TableFeatureProp::WriteActionsMiss { action_ids },
                2 => TableFeatureProp::ApplyActions { action_ids },
                _ => TableFeatureProp::ApplyActionsMiss { action_ids },
            });
        }
        // OXM ids: in_port (0x80000004), eth_dst with mask
        // (0x8000070c), and an experimenter id (class 0xffff, 8 bytes).
        let oxm = be32(&[0x8000_0004, 0x8000_070c, 0xffff_0204, 0x00aa_bbcc]);
        let ids = vec![
            OxmId {
                class: 0x8000,
                field: 0,
                hasmask: false,
                length: 4,
                experimenter: None,
            },
            OxmId {
                class: 0x8000,
                field: 3,
                hasmask: true,
                length: 12,
                experimenter: None,
            },
            OxmId {
                class: 0xffff,
                field: 1,
                hasmask: false,
                length: 4,
                experimenter: Some(0xaabbcc),
            },
        ];
        for (ty, mk) in [
            (t::MATCH, 0),
            (t::WILDCARDS, 1),
            (t::WRITE_SETFIELD, 2),
            (t::WRITE_SETFIELD_MISS, 3),
            (t::APPLY_SETFIELD, 4),
            (t::APPLY_SETFIELD_MISS, 5),
        ] {
            prop(&mut b, ty, &oxm);
            let oxm_ids = ids.clone();
            want.push(match mk {
                0 => TableFeatureProp::Match { oxm_ids },
                1 => TableFeatureProp::Wildcards { oxm_ids },
                2 => TableFeatureProp::WriteSetfield { oxm_ids },
                3 => TableFeatureProp::WriteSetfieldMiss { oxm_ids },
                4 => TableFeatureProp::ApplySetfield { oxm_ids },
                _ => TableFeatureProp::ApplySetfieldMiss { oxm_ids },
            });
        }
        prop(
            &mut b,
            t::EXPERIMENTER,
            &[be32(&[0x2320, 5]), vec![9]].concat(),
        );
        want.push(TableFeatureProp::Experimenter {
            experimenter: 0x2320,
            exp_type: 5,
            data: vec![9],
        });
        prop(&mut b, t::EXPERIMENTER_MISS, &be32(&[1, 2]));
        want.push(TableFeatureProp::ExperimenterMiss {
            experimenter: 1,
            exp_type: 2,
            data: vec![],
        });
        prop(&mut b, 0x20, &[0xde, 0xad]);
        want.push(TableFeatureProp::Unknown {
            prop_type: 0x20,
            data: vec![0xde, 0xad],
        });
        (b, want)
    }

    #[test]
    fn every_property_type_decodes_and_round_trips() {
        let (props, want) = every_property();
        let mut b = mp_header(multipart_type::TABLE_FEATURES, 0);
        b.extend(table(0, "classifier", &props));
        b.extend(table(1, "", &[]));
        let MultipartRequestBody::TableFeatures { tables } = request_round_trip(&b).body else {
            panic!()
        };
        assert_eq!(tables.len(), 2);
        let t0 = &tables[0];
        assert_eq!(t0.table_id, 0);
        assert_eq!(t0.name, "classifier");
        assert_eq!(t0.metadata_match, u64::MAX);
        assert_eq!(t0.metadata_write, 0xff00);
        assert_eq!(t0.config, 3);
        assert_eq!(t0.max_entries, 1 << 20);
        assert_eq!(t0.properties, want);
        assert!(tables[1].properties.is_empty());
        // Replies share the layout.
        let rep = reply(&b).unwrap();
        let mut out = Vec::new();
        rep.encode(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn empty_table_features_request_queries() {
        let b = mp_header(multipart_type::TABLE_FEATURES, 0);
        assert_eq!(
            request_round_trip(&b).body,
            MultipartRequestBody::TableFeatures { tables: vec![] }
        );
    }

    const TF_LEN: OfpError = OfpError::TableFeaturesFailed(TableFeaturesFailedCode::BadLen);

    fn request_with_props(props: &[u8]) -> Vec<u8> {
        let mut b = mp_header(multipart_type::TABLE_FEATURES, 0);
        b.extend(table(0, "t", props));
        b
    }

    #[test]
    fn property_length_problems_are_table_features_bad_len() {
        use prop_type as t;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            // Property length below its 4-byte header.
            ("len 2", [be16(&[t::NEXT_TABLES, 2]), vec![0; 4]].concat()),
            // Length past the record.
            ("len 20", [be16(&[t::NEXT_TABLES, 20]), vec![0; 4]].concat()),
            // Padding to 8 missing at the end of the record.
            ("no pad", [be16(&[t::NEXT_TABLES, 5]), vec![1]].concat()),
            // A 2-byte header fragment.
            ("fragment", be16(&[t::MATCH])),
            // An instruction id shorter than its header.
            (
                "inst id len 2",
                [be16(&[t::INSTRUCTIONS, 8, 1, 2])].concat(),
            ),
            // An action id running past the property.
            (
                "action id len 12",
                [be16(&[t::APPLY_ACTIONS, 8, 0, 12])].concat(),
            ),
            // OXM ids not a multiple of 4 bytes.
            (
                "oxm 6",
                [be16(&[t::MATCH, 10]), be32(&[0x8000_0004]), vec![0; 2 + 6]].concat(),
            ),
            // An experimenter OXM id missing its experimenter field.
            (
                "exp oxm",
                [be16(&[t::MATCH, 8]), be32(&[0xffff_0004])].concat(),
            ),
            // An experimenter property without exp_type.
            (
                "exp prop",
                [be16(&[t::EXPERIMENTER, 8]), be32(&[1])].concat(),
            ),
        ];
        for (what, props) in cases {
            let b = request_with_props(&props);
            let e = request(&b).unwrap_err();
            assert_eq!(e.error, TF_LEN, "{what}");
            assert!(e.offset >= 8 + 64, "{what}: offset {}", e.offset);
        }
    }

    #[test]
    fn record_length_problems_are_bad_request_bad_len() {
        let mut b = request_with_props(&[]);
        b[8..10].copy_from_slice(&63u16.to_be_bytes());
        assert_eq!(request(&b).unwrap_err().error, BAD_LEN);
        let mut b = request_with_props(&[]);
        b[8..10].copy_from_slice(&72u16.to_be_bytes());
        assert_eq!(request(&b).unwrap_err().error, BAD_LEN);
        let b = request_with_props(&[]);
        assert_eq!(request(&b[..b.len() - 1]).unwrap_err().error, BAD_LEN);
    }

    #[test]
    fn oxm_id_header_packs_fields() {
        let id = OxmId::from_header(0x8000_070c);
        assert_eq!(
            (id.class, id.field, id.hasmask, id.length),
            (0x8000, 3, true, 12)
        );
        assert_eq!(id.header(), 0x8000_070c);
    }

    #[test]
    fn json_names_properties_by_spec_name() {
        let p = TableFeatureProp::ApplySetfieldMiss { oxm_ids: vec![] };
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["type"], "apply_setfield_miss");
        let p = TableFeatureProp::Unknown {
            prop_type: 9,
            data: vec![1],
        };
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["type"], "unknown");
        assert_eq!(j["data"], "01");
    }
}
