//! Property tests: random and mutated packets never panic the parser or the
//! rewrites; push/pop round-trips; set-field keeps every checksum right;
//! incremental checksum updates equal full recomputation.

use crate::buffer::PacketBuf;
use crate::checksum;
use crate::fixup::verify_checksums;
use crate::flow_key::{field, FlowKey};
use crate::set_field::{set_field, FieldValue};
use crate::testutil::samples;
use proptest::prelude::*;

fn sample_packet() -> impl Strategy<Value = Vec<u8>> {
    let all: Vec<Vec<u8>> = samples().into_iter().map(|(_, p)| p).collect();
    proptest::sample::select(all)
}

/// A sample with some bytes changed and maybe cut short or extended.
fn mutated_packet() -> impl Strategy<Value = Vec<u8>> {
    (
        sample_packet(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        any::<prop::sample::Index>(),
        proptest::collection::vec(any::<u8>(), 0..8),
    )
        .prop_map(|(mut p, edits, cut, tail)| {
            for (i, b) in edits {
                let n = p.len();
                p[i.index(n)] = b;
            }
            let keep = cut.index(p.len() + 1);
            if keep * 4 < p.len() {
                // Mostly keep the packet whole; sometimes cut it.
                p.truncate(keep * 4);
            }
            p.extend_from_slice(&tail);
            p
        })
}

fn any_field_value() -> impl Strategy<Value = FieldValue> {
    use FieldValue::*;
    prop_oneof![
        any::<[u8; 6]>().prop_map(EthDst),
        any::<[u8; 6]>().prop_map(EthSrc),
        any::<u16>().prop_map(VlanVid),
        any::<u8>().prop_map(VlanPcp),
        any::<u8>().prop_map(IpDscp),
        any::<u8>().prop_map(IpEcn),
        any::<u32>().prop_map(Ipv4Src),
        any::<u32>().prop_map(Ipv4Dst),
        any::<u16>().prop_map(TcpSrc),
        any::<u16>().prop_map(TcpDst),
        any::<u16>().prop_map(UdpSrc),
        any::<u16>().prop_map(UdpDst),
        any::<u16>().prop_map(SctpSrc),
        any::<u16>().prop_map(SctpDst),
        any::<u8>().prop_map(Icmpv4Type),
        any::<u8>().prop_map(Icmpv4Code),
        any::<u16>().prop_map(ArpOp),
        any::<u32>().prop_map(ArpSpa),
        any::<u32>().prop_map(ArpTpa),
        any::<[u8; 6]>().prop_map(ArpSha),
        any::<[u8; 6]>().prop_map(ArpTha),
        any::<u128>().prop_map(Ipv6Src),
        any::<u128>().prop_map(Ipv6Dst),
        any::<u32>().prop_map(Ipv6Flabel),
        any::<u8>().prop_map(Icmpv6Code),
        any::<u128>().prop_map(Ipv6NdTarget),
        any::<[u8; 6]>().prop_map(Ipv6NdSll),
        any::<[u8; 6]>().prop_map(Ipv6NdTll),
        any::<u32>().prop_map(MplsLabel),
        any::<u8>().prop_map(MplsTc),
        any::<u32>().prop_map(PbbIsid),
    ]
}

fn check_key_invariants(p: &[u8]) {
    let k = FlowKey::parse(p);
    let len = p.len() as u32;
    assert!(k.l3_offset <= len);
    assert!(k.l3_end <= len);
    assert!(k.l4_offset <= len);
    if k.l4_offset != 0 {
        assert!(k.l4_offset <= k.l3_end);
    }
    assert_eq!(k.present >> 40, 0);
}

/// Every field of a key, offsets included.
fn whole(k: &FlowKey) -> String {
    format!("{k:?}")
}

proptest! {
    /// The key fix-ups the pipeline uses instead of parsing again equal
    /// parsing again.
    #[test]
    fn key_fixups_equal_parsing_again(p in mutated_packet(), v in any_field_value(), vlan in any::<bool>()) {
        let mut p = p;
        if vlan && p.len() >= 14 {
            p.splice(12..12, [0x81, 0x00, 0x20, 0x07]);
        }
        let k = FlowKey::parse(&p);
        let mut b = PacketBuf::from_slice(&p);
        if b.pop_vlan().is_ok() {
            let mut f = k;
            if f.after_pop_vlan() {
                prop_assert_eq!(whole(&f), whole(&FlowKey::parse(b.as_slice())));
            }
        }
        for et in [0x8847, 0x8848] {
            let mut b = PacketBuf::from_slice(&p);
            if b.push_mpls_with_key(et, &k).is_ok() {
                let mut f = k;
                prop_assert!(f.after_push_mpls(et));
                prop_assert_eq!(whole(&f), whole(&FlowKey::parse(b.as_slice())));
            }
        }
        let mut q = p.clone();
        if crate::set_field::set_field_with_key(&mut q, &k, &v).is_ok() {
            let mut f = k;
            if f.after_set_field(&v) {
                prop_assert_eq!(whole(&f), whole(&FlowKey::parse(&q)));
            }
        }
        let mut q = p.clone();
        if let Ok(ttl) = crate::ttl::dec_nw_ttl_with_key(&mut q, &k) {
            let mut f = k;
            f.ip_ttl = ttl;
            prop_assert_eq!(whole(&f), whole(&FlowKey::parse(&q)));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        crate::parse_for_fuzz(&data);
        check_key_invariants(&data);
    }

    #[test]
    fn mutated_packets_never_panic(p in mutated_packet()) {
        crate::parse_for_fuzz(&p);
        check_key_invariants(&p);
    }

    #[test]
    fn random_rewrites_on_mutated_packets(p in mutated_packet(), v in any_field_value()) {
        let mut q = p.clone();
        let was_ok = verify_checksums(&p).is_ok();
        if set_field(&mut q, &v).is_err() {
            prop_assert_eq!(q, p);
        } else if was_ok {
            // Whatever the mutation made of the packet, a rewrite of a
            // packet whose checksums were right leaves them right.
            prop_assert_eq!(verify_checksums(&q), Ok(()), "{:?}", v);
        }
    }

    #[test]
    fn stale_key_same_length_never_panics(
        p in mutated_packet(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        v in any_field_value(),
    ) {
        let k = FlowKey::parse(&p);
        let mut q = p.clone();
        if !q.is_empty() {
            for (i, b) in edits {
                let n = q.len();
                q[i.index(n)] = b;
            }
        }
        let _ = crate::set_field::set_field_with_key(&mut q, &k, &v);
        use crate::ttl::*;
        let _ = dec_nw_ttl_with_key(&mut q, &k);
        let _ = set_nw_ttl_with_key(&mut q, &k, 9);
        let _ = dec_mpls_ttl_with_key(&mut q, &k);
        let _ = set_mpls_ttl_with_key(&mut q, &k, 9);
        let _ = copy_ttl_out_with_key(&mut q, &k);
        let _ = copy_ttl_in_with_key(&mut q, &k);
    }

    #[test]
    fn set_field_keeps_checksums(p in sample_packet(), vs in proptest::collection::vec(any_field_value(), 1..5)) {
        prop_assume!(verify_checksums(&p).is_ok());
        let mut q = p.clone();
        for v in &vs {
            let before = q.clone();
            match set_field(&mut q, v) {
                Ok(()) => {
                    prop_assert_eq!(verify_checksums(&q), Ok(()), "{:?}", v);
                    let k = FlowKey::parse(&q);
                    let want: u128 = match *v {
                        FieldValue::VlanVid(x) => u128::from(0x1000 | (x & 0xfff)),
                        FieldValue::Ipv4Src(x) | FieldValue::Ipv4Dst(x) | FieldValue::ArpSpa(x) | FieldValue::ArpTpa(x) => x.into(),
                        _ => continue,
                    };
                    prop_assert_eq!(k.get(v.oxm_field()), Some(want));
                }
                Err(_) => prop_assert_eq!(&q, &before),
            }
        }
    }

    #[test]
    fn push_pop_round_trips(p in prop_oneof![sample_packet(), mutated_packet()]) {
        let k = FlowKey::parse(&p);
        let mut b = PacketBuf::from_slice(&p);
        if b.push_vlan(0x8100).is_ok() {
            prop_assert_eq!(b.pop_vlan(), Ok(()));
            prop_assert_eq!(b.as_slice(), &p[..]);
        }
        if b.push_pbb(0x88e7).is_ok() {
            prop_assert_eq!(b.pop_pbb(), Ok(()));
            prop_assert_eq!(b.as_slice(), &p[..]);
        }
        if b.push_mpls(0x8847).is_ok() {
            prop_assert!(k.has(field::ETH_TYPE));
            prop_assert_eq!(b.pop_mpls(k.eth_type), Ok(()));
            prop_assert_eq!(b.as_slice(), &p[..]);
        }
    }

    #[test]
    fn incremental_checksum_equals_full(
        mut data in proptest::collection::vec(any::<u8>(), 4..64),
        at in any::<prop::sample::Index>(),
        new in proptest::collection::vec(any::<u8>(), 1..9),
    ) {
        // Checksum lives in the first word; change an even-aligned region.
        if data.len() % 2 == 1 { data.push(0); }
        data[0] = 0;
        data[1] = 0;
        let c = checksum::checksum(&data, 0);
        data[0..2].copy_from_slice(&c.to_be_bytes());
        let words = data.len() / 2 - 1;
        let start = 2 + 2 * at.index(words);
        let end = (start + new.len()).min(data.len());
        let old = data[start..end].to_vec();
        let repl = &new[..end - start];
        let c2 = checksum::update_bytes(c, &old, repl);
        data[start..end].copy_from_slice(repl);
        // One's complement has two zeros: when every word but the
        // checksum ends up 0, the full checksum is 0xffff and the
        // incremental one (RFC 1624, eqn. 3) 0x0000, which a verifier
        // rejects. No header it is used on gets there (IPv4's version
        // nibble is not 0; TCP's and UDP's pseudo-header holds the
        // protocol), so this test leaves that one input out.
        prop_assume!(data[2..].iter().any(|&b| b != 0));
        data[0..2].copy_from_slice(&c2.to_be_bytes());
        prop_assert!(checksum::verify(&data, 0));
    }
}
