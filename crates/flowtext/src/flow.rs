//! Flows: `parse_flow` / `format_flow`.
//!
//! Text: an optional leading command word (`add`, `modify`,
//! `modify_strict`, `delete`, `delete_strict`, as in ovs-ofctl flow files),
//! then comma- or space-separated pieces: flow keys, match fields, and last
//! `actions=...`, which takes the rest of the text.
//!
//! Flow keys: `table` (a number; `all` = 255, only for deletes), `priority`,
//! `cookie=V[/MASK]` (a mask only for modify/delete; `/-1` is all ones), `idle_timeout`,
//! `hard_timeout`, `out_port` (number or port name), `out_group` (number,
//! `any`, `all`), `buffer_id`, the flag words `send_flow_rem`,
//! `check_overlap`, `reset_counts`, `no_packet_counts`, `no_byte_counts`,
//! and `flags=N` for raw `OFPFF_*` bits the words do not cover. What
//! `ovs-ofctl dump-flows` prints besides a flow (`duration`, `n_packets`,
//! `n_bytes`, `idle_age`, `hard_age`) is ignored, so its output reads
//! back. `importance` (OpenFlow 1.4) is refused, where ovs-ofctl leaves it
//! out of an OpenFlow 1.3 flow.
//!
//! Defaults are [`FlowMod::default`]'s, except that delete commands default
//! to `table=255` (all tables) as ovs-ofctl's del-flows does. The actions
//! are checked against the match (see [`crate::actions`]) and
//! `goto_table` must go to a later table than an added flow's.
//!
//! `actions=` is required for add and modify (`actions=drop`, or
//! `actions=` with nothing after it, means no instructions); for delete it
//! is optional. Any key may appear once.
//!
//! Canonical printed form (what [`format_flow`] emits): the command word
//! and a space unless the command is add; `table=T,priority=P`; then, only
//! when not the default, `cookie=0xC[/0xM]`, `idle_timeout`,
//! `hard_timeout`, `out_port`, `out_group`, `buffer_id`, the flag words and
//! `flags=0x..` for unnamed bits; the match fields in the match's order
//! (OXM names; shorthands where an `eth_type`/`ip_proto` pair stands for
//! one); and `actions=...` (omitted for a delete without instructions).

use crate::actions::{format_instructions, parse_instructions, Packet};
use crate::lexer::{command_and_pieces, flag_word, key_value, Tok};
use crate::match_text::{format_match, MatchBuilder};
use crate::value::{
    format_group_id, format_port, parse_group_id, parse_port, parse_u16, parse_u32, parse_u64,
    parse_u8,
};
use crate::ParseError;
use ofp::consts::{group_no, port_no, table_no, OFP_NO_BUFFER};
use ofp::flow_mod::flow_mod_flags as ff;
use ofp::{FlowMod, FlowModCommand};

const FLAG_WORDS: &[(&str, u16)] = words![ff:
    "send_flow_rem" => SEND_FLOW_REM, "check_overlap" => CHECK_OVERLAP,
    "reset_counts" => RESET_COUNTS, "no_packet_counts" => NO_PKT_COUNTS,
    "no_byte_counts" => NO_BYT_COUNTS,
];

const COMMAND_WORDS: &[(&str, FlowModCommand)] = words![FlowModCommand:
    "add" => Add, "modify" => Modify, "modify_strict" => ModifyStrict, "delete" => Delete,
    "delete_strict" => DeleteStrict,
];

/// Parses one flow; the command is add unless the text starts with a
/// command word.
pub fn parse_flow(text: &str) -> Result<FlowMod, ParseError> {
    parse_flow_command(text, FlowModCommand::Add)
}

fn is_delete(c: FlowModCommand) -> bool {
    matches!(c, FlowModCommand::Delete | FlowModCommand::DeleteStrict)
}

/// Parses one flow with `command` unless the text starts with a command
/// word (`ovs-ofctl mod-flows`/`del-flows` pass theirs here).
pub fn parse_flow_command(text: &str, command: FlowModCommand) -> Result<FlowMod, ParseError> {
    let whole = Tok::whole(text);
    let (command, pieces) = command_and_pieces(whole, COMMAND_WORDS, command)?;
    let mut fm = FlowMod {
        command,
        ..FlowMod::default()
    };
    if is_delete(fm.command) {
        fm.table_id = table_no::ALL;
    }
    let mut matcher = MatchBuilder::default();
    let mut seen: Vec<&str> = Vec::new();
    let mut actions: Option<Tok<'_>> = None;
    let mut cookie_mask: Option<Tok<'_>> = None;
    let mut table_all: Option<Tok<'_>> = None;
    for &piece in &pieces {
        let (key, value) = key_value(piece);
        if key.text == "actions" {
            // Everything after "actions=" is the action list.
            actions = Some(whole.from(piece.pos + "actions".len() + 1));
            if value.is_none() {
                return Err(piece.err("\"actions\" needs \"=\""));
            }
            break;
        }
        if flag_word(FLAG_WORDS, &mut fm.flags, key, value)? {
            continue;
        }
        if matcher.take(key, value)? {
            continue;
        }
        // What dump-flows prints besides the flow: ignored, so that its
        // output can be read back (ovs-ofctl(8)).
        if matches!(
            key.text,
            "duration" | "n_packets" | "n_bytes" | "idle_age" | "hard_age"
        ) {
            continue;
        }
        let flow_key = matches!(
            key.text,
            "table"
                | "priority"
                | "cookie"
                | "idle_timeout"
                | "hard_timeout"
                | "out_port"
                | "out_group"
                | "buffer_id"
                | "flags"
        );
        if !flow_key {
            return Err(key.err(format!("unknown field {}", key.quoted())));
        }
        if seen.contains(&key.text) {
            return Err(key.err(format!("duplicate key {}", key.quoted())));
        }
        seen.push(key.text);
        let v = value.ok_or_else(|| key.err(format!("{} needs a value", key.quoted())))?;
        match key.text {
            "table" => {
                fm.table_id = if v.text.eq_ignore_ascii_case("all") {
                    table_no::ALL
                } else {
                    parse_u8(v, "a table id")?
                };
                table_all = (fm.table_id == table_no::ALL).then_some(v);
            }
            "priority" => fm.priority = parse_u16(v, "a priority")?,
            "cookie" => {
                let (c, m) = match v.split_once("/") {
                    Some((c, m)) => (c, Some(m)),
                    None => (v, None),
                };
                fm.cookie = parse_u64(c, "a cookie")?;
                if let Some(m) = m {
                    // "-1" is ovs's spelling of the all-ones mask.
                    fm.cookie_mask = if m.text == "-1" {
                        u64::MAX
                    } else {
                        parse_u64(m, "a cookie mask")?
                    };
                    cookie_mask = Some(m);
                }
            }
            "idle_timeout" => fm.idle_timeout = parse_u16(v, "a timeout")?,
            "hard_timeout" => fm.hard_timeout = parse_u16(v, "a timeout")?,
            "out_port" => fm.out_port = parse_port(v)?,
            "out_group" => fm.out_group = parse_group_id(v)?,
            "buffer_id" => fm.buffer_id = parse_u32(v, "a buffer id")?,
            _ => fm.flags |= parse_u16(v, "flags")?,
        }
    }
    if let (false, Some(t)) = (is_delete(fm.command), table_all) {
        return Err(t.err(format!(
            "table {} (all tables) is only for deleting; a flow is added to or modified in one table",
            t.quoted()
        )));
    }
    if let (FlowModCommand::Add, Some(m)) = (fm.command, cookie_mask) {
        return Err(m.err(format!(
            "cookie mask {} is only for modify and delete",
            m.quoted()
        )));
    }
    fm.match_ = matcher.finish()?;
    // goto_table must go forward from the table a flow is added to.
    let table = (!is_delete(fm.command)).then_some(fm.table_id);
    let mut packet = Packet::of_flow(&fm.match_, table);
    match actions {
        Some(a) => fm.instructions = parse_instructions(a, &mut packet)?,
        None if !is_delete(fm.command) => {
            return Err(ParseError::new(
                "missing \"actions=\" (needed to add or modify a flow; actions=drop drops)",
                "",
                text.len(),
            ))
        }
        None => {}
    }
    Ok(fm)
}

/// Prints a flow in the canonical form described in the module comment;
/// [`parse_flow`] gives back an equal `FlowMod` for every flow the syntax
/// can express.
pub fn format_flow(fm: &FlowMod) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.push(format!("table={}", fm.table_id));
    parts.push(format!("priority={}", fm.priority));
    if fm.cookie_mask != 0 {
        parts.push(format!("cookie=0x{:x}/0x{:x}", fm.cookie, fm.cookie_mask));
    } else if fm.cookie != 0 {
        parts.push(format!("cookie=0x{:x}", fm.cookie));
    }
    if fm.idle_timeout != 0 {
        parts.push(format!("idle_timeout={}", fm.idle_timeout));
    }
    if fm.hard_timeout != 0 {
        parts.push(format!("hard_timeout={}", fm.hard_timeout));
    }
    if fm.out_port != port_no::ANY {
        parts.push(format!("out_port={}", format_port(fm.out_port)));
    }
    if fm.out_group != group_no::ANY {
        parts.push(format!("out_group={}", format_group_id(fm.out_group)));
    }
    if fm.buffer_id != OFP_NO_BUFFER {
        parts.push(format!("buffer_id={}", fm.buffer_id));
    }
    let mut named = 0;
    for &(word, bit) in FLAG_WORDS {
        if fm.flags & bit != 0 {
            parts.push(word.to_string());
            named |= bit;
        }
    }
    if fm.flags & !named != 0 {
        parts.push(format!("flags=0x{:x}", fm.flags & !named));
    }
    format_match(&fm.match_, &mut parts);
    if !(is_delete(fm.command) && fm.instructions.is_empty()) {
        parts.push(format!("actions={}", format_instructions(&fm.instructions)));
    }
    let body = parts.join(",");
    match COMMAND_WORDS.iter().find(|&&(_, c)| c == fm.command) {
        Some(&(word, c)) if c != FlowModCommand::Add => format!("{word} {body}"),
        _ => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::{assert_text_round_trip, refused};
    use ofp::{Action, Instruction, Match, Oxm, OxmField, OxmValue};

    fn b(field: OxmField, value: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: None,
        }
    }

    fn round_trip(fm: &FlowMod) {
        assert_text_round_trip(fm, format_flow, parse_flow);
    }

    #[test]
    fn the_example_flow() {
        let text = "table=0,priority=100,in_port=1,dl_type=0x8847,mpls_label=16,\
                    actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4097->vlan_vid,output:2";
        let fm = parse_flow(text).unwrap();
        let want = FlowMod {
            priority: 100,
            match_: Match {
                fields: vec![
                    b(OxmField::InPort, OxmValue::U32(1)),
                    b(OxmField::EthType, OxmValue::U16(0x8847)),
                    b(OxmField::MplsLabel, OxmValue::U32(16)),
                ],
            },
            instructions: vec![Instruction::ApplyActions {
                actions: vec![
                    Action::PopMpls { ethertype: 0x0800 },
                    Action::PushVlan { ethertype: 0x8100 },
                    Action::SetField {
                        field: b(OxmField::VlanVid, OxmValue::U16(4097)),
                    },
                    Action::Output {
                        port: 2,
                        max_len: 0,
                    },
                ],
            }],
            ..FlowMod::default()
        };
        assert_eq!(fm, want);
        assert_eq!(
            format_flow(&fm),
            "table=0,priority=100,in_port=1,mpls,mpls_label=16,\
             actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:0x1001->vlan_vid,output:2"
        );
        round_trip(&fm);
    }

    #[test]
    fn flow_keys_and_flags() {
        let text = "table=3 priority=7 cookie=0x10 idle_timeout=60 hard_timeout=300 \
                    out_port=LOCAL out_group=5 buffer_id=9 send_flow_rem check_overlap \
                    reset_counts no_packet_counts no_byte_counts flags=0x100 actions=drop";
        let fm = parse_flow(text).unwrap();
        assert_eq!(fm.table_id, 3);
        assert_eq!(fm.priority, 7);
        assert_eq!(fm.cookie, 0x10);
        assert_eq!((fm.idle_timeout, fm.hard_timeout), (60, 300));
        assert_eq!(fm.out_port, port_no::LOCAL);
        assert_eq!(fm.out_group, 5);
        assert_eq!(fm.buffer_id, 9);
        assert_eq!(fm.flags, 0x11f);
        assert!(fm.instructions.is_empty());
        assert_eq!(
            format_flow(&fm),
            "table=3,priority=7,cookie=0x10,idle_timeout=60,hard_timeout=300,out_port=LOCAL,\
             out_group=5,buffer_id=9,send_flow_rem,check_overlap,reset_counts,no_packet_counts,\
             no_byte_counts,flags=0x100,actions=drop"
        );
        round_trip(&fm);
    }

    #[test]
    fn commands() {
        let fm = parse_flow("delete in_port=1").unwrap();
        assert_eq!(fm.command, FlowModCommand::Delete);
        assert_eq!(fm.table_id, table_no::ALL);
        assert_eq!(
            format_flow(&fm),
            "delete table=255,priority=32768,in_port=1"
        );
        round_trip(&fm);
        let fm = parse_flow("modify_strict cookie=1/0xff,priority=5,actions=output:1").unwrap();
        assert_eq!(fm.command, FlowModCommand::ModifyStrict);
        assert_eq!((fm.cookie, fm.cookie_mask), (1, 0xff));
        round_trip(&fm);
        let fm = parse_flow("delete cookie=0x5/-1").unwrap();
        assert_eq!((fm.cookie, fm.cookie_mask), (5, u64::MAX));
        round_trip(&fm);
        let fm = parse_flow_command("in_port=1,table=all", FlowModCommand::DeleteStrict).unwrap();
        assert_eq!(fm.command, FlowModCommand::DeleteStrict);
        assert_eq!(fm.table_id, 255);
        for c in [
            FlowModCommand::Add,
            FlowModCommand::Modify,
            FlowModCommand::ModifyStrict,
            FlowModCommand::Delete,
            FlowModCommand::DeleteStrict,
        ] {
            round_trip(&FlowMod {
                command: c,
                cookie: 3,
                cookie_mask: if c == FlowModCommand::Add { 0 } else { 7 },
                ..FlowMod::default()
            });
        }
    }

    #[test]
    fn every_field_round_trips_in_a_flow() {
        for &field in OxmField::ALL {
            let (v, m) = crate::match_text::tests::sample(field);
            let mut fields = crate::match_text::tests::prereqs(field);
            fields.push(if field.maskable() {
                Oxm::Basic {
                    field,
                    value: v,
                    mask: Some(m),
                }
            } else {
                b(field, v)
            });
            round_trip(&FlowMod {
                match_: Match { fields },
                ..FlowMod::default()
            });
        }
    }

    /// A match under which `a` is consistent.
    fn match_for(a: &Action) -> Match {
        let tagged = || crate::match_text::tests::prereqs(OxmField::VlanPcp);
        let eth = |t: u16| vec![b(OxmField::EthType, OxmValue::U16(t))];
        let fields = match a {
            Action::PopVlan => tagged(),
            Action::PopMpls { .. } | Action::SetMplsTtl { .. } | Action::DecMplsTtl => eth(0x8847),
            Action::SetNwTtl { .. } | Action::DecNwTtl => eth(0x0800),
            Action::PopPbb => eth(0x88e7),
            Action::SetField {
                field:
                    Oxm::Basic {
                        field: OxmField::VlanVid | OxmField::VlanPcp,
                        ..
                    },
            } => tagged(),
            Action::SetField {
                field: Oxm::Basic { field, .. },
            } => crate::match_text::tests::prereqs(*field),
            _ => vec![],
        };
        Match { fields }
    }

    #[test]
    fn every_action_and_instruction_round_trips_in_a_flow() {
        for (a, _) in crate::actions::tests::every_action() {
            round_trip(&FlowMod {
                match_: match_for(&a),
                instructions: vec![Instruction::ApplyActions {
                    actions: vec![a.clone()],
                }],
                ..FlowMod::default()
            });
            round_trip(&FlowMod {
                match_: match_for(&a),
                instructions: vec![Instruction::WriteActions { actions: vec![a] }],
                ..FlowMod::default()
            });
        }
        for (list, _) in crate::actions::tests::every_instruction() {
            round_trip(&FlowMod {
                match_: match_for(&Action::PopVlan),
                instructions: list,
                ..FlowMod::default()
            });
        }
    }

    #[test]
    fn dump_flows_output_reads_back() {
        // What ovs-ofctl dump-flows prints, statistics and all.
        let text = "cookie=0x5, duration=0.5s, table=1, n_packets=7, n_bytes=700, \
                    idle_timeout=10, hard_timeout=20, idle_age=3, hard_age=4, send_flow_rem \
                    priority=100,tcp,in_port=1,nw_src=10.0.0.0/8,tp_dst=80 actions=output:2";
        let fm = parse_flow(text).unwrap();
        assert_eq!(
            fm,
            parse_flow(
                "cookie=0x5,table=1,idle_timeout=10,hard_timeout=20,send_flow_rem,\
                 priority=100,tcp,in_port=1,nw_src=10.0.0.0/8,tp_dst=80,actions=output:2"
            )
            .unwrap()
        );
    }

    #[test]
    fn a_flow_goes_into_one_table_and_forward_from_it() {
        assert_eq!(err("table=255,actions=drop").token, "255");
        assert_eq!(err("modify table=all,actions=drop").token, "all");
        assert_eq!(err("table=2,actions=goto_table:2").token, "2");
        assert!(parse_flow("table=2,actions=goto_table:3").is_ok());
        // A delete may name every table; goto_table is not checked there.
        assert!(parse_flow("delete table=255").is_ok());
    }

    #[test]
    fn everyday_ovs_ofctl_lines() {
        for text in [
            "priority=10,in_port=1,dl_vlan=100,actions=strip_vlan,output:2",
            "table=0,priority=100,arp,arp_tpa=10.0.0.1,actions=NORMAL",
            "ip,nw_dst=192.168.0.0/16,actions=mod_dl_dst:00:00:00:00:00:01,output:3",
            "in_port=1,actions=output:2,output:3",
            "tcp,tp_dst=80,actions=controller",
            "priority=0,actions=CONTROLLER:65535",
            "dl_dst=ff:ff:ff:ff:ff:ff,actions=flood",
            "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
            "table=0,in_port=1,actions=goto_table:1",
            "table=1 actions=write_actions(output:2),write_metadata:0x1/0xff,goto_table:2",
            "in_port=LOCAL actions=meter:1,output:2",
            "in_port=1 actions=mod_vlan_vid:10,output:2",
            "udp,nw_src=10.0.0.0/24,tp_dst=53,actions=set_queue:1,normal",
            "ipv6,ipv6_dst=2001:db8::/64,actions=dec_ttl,output:4",
            "mpls,mpls_label=100,mpls_bos=1,actions=pop_mpls:0x0800,output:1",
            "in_port=2,actions=push_mpls:0x8847,set_field:200->mpls_label,output:1",
            "in_port=3,actions=push_pbb:0x88e7,set_field:0x123456->pbb_isid,output:1",
            "dl_type=0x0800,nw_proto=6,actions=group:1",
            "icmp6,icmp_type=135,nd_target=fe80::1,actions=LOCAL",
            "metadata=0x1/0x1,actions=clear_actions,apply_actions(output:1)",
        ] {
            let fm = parse_flow(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            round_trip(&fm);
        }
    }

    #[test]
    fn mod_tp_uses_the_flows_ip_proto() {
        let fm = parse_flow("udp,actions=mod_tp_dst:53").unwrap();
        assert_eq!(
            fm.instructions,
            vec![Instruction::ApplyActions {
                actions: vec![Action::SetField {
                    field: b(OxmField::UdpDst, OxmValue::U16(53))
                }]
            }]
        );
        assert!(parse_flow("ip,actions=mod_tp_dst:53").is_err());
    }

    fn err(text: &str) -> ParseError {
        refused(parse_flow, text)
    }

    #[test]
    fn errors_name_the_token_and_position() {
        let e = err("table=0,priority=1,eth_dts=00:00:00:00:00:01,actions=drop");
        assert_eq!((e.token.as_str(), e.position), ("eth_dts", 19));
        assert_eq!(e.to_string(), "at column 20: unknown field \"eth_dts\"");
        assert_eq!(err("priority=65536,actions=drop").token, "65536");
        assert_eq!(err("priority=1,priority=2,actions=drop").position, 11);
        assert_eq!(err("table=256,actions=drop").token, "256");
        assert_eq!(err("table=x,actions=drop").token, "x");
        assert_eq!(err("cookie=1/2,actions=drop").token, "2");
        assert_eq!(err("send_flow_rem=1,actions=drop").token, "1");
        assert_eq!(err("send_flow_rem,send_flow_rem,actions=drop").position, 14);
        assert_eq!(err("priority,actions=drop").token, "priority");
        assert_eq!(err("in_port=1,actions=output:1,bogus").token, "bogus");
        assert_eq!(err("in_port=1,actions=output:1)").token, ")");
        assert_eq!(err("in_port=1,actions=write_actions(output:1").token, "(");
        assert_eq!(err("actions").token, "actions");
        let e = err("in_port=1");
        assert_eq!((e.token.as_str(), e.position), ("", 9));
        assert!(e.message.contains("actions="));
        let e = err("modify in_port=1");
        assert_eq!(e.position, 16);
        assert_eq!(err("vlan_vid=0x2000,actions=drop").token, "0x2000");
        assert_eq!(err("mpls_label=0x100000,actions=drop").token, "0x100000");
        assert_eq!(err("ip_proto=1/1,actions=drop").token, "1");
        assert_eq!(err("ip,ip,actions=drop").position, 3);
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        for text in [
            "",
            ",",
            "=",
            "==",
            "actions=",
            "actions=,",
            "(",
            ")",
            "((",
            "a(b)c",
            "é=é",
            "in_port=é",
            "actions=é",
            "actions=output:é",
            "actions=set_field:->",
            "actions=set_field:é->é",
            "eth_dst=é:é",
            "ipv6_src=::/é",
            "oxm=:::",
            "table=0x",
            "cookie=/",
            "actions=write_actions(é",
            "actions=output(port=é)",
            "actions=experimenter:é",
            "delete",
            "delete actions=",
            "\u{0}",
            "actions=\u{0}",
        ] {
            let _ = parse_flow(text);
        }
        assert_eq!(parse_flow("actions=").unwrap().instructions, vec![]);
        assert!(parse_flow("delete").is_ok());
    }
}
