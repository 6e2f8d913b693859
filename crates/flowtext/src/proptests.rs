//! Property tests across the crate: every structure the syntax expresses
//! prints and parses back equal; whatever else parses comes back as the
//! same structure up to the documented normalizations (masks as Open
//! vSwitch encodes them, an output's max_len only for CONTROLLER, no empty
//! write-actions, burst sizes only with the burst flag); no input panics a
//! parser; every error points at its token.

use crate::*;
use ofp::consts::{group_no, meter_no, port_no};
use ofp::meter_mod::meter_flags as mf;
use ofp::oxm::OFPVID_PRESENT;
use ofp::strategies::{
    arb_action_instructions, arb_actions, arb_instruction, arb_instructions, arb_match,
    arb_valid_match,
};
use ofp::{
    Action, Bucket, FlowMod, FlowModCommand, GroupMod, GroupModCommand, GroupType, Instruction,
    Match, MeterBand, MeterMod, MeterModCommand, Oxm, OxmField, OxmValue,
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

/// Any match: a valid one, or an arbitrary one (opaque TLVs included)
/// with repeated fields removed.
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

fn is_delete(c: FlowModCommand) -> bool {
    matches!(c, FlowModCommand::Delete | FlowModCommand::DeleteStrict)
}

/// Instruction lists: in pipeline order, or any order with repeats.
fn arb_any_instructions() -> BoxedStrategy<Vec<Instruction>> {
    prop_oneof![arb_instructions(), vec(arb_instruction(), 0..5)].boxed()
}

/// A flow from the keys, match and instructions given.
fn flow(
    (command, cookie, cookie_mask, table_id): (FlowModCommand, u64, u64, u8),
    timeouts_priority_buffer: (u16, u16, u16, u32),
    out_port_group_flags: (u32, u32, u16),
    match_: Match,
    instructions: Vec<Instruction>,
) -> FlowMod {
    let mut fm = FlowMod {
        command,
        cookie,
        table_id,
        match_,
        instructions,
        ..FlowMod::default()
    };
    // ovs (and this parser) refuse a cookie mask on add.
    if command != FlowModCommand::Add {
        fm.cookie_mask = cookie_mask;
    }
    (fm.idle_timeout, fm.hard_timeout, fm.priority, fm.buffer_id) = timeouts_priority_buffer;
    (fm.out_port, fm.out_group, fm.flags) = out_port_group_flags;
    fm
}

/// Any flow, most of which the parser refuses (fields without their
/// protocols, inconsistent actions, ...).
fn arb_flow() -> impl Strategy<Value = FlowMod> {
    (
        (arb_flow_command(), any::<u64>(), any::<u64>(), any::<u8>()),
        (any::<u16>(), any::<u16>(), any::<u16>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u16>()),
        arb_text_match(),
        arb_any_instructions(),
    )
        .prop_map(|(a, b, c, m, i)| flow(a, b, c, m, i))
}

/// An action that is consistent whatever the packet (no set-field with a
/// prerequisite, no pop, no TTL action, at most one VLAN push).
fn arb_plain_action() -> BoxedStrategy<Action> {
    let port = prop_oneof![
        1u32..=port_no::MAX,
        prop::sample::select(vec![
            port_no::IN_PORT,
            port_no::TABLE,
            port_no::NORMAL,
            port_no::FLOOD,
            port_no::ALL,
            port_no::LOCAL,
            0xfffe,
        ]),
    ];
    prop_oneof![
        4 => port.prop_map(|port| Action::Output { port, max_len: 0 }),
        1 => any::<u16>().prop_map(|max_len| Action::Output { port: port_no::CONTROLLER, max_len }),
        1 => any::<u32>().prop_map(|group_id| Action::Group { group_id }),
        1 => any::<u32>().prop_map(|queue_id| Action::SetQueue { queue_id }),
        1 => prop::sample::select(vec![0x8847u16, 0x8848]).prop_map(|ethertype| Action::PushMpls { ethertype }),
        1 => any::<u16>().prop_map(|ethertype| Action::PushPbb { ethertype }),
        1 => Just(Action::CopyTtlIn),
        1 => Just(Action::CopyTtlOut),
        1 => any::<[u8; 6]>().prop_map(|m| Action::SetField {
            field: Oxm::basic(OxmField::EthDst, OxmValue::Mac(ofp::MacAddr(m))),
        }),
        1 => any::<u64>().prop_map(|t| Action::SetField {
            field: Oxm::basic(OxmField::TunnelId, OxmValue::U64(t)),
        }),
        1 => (any::<u32>(), vec(any::<u8>(), 0..3).prop_map(|n| n.repeat(8)))
            .prop_map(|(experimenter, data)| Action::Experimenter { experimenter, data }),
    ]
    .boxed()
}

/// Actions consistent whatever the packet, with perhaps a VLAN push and a
/// set-field of its VID or PCP after it.
fn arb_plain_actions() -> BoxedStrategy<Vec<Action>> {
    (vec(arb_plain_action(), 0..4), any::<Option<(bool, u16)>>())
        .prop_map(|(mut actions, vlan)| {
            if let Some((pcp, v)) = vlan {
                actions.push(Action::PushVlan { ethertype: 0x8100 });
                actions.push(Action::SetField {
                    field: if pcp {
                        Oxm::basic(OxmField::VlanPcp, OxmValue::U8((v & 7) as u8))
                    } else {
                        Oxm::basic(
                            OxmField::VlanVid,
                            OxmValue::U16(OFPVID_PRESENT | (v & 0xfff)),
                        )
                    },
                });
            }
            actions
        })
        .boxed()
}

/// A flow the parser must take back exactly: a valid match in the form the
/// parser gives it, consistent instructions (at most one of each), a
/// table it may add to.
fn arb_installable_flow() -> impl Strategy<Value = FlowMod> {
    let instructions = (
        arb_action_instructions(arb_plain_actions(), vec(arb_plain_action(), 1..4).boxed()),
        any::<Option<u8>>(),
        any::<u64>(),
    );
    (
        (arb_flow_command(), any::<u64>(), any::<u64>(), 0u8..=254),
        (any::<u16>(), any::<u16>(), any::<u16>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u16>()),
        arb_valid_match(),
        instructions,
    )
        .prop_map(|(a, b, c, m, (mut list, goto, shuffle))| {
            let table = a.3;
            if let Some(g) = goto.filter(|_| table < 254) {
                let table_id = table + 1 + g % (254 - table);
                list.push(Instruction::GotoTable { table_id });
            }
            // Any order: OpenFlow runs instructions in its own order.
            if !list.is_empty() {
                let by = (shuffle % list.len() as u64) as usize;
                list.rotate_left(by);
            }
            let mut fm = flow(a, b, c, parse_match(&format_match(&m)).unwrap_or(m), list);
            if is_delete(fm.command) && shuffle % 3 == 0 {
                fm.table_id = 255;
            }
            fm
        })
}

/// What `fm` comes back as: masks as Open vSwitch encodes them (all ones:
/// none; all zeros: no field; vlan_pcp brings its "tag present"), output
/// max_len only for CONTROLLER, no empty write-actions.
fn normalized_flow(fm: &FlowMod) -> FlowMod {
    let mut fm = fm.clone();
    let mut fields = Vec::new();
    for o in fm.match_.fields {
        match o {
            Oxm::Basic {
                field,
                value,
                mask: Some(m),
            } => {
                let bits = m.to_u128() & field.max_value();
                if bits == field.max_value() {
                    fields.push(Oxm::Basic {
                        field,
                        value,
                        mask: None,
                    });
                } else if bits != 0 {
                    fields.push(Oxm::Basic {
                        field,
                        value,
                        mask: Some(m),
                    });
                }
            }
            o => fields.push(o),
        }
    }
    let has = |fs: &[Oxm], f: OxmField| {
        fs.iter()
            .any(|o| matches!(o, Oxm::Basic { field, .. } if *field == f))
    };
    if has(&fields, OxmField::VlanPcp) && !has(&fields, OxmField::VlanVid) {
        let at = fields
            .iter()
            .position(|o| {
                matches!(
                    o,
                    Oxm::Basic {
                        field: OxmField::VlanPcp,
                        ..
                    }
                )
            })
            .unwrap_or(0);
        let p = OxmValue::U16(OFPVID_PRESENT);
        fields.insert(
            at,
            Oxm::Basic {
                field: OxmField::VlanVid,
                value: p,
                mask: Some(p),
            },
        );
    }
    fm.match_ = Match { fields };
    fm.instructions = fm
        .instructions
        .into_iter()
        .filter(|i| !matches!(i, Instruction::WriteActions { actions } if actions.is_empty()))
        .map(|i| match i {
            Instruction::ApplyActions { actions } => Instruction::ApplyActions {
                actions: normalized_actions(actions),
            },
            Instruction::WriteActions { actions } => Instruction::WriteActions {
                actions: normalized_actions(actions),
            },
            i => i,
        })
        .collect();
    fm
}

fn normalized_actions(actions: Vec<Action>) -> Vec<Action> {
    actions
        .into_iter()
        .map(|a| match a {
            Action::Output { port, .. } if port != port_no::CONTROLLER => {
                Action::Output { port, max_len: 0 }
            }
            a => a,
        })
        .collect()
}

fn arb_bucket(group_type: GroupType) -> impl Strategy<Value = Bucket> {
    (
        any::<u16>(),
        prop_oneof![Just(port_no::ANY), 1u32..100, Just(port_no::LOCAL)],
        prop_oneof![Just(group_no::ANY), 0u32..100],
        arb_plain_actions(),
    )
        .prop_map(move |(weight, watch_port, watch_group, actions)| {
            let mut b = Bucket {
                weight,
                watch_port,
                watch_group,
                actions,
            };
            match group_type {
                GroupType::Select => {}
                GroupType::FastFailover => {
                    b.weight = 0;
                    if b.watch_port == port_no::ANY && b.watch_group == group_no::ANY {
                        b.watch_port = 1;
                    }
                }
                GroupType::All | GroupType::Indirect => {
                    b.weight = 0;
                    b.watch_port = port_no::ANY;
                    b.watch_group = group_no::ANY;
                }
            }
            b
        })
}

fn arb_group_type() -> impl Strategy<Value = GroupType> {
    use GroupType as T;
    prop::sample::select(vec![T::All, T::Select, T::Indirect, T::FastFailover])
}

/// A group the parser must take back exactly.
fn arb_valid_group() -> impl Strategy<Value = GroupMod> {
    (
        prop::sample::select(vec![
            GroupModCommand::Add,
            GroupModCommand::Modify,
            GroupModCommand::Delete,
        ]),
        arb_group_type(),
        prop_oneof![0u32..=group_no::MAX, Just(group_no::ALL)],
        0usize..4,
    )
        .prop_flat_map(|(command, group_type, group_id, n)| {
            let n = if group_type == GroupType::Indirect {
                1
            } else {
                n
            };
            vec(arb_bucket(group_type), n).prop_map(move |buckets| GroupMod {
                command,
                group_type,
                group_id,
                buckets,
            })
        })
}

/// Any group, most of which the parser refuses.
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
        arb_group_type(),
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

fn normalized_group(gm: &GroupMod) -> GroupMod {
    let mut gm = gm.clone();
    for b in &mut gm.buckets {
        b.actions = normalized_actions(std::mem::take(&mut b.actions));
    }
    gm
}

fn arb_band() -> impl Strategy<Value = MeterBand> {
    prop_oneof![
        (1..=u32::MAX, any::<u32>())
            .prop_map(|(rate, burst_size)| MeterBand::Drop { rate, burst_size }),
        (1..=u32::MAX, any::<u32>(), any::<u8>()).prop_map(|(rate, burst_size, prec_level)| {
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            }
        }),
        (
            1..=u32::MAX,
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
    ]
}

fn arb_meter_command() -> impl Strategy<Value = MeterModCommand> {
    prop::sample::select(vec![
        MeterModCommand::Add,
        MeterModCommand::Modify,
        MeterModCommand::Delete,
    ])
}

/// Burst sizes only with the burst flag.
fn normalized_meter(mm: &MeterMod) -> MeterMod {
    let mut mm = mm.clone();
    if mm.flags & mf::BURST == 0 {
        for b in &mut mm.bands {
            match b {
                MeterBand::Drop { burst_size, .. }
                | MeterBand::DscpRemark { burst_size, .. }
                | MeterBand::Experimenter { burst_size, .. } => *burst_size = 0,
            }
        }
    }
    mm
}

/// A meter the parser must take back exactly: one unit (or none, which the
/// text writes as raw flags), bands with a rate, a real meter number.
fn arb_valid_meter() -> impl Strategy<Value = MeterMod> {
    (
        arb_meter_command(),
        any::<u16>(),
        prop_oneof![
            1..=meter_no::MAX,
            prop::sample::select(vec![
                meter_no::SLOWPATH,
                meter_no::CONTROLLER,
                meter_no::ALL
            ])
        ],
        vec(arb_band(), 1..4),
    )
        .prop_map(|(command, flags, meter_id, bands)| {
            let flags = if flags & 3 == 3 { flags & !2 } else { flags };
            normalized_meter(&MeterMod {
                command,
                flags,
                meter_id,
                bands,
            })
        })
}

/// Any meter, some of which the parser refuses.
fn arb_meter() -> impl Strategy<Value = MeterMod> {
    (
        arb_meter_command(),
        any::<u16>(),
        any::<u32>(),
        vec(arb_band(), 0..4),
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

/// `v` prints to text that parses back to `v`.
fn parses_back<T: PartialEq + std::fmt::Debug>(
    v: &T,
    format: fn(&T) -> String,
    parse: fn(&str) -> Result<T, ParseError>,
) -> Result<String, TestCaseError> {
    let text = format(v);
    let back = parse(&text);
    prop_assert_eq!(
        back.as_ref().map_err(|e| (e.to_string(), text.clone())),
        Ok(v)
    );
    Ok(text)
}

/// `v` prints to text that parses to `normalized(v)`, or is refused with an
/// error that points at its token.
fn normalized_or_refused<T: PartialEq + std::fmt::Debug>(
    v: &T,
    format: fn(&T) -> String,
    parse: fn(&str) -> Result<T, ParseError>,
    normalized: fn(&T) -> T,
) -> Result<(), TestCaseError> {
    let text = format(v);
    match parse(&text) {
        Ok(back) => prop_assert_eq!(back, normalized(v), "{}", text),
        Err(e) => prop_assert!(points_at_token(&text, &e), "{:?} {:?}", text, e),
    }
    Ok(())
}

/// The two round-trip properties of a message kind: a valid one prints and
/// parses back unchanged, and any one comes back normalized or is refused.
macro_rules! round_trip_properties {
    ($valid_test:ident: $valid:expr, $any_test:ident: $any:expr,
     $format:ident, $parse:ident, $normalized:ident) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn $valid_test(m in $valid) {
                parses_back(&m, $format, $parse)?;
            }

            #[test]
            fn $any_test(m in $any) {
                normalized_or_refused(&m, $format, $parse, $normalized)?;
            }
        }
    };
}

round_trip_properties!(
    valid_groups_print_and_parse_back: arb_valid_group(),
    any_group_comes_back_normalized_or_is_refused: arb_group(),
    format_group, parse_group, normalized_group
);

round_trip_properties!(
    valid_meters_print_and_parse_back: arb_valid_meter(),
    any_meter_comes_back_normalized_or_is_refused: arb_meter(),
    format_meter, parse_meter, normalized_meter
);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn installable_flows_print_and_parse_back(fm in arb_installable_flow()) {
        let text = parses_back(&fm, format_flow, parse_flow)?;
        prop_assert_eq!(format_flow(&fm), text);
    }

    #[test]
    fn any_flow_comes_back_normalized_or_is_refused(fm in arb_flow()) {
        normalized_or_refused(&fm, format_flow, parse_flow, normalized_flow)?;
    }

    #[test]
    fn files_of_printed_flows_parse_back(flows in vec(arb_installable_flow(), 0..5)) {
        let text: String = flows.iter().map(|f| format_flow(f) + "\n# comment\n\n").collect();
        prop_assert_eq!(parse_flow_file(&text).map_err(|(l, e)| (l, e.to_string())), Ok(flows));
    }

    #[test]
    fn ovs_printing_never_panics(fm in arb_flow(), gm in arb_group(), mm in arb_meter()) {
        let _ = ovs::format_flow(&fm);
        let _ = ovs::format_group(&gm);
        let _ = ovs::format_meter(&mm);
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
