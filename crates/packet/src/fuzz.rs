//! The fuzzing entry point: parser plus rewrites on arbitrary bytes.

use crate::{buffer, ethernet, flow_key, set_field, ttl};

/// Runs the flow-key parser and a handful of rewrites on a copy of `data`.
///
/// Meant for fuzzing: it must never panic, whatever `data` holds. The
/// rewrites are applied to a private copy, so `data` is untouched.
pub fn parse_for_fuzz(data: &[u8]) {
    let key = flow_key::FlowKey::parse(data);
    let _ = key.get(flow_key::field::TCP_SRC);
    let mut copy = data.to_vec();
    use set_field::FieldValue as F;
    let values = [
        F::EthDst([1, 2, 3, 4, 5, 6]),
        F::VlanVid(0x123),
        F::VlanPcp(5),
        F::IpDscp(46),
        F::IpEcn(3),
        F::IpProto(17),
        F::Ipv4Src(0x0a00_0001),
        F::Ipv4Dst(0x0a00_0002),
        F::TcpSrc(1),
        F::UdpDst(2),
        F::SctpSrc(3),
        F::Icmpv4Type(8),
        F::ArpSpa(0x0101_0101),
        F::Ipv6Src(1),
        F::Ipv6Flabel(0xabcde),
        F::Icmpv6Code(1),
        F::Ipv6NdTarget(2),
        F::Ipv6NdSll([1; 6]),
        F::Ipv6NdTll([2; 6]),
        F::MplsLabel(77),
        F::MplsTc(3),
        F::MplsBos(1),
        F::PbbIsid(0x123456),
    ];
    for v in values {
        let _ = set_field::set_field(&mut copy, &v);
    }
    let _ = ttl::dec_nw_ttl(&mut copy);
    let _ = ttl::copy_ttl_out(&mut copy);
    let _ = ttl::copy_ttl_in(&mut copy);
    let _ = ttl::dec_mpls_ttl(&mut copy);
    let mut buf = buffer::PacketBuf::from_slice(data);
    let _ = buf.push_vlan(ethernet::ethertype::VLAN);
    let _ = buf.push_mpls(ethernet::ethertype::MPLS);
    let _ = buf.push_pbb(ethernet::ethertype::PBB);
    let _ = buf.pop_pbb();
    let _ = buf.pop_mpls(ethernet::ethertype::IPV4);
    let _ = buf.pop_vlan();
    let _ = buf.pop_vlan();
    let _ = flow_key::FlowKey::parse(buf.as_slice());
}
