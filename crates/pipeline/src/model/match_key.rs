//! A match in canonical form ([`MatchKey`]): the set of `(field, value,
//! mask)` triples of an OXM match, sorted by field, with values masked and
//! fully wildcarded fields dropped. Two matches that select the same
//! packets field by field have equal keys whatever order their TLVs came
//! in, so the key is what strict flow-mods compare, what the table indexes
//! on, and what overlap and "at least as specific" questions are asked of.
//!
//! Also here: the OXM prerequisite table (spec 1.3.5 table 12) over a
//! canonical key, used to check set-field actions against what the match
//! and earlier actions guarantee about the packet (match validation itself
//! is `ofp`'s [`Match::validate`]).

use ofp::error::BadMatchCode;
use ofp::oxm::OFPVID_PRESENT;
use ofp::{Match, OfpError, Oxm, OxmField, OxmValue};

/// One field of a canonical match. `mask` is never zero, and `value` has
/// no bit set outside `mask`. Both are right-aligned in a `u128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyField {
    /// The field.
    pub field: OxmField,
    /// The value, masked.
    pub value: u128,
    /// The mask (all of the field's bits when the TLV had none).
    pub mask: u128,
}

/// A match in canonical form: fields sorted by field number, at most one
/// per field, none fully wildcarded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MatchKey {
    fields: Vec<KeyField>,
}

impl KeyField {
    /// The field as one OXM TLV: no mask when it is exact.
    pub fn to_oxm(&self) -> Oxm {
        let kind = self.field.kind();
        let mask =
            (self.mask != full_mask(self.field)).then(|| OxmValue::from_u128(kind, self.mask));
        Oxm::Basic {
            field: self.field,
            value: OxmValue::from_u128(kind, self.value),
            mask,
        }
    }

    /// Appends the field's OXM TLV, the bytes [`KeyField::to_oxm`]'s
    /// encoding gives, without building it.
    #[inline]
    pub fn encode_oxm(&self, w: &mut Vec<u8>) {
        let mask = (self.mask != full_mask(self.field)).then_some(self.mask);
        ofp::oxm::encode_basic(w, self.field, self.value, mask);
    }
}

/// All of a field's meaningful bits set.
pub fn full_mask(field: OxmField) -> u128 {
    let bits = field.bits();
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// A field value as a right-aligned integer.
pub fn value_bits(v: &OxmValue) -> u128 {
    v.to_u128()
}

const fn bad_match(code: BadMatchCode) -> OfpError {
    OfpError::BadMatch(code)
}

impl MatchKey {
    /// Validates `m` with [`Match::validate`] (`BAD_MATCH/BAD_FIELD`,
    /// `DUP_FIELD`, `BAD_VALUE`, `BAD_WILDCARDS`, `BAD_PREREQ`, with
    /// prerequisites anywhere in the list) and builds its canonical form.
    /// A mask on a field that cannot have one is `BAD_MATCH/BAD_MASK` (the
    /// decoder already refuses it on the wire; matches built in memory are
    /// checked here). Mask bits above the field's width are ignored.
    pub fn new(m: &Match) -> Result<MatchKey, OfpError> {
        m.validate()?;
        let mut fields: Vec<KeyField> = Vec::with_capacity(m.fields.len());
        for oxm in &m.fields {
            let Oxm::Basic { field, value, mask } = oxm else {
                return Err(bad_match(BadMatchCode::BadField));
            };
            let full = full_mask(*field);
            let mk = match mask {
                None => full,
                Some(_) if !field.maskable() => return Err(bad_match(BadMatchCode::BadMask)),
                Some(mv) => mv.to_u128() & full,
            };
            if mk != 0 {
                fields.push(KeyField {
                    field: *field,
                    value: value.to_u128() & mk,
                    mask: mk,
                });
            }
        }
        fields.sort();
        Ok(MatchKey { fields })
    }

    /// The match this key stands for, written the way controllers send
    /// one: the fields in order, no mask where the field is exact.
    pub fn to_match(&self) -> Match {
        Match {
            fields: self.fields.iter().map(KeyField::to_oxm).collect(),
        }
    }

    /// Whether [`MatchKey::to_match`] gives back `m` exactly, TLV for TLV
    /// (without building it).
    pub fn rebuilds(&self, m: &Match) -> bool {
        m.fields.len() == self.fields.len()
            && m.fields
                .iter()
                .zip(&self.fields)
                .all(|(o, f)| *o == f.to_oxm())
    }

    /// The canonical fields, sorted by field.
    pub fn fields(&self) -> &[KeyField] {
        &self.fields
    }

    /// The field's `(value, mask)`, if the key constrains it.
    pub fn get(&self, field: OxmField) -> Option<(u128, u128)> {
        self.fields
            .binary_search_by(|f| f.field.cmp(&field))
            .ok()
            .and_then(|i| self.fields.get(i))
            .map(|f| (f.value, f.mask))
    }

    /// True when the key pins `field` to exactly `value`.
    pub fn is_exact(&self, field: OxmField, value: u128) -> bool {
        self.get(field) == Some((value, full_mask(field)))
    }

    /// Sets or replaces one field (used to track what earlier actions did
    /// to the packet when checking later ones). A zero mask removes it.
    pub fn set(&mut self, field: OxmField, value: u128, mask: u128) {
        match self.fields.binary_search_by(|f| f.field.cmp(&field)) {
            Ok(i) => {
                if mask == 0 {
                    self.fields.remove(i);
                } else if let Some(f) = self.fields.get_mut(i) {
                    f.value = value & mask;
                    f.mask = mask;
                }
            }
            Err(i) => {
                if mask != 0 {
                    self.fields.insert(
                        i,
                        KeyField {
                            field,
                            value: value & mask,
                            mask,
                        },
                    );
                }
            }
        }
    }

    /// Forgets everything known about `field`.
    pub fn remove(&mut self, field: OxmField) {
        self.set(field, 0, 0);
    }

    /// True when every packet `self` matches is also matched by `general`:
    /// each field of `general` is in `self` with a mask covering
    /// `general`'s and the same value under `general`'s mask. This is the
    /// selection rule of non-strict MODIFY/DELETE and of stats requests.
    pub fn is_within(&self, general: &MatchKey) -> bool {
        general.fields.iter().all(|g| match self.get(g.field) {
            Some((v, m)) => m & g.mask == g.mask && v & g.mask == g.value,
            None => false,
        })
    }

    /// True when some packet could match both keys: every field both
    /// constrain agrees on the bits both masks cover (spec 1.3.5 §6.4,
    /// CHECK_OVERLAP).
    pub fn overlaps(&self, other: &MatchKey) -> bool {
        self.fields.iter().all(|a| match other.get(a.field) {
            Some((v, m)) => {
                let common = m & a.mask;
                a.value & common == v & common
            }
            None => true,
        })
    }
}

/// IPv4 / IPv6 / ARP / MPLS / PBB ethertypes.
const ETH_IPV4: u128 = 0x0800;
const ETH_IPV6: u128 = 0x86dd;
const ETH_ARP: u128 = 0x0806;
const ETH_MPLS: u128 = 0x8847;
const ETH_MPLS_MC: u128 = 0x8848;
const ETH_PBB: u128 = 0x88e7;

/// Whether the prerequisite of `field` (spec 1.3.5 table 12) holds in
/// `key`. A prerequisite holds when the field it names is matched exactly
/// on one of the allowed values (`vlan_pcp` needs the VLAN-present bit).
pub fn prerequisite_met(field: OxmField, key: &MatchKey) -> bool {
    use OxmField::*;
    let eth = |types: &[u128]| types.iter().any(|t| key.is_exact(EthType, *t));
    let proto = |p: u128| key.is_exact(IpProto, p);
    match field {
        InPhyPort => key.get(InPort).is_some(),
        VlanPcp => key.get(VlanVid).is_some_and(|(v, m)| {
            let present = u128::from(OFPVID_PRESENT);
            m & present != 0 && v & present != 0
        }),
        IpDscp | IpEcn | IpProto => eth(&[ETH_IPV4, ETH_IPV6]),
        Ipv4Src | Ipv4Dst => eth(&[ETH_IPV4]),
        TcpSrc | TcpDst => proto(6),
        UdpSrc | UdpDst => proto(17),
        SctpSrc | SctpDst => proto(132),
        Icmpv4Type | Icmpv4Code => proto(1) && eth(&[ETH_IPV4]),
        ArpOp | ArpSpa | ArpTpa | ArpSha | ArpTha => eth(&[ETH_ARP]),
        Ipv6Src | Ipv6Dst | Ipv6Flabel | Ipv6Exthdr => eth(&[ETH_IPV6]),
        Icmpv6Type | Icmpv6Code => proto(58) && eth(&[ETH_IPV6]),
        Ipv6NdTarget => key.is_exact(Icmpv6Type, 135) || key.is_exact(Icmpv6Type, 136),
        Ipv6NdSll => key.is_exact(Icmpv6Type, 135),
        Ipv6NdTll => key.is_exact(Icmpv6Type, 136),
        MplsLabel | MplsTc | MplsBos => eth(&[ETH_MPLS, ETH_MPLS_MC]),
        PbbIsid | PbbUca => eth(&[ETH_PBB]),
        InPort | Metadata | EthDst | EthSrc | EthType | VlanVid | TunnelId => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::MacAddr;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn basic(field: OxmField, value: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: None,
        }
    }

    fn masked(field: OxmField, value: OxmValue, mask: OxmValue) -> Oxm {
        Oxm::Basic {
            field,
            value,
            mask: Some(mask),
        }
    }

    fn m(fields: Vec<Oxm>) -> Match {
        Match { fields }
    }

    fn ipv4_dst(addr: [u8; 4], mask: [u8; 4]) -> Oxm {
        masked(
            OxmField::Ipv4Dst,
            OxmValue::Ipv4(Ipv4Addr::from(addr)),
            OxmValue::Ipv4(Ipv4Addr::from(mask)),
        )
    }

    fn eth_ipv4() -> Oxm {
        basic(OxmField::EthType, OxmValue::U16(0x0800))
    }

    #[test]
    fn order_of_tlvs_does_not_change_the_key() {
        let a = MatchKey::new(&m(vec![
            eth_ipv4(),
            basic(OxmField::InPort, OxmValue::U32(3)),
        ]))
        .unwrap();
        let b = MatchKey::new(&m(vec![
            basic(OxmField::InPort, OxmValue::U32(3)),
            eth_ipv4(),
        ]))
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.fields().len(), 2);
    }

    #[test]
    fn zero_mask_is_a_wildcard_and_full_mask_is_exact() {
        let wild = MatchKey::new(&m(vec![masked(
            OxmField::EthDst,
            OxmValue::Mac(MacAddr([0; 6])),
            OxmValue::Mac(MacAddr([0; 6])),
        )]))
        .unwrap();
        assert_eq!(wild, MatchKey::default());
        let full = MatchKey::new(&m(vec![masked(
            OxmField::EthDst,
            OxmValue::Mac(MacAddr([1, 2, 3, 4, 5, 6])),
            OxmValue::Mac(MacAddr([0xff; 6])),
        )]))
        .unwrap();
        let plain = MatchKey::new(&m(vec![basic(
            OxmField::EthDst,
            OxmValue::Mac(MacAddr([1, 2, 3, 4, 5, 6])),
        )]))
        .unwrap();
        assert_eq!(full, plain);
    }

    #[test]
    fn validation_errors_name_the_exact_code() {
        let cases: Vec<(Vec<Oxm>, BadMatchCode)> = vec![
            (
                vec![
                    basic(OxmField::InPort, OxmValue::U32(1)),
                    basic(OxmField::InPort, OxmValue::U32(2)),
                ],
                BadMatchCode::DupField,
            ),
            (
                vec![basic(OxmField::VlanPcp, OxmValue::U8(8))],
                BadMatchCode::BadValue,
            ),
            (
                vec![eth_ipv4(), ipv4_dst([10, 0, 0, 1], [255, 255, 255, 0])],
                BadMatchCode::BadWildcards,
            ),
            (
                vec![masked(OxmField::InPort, OxmValue::U32(1), OxmValue::U32(1))],
                BadMatchCode::BadMask,
            ),
            (
                vec![ipv4_dst([10, 0, 0, 0], [255, 0, 0, 0])],
                BadMatchCode::BadPrereq,
            ),
            (
                vec![
                    basic(OxmField::EthType, OxmValue::U16(0x86dd)),
                    ipv4_dst([10, 0, 0, 0], [255, 0, 0, 0]),
                ],
                BadMatchCode::BadPrereq,
            ),
            (
                vec![eth_ipv4(), basic(OxmField::TcpDst, OxmValue::U16(80))],
                BadMatchCode::BadPrereq,
            ),
            (
                vec![basic(OxmField::VlanPcp, OxmValue::U8(3))],
                BadMatchCode::BadPrereq,
            ),
            (
                vec![Oxm::Other {
                    class: 0xffff,
                    field: 1,
                    hasmask: false,
                    body: vec![0, 0, 0, 1, 0],
                }],
                BadMatchCode::BadField,
            ),
        ];
        for (fields, code) in cases {
            assert_eq!(
                MatchKey::new(&m(fields.clone())),
                Err(OfpError::BadMatch(code)),
                "{fields:?}"
            );
        }
    }

    #[test]
    fn prerequisites_accept_complete_chains() {
        let ok = MatchKey::new(&m(vec![
            basic(OxmField::TcpDst, OxmValue::U16(80)),
            basic(OxmField::IpProto, OxmValue::U8(6)),
            basic(OxmField::EthType, OxmValue::U16(0x86dd)),
        ]));
        assert!(ok.is_ok());
        let vlan = MatchKey::new(&m(vec![
            basic(OxmField::VlanVid, OxmValue::U16(0x1000 | 10)),
            basic(OxmField::VlanPcp, OxmValue::U8(3)),
        ]));
        assert!(vlan.is_ok());
        let nd = MatchKey::new(&m(vec![
            basic(OxmField::EthType, OxmValue::U16(0x86dd)),
            basic(OxmField::IpProto, OxmValue::U8(58)),
            basic(OxmField::Icmpv6Type, OxmValue::U8(136)),
            basic(OxmField::Ipv6NdTll, OxmValue::Mac(MacAddr([1; 6]))),
        ]));
        assert!(nd.is_ok());
        let nd_wrong = MatchKey::new(&m(vec![
            basic(OxmField::EthType, OxmValue::U16(0x86dd)),
            basic(OxmField::IpProto, OxmValue::U8(58)),
            basic(OxmField::Icmpv6Type, OxmValue::U8(135)),
            basic(OxmField::Ipv6NdTll, OxmValue::Mac(MacAddr([1; 6]))),
        ]));
        assert_eq!(nd_wrong, Err(OfpError::BadMatch(BadMatchCode::BadPrereq)));
    }

    #[test]
    fn within_and_overlap() {
        let k = |fields| MatchKey::new(&m(fields)).unwrap();
        let wide = k(vec![eth_ipv4(), ipv4_dst([10, 0, 0, 0], [255, 0, 0, 0])]);
        let narrow = k(vec![eth_ipv4(), ipv4_dst([10, 1, 0, 0], [255, 255, 0, 0])]);
        let other = k(vec![eth_ipv4(), ipv4_dst([11, 1, 0, 0], [255, 255, 0, 0])]);
        let any = MatchKey::default();
        assert!(narrow.is_within(&wide));
        assert!(!wide.is_within(&narrow));
        assert!(wide.is_within(&any));
        assert!(!any.is_within(&wide));
        assert!(narrow.overlaps(&wide) && wide.overlaps(&narrow));
        assert!(!other.overlaps(&wide));
        let port = k(vec![basic(OxmField::InPort, OxmValue::U32(1))]);
        assert!(port.overlaps(&wide), "disjoint fields overlap");
    }

    proptest! {
        /// `is_within` agrees with brute force over all values of one
        /// 8-bit field; `overlaps` is symmetric and implied by `is_within`.
        #[test]
        fn within_and_overlap_agree_with_brute_force(
            a in any::<u8>(), am in any::<u8>(), b in any::<u8>(), bm in any::<u8>()
        ) {
            let key = |v: u8, mk: u8| {
                MatchKey::new(&m(vec![
                    basic(OxmField::EthType, OxmValue::U16(0x0800)),
                    masked(OxmField::Ipv4Src,
                        OxmValue::Ipv4(Ipv4Addr::from(u32::from(v & mk))),
                        OxmValue::Ipv4(Ipv4Addr::from(u32::from(mk)))),
                ])).unwrap()
            };
            let ka = key(a, am);
            let kb = key(b, bm);
            let matches = |x: u8, v: u8, mk: u8| x & mk == v & mk;
            let all_a_in_b = (0..=255u8).all(|x| !matches(x, a, am) || matches(x, b, bm));
            let some_both = (0..=255u8).any(|x| matches(x, a, am) && matches(x, b, bm));
            prop_assert_eq!(ka.is_within(&kb), all_a_in_b);
            prop_assert_eq!(ka.overlaps(&kb), some_both);
            prop_assert_eq!(ka.overlaps(&kb), kb.overlaps(&ka));
        }
    }

    proptest! {
        /// Every valid match has a key; its TLV order does not matter; the
        /// key is within and overlaps itself; and the prerequisite table
        /// here (used for set-field checks) agrees with `ofp`'s.
        #[test]
        fn valid_matches_have_order_free_keys(m in ofp::strategies::arb_valid_match()) {
            let key = MatchKey::new(&m).unwrap();
            let mut reversed = m.clone();
            reversed.fields.reverse();
            prop_assert_eq!(MatchKey::new(&reversed).unwrap(), key.clone());
            prop_assert!(key.is_within(&key));
            prop_assert!(key.overlaps(&key));
            prop_assert!(key.is_within(&MatchKey::default()));
            for f in key.fields() {
                prop_assert!(prerequisite_met(f.field, &key), "{:?}", f.field);
            }
        }

        /// Any match, valid or not: no panic, and a key exactly when
        /// `Match::validate` accepts it (bar masks on unmaskable fields,
        /// which the decoder refuses and this refuses too).
        #[test]
        fn keys_exist_exactly_for_valid_matches(m in ofp::strategies::arb_match()) {
            match (m.validate(), MatchKey::new(&m)) {
                (Ok(()), Ok(_)) => {}
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (Ok(()), Err(e)) => prop_assert_eq!(e, OfpError::BadMatch(BadMatchCode::BadMask)),
                (Err(e), Ok(_)) => prop_assert!(false, "accepted what validate refused: {e}"),
            }
        }
    }
}
