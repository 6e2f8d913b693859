"""End-to-end: VXLAN and GRE tunnel ports with the Linux kernel as the peer.

Topology (every address is inside namespaces this test makes):

    ns P-th: th (10.77.1.1) == ts1 [port 1] fulmar (ns P-tsw) [port 2: tunnel]
                                      tu (10.77.0.1) == tp (10.77.0.2) :ns P-tp
                                      ns P-tp also: vx0/gt0 (10.77.1.2), the
                                      kernel's own VXLAN/GRETAP device

The host pings 10.77.1.2 across the tunnel with two explicit flows
(in_port=1 -> 2, in_port=2 -> 1). The underlay is captured on both sides
and decoded with scapy: what fulmar sends must be byte for byte what scapy
builds from the same fields, and what the kernel sends must decode as the
tunnel the port was told to expect.

The key=flow tests add a second host (ns P-th2, 10.77.3.1) on switch port
3 and two kernel tunnel devices in P-tp, keys 42 (10.77.1.2) and 43
(10.77.3.2), both reached through fulmar's one tunnel port.

Where the kernel has no GRE, the independent GRE peer is Open vSwitch's
userspace datapath, run privately in P-tp (see `ovs_peer` at the end):
the same ping and the same decoding, for GRE and VXLAN.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from scapy.layers.inet import GRE, ICMP, IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.layers.vxlan import VXLAN

from e2e_support import HELPER, P, Switch, ports_toml, sh

NS_SW, NS_HOST, NS_PEER = f"{P}-tsw", f"{P}-th", f"{P}-tp"
HOST_IP, PEER_OVERLAY_IP = "10.77.1.1", "10.77.1.2"
SW_UNDERLAY, PEER_UNDERLAY = "10.77.0.1", "10.77.0.2"
HOST_MAC = "02:00:00:00:77:01"
KEY = 42


def cleanup():
    for ns in (NS_SW, NS_HOST, NS_PEER):
        sh("ip", "netns", "del", ns, check=False)


@pytest.fixture
def tunnel_net(fulmar_bin):
    """The three namespaces and two veth pairs; the peer's tunnel device
    is made by each test."""
    cleanup()
    try:
        for ns in (NS_SW, NS_HOST, NS_PEER):
            sh("ip", "netns", "add", ns)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", NS_SW, "link", "add", "ts1", "type", "veth", "peer", "name", "th", "netns", NS_HOST)
        sh("ip", "-n", NS_SW, "link", "add", "tu", "type", "veth", "peer", "name", "tp", "netns", NS_PEER)
        sh("ip", "-n", NS_SW, "link", "set", "ts1", "up")
        sh("ip", "-n", NS_SW, "addr", "add", f"{SW_UNDERLAY}/24", "dev", "tu")
        sh("ip", "-n", NS_SW, "link", "set", "tu", "up")
        sh("ip", "-n", NS_HOST, "link", "set", "th", "address", HOST_MAC, "up")
        sh("ip", "-n", NS_HOST, "addr", "add", f"{HOST_IP}/24", "dev", "th")
        sh("ip", "-n", NS_PEER, "addr", "add", f"{PEER_UNDERLAY}/24", "dev", "tp")
        sh("ip", "-n", NS_PEER, "link", "set", "tp", "up")
        yield
    finally:
        cleanup()


def peer_device(kind):
    """The kernel's tunnel device in the peer namespace, with the overlay
    address."""
    if kind == "vxlan":
        r = sh("ip", "-n", NS_PEER, "link", "add", "vx0", "type", "vxlan", "id", str(KEY),
               "remote", SW_UNDERLAY, "local", PEER_UNDERLAY, "dstport", "4789", check=False)
        dev = "vx0"
    else:
        r = sh("ip", "-n", NS_PEER, "link", "add", "gt0", "type", "gretap",
               "remote", SW_UNDERLAY, "local", PEER_UNDERLAY, "key", str(KEY), check=False)
        dev = "gt0"
    if r.returncode != 0:
        pytest.skip(f"the kernel cannot make a {kind} device: {r.stderr.strip()}")
    sh("ip", "-n", NS_PEER, "addr", "add", f"{PEER_OVERLAY_IP}/24", "dev", dev)
    sh("ip", "-n", NS_PEER, "link", "set", dev, "up")


def tunnel_port(kind, key):
    """The [[bridges.ports]] table of port 2, the KIND tunnel to the peer
    with `key = KEY` (KEY as TOML: a number or "flow")."""
    extra = 'dst_port = 4789\n' if kind == "vxlan" else ""
    return f"""[[bridges.ports]]
port = 2
interface = "{kind}-peer"
backend = "{kind}"
remote_ip = "{PEER_UNDERLAY}"
local_ip = "{SW_UNDERLAY}"
key = {key}
{extra}"""


def config(kind):
    return f"""
[[bridges]]
name = "br0"
flows = ["table=0,priority=10,in_port=1,actions=output:2",
         "table=0,priority=10,in_port=2,actions=output:1"]
{ports_toml({1: "ts1"})}{tunnel_port(kind, KEY)}"""


class Capture:
    """The first `limit` IPv4 frames received on IFACE in namespace NS
    (nshelper capture), polled so the test can keep traffic going until
    it has them."""

    def __init__(self, ns, iface, limit, seconds=60, ethertype="0800"):
        self.p = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, HELPER, "capture", iface, str(seconds), str(limit), ethertype],
            stdout=subprocess.PIPE, text=True,
        )
        assert self.p.stdout.readline().strip() == "ready"

    def done(self):
        return self.p.poll() is not None

    def frames(self):
        out, _ = self.p.communicate(timeout=90)
        return [Ether(bytes.fromhex(l)) for l in out.split()]

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def ping_once():
    r = subprocess.run(["ip", "netns", "exec", NS_HOST, "ping", "-n", "-c", "1", "-W", "1", PEER_OVERLAY_IP],
                       capture_output=True, text=True)
    return r.returncode == 0


def ctl_json(fulmar_bin, sock, *args):
    r = subprocess.run([fulmar_bin, "ctl", "-t", sock, *args, "--json"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def start_switch(fulmar_bin, tmp_path, text):
    cfg = tmp_path / "switch.toml"
    cfg.write_text(text)
    sock = str(tmp_path / "ctl.sock")
    sw = Switch(["ip", "netns", "exec", NS_SW, fulmar_bin, "run", "--config", str(cfg), "--ctl", sock,
                 "--mgmt-dir", str(tmp_path), "--saved-tables", "none"])
    return sw, sock


def is_tunnel(pkt, kind):
    if IP not in pkt:
        return False
    if kind == "vxlan":
        return UDP in pkt and pkt[UDP].dport == 4789
    return pkt[IP].proto == 47


def expected_outer(kind, ip, inner):
    """What fulmar must have sent, built by scapy from the fields the
    format leaves to the sender (the IP identification the kernel chose,
    the hashed UDP source port)."""
    outer = IP(src=SW_UNDERLAY, dst=PEER_UNDERLAY, ttl=64, tos=0, id=ip.id, flags=0, frag=0)
    if kind == "vxlan":
        return outer / UDP(sport=ip[UDP].sport, dport=4789, chksum=0) / VXLAN(flags=0x08, vni=KEY) / inner
    return outer / GRE(key_present=1, key=KEY, proto=0x6558) / inner


def inner_of(pkt, kind):
    layer = pkt[VXLAN] if kind == "vxlan" else pkt[GRE]
    return Ether(bytes(layer.payload))


def add_by_ctl(fulmar_bin, sock, kind):
    """The tunnel port added to the running switch as ovs-vsctl words
    would add it (options before the type, too)."""
    name = f"{kind}-peer"
    r = subprocess.run(
        [fulmar_bin, "ctl", "-t", sock, "add-port", "br0", name, "--", "set", "interface", name,
         f"options:remote_ip={PEER_UNDERLAY}", f"options:local_ip={SW_UNDERLAY}", f"options:key={KEY}",
         f"type={kind}", "ofport_request=2"],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("kind,how", [("vxlan", "file"), ("vxlan", "ctl"), ("gre", "file")])
def test_host_pings_the_kernel_across_the_tunnel(tunnel_net, fulmar_bin, tmp_path, kind, how):
    """The host resolves and pings the peer's overlay address through
    fulmar's tunnel port (from the configuration file, or added to the
    running switch with `fulmar ctl`); both directions of the underlay
    decode as the tunnel with key 42, and fulmar's packets are exactly
    scapy's."""
    peer_device(kind)
    text = config(kind)
    if how == "ctl":
        text = text[: text.index("[[bridges.ports]]\nport = 2")]
    sw, sock = start_switch(fulmar_bin, tmp_path, text)
    if how == "ctl":
        add_by_ctl(fulmar_bin, sock, kind)
    to_peer = Capture(NS_PEER, "tp", 4)
    from_peer = Capture(NS_SW, "tu", 4)
    try:
        pinged = False
        deadline = time.time() + 60
        while time.time() < deadline and not (pinged and to_peer.done() and from_peer.done()):
            pinged = ping_once() or pinged
        assert pinged, "no ping across the tunnel"
        sent, received = to_peer.frames(), from_peer.frames()
    finally:
        to_peer.kill()
        from_peer.kill()
    # fulmar -> the kernel.
    ours = [p for p in sent if is_tunnel(p, kind)]
    assert ours, [p.summary() for p in sent]
    for p in ours:
        ip = p[IP]
        assert (ip.src, ip.dst, ip.ttl) == (SW_UNDERLAY, PEER_UNDERLAY, 64)
        if kind == "vxlan":
            assert 49152 <= ip[UDP].sport <= 65535
            assert ip[UDP].chksum == 0
            assert ip[VXLAN].vni == KEY and ip[VXLAN].flags & 0x08
        else:
            g = ip[GRE]
            assert (g.key_present, g.key, g.proto, g.chksum_present, g.seqnum_present) == (1, KEY, 0x6558, 0, 0)
        inner = inner_of(p, kind)
        assert inner.src == HOST_MAC
        assert bytes(ip) == bytes(expected_outer(kind, ip, inner)), ip.show(dump=True)
    assert any(ARP in inner_of(p, kind) for p in ours), "the host's ARP request crossed"
    # The kernel -> fulmar, as the kernel wrote it.
    theirs = [p for p in received if is_tunnel(p, kind)]
    assert theirs, [p.summary() for p in received]
    for p in theirs:
        assert (p[IP].src, p[IP].dst) == (PEER_UNDERLAY, SW_UNDERLAY)
        if kind == "vxlan":
            assert p[VXLAN].vni == KEY
        else:
            assert (p[GRE].key_present, p[GRE].key, p[GRE].proto) == (1, KEY, 0x6558)
        assert inner_of(p, kind).dst == HOST_MAC
    stats = ctl_json(fulmar_bin, sock, "stats")[0]
    ports = {p["port"]: p for p in stats["ports"]}
    assert ports[2]["tx_packets"] >= 2 and ports[2]["rx_packets"] >= 2, ports[2]
    # The trace names the encapsulation of the tunnel port it outputs to.
    frame = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC, type=0x88B5) / (b"\x00" * 46)).hex()
    r = subprocess.run([fulmar_bin, "ctl", "-t", sock, "trace", "br0", "in_port=1", frame],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    how = "IPv4/UDP port 4789/VXLAN VNI 42" if kind == "vxlan" else "IPv4/GRE key 42 (0x6558)"
    want = f"tunnel: port 2 ({kind}-peer) sends it in {how} from {SW_UNDERLAY} to {PEER_UNDERLAY}"
    assert "-> output to port 2" in r.stdout and want in r.stdout, r.stdout
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err, err


def peer_send_udp(payloads):
    """UDP datagrams from the peer's underlay address to fulmar's VXLAN
    port."""
    code = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        f"s.bind(('{PEER_UNDERLAY}',0))\n"
        "for h in sys.argv[1:]:\n"
        f"    s.sendto(bytes.fromhex(h),('{SW_UNDERLAY}',4789))\n"
    )
    r = subprocess.run(["ip", "netns", "exec", NS_PEER, sys.executable, "-c", code, *[p.hex() for p in payloads]],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_bad_vxlan_packets_are_dropped_and_counted(tunnel_net, fulmar_bin, tmp_path):
    """Short or flagless VXLAN headers are `tunnel_malformed`, another
    VNI is `tunnel_mismatch`; none reaches the host, a good one does."""
    sw, sock = start_switch(fulmar_bin, tmp_path, config("vxlan"))
    inner = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:77:99", type=0x88B5) / (b"\x00" * 46))
    peer_send_udp([
        b"\x08\x00\x00",  # shorter than the VXLAN header
        bytes(VXLAN(flags=0, vni=KEY)) + inner,  # no I flag
        bytes(VXLAN(flags=0x08, vni=KEY)) + inner[:10],  # a runt inner frame
        bytes(VXLAN(flags=0x08, vni=KEY + 1)) + inner,  # another VNI
    ])

    def drops():
        d = dict(ctl_json(fulmar_bin, sock, "stats")[0]["drops"])
        return d.get("port_rx_tunnel_malformed", 0), d.get("port_rx_tunnel_mismatch", 0)

    deadline = time.time() + 30
    while time.time() < deadline and drops() != (3, 1):
        time.sleep(0.1)
    assert drops() == (3, 1)
    ports = {p["port"]: p for p in ctl_json(fulmar_bin, sock, "stats")[0]["ports"]}
    assert ports[2]["rx_packets"] == 0 and ports[1]["tx_packets"] == 0, ports
    # A good one goes through (so the counts above are not a dead port).
    peer_send_udp([bytes(VXLAN(flags=0x08, vni=KEY)) + inner])
    deadline = time.time() + 30
    while time.time() < deadline:
        ports = {p["port"]: p for p in ctl_json(fulmar_bin, sock, "stats")[0]["ports"]}
        # Each thread publishes its own counters: wait for both ports'.
        if ports[2]["rx_packets"] >= 1 and ports[1]["tx_packets"] >= 1:
            break
        time.sleep(0.1)
    assert ports[2]["rx_packets"] == 1 and ports[1]["tx_packets"] == 1, ports
    assert drops() == (3, 1)
    rc, _, err = sw.stop()
    assert rc == 0, err


def peer_send_ip(packets):
    """Whole IPv4 packets (scapy-built) from the peer namespace through a
    raw socket."""
    code = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_RAW)\n"
        "for h in sys.argv[1:]:\n"
        f"    s.sendto(bytes.fromhex(h),('{SW_UNDERLAY}',0))\n"
    )
    r = subprocess.run(["ip", "netns", "exec", NS_PEER, sys.executable, "-c", code,
                        *[bytes(p).hex() for p in packets]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_gre_against_a_scapy_peer(tunnel_net, fulmar_bin, tmp_path):
    """GRE both ways without the kernel's gretap (not every kernel has
    it): a frame from the host leaves as scapy's IP/GRE(key 42,
    0x6558)/frame; scapy's GRE packets from the peer arrive at the host
    decapsulated, or are counted when their key or header is wrong."""
    sw, sock = start_switch(fulmar_bin, tmp_path, config("gre"))
    frame = Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC, type=0x88B5) / (b"\x01" * 46)
    to_peer = Capture(NS_PEER, "tp", 1)
    try:
        r = subprocess.run(["ip", "netns", "exec", NS_HOST, sys.executable, HELPER, "send", "th",
                            bytes(frame).hex()], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        sent = to_peer.frames()
    finally:
        to_peer.kill()
    assert len(sent) == 1 and is_tunnel(sent[0], "gre"), [p.summary() for p in sent]
    ip = sent[0][IP]
    assert bytes(inner_of(sent[0], "gre")) == bytes(frame)
    assert bytes(ip) == bytes(expected_outer("gre", ip, frame)), ip.show(dump=True)

    back = Ether(dst=HOST_MAC, src="02:00:00:00:77:02", type=0x88B5) / (b"\x02" * 46)
    outer = IP(src=PEER_UNDERLAY, dst=SW_UNDERLAY)
    host = Capture(NS_HOST, "th", 1, ethertype="88b5")
    try:
        peer_send_ip([
            outer / GRE(key_present=1, key=KEY + 1, proto=0x6558) / back,  # another key
            outer / GRE(key_present=1, key=KEY, proto=0x0800) / back,  # not Ethernet
            outer / GRE(routing_present=1, key_present=1, key=KEY, proto=0x6558) / back,  # routing
            outer / GRE(key_present=1, key=KEY, proto=0x6558) / bytes(back)[:10],  # runt frame
            outer / GRE(key_present=1, key=KEY, proto=0x6558) / back,
        ])
        got = host.frames()
    finally:
        host.kill()
    assert [bytes(f) for f in got] == [bytes(back)]
    # The drops are counted by the thread that read the tunnel port and
    # published every few milliseconds: the good frame may reach the host
    # before they are.
    deadline = time.time() + 30
    while True:
        d = dict(ctl_json(fulmar_bin, sock, "stats")[0]["drops"])
        counted = (d.get("port_rx_tunnel_malformed", 0), d.get("port_rx_tunnel_mismatch", 0))
        if counted == (2, 2) or time.time() > deadline:
            break
        time.sleep(0.1)
    assert counted == (2, 2), d
    r = subprocess.run([fulmar_bin, "ctl", "-t", sock, "trace", "br0", "in_port=1", bytes(frame).hex()],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    want = f"tunnel: port 2 (gre-peer) sends it in IPv4/GRE key 42 (0x6558) from {SW_UNDERLAY} to {PEER_UNDERLAY}"
    assert want in r.stdout, r.stdout
    rc, _, err = sw.stop()
    assert rc == 0, err


@contextlib.contextmanager
def vxlan_port_through_ovsdb(fulmar_bin, tmp_path, key, flows):
    """A switch following an ovsdb-server of its own, made by ovs-vsctl into
    br0 (fail mode secure) with ts1 as port 1 and a VXLAN port vx0 to the
    kernel's device (options:key=KEY) as port 2, checked to show ofport 2
    and no error; FLOWS are added with `fulmar ctl` and a ping must cross.
    Yields (the Ovsdb, the ctl socket); then the switch must stop cleanly."""
    from mgmt_support import Ovsdb

    peer_device("vxlan")
    db = Ovsdb(tmp_path)
    sock = str(tmp_path / "ctl.sock")
    sw = Switch(["ip", "netns", "exec", NS_SW, fulmar_bin, "run", "--ovsdb", f"unix:{db.sock}",
                 "--ctl", sock, "--mgmt-dir", str(tmp_path)])
    try:
        db.vsctl("add-br", "br0", "--", "set-fail-mode", "br0", "secure")
        db.vsctl("add-port", "br0", "ts1", "--", "set", "Interface", "ts1", "ofport_request=1")
        db.vsctl("add-port", "br0", "vx0", "--", "set", "interface", "vx0", "type=vxlan",
                 f"options:remote_ip={PEER_UNDERLAY}", f"options:local_ip={SW_UNDERLAY}",
                 f"options:key={key}", "ofport_request=2")
        assert db.get("Interface", "vx0", "ofport") == "2"
        assert db.get("Interface", "vx0", "error") in ("[]", None), db.get("Interface", "vx0", "error")
        for flow in flows:
            r = subprocess.run([fulmar_bin, "ctl", "-t", sock, "add-flow", "br0", flow],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
        deadline = time.time() + 30
        pinged = False
        while time.time() < deadline and not pinged:
            pinged = ping_once()
        assert pinged, f"no ping across the VXLAN port (options:key={key}) made through OVSDB"
        yield db, sock
    finally:
        rc, _, err = sw.stop()
        db.stop()
    assert rc == 0, err


def test_ovs_vsctl_makes_a_vxlan_port(tunnel_net, fulmar_bin, tmp_path):
    """`ovs-vsctl add-port br0 vx0 -- set interface vx0 type=vxlan
    options:remote_ip=... options:key=42` against the ovsdb-server fulmar
    follows makes a working VXLAN port: the host pings the kernel's VXLAN
    device through it, and the row shows its ofport and no error."""
    flows = ("table=0,priority=10,in_port=1,actions=output:2", "table=0,priority=10,in_port=2,actions=output:1")
    with vxlan_port_through_ovsdb(fulmar_bin, tmp_path, KEY, flows) as (_, sock):
        ports = {p["interface"]: p["ofport"] for p in ctl_json(fulmar_bin, sock, "show")["bridges"][0]["ports"]}
        assert ports.get("vx0") == 2, ports


NS_HOST2 = f"{P}-th2"
HOST2_IP, PEER2_OVERLAY_IP = "10.77.3.1", "10.77.3.2"
HOST2_MAC = "02:00:00:00:77:03"
KEY2 = 43


@pytest.fixture
def two_hosts(tunnel_net):
    """tunnel_net and a second host (10.77.3.1) on switch port 3."""
    sh("ip", "netns", "del", NS_HOST2, check=False)
    try:
        sh("ip", "netns", "add", NS_HOST2)
        sh("ip", "netns", "exec", NS_HOST2, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        sh("ip", "-n", NS_SW, "link", "add", "ts3", "type", "veth", "peer", "name", "th2", "netns", NS_HOST2)
        sh("ip", "-n", NS_SW, "link", "set", "ts3", "up")
        sh("ip", "-n", NS_HOST2, "link", "set", "th2", "address", HOST2_MAC, "up")
        sh("ip", "-n", NS_HOST2, "addr", "add", f"{HOST2_IP}/24", "dev", "th2")
        # Host 1 also routes host 2's overlay to its own link: the ping
        # that must not get through.
        sh("ip", "-n", NS_HOST, "route", "add", "10.77.3.0/24", "dev", "th")
        yield
    finally:
        sh("ip", "netns", "del", NS_HOST2, check=False)


def peer_devices_by_key(kind):
    """Two kernel tunnel devices in the peer namespace to the same
    switch address, one per key: 42 with 10.77.1.2, 43 with 10.77.3.2.
    The peer answers ARP only on the device holding the address, so a
    frame that arrives with the wrong key gets no answer."""
    sh("ip", "netns", "exec", NS_PEER, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1")
    devs = []
    for key, ip in ((KEY, PEER_OVERLAY_IP), (KEY2, PEER2_OVERLAY_IP)):
        dev = f"k{key}"
        if kind == "vxlan":
            r = sh("ip", "-n", NS_PEER, "link", "add", dev, "type", "vxlan", "id", str(key),
                   "remote", SW_UNDERLAY, "local", PEER_UNDERLAY, "dstport", "4789", check=False)
        else:
            r = sh("ip", "-n", NS_PEER, "link", "add", dev, "type", "gretap",
                   "remote", SW_UNDERLAY, "local", PEER_UNDERLAY, "key", str(key), check=False)
        if r.returncode != 0:
            pytest.skip(f"the kernel cannot make a {kind} device: {r.stderr.strip()}")
        sh("ip", "-n", NS_PEER, "addr", "add", f"{ip}/24", "dev", dev)
        sh("ip", "-n", NS_PEER, "link", "set", dev, "up")
        devs.append(dev)
    return devs


def key_of(pkt, kind):
    return pkt[VXLAN].vni if kind == "vxlan" else pkt[GRE].key


def ping_from(ns, ip):
    r = subprocess.run(["ip", "netns", "exec", ns, "ping", "-n", "-c", "1", "-W", "1", ip],
                       capture_output=True, text=True)
    return r.returncode == 0


def key_flow_config(kind, back43):
    """One bridge with host ports 1 and 3 and a key=flow `kind` tunnel port
    2: host 1 is put on key 42 by set_field, host 3 on key 43 by
    set_tunnel; what comes back on key 42 goes to port 1, what `back43`
    matches to port 3."""
    return f"""
[[bridges]]
name = "br0"
flows = ["table=0,priority=10,in_port=1,actions=set_field:42->tunnel_id,output:2",
         "table=0,priority=10,in_port=3,actions=set_tunnel:43,output:2",
         "table=0,priority=10,tun_id=42,in_port=2,actions=output:1",
         "table=0,priority=10,{back43},in_port=2,actions=output:3"]
{ports_toml({1: "ts1", 3: "ts3"})}{tunnel_port(kind, '"flow"')}"""


@pytest.mark.parametrize("kind", ["vxlan", "gre"])
def test_key_flow_puts_each_host_on_its_own_key(two_hosts, fulmar_bin, tmp_path, kind):
    """One tunnel port with key=flow carries two keys: host 1 (port 1) is
    put on key 42 by set_field:42->tunnel_id, host 2 (port 3) on key 43
    by set_tunnel:43, and what comes back is sent on by tun_id. Each host
    pings the kernel device of its own key; every underlay packet decodes
    (scapy) with its host's key; host 1 cannot reach key 43's device."""
    peer_devices_by_key(kind)
    # Both spellings of the match field: tunnel_id and tun_id.
    text = key_flow_config(kind, "tunnel_id=43")
    sw, sock = start_switch(fulmar_bin, tmp_path, text)
    to_peer = Capture(NS_PEER, "tp", 12)
    from_peer = Capture(NS_SW, "tu", 12)
    try:
        pinged = [False, False]
        deadline = time.time() + 60
        while time.time() < deadline and not (all(pinged) and to_peer.done() and from_peer.done()):
            pinged[0] = ping_from(NS_HOST, PEER_OVERLAY_IP) or pinged[0]
            pinged[1] = ping_from(NS_HOST2, PEER2_OVERLAY_IP) or pinged[1]
        assert pinged == [True, True], "no ping across the tunnel"
        sent, received = to_peer.frames(), from_peer.frames()
    finally:
        to_peer.kill()
        from_peer.kill()
    want = {HOST_MAC: KEY, HOST2_MAC: KEY2}
    ours = [p for p in sent if is_tunnel(p, kind)]
    seen = set()
    for p in ours:
        inner = inner_of(p, kind)
        assert key_of(p, kind) == want[inner.src], p.show(dump=True)
        if kind == "gre":
            assert (p[GRE].key_present, p[GRE].proto) == (1, 0x6558)
        seen.add(inner.src)
    assert seen == set(want), [p.summary() for p in ours]
    theirs = [p for p in received if is_tunnel(p, kind)]
    seen = set()
    for p in theirs:
        inner = inner_of(p, kind)
        assert key_of(p, kind) == want[inner.dst], p.show(dump=True)
        seen.add(inner.dst)
    assert seen == set(want), [p.summary() for p in theirs]
    # Host 1's frames for key 43's address leave with key 42 and find
    # no one (the peer answers ARP only on the device with the address).
    assert not any(ping_from(NS_HOST, PEER2_OVERLAY_IP) for _ in range(3))
    r = subprocess.run([fulmar_bin, "ctl", "-t", sock, "trace", "br0", "in_port=1",
                        bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC, type=0x88B5) / (b"\x00" * 46)).hex()],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "from the packet's tunnel_id (key=flow" in r.stdout, r.stdout
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err, err


def test_gre_key_flow_against_a_scapy_peer(two_hosts, fulmar_bin, tmp_path):
    """GRE key=flow without the kernel's gretap: each host's frame leaves
    with its own key (42 by set_field, 43 by set_tunnel); scapy's GRE
    packets from the peer reach the host their key's flow names (42 ->
    host 1, 43 -> host 2), and one without a key (tunnel_id 0) neither."""
    text = key_flow_config("gre", "tun_id=43")
    sw, sock = start_switch(fulmar_bin, tmp_path, text)
    frames = {
        (NS_HOST, "th"): Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC, type=0x88B5) / (b"\x01" * 46),
        (NS_HOST2, "th2"): Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST2_MAC, type=0x88B5) / (b"\x03" * 46),
    }
    to_peer = Capture(NS_PEER, "tp", 2)
    try:
        for (ns, dev), frame in frames.items():
            r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, HELPER, "send", dev,
                                bytes(frame).hex()], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
        sent = to_peer.frames()
    finally:
        to_peer.kill()
    got = {bytes(inner_of(p, "gre")): (p[GRE].key_present, p[GRE].key, p[GRE].proto) for p in sent}
    assert got == {bytes(frames[(NS_HOST, "th")]): (1, KEY, 0x6558),
                   bytes(frames[(NS_HOST2, "th2")]): (1, KEY2, 0x6558)}, [p.summary() for p in sent]

    outer = IP(src=PEER_UNDERLAY, dst=SW_UNDERLAY)
    back = {key: Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:77:02", type=0x88B5) / (bytes([key]) * 46)
            for key in (0, KEY, KEY2)}
    h1 = Capture(NS_HOST, "th", 2, seconds=10, ethertype="88b5")
    h2 = Capture(NS_HOST2, "th2", 2, seconds=10, ethertype="88b5")
    try:
        peer_send_ip([
            outer / GRE(key_present=0, proto=0x6558) / back[0],  # tunnel_id 0: no flow
            outer / GRE(key_present=1, key=KEY2, proto=0x6558) / back[KEY2],
            outer / GRE(key_present=1, key=KEY, proto=0x6558) / back[KEY],
        ])
        # Each capture ends at its deadline with what it got (at most 2).
        got1, got2 = h1.frames(), h2.frames()
    finally:
        h1.kill()
        h2.kill()
    assert [bytes(f) for f in got1] == [bytes(back[KEY])]
    assert [bytes(f) for f in got2] == [bytes(back[KEY2])]
    ports = {p["port"]: p for p in ctl_json(fulmar_bin, sock, "stats")[0]["ports"]}
    assert ports[2]["rx_packets"] == 3, ports[2]
    rc, _, err = sw.stop()
    assert rc == 0, err


def test_ovs_vsctl_makes_a_key_flow_vxlan_port(tunnel_net, fulmar_bin, tmp_path):
    """`ovs-vsctl ... options:key=flow` makes a working key=flow port:
    the host reaches the kernel's VNI 42 device once flows put its frames
    on tunnel_id 42 and send tun_id=42 back; the row keeps key=flow (the
    switch writes it back as it was) and shows no error."""
    # Without these flows the host's frames would leave on VNI 0.
    flows = ("table=0,priority=10,in_port=1,actions=set_field:42->tunnel_id,output:2",
             "table=0,priority=10,in_port=2,tun_id=42,actions=output:1")
    with vxlan_port_through_ovsdb(fulmar_bin, tmp_path, "flow", flows) as (db, sock):
        assert db.get("Interface", "vx0", "options:key").strip('"') == "flow", db.get("Interface", "vx0", "options")
        show = ctl_json(fulmar_bin, sock, "show")
        assert "vx0" in json.dumps(show), show


# --- Open vSwitch's userspace datapath as the peer ---------------------------
#
# The kernel here may have no GRE (no ip_gre), so the independent GRE peer
# is Open vSwitch's userspace (netdev) datapath, run privately in P-tp:
#
#     ns P-tp: tp -- [br-phy, netdev, 10.77.0.2] (underlay)
#              [br-int, netdev, 10.77.1.2] -- ovs-tun (type gre/vxlan,
#                                             remote 10.77.0.1, key 42)
#
# Its ovsdb-server and ovs-vswitchd keep every file in a directory of their
# own and run in the foreground as children of the test (no --detach), so
# the fixture knows their pids and stops them, also after a failure.

OVS_TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl")
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


class PrivateOvs:
    """ovsdb-server and ovs-vswitchd (netdev datapath only) inside NS_PEER,
    with their sockets, database and logs in DIR."""

    def __init__(self, d):
        self.dir = d
        self.env = dict(os.environ, OVS_RUNDIR=d, OVS_DBDIR=d, OVS_LOGDIR=d,
                        OVS_PKGDATADIR=os.path.dirname(OVS_SCHEMA))
        self.db_sock = os.path.join(d, "db.sock")
        self.procs = []

    def spawn(self, name, *argv):
        log = open(os.path.join(self.dir, f"{name}.console"), "w")
        p = subprocess.Popen(["ip", "netns", "exec", NS_PEER, *argv], stdout=log, stderr=subprocess.STDOUT,
                             env=self.env)
        log.close()
        self.procs.append(p)
        return p

    def logs(self):
        text = []
        for name in ("ovsdb", "vswitchd"):
            # The log file, or what the daemon said before it had one.
            for path in (os.path.join(self.dir, f"{name}.log"), os.path.join(self.dir, f"{name}.console")):
                if os.path.exists(path) and os.path.getsize(path):
                    with open(path) as f:
                        text.append(f"{os.path.basename(path)}: " + "".join(f.readlines()[-8:]))
                    break
        return "\n".join(text)

    def vsctl(self, *args, wait=True):
        argv = ["ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=10"]
        if not wait:
            argv.append("--no-wait")
        return subprocess.run([*argv, *args], capture_output=True, text=True, env=self.env, timeout=20)

    def start(self):
        """Starts both daemons; returns None, or why Open vSwitch could not
        be started here."""
        conf = os.path.join(self.dir, "conf.db")
        r = subprocess.run(["ovsdb-tool", "create", conf, OVS_SCHEMA], capture_output=True, text=True,
                           env=self.env, timeout=20)
        if r.returncode != 0:
            return f"ovsdb-tool create: {r.stderr.strip()}"
        db = self.spawn("ovsdb", "ovsdb-server", conf, f"--remote=punix:{self.db_sock}",
                        f"--unixctl={self.dir}/ovsdb.ctl", f"--log-file={self.dir}/ovsdb.log")
        deadline = time.time() + 15
        while time.time() < deadline and db.poll() is None and not os.path.exists(self.db_sock):
            time.sleep(0.05)
        if not os.path.exists(self.db_sock):
            return f"ovsdb-server did not start (exit status {db.poll()})"
        r = self.vsctl("init", wait=False)
        if r.returncode != 0:
            return f"ovs-vsctl init: {r.stderr.strip()}"
        ctl = os.path.join(self.dir, "vswitchd.ctl")
        vswitchd = self.spawn("vswitchd", "ovs-vswitchd", f"unix:{self.db_sock}", "--disable-system",
                              f"--unixctl={ctl}", f"--log-file={self.dir}/vswitchd.log")
        deadline = time.time() + 15
        while time.time() < deadline and vswitchd.poll() is None and not os.path.exists(ctl):
            time.sleep(0.05)
        if vswitchd.poll() is not None:
            return f"ovs-vswitchd exited with status {vswitchd.returncode}"
        # Without --no-wait, ovs-vsctl returns once ovs-vswitchd has
        # applied the change: the daemon is up and has the bridge.
        r = self.vsctl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev")
        if r.returncode != 0:
            return f"ovs-vswitchd did not make a netdev bridge: {r.stderr.strip()}"
        return None

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def ovs_peer(tunnel_net):
    """A private Open vSwitch in the peer namespace: the underlay address
    moves from tp to the netdev bridge br-phy that holds tp, and br-int
    (10.77.1.2, the peer host) gets the tunnel port from each test."""
    missing = [t for t in OVS_TOOLS if shutil.which(t) is None]
    if missing or not os.path.exists(OVS_SCHEMA) or not os.path.exists("/dev/net/tun"):
        pytest.skip(f"Open vSwitch userspace is not usable here (missing: {missing or 'schema or /dev/net/tun'})")
    d = tempfile.mkdtemp(prefix=f"{P}-ovs.")
    ovs = PrivateOvs(d)
    try:
        why = ovs.start()
        if why:
            pytest.skip(f"cannot run Open vSwitch's userspace datapath here: {why}\n{ovs.logs()}")
        sh("ip", "-n", NS_PEER, "addr", "flush", "dev", "tp")
        for args in (("add-port", "br-phy", "tp"),
                     ("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev")):
            r = ovs.vsctl(*args)
            if r.returncode != 0:
                pytest.skip(f"ovs-vsctl {' '.join(args)}: {r.stderr.strip()}\n{ovs.logs()}")
        for dev, addr in (("br-phy", f"{PEER_UNDERLAY}/24"), ("br-int", f"{PEER_OVERLAY_IP}/24")):
            r = sh("ip", "-n", NS_PEER, "addr", "add", addr, "dev", dev, check=False)
            if r.returncode != 0:
                pytest.skip(f"Open vSwitch made no {dev} tap: {r.stderr.strip()}\n{ovs.logs()}")
            sh("ip", "-n", NS_PEER, "link", "set", dev, "up")
        yield ovs
    finally:
        ovs.stop()
        # Anything else left in the namespace (nothing, normally).
        for pid in sh("ip", "netns", "pids", NS_PEER, check=False).stdout.split():
            sh("kill", "-9", pid, check=False)
        shutil.rmtree(d, ignore_errors=True)


def ping_and_capture(ovs):
    """Pings until a reply came and both captures (the first four IPv4
    frames into each side's underlay end) are complete: what fulmar sent
    to OVS, what OVS sent to fulmar."""
    to_ovs = Capture(NS_PEER, "tp", 4, seconds=30)
    from_ovs = Capture(NS_SW, "tu", 4, seconds=30)
    try:
        pinged = False
        deadline = time.time() + 25
        while time.time() < deadline and not (pinged and to_ovs.done() and from_ovs.done()):
            pinged = ping_once() or pinged
        assert pinged, f"no ping across the tunnel to Open vSwitch\n{ovs.logs()}"
        return to_ovs.frames(), from_ovs.frames()
    finally:
        to_ovs.kill()
        from_ovs.kill()


@pytest.mark.parametrize("kind", ["gre", "vxlan"])
def test_host_pings_ovs_userspace_across_the_tunnel(ovs_peer, fulmar_bin, tmp_path, kind):
    """fulmar's tunnel port against Open vSwitch's userspace one (key 42):
    the host pings OVS's br-int address; both directions of the underlay
    decode with scapy as the tunnel with key 42 carrying the two hosts'
    frames, fulmar's exactly as scapy builds them."""
    r = ovs_peer.vsctl("add-port", "br-int", "ovs-tun", "--", "set", "interface", "ovs-tun", f"type={kind}",
                       f"options:remote_ip={SW_UNDERLAY}", f"options:key={KEY}")
    assert r.returncode == 0, r.stderr + ovs_peer.logs()
    assert ovs_peer.vsctl("get", "interface", "ovs-tun", "error").stdout.strip() in ("[]", ""), ovs_peer.logs()
    sw, sock = start_switch(fulmar_bin, tmp_path, config(kind))
    try:
        sent, received = ping_and_capture(ovs_peer)
    finally:
        rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err, err
    # fulmar -> OVS: exactly scapy's packet.
    ours = [p for p in sent if is_tunnel(p, kind)]
    assert ours, [p.summary() for p in sent]
    for p in ours:
        ip = p[IP]
        inner = inner_of(p, kind)
        assert inner.src == HOST_MAC
        assert bytes(ip) == bytes(expected_outer(kind, ip, inner)), ip.show(dump=True)
    # OVS -> fulmar: decoded by scapy as the tunnel OVS was told to make.
    theirs = [p for p in received if is_tunnel(p, kind)]
    assert theirs, [p.summary() for p in received]
    for p in theirs:
        ip = p[IP]
        assert (ip.src, ip.dst, ip.proto) == (PEER_UNDERLAY, SW_UNDERLAY, 17 if kind == "vxlan" else 47)
        # The IPv4 header checksum OVS wrote is the one scapy computes.
        redone = IP(bytes(ip))
        del redone.chksum
        assert IP(bytes(redone)).chksum == ip.chksum
        if kind == "vxlan":
            assert ip[UDP].dport == 4789 and ip[VXLAN].vni == KEY and ip[VXLAN].flags & 0x08
        else:
            g = ip[GRE]
            assert (g.key_present, g.key, g.proto, g.chksum_present, g.seqnum_present) == (1, KEY, 0x6558, 0, 0)
        assert inner_of(p, kind).dst == HOST_MAC
    inners = [inner_of(p, kind) for p in theirs]
    assert any((ARP in f and f[ARP].op == 2) or (ICMP in f and f[ICMP].type == 0) for f in inners), \
        [f.summary() for f in inners]
