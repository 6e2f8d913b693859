//! Groups: `parse_group` / `format_group`.
//!
//! Text: an optional command word (`add`, `modify`, `delete`), then
//! `group_id=N` (a number, `all` or `any`), `type=all|select|indirect|ff`
//! (`fast_failover` too), then the buckets, last:
//! `bucket=[weight:N,][watch_port:P,][watch_group:G,]actions=ACTIONS`.
//! Bucket parameters take `:` or `=`; without `actions=` the rest of the
//! bucket is its actions (`bucket=output:1`). A bucket ends where the next
//! `bucket=` starts. `group_id` is required except for delete (default
//! `all`), `type` except for delete (default `all`). A bucket's weight
//! defaults to 1 in a select group and 0 otherwise; watch port and group
//! default to `ANY`. As ovs-ofctl requires (adds and modifies): an
//! indirect group has exactly one bucket, a fast-failover bucket watches a
//! port or a group, only select groups weigh buckets, only select and
//! fast-failover groups watch; `group_id=any` and numbers above 0xffffff00
//! other than `all`'s are refused. A bucket's actions are not checked
//! against a match (a group has none) and start with an untagged packet:
//! `mod_vlan_vid` pushes a tag there. `bucket_id` and `selection_method`
//! (OpenFlow 1.5) are refused, where ovs-ofctl drops them from an OpenFlow
//! 1.3 group.
//!
//! Canonical printed form: the command word and a space unless add, then
//! `group_id=N,type=T` and each bucket as `bucket=weight:W,` (printed in
//! select groups, or when not 0) `watch_port:P,` and `watch_group:G,`
//! (when not ANY) `actions=ACTIONS` (`drop` when empty).

use crate::actions::{format_action_list, parse_action_list, Packet};
use crate::lexer::{command_and_pieces, key_value, split_list, Tok};
use crate::value::{format_group_id, format_port, parse_group_id, parse_port, parse_u16};
use crate::ParseError;
use ofp::consts::{group_no, port_no};
use ofp::{Bucket, GroupMod, GroupModCommand, GroupType};

const COMMAND_WORDS: &[(&str, GroupModCommand)] = words![GroupModCommand:
    "add" => Add, "modify" => Modify, "delete" => Delete,
];

const TYPES: &[(&str, GroupType)] = words![GroupType:
    "all" => All, "select" => Select, "indirect" => Indirect, "ff" => FastFailover,
    "fast_failover" => FastFailover,
];

/// Parses one group; the command is add unless the text starts with a
/// command word.
pub fn parse_group(text: &str) -> Result<GroupMod, ParseError> {
    parse_group_command(text, GroupModCommand::Add)
}

/// Parses one group with `command` unless the text starts with a command
/// word.
pub fn parse_group_command(text: &str, command: GroupModCommand) -> Result<GroupMod, ParseError> {
    let whole = Tok::whole(text);
    let (command, pieces) = command_and_pieces(whole, COMMAND_WORDS, command)?;
    let mut gm = GroupMod {
        command,
        group_type: GroupType::All,
        group_id: group_no::ALL,
        buckets: Vec::new(),
    };
    let mut id_seen = false;
    let mut id_tok: Option<Tok<'_>> = None;
    let mut type_seen = false;
    // Start offsets of the buckets' texts (after "bucket=").
    let mut bucket_starts: Vec<Tok<'_>> = Vec::new();
    for &piece in &pieces {
        let (key, value) = key_value(piece);
        if key.text == "bucket" {
            bucket_starts.push(piece);
            continue;
        }
        if !bucket_starts.is_empty() {
            continue; // inside a bucket
        }
        let v = match (key.text, value) {
            ("group_id" | "type", Some(v)) => v,
            ("group_id" | "type", None) => {
                return Err(key.err(format!("{} needs a value", key.quoted())))
            }
            _ => return Err(key.err(format!("unknown group key {}", key.quoted()))),
        };
        if key.text == "group_id" {
            if id_seen {
                return Err(key.err("duplicate key \"group_id\""));
            }
            id_seen = true;
            id_tok = Some(v);
            gm.group_id = parse_group_id(v)?;
            // Only the reserved number "all" (0xfffffffc) may be written
            // as a number above the largest group, as in ovs-ofctl.
            let named = v.text.starts_with(char::is_alphabetic);
            if gm.group_id > group_no::MAX && gm.group_id != group_no::ALL && !named {
                return Err(v.err(format!(
                    "group id {} is above the largest, {} (all and any are names)",
                    v.quoted(),
                    group_no::MAX
                )));
            }
        } else {
            if type_seen {
                return Err(key.err("duplicate key \"type\""));
            }
            type_seen = true;
            gm.group_type = TYPES
                .iter()
                .find(|(n, _)| *n == v.text)
                .map(|&(_, t)| t)
                .ok_or_else(|| v.err(format!("unknown group type {}", v.quoted())))?;
        }
    }
    if gm.command != GroupModCommand::Delete {
        if !id_seen {
            return Err(ParseError::new("missing \"group_id=\"", "", text.len()));
        }
        if !type_seen {
            return Err(ParseError::new("missing \"type=\"", "", text.len()));
        }
    }
    for (i, start) in bucket_starts.iter().enumerate() {
        let end = bucket_starts.get(i + 1).map_or(text.len(), |next| next.pos);
        let body = whole.range(start.pos + "bucket=".len(), end);
        if !start.text.starts_with("bucket=") {
            return Err(start.err("\"bucket\" needs \"=\""));
        }
        gm.buckets.push(parse_bucket(body, gm.group_type)?);
    }
    if gm.command != GroupModCommand::Delete {
        if let (group_no::ANY, Some(v)) = (gm.group_id, id_tok) {
            return Err(v.err(format!(
                "group_id {} names no single group to add or modify",
                v.quoted()
            )));
        }
        check_buckets(&gm, &bucket_starts, text.len())?;
    }
    Ok(gm)
}

/// What ovs-ofctl requires of a group's buckets: an indirect group has
/// exactly one, every fast-failover bucket watches a port or group, only
/// select groups weigh their buckets, only select and fast-failover groups
/// watch.
fn check_buckets(gm: &GroupMod, starts: &[Tok<'_>], end: usize) -> Result<(), ParseError> {
    if gm.group_type == GroupType::Indirect && gm.buckets.len() != 1 {
        let at = starts.get(1).copied().unwrap_or(Tok { text: "", pos: end });
        return Err(at.err("an indirect group has exactly one bucket"));
    }
    for (b, start) in gm.buckets.iter().zip(starts) {
        let watches = b.watch_port != port_no::ANY || b.watch_group != group_no::ANY;
        match gm.group_type {
            GroupType::FastFailover if !watches => {
                return Err(start.err("a fast_failover bucket needs watch_port or watch_group"))
            }
            GroupType::All | GroupType::Indirect if watches => {
                return Err(start.err(
                    "only select and fast_failover groups watch ports or groups (watch_port, watch_group)",
                ))
            }
            _ => {}
        }
        if gm.group_type != GroupType::Select && b.weight != 0 {
            return Err(start.err("only select groups weigh their buckets (weight)"));
        }
    }
    Ok(())
}

fn parse_bucket(body: Tok<'_>, group_type: GroupType) -> Result<Bucket, ParseError> {
    let mut b = Bucket {
        weight: u16::from(group_type == GroupType::Select),
        ..Bucket::default()
    };
    let mut seen: Vec<&str> = Vec::new();
    let pieces = split_list(body)?;
    let mut actions = body.from(body.text.len());
    for piece in pieces {
        let cut = piece.text.find([':', '=']);
        let (key, value) = match cut {
            Some(i) => (piece.range(0, i), Some(piece.from(i + 1))),
            None => (piece, None),
        };
        if !matches!(key.text, "weight" | "watch_port" | "watch_group") {
            let from = piece.pos - body.pos;
            actions = if key.text == "actions" && piece.text.as_bytes().get(7) == Some(&b'=') {
                body.from(from + "actions=".len())
            } else {
                body.from(from)
            };
            break;
        }
        if seen.contains(&key.text) {
            return Err(key.err(format!("duplicate bucket key {}", key.quoted())));
        }
        seen.push(key.text);
        let v = value.ok_or_else(|| key.err(format!("{} needs a value", key.quoted())))?;
        match key.text {
            "weight" => b.weight = parse_u16(v, "a weight")?,
            "watch_port" => b.watch_port = parse_port(v)?,
            _ => b.watch_group = parse_group_id(v)?,
        }
    }
    b.actions = parse_action_list(actions, &mut Packet::default())?;
    Ok(b)
}

/// Prints a group in the canonical form described in the module comment.
pub fn format_group(gm: &GroupMod) -> String {
    let type_name = match gm.group_type {
        GroupType::All => "all",
        GroupType::Select => "select",
        GroupType::Indirect => "indirect",
        GroupType::FastFailover => "ff",
    };
    let mut parts = vec![
        format!("group_id={}", format_group_id(gm.group_id)),
        format!("type={type_name}"),
    ];
    for b in &gm.buckets {
        let mut p: Vec<String> = Vec::new();
        if gm.group_type == GroupType::Select || b.weight != 0 {
            p.push(format!("weight:{}", b.weight));
        }
        if b.watch_port != port_no::ANY {
            p.push(format!("watch_port:{}", format_port(b.watch_port)));
        }
        if b.watch_group != group_no::ANY {
            p.push(format!("watch_group:{}", format_group_id(b.watch_group)));
        }
        let actions = if b.actions.is_empty() {
            "drop".to_string()
        } else {
            format_action_list(&b.actions)
        };
        p.push(format!("actions={actions}"));
        parts.push(format!("bucket={}", p.join(",")));
    }
    let body = parts.join(",");
    match gm.command {
        GroupModCommand::Add => body,
        GroupModCommand::Modify => format!("modify {body}"),
        GroupModCommand::Delete => format!("delete {body}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::{assert_text_round_trip, refused};
    use ofp::Action;

    fn out(port: u32) -> Action {
        Action::Output { port, max_len: 0 }
    }

    fn round_trip(gm: &GroupMod) {
        assert_text_round_trip(gm, format_group, parse_group);
    }

    #[test]
    fn select_group() {
        let text = "group_id=1,type=select,bucket=weight:50,actions=output:1,bucket=weight:50,actions=output:2";
        let gm = parse_group(text).unwrap();
        let bucket = |w, p| Bucket {
            weight: w,
            actions: vec![out(p)],
            ..Bucket::default()
        };
        assert_eq!(
            gm,
            GroupMod {
                command: GroupModCommand::Add,
                group_type: GroupType::Select,
                group_id: 1,
                buckets: vec![bucket(50, 1), bucket(50, 2)],
            }
        );
        assert_eq!(format_group(&gm), text);
        round_trip(&gm);
    }

    #[test]
    fn bucket_forms() {
        let gm = parse_group(
            "group_id=7 type=ff bucket=watch_port:3,watch_group:4,actions=output:3,output:4 \
             bucket=watch_port=LOCAL,output:5 bucket=watch_group:2,output:6,group:2 \
             bucket=watch_port:1,actions=drop",
        )
        .unwrap();
        assert_eq!(gm.group_type, GroupType::FastFailover);
        assert_eq!(
            gm.buckets,
            vec![
                Bucket {
                    watch_port: 3,
                    watch_group: 4,
                    actions: vec![out(3), out(4)],
                    ..Bucket::default()
                },
                Bucket {
                    watch_port: port_no::LOCAL,
                    actions: vec![out(5)],
                    ..Bucket::default()
                },
                Bucket {
                    watch_group: 2,
                    actions: vec![out(6), Action::Group { group_id: 2 }],
                    ..Bucket::default()
                },
                Bucket {
                    watch_port: 1,
                    ..Bucket::default()
                },
            ]
        );
        round_trip(&gm);
        // Select buckets default to weight 1.
        let gm = parse_group("group_id=1,type=select,bucket=output:1").unwrap();
        assert_eq!(gm.buckets[0].weight, 1);
        round_trip(&gm);
    }

    #[test]
    fn every_type_and_command_round_trips() {
        for (name, ty) in TYPES {
            let gm = parse_group(&format!(
                "group_id=2,type={name},bucket=watch_port:1,output:1"
            ))
            .unwrap_or_else(|e| {
                // Only select and fast-failover buckets watch.
                assert!(matches!(ty, GroupType::All | GroupType::Indirect), "{name}");
                assert!(e.message.contains("watch"));
                parse_group(&format!("group_id=2,type={name},bucket=output:1")).unwrap()
            });
            assert_eq!(gm.group_type, *ty);
            round_trip(&gm);
        }
        for command in [
            GroupModCommand::Add,
            GroupModCommand::Modify,
            GroupModCommand::Delete,
        ] {
            round_trip(&GroupMod {
                command,
                group_type: GroupType::FastFailover,
                group_id: 9,
                buckets: vec![Bucket {
                    weight: 0,
                    watch_port: 1,
                    watch_group: 2,
                    actions: vec![],
                }],
            });
        }
        let gm = parse_group("delete group_id=all").unwrap();
        assert_eq!(gm.command, GroupModCommand::Delete);
        assert_eq!(gm.group_id, group_no::ALL);
        let gm = parse_group_command("", GroupModCommand::Delete).unwrap();
        assert_eq!(gm.group_id, group_no::ALL);
        for (a, _) in crate::actions::tests::every_action() {
            round_trip(&GroupMod {
                command: GroupModCommand::Add,
                group_type: GroupType::All,
                group_id: 1,
                buckets: vec![Bucket {
                    actions: vec![a.clone(), a],
                    ..Bucket::default()
                }],
            });
        }
    }

    fn err(text: &str) -> ParseError {
        refused(parse_group, text)
    }

    #[test]
    fn errors_name_the_token_and_position() {
        assert_eq!(err("group_id=1,type=selct").token, "selct");
        assert_eq!(err("group_id=1,tpye=all").token, "tpye");
        assert_eq!(err("group_id=x,type=all").token, "x");
        assert_eq!(err("group_id=1,group_id=2,type=all").position, 11);
        assert_eq!(err("type=all").position, 8);
        assert_eq!(err("group_id=1").position, 10);
        assert_eq!(
            err("group_id=1,type=all,bucket=weight:x,output:1").token,
            "x"
        );
        assert_eq!(
            err("group_id=1,type=select,bucket=weight:1,weight:2").position,
            39
        );
        assert_eq!(err("group_id=1,type=all,bucket=outptu:1").token, "outptu");
        assert_eq!(
            err("group_id=1,type=all,bucket=goto_table:1").token,
            "goto_table"
        );
        assert_eq!(
            err("group_id=1,type=all,bucket=mod_tp_dst:1").token,
            "mod_tp_dst"
        );
        assert_eq!(err("group_id=1,type=all,bucket").token, "bucket");
        assert_eq!(err("group_id=1,type=all,bucket=output(port=1").token, "(");
        assert_eq!(err("group_id=any,type=all,bucket=output:1").token, "any");
        assert_eq!(
            err("group_id=4294967041,type=all,bucket=output:1").token,
            "4294967041"
        );
    }

    #[test]
    fn buckets_as_ovs_ofctl_requires_them() {
        for (text, token, says) in [
            (
                "group_id=1,type=indirect,bucket=output:1,bucket=output:2",
                "bucket=output:2",
                "exactly one",
            ),
            ("group_id=1,type=indirect", "", "exactly one"),
            (
                "group_id=1,type=ff,bucket=output:1",
                "bucket=output:1",
                "watch",
            ),
            (
                "group_id=1,type=all,bucket=weight:2,output:1",
                "bucket=weight:2",
                "weigh",
            ),
            (
                "group_id=1,type=all,bucket=watch_port:1,output:1",
                "bucket=watch_port:1",
                "watch",
            ),
        ] {
            let e = parse_group(text).unwrap_err();
            assert_eq!(e.token, token, "{text}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
        // A bucket starts with no tag: mod_vlan_vid pushes one.
        let gm = parse_group("group_id=1,type=all,bucket=mod_vlan_vid:5,output:1").unwrap();
        assert_eq!(gm.buckets[0].actions.len(), 3);
        assert_eq!(
            gm.buckets[0].actions[0],
            Action::PushVlan { ethertype: 0x8100 }
        );
        // Nothing is known in a bucket, so nothing is checked against it.
        assert!(parse_group("group_id=1,type=all,bucket=set_field:10.0.0.1->ip_src").is_ok());
        assert!(parse_group("group_id=1,type=all,bucket=pop_vlan,output:1").is_ok());
        assert!(parse_group("delete group_id=all").is_ok());
        assert!(parse_group("group_id=4294967040,type=all,bucket=output:1").is_ok());
        for text in [
            "",
            "bucket=",
            "bucket=bucket=",
            "group_id=é",
            "delete bucket=(",
            "type=é",
        ] {
            let _ = parse_group(text);
        }
    }
}
