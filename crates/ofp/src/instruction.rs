//! Instructions (spec 1.3.5 §7.2.4): the [`Instruction`] type and its
//! byte-exact wire codec. Malformed instructions decode to
//! `BAD_INSTRUCTION/BAD_LEN` or `UNKNOWN_INST`; errors in the actions of
//! `write_actions`/`apply_actions` keep their `BAD_ACTION` codes.

use crate::action::Action;
use crate::error::{BadInstructionCode, DecodeError, OfpError};
use crate::wire::{round_up_8, wire_numbers, FieldList, Reader, Writer};
use serde::Serialize;

wire_numbers! {
    /// `OFPIT_*` instruction type numbers.
    pub mod instruction_type: u16 {
        GOTO_TABLE = 1, WRITE_METADATA = 2, WRITE_ACTIONS = 3, APPLY_ACTIONS = 4,
        CLEAR_ACTIONS = 5, METER = 6, EXPERIMENTER = 0xffff,
    }
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

/// The length error of an instruction (`BAD_INSTRUCTION/BAD_LEN`).
const INST_BAD_LEN: OfpError = OfpError::BadInstruction(BadInstructionCode::BadLen);

crate::wire::codec_field!(Instruction);

impl Instruction {
    /// The `OFPIT_*` type number.
    pub fn type_code(&self) -> u16 {
        use instruction_type as t;
        match self {
            Instruction::GotoTable { .. } => t::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => t::WRITE_METADATA,
            Instruction::WriteActions { .. } => t::WRITE_ACTIONS,
            Instruction::ApplyActions { .. } => t::APPLY_ACTIONS,
            Instruction::ClearActions => t::CLEAR_ACTIONS,
            Instruction::Meter { .. } => t::METER,
            Instruction::Experimenter { .. } => t::EXPERIMENTER,
        }
    }

    /// Bytes this instruction takes on the wire.
    pub fn wire_len(&self) -> usize {
        match self {
            Instruction::WriteMetadata { .. } => 24,
            Instruction::WriteActions { actions } | Instruction::ApplyActions { actions } => {
                8 + Action::list_wire_len(actions)
            }
            Instruction::Experimenter { data, .. } => round_up_8(8 + data.len()),
            _ => 8,
        }
    }

    /// Decodes one instruction.
    ///
    /// A declared length below 8, not a multiple of 8, past the end of the
    /// reader, or wrong for the type is `BAD_INSTRUCTION/BAD_LEN`; an unknown
    /// type is `BAD_INSTRUCTION/UNKNOWN_INST`. Errors in nested actions keep
    /// their `BAD_ACTION` codes.
    pub fn decode(r: &mut Reader) -> Result<Instruction, DecodeError> {
        use instruction_type as t;
        let start = r.offset();
        let typ = r.u16().map_err(|e| e.length_error_as(INST_BAD_LEN))?;
        let len = r.u16().map_err(|e| e.length_error_as(INST_BAD_LEN))? as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(DecodeError::new(
                INST_BAD_LEN,
                start,
                format!("instruction length {len} is not a positive multiple of 8"),
            ));
        }
        let mut b = r
            .sub(len - 4)
            .map_err(|e| e.length_error_as(INST_BAD_LEN))?;
        let want = match typ {
            t::GOTO_TABLE | t::CLEAR_ACTIONS | t::METER => Some(8),
            t::WRITE_METADATA => Some(24),
            t::WRITE_ACTIONS | t::APPLY_ACTIONS | t::EXPERIMENTER => None,
            _ => {
                return Err(DecodeError::new(
                    OfpError::BadInstruction(BadInstructionCode::UnknownInst),
                    start,
                    format!("unknown instruction type {typ}"),
                ))
            }
        };
        if let Some(want) = want {
            if len != want {
                return Err(DecodeError::new(
                    INST_BAD_LEN,
                    start,
                    format!("instruction type {typ} has length {len}, expected {want}"),
                ));
            }
        }
        // Every fixed-size read below fits: the length was checked above.
        let fixed = |e: DecodeError| e.length_error_as(INST_BAD_LEN);
        let inst = match typ {
            t::GOTO_TABLE => Instruction::GotoTable {
                table_id: b.u8().map_err(fixed)?,
            },
            t::WRITE_METADATA => {
                b.skip(4).map_err(fixed)?;
                Instruction::WriteMetadata {
                    metadata: b.u64().map_err(fixed)?,
                    metadata_mask: b.u64().map_err(fixed)?,
                }
            }
            t::WRITE_ACTIONS | t::APPLY_ACTIONS => {
                b.skip(4).map_err(fixed)?;
                // Nested action errors already carry BAD_ACTION codes.
                let actions = Action::decode_list(&mut b)?;
                if typ == t::WRITE_ACTIONS {
                    Instruction::WriteActions { actions }
                } else {
                    Instruction::ApplyActions { actions }
                }
            }
            t::CLEAR_ACTIONS => Instruction::ClearActions,
            t::METER => Instruction::Meter {
                meter_id: b.u32().map_err(fixed)?,
            },
            _ => Instruction::Experimenter {
                experimenter: b.u32().map_err(fixed)?,
                data: b.rest().to_vec(),
            },
        };
        Ok(inst)
    }

    /// Encodes one instruction (padding as zeros; experimenter data that is
    /// not a multiple of 8 bytes long is padded).
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        w.put_u16(self.type_code());
        w.put_u16(0);
        match self {
            Instruction::GotoTable { table_id } => {
                w.put_u8(*table_id);
                w.put_zeros(3);
            }
            Instruction::WriteMetadata {
                metadata,
                metadata_mask,
            } => {
                w.put_zeros(4);
                w.put_u64(*metadata);
                w.put_u64(*metadata_mask);
            }
            Instruction::WriteActions { actions } | Instruction::ApplyActions { actions } => {
                w.put_zeros(4);
                Action::encode_list(actions, w);
            }
            Instruction::ClearActions => w.put_zeros(4),
            Instruction::Meter { meter_id } => w.put_u32(*meter_id),
            Instruction::Experimenter { experimenter, data } => {
                w.put_u32(*experimenter);
                w.put_bytes(data);
            }
        }
        w.pad_to_8(start);
        let len = w.len() - start;
        w.patch_u16(start + 2, u16::try_from(len).unwrap_or(u16::MAX));
    }

    /// Bytes a list of instructions takes on the wire.
    pub fn list_wire_len(instructions: &[Instruction]) -> usize {
        instructions.iter().map(Instruction::wire_len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BadActionCode;
    use crate::oxm::{Match, Oxm, OxmField, OxmValue};

    fn decode(bytes: &[u8]) -> Result<Instruction, DecodeError> {
        let mut r = Reader::new(bytes);
        let i = Instruction::decode(&mut r)?;
        assert!(r.is_empty(), "decode left {} bytes", r.remaining());
        Ok(i)
    }

    fn err(bytes: &[u8]) -> OfpError {
        Instruction::decode(&mut Reader::new(bytes))
            .unwrap_err()
            .error
    }

    /// Hand-built wire forms (spec 1.3.5 §7.2.4 layouts) and their values.
    #[rustfmt::skip]
    fn vectors() -> Vec<(Vec<u8>, Instruction)> {
        vec![
            (vec![0, 1, 0, 8, 3, 0, 0, 0], Instruction::GotoTable { table_id: 3 }),
            (vec![0, 2, 0, 24, 0, 0, 0, 0,
                  1, 2, 3, 4, 5, 6, 7, 8,
                  0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff],
             Instruction::WriteMetadata {
                 metadata: 0x0102_0304_0506_0708,
                 metadata_mask: 0xffff_0000_0000_ffff,
             }),
            (vec![0, 3, 0, 24, 0, 0, 0, 0,
                  0, 0, 0, 16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0],
             Instruction::WriteActions { actions: vec![Action::Output { port: 2, max_len: 0 }] }),
            (vec![0, 4, 0, 8, 0, 0, 0, 0], Instruction::ApplyActions { actions: vec![] }),
            (vec![0, 4, 0, 32, 0, 0, 0, 0,
                  0, 18, 0, 8, 0, 0, 0, 0,
                  0, 25, 0, 16, 0x80, 0, 0x0a, 2, 0x86, 0xdd, 0, 0, 0, 0, 0, 0],
             Instruction::ApplyActions {
                 actions: vec![
                     Action::PopVlan,
                     Action::SetField { field: Oxm::basic(OxmField::EthType, OxmValue::U16(0x86dd)) },
                 ],
             }),
            (vec![0, 5, 0, 8, 0, 0, 0, 0], Instruction::ClearActions),
            (vec![0, 6, 0, 8, 0, 0, 0, 9], Instruction::Meter { meter_id: 9 }),
            (vec![0xff, 0xff, 0, 16, 0, 0, 0x23, 0x20, 1, 2, 3, 4, 5, 6, 7, 8],
             Instruction::Experimenter { experimenter: 0x2320, data: vec![1, 2, 3, 4, 5, 6, 7, 8] }),
            (vec![0xff, 0xff, 0, 8, 0, 0, 0, 1],
             Instruction::Experimenter { experimenter: 1, data: vec![] }),
        ]
    }

    #[test]
    fn every_instruction_type_decodes_and_encodes_exactly() {
        for (bytes, inst) in vectors() {
            assert_eq!(decode(&bytes).unwrap(), inst, "{bytes:?}");
            let mut w = Vec::new();
            inst.encode(&mut w);
            assert_eq!(w, bytes, "{inst:?}");
            assert_eq!(inst.wire_len(), bytes.len());
        }
    }

    #[test]
    fn every_truncation_is_a_length_error() {
        for (bytes, _) in vectors() {
            for n in 0..bytes.len() {
                let e = Instruction::decode(&mut Reader::new(&bytes[..n])).unwrap_err();
                assert_eq!(e.error, INST_BAD_LEN, "{bytes:?} cut to {n}");
            }
        }
    }

    #[test]
    fn list_consumes_everything_in_order() {
        let mut all = Vec::new();
        let mut want = Vec::new();
        for (bytes, inst) in vectors() {
            all.extend_from_slice(&bytes);
            want.push(inst);
        }
        assert_eq!(
            Instruction::decode_list(&mut Reader::new(&all)).unwrap(),
            want
        );
        let mut w = Vec::new();
        Instruction::encode_list(&want, &mut w);
        assert_eq!(w, all);
        assert_eq!(Instruction::list_wire_len(&want), all.len());
        all.push(0);
        assert_eq!(
            Instruction::decode_list(&mut Reader::new(&all))
                .unwrap_err()
                .error,
            INST_BAD_LEN
        );
    }

    #[test]
    fn bad_lengths_are_bad_instruction_bad_len() {
        assert_eq!(err(&[0, 1, 0]), INST_BAD_LEN);
        assert_eq!(err(&[0, 1, 0, 4, 0, 0, 0, 0]), INST_BAD_LEN);
        assert_eq!(err(&[0, 1, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0]), INST_BAD_LEN);
        assert_eq!(err(&[0, 5, 0, 16, 0, 0, 0, 0]), INST_BAD_LEN);
        assert_eq!(
            err(&[0, 1, 0, 16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            INST_BAD_LEN
        );
        assert_eq!(
            err(&[0, 6, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            INST_BAD_LEN
        );
        assert_eq!(err(&[0, 2, 0, 8, 0, 0, 0, 0]), INST_BAD_LEN);
        let mut wm = vec![0, 2, 0, 32];
        wm.resize(32, 0);
        assert_eq!(err(&wm), INST_BAD_LEN);
    }

    #[test]
    fn unknown_type_is_unknown_inst() {
        for typ in [0u16, 7, 0x100, 0xfffe] {
            let [hi, lo] = typ.to_be_bytes();
            assert_eq!(
                err(&[hi, lo, 0, 8, 0, 0, 0, 0]),
                OfpError::BadInstruction(BadInstructionCode::UnknownInst),
                "type {typ}"
            );
        }
    }

    #[test]
    fn nested_action_errors_keep_bad_action_codes() {
        // apply_actions holding an output action that claims 16 bytes but
        // only 8 are inside the instruction.
        assert_eq!(
            err(&[0, 4, 0, 16, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 1]),
            OfpError::BadAction(BadActionCode::BadLen)
        );
        // write_actions holding an action that declares 4 bytes.
        assert_eq!(
            err(&[0, 3, 0, 16, 0, 0, 0, 0, 0, 11, 0, 4, 0, 0, 0, 0]),
            OfpError::BadAction(BadActionCode::BadLen)
        );
        // Offsets are counted from the start of the outermost buffer.
        let mut b = vec![0xaa; 8];
        b.extend_from_slice(&[0, 4, 0, 16, 0, 0, 0, 0, 0, 99, 0, 8, 0, 0, 0, 0]);
        let mut r = Reader::new(&b);
        r.skip(8).unwrap();
        assert_eq!(Instruction::decode(&mut r).unwrap_err().offset, 16);
        // Unknown action type inside.
        assert_eq!(
            err(&[0, 4, 0, 16, 0, 0, 0, 0, 0, 99, 0, 8, 0, 0, 0, 0]),
            OfpError::BadAction(BadActionCode::BadType)
        );
    }

    /// The flow_mods from os-ken's test vectors: decode their match and
    /// instructions, compare with os-ken's JSON decode of the same bytes,
    /// and re-encode to the same bytes.
    #[test]
    fn os_ken_flow_mods() {
        let dir = "/tmp/osk/os_ken/tests";
        let mut checked = 0;
        for name in [
            "4-2-ofp_flow_mod",
            "4-3-ofp_flow_mod",
            "4-46-ofp_flow_mod",
            "4-60-ofp_flow_mod",
            "libofproto-OFP13-flow_mod",
            "libofproto-OFP13-flow_mod_conjunction",
            "libofproto-OFP13-flow_mod_match_conj",
        ] {
            let packet = format!("{dir}/packet_data/of13/{name}.packet");
            let json = format!("{dir}/unit/ofproto/json/of13/{name}.packet.json");
            let (Ok(bytes), Ok(json)) = (std::fs::read(&packet), std::fs::read_to_string(&json))
            else {
                eprintln!("SKIP {name}: os-ken test vectors not found under {dir}");
                continue;
            };
            let json: serde_json::Value = serde_json::from_str(&json).unwrap();
            check_flow_mod(name, &bytes, &json["OFPFlowMod"]);
            checked += 1;
        }
        eprintln!("checked {checked} os-ken flow_mod vectors");
    }

    fn check_flow_mod(name: &str, bytes: &[u8], fm: &serde_json::Value) {
        // 8 header + cookie 8 + mask 8 + table 1 + command 1 + idle 2 +
        // hard 2 + priority 2 + buffer 4 + out_port 4 + out_group 4 +
        // flags 2 + pad 2 = 48.
        let mut r = Reader::new(bytes);
        r.skip(48).unwrap();
        let m = Match::decode(&mut r).unwrap();
        let insts = Instruction::decode_list(&mut r).unwrap();

        let jm = &fm["match"]["OFPMatch"];
        assert_eq!(
            m.wire_len() as u64,
            jm["length"].as_u64().unwrap(),
            "{name}"
        );
        let jfields = jm["oxm_fields"].as_array().unwrap();
        assert_eq!(m.fields.len(), jfields.len(), "{name}");
        for (o, j) in m.fields.iter().zip(jfields) {
            let j = &j["OXMTlv"];
            match o {
                Oxm::Basic { field, value, mask } => {
                    assert_eq!(field.name(), j["field"].as_str().unwrap(), "{name}");
                    assert_eq!(serde_json::to_value(value).unwrap(), j["value"], "{name}");
                    match mask {
                        None => assert!(j["mask"].is_null(), "{name}"),
                        Some(m) => assert_eq!(serde_json::to_value(m).unwrap(), j["mask"]),
                    }
                }
                // Nicira/ONF fields os-ken names (tun_ipv4_src, conj_id, ...).
                Oxm::Other { class, .. } => {
                    let jname = j["field"].as_str().unwrap();
                    assert!(OxmField::from_name(jname).is_none() || *class == 0xffff);
                    assert_ne!(*class, 0x8000, "{name}: {jname}");
                }
            }
        }

        let jinsts = fm["instructions"].as_array().unwrap();
        assert_eq!(insts.len(), jinsts.len(), "{name}");
        for (inst, j) in insts.iter().zip(jinsts) {
            let (kind, j) = j.as_object().unwrap().iter().next().unwrap();
            assert_eq!(u64::from(inst.type_code()), j["type"].as_u64().unwrap());
            assert_eq!(inst.wire_len() as u64, j["len"].as_u64().unwrap());
            match inst {
                Instruction::GotoTable { table_id } => {
                    assert_eq!(kind, "OFPInstructionGotoTable");
                    assert_eq!(u64::from(*table_id), j["table_id"].as_u64().unwrap());
                }
                Instruction::Meter { meter_id } => {
                    assert_eq!(kind, "OFPInstructionMeter");
                    assert_eq!(u64::from(*meter_id), j["meter_id"].as_u64().unwrap());
                }
                Instruction::WriteActions { actions } | Instruction::ApplyActions { actions } => {
                    assert_eq!(kind, "OFPInstructionActions");
                    let jactions = j["actions"].as_array().unwrap();
                    assert_eq!(actions.len(), jactions.len(), "{name}");
                    for (a, ja) in actions.iter().zip(jactions) {
                        let (akind, ja) = ja.as_object().unwrap().iter().next().unwrap();
                        assert_eq!(u64::from(a.type_code()), ja["type"].as_u64().unwrap());
                        assert_eq!(a.wire_len() as u64, ja["len"].as_u64().unwrap());
                        check_action_against_json(akind, a, ja);
                    }
                }
                other => panic!("{name}: no JSON check for {other:?}"),
            }
        }
        // Re-encoding gives back the same bytes (these vectors pad with zeros).
        let mut w = Vec::new();
        m.encode(&mut w);
        Instruction::encode_list(&insts, &mut w);
        let body = bytes.get(48..).unwrap();
        assert_eq!(w, body, "{name}");
        // Every cut of the body either fails or falls on an instruction
        // boundary and then re-encodes to exactly the bytes kept.
        for n in 0..body.len() {
            let cut = &body[..n];
            let mut r = Reader::new(cut);
            let decoded =
                Match::decode(&mut r).and_then(|m| Ok((m, Instruction::decode_list(&mut r)?)));
            if let Ok((m, insts)) = decoded {
                let mut w = Vec::new();
                m.encode(&mut w);
                Instruction::encode_list(&insts, &mut w);
                assert_eq!(w, cut, "{name} cut to {n}");
            }
        }
    }

    /// Decodes standard base64 (os-ken prints opaque data that way).
    fn base64(s: &str) -> Vec<u8> {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::new();
        let (mut acc, mut bits) = (0u32, 0);
        for c in s.bytes().filter(|c| *c != b'=') {
            let v = A.iter().position(|a| *a == c).unwrap() as u32;
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        out
    }

    fn check_action_against_json(kind: &str, a: &Action, j: &serde_json::Value) {
        let num = |k: &str| j[k].as_u64().unwrap();
        match a {
            Action::Output { port, max_len } => {
                assert_eq!(u64::from(*port), num("port"));
                assert_eq!(u64::from(*max_len), num("max_len"));
            }
            Action::SetMplsTtl { mpls_ttl } => assert_eq!(u64::from(*mpls_ttl), num("mpls_ttl")),
            Action::SetNwTtl { nw_ttl } => assert_eq!(u64::from(*nw_ttl), num("nw_ttl")),
            Action::PushVlan { ethertype }
            | Action::PushMpls { ethertype }
            | Action::PopMpls { ethertype }
            | Action::PushPbb { ethertype } => assert_eq!(u64::from(*ethertype), num("ethertype")),
            Action::SetQueue { queue_id } => assert_eq!(u64::from(*queue_id), num("queue_id")),
            Action::Group { group_id } => assert_eq!(u64::from(*group_id), num("group_id")),
            Action::Experimenter { experimenter, data } => {
                assert_eq!(u64::from(*experimenter), num("experimenter"));
                if kind == "OFPActionExperimenterUnknown" {
                    assert_eq!(data, &base64(j["data"].as_str().unwrap()));
                } else {
                    // A Nicira action os-ken parses: its subtype leads the data.
                    assert!(kind.starts_with("NX"), "{kind}");
                    let subtype = data.get(..2).map(|s| u16::from_be_bytes([s[0], s[1]]));
                    assert_eq!(subtype.map(u64::from), j["subtype"].as_u64());
                }
            }
            Action::SetField { field } => {
                let jf = &j["field"]["OXMTlv"];
                match field {
                    Oxm::Basic { field, value, .. } => {
                        assert_eq!(field.name(), jf["field"].as_str().unwrap());
                        assert_eq!(serde_json::to_value(value).unwrap(), jf["value"]);
                    }
                    // os-ken maps the ONF experimenter OXM (ONF id, exp type
                    // 0x0a00 = PBB_UCA) to `pbb_uca`; its last byte is the value.
                    Oxm::Other { class, body, .. } => {
                        assert_eq!(*class, 0xffff);
                        assert_eq!(body.get(..6), Some(&[0x4f, 0x4e, 0x46, 0, 0x0a, 0][..]));
                        assert_eq!(jf["field"], "pbb_uca");
                        assert_eq!(body.last().map(|b| u64::from(*b)), jf["value"].as_u64());
                    }
                }
            }
            _ => {}
        }
    }
}
