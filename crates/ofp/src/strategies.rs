//! Proptest strategies for OXM fields, matches, actions and instructions.
//!
//! Every strategy yields only well-formed values: field values fit their
//! field's bit width, masked values have no bits outside their mask, `Other`
//! TLVs have bodies that fit one TLV, experimenter action/instruction data is
//! a multiple of 8 bytes. So `decode(encode(v)) == v` holds for all of them,
//! and other crates (messages, multipart, flow text) can build on them.
//!
//! Compiled for this crate's tests and, for other crates, behind the
//! `proptest` feature.

use crate::action::Action;
use crate::group_mod::{Bucket, GroupType};
use crate::instruction::Instruction;
use crate::meter_mod::MeterBand;
use crate::oxm::{
    MacAddr, Match, Oxm, OxmField, OxmValue, OXM_CLASS_EXPERIMENTER, OXM_CLASS_OPENFLOW_BASIC,
};
use crate::port::Port;
use crate::wire::{Field, Reader};
use proptest::collection::vec;
use proptest::prelude::*;

/// The largest value that fits `field`'s bit width.
fn field_max(field: OxmField) -> u128 {
    match field.bits() {
        b if b >= 128 => u128::MAX,
        b => (1u128 << b) - 1,
    }
}

/// A value for `field` within its bit width (edge values included often).
pub fn arb_oxm_value(field: OxmField) -> BoxedStrategy<OxmValue> {
    let kind = field.kind();
    let max = field_max(field);
    prop_oneof![
        1 => Just(0u128),
        1 => Just(max),
        6 => any::<u128>().prop_map(move |v| v & max),
    ]
    .prop_map(move |v| OxmValue::from_u128(kind, v))
    .boxed()
}

/// A basic-class TLV for `field`: exact, or masked (value within the mask)
/// where the field allows a mask.
pub fn arb_basic_oxm_for(field: OxmField) -> BoxedStrategy<Oxm> {
    let exact = arb_oxm_value(field).prop_map(move |v| Oxm::basic(field, v));
    if !field.maskable() {
        return exact.boxed();
    }
    let kind = field.kind();
    let masked = (arb_oxm_value(field), arb_oxm_value(field)).prop_map(move |(v, m)| {
        let value = OxmValue::from_u128(kind, v.to_u128() & m.to_u128());
        Oxm::masked(field, value, m)
    });
    prop_oneof![exact, masked].boxed()
}

/// A basic-class TLV for any field this crate types.
pub fn arb_basic_oxm() -> BoxedStrategy<Oxm> {
    proptest::sample::select(OxmField::ALL)
        .prop_flat_map(arb_basic_oxm_for)
        .boxed()
}

/// An opaque TLV: an experimenter TLV (class `0xffff`, experimenter id then
/// data), a Nicira-class TLV (class 0 or 1), or a basic-class TLV with a
/// field number this crate does not type. `hasmask` may be set only when
/// `allow_mask`.
pub fn arb_other_oxm(allow_mask: bool) -> BoxedStrategy<Oxm> {
    let hasmask = if allow_mask {
        any::<bool>().boxed()
    } else {
        Just(false).boxed()
    };
    let experimenter = (
        0u8..128,
        hasmask.clone(),
        any::<u32>(),
        vec(any::<u8>(), 0..12),
    )
        .prop_map(|(field, hasmask, exp, data)| {
            let mut body = exp.to_be_bytes().to_vec();
            body.extend(data);
            Oxm::Other {
                class: OXM_CLASS_EXPERIMENTER,
                field,
                hasmask,
                body,
            }
        });
    let nicira = (0u16..2, 0u8..128, hasmask.clone(), vec(any::<u8>(), 0..12)).prop_map(
        |(class, field, hasmask, body)| Oxm::Other {
            class,
            field,
            hasmask,
            body,
        },
    );
    let unknown_basic = (
        (0u8..128).prop_filter("typed field", |f| OxmField::from_u8(*f).is_none()),
        hasmask,
        vec(any::<u8>(), 0..12),
    )
        .prop_map(|(field, hasmask, body)| Oxm::Other {
            class: OXM_CLASS_OPENFLOW_BASIC,
            field,
            hasmask,
            body,
        });
    prop_oneof![2 => experimenter, 1 => nicira, 1 => unknown_basic].boxed()
}

/// Any well-formed TLV, mostly basic fields.
pub fn arb_oxm() -> BoxedStrategy<Oxm> {
    prop_oneof![6 => arb_basic_oxm(), 1 => arb_other_oxm(true)].boxed()
}

/// A match of up to 8 TLVs. Only the wire format is respected: fields may
/// repeat and prerequisites may be missing (see `Match::validate`).
pub fn arb_match() -> BoxedStrategy<Match> {
    vec(arb_oxm(), 0..8)
        .prop_map(|fields| Match { fields })
        .boxed()
}

/// A protocol stack for [`arb_valid_match`]: exact prerequisite fields and
/// the fields they allow.
type Stack = (Vec<(OxmField, u128)>, Vec<OxmField>);

/// A match that passes [`Match::validate`]: one protocol stack (none,
/// IPv4/IPv6 with TCP/UDP/SCTP/ICMP, neighbour discovery, ARP, MPLS, PBB)
/// with its prerequisites, a random subset of that stack's fields, and
/// optional in_port/in_phy_port, metadata, Ethernet addresses, tunnel id
/// and VLAN (tagged, masked-present or untagged, with vlan_pcp only when
/// tagged), in shuffled order.
pub fn arb_valid_match() -> BoxedStrategy<Match> {
    use OxmField as F;
    const V4: (OxmField, u128) = (F::EthType, 0x0800);
    const V6: (OxmField, u128) = (F::EthType, 0x86dd);
    let ip4 = [F::IpDscp, F::IpEcn, F::Ipv4Src, F::Ipv4Dst];
    let ip6 = [
        F::IpDscp,
        F::IpEcn,
        F::Ipv6Src,
        F::Ipv6Dst,
        F::Ipv6Flabel,
        F::Ipv6Exthdr,
    ];
    let with = |a: &[OxmField], b: &[OxmField]| [a, b].concat();
    let stacks: Vec<Stack> = vec![
        (vec![], vec![]),
        (vec![V4], ip4.to_vec()),
        (
            vec![V4, (F::IpProto, 6)],
            with(&ip4, &[F::TcpSrc, F::TcpDst]),
        ),
        (
            vec![V6, (F::IpProto, 6)],
            with(&ip6, &[F::TcpSrc, F::TcpDst]),
        ),
        (
            vec![V4, (F::IpProto, 17)],
            with(&ip4, &[F::UdpSrc, F::UdpDst]),
        ),
        (
            vec![V6, (F::IpProto, 17)],
            with(&ip6, &[F::UdpSrc, F::UdpDst]),
        ),
        (
            vec![V4, (F::IpProto, 132)],
            with(&ip4, &[F::SctpSrc, F::SctpDst]),
        ),
        (
            vec![V4, (F::IpProto, 1)],
            with(&ip4, &[F::Icmpv4Type, F::Icmpv4Code]),
        ),
        (
            vec![V6, (F::IpProto, 58)],
            with(&ip6, &[F::Icmpv6Type, F::Icmpv6Code]),
        ),
        (
            vec![V6, (F::IpProto, 58), (F::Icmpv6Type, 135)],
            vec![F::Icmpv6Code, F::Ipv6NdTarget, F::Ipv6NdSll, F::Ipv6Src],
        ),
        (
            vec![V6, (F::IpProto, 58), (F::Icmpv6Type, 136)],
            vec![F::Icmpv6Code, F::Ipv6NdTarget, F::Ipv6NdTll, F::Ipv6Dst],
        ),
        (
            vec![(F::EthType, 0x0806)],
            vec![F::ArpOp, F::ArpSpa, F::ArpTpa, F::ArpSha, F::ArpTha],
        ),
        (
            vec![(F::EthType, 0x8847)],
            vec![F::MplsLabel, F::MplsTc, F::MplsBos],
        ),
        (vec![(F::EthType, 0x8848)], vec![F::MplsLabel]),
        (vec![(F::EthType, 0x88e7)], vec![F::PbbIsid, F::PbbUca]),
    ];
    (
        proptest::sample::select(stacks),
        vec(any::<bool>(), 24),
        0u8..4,
        0u16..0x1000,
    )
        .prop_flat_map(|((required, optional), picks, vlan, vid)| {
            let mut picks = picks.into_iter();
            let mut pick = move || picks.next().unwrap_or(false);
            let mut parts: Vec<BoxedStrategy<Oxm>> = required
                .iter()
                .map(|&(f, v)| Just(Oxm::basic(f, OxmValue::from_u128(f.kind(), v))).boxed())
                .collect();
            for f in optional {
                if pick() {
                    parts.push(arb_basic_oxm_for(f));
                }
            }
            for f in [F::Metadata, F::EthSrc, F::EthDst, F::TunnelId] {
                if pick() {
                    parts.push(arb_basic_oxm_for(f));
                }
            }
            if pick() {
                parts.push(arb_basic_oxm_for(F::InPort));
                if pick() {
                    parts.push(arb_basic_oxm_for(F::InPhyPort));
                }
            }
            let present = u128::from(crate::oxm::OFPVID_PRESENT);
            let tag = match vlan {
                1 => Some(Oxm::basic(
                    F::VlanVid,
                    OxmValue::U16(crate::oxm::OFPVID_NONE),
                )),
                2 => Some(Oxm::basic(F::VlanVid, OxmValue::U16(0x1000 | vid))),
                3 => Some(Oxm::masked(
                    F::VlanVid,
                    OxmValue::from_u128(F::VlanVid.kind(), present),
                    OxmValue::from_u128(F::VlanVid.kind(), present),
                )),
                _ => None,
            };
            if let Some(tag) = tag {
                parts.push(Just(tag).boxed());
                if vlan >= 2 && pick() {
                    parts.push(arb_basic_oxm_for(F::VlanPcp));
                }
            }
            parts.prop_shuffle()
        })
        .prop_map(|fields| Match { fields })
        .boxed()
}

/// Fields that `set_field` may write (all but `in_port`, `in_phy_port`,
/// `metadata` and `ipv6_exthdr`).
pub fn settable_fields() -> Vec<OxmField> {
    OxmField::ALL
        .iter()
        .copied()
        .filter(|f| {
            !matches!(
                f,
                OxmField::InPort | OxmField::InPhyPort | OxmField::Metadata | OxmField::Ipv6Exthdr
            )
        })
        .collect()
}

/// The OXM of a `set_field` action: an unmasked settable basic field, or
/// (rarely) an unmasked opaque TLV.
pub fn arb_set_field_oxm() -> BoxedStrategy<Oxm> {
    let basic = proptest::sample::select(settable_fields())
        .prop_flat_map(|f| arb_oxm_value(f).prop_map(move |v| Oxm::basic(f, v)));
    prop_oneof![8 => basic, 1 => arb_other_oxm(false)].boxed()
}

/// Data whose length is a multiple of 8 (experimenter bodies), up to 24 bytes.
fn arb_padded_data() -> BoxedStrategy<Vec<u8>> {
    (0usize..4)
        .prop_flat_map(|n| vec(any::<u8>(), n * 8))
        .boxed()
}

/// An ethertype, usually one that push/pop actions take.
fn arb_ethertype() -> BoxedStrategy<u16> {
    prop_oneof![
        3 => proptest::sample::select(vec![0x8100u16, 0x88a8, 0x8847, 0x8848, 0x88e7, 0x0800, 0x86dd]),
        1 => any::<u16>(),
    ]
    .boxed()
}

/// Any action.
pub fn arb_action() -> BoxedStrategy<Action> {
    prop_oneof![
        4 => (any::<u32>(), any::<u16>()).prop_map(|(port, max_len)| Action::Output { port, max_len }),
        1 => Just(Action::CopyTtlOut),
        1 => Just(Action::CopyTtlIn),
        1 => any::<u8>().prop_map(|mpls_ttl| Action::SetMplsTtl { mpls_ttl }),
        1 => Just(Action::DecMplsTtl),
        1 => arb_ethertype().prop_map(|ethertype| Action::PushVlan { ethertype }),
        1 => Just(Action::PopVlan),
        1 => arb_ethertype().prop_map(|ethertype| Action::PushMpls { ethertype }),
        1 => arb_ethertype().prop_map(|ethertype| Action::PopMpls { ethertype }),
        1 => any::<u32>().prop_map(|queue_id| Action::SetQueue { queue_id }),
        1 => any::<u32>().prop_map(|group_id| Action::Group { group_id }),
        1 => any::<u8>().prop_map(|nw_ttl| Action::SetNwTtl { nw_ttl }),
        1 => Just(Action::DecNwTtl),
        4 => arb_set_field_oxm().prop_map(|field| Action::SetField { field }),
        1 => arb_ethertype().prop_map(|ethertype| Action::PushPbb { ethertype }),
        1 => Just(Action::PopPbb),
        1 => (any::<u32>(), arb_padded_data())
            .prop_map(|(experimenter, data)| Action::Experimenter { experimenter, data }),
    ]
    .boxed()
}

/// A list of up to 6 actions.
pub fn arb_actions() -> BoxedStrategy<Vec<Action>> {
    vec(arb_action(), 0..6).boxed()
}

/// Any instruction.
pub fn arb_instruction() -> BoxedStrategy<Instruction> {
    prop_oneof![
        any::<u8>().prop_map(|table_id| Instruction::GotoTable { table_id }),
        (any::<u64>(), any::<u64>()).prop_map(|(metadata, metadata_mask)| {
            Instruction::WriteMetadata {
                metadata,
                metadata_mask,
            }
        }),
        arb_actions().prop_map(|actions| Instruction::WriteActions { actions }),
        arb_actions().prop_map(|actions| Instruction::ApplyActions { actions }),
        Just(Instruction::ClearActions),
        any::<u32>().prop_map(|meter_id| Instruction::Meter { meter_id }),
        (any::<u32>(), arb_padded_data())
            .prop_map(|(experimenter, data)| Instruction::Experimenter { experimenter, data }),
    ]
    .boxed()
}

/// A flow's instruction list: each instruction type at most once, in the
/// order the pipeline executes them and `ovs-ofctl` prints them (meter,
/// apply_actions, clear_actions, write_actions, write_metadata, goto_table,
/// then experimenter), so text printers and parsers can round-trip it.
pub fn arb_instructions() -> BoxedStrategy<Vec<Instruction>> {
    let opt = |s: BoxedStrategy<Instruction>| proptest::option::of(s);
    (
        arb_action_instructions(arb_actions(), arb_actions()),
        opt(any::<u8>()
            .prop_map(|table_id| Instruction::GotoTable { table_id })
            .boxed()),
        opt((any::<u32>(), arb_padded_data())
            .prop_map(|(experimenter, data)| Instruction::Experimenter { experimenter, data })
            .boxed()),
    )
        .prop_map(|(mut list, goto, experimenter)| {
            list.extend(goto);
            list.extend(experimenter);
            list
        })
        .boxed()
}

/// The instructions up to write_metadata, each at most once and in
/// pipeline order: meter, apply_actions (from `apply`), clear_actions,
/// write_actions (from `write`), write_metadata. Callers add goto_table
/// and experimenter as their tests allow.
pub fn arb_action_instructions(
    apply: BoxedStrategy<Vec<Action>>,
    write: BoxedStrategy<Vec<Action>>,
) -> BoxedStrategy<Vec<Instruction>> {
    let opt = |s: BoxedStrategy<Instruction>| proptest::option::of(s);
    (
        opt(any::<u32>()
            .prop_map(|meter_id| Instruction::Meter { meter_id })
            .boxed()),
        opt(apply
            .prop_map(|actions| Instruction::ApplyActions { actions })
            .boxed()),
        opt(Just(Instruction::ClearActions).boxed()),
        opt(write
            .prop_map(|actions| Instruction::WriteActions { actions })
            .boxed()),
        opt((any::<u64>(), any::<u64>())
            .prop_map(|(metadata, metadata_mask)| Instruction::WriteMetadata {
                metadata,
                metadata_mask,
            })
            .boxed()),
    )
        .prop_map(|(a, b, c, d, e)| [a, b, c, d, e].into_iter().flatten().collect())
        .boxed()
}

/// Any value of a fixed-size wire structure (a [`Field`] with a `SIZE`),
/// decoded from random bytes of its size: every field arbitrary, padding
/// re-encoded as zeros.
pub fn arb_fixed<T: Field + std::fmt::Debug + 'static>() -> BoxedStrategy<T> {
    let size = T::SIZE.expect("a fixed-size structure");
    vec(any::<u8>(), size)
        .prop_map(|b| T::read(&mut Reader::new(&b)).expect("any bytes of its size decode"))
        .boxed()
}

/// Any length-prefixed record: random bytes for its `fixed` part with its
/// `u16` length (`len_at` bytes in) set to the whole, then `tail`, decoded.
pub fn arb_record<T: Field + std::fmt::Debug + 'static>(
    fixed: usize,
    len_at: usize,
    tail: impl Strategy<Value = Vec<u8>> + 'static,
) -> BoxedStrategy<T> {
    (vec(any::<u8>(), fixed), tail)
        .prop_map(move |(mut b, tail)| {
            b.extend(tail);
            let len = u16::try_from(b.len()).expect("a small record");
            b[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
            T::read(&mut Reader::new(&b)).expect("a record of valid length decodes")
        })
        .boxed()
}

/// A port description: any numbers, a name of up to 4 characters (no NUL).
pub fn arb_port() -> BoxedStrategy<Port> {
    (any::<(u32, [u8; 6])>(), "[^\u{0}]{0,4}", any::<[u32; 8]>())
        .prop_map(|((port_no, mac), name, v)| Port {
            port_no,
            hw_addr: MacAddr(mac),
            name,
            config: v[0],
            state: v[1],
            curr: v[2],
            advertised: v[3],
            supported: v[4],
            peer: v[5],
            curr_speed: v[6],
            max_speed: v[7],
        })
        .boxed()
}

/// Any meter band: drop, DSCP remark, or experimenter with up to 16 bytes.
pub fn arb_meter_band() -> BoxedStrategy<MeterBand> {
    prop_oneof![
        any::<(u32, u32)>().prop_map(|(rate, burst_size)| MeterBand::Drop { rate, burst_size }),
        any::<(u32, u32, u8)>().prop_map(|(rate, burst_size, prec_level)| {
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            }
        }),
        (any::<(u32, u32, u32)>(), vec(any::<u8>(), 0..=16)).prop_map(
            |((rate, burst_size, experimenter), data)| MeterBand::Experimenter {
                rate,
                burst_size,
                experimenter,
                data,
            }
        ),
    ]
    .boxed()
}

/// Any group type.
pub fn arb_group_type() -> BoxedStrategy<GroupType> {
    use GroupType::*;
    proptest::sample::select(vec![All, Select, Indirect, FastFailover]).boxed()
}

/// A bucket with any weight and watches and a list of actions.
pub fn arb_bucket() -> BoxedStrategy<Bucket> {
    (any::<(u16, u32, u32)>(), arb_actions())
        .prop_map(|((weight, watch_port, watch_group), actions)| Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FieldList;

    fn enc_match(m: &Match) -> Vec<u8> {
        let mut w = Vec::new();
        m.encode(&mut w);
        w
    }

    fn enc_actions(a: &[Action]) -> Vec<u8> {
        let mut w = Vec::new();
        Action::encode_list(a, &mut w);
        w
    }

    fn enc_insts(i: &[Instruction]) -> Vec<u8> {
        let mut w = Vec::new();
        Instruction::encode_list(i, &mut w);
        w
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn oxm_round_trips(o in arb_oxm()) {
            let mut w = Vec::new();
            o.encode(&mut w);
            prop_assert_eq!(w.len(), o.wire_len());
            let mut r = Reader::new(&w);
            prop_assert_eq!(Oxm::decode(&mut r).unwrap(), o);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn match_round_trips(m in arb_match()) {
            let b = enc_match(&m);
            prop_assert_eq!(b.len() % 8, 0);
            prop_assert_eq!(b.len(), m.padded_len());
            let mut r = Reader::new(&b);
            let d = Match::decode(&mut r).unwrap();
            prop_assert!(r.is_empty());
            prop_assert_eq!(&d, &m);
            prop_assert_eq!(enc_match(&d), b);
        }

        #[test]
        fn actions_round_trip(a in arb_actions()) {
            let b = enc_actions(&a);
            prop_assert_eq!(b.len(), Action::list_wire_len(&a));
            let d = Action::decode_list(&mut Reader::new(&b)).unwrap();
            prop_assert_eq!(&d, &a);
            prop_assert_eq!(enc_actions(&d), b);
        }

        #[test]
        fn instructions_round_trip(i in arb_instructions()) {
            let b = enc_insts(&i);
            prop_assert_eq!(b.len(), Instruction::list_wire_len(&i));
            let d = Instruction::decode_list(&mut Reader::new(&b)).unwrap();
            prop_assert_eq!(&d, &i);
            prop_assert_eq!(enc_insts(&d), b);
        }

        #[test]
        fn any_instruction_round_trips(i in arb_instruction()) {
            let b = enc_insts(std::slice::from_ref(&i));
            let d = Instruction::decode(&mut Reader::new(&b)).unwrap();
            prop_assert_eq!(d, i);
        }

        /// Random bytes never panic a decoder; what decodes re-encodes to
        /// the bytes it consumed (up to padding) and decodes the same again.
        #[test]
        fn random_match_bytes_never_panic(b in vec(any::<u8>(), 0..64), typed in any::<bool>()) {
            let mut b = b;
            if typed && b.len() >= 4 {
                // Make the header plausible so the field loop is exercised.
                b[0] = 0;
                b[1] = 1;
                b[2] = 0;
                b[3] %= b.len() as u8 + 1;
            }
            let mut r = Reader::new(&b);
            if let Ok(m) = Match::decode(&mut r) {
                let used = b.len() - r.remaining();
                let e = enc_match(&m);
                prop_assert_eq!(e.len(), used);
                prop_assert_eq!(&e[..m.wire_len()], &b[..m.wire_len()]);
                prop_assert_eq!(Match::decode(&mut Reader::new(&e)).unwrap(), m);
            }
        }

        #[test]
        fn random_action_bytes_never_panic(b in vec(any::<u8>(), 0..96), typed in any::<bool>()) {
            let mut b = b;
            if typed && b.len() >= 4 {
                b[0] = 0;
                b[1] %= 30;
                b[2] = 0;
                b[3] &= 0x38;
            }
            if let Ok(a) = Action::decode_list(&mut Reader::new(&b)) {
                let e = enc_actions(&a);
                prop_assert_eq!(e.len(), b.len());
                prop_assert_eq!(Action::decode_list(&mut Reader::new(&e)).unwrap(), a);
            }
        }

        #[test]
        fn random_instruction_bytes_never_panic(b in vec(any::<u8>(), 0..128), typed in any::<bool>()) {
            let mut b = b;
            if typed && b.len() >= 4 {
                b[0] = 0;
                b[1] %= 8;
                b[2] = 0;
                b[3] &= 0x78;
            }
            if let Ok(i) = Instruction::decode_list(&mut Reader::new(&b)) {
                let e = enc_insts(&i);
                prop_assert_eq!(e.len(), b.len());
                prop_assert_eq!(Instruction::decode_list(&mut Reader::new(&e)).unwrap(), i);
            }
        }

        #[test]
        fn random_oxm_bytes_never_panic(b in vec(any::<u8>(), 0..40)) {
            let mut r = Reader::new(&b);
            if let Ok(o) = Oxm::decode(&mut r) {
                let mut w = Vec::new();
                o.encode(&mut w);
                prop_assert_eq!(&w[..], &b[..b.len() - r.remaining()]);
            }
        }

        /// Mutating one byte of a well-formed encoding never panics.
        #[test]
        fn mutated_instructions_never_panic(i in arb_instructions(), at in any::<usize>(), v in any::<u8>()) {
            let mut b = enc_insts(&i);
            if !b.is_empty() {
                let n = b.len();
                b[at % n] = v;
            }
            let _ = Instruction::decode_list(&mut Reader::new(&b));
        }

        #[test]
        fn mutated_match_never_panics(m in arb_match(), at in any::<usize>(), v in any::<u8>()) {
            let mut b = enc_match(&m);
            let n = b.len();
            b[at % n] = v;
            let _ = Match::decode(&mut Reader::new(&b));
        }

        #[test]
        fn valid_matches_validate_and_round_trip(m in arb_valid_match()) {
            prop_assert_eq!(m.validate(), Ok(()));
            let b = enc_match(&m);
            prop_assert_eq!(Match::decode(&mut Reader::new(&b)).unwrap(), m);
        }

        /// Removing eth_type from a valid match that has any field needing
        /// it makes the match fail with BAD_PREREQ.
        #[test]
        fn dropping_eth_type_breaks_prereqs(m in arb_valid_match()) {
            let mut stripped = m.clone();
            stripped.fields.retain(|o| !matches!(o, Oxm::Basic { field: OxmField::EthType, .. }));
            let needs_eth = stripped.fields.iter().any(|o| match o {
                Oxm::Basic { field, .. } => !Match::default().prerequisites_met(*field)
                    && !matches!(field, OxmField::InPhyPort | OxmField::VlanPcp),
                Oxm::Other { .. } => false,
            });
            if needs_eth {
                prop_assert_eq!(
                    stripped.validate(),
                    Err(crate::error::OfpError::BadMatch(crate::error::BadMatchCode::BadPrereq))
                );
            } else {
                prop_assert_eq!(stripped.validate(), Ok(()));
            }
        }

        #[test]
        fn generated_set_fields_validate(a in arb_action()) {
            match &a {
                Action::SetField { field: Oxm::Other { .. } } => prop_assert!(a.validate().is_err()),
                Action::SetField { field } => {
                    prop_assert_eq!(Action::validate_set_field(field), Ok(()));
                }
                _ => {}
            }
        }
    }
}
