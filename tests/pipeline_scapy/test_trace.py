"""`fulmar trace --json` against scapy: packets built with scapy go through
flows that push/pop VLAN, MPLS and PBB, rewrite fields and decrement TTLs;
the emitted bytes must equal what scapy builds for the expected result.

Expected packets are built from a copy of the input with the fields
changed and every checksum deleted, so scapy recomputes them from scratch:
the switch's incremental checksum updates must give the same bytes.
"""

import pytest
from scapy.all import ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1AH, Dot1Q, Ether, Raw
from scapy.contrib.mpls import MPLS
from scapy.layers.inet6 import (
    ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, IPv6
)
from scapy.layers.sctp import SCTP, SCTPChunkData

DST = "02:00:00:00:00:02"
SRC = "02:00:00:00:00:01"
V6S = "2001:db8::1"
V6D = "2001:db8::2"
PAY = b"pipeline payload"


def eth():
    return Ether(dst=DST, src=SRC)


def udp4(ttl=64, tos=0):
    return eth() / IP(src="10.0.0.1", dst="10.0.0.2", ttl=ttl, tos=tos) / UDP(sport=1000, dport=2000) / Raw(PAY)


def tcp4():
    return eth() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1000, dport=80, flags="S") / Raw(PAY)


def udp6(hlim=64):
    return eth() / IPv6(src=V6S, dst=V6D, hlim=hlim, fl=0x12345) / UDP(sport=1000, dport=2000) / Raw(PAY)


def tcp6():
    return eth() / IPv6(src=V6S, dst=V6D) / TCP(sport=1000, dport=80) / Raw(PAY)


def sctp4():
    return eth() / IP(src="10.0.0.1", dst="10.0.0.2") / SCTP(sport=5000, dport=6000) / SCTPChunkData(data=PAY)


def sctp6():
    return eth() / IPv6(src=V6S, dst=V6D) / SCTP(sport=5000, dport=6000) / SCTPChunkData(data=PAY)


def arp():
    return eth() / ARP(op=1, hwsrc=SRC, psrc="10.0.0.1", hwdst="00:00:00:00:00:00", pdst="10.0.0.2")


def icmp4():
    return eth() / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP(type=8, code=0, id=7, seq=1) / Raw(PAY)


def icmp6_echo():
    return eth() / IPv6(src=V6S, dst=V6D) / ICMPv6EchoRequest(id=7, seq=1, data=PAY)


def nd_ns():
    return eth() / IPv6(src=V6S, dst="ff02::1:ff00:2") / ICMPv6ND_NS(tgt=V6D) / ICMPv6NDOptSrcLLAddr(lladdr=SRC)


def nd_na():
    return eth() / IPv6(src=V6D, dst=V6S) / ICMPv6ND_NA(tgt=V6D, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=DST)


def fresh(pkt):
    """A concrete copy of `pkt` (every field filled in, as on the wire)."""
    return Ether(bytes(pkt))


def rebuild(pkt):
    """The bytes of `pkt` with every checksum recomputed by scapy."""
    layer = pkt
    while layer:
        for name in ("chksum", "cksum"):
            if name in [f.name for f in layer.fields_desc]:
                delattr(layer, name)
        layer = layer.payload
    return bytes(pkt)


def popped(frame):
    """What a pop leaves of a frame that arrived at 60 bytes or more: at
    least Ethernet's minimum of 60 bytes, zeros appended."""
    frame = bytes(frame)
    return frame + bytes(max(0, 60 - len(frame)))


def expect(pkt, change):
    """Input `pkt` changed by `change(p)`, checksums recomputed."""
    p = fresh(pkt)
    change(p)
    return rebuild(p)


# ---- VLAN -------------------------------------------------------------


def test_push_vlan_then_set_vid_and_pcp(trace):
    pkt = udp4()
    r = trace(
        "priority=1,ip,actions=push_vlan:0x8100,set_field:4196->vlan_vid,set_field:5->vlan_pcp,output:2\n",
        pkt,
    )
    want = eth() / Dot1Q(vlan=100, prio=5) / fresh(pkt)[IP]
    assert r.only(2) == bytes(want)


def test_push_second_tag_copies_outer_vid(trace):
    pkt = eth() / Dot1Q(vlan=7, prio=3) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / Raw(PAY)
    r = trace("priority=1,actions=push_vlan:0x88a8,output:2\n", pkt)
    want = eth() / Dot1AD(vlan=7, prio=3) / Dot1Q(vlan=7, prio=3) / fresh(pkt)[IP]
    assert r.only(2) == bytes(want)


def test_pop_vlan(trace):
    pkt = eth() / Dot1Q(vlan=5) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / Raw(PAY)
    r = trace("priority=1,dl_vlan=5,actions=pop_vlan,output:2\n", pkt)
    assert r.only(2) == popped(eth() / fresh(pkt)[IP])


def test_vlan_rewrite_of_existing_tag(trace):
    pkt = eth() / Dot1Q(vlan=5, prio=1) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / Raw(PAY)
    r = trace("priority=1,dl_vlan=5,actions=mod_vlan_vid:9,mod_vlan_pcp:6,output:2\n", pkt)
    assert r.only(2) == bytes(eth() / Dot1Q(vlan=9, prio=6) / fresh(pkt)[IP])


# ---- MPLS ---------------------------------------------------------------


def test_push_mpls_on_ipv4_takes_the_ip_ttl(trace):
    pkt = udp4(ttl=33)
    r = trace(
        "priority=1,ip,actions=push_mpls:0x8847,set_field:1000->mpls_label,set_field:3->mpls_tc,output:2\n",
        pkt,
    )
    want = Ether(dst=DST, src=SRC, type=0x8847) / MPLS(label=1000, cos=3, s=1, ttl=33) / fresh(pkt)[IP]
    assert r.only(2) == bytes(want)


def test_push_mpls_on_labelled_packet_copies_the_label(trace):
    inner = fresh(udp4())[IP]
    pkt = Ether(dst=DST, src=SRC, type=0x8847) / MPLS(label=20, cos=2, s=1, ttl=40) / inner
    r = trace("priority=1,mpls,actions=push_mpls:0x8847,output:2\n", pkt)
    want = (
        Ether(dst=DST, src=SRC, type=0x8847)
        / MPLS(label=20, cos=2, s=0, ttl=40)
        / MPLS(label=20, cos=2, s=1, ttl=40)
        / inner
    )
    assert r.only(2) == bytes(want)


def test_pop_mpls(trace):
    inner = fresh(udp4())[IP]
    pkt = Ether(dst=DST, src=SRC, type=0x8847) / MPLS(label=77, s=1, ttl=9) / inner
    r = trace("priority=1,mpls,mpls_label=77,actions=pop_mpls:0x0800,output:2\n", pkt)
    assert r.only(2) == popped(Ether(dst=DST, src=SRC, type=0x0800) / inner)


def test_mpls_ttl_actions(trace):
    inner = fresh(udp4(ttl=50))[IP]
    pkt = Ether(dst=DST, src=SRC, type=0x8847) / MPLS(label=77, s=1, ttl=9) / inner
    r = trace(
        "priority=1,mpls,actions=dec_mpls_ttl,output:2,set_mpls_ttl:100,output:3,copy_ttl_in,output:4,set_mpls_ttl:7,copy_ttl_out,output:5\n",
        pkt,
    )
    lab = lambda ttl: Ether(dst=DST, src=SRC, type=0x8847) / MPLS(label=77, s=1, ttl=ttl)
    assert r.only(2) == bytes(lab(8) / inner)
    assert r.only(3) == bytes(lab(100) / inner)
    inner100 = inner.copy()
    inner100.ttl = 100
    del inner100.chksum
    assert r.only(4) == bytes(lab(100) / inner100)
    # copy_ttl_out copies the IP TTL (100) over the label's 7.
    assert r.only(5) == bytes(lab(100) / inner100)


def test_expired_mpls_ttl_drops(trace):
    inner = fresh(udp4())[IP]
    pkt = Ether(dst=DST, src=SRC, type=0x8847) / MPLS(label=77, s=1, ttl=1) / inner
    r = trace("priority=1,mpls,actions=dec_mpls_ttl,output:2\n", pkt)
    assert r.lines == []


# ---- PBB ----------------------------------------------------------------


def test_push_pbb_and_set_backbone_fields(trace):
    pkt = udp4()
    r = trace(
        "priority=1,actions=push_pbb:0x88e7,set_field:0x123456->pbb_isid,set_field:0a:00:00:00:00:0b->eth_dst,output:2\n",
        pkt,
    )
    want = (
        Ether(dst="0a:00:00:00:00:0b", src=SRC, type=0x88E7)
        / Dot1AH(isid=0x123456)
        / fresh(pkt)
    )
    assert r.only(2) == bytes(want)


def test_pop_pbb(trace):
    customer = fresh(udp4())
    pkt = Ether(dst="0a:00:00:00:00:0b", src="0a:00:00:00:00:0c", type=0x88E7) / Dot1AH(isid=99) / customer
    r = trace("priority=1,dl_type=0x88e7,pbb_isid=99,actions=pop_pbb,output:2\n", pkt)
    assert r.only(2) == popped(customer)


# ---- set_field: L2, IPv4, IPv6 -------------------------------------------------


def check_set_fields(trace, pkt, match, actions, change):
    """A flow on `match` (None: any packet) with `actions` (then output:2)
    rewrites `pkt` as `change(p)` does, checksums recomputed."""
    flow = ",".join(x for x in ("priority=1", match, f"actions={actions},output:2") if x)
    r = trace(flow + "\n", pkt)
    assert r.only(2) == expect(pkt, change)


def test_set_eth_addresses(trace):
    def change(p):
        p.src = "0a:0b:0c:0d:0e:0f"
        p.dst = "01:00:5e:00:00:01"

    check_set_fields(
        trace,
        udp4(),
        None,
        "set_field:0a:0b:0c:0d:0e:0f->eth_src,set_field:01:00:5e:00:00:01->eth_dst",
        change,
    )


@pytest.mark.parametrize(
    "make,match",
    [(udp4, "udp"), (tcp4, "tcp"), (sctp4, "sctp"), (icmp4, "icmp")],
)
def test_set_ipv4_fields(trace, make, match):
    def change(p):
        p[IP].src = "192.168.1.1"
        p[IP].dst = "172.16.0.9"
        p[IP].tos = (46 << 2) | 1

    check_set_fields(
        trace,
        make(),
        match,
        "set_field:192.168.1.1->ipv4_src,set_field:172.16.0.9->ipv4_dst,"
        "set_field:46->ip_dscp,set_field:1->ip_ecn",
        change,
    )


@pytest.mark.parametrize(
    "make,match",
    [(udp6, "udp6"), (tcp6, "tcp6"), (sctp6, "sctp6"), (icmp6_echo, "icmp6")],
)
def test_set_ipv6_fields(trace, make, match):
    def change(p):
        p[IPv6].src = "2001:db8:1::a"
        p[IPv6].dst = "fe80::99"
        p[IPv6].fl = 0xABCDE
        p[IPv6].tc = (10 << 2) | (p[IPv6].tc & 3)

    check_set_fields(
        trace,
        make(),
        match,
        "set_field:2001:db8:1::a->ipv6_src,set_field:fe80::99->ipv6_dst,"
        "set_field:0xabcde->ipv6_flabel,set_field:10->ip_dscp",
        change,
    )


# ---- set_field: transport -------------------------------------------------------


@pytest.mark.parametrize(
    "make,match,layer,sf",
    [
        (tcp4, "tcp", TCP, "tcp"),
        (tcp6, "tcp6", TCP, "tcp"),
        (udp4, "udp", UDP, "udp"),
        (udp6, "udp6", UDP, "udp"),
        (sctp4, "sctp", SCTP, "sctp"),
        (sctp6, "sctp6", SCTP, "sctp"),
    ],
)
def test_set_transport_ports(trace, make, match, layer, sf):
    def change(p):
        p[layer].sport = 4242
        p[layer].dport = 53

    check_set_fields(trace, make(), match, f"set_field:4242->{sf}_src,set_field:53->{sf}_dst", change)


def test_set_icmpv4_type_and_code(trace):
    def change(p):
        p[ICMP].type = 0
        p[ICMP].code = 3

    check_set_fields(trace, icmp4(), "icmp", "set_field:0->icmpv4_type,set_field:3->icmpv4_code", change)


def test_set_icmpv6_type_and_code(trace):
    pkt = icmp6_echo()
    r = trace("priority=1,icmp6,actions=set_field:129->icmpv6_type,set_field:0->icmpv6_code,output:2\n", pkt)
    p = fresh(pkt)
    want = eth() / p[IPv6].copy()
    want[IPv6].remove_payload()
    want = want / ICMPv6EchoReply(id=7, seq=1, data=PAY)
    assert r.only(2) == rebuild(Ether(bytes(want)))


def test_set_nd_target_and_sll(trace):
    pkt = nd_ns()
    r = trace(
        "priority=1,icmp6,icmpv6_type=135,actions=set_field:2001:db8::77->ipv6_nd_target,"
        "set_field:0a:0a:0a:0a:0a:0a->ipv6_nd_sll,output:2\n",
        pkt,
    )

    def change(p):
        p[ICMPv6ND_NS].tgt = "2001:db8::77"
        p[ICMPv6NDOptSrcLLAddr].lladdr = "0a:0a:0a:0a:0a:0a"

    assert r.only(2) == expect(pkt, change)


def test_set_nd_tll(trace):
    pkt = nd_na()
    r = trace(
        "priority=1,icmp6,icmpv6_type=136,actions=set_field:0b:0b:0b:0b:0b:0b->ipv6_nd_tll,output:2\n",
        pkt,
    )

    def change(p):
        p[ICMPv6NDOptDstLLAddr].lladdr = "0b:0b:0b:0b:0b:0b"

    assert r.only(2) == expect(pkt, change)


def test_set_arp_fields(trace):
    pkt = arp()
    r = trace(
        "priority=1,arp,actions=set_field:2->arp_op,set_field:10.9.9.9->arp_spa,set_field:10.8.8.8->arp_tpa,"
        "set_field:0a:00:00:00:00:01->arp_sha,set_field:0a:00:00:00:00:02->arp_tha,output:2\n",
        pkt,
    )

    def change(p):
        p[ARP].op = 2
        p[ARP].psrc = "10.9.9.9"
        p[ARP].pdst = "10.8.8.8"
        p[ARP].hwsrc = "0a:00:00:00:00:01"
        p[ARP].hwdst = "0a:00:00:00:00:02"

    assert r.only(2) == expect(pkt, change)


# ---- TTLs -------------------------------------------------------------------------


@pytest.mark.parametrize("make,match,layer,field", [(udp4, "ip", IP, "ttl"), (udp6, "ipv6", IPv6, "hlim")])
def test_dec_and_set_nw_ttl(trace, make, match, layer, field):
    pkt = make()
    r = trace(f"priority=1,{match},actions=dec_ttl,output:2,set_nw_ttl:7,output:3\n", pkt)
    assert r.only(2) == expect(pkt, lambda p: setattr(p[layer], field, 63))
    assert r.only(3) == expect(pkt, lambda p: setattr(p[layer], field, 7))


def test_expired_ttl_drops_or_goes_to_the_controller(trace):
    pkt = udp4(ttl=1)
    flows = "priority=1,ip,actions=dec_ttl,output:2\n"
    assert trace(flows, pkt).lines == []
    r = trace(flows, pkt, extra=["--invalid-ttl-to-controller", "--miss-send-len", "65535"])
    (pi,) = r.packet_ins()
    assert pi["reason"] == "invalid_ttl"
    assert bytes.fromhex(pi["packet"]) == bytes(pkt)


# ---- pipeline behaviour seen from outside ---------------------------------------------


def test_action_set_order_push_then_set_then_dec(trace):
    pkt = udp4()
    r = trace(
        "table=0,priority=1,ip,actions=write_actions(output:2,dec_ttl,set_field:4101->vlan_vid,push_vlan:0x8100),goto_table:1\n"
        "table=1,priority=1,ip,actions=write_actions(set_field:10.5.5.5->ipv4_dst)\n",
        pkt,
    )

    def change(p):
        p[IP].ttl = 63
        p[IP].dst = "10.5.5.5"

    inner = Ether(expect(pkt, change))[IP]
    assert r.only(2) == bytes(eth() / Dot1Q(vlan=5) / inner)


def test_all_group_and_gateway_vlan_to_mpls(trace):
    """The gateway case: a VLAN data-center frame leaves as MPLS on one port
    and untouched on another."""
    inner = fresh(udp4())[IP]
    pkt = eth() / Dot1Q(vlan=10) / inner
    r = trace(
        "priority=1,dl_vlan=10,actions=group:1\n",
        pkt,
        groups="group_id=1,type=all,bucket=output:3,bucket=pop_vlan,push_mpls:0x8847,set_field:500->mpls_label,output:4\n",
    )
    assert r.only(3) == bytes(pkt)
    # pop_vlan leaves 58 bytes and push_mpls makes them 62 again: padding
    # happens only when a frame leaves, so none is added in between.
    want = Ether(dst=DST, src=SRC, type=0x8847) / MPLS(label=500, s=1, ttl=64) / inner
    assert len(bytes(pkt)) == len(bytes(want)) == 62
    assert r.only(4) == bytes(want)


def test_table_miss_sends_truncated_packet_in(trace):
    pkt = tcp4()
    r = trace("priority=0,actions=CONTROLLER:32\n", pkt)
    (pi,) = r.packet_ins()
    assert pi["reason"] == "no_match"
    assert pi["total_len"] == len(bytes(pkt))
    assert bytes.fromhex(pi["packet"]) == bytes(pkt)[:32]
