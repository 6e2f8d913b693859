//! Property tests across the crate: every expressible structure prints and
//! parses back equal; no input panics a parser; every error points at its
//! token.

use crate::*;
use ofp::strategies::{arb_actions, arb_instruction, arb_instructions, arb_match, arb_valid_match};
use ofp::{
    Bucket, FlowMod, FlowModCommand, GroupMod, GroupModCommand, GroupType, Instruction, Match,
    MeterBand, MeterMod, MeterModCommand, Oxm,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// What makes two fields duplicates (the parser rejects those).
fn identity(o: &Oxm) -> (u16, u8) {
    match o {
        Oxm::Basic { field, .. } => (ofp::oxm::OXM_CLASS_OPENFLOW_BASIC, *field as u8),
        Oxm::Other { class, field, .. } => (*class, *field),
    }
}

/// Any match the syntax expresses: a valid one, or an arbitrary one (opaque
/// TLVs included) with repeated fields removed.
fn arb_text_match() -> BoxedStrategy<Match> {
    let dedup = arb_match().prop_map(|m| {
        let mut fields: Vec<Oxm> = Vec::new();
        for o in m.fields {
            if !fields.iter().any(|f| identity(f) == identity(&o)) {
                fields.push(o);
            }
        }
        Match { fields }
    });
    prop_oneof![arb_valid_match(), dedup].boxed()
}

fn arb_flow_command() -> impl Strategy<Value = FlowModCommand> {
    prop::sample::select(vec![
        FlowModCommand::Add,
        FlowModCommand::Modify,
        FlowModCommand::ModifyStrict,
        FlowModCommand::Delete,
        FlowModCommand::DeleteStrict,
    ])
}

/// Instruction lists: in pipeline order, or any order with repeats.
fn arb_any_instructions() -> BoxedStrategy<Vec<Instruction>> {
    prop_oneof![arb_instructions(), vec(arb_instruction(), 0..5)].boxed()
}

fn arb_flow() -> impl Strategy<Value = FlowMod> {
    (
        (arb_flow_command(), any::<u64>(), any::<u64>(), any::<u8>()),
        (any::<u16>(), any::<u16>(), any::<u16>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u16>()),
        arb_text_match(),
        arb_any_instructions(),
    )
        .prop_map(
            |(
                (command, cookie, cookie_mask, table_id),
                (idle_timeout, hard_timeout, priority, buffer_id),
                (out_port, out_group, flags),
                match_,
                instructions,
            )| FlowMod {
                cookie,
                // ovs (and this parser) refuse a cookie mask on add.
                cookie_mask: if command == FlowModCommand::Add {
                    0
                } else {
                    cookie_mask
                },
                table_id,
                command,
                idle_timeout,
                hard_timeout,
                priority,
                buffer_id,
                out_port,
                out_group,
                flags,
                match_,
                instructions,
            },
        )
}

fn arb_group() -> impl Strategy<Value = GroupMod> {
    let bucket = (any::<u16>(), any::<u32>(), any::<u32>(), arb_actions()).prop_map(
        |(weight, watch_port, watch_group, actions)| Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        },
    );
    (
        prop::sample::select(vec![
            GroupModCommand::Add,
            GroupModCommand::Modify,
            GroupModCommand::Delete,
        ]),
        prop::sample::select(vec![
            GroupType::All,
            GroupType::Select,
            GroupType::Indirect,
            GroupType::FastFailover,
        ]),
        any::<u32>(),
        vec(bucket, 0..4),
    )
        .prop_map(|(command, group_type, group_id, buckets)| GroupMod {
            command,
            group_type,
            group_id,
            buckets,
        })
}

fn arb_meter() -> impl Strategy<Value = MeterMod> {
    let band = prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(rate, burst_size)| MeterBand::Drop { rate, burst_size }),
        (any::<u32>(), any::<u32>(), any::<u8>()).prop_map(|(rate, burst_size, prec_level)| {
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            }
        }),
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            vec(any::<u8>(), 0..16)
        )
            .prop_map(
                |(rate, burst_size, experimenter, data)| MeterBand::Experimenter {
                    rate,
                    burst_size,
                    experimenter,
                    data,
                }
            ),
    ];
    (
        prop::sample::select(vec![
            MeterModCommand::Add,
            MeterModCommand::Modify,
            MeterModCommand::Delete,
        ]),
        any::<u16>(),
        any::<u32>(),
        vec(band, 0..4),
    )
        .prop_map(|(command, flags, meter_id, bands)| MeterMod {
            command,
            flags,
            meter_id,
            bands,
        })
}

/// Words, values and punctuation of the syntax, to build inputs that get
/// past the first token more often than random characters do.
const PIECES: &[&str] = &[
    "in_port",
    "eth_dst",
    "dl_vlan",
    "nw_src",
    "tp_dst",
    "tcp",
    "ip",
    "arp",
    "ipv6",
    "table",
    "priority",
    "cookie",
    "actions",
    "output",
    "set_field",
    "->",
    "vlan_vid",
    "ipv4_src",
    "write_actions",
    "apply_actions",
    "goto_table",
    "write_metadata",
    "controller",
    "drop",
    "mod_tp_dst",
    "experimenter",
    "oxm",
    "set_oxm",
    "bucket",
    "group_id",
    "type",
    "select",
    "weight",
    "watch_port",
    "meter",
    "bands",
    "rate",
    "burst_size",
    "kbps",
    "delete",
    "modify",
    "=",
    "=",
    ":",
    ":",
    ",",
    ",",
    " ",
    "(",
    ")",
    "/",
    "0x",
    "1",
    "8",
    "65535",
    "0xffffffff",
    "10.0.0.1",
    "::1",
    "aa:bb:cc:dd:ee:ff",
    "LOCAL",
    "é",
    "\u{0}",
    "#",
    "\n",
];

fn arb_soup() -> impl Strategy<Value = String> {
    vec(prop::sample::select(PIECES), 0..24).prop_map(|p| p.concat())
}

/// An error's token is the text at its position.
fn points_at_token(text: &str, e: &ParseError) -> bool {
    text.get(e.position..)
        .is_some_and(|rest| rest.starts_with(e.token.as_str()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn flows_print_and_parse_back(fm in arb_flow()) {
        let text = format_flow(&fm);
        let back = parse_flow(&text);
        prop_assert_eq!(back.as_ref().map_err(|e| (e.to_string(), text.clone())), Ok(&fm));
        prop_assert_eq!(format_flow(&fm), text);
    }

    #[test]
    fn groups_print_and_parse_back(gm in arb_group()) {
        let text = format_group(&gm);
        let back = parse_group(&text);
        prop_assert_eq!(back.as_ref().map_err(|e| (e.to_string(), text.clone())), Ok(&gm));
    }

    #[test]
    fn meters_print_and_parse_back(mm in arb_meter()) {
        let text = format_meter(&mm);
        let back = parse_meter(&text);
        prop_assert_eq!(back.as_ref().map_err(|e| (e.to_string(), text.clone())), Ok(&mm));
    }

    #[test]
    fn files_of_printed_flows_parse_back(flows in vec(arb_flow(), 0..5)) {
        let text: String = flows.iter().map(|f| format_flow(f) + "\n# comment\n\n").collect();
        prop_assert_eq!(parse_flow_file(&text).map_err(|(l, e)| (l, e.to_string())), Ok(flows));
    }

    #[test]
    fn random_text_never_panics(text in any::<String>()) {
        for r in [
            parse_flow(&text).err(),
            parse_group(&text).err(),
            parse_meter(&text).err(),
        ] .into_iter().flatten() {
            prop_assert!(points_at_token(&text, &r), "{:?} {:?}", text, r);
        }
        let _ = parse_flow_file(&text);
        let _ = parse_group_file(&text);
        let _ = parse_meter_file(&text);
    }

    #[test]
    fn token_soup_never_panics_and_errors_point_at_their_token(text in arb_soup()) {
        match parse_flow(&text) {
            Ok(fm) => {
                // What parses prints to text that parses to the same flow.
                let again = format_flow(&fm);
                prop_assert_eq!(parse_flow(&again).ok(), Some(fm), "{}", again);
            }
            Err(e) => prop_assert!(points_at_token(&text, &e), "{:?} {:?}", text, e),
        }
        match parse_group(&text) {
            Ok(gm) => prop_assert_eq!(parse_group(&format_group(&gm)).ok(), Some(gm)),
            Err(e) => prop_assert!(points_at_token(&text, &e), "{:?} {:?}", text, e),
        }
        match parse_meter(&text) {
            Ok(mm) => prop_assert_eq!(parse_meter(&format_meter(&mm)).ok(), Some(mm)),
            Err(e) => prop_assert!(points_at_token(&text, &e), "{:?} {:?}", text, e),
        }
        let _ = parse_flow_file(&text);
    }

    #[test]
    fn prefixes_of_valid_flows_never_panic(fm in arb_flow(), cut in any::<usize>()) {
        let text = format_flow(&fm);
        let mut cut = cut % (text.len() + 1);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Err(e) = parse_flow(&text[..cut]) {
            prop_assert!(points_at_token(&text[..cut], &e));
        }
    }

    #[test]
    fn edited_valid_texts_never_panic(
        fm in arb_flow(),
        gm in arb_group(),
        at in any::<usize>(),
        len in 0usize..6,
        piece in prop::sample::select(PIECES),
    ) {
        for text in [format_flow(&fm), format_group(&gm)] {
            let mut a = at % (text.len() + 1);
            while !text.is_char_boundary(a) {
                a -= 1;
            }
            let mut b = (a + len).min(text.len());
            while !text.is_char_boundary(b) {
                b += 1;
            }
            let edited = format!("{}{}{}", &text[..a], piece, &text[b..]);
            for e in [parse_flow(&edited).err(), parse_group(&edited).err()].into_iter().flatten() {
                prop_assert!(points_at_token(&edited, &e), "{:?} {:?}", edited, e);
            }
        }
    }
}
