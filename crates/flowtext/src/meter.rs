//! Meters: `parse_meter` / `format_meter`.
//!
//! Text: an optional command word (`add`, `modify`, `delete`), then
//! `meter=N` (a number, `all`, `controller`, `slowpath`), the flag words
//! `kbps`, `pktps`, `burst`, `stats` (and `flags=N` for other raw
//! `OFPMF_*` bits), then last `bands=` followed by the bands, each starting
//! with `type=`: `type=drop,rate=R[,burst_size=B]`,
//! `type=dscp_remark,rate=R[,burst_size=B][,prec_level=P]`,
//! `type=experimenter,rate=R[,burst_size=B],experimenter=ID[,data=HEX]`.
//! `meter` is required; `rate` is required in every band; other values
//! default to 0. As ovs-ofctl requires, an add or modify names one unit
//! (`kbps` or `pktps`; raw `flags=` instead says exactly which bits, a
//! fulmar spelling), has bands, and is not meter 0; every band has a rate
//! above 0, `burst_size` exactly when the meter has the `burst` flag, and
//! a `dscp_remark` band its `prec_level`. Meter numbers above 0xffff0000
//! are the names only.
//!
//! Canonical printed form: the command word and a space unless add,
//! `meter=N`, the flag words, `flags=0x..` for unnamed bits (and
//! `flags=0x0` when there is no unit), and `bands=` with each band as
//! `type=T,rate=R` plus `burst_size=B` with the burst flag, and
//! `prec_level=P` or `experimenter=0xID,data=HEX` (no `bands=` when there
//! are none).

use crate::lexer::{command_and_pieces, flag_word, key_value, split_list, Tok};
use crate::value::{format_hex_bytes, parse_hex_bytes, parse_u16, parse_u32, parse_u8};
use crate::ParseError;
use ofp::consts::meter_no;
use ofp::meter_mod::meter_flags as mf;
use ofp::{MeterBand, MeterMod, MeterModCommand};

const COMMAND_WORDS: &[(&str, MeterModCommand)] = words![MeterModCommand:
    "add" => Add, "modify" => Modify, "delete" => Delete,
];

const FLAG_WORDS: &[(&str, u16)] = words![mf:
    "kbps" => KBPS, "pktps" => PKTPS, "burst" => BURST, "stats" => STATS,
];

const METER_NAMES: &[(&str, u32)] = words![meter_no:
    "all" => ALL, "controller" => CONTROLLER, "slowpath" => SLOWPATH,
];

/// Parses one meter; the command is add unless the text starts with a
/// command word.
pub fn parse_meter(text: &str) -> Result<MeterMod, ParseError> {
    parse_meter_command(text, MeterModCommand::Add)
}

/// Parses one meter with `command` unless the text starts with a command
/// word.
pub fn parse_meter_command(text: &str, command: MeterModCommand) -> Result<MeterMod, ParseError> {
    let whole = Tok::whole(text);
    let (command, pieces) = command_and_pieces(whole, COMMAND_WORDS, command)?;
    let mut mm = MeterMod {
        command,
        flags: 0,
        meter_id: 0,
        bands: Vec::new(),
    };
    let mut id_seen = false;
    let mut id_tok: Option<Tok<'_>> = None;
    let mut flags_seen = false;
    let mut bands: Option<Tok<'_>> = None;
    for &piece in &pieces {
        let (key, value) = key_value(piece);
        if key.text == "bands" {
            if value.is_none() {
                return Err(piece.err("\"bands\" needs \"=\""));
            }
            bands = Some(whole.from(piece.pos + "bands=".len()));
            break;
        }
        if flag_word(FLAG_WORDS, &mut mm.flags, key, value)? {
            continue;
        }
        let v = match (key.text, value) {
            ("meter" | "flags", Some(v)) => v,
            ("meter" | "flags", None) => {
                return Err(key.err(format!("{} needs a value", key.quoted())))
            }
            _ => return Err(key.err(format!("unknown meter key {}", key.quoted()))),
        };
        if key.text == "meter" {
            if id_seen {
                return Err(key.err("duplicate key \"meter\""));
            }
            id_seen = true;
            id_tok = Some(v);
            mm.meter_id = match METER_NAMES.iter().find(|(n, _)| *n == v.text) {
                Some(&(_, id)) => id,
                None => parse_u32(v, "a meter id")?,
            };
        } else {
            if flags_seen {
                return Err(key.err("duplicate key \"flags\""));
            }
            flags_seen = true;
            mm.flags |= parse_u16(v, "flags")?;
        }
    }
    if !id_seen {
        return Err(ParseError::new("missing \"meter=\"", "", text.len()));
    }
    let end = Tok {
        text: "",
        pos: text.len(),
    };
    if let Some(b) = bands {
        mm.bands = parse_bands(b, mm.flags & mf::BURST != 0)?;
    }
    if mm.command != MeterModCommand::Delete {
        // As ovs-ofctl requires: a unit (unless raw flags= say exactly
        // which bits), at least one band, a real meter number.
        let unit = mm.flags & (mf::KBPS | mf::PKTPS);
        if unit == 0 && !flags_seen {
            return Err(end.err("a meter needs its unit: kbps or pktps"));
        }
        if unit == mf::KBPS | mf::PKTPS {
            return Err(end.err("a meter has one unit: kbps or pktps, not both"));
        }
        if mm.bands.is_empty() {
            return Err(end.err("a meter needs bands=type=...,rate=..."));
        }
        if mm.meter_id == 0 {
            return Err(id_tok
                .unwrap_or(end)
                .err("meter 0 does not exist (meters count from 1)"));
        }
    }
    if mm.meter_id > meter_no::MAX && !METER_NAMES.iter().any(|&(_, id)| id == mm.meter_id) {
        return Err(id_tok.unwrap_or(end).err(format!(
            "meter {} is above the largest, {}",
            mm.meter_id,
            meter_no::MAX
        )));
    }
    Ok(mm)
}

/// A band being read: its `type=` token and its `key=value` pieces.
struct BandText<'a> {
    ty: Tok<'a>,
    pairs: Vec<(Tok<'a>, Tok<'a>)>,
}

/// Parses the bands; `burst` says whether the meter has the burst flag,
/// which each band's `burst_size` goes with.
fn parse_bands(t: Tok<'_>, burst: bool) -> Result<Vec<MeterBand>, ParseError> {
    let mut texts: Vec<BandText<'_>> = Vec::new();
    for piece in split_list(t)? {
        let (key, value) = key_value(piece);
        let v = value
            .ok_or_else(|| piece.err(format!("expected key=value, got {}", piece.quoted())))?;
        if key.text == "type" {
            texts.push(BandText {
                ty: v,
                pairs: Vec::new(),
            });
            continue;
        }
        let band = texts
            .last_mut()
            .ok_or_else(|| key.err(format!("{} before the band's \"type=\"", key.quoted())))?;
        if band.pairs.iter().any(|(k, _)| k.text == key.text) {
            return Err(key.err(format!("duplicate band key {}", key.quoted())));
        }
        band.pairs.push((key, v));
    }
    texts.into_iter().map(|b| parse_band(b, burst)).collect()
}

fn parse_band(b: BandText<'_>, burst: bool) -> Result<MeterBand, ParseError> {
    let allowed: &[&str] = match b.ty.text {
        "drop" => &["rate", "burst_size"],
        "dscp_remark" => &["rate", "burst_size", "prec_level"],
        "experimenter" => &["rate", "burst_size", "experimenter", "data"],
        _ => return Err(b.ty.err(format!("unknown band type {}", b.ty.quoted()))),
    };
    let mut rate = None;
    let mut burst_size = 0;
    let mut prec_level = 0;
    let mut experimenter = None;
    let mut data = Vec::new();
    for (k, v) in &b.pairs {
        if !allowed.contains(&k.text) {
            return Err(k.err(format!(
                "unknown key {} in a {} band",
                k.quoted(),
                b.ty.text
            )));
        }
        match k.text {
            "rate" => rate = Some(parse_u32(*v, "a rate")?),
            "burst_size" => burst_size = parse_u32(*v, "a burst size")?,
            "prec_level" => prec_level = parse_u8(*v, "a precedence level")?,
            "experimenter" => experimenter = Some(parse_u32(*v, "an experimenter id")?),
            _ => data = parse_hex_bytes(*v)?,
        }
    }
    let rate = rate.ok_or_else(|| b.ty.err(format!("{} band needs rate=", b.ty.text)))?;
    if rate == 0 {
        return Err(b.ty.err(format!("{} band needs a rate above 0", b.ty.text)));
    }
    let has = |key: &str| b.pairs.iter().find(|(k, _)| k.text == key).map(|(k, _)| *k);
    match (burst, has("burst_size")) {
        (false, Some(k)) => {
            return Err(k.err("burst_size goes with the meter's burst flag"));
        }
        (true, None) => {
            return Err(b.ty.err(format!(
                "{} band needs burst_size= (the meter has the burst flag)",
                b.ty.text
            )));
        }
        _ => {}
    }
    if b.ty.text == "dscp_remark" && has("prec_level").is_none() {
        return Err(b.ty.err("dscp_remark band needs prec_level="));
    }
    Ok(match b.ty.text {
        "drop" => MeterBand::Drop { rate, burst_size },
        "dscp_remark" => MeterBand::DscpRemark {
            rate,
            burst_size,
            prec_level,
        },
        _ => MeterBand::Experimenter {
            rate,
            burst_size,
            experimenter: experimenter
                .ok_or_else(|| b.ty.err("experimenter band needs experimenter="))?,
            data,
        },
    })
}

/// Prints a meter in the canonical form described in the module comment.
pub fn format_meter(mm: &MeterMod) -> String {
    let id = METER_NAMES
        .iter()
        .find(|&&(_, id)| id == mm.meter_id)
        .map_or_else(|| mm.meter_id.to_string(), |(n, _)| n.to_string());
    let mut parts = vec![format!("meter={id}")];
    let mut named = 0;
    for &(word, bit) in FLAG_WORDS {
        if mm.flags & bit != 0 {
            parts.push(word.to_string());
            named |= bit;
        }
    }
    // Raw flags= for bits without a word, and (as flags=0x0) when there
    // is no unit, which the words alone would have to name.
    if mm.flags & !named != 0 || mm.flags & (mf::KBPS | mf::PKTPS) == 0 {
        parts.push(format!("flags=0x{:x}", mm.flags & !named));
    }
    let burst = mm.flags & mf::BURST != 0;
    let bs = |b: &u32| {
        if burst {
            format!(",burst_size={b}")
        } else {
            String::new()
        }
    };
    let bands: Vec<String> = mm
        .bands
        .iter()
        .map(|b| match b {
            MeterBand::Drop { rate, burst_size } => {
                format!("type=drop,rate={rate}{}", bs(burst_size))
            }
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            } => format!(
                "type=dscp_remark,rate={rate}{},prec_level={prec_level}",
                bs(burst_size)
            ),
            MeterBand::Experimenter {
                rate,
                burst_size,
                experimenter,
                data,
            } => format!(
                "type=experimenter,rate={rate}{},experimenter=0x{experimenter:x},data={}",
                bs(burst_size),
                format_hex_bytes(data)
            ),
        })
        .collect();
    if !bands.is_empty() {
        parts.push(format!("bands={}", bands.join(",")));
    }
    let body = parts.join(",");
    match mm.command {
        MeterModCommand::Add => body,
        MeterModCommand::Modify => format!("modify {body}"),
        MeterModCommand::Delete => format!("delete {body}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::{assert_text_round_trip, refused};

    fn round_trip(mm: &MeterMod) {
        assert_text_round_trip(mm, format_meter, parse_meter);
    }

    #[test]
    fn the_example_meter() {
        let mm = parse_meter("meter=1,kbps,burst,stats,bands=type=drop,rate=1000,burst_size=100")
            .unwrap();
        assert_eq!(
            mm,
            MeterMod {
                command: MeterModCommand::Add,
                flags: mf::KBPS | mf::BURST | mf::STATS,
                meter_id: 1,
                bands: vec![MeterBand::Drop {
                    rate: 1000,
                    burst_size: 100
                }],
            }
        );
        assert_eq!(
            format_meter(&mm),
            "meter=1,kbps,burst,stats,bands=type=drop,rate=1000,burst_size=100"
        );
        round_trip(&mm);
    }

    #[test]
    fn several_bands_and_kinds() {
        let mm = parse_meter(
            "meter=2 pktps burst bands=type=drop,rate=10,burst_size=9 \
             type=dscp_remark,rate=5,prec_level=1,burst_size=3 \
             type=experimenter,rate=1,experimenter=0x2320,data=0102,burst_size=0",
        )
        .unwrap();
        assert_eq!(mm.flags, mf::PKTPS | mf::BURST);
        assert_eq!(
            mm.bands,
            vec![
                MeterBand::Drop {
                    rate: 10,
                    burst_size: 9
                },
                MeterBand::DscpRemark {
                    rate: 5,
                    burst_size: 3,
                    prec_level: 1
                },
                MeterBand::Experimenter {
                    rate: 1,
                    burst_size: 0,
                    experimenter: 0x2320,
                    data: vec![1, 2]
                },
            ]
        );
        round_trip(&mm);
    }

    #[test]
    fn ids_flags_and_commands_round_trip() {
        for (name, id) in METER_NAMES {
            let mm = parse_meter(&format!("delete meter={name}")).unwrap();
            assert_eq!((mm.command, mm.meter_id), (MeterModCommand::Delete, *id));
            round_trip(&mm);
        }
        for command in [
            MeterModCommand::Add,
            MeterModCommand::Modify,
            MeterModCommand::Delete,
        ] {
            // No unit is written as raw flags=; one unit, with or without
            // the burst flag (then each band has its burst_size).
            for flags in [0, 0x30, 0x1, 0x2 | 0x8, 0x1 | 0x4, 0xfffd] {
                let burst_size = if flags & mf::BURST != 0 { 2 } else { 0 };
                round_trip(&MeterMod {
                    command,
                    flags,
                    meter_id: 77,
                    bands: vec![MeterBand::Drop {
                        rate: 5,
                        burst_size,
                    }],
                });
            }
        }
        round_trip(&MeterMod {
            command: MeterModCommand::Delete,
            flags: 0,
            meter_id: 77,
            bands: vec![],
        });
        let mm = parse_meter_command(
            "meter=3,kbps,bands=type=drop,rate=1",
            MeterModCommand::Modify,
        )
        .unwrap();
        assert_eq!(mm.command, MeterModCommand::Modify);
        assert_eq!(
            format_meter(&MeterMod { flags: 0, ..mm }),
            "modify meter=3,flags=0x0,bands=type=drop,rate=1"
        );
    }

    #[test]
    fn meters_as_ovs_ofctl_requires_them() {
        for (text, token, says) in [
            ("meter=1,bands=type=drop,rate=1", "", "kbps or pktps"),
            ("meter=1,kbps,pktps,bands=type=drop,rate=1", "", "one unit"),
            ("meter=1,kbps", "", "bands"),
            ("meter=1,kbps,bands=type=drop,rate=0", "drop", "above 0"),
            (
                "meter=1,kbps,bands=type=drop,rate=1,burst_size=2",
                "burst_size",
                "burst flag",
            ),
            (
                "meter=1,kbps,burst,bands=type=drop,rate=1",
                "drop",
                "burst_size",
            ),
            (
                "meter=1,kbps,bands=type=dscp_remark,rate=1",
                "dscp_remark",
                "prec_level",
            ),
            ("meter=0,kbps,bands=type=drop,rate=1", "0", "meter 0"),
            (
                "meter=4294901761,kbps,bands=type=drop,rate=1",
                "4294901761",
                "largest",
            ),
        ] {
            let e = parse_meter(text).unwrap_err();
            assert_eq!(e.token, token, "{text}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
        // Deleting needs none of it.
        assert!(parse_meter("delete meter=all").is_ok());
        assert!(parse_meter("meter=controller,pktps,bands=type=drop,rate=10").is_ok());
    }

    fn err(text: &str) -> ParseError {
        refused(parse_meter, text)
    }

    #[test]
    fn errors_name_the_token_and_position() {
        assert_eq!(err("meter=x").token, "x");
        assert_eq!(err("meter=1,kbsp").token, "kbsp");
        assert_eq!(err("meter=1,kbps,kbps").position, 13);
        assert_eq!(err("meter=1,kbps=1").token, "1");
        assert_eq!(err("kbps").position, 4);
        assert_eq!(err("meter=1,meter=2").position, 8);
        assert_eq!(err("meter=1,bands=rate=1").token, "rate");
        assert_eq!(err("meter=1,bands=type=drp,rate=1").token, "drp");
        assert_eq!(err("meter=1,bands=type=drop").token, "drop");
        assert_eq!(
            err("meter=1,bands=type=drop,rate=1,prec_level=1").token,
            "prec_level"
        );
        assert_eq!(err("meter=1,bands=type=drop,rate=1,rate=2").position, 31);
        assert_eq!(
            err("meter=1,bands=type=drop,rate=0x100000000").token,
            "0x100000000"
        );
        assert_eq!(err("meter=1,bands=type=drop,rate=1,burst").token, "burst");
        assert_eq!(
            err("meter=1,bands=type=experimenter,rate=1").token,
            "experimenter"
        );
        assert_eq!(
            err("meter=1,bands=type=dscp_remark,rate=1,prec_level=256").token,
            "256"
        );
        assert_eq!(err("meter=1,bands").token, "bands");
        for text in [
            "",
            "bands=",
            "meter=1,bands=type=",
            "meter=é",
            "meter=1,bands=(",
            "bands=type=drop",
        ] {
            let _ = parse_meter(text);
        }
    }
}
