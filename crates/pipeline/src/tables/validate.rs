//! Validation of instructions and actions before they are installed in a
//! flow entry or a group bucket (spec 1.3.5 §6.4, §7.2.4, §7.2.5, §7.4.4).
//!
//! Decisions where the spec leaves room (each also named in a test):
//!
//! * The same instruction type twice in one flow-mod: the spec says each
//!   type may appear at most once but defines no code for it in 1.3 (Open
//!   vSwitch answers with an ONF extension code, 1.4 added `DUP_INST`). We
//!   answer `BAD_INSTRUCTION/UNSUP_INST`: the table does not support a
//!   second instruction of that type.
//! * Experimenter instructions: `BAD_INSTRUCTION/UNSUP_INST`; experimenter
//!   actions: `BAD_ACTION/BAD_EXPERIMENTER` (no experimenter is known).
//! * Output ports: `0`, `OFPP_ANY`, `OFPP_TABLE` (valid only in
//!   PACKET_OUT) and numbers above `OFPP_MAX` that are not reserved give
//!   `BAD_ACTION/BAD_OUT_PORT`. `OFPP_NORMAL` is accepted only when the
//!   switch says it supports it ([`ActionPolicy::normal_supported`]).
//!   Port existence is not checked: flows may name ports that come later,
//!   as in Open vSwitch.
//! * Action arguments (reserved port and group numbers, push ethertypes,
//!   set-field type, mask and value) are checked by `ofp`'s
//!   `Action::validate`: `BAD_OUT_PORT`, `BAD_OUT_GROUP`, `BAD_ARGUMENT`,
//!   `BAD_SET_TYPE`, `BAD_SET_ARGUMENT`.
//! * Set-field prerequisites: a field whose OXM prerequisite (table 12) is
//!   not guaranteed by the flow's match, as changed by the push/pop and
//!   set-field actions before it, gives `BAD_ACTION/MATCH_INCONSISTENT`
//!   (the code's spec comment: "Set-Field missing prerequisite"). Open
//!   vSwitch checks the same way, and like it we also require a VLAN tag
//!   for setting `vlan_vid` (there is no tag to write into otherwise). Group buckets have no match, so their
//!   set-fields are checked for type and argument only.
//! * Header actions whose header the packet is not sure to have: a
//!   `pop_vlan` without a VLAN tag, `pop_mpls`/`set_mpls_ttl`/
//!   `dec_mpls_ttl` without an MPLS ethertype, `set_nw_ttl`/`dec_nw_ttl`
//!   without IPv4/IPv6, `pop_pbb` without PBB: `MATCH_INCONSISTENT` (the
//!   spec lets the switch refuse these, §6.4, and names `pop_vlan` on an
//!   untagged match as its example). In write-actions only the pops are
//!   checked this way: the TTL actions run after the set's pushes.
//! * A group action naming a group that does not exist (or a reserved
//!   number): `BAD_ACTION/BAD_OUT_GROUP`. A meter instruction naming a
//!   meter that does not exist: `METER_MOD_FAILED/UNKNOWN_METER`, the
//!   spec's code for a meter id that names no meter.

use crate::model::match_key::{full_mask, prerequisite_met, value_bits, MatchKey};
use ofp::consts::port_no;
use ofp::error::{BadActionCode, BadInstructionCode, MeterModFailedCode};
use ofp::{Action, Instruction, OfpError, Oxm, OxmField};

/// What the switch accepts in actions beyond the spec's fixed rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionPolicy {
    /// Whether output to `OFPP_NORMAL` is implemented.
    pub normal_supported: bool,
}

impl Default for ActionPolicy {
    /// `OFPP_NORMAL` supported (the switch's own learning bridge,
    /// [`crate::normal`]).
    fn default() -> Self {
        ActionPolicy {
            normal_supported: true,
        }
    }
}

/// The surroundings a flow entry's instructions are checked against.
pub struct InstructionContext<'a> {
    /// The table the entry goes into.
    pub table_id: u8,
    /// Number of tables; goto targets must be below it.
    pub n_tables: u8,
    /// Whether a group exists.
    pub group_exists: &'a dyn Fn(u32) -> bool,
    /// Whether a meter exists.
    pub meter_exists: &'a dyn Fn(u32) -> bool,
    /// Port rules.
    pub policy: ActionPolicy,
}

const fn bad_action(code: BadActionCode) -> OfpError {
    OfpError::BadAction(code)
}

const fn bad_inst(code: BadInstructionCode) -> OfpError {
    OfpError::BadInstruction(code)
}

/// Validates a flow entry's instruction list against its match.
pub fn validate_instructions(
    instructions: &[Instruction],
    key: &MatchKey,
    ctx: &InstructionContext<'_>,
) -> Result<(), OfpError> {
    let mut seen: Vec<u16> = Vec::with_capacity(instructions.len());
    for i in instructions {
        let t = i.type_code();
        if seen.contains(&t) {
            return Err(bad_inst(BadInstructionCode::UnsupInst));
        }
        seen.push(t);
    }
    // The packet as the match guarantees it, then as apply-actions change
    // it: write-actions run after apply-actions (spec §5.9).
    let mut packet = key.clone();
    let applied = instructions.iter().find_map(|i| match i {
        Instruction::ApplyActions { actions } => Some(actions),
        _ => None,
    });
    for i in instructions {
        match i {
            Instruction::GotoTable { table_id } => {
                if *table_id <= ctx.table_id || *table_id >= ctx.n_tables {
                    return Err(bad_inst(BadInstructionCode::BadTableId));
                }
            }
            Instruction::Meter { meter_id } => {
                if !(ctx.meter_exists)(*meter_id) {
                    return Err(OfpError::MeterModFailed(MeterModFailedCode::UnknownMeter));
                }
            }
            Instruction::Experimenter { .. } => {
                return Err(bad_inst(BadInstructionCode::UnsupInst));
            }
            Instruction::WriteMetadata { .. }
            | Instruction::ClearActions
            | Instruction::ApplyActions { .. }
            | Instruction::WriteActions { .. } => {}
        }
    }
    if let Some(actions) = applied {
        validate_action_list(actions, Some(&mut packet), ctx.group_exists, ctx.policy)?;
    }
    for i in instructions {
        if let Instruction::WriteActions { actions } = i {
            validate_action_set(actions, &mut packet, ctx.group_exists, ctx.policy)?;
        }
    }
    Ok(())
}

/// Validates actions that run in list order (apply-actions, a group
/// bucket). With `packet`, set-field prerequisites are checked against it
/// and it is updated as each action changes the packet.
pub fn validate_action_list(
    actions: &[Action],
    mut packet: Option<&mut MatchKey>,
    group_exists: &dyn Fn(u32) -> bool,
    policy: ActionPolicy,
) -> Result<(), OfpError> {
    for a in actions {
        check_action(a, packet.as_deref(), group_exists, policy)?;
        if let Some(p) = packet.as_deref_mut() {
            track(a, p);
        }
    }
    Ok(())
}

/// Validates a write-actions list: actions of the action set run in the
/// spec's fixed order (§5.10), pops and pushes before set-field, so the
/// set-fields are checked against the packet after those.
fn validate_action_set(
    actions: &[Action],
    packet: &mut MatchKey,
    group_exists: &dyn Fn(u32) -> bool,
    policy: ActionPolicy,
) -> Result<(), OfpError> {
    let mut ordered: Vec<&Action> = actions.iter().collect();
    ordered.sort_by_key(|a| a.action_set_rank());
    for a in ordered {
        // TTL actions run after the pushes in the set, on a header the
        // spec leaves open: they are not checked against the packet here.
        let checked =
            a.action_set_rank() < Action::AFTER_PUSHES || matches!(a, Action::SetField { .. });
        check_action(a, checked.then_some(&*packet), group_exists, policy)?;
        track(a, packet);
    }
    Ok(())
}

/// True for an output port a flow entry or bucket may name.
pub fn valid_output_port(port: u32, policy: ActionPolicy) -> bool {
    match port {
        0 => false,
        p if p <= port_no::MAX => true,
        port_no::IN_PORT | port_no::FLOOD | port_no::ALL | port_no::CONTROLLER | port_no::LOCAL => {
            true
        }
        port_no::NORMAL => policy.normal_supported,
        _ => false,
    }
}

fn check_action(
    a: &Action,
    packet: Option<&MatchKey>,
    group_exists: &dyn Fn(u32) -> bool,
    policy: ActionPolicy,
) -> Result<(), OfpError> {
    // Arguments first (reserved numbers, push ethertypes, set-field type
    // and value), then what depends on this switch.
    a.validate()?;
    match a {
        Action::Output { port, .. } if !valid_output_port(*port, policy) => {
            return Err(bad_action(BadActionCode::BadOutPort));
        }
        Action::Group { group_id } if !group_exists(*group_id) => {
            return Err(bad_action(BadActionCode::BadOutGroup));
        }
        Action::SetField {
            field: Oxm::Basic { field, .. },
        } => {
            if let Some(p) = packet {
                // vlan_vid has no prerequisite as a match field, but
                // setting it needs a tag to write into (as in Open
                // vSwitch): the same condition as vlan_pcp's prerequisite.
                let needs = match field {
                    OxmField::VlanVid => OxmField::VlanPcp,
                    f => *f,
                };
                if !prerequisite_met(needs, p) {
                    return Err(bad_action(BadActionCode::MatchInconsistent));
                }
            }
        }
        Action::Experimenter { .. } => return Err(bad_action(BadActionCode::BadExperimenter)),
        _ => {
            if let Some(p) = packet {
                if !header_present(a, p) {
                    return Err(bad_action(BadActionCode::MatchInconsistent));
                }
            }
        }
    }
    Ok(())
}

/// Whether the header action `a` works on is sure to be there: a VLAN tag
/// for `pop_vlan`, an MPLS ethertype for `pop_mpls` and the MPLS TTL
/// actions, IPv4/IPv6 for the IP TTL actions, the PBB ethertype for
/// `pop_pbb`. The spec's own example of `MATCH_INCONSISTENT` is a
/// `pop_vlan` on a match without a VLAN (§6.4); Open vSwitch refuses the
/// same set.
fn header_present(a: &Action, p: &MatchKey) -> bool {
    match a {
        // vlan_pcp's prerequisite is exactly "a tag is present".
        Action::PopVlan => prerequisite_met(OxmField::VlanPcp, p),
        Action::PopMpls { .. } | Action::SetMplsTtl { .. } | Action::DecMplsTtl => {
            prerequisite_met(OxmField::MplsLabel, p)
        }
        Action::SetNwTtl { .. } | Action::DecNwTtl => prerequisite_met(OxmField::IpProto, p),
        Action::PopPbb => prerequisite_met(OxmField::PbbIsid, p),
        _ => true,
    }
}

/// Updates what is known about the packet after action `a`.
fn track(a: &Action, p: &mut MatchKey) {
    let eth_mask = full_mask(OxmField::EthType);
    match a {
        Action::PushVlan { .. } => {
            let present = u128::from(ofp::oxm::OFPVID_PRESENT);
            p.set(OxmField::VlanVid, present, present);
            p.remove(OxmField::VlanPcp);
        }
        Action::PopVlan => {
            p.remove(OxmField::VlanVid);
            p.remove(OxmField::VlanPcp);
        }
        Action::PushMpls { ethertype } | Action::PopMpls { ethertype } => {
            for f in [OxmField::MplsLabel, OxmField::MplsTc, OxmField::MplsBos] {
                p.remove(f);
            }
            p.set(OxmField::EthType, u128::from(*ethertype), eth_mask);
        }
        Action::PushPbb { ethertype } => {
            p.set(OxmField::EthType, u128::from(*ethertype), eth_mask);
        }
        Action::PopPbb => p.remove(OxmField::EthType),
        Action::SetField {
            field: Oxm::Basic { field, value, .. },
        } => p.set(*field, value_bits(value), full_mask(*field)),
        _ => return,
    }
    prune(p);
}

/// Removes every field whose prerequisite no longer holds, until none is
/// left: after a push or pop, what the match said about inner headers is
/// no longer known.
fn prune(p: &mut MatchKey) {
    loop {
        let stale = p
            .fields()
            .iter()
            .map(|f| f.field)
            .find(|f| !prerequisite_met(*f, p));
        match stale {
            Some(f) => p.remove(f),
            None => return,
        }
    }
}

/// Every action type the executor runs (also what GROUP_FEATURES reports).
pub const ACTIONS: [u16; 16] = [
    ofp::action::action_type::OUTPUT,
    ofp::action::action_type::COPY_TTL_OUT,
    ofp::action::action_type::COPY_TTL_IN,
    ofp::action::action_type::SET_MPLS_TTL,
    ofp::action::action_type::DEC_MPLS_TTL,
    ofp::action::action_type::PUSH_VLAN,
    ofp::action::action_type::POP_VLAN,
    ofp::action::action_type::PUSH_MPLS,
    ofp::action::action_type::POP_MPLS,
    ofp::action::action_type::SET_QUEUE,
    ofp::action::action_type::GROUP,
    ofp::action::action_type::SET_NW_TTL,
    ofp::action::action_type::DEC_NW_TTL,
    ofp::action::action_type::SET_FIELD,
    ofp::action::action_type::PUSH_PBB,
    ofp::action::action_type::POP_PBB,
];

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::consts::group_no;
    use ofp::{Match, OxmValue};
    use std::net::Ipv4Addr;

    fn key(fields: Vec<Oxm>) -> MatchKey {
        MatchKey::new(&Match { fields }).unwrap()
    }

    fn exact(field: OxmField, value: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: None,
        }
    }

    fn set(field: OxmField, value: OxmValue) -> Action {
        Action::SetField {
            field: exact(field, value),
        }
    }

    fn check(instructions: &[Instruction], k: &MatchKey, table_id: u8) -> Result<(), OfpError> {
        let groups = |g: u32| g == 1;
        let meters = |m: u32| m == 5;
        let ctx = InstructionContext {
            table_id,
            n_tables: 4,
            group_exists: &groups,
            meter_exists: &meters,
            policy: ActionPolicy::default(),
        };
        validate_instructions(instructions, k, &ctx)
    }

    fn apply(actions: Vec<Action>) -> Vec<Instruction> {
        vec![Instruction::ApplyActions { actions }]
    }

    #[test]
    fn good_instruction_lists_pass() {
        let k = key(vec![exact(OxmField::EthType, OxmValue::U16(0x0800))]);
        let ins = vec![
            Instruction::Meter { meter_id: 5 },
            Instruction::ApplyActions {
                actions: vec![
                    set(OxmField::Ipv4Src, OxmValue::Ipv4(Ipv4Addr::new(1, 2, 3, 4))),
                    Action::Group { group_id: 1 },
                    Action::Output {
                        port: port_no::CONTROLLER,
                        max_len: 128,
                    },
                ],
            },
            Instruction::WriteMetadata {
                metadata: 1,
                metadata_mask: 1,
            },
            Instruction::GotoTable { table_id: 3 },
        ];
        assert_eq!(check(&ins, &k, 0), Ok(()));
    }

    #[test]
    fn instruction_errors() {
        let k = MatchKey::default();
        let bi = OfpError::BadInstruction;
        assert_eq!(
            check(&[Instruction::GotoTable { table_id: 2 }], &k, 2),
            Err(bi(BadInstructionCode::BadTableId))
        );
        assert_eq!(
            check(&[Instruction::GotoTable { table_id: 1 }], &k, 2),
            Err(bi(BadInstructionCode::BadTableId))
        );
        assert_eq!(
            check(&[Instruction::GotoTable { table_id: 4 }], &k, 0),
            Err(bi(BadInstructionCode::BadTableId))
        );
        assert_eq!(
            check(&[Instruction::GotoTable { table_id: 3 }], &k, 2),
            Ok(())
        );
        assert_eq!(
            check(
                &[Instruction::ClearActions, Instruction::ClearActions],
                &k,
                0
            ),
            Err(bi(BadInstructionCode::UnsupInst))
        );
        assert_eq!(
            check(
                &[Instruction::Experimenter {
                    experimenter: 0x2320,
                    data: vec![]
                }],
                &k,
                0
            ),
            Err(bi(BadInstructionCode::UnsupInst))
        );
        assert_eq!(
            check(&[Instruction::Meter { meter_id: 6 }], &k, 0),
            Err(OfpError::MeterModFailed(MeterModFailedCode::UnknownMeter))
        );
    }

    #[test]
    fn action_errors() {
        let k = MatchKey::default();
        let ba = |c| Err(OfpError::BadAction(c));
        let out = |port| Action::Output { port, max_len: 0 };
        for port in [0, port_no::ANY, port_no::TABLE, port_no::MAX + 1] {
            assert_eq!(
                check(&apply(vec![out(port)]), &k, 0),
                ba(BadActionCode::BadOutPort)
            );
        }
        for port in [
            1,
            port_no::MAX,
            port_no::IN_PORT,
            port_no::FLOOD,
            port_no::ALL,
            port_no::LOCAL,
            port_no::NORMAL,
        ] {
            assert_eq!(check(&apply(vec![out(port)]), &k, 0), Ok(()));
        }
        // A switch that says it has no NORMAL refuses it.
        let off = ActionPolicy {
            normal_supported: false,
        };
        assert!(!valid_output_port(port_no::NORMAL, off));
        assert!(valid_output_port(port_no::NORMAL, ActionPolicy::default()));
        assert_eq!(
            check(&apply(vec![Action::Group { group_id: 2 }]), &k, 0),
            ba(BadActionCode::BadOutGroup)
        );
        assert_eq!(
            check(
                &apply(vec![Action::Group {
                    group_id: group_no::ALL
                }]),
                &k,
                0
            ),
            ba(BadActionCode::BadOutGroup)
        );
        assert_eq!(
            check(&apply(vec![Action::PushVlan { ethertype: 0x0800 }]), &k, 0),
            ba(BadActionCode::BadArgument)
        );
        assert_eq!(
            check(&apply(vec![Action::PushMpls { ethertype: 0x8100 }]), &k, 0),
            ba(BadActionCode::BadArgument)
        );
        assert_eq!(
            check(&apply(vec![Action::PushPbb { ethertype: 0x8100 }]), &k, 0),
            ba(BadActionCode::BadArgument)
        );
        assert_eq!(
            check(
                &apply(vec![Action::Experimenter {
                    experimenter: 0x2320,
                    data: vec![]
                }]),
                &k,
                0
            ),
            ba(BadActionCode::BadExperimenter)
        );
        assert_eq!(
            check(&apply(vec![set(OxmField::InPort, OxmValue::U32(1))]), &k, 0),
            ba(BadActionCode::BadSetType)
        );
        assert_eq!(
            check(
                &apply(vec![set(OxmField::Metadata, OxmValue::U64(1))]),
                &k,
                0
            ),
            ba(BadActionCode::BadSetType)
        );
        assert_eq!(
            check(&apply(vec![set(OxmField::VlanPcp, OxmValue::U8(9))]), &k, 0),
            ba(BadActionCode::BadSetArgument)
        );
        let masked = Action::SetField {
            field: Oxm::Basic {
                field: OxmField::EthDst,
                value: OxmValue::Mac(ofp::MacAddr([1; 6])),
                mask: Some(OxmValue::Mac(ofp::MacAddr([0xff; 6]))),
            },
        };
        assert_eq!(
            check(&apply(vec![masked]), &k, 0),
            ba(BadActionCode::BadSetArgument)
        );
    }

    #[test]
    fn set_field_prerequisites_follow_the_packet() {
        let ip = OxmValue::Ipv4(Ipv4Addr::new(10, 0, 0, 1));
        let none = MatchKey::default();
        let ipv4 = key(vec![exact(OxmField::EthType, OxmValue::U16(0x0800))]);
        let mi = Err(OfpError::BadAction(BadActionCode::MatchInconsistent));
        assert_eq!(
            check(&apply(vec![set(OxmField::Ipv4Src, ip)]), &none, 0),
            mi
        );
        assert_eq!(
            check(&apply(vec![set(OxmField::Ipv4Src, ip)]), &ipv4, 0),
            Ok(())
        );
        // After push_mpls the IPv4 header is no longer the outer one.
        assert_eq!(
            check(
                &apply(vec![
                    Action::PushMpls { ethertype: 0x8847 },
                    set(OxmField::Ipv4Src, ip)
                ]),
                &ipv4,
                0
            ),
            mi
        );
        // ...but its MPLS label can be set.
        assert_eq!(
            check(
                &apply(vec![
                    Action::PushMpls { ethertype: 0x8847 },
                    set(OxmField::MplsLabel, OxmValue::U32(16))
                ]),
                &ipv4,
                0
            ),
            Ok(())
        );
        // vlan_pcp needs a tag: from the match or a push before it.
        assert_eq!(
            check(
                &apply(vec![set(OxmField::VlanPcp, OxmValue::U8(3))]),
                &none,
                0
            ),
            mi
        );
        assert_eq!(
            check(
                &apply(vec![
                    Action::PushVlan { ethertype: 0x8100 },
                    set(OxmField::VlanPcp, OxmValue::U8(3))
                ]),
                &none,
                0
            ),
            Ok(())
        );
        // Write-actions: push_vlan runs before set-field whatever the order.
        assert_eq!(
            check(
                &[Instruction::WriteActions {
                    actions: vec![
                        set(OxmField::VlanPcp, OxmValue::U8(3)),
                        Action::PushVlan { ethertype: 0x8100 }
                    ]
                }],
                &none,
                0
            ),
            Ok(())
        );
        // ...and pops run first: a popped tag cannot be set afterwards.
        let tagged = key(vec![exact(OxmField::VlanVid, OxmValue::U16(0x1005))]);
        assert_eq!(
            check(
                &[Instruction::WriteActions {
                    actions: vec![set(OxmField::VlanPcp, OxmValue::U8(3)), Action::PopVlan]
                }],
                &tagged,
                0
            ),
            mi
        );
        // An apply-actions pop is seen by write-actions.
        assert_eq!(
            check(
                &[
                    Instruction::WriteActions {
                        actions: vec![set(OxmField::VlanPcp, OxmValue::U8(3))]
                    },
                    Instruction::ApplyActions {
                        actions: vec![Action::PopVlan]
                    },
                ],
                &tagged,
                0
            ),
            mi
        );
    }

    #[test]
    fn header_actions_need_their_header() {
        let none = MatchKey::default();
        let ipv4 = key(vec![exact(OxmField::EthType, OxmValue::U16(0x0800))]);
        let mpls = key(vec![exact(OxmField::EthType, OxmValue::U16(0x8847))]);
        let tagged = key(vec![exact(OxmField::VlanVid, OxmValue::U16(0x1005))]);
        let any_tag = key(vec![Oxm::Basic {
            field: OxmField::VlanVid,
            value: OxmValue::U16(0x1000),
            mask: Some(OxmValue::U16(0x1000)),
        }]);
        let untagged = key(vec![exact(OxmField::VlanVid, OxmValue::U16(0))]);
        let mi = Err(OfpError::BadAction(BadActionCode::MatchInconsistent));
        let pop_mpls = Action::PopMpls { ethertype: 0x0800 };
        for (actions, k, want) in [
            (vec![Action::PopVlan], &none, mi),
            (vec![Action::PopVlan], &untagged, mi),
            (vec![Action::PopVlan], &tagged, Ok(())),
            (vec![Action::PopVlan], &any_tag, Ok(())),
            (vec![Action::PopVlan, Action::PopVlan], &tagged, mi),
            (
                vec![Action::PushVlan { ethertype: 0x8100 }, Action::PopVlan],
                &none,
                Ok(()),
            ),
            (vec![Action::DecNwTtl], &none, mi),
            (vec![Action::DecNwTtl], &ipv4, Ok(())),
            (vec![Action::SetNwTtl { nw_ttl: 9 }], &mpls, mi),
            (vec![Action::DecMplsTtl], &ipv4, mi),
            (vec![Action::SetMplsTtl { mpls_ttl: 3 }], &mpls, Ok(())),
            (vec![pop_mpls.clone()], &ipv4, mi),
            (vec![pop_mpls.clone()], &mpls, Ok(())),
            (
                vec![
                    Action::PushMpls { ethertype: 0x8847 },
                    pop_mpls.clone(),
                    Action::DecNwTtl,
                ],
                &ipv4,
                Ok(()),
            ),
            (vec![pop_mpls, Action::DecMplsTtl], &mpls, mi),
            (vec![Action::PopPbb], &none, mi),
            (
                vec![Action::PushPbb { ethertype: 0x88e7 }, Action::PopPbb],
                &none,
                Ok(()),
            ),
        ] {
            assert_eq!(
                check(&apply(actions.clone()), k, 0),
                want,
                "{actions:?} on {k:?}"
            );
        }
        // In write-actions the pops are checked against the packet before
        // the set runs; the TTL actions are not (pushes come first).
        let write = |actions| vec![Instruction::WriteActions { actions }];
        assert_eq!(check(&write(vec![Action::PopVlan]), &none, 0), mi);
        assert_eq!(
            check(
                &write(vec![
                    Action::DecNwTtl,
                    Action::PushMpls { ethertype: 0x8847 }
                ]),
                &ipv4,
                0
            ),
            Ok(())
        );
        // Buckets have no match: nothing to check against.
        let no_group = |_: u32| false;
        assert_eq!(
            validate_action_list(
                &[Action::PopVlan, Action::DecNwTtl],
                None,
                &no_group,
                ActionPolicy::default()
            ),
            Ok(())
        );
    }

    #[test]
    fn setting_vlan_vid_needs_a_tag() {
        let mi = Err(OfpError::BadAction(BadActionCode::MatchInconsistent));
        let none = MatchKey::default();
        let tagged = key(vec![exact(OxmField::VlanVid, OxmValue::U16(0x1005))]);
        let vid = set(OxmField::VlanVid, OxmValue::U16(0x1000 | 7));
        assert_eq!(check(&apply(vec![vid.clone()]), &none, 0), mi);
        assert_eq!(check(&apply(vec![vid.clone()]), &tagged, 0), Ok(()));
        let pushed = vec![Action::PushVlan { ethertype: 0x88a8 }, vid.clone()];
        assert_eq!(check(&apply(pushed), &none, 0), Ok(()));
        let popped = vec![Action::PopVlan, vid];
        assert_eq!(check(&apply(popped), &tagged, 0), mi);
    }
}
