"""Independent-decoder check of the `packet` crate against scapy.

Packets are built with scapy, fed (as hex lines) to the Rust example
`packet_tool` (crates/packet/examples/packet_tool.rs), and the tool's output
is checked against scapy's own decode of the input, or against scapy's
encode of the expected result. For rewrites, the expected packet is made by
changing the field in scapy and deleting every checksum so scapy recomputes
it from scratch: our incremental checksum updates must give the same bytes.

The tool fixture lives in conftest.py.
"""

import pytest
from scapy.all import (
    ARP,
    ICMP,
    IP,
    TCP,
    UDP,
    Dot1AD,
    Dot1AH,
    Dot1Q,
    Ether,
    IPOption,
    Raw,
)
from scapy.contrib.mpls import MPLS
from scapy.layers.inet6 import (
    ICMPv6EchoRequest,
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6NDOptDstLLAddr,
    ICMPv6NDOptSrcLLAddr,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    IPv6ExtHdrSegmentRouting,
)
from scapy.layers.ipsec import AH
from scapy.layers.sctp import SCTP, SCTPChunkData

DST = "01:02:03:04:05:06"
SRC = "0a:0b:0c:0d:0e:0f"
V6S = "2001:db8::1"
V6D = "2001:db8::2"
PAY = b"scapy payload!"


@pytest.fixture
def parse(tool):
    def run(pkt):
        (line,) = tool("parse", [pkt])
        return dict(kv.split("=", 1) for kv in line.split())

    return run


@pytest.fixture
def rewrite(tool):
    """Applies a command chain; returns the output bytes (or the error)."""

    def run(args, pkt):
        (line,) = tool(args, [pkt])
        if line.startswith("error="):
            return line
        return bytes.fromhex(line)

    return run


def recompute(pkt):
    """scapy's own encoding of `pkt` with every checksum recomputed."""
    q = pkt.__class__(bytes(pkt))
    layer = q
    while layer is not None and layer.name != "NoPayload":
        for f in ("chksum", "cksum"):
            if any(fd.name == f for fd in layer.fields_desc):
                setattr(layer, f, None)
        layer = layer.payload if layer.payload else None
    return bytes(q)


def fresh(pkt):
    """A packet dissected from its wire bytes, so every field is fixed."""
    return Ether(bytes(pkt))


# --- sample packets -------------------------------------------------------


def ipv4_tcp(**kw):
    return Ether(dst=DST, src=SRC) / IP(src="192.168.0.1", dst="10.0.0.2", tos=0x29, ttl=64, **kw) / TCP(
        sport=1234, dport=80, flags="SA"
    ) / PAY


def ipv4_udp(ttl=64):
    return Ether(dst=DST, src=SRC) / IP(src="10.0.0.1", dst="10.0.0.2", ttl=ttl) / UDP(sport=5353, dport=53) / PAY


def ipv4_udp_nocsum():
    return Ether(dst=DST, src=SRC) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=7, dport=9, chksum=0) / PAY


def ipv4_icmp():
    return Ether(dst=DST, src=SRC) / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP(type=8, id=0x1234, seq=1) / PAY


def ipv4_sctp():
    return Ether(dst=DST, src=SRC) / IP(src="10.0.0.1", dst="10.0.0.2") / SCTP(sport=5000, dport=6000, tag=0xDEADBEEF) / SCTPChunkData(data=b"data")


def ipv4_options_udp():
    return Ether(dst=DST, src=SRC) / IP(src="10.0.0.1", dst="10.0.0.2", options=[IPOption(b"\x94\x04\x00\x00")]) / UDP(
        sport=1, dport=2
    ) / PAY


def ipv6_tcp():
    return Ether(dst=DST, src=SRC) / IPv6(src=V6S, dst=V6D, tc=0xB8, fl=0xBEEF, hlim=64) / TCP(sport=443, dport=50000) / PAY


def ipv6_udp():
    return Ether(dst=DST, src=SRC) / IPv6(src=V6S, dst=V6D, hlim=255) / UDP(sport=546, dport=547) / PAY


def ipv6_sctp():
    return Ether(dst=DST, src=SRC) / IPv6(src=V6S, dst=V6D) / SCTP(sport=1, dport=2) / SCTPChunkData(data=b"x")


def ipv6_echo():
    return Ether(dst=DST, src=SRC) / IPv6(src=V6S, dst=V6D) / ICMPv6EchoRequest(id=1, seq=2, data=PAY)


def ipv6_ns(opt=True):
    p = Ether(dst=DST, src=SRC) / IPv6(src=V6S, dst="ff02::1:ff00:77", hlim=255) / ICMPv6ND_NS(tgt="fe80::77")
    return p / ICMPv6NDOptSrcLLAddr(lladdr=SRC) if opt else p


def ipv6_na():
    return Ether(dst=DST, src=SRC) / IPv6(src=V6S, dst=V6D, hlim=255) / ICMPv6ND_NA(tgt="fe80::77", R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(
        lladdr="66:66:66:66:66:66"
    )


def ipv6_exthdr_udp():
    return (
        Ether(dst=DST, src=SRC)
        / IPv6(src=V6S, dst=V6D)
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrDestOpt()
        / IPv6ExtHdrRouting()
        / IPv6ExtHdrFragment(offset=0, m=0, id=7)
        / UDP(sport=1000, dport=2000)
        / PAY
    )


def ipv6_routing_udp():
    """Type 0 routing header with a segment left: scapy's checksum uses the
    final destination (RFC 8200 §8.1)."""
    return (
        Ether(dst=DST, src=SRC)
        / IPv6(src=V6S, dst=V6D)
        / IPv6ExtHdrRouting(addresses=["2001:db8::a", "2001:db8::99"], segleft=2)
        / UDP(sport=1000, dport=2000)
        / PAY
    )


def ipv6_srh_tcp():
    """Segment routing header: the final segment is segment list[0]."""
    return (
        Ether(dst=DST, src=SRC)
        / IPv6(src=V6S, dst="2001:db8::a")
        / IPv6ExtHdrSegmentRouting(addresses=["2001:db8::99", "2001:db8::a"], segleft=1)
        / TCP(sport=1, dport=2)
        / PAY
    )


def arp():
    return Ether(dst="ff:ff:ff:ff:ff:ff", src=SRC) / ARP(op=1, hwsrc=SRC, psrc="10.0.0.1", pdst="10.0.0.2")


def mpls2():
    return Ether(dst=DST, src=SRC) / MPLS(label=100, cos=3, s=0, ttl=20) / MPLS(label=200, s=1, ttl=30) / IP(
        src="10.0.0.1", dst="10.0.0.2"
    ) / UDP(sport=1, dport=2) / PAY


def pbb():
    return (
        Ether(dst="b1:b1:b1:b1:b1:b1", src="b2:b2:b2:b2:b2:b2")
        / Dot1AH(prio=3, isid=0x0ABCDE)
        / Ether(dst=DST, src=SRC)
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / UDP(sport=1, dport=2)
        / PAY
    )


def vlan(p, vid=100, prio=5):
    e = fresh(p)
    return Ether(dst=e.dst, src=e.src) / Dot1Q(vlan=vid, prio=prio) / e.payload


def qinq(p):
    e = fresh(p)
    return Ether(dst=e.dst, src=e.src) / Dot1AD(vlan=10, prio=2) / Dot1Q(vlan=20, prio=7) / e.payload


SAMPLES = {
    "ipv4_tcp": ipv4_tcp,
    "ipv4_udp": ipv4_udp,
    "ipv4_udp_nocsum": ipv4_udp_nocsum,
    "ipv4_icmp": ipv4_icmp,
    "ipv4_sctp": ipv4_sctp,
    "ipv4_options_udp": ipv4_options_udp,
    "ipv6_tcp": ipv6_tcp,
    "ipv6_udp": ipv6_udp,
    "ipv6_sctp": ipv6_sctp,
    "ipv6_echo": ipv6_echo,
    "ipv6_ns": ipv6_ns,
    "ipv6_na": ipv6_na,
    "ipv6_exthdr_udp": ipv6_exthdr_udp,
    "ipv6_routing_udp": ipv6_routing_udp,
    "ipv6_srh_tcp": ipv6_srh_tcp,
    "arp": arp,
    "mpls2": mpls2,
    "pbb": pbb,
    "vlan_ipv4_tcp": lambda: vlan(ipv4_tcp()),
    "qinq_ipv6_udp": lambda: qinq(ipv6_udp()),
}


# --- parsing ---------------------------------------------------------------


def expected_fields(p):
    """The OpenFlow match fields of `p`, computed from scapy's decode."""
    e = fresh(p)
    f = {"eth_dst": e.dst, "eth_src": e.src}
    layer = e.payload
    et = e.type
    if isinstance(layer, (Dot1Q, Dot1AD)):
        f["vlan_vid"] = str(0x1000 | layer.vlan)
        f["vlan_pcp"] = str(layer.prio)
    else:
        f["vlan_vid"] = "0"
    while isinstance(layer, (Dot1Q, Dot1AD)):
        et = layer.type
        layer = layer.payload
    f["eth_type"] = str(et)
    if isinstance(layer, IP):
        f.update(
            ip_dscp=str(layer.tos >> 2),
            ip_ecn=str(layer.tos & 3),
            ip_proto=str(layer.proto),
            ipv4_src=layer.src,
            ipv4_dst=layer.dst,
        )
        l4 = layer.payload if layer.frag == 0 else None
    elif isinstance(layer, IPv6):
        f.update(
            ip_dscp=str(layer.tc >> 2),
            ip_ecn=str(layer.tc & 3),
            ipv6_src=layer.src,
            ipv6_dst=layer.dst,
            ipv6_flabel=str(layer.fl),
        )
        bits = 0
        l4 = layer.payload
        proto = layer.nh
        names = {
            IPv6ExtHdrHopByHop: 64,
            IPv6ExtHdrDestOpt: 8,
            IPv6ExtHdrRouting: 32,
            IPv6ExtHdrSegmentRouting: 32,
            IPv6ExtHdrFragment: 16,
            AH: 4,
        }
        while type(l4) in names:
            bits |= names[type(l4)]
            proto = l4.nh
            if isinstance(l4, IPv6ExtHdrFragment) and l4.offset:
                l4 = None
                break
            l4 = l4.payload
        if proto == 59:
            bits |= 1
        f["ip_proto"] = str(proto)
        f["ipv6_exthdr"] = str(bits)
    elif isinstance(layer, ARP):
        f.update(
            arp_op=str(layer.op),
            arp_spa=layer.psrc,
            arp_tpa=layer.pdst,
            arp_sha=layer.hwsrc,
            arp_tha=layer.hwdst,
        )
        l4 = None
    elif isinstance(layer, MPLS):
        f.update(mpls_label=str(layer.label), mpls_tc=str(layer.cos), mpls_bos=str(layer.s))
        l4 = None
    elif isinstance(layer, Dot1AH):
        f["pbb_isid"] = str(layer.isid)
        l4 = None
    else:
        l4 = None
    if isinstance(l4, (TCP, UDP, SCTP)):
        n = {TCP: "tcp", UDP: "udp", SCTP: "sctp"}[type(l4)]
        f[n + "_src"] = str(l4.sport)
        f[n + "_dst"] = str(l4.dport)
    elif isinstance(l4, ICMP):
        f.update(icmpv4_type=str(l4.type), icmpv4_code=str(l4.code))
    elif l4 is not None and l4.name.startswith("ICMPv6"):
        f.update(icmpv6_type=str(l4.type), icmpv6_code=str(l4.code))
        if isinstance(l4, (ICMPv6ND_NS, ICMPv6ND_NA)):
            f["ipv6_nd_target"] = l4.tgt
            key, opt = (
                ("ipv6_nd_sll", ICMPv6NDOptSrcLLAddr)
                if isinstance(l4, ICMPv6ND_NS)
                else ("ipv6_nd_tll", ICMPv6NDOptDstLLAddr)
            )
            f[key] = l4[opt].lladdr if opt in l4 else "00:00:00:00:00:00"
    return f


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_parse_matches_scapy(name, parse):
    p = SAMPLES[name]()
    got = parse(p)
    for k in ("flags", "l3_offset", "l4_offset"):
        got.pop(k)
    assert got == expected_fields(p)


def test_parse_ns_without_option(parse):
    got = parse(ipv6_ns(opt=False))
    assert got["ipv6_nd_sll"] == "00:00:00:00:00:00"
    assert "ipv6_nd_tll" not in got


def test_parse_ipv4_later_fragment(parse):
    p = ipv4_tcp(frag=8, flags="MF")
    got = parse(p)
    assert got["ip_proto"] == "6"
    assert "tcp_src" not in got
    assert got["flags"] == str(4 | 8 | 16)  # fragment, later, more


def test_parse_ipv6_later_fragment(parse):
    p = Ether() / IPv6(src=V6S, dst=V6D) / IPv6ExtHdrFragment(offset=100, m=0, nh=17) / Raw(b"\0" * 16)
    got = parse(p)
    assert got["ip_proto"] == "17"
    assert got["ipv6_exthdr"] == "16"
    assert "udp_src" not in got


@pytest.mark.parametrize(
    "exts,bits",
    [
        ([IPv6ExtHdrHopByHop(), AH(nh=17, payloadlen=4, spi=1, seq=1, icv=b"\0" * 12)], 64 | 4),
        ([IPv6ExtHdrDestOpt(), IPv6ExtHdrRouting(), IPv6ExtHdrDestOpt()], 8 | 32),
        ([IPv6ExtHdrRouting(), IPv6ExtHdrHopByHop()], 32 | 64 | 256),
        ([IPv6ExtHdrFragment(), IPv6ExtHdrFragment()], 16 | 128),
        ([IPv6ExtHdrFragment(), IPv6ExtHdrRouting()], 16 | 32 | 256),
    ],
)
def test_ipv6_exthdr_bits(exts, bits, parse):
    p = Ether() / IPv6(src=V6S, dst=V6D)
    for x in exts:
        p = p / x
    p = p / UDP(sport=1, dport=2) / PAY
    got = parse(p)
    assert got["ipv6_exthdr"] == str(bits)
    assert got["udp_src"] == "1"


def test_ipv6_no_next_header(parse):
    p = Ether() / IPv6(src=V6S, dst=V6D, nh=59)
    got = parse(p)
    assert got["ipv6_exthdr"] == "1"
    assert got["ip_proto"] == "59"


def test_truncated_prefixes_parse(tool):
    for name, mk in SAMPLES.items():
        raw = bytes(mk())
        lines = tool("parse", [raw[:n] for n in range(1, len(raw))])
        assert all(ln.startswith("eth_dst=") or ln.startswith("flags=") for ln in lines), name


# --- checksums ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_verify_agrees_with_scapy(name, tool):
    p = SAMPLES[name]()
    assert tool("verify", [p]) == ["ok"]
    # Our from-scratch fill gives scapy's bytes.
    assert tool("fill", [p]) == [bytes(p).hex()]


def test_verify_catches_bad_checksums(tool):
    for mk in (ipv4_tcp, ipv4_udp, ipv4_icmp, ipv4_sctp, ipv6_tcp, ipv6_echo, ipv6_sctp):
        raw = bytearray(bytes(mk()))
        raw[-1] ^= 0x55
        assert tool("verify", [bytes(raw)])[0].startswith("error="), mk.__name__


# --- push / pop ----------------------------------------------------------------


def test_push_vlan_untagged(rewrite):
    p = ipv4_tcp()
    out = Ether(rewrite("push_vlan 0x8100", p))
    assert out.type == 0x8100
    assert (out[Dot1Q].vlan, out[Dot1Q].prio, out[Dot1Q].type) == (0, 0, 0x0800)
    assert bytes(out[Dot1Q].payload) == bytes(fresh(p).payload)


def test_push_vlan_copies_outer_tag(rewrite):
    p = vlan(ipv4_udp(), vid=300, prio=6)
    out = Ether(rewrite("push_vlan 0x88a8", p))
    assert isinstance(out.payload, Dot1AD)
    assert (out[Dot1AD].vlan, out[Dot1AD].prio) == (300, 6)
    assert (out[Dot1Q].vlan, out[Dot1Q].prio) == (300, 6)


def test_pop_vlan(rewrite):
    assert rewrite("pop_vlan", vlan(ipv4_tcp())) == bytes(ipv4_tcp())
    assert rewrite("pop_vlan", qinq(ipv6_udp())) == bytes(vlan(ipv6_udp(), vid=20, prio=7))
    assert rewrite("pop_vlan", ipv4_tcp()) == "error=MissingHeader"


def test_push_mpls_on_ip(rewrite):
    out = Ether(rewrite("push_mpls 0x8847", ipv4_udp(ttl=33)))
    assert out.type == 0x8847
    m = out[MPLS]
    assert (m.label, m.cos, m.s, m.ttl) == (0, 0, 1, 33)
    assert bytes(m.payload) == bytes(fresh(ipv4_udp(ttl=33))[IP])
    out6 = Ether(rewrite("push_mpls 0x8848", ipv6_udp()))
    assert out6.type == 0x8848
    assert bytes(out6)[14:18] == bytes.fromhex("000001ff")


def test_push_mpls_on_mpls(rewrite):
    out = Ether(rewrite("push_mpls 0x8847", mpls2()))
    labels = []
    layer = out.payload
    while isinstance(layer, MPLS):
        labels.append((layer.label, layer.cos, layer.s, layer.ttl))
        layer = layer.payload
    assert labels == [(100, 3, 0, 20), (100, 3, 0, 20), (200, 0, 1, 30)]


def min_frame(b):
    """A frame that arrived at 60 bytes or more and lost a header to a pop:
    padded with zeros to Ethernet's minimum, 60 bytes, as a bridge pads
    a frame that untagging leaves too short."""
    return bytes(b) + bytes(max(0, 60 - len(bytes(b))))


def test_pop_mpls(rewrite):
    inner = ipv4_udp()
    p = Ether(dst=DST, src=SRC) / MPLS(label=16, s=1, ttl=9) / fresh(inner)[IP]
    assert len(bytes(p)) >= 60 > len(bytes(inner))
    assert rewrite("pop_mpls 0x0800", p) == min_frame(inner)
    out = Ether(rewrite("pop_mpls 0x8847", mpls2()))
    assert (out[MPLS].label, out[MPLS].s) == (200, 1)
    assert rewrite("pop_mpls 0x0800", inner) == "error=MissingHeader"


def test_push_pop_pbb(rewrite):
    p = vlan(ipv4_udp(), vid=5, prio=4)
    out = Ether(rewrite("push_pbb 0x88e7", p))
    assert out.type == 0x88E7
    i = out[Dot1AH]
    assert (i.prio, i.dei, i.nca, i.res1, i.res2, i.isid) == (4, 0, 0, 0, 0, 0)
    customer = i.payload
    assert isinstance(customer, Ether)
    assert (customer.dst, customer.src) == (DST, SRC)
    assert (out.dst, out.src) == (DST, SRC)
    assert bytes(customer) == bytes(p)
    assert rewrite("push_pbb 0x88e7 + pop_pbb", p) == bytes(p)
    q = pbb()
    out = Ether(rewrite("push_pbb 0x88e7", q))
    assert out[Dot1AH].isid == 0x0ABCDE
    assert rewrite("pop_pbb", q) == min_frame(fresh(q)[Dot1AH].payload)
    assert rewrite("pop_pbb", p) == "error=MissingHeader"


# --- TTL ---------------------------------------------------------------------------


def test_dec_nw_ttl_ipv4(rewrite):
    p = ipv4_tcp()
    out = rewrite("dec_nw_ttl", p)
    q = fresh(p)
    q[IP].ttl = 63
    assert out == recompute(q)
    assert rewrite("set_nw_ttl 1 + dec_nw_ttl", p) == "error=InvalidTtl"
    assert rewrite("set_nw_ttl 0 + dec_nw_ttl", p) == "error=InvalidTtl"


def test_dec_nw_ttl_ipv6(rewrite):
    out = Ether(rewrite("dec_nw_ttl", vlan(ipv6_udp())))
    assert out[IPv6].hlim == 254
    assert rewrite("dec_nw_ttl", arp()) == "error=MissingHeader"


def test_mpls_ttl_actions(rewrite):
    out = Ether(rewrite("dec_mpls_ttl", mpls2()))
    assert out[MPLS].ttl == 19
    out = Ether(rewrite("copy_ttl_out", mpls2()))
    assert out[MPLS].ttl == 30
    out = Ether(rewrite("set_mpls_ttl 7 + copy_ttl_in", mpls2()))
    assert out[MPLS].payload.ttl == 7
    p = Ether(dst=DST, src=SRC) / MPLS(label=16, s=1, ttl=9) / fresh(ipv4_udp())[IP]
    out = rewrite("copy_ttl_in + pop_mpls 0x0800", p)
    q = fresh(ipv4_udp())
    q[IP].ttl = 9
    assert out == min_frame(recompute(q))
    out = Ether(rewrite("copy_ttl_out", p))
    assert out[MPLS].ttl == 64
    assert rewrite("set_mpls_ttl 1 + dec_mpls_ttl", p) == "error=InvalidTtl"


# --- set_field: our incremental checksums must equal scapy's full recompute ------------


SET_CASES = [
    # (sample, command, scapy layer, attribute, value)
    ("vlan_ipv4_tcp", "eth_dst 12:34:56:78:9a:bc", Ether, "dst", "12:34:56:78:9a:bc"),
    ("vlan_ipv4_tcp", "eth_src 12:34:56:78:9a:bc", Ether, "src", "12:34:56:78:9a:bc"),
    ("vlan_ipv4_tcp", "vlan_vid 0x1abc", Dot1Q, "vlan", 0xABC),
    ("vlan_ipv4_tcp", "vlan_pcp 7", Dot1Q, "prio", 7),
    ("ipv4_tcp", "ip_dscp 46", IP, "tos", (46 << 2) | 1),
    ("ipv4_tcp", "ip_ecn 2", IP, "tos", (0x29 & 0xFC) | 2),
    ("ipv4_options_udp", "ip_dscp 63", IP, "tos", 63 << 2),
    ("ipv6_tcp", "ip_dscp 10", IPv6, "tc", 10 << 2),
    ("ipv6_tcp", "ip_ecn 3", IPv6, "tc", 0xB8 | 3),
    ("ipv4_tcp", "ipv4_src 10.9.8.7", IP, "src", "10.9.8.7"),
    ("ipv4_tcp", "ipv4_dst 255.255.255.255", IP, "dst", "255.255.255.255"),
    ("ipv4_udp", "ipv4_src 0.0.0.0", IP, "src", "0.0.0.0"),
    ("ipv4_udp", "ipv4_dst 172.16.1.2", IP, "dst", "172.16.1.2"),
    ("ipv4_icmp", "ipv4_src 1.2.3.4", IP, "src", "1.2.3.4"),
    ("ipv4_sctp", "ipv4_dst 1.2.3.4", IP, "dst", "1.2.3.4"),
    ("ipv4_options_udp", "ipv4_src 9.9.9.9", IP, "src", "9.9.9.9"),
    ("ipv4_tcp", "tcp_src 65535", TCP, "sport", 65535),
    ("ipv4_tcp", "tcp_dst 0", TCP, "dport", 0),
    ("ipv6_tcp", "tcp_src 22", TCP, "sport", 22),
    ("ipv4_udp", "udp_src 1", UDP, "sport", 1),
    ("ipv4_udp", "udp_dst 4789", UDP, "dport", 4789),
    ("ipv6_udp", "udp_dst 53", UDP, "dport", 53),
    ("ipv6_exthdr_udp", "udp_src 9", UDP, "sport", 9),
    ("ipv4_sctp", "sctp_src 7", SCTP, "sport", 7),
    ("ipv4_sctp", "sctp_dst 65535", SCTP, "dport", 65535),
    ("ipv6_sctp", "sctp_dst 80", SCTP, "dport", 80),
    ("ipv4_icmp", "icmpv4_type 0", ICMP, "type", 0),
    ("ipv4_icmp", "icmpv4_code 5", ICMP, "code", 5),
    ("arp", "arp_op 2", ARP, "op", 2),
    ("arp", "arp_spa 192.168.1.1", ARP, "psrc", "192.168.1.1"),
    ("arp", "arp_tpa 192.168.1.2", ARP, "pdst", "192.168.1.2"),
    ("arp", "arp_sha 02:00:00:00:00:01", ARP, "hwsrc", "02:00:00:00:00:01"),
    ("arp", "arp_tha 02:00:00:00:00:02", ARP, "hwdst", "02:00:00:00:00:02"),
    ("ipv6_tcp", "ipv6_src fe80::1234", IPv6, "src", "fe80::1234"),
    ("ipv6_udp", "ipv6_dst 2001:db8:ffff::9", IPv6, "dst", "2001:db8:ffff::9"),
    ("ipv6_echo", "ipv6_src ::1", IPv6, "src", "::1"),
    ("ipv6_sctp", "ipv6_dst ::2", IPv6, "dst", "::2"),
    ("ipv6_ns", "ipv6_dst ff02::1", IPv6, "dst", "ff02::1"),
    ("ipv6_exthdr_udp", "ipv6_src 2001:db8::99", IPv6, "src", "2001:db8::99"),
    ("ipv6_routing_udp", "ipv6_dst 2001:db8::5", IPv6, "dst", "2001:db8::5"),
    ("ipv6_routing_udp", "ipv6_src 2001:db8::6", IPv6, "src", "2001:db8::6"),
    ("ipv6_srh_tcp", "ipv6_dst 2001:db8::7", IPv6, "dst", "2001:db8::7"),
    ("ipv6_srh_tcp", "tcp_dst 443", TCP, "dport", 443),
    ("ipv6_tcp", "ipv6_flabel 0xfffff", IPv6, "fl", 0xFFFFF),
    ("ipv6_echo", "icmpv6_type 129", ICMPv6EchoRequest, "type", 129),
    ("ipv6_echo", "icmpv6_code 3", ICMPv6EchoRequest, "code", 3),
    ("ipv6_ns", "ipv6_nd_target 2001:db8::77", ICMPv6ND_NS, "tgt", "2001:db8::77"),
    ("ipv6_na", "ipv6_nd_target fe80::1", ICMPv6ND_NA, "tgt", "fe80::1"),
    ("ipv6_ns", "ipv6_nd_sll 02:11:22:33:44:55", ICMPv6NDOptSrcLLAddr, "lladdr", "02:11:22:33:44:55"),
    ("ipv6_na", "ipv6_nd_tll 02:11:22:33:44:55", ICMPv6NDOptDstLLAddr, "lladdr", "02:11:22:33:44:55"),
    ("mpls2", "mpls_label 0xfffff", MPLS, "label", 0xFFFFF),
    ("mpls2", "mpls_tc 7", MPLS, "cos", 7),
    ("mpls2", "mpls_bos 1", MPLS, "s", 1),
    ("pbb", "pbb_isid 0x123456", Dot1AH, "isid", 0x123456),
]


@pytest.mark.parametrize("sample,cmd,cls,attr,value", SET_CASES, ids=[c[1] for c in SET_CASES])
def test_set_field(sample, cmd, cls, attr, value, rewrite):
    p = SAMPLES[sample]()
    out = rewrite("set " + cmd, p)
    q = fresh(p)
    setattr(q[cls], attr, value)
    assert out == recompute(q)


def test_set_field_udp_no_checksum_stays_zero(rewrite):
    p = ipv4_udp_nocsum()
    out = rewrite("set ipv4_src 10.1.1.1", p)
    q = fresh(p)
    q[IP].src = "10.1.1.1"
    q[IP].chksum = None
    assert out == bytes(q)
    assert Ether(out)[UDP].chksum == 0


def test_set_field_udp_zero_result_is_ffff(rewrite):
    # With source port 0 the checksum is C; with source port C the ones-
    # complement sum becomes all ones, so the computed checksum is zero and
    # must be sent as 0xffff. Ours must match scapy's full recompute exactly.
    p = ipv4_udp()
    q = fresh(p)
    q[UDP].sport = 0
    port = Ether(recompute(q))[UDP].chksum
    q[UDP].sport = port
    want = recompute(q)
    assert Ether(want)[UDP].chksum == 0xFFFF
    assert rewrite(f"set udp_src {port}", p) == want


def test_set_field_prerequisites(rewrite):
    assert rewrite("set tcp_src 1", ipv4_udp()) == "error=MissingHeader"
    assert rewrite("set vlan_vid 5", ipv4_udp()) == "error=MissingHeader"
    assert rewrite("set ipv6_nd_tll 01:02:03:04:05:06", ipv6_ns()) == "error=MissingHeader"
    assert rewrite("set ipv6_nd_sll 01:02:03:04:05:06", ipv6_ns(opt=False)) == "error=MissingHeader"
    assert rewrite("set icmpv4_type 1", ipv6_echo()) == "error=MissingHeader"


def test_chained_gateway_rewrite(rewrite):
    """VLAN data-centre frame to MPLS carrier frame and back."""
    p = vlan(ipv4_tcp(), vid=42, prio=3)
    out = rewrite(
        "pop_vlan + push_mpls 0x8847 + set mpls_label 1000 + dec_mpls_ttl + set eth_dst 02:00:00:00:00:09",
        p,
    )
    e = Ether(out)
    assert (e.dst, e[MPLS].label, e[MPLS].ttl, e[MPLS].s) == ("02:00:00:00:00:09", 1000, 63, 1)
    back = rewrite("pop_mpls 0x0800 + push_vlan 0x8100 + set vlan_vid 42 + set vlan_pcp 3 + set eth_dst " + DST, out)
    assert back == bytes(p)
