//! Actions and instructions: parsing the `actions=` text and printing it.
//!
//! Canonical printed forms (all accepted back by the parser):
//!
//! | structure | text |
//! |---|---|
//! | `Output{CONTROLLER, n}` | `CONTROLLER:n` |
//! | `Output{p, 0}` | `output:p` (`p` a number or `LOCAL`, `IN_PORT`, ...) |
//! | `Output{p, n>0}` | `output(port=p,max_len=n)` |
//! | `Group`, `SetQueue` | `group:n`, `set_queue:n` |
//! | push/pop | `push_vlan:0x8100`, `pop_vlan`, `push_mpls:0x8847`, `pop_mpls:0x0800`, `push_pbb:0x88e7`, `pop_pbb` |
//! | TTLs | `set_mpls_ttl:n`, `dec_mpls_ttl`, `set_nw_ttl:n`, `dec_ttl`, `copy_ttl_out`, `copy_ttl_in` |
//! | `SetField` | `set_field:VALUE->FIELD` (OXM name; value as in a match) |
//! | `SetField` of a non-basic OXM | `set_oxm:CLASS:FIELD:HASMASK:HEXBODY` |
//! | `Experimenter` | `experimenter:0xID:HEXDATA` |
//!
//! Instructions: an `ApplyActions` prints as its bare actions (a run of bare
//! actions parses back into one `ApplyActions` at that place); an empty one,
//! or one right after another printed bare, as `apply_actions(...)`. Then
//! `write_actions(...)`, `clear_actions`, `write_metadata:0xV[/0xM]` (mask
//! printed unless all ones), `goto_table:n`, `meter:n`,
//! `experimenter_instruction:0xID:HEXDATA`. Instructions keep their order.
//! No instructions at all prints as `drop`.
//!
//! Also accepted: `output=N`, a bare port number or reserved port name
//! (`LOCAL`, `in_port`, `all`, `flood`, `normal`, `table`),
//! `controller`, `controller:N`, `controller(max_len=N)`, `strip_vlan`,
//! `mod_nw_ttl:N`, `dec_nw_ttl`, and the ovs `mod_*` actions, which become
//! `set_field`: `mod_dl_src`, `mod_dl_dst`, `mod_vlan_vid` (12-bit VID,
//! sets OFPVID_PRESENT), `mod_vlan_pcp`, `mod_nw_src`, `mod_nw_dst`,
//! `mod_nw_tos` (TOS byte, a multiple of 4, stored as `ip_dscp`),
//! `mod_nw_ecn`, `set_mpls_label`, `set_mpls_tc`, `set_tunnel`,
//! `set_tunnel64`, `mod_tp_src`/`mod_tp_dst` (tcp/udp/sctp by the flow's
//! `ip_proto`; an error where there is none).

use crate::lexer::{split_list, Tok};
use crate::match_text::{
    field_by_name, format_basic, format_other, parse_tos, parse_value_and_mask,
};
use crate::value::{
    format_hex_bytes, format_port, parse_hex_bytes, parse_port, parse_u16, parse_u32, parse_u64,
    parse_u8, port_by_name,
};
use crate::ParseError;
use ofp::action::OFPCML_NO_BUFFER;
use ofp::consts::port_no;
use ofp::oxm::OFPVID_PRESENT;
use ofp::{Action, Instruction, Oxm, OxmField, OxmValue};

/// What the actions may need from the flow around them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Context {
    /// The flow's `ip_proto`, for `mod_tp_src`/`mod_tp_dst`.
    pub ip_proto: Option<u8>,
}

/// A `name`, `name:arg`, `name=arg` or `name(args)` piece.
struct Call<'a> {
    name: Tok<'a>,
    /// Lowercased name.
    lname: String,
    arg: Option<Tok<'a>>,
    parens: bool,
}

fn split_call(t: Tok<'_>) -> Result<Call<'_>, ParseError> {
    let cut = t.text.find([':', '=', '(']);
    let Some(i) = cut else {
        return Ok(Call {
            name: t,
            lname: t.text.to_ascii_lowercase(),
            arg: None,
            parens: false,
        });
    };
    let name = t.range(0, i);
    let lname = name.text.to_ascii_lowercase();
    if t.text.as_bytes().get(i) == Some(&b'(') {
        // split_list guarantees balance; the matching ')' must end the piece.
        let mut depth = 0usize;
        let mut close = None;
        for (j, c) in t.text.char_indices().skip_while(|&(j, _)| j < i) {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        let close = close.ok_or_else(|| t.err("unbalanced parentheses"))?;
        if close + 1 != t.text.len() {
            let rest = t.from(close + 1);
            return Err(rest.err(format!("unexpected text {} after \")\"", rest.quoted())));
        }
        return Ok(Call {
            name,
            lname,
            arg: Some(t.range(i + 1, close)),
            parens: true,
        });
    }
    Ok(Call {
        name,
        lname,
        arg: Some(t.from(i + 1)),
        parens: false,
    })
}

impl<'a> Call<'a> {
    fn no_arg(&self) -> Result<(), ParseError> {
        match self.arg {
            None => Ok(()),
            Some(a) => Err(a.err(format!(
                "{} takes no argument (got {})",
                self.name.quoted(),
                a.quoted()
            ))),
        }
    }

    fn arg(&self) -> Result<Tok<'a>, ParseError> {
        match self.arg {
            Some(a) if !self.parens && !a.text.is_empty() => Ok(a),
            _ => Err(self.name.err(format!(
                "{} needs an argument (NAME:VALUE)",
                self.name.quoted()
            ))),
        }
    }
}

/// Parses `key=value` pairs inside parentheses; only `allowed` keys.
fn paren_args<'a>(arg: Tok<'a>, allowed: &[&str]) -> Result<Vec<(Tok<'a>, Tok<'a>)>, ParseError> {
    let mut out: Vec<(Tok<'a>, Tok<'a>)> = Vec::new();
    for piece in split_list(arg)? {
        let (k, v) = piece
            .split_once("=")
            .ok_or_else(|| piece.err(format!("expected key=value, got {}", piece.quoted())))?;
        if !allowed.contains(&k.text) {
            return Err(k.err(format!("unknown argument {}", k.quoted())));
        }
        if out.iter().any(|(o, _)| o.text == k.text) {
            return Err(k.err(format!("duplicate argument {}", k.quoted())));
        }
        out.push((k, v));
    }
    Ok(out)
}

fn set_field(field: OxmField, value: OxmValue) -> Action {
    Action::SetField {
        field: Oxm::Basic {
            field,
            value,
            mask: None,
        },
    }
}

fn output(port: u32) -> Action {
    Action::Output {
        port,
        max_len: if port == port_no::CONTROLLER {
            OFPCML_NO_BUFFER
        } else {
            0
        },
    }
}

/// Parses one action.
pub(crate) fn parse_action(t: Tok<'_>, ctx: Context) -> Result<Action, ParseError> {
    if t.text.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(output(parse_port(t)?));
    }
    let c = split_call(t)?;
    let what = c.lname.as_str();
    let action = match what {
        "output" if c.parens => {
            let mut port = None;
            let mut max_len = 0;
            for (k, v) in paren_args(c.arg.unwrap_or(c.name), &["port", "max_len"])? {
                match k.text {
                    "port" => port = Some(parse_port(v)?),
                    _ => max_len = parse_u16(v, "max_len")?,
                }
            }
            let port = port.ok_or_else(|| t.err(format!("{} needs port=N", t.quoted())))?;
            Action::Output { port, max_len }
        }
        "output" => output(parse_port(c.arg()?)?),
        "controller" => {
            let max_len = match (c.arg, c.parens) {
                (None, _) => OFPCML_NO_BUFFER,
                (Some(a), true) => {
                    let mut m = OFPCML_NO_BUFFER;
                    for (_, v) in paren_args(a, &["max_len"])? {
                        m = parse_u16(v, "max_len")?;
                    }
                    m
                }
                (Some(_), false) => parse_u16(c.arg()?, "max_len")?,
            };
            Action::Output {
                port: port_no::CONTROLLER,
                max_len,
            }
        }
        "in_port" | "all" | "flood" | "normal" | "local" | "table" => {
            c.no_arg()?;
            output(port_by_name(what).unwrap_or(port_no::ANY))
        }
        "drop" => return Err(t.err("\"drop\" must be the only action")),
        "group" => Action::Group {
            group_id: parse_u32(c.arg()?, "a group id")?,
        },
        "set_queue" => Action::SetQueue {
            queue_id: parse_u32(c.arg()?, "a queue id")?,
        },
        "push_vlan" => Action::PushVlan {
            ethertype: parse_u16(c.arg()?, "an ethertype")?,
        },
        "push_mpls" => Action::PushMpls {
            ethertype: parse_u16(c.arg()?, "an ethertype")?,
        },
        "pop_mpls" => Action::PopMpls {
            ethertype: parse_u16(c.arg()?, "an ethertype")?,
        },
        "push_pbb" => Action::PushPbb {
            ethertype: parse_u16(c.arg()?, "an ethertype")?,
        },
        "pop_vlan" | "strip_vlan" => {
            c.no_arg()?;
            Action::PopVlan
        }
        "pop_pbb" => {
            c.no_arg()?;
            Action::PopPbb
        }
        "set_mpls_ttl" => Action::SetMplsTtl {
            mpls_ttl: parse_u8(c.arg()?, "a TTL")?,
        },
        "dec_mpls_ttl" => {
            c.no_arg()?;
            Action::DecMplsTtl
        }
        "set_nw_ttl" | "mod_nw_ttl" => Action::SetNwTtl {
            nw_ttl: parse_u8(c.arg()?, "a TTL")?,
        },
        "dec_ttl" | "dec_nw_ttl" => {
            c.no_arg()?;
            Action::DecNwTtl
        }
        "copy_ttl_out" => {
            c.no_arg()?;
            Action::CopyTtlOut
        }
        "copy_ttl_in" => {
            c.no_arg()?;
            Action::CopyTtlIn
        }
        "set_field" => {
            let a = c.arg()?;
            let (value, name) = a
                .split_once("->")
                .ok_or_else(|| a.err(format!("{} is not VALUE->FIELD", a.quoted())))?;
            let field = field_by_name(name.text)
                .ok_or_else(|| name.err(format!("unknown field {}", name.quoted())))?;
            if !field.settable() {
                return Err(name.err(format!("field {} cannot be set", name.quoted())));
            }
            Action::SetField {
                field: parse_value_and_mask(field, value, false)?,
            }
        }
        "set_oxm" => {
            let a = c.arg()?;
            Action::SetField {
                field: crate::match_text::parse_other(a)?,
            }
        }
        "mod_dl_src" | "mod_dl_dst" | "mod_nw_src" | "mod_nw_dst" | "mod_vlan_pcp" => {
            let field = match what {
                "mod_dl_src" => OxmField::EthSrc,
                "mod_dl_dst" => OxmField::EthDst,
                "mod_nw_src" => OxmField::Ipv4Src,
                "mod_nw_dst" => OxmField::Ipv4Dst,
                _ => OxmField::VlanPcp,
            };
            Action::SetField {
                field: parse_value_and_mask(field, c.arg()?, false)?,
            }
        }
        "mod_nw_ecn" | "set_mpls_label" | "set_mpls_tc" | "set_tunnel" | "set_tunnel64" => {
            let field = match what {
                "mod_nw_ecn" => OxmField::IpEcn,
                "set_mpls_label" => OxmField::MplsLabel,
                "set_mpls_tc" => OxmField::MplsTc,
                _ => OxmField::TunnelId,
            };
            Action::SetField {
                field: parse_value_and_mask(field, c.arg()?, false)?,
            }
        }
        "mod_vlan_vid" => {
            let a = c.arg()?;
            let vid = parse_u16(a, "a VLAN id")?;
            if vid > 0x0fff {
                return Err(a.err(format!("VLAN id {} is wider than 12 bits", a.quoted())));
            }
            set_field(OxmField::VlanVid, OxmValue::U16(vid | OFPVID_PRESENT))
        }
        "mod_nw_tos" => {
            let tos = parse_tos(c.arg()?)?;
            set_field(OxmField::IpDscp, OxmValue::U8(tos >> 2))
        }
        "mod_tp_src" | "mod_tp_dst" => {
            let src = what == "mod_tp_src";
            let field = match (ctx.ip_proto, src) {
                (Some(6), true) => OxmField::TcpSrc,
                (Some(6), false) => OxmField::TcpDst,
                (Some(17), true) => OxmField::UdpSrc,
                (Some(17), false) => OxmField::UdpDst,
                (Some(132), true) => OxmField::SctpSrc,
                (Some(132), false) => OxmField::SctpDst,
                _ => {
                    return Err(c.name.err(format!(
                        "{} needs a tcp, udp or sctp match (or use set_field)",
                        c.name.quoted()
                    )))
                }
            };
            set_field(field, OxmValue::U16(parse_u16(c.arg()?, "a port")?))
        }
        "experimenter" => {
            let (id, data) = experimenter_args(c.arg()?)?;
            Action::Experimenter {
                experimenter: id,
                data,
            }
        }
        _ => match port_by_name(c.name.text) {
            Some(p) if c.arg.is_none() && p != port_no::ANY => output(p),
            _ => return Err(c.name.err(format!("unknown action {}", c.name.quoted()))),
        },
    };
    Ok(action)
}

/// `ID:HEXDATA` of the experimenter action and instruction.
fn experimenter_args(a: Tok<'_>) -> Result<(u32, Vec<u8>), ParseError> {
    let (id, data) = a
        .split_once(":")
        .ok_or_else(|| a.err(format!("{} is not ID:HEXDATA", a.quoted())))?;
    Ok((parse_u32(id, "an experimenter id")?, parse_hex_bytes(data)?))
}

/// Parses a list of actions (`drop` alone, or nothing, is the empty list).
pub(crate) fn parse_action_list(t: Tok<'_>, ctx: Context) -> Result<Vec<Action>, ParseError> {
    let pieces = split_list(t)?;
    if let [only] = pieces.as_slice() {
        if only.text.eq_ignore_ascii_case("drop") {
            return Ok(Vec::new());
        }
    }
    pieces.into_iter().map(|p| parse_action(p, ctx)).collect()
}

/// Parses the `actions=` text into instructions.
pub(crate) fn parse_instructions(t: Tok<'_>, ctx: Context) -> Result<Vec<Instruction>, ParseError> {
    let pieces = split_list(t)?;
    if let [only] = pieces.as_slice() {
        if only.text.eq_ignore_ascii_case("drop") {
            return Ok(Vec::new());
        }
    }
    let mut out: Vec<Instruction> = Vec::new();
    // Index in `out` of the ApplyActions a run of bare actions goes into.
    let mut bare: Option<usize> = None;
    for p in pieces {
        let c = split_call(p)?;
        let ins = match c.lname.as_str() {
            "goto_table" => Instruction::GotoTable {
                table_id: parse_u8(c.arg()?, "a table id")?,
            },
            "write_metadata" => {
                let a = c.arg()?;
                let (v, m) = match a.split_once("/") {
                    Some((v, m)) => (v, Some(m)),
                    None => (a, None),
                };
                Instruction::WriteMetadata {
                    metadata: parse_u64(v, "metadata")?,
                    metadata_mask: match m {
                        Some(m) => parse_u64(m, "a metadata mask")?,
                        None => u64::MAX,
                    },
                }
            }
            "write_actions" | "apply_actions" if c.parens => {
                let actions = match c.arg {
                    Some(a) => parse_action_list(a, ctx)?,
                    None => Vec::new(),
                };
                if c.lname == "write_actions" {
                    Instruction::WriteActions { actions }
                } else {
                    Instruction::ApplyActions { actions }
                }
            }
            "write_actions" | "apply_actions" => {
                return Err(c.name.err(format!(
                    "{} takes its actions in parentheses: {}(ACTIONS)",
                    c.name.quoted(),
                    c.lname
                )))
            }
            "clear_actions" => {
                c.no_arg()?;
                Instruction::ClearActions
            }
            "meter" => Instruction::Meter {
                meter_id: parse_u32(c.arg()?, "a meter id")?,
            },
            "experimenter_instruction" => {
                let (id, data) = experimenter_args(c.arg()?)?;
                Instruction::Experimenter {
                    experimenter: id,
                    data,
                }
            }
            _ => {
                let action = parse_action(p, ctx)?;
                match bare.and_then(|i| out.get_mut(i)) {
                    Some(Instruction::ApplyActions { actions }) => actions.push(action),
                    _ => {
                        bare = Some(out.len());
                        out.push(Instruction::ApplyActions {
                            actions: vec![action],
                        });
                    }
                }
                continue;
            }
        };
        bare = None;
        out.push(ins);
    }
    Ok(out)
}

/// Prints one action in its canonical form.
pub(crate) fn format_action(a: &Action) -> String {
    match a {
        Action::Output { port, max_len } if *port == port_no::CONTROLLER => {
            format!("CONTROLLER:{max_len}")
        }
        Action::Output { port, max_len: 0 } => format!("output:{}", format_port(*port)),
        Action::Output { port, max_len } => {
            format!("output(port={},max_len={max_len})", format_port(*port))
        }
        Action::CopyTtlOut => "copy_ttl_out".to_string(),
        Action::CopyTtlIn => "copy_ttl_in".to_string(),
        Action::SetMplsTtl { mpls_ttl } => format!("set_mpls_ttl:{mpls_ttl}"),
        Action::DecMplsTtl => "dec_mpls_ttl".to_string(),
        Action::PushVlan { ethertype } => format!("push_vlan:0x{ethertype:04x}"),
        Action::PopVlan => "pop_vlan".to_string(),
        Action::PushMpls { ethertype } => format!("push_mpls:0x{ethertype:04x}"),
        Action::PopMpls { ethertype } => format!("pop_mpls:0x{ethertype:04x}"),
        Action::SetQueue { queue_id } => format!("set_queue:{queue_id}"),
        Action::Group { group_id } => format!("group:{group_id}"),
        Action::SetNwTtl { nw_ttl } => format!("set_nw_ttl:{nw_ttl}"),
        Action::DecNwTtl => "dec_ttl".to_string(),
        Action::SetField {
            field: Oxm::Basic { field, value, mask },
        } => format!(
            "set_field:{}->{}",
            format_basic(*field, value, mask.as_ref()),
            field.name()
        ),
        Action::SetField {
            field:
                Oxm::Other {
                    class,
                    field,
                    hasmask,
                    body,
                },
        } => format!("set_oxm:{}", format_other(*class, *field, *hasmask, body)),
        Action::PushPbb { ethertype } => format!("push_pbb:0x{ethertype:04x}"),
        Action::PopPbb => "pop_pbb".to_string(),
        Action::Experimenter { experimenter, data } => {
            format!("experimenter:0x{experimenter:x}:{}", format_hex_bytes(data))
        }
    }
}

/// Prints a list of actions, comma separated (empty for none).
pub(crate) fn format_action_list(actions: &[Action]) -> String {
    actions
        .iter()
        .map(format_action)
        .collect::<Vec<_>>()
        .join(",")
}

/// Prints instructions in the canonical form (`drop` for none).
pub(crate) fn format_instructions(list: &[Instruction]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut prev_bare = false;
    for ins in list {
        let text = match ins {
            Instruction::ApplyActions { actions } if !actions.is_empty() && !prev_bare => {
                parts.push(format_action_list(actions));
                prev_bare = true;
                continue;
            }
            Instruction::ApplyActions { actions } => {
                format!("apply_actions({})", format_action_list(actions))
            }
            Instruction::WriteActions { actions } => {
                format!("write_actions({})", format_action_list(actions))
            }
            Instruction::ClearActions => "clear_actions".to_string(),
            Instruction::GotoTable { table_id } => format!("goto_table:{table_id}"),
            Instruction::WriteMetadata {
                metadata,
                metadata_mask: u64::MAX,
            } => format!("write_metadata:0x{metadata:x}"),
            Instruction::WriteMetadata {
                metadata,
                metadata_mask,
            } => format!("write_metadata:0x{metadata:x}/0x{metadata_mask:x}"),
            Instruction::Meter { meter_id } => format!("meter:{meter_id}"),
            Instruction::Experimenter { experimenter, data } => format!(
                "experimenter_instruction:0x{experimenter:x}:{}",
                format_hex_bytes(data)
            ),
        };
        prev_bare = false;
        parts.push(text);
    }
    if parts.is_empty() {
        "drop".to_string()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ofp::MacAddr;
    use std::net::Ipv4Addr;

    fn sf(field: OxmField, value: OxmValue) -> Action {
        set_field(field, value)
    }

    fn act(text: &str) -> Action {
        act_ctx(text, Context::default())
    }

    fn act_ctx(text: &str, ctx: Context) -> Action {
        parse_action(Tok::whole(text), ctx).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn ins(text: &str) -> Vec<Instruction> {
        parse_instructions(Tok::whole(text), Context::default())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// One of every action, with its canonical text.
    pub(crate) fn every_action() -> Vec<(Action, &'static str)> {
        vec![
            (
                Action::Output {
                    port: 2,
                    max_len: 0,
                },
                "output:2",
            ),
            (
                Action::Output {
                    port: port_no::LOCAL,
                    max_len: 0,
                },
                "output:LOCAL",
            ),
            (
                Action::Output {
                    port: 3,
                    max_len: 128,
                },
                "output(port=3,max_len=128)",
            ),
            (
                Action::Output {
                    port: port_no::CONTROLLER,
                    max_len: 128,
                },
                "CONTROLLER:128",
            ),
            (Action::CopyTtlOut, "copy_ttl_out"),
            (Action::CopyTtlIn, "copy_ttl_in"),
            (Action::SetMplsTtl { mpls_ttl: 64 }, "set_mpls_ttl:64"),
            (Action::DecMplsTtl, "dec_mpls_ttl"),
            (Action::PushVlan { ethertype: 0x8100 }, "push_vlan:0x8100"),
            (Action::PopVlan, "pop_vlan"),
            (Action::PushMpls { ethertype: 0x8847 }, "push_mpls:0x8847"),
            (Action::PopMpls { ethertype: 0x0800 }, "pop_mpls:0x0800"),
            (Action::SetQueue { queue_id: 7 }, "set_queue:7"),
            (Action::Group { group_id: 9 }, "group:9"),
            (Action::SetNwTtl { nw_ttl: 3 }, "set_nw_ttl:3"),
            (Action::DecNwTtl, "dec_ttl"),
            (
                sf(OxmField::VlanVid, OxmValue::U16(0x1001)),
                "set_field:0x1001->vlan_vid",
            ),
            (
                sf(OxmField::Ipv4Dst, OxmValue::Ipv4(Ipv4Addr::new(1, 2, 3, 4))),
                "set_field:1.2.3.4->ipv4_dst",
            ),
            (
                Action::SetField {
                    field: Oxm::Other {
                        class: 0xffff,
                        field: 1,
                        hasmask: false,
                        body: vec![0, 0, 0x23, 0x20, 1],
                    },
                },
                "set_oxm:0xffff:1:0:0000232001",
            ),
            (Action::PushPbb { ethertype: 0x88e7 }, "push_pbb:0x88e7"),
            (Action::PopPbb, "pop_pbb"),
            (
                Action::Experimenter {
                    experimenter: 0x2320,
                    data: vec![0, 1, 2, 3, 4, 5],
                },
                "experimenter:0x2320:000102030405",
            ),
        ]
    }

    #[test]
    fn every_action_prints_and_parses_back() {
        for (a, text) in every_action() {
            assert_eq!(format_action(&a), text);
            assert_eq!(act(text), a, "{text}");
        }
    }

    #[test]
    fn every_settable_field_round_trips_in_set_field() {
        for &field in OxmField::ALL {
            let (v, _) = crate::match_text::tests::sample(field);
            let a = sf(field, v);
            let text = format_action(&a);
            if field.settable() {
                assert_eq!(act(&text), a, "{text}");
            } else {
                let e = parse_action(Tok::whole(&text), Context::default()).unwrap_err();
                assert_eq!(e.token, field.name());
            }
        }
    }

    #[test]
    fn alternative_spellings() {
        let out = |port| Action::Output { port, max_len: 0 };
        let ctl = |max_len| Action::Output {
            port: port_no::CONTROLLER,
            max_len,
        };
        let mac = OxmValue::Mac(MacAddr([0, 0, 0, 0, 0, 1]));
        let ip = OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let cases = vec![
            ("output=5", out(5)),
            ("5", out(5)),
            ("0x10", out(16)),
            ("LOCAL", out(port_no::LOCAL)),
            ("local", out(port_no::LOCAL)),
            ("in_port", out(port_no::IN_PORT)),
            ("IN_PORT", out(port_no::IN_PORT)),
            ("all", out(port_no::ALL)),
            ("flood", out(port_no::FLOOD)),
            ("normal", out(port_no::NORMAL)),
            ("table", out(port_no::TABLE)),
            ("output:normal", out(port_no::NORMAL)),
            ("output(port=LOCAL,max_len=0)", out(port_no::LOCAL)),
            ("controller", ctl(0xffff)),
            ("CONTROLLER", ctl(0xffff)),
            ("output:CONTROLLER", ctl(0xffff)),
            ("controller:64", ctl(64)),
            ("controller(max_len=64)", ctl(64)),
            ("controller()", ctl(0xffff)),
            ("strip_vlan", Action::PopVlan),
            ("mod_nw_ttl:9", Action::SetNwTtl { nw_ttl: 9 }),
            ("dec_nw_ttl", Action::DecNwTtl),
            ("mod_dl_src:00:00:00:00:00:01", sf(OxmField::EthSrc, mac)),
            ("mod_dl_dst:00:00:00:00:00:01", sf(OxmField::EthDst, mac)),
            (
                "mod_vlan_vid:5",
                sf(OxmField::VlanVid, OxmValue::U16(0x1005)),
            ),
            ("mod_vlan_pcp:5", sf(OxmField::VlanPcp, OxmValue::U8(5))),
            ("mod_nw_src:10.0.0.1", sf(OxmField::Ipv4Src, ip)),
            ("mod_nw_dst:10.0.0.1", sf(OxmField::Ipv4Dst, ip)),
            ("mod_nw_tos:0xb8", sf(OxmField::IpDscp, OxmValue::U8(46))),
            ("mod_nw_ecn:3", sf(OxmField::IpEcn, OxmValue::U8(3))),
            (
                "set_mpls_label:17",
                sf(OxmField::MplsLabel, OxmValue::U32(17)),
            ),
            ("set_mpls_tc:5", sf(OxmField::MplsTc, OxmValue::U8(5))),
            (
                "set_tunnel:0x99",
                sf(OxmField::TunnelId, OxmValue::U64(0x99)),
            ),
            ("set_tunnel64:7", sf(OxmField::TunnelId, OxmValue::U64(7))),
            (
                "set_field:00:00:00:00:00:01->dl_dst",
                sf(OxmField::EthDst, mac),
            ),
            (
                "set_field:4097->vlan_vid",
                sf(OxmField::VlanVid, OxmValue::U16(4097)),
            ),
            (
                "set_field:::1->ipv6_src",
                sf(
                    OxmField::Ipv6Src,
                    OxmValue::Ipv6(std::net::Ipv6Addr::LOCALHOST),
                ),
            ),
            (
                "experimenter:8992:",
                Action::Experimenter {
                    experimenter: 8992,
                    data: vec![],
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(act(text), want, "{text}");
        }
        for (proto, src, dst) in [
            (6, OxmField::TcpSrc, OxmField::TcpDst),
            (17, OxmField::UdpSrc, OxmField::UdpDst),
            (132, OxmField::SctpSrc, OxmField::SctpDst),
        ] {
            let ctx = Context {
                ip_proto: Some(proto),
            };
            assert_eq!(act_ctx("mod_tp_src:80", ctx), sf(src, OxmValue::U16(80)));
            assert_eq!(act_ctx("mod_tp_dst:80", ctx), sf(dst, OxmValue::U16(80)));
        }
    }

    /// Instruction lists with their canonical text.
    pub(crate) fn every_instruction() -> Vec<(Vec<Instruction>, &'static str)> {
        let out = |port| Action::Output { port, max_len: 0 };
        vec![
            (vec![], "drop"),
            (
                vec![Instruction::ApplyActions {
                    actions: vec![out(1), out(2)],
                }],
                "output:1,output:2",
            ),
            (
                vec![Instruction::ApplyActions { actions: vec![] }],
                "apply_actions()",
            ),
            (
                vec![
                    Instruction::Meter { meter_id: 3 },
                    Instruction::ApplyActions {
                        actions: vec![Action::PopVlan],
                    },
                    Instruction::ClearActions,
                    Instruction::WriteActions {
                        actions: vec![out(1), Action::Group { group_id: 2 }],
                    },
                    Instruction::WriteMetadata {
                        metadata: 0x10,
                        metadata_mask: 0xff,
                    },
                    Instruction::GotoTable { table_id: 4 },
                ],
                "meter:3,pop_vlan,clear_actions,write_actions(output:1,group:2),write_metadata:0x10/0xff,goto_table:4",
            ),
            (
                vec![
                    Instruction::WriteMetadata {
                        metadata: 5,
                        metadata_mask: u64::MAX,
                    },
                    Instruction::WriteActions { actions: vec![] },
                ],
                "write_metadata:0x5,write_actions()",
            ),
            (
                vec![
                    Instruction::ApplyActions {
                        actions: vec![out(1)],
                    },
                    Instruction::ApplyActions {
                        actions: vec![out(2)],
                    },
                    Instruction::GotoTable { table_id: 1 },
                    Instruction::ApplyActions {
                        actions: vec![out(3)],
                    },
                ],
                "output:1,apply_actions(output:2),goto_table:1,output:3",
            ),
            (
                vec![Instruction::Experimenter {
                    experimenter: 0xabc,
                    data: vec![1, 2],
                }],
                "experimenter_instruction:0xabc:0102",
            ),
        ]
    }

    #[test]
    fn every_instruction_prints_and_parses_back() {
        for (list, text) in every_instruction() {
            assert_eq!(format_instructions(&list), text);
            assert_eq!(ins(text), list, "{text}");
        }
        for (a, text) in every_action() {
            for wrapper in ["apply_actions", "write_actions"] {
                let t = format!("{wrapper}({text},{text})");
                let actions = vec![a.clone(), a.clone()];
                let want = if wrapper == "apply_actions" {
                    Instruction::ApplyActions { actions }
                } else {
                    Instruction::WriteActions { actions }
                };
                assert_eq!(ins(&t), vec![want], "{t}");
            }
        }
    }

    #[test]
    fn drop_and_empty_lists() {
        assert_eq!(ins("drop"), vec![]);
        assert_eq!(ins(""), vec![]);
        assert_eq!(
            ins("write_actions(drop)"),
            vec![Instruction::WriteActions { actions: vec![] }]
        );
    }

    fn err(text: &str) -> (String, usize) {
        let e = parse_instructions(Tok::whole(text), Context::default()).unwrap_err();
        assert!(
            e.message.contains(&e.token),
            "{text}: {} does not name {:?}",
            e.message,
            e.token
        );
        (e.token, e.position)
    }

    #[test]
    fn errors_name_the_token_and_position() {
        assert_eq!(err("output:1,outptu:2"), ("outptu".to_string(), 9));
        assert_eq!(err("output:1,drop"), ("drop".to_string(), 9));
        assert_eq!(err("output:x"), ("x".to_string(), 7));
        assert_eq!(err("output"), ("output".to_string(), 0));
        assert_eq!(err("pop_vlan:1"), ("1".to_string(), 9));
        assert_eq!(err("set_field:1->nope"), ("nope".to_string(), 13));
        assert_eq!(err("set_field:8192->vlan_vid"), ("8192".to_string(), 10));
        assert_eq!(err("set_field:1/1->vlan_vid"), ("1".to_string(), 12));
        assert_eq!(err("set_field:1"), ("1".to_string(), 10));
        assert_eq!(err("set_field:1->metadata"), ("metadata".to_string(), 13));
        assert_eq!(err("mod_vlan_vid:4096"), ("4096".to_string(), 13));
        assert_eq!(err("mod_tp_dst:80"), ("mod_tp_dst".to_string(), 0));
        assert_eq!(err("goto_table:256"), ("256".to_string(), 11));
        assert_eq!(err("write_actions(output:1"), ("(".to_string(), 13));
        assert_eq!(err("write_actions(output:1))"), (")".to_string(), 23));
        assert_eq!(err("write_actions(output:1)x"), ("x".to_string(), 23));
        assert_eq!(err("write_actions:1"), ("write_actions".to_string(), 0));
        assert_eq!(
            err("write_actions(goto_table:1)"),
            ("goto_table".to_string(), 14)
        );
        assert_eq!(err("controller(reason=1)"), ("reason".to_string(), 11));
        assert_eq!(
            err("output(max_len=1)"),
            ("output(max_len=1)".to_string(), 0)
        );
        assert_eq!(err("experimenter:1:abc"), ("abc".to_string(), 15));
        assert_eq!(err("push_vlan:0x10000"), ("0x10000".to_string(), 10));
        assert_eq!(err("ANY"), ("ANY".to_string(), 0));
        assert_eq!(err("mod_nw_tos:1"), ("1".to_string(), 11));
        assert_eq!(err("set_mpls_label:0x100000"), ("0x100000".to_string(), 15));
        assert_eq!(err("mod_nw_ecn:4"), ("4".to_string(), 11));
    }
}
