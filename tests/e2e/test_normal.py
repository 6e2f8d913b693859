"""End-to-end: NORMAL, the switch's own VLAN-aware learning bridge, over
real veths and namespaces, as root.

- beside OpenFlow flows: `priority=10,ip,nw_dst=...,actions=drop` and
  `priority=0,actions=NORMAL`: the dropped address is dropped, the rest is
  switched and learnt (fdb-show lists the hosts);
- VLAN access ports of VLAN 10 and 20 on two bridges joined by a trunk
  (a veth pair between them): hosts ping within their VLAN, across the
  trunk, and never across VLANs; a port's VLAN changed live with
  `fulmar ctl set port` moves its host.
"""

import json
import shutil

import pytest

from e2e_support import MAC_A, MAC_B, NS_A, NS_B, P, SW_A, SW_B, Switch, in_ns, sh, wait_for
from mgmt_support import ctl


def need_ping():
    if shutil.which("ping") is None:
        pytest.skip("no ping binary")


def ping(ns, dst, count=1):
    sh("ip", "-n", ns, "neigh", "flush", "all", check=False)
    return in_ns(ns, "ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2", dst)


def test_normal_beside_a_drop_flow_switches_and_learns(net, fulmar_bin, tmp_path):
    need_ping()
    sh("ip", "-n", NS_B, "addr", "add", "10.9.0.9/24", "dev", "vb")
    flows = tmp_path / "flows"
    flows.write_text("priority=10,ip,nw_dst=10.9.0.9,actions=drop\npriority=0,actions=NORMAL\n")
    sw = Switch([fulmar_bin, "run", "-i", SW_A, "-i", SW_B, "--flows", str(flows),
                 "--ctl", str(tmp_path / "ctl.sock")])
    try:
        r = ping(NS_A, "10.9.0.2", 3)
        assert r.returncode == 0, r.stdout + r.stderr
        r = ping(NS_A, "10.9.0.9", 2)
        assert r.returncode != 0, "the drop flow must win over NORMAL"
        fdb = json.loads(ctl(fulmar_bin, tmp_path, "fdb-show", "br0", "--json"))
        learnt = {(e["mac"], e["port"], e["vlan"]) for e in fdb["entries"]}
        assert {(MAC_A, 1, 0), (MAC_B, 2, 0)} <= learnt, fdb
        assert fdb["capacity"] >= 8192 and fdb["aging_secs"] == 300, fdb
        # A trace shows NORMAL's choice and teaches the switch nothing.
        # Compared without the ages, which tick while the test runs.
        def fdb_entries():
            fdb = json.loads(ctl(fulmar_bin, tmp_path, "fdb-show", "br0", "--json"))
            return sorted((e["mac"], e["port"], e["vlan"]) for e in fdb["entries"])

        before = fdb_entries()
        # From a source address nobody has sent from: learning it would
        # add an entry.
        frame = "02000000ffff" + "020000000e77" + "0806" + "00" * 46
        t = ctl(fulmar_bin, tmp_path, "trace", "br0", "in_port=1", frame)
        assert "output" in t.lower(), t
        assert fdb_entries() == before
    finally:
        rc, out, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err


# Two bridges, each with an access port of VLAN 10 and one of VLAN 20,
# joined by a trunk: a veth pair between their third ports.
HOSTS = [(f"{P}-h{i}", f"{P}-v{i}", f"10.9.7.{i}") for i in range(1, 5)]
TRUNK = (f"{P}-t1", f"{P}-t2")


def vlan_cleanup():
    for ns, link, _ in HOSTS:
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", link, check=False)
    sh("ip", "link", "del", TRUNK[0], check=False)


@pytest.fixture
def vlan_net(fulmar_bin):
    vlan_cleanup()
    try:
        for i, (ns, link, addr) in enumerate(HOSTS, start=1):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", link, "up")
            sh("ip", "-n", ns, "link", "set", "eth0", "address", f"02:00:00:00:07:0{i}", "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            sh("sysctl", "-qw", f"net.ipv6.conf.{link}.disable_ipv6=1", check=False)
        sh("ip", "link", "add", TRUNK[0], "type", "veth", "peer", "name", TRUNK[1])
        for t in TRUNK:
            sh("ip", "link", "set", t, "up")
            sh("sysctl", "-qw", f"net.ipv6.conf.{t}.disable_ipv6=1", check=False)
        yield
    finally:
        vlan_cleanup()


def test_access_ports_and_a_trunk_keep_vlans_apart(vlan_net, fulmar_bin, tmp_path):
    need_ping()
    (h1, v1, _), (h2, v2, a2), (h3, v3, a3), (h4, v4, a4) = HOSTS
    cfg = tmp_path / "vlans.toml"
    bridge = """
[[bridges]]
name = "{name}"
flows = ["priority=0,actions=NORMAL"]
[[bridges.ports]]
port = 1
interface = "{a}"
tag = 10
[[bridges.ports]]
port = 2
interface = "{b}"
tag = 20
[[bridges.ports]]
port = 3
interface = "{t}"
{trunk}
"""
    cfg.write_text(bridge.format(name="vb1", a=v1, b=v2, t=TRUNK[0], trunk="trunks = [10, 20]")
                   + bridge.format(name="vb2", a=v3, b=v4, t=TRUNK[1], trunk=""))
    sw = Switch([fulmar_bin, "run", "--config", str(cfg), "--ctl", str(tmp_path / "ctl.sock")])
    try:
        # Within a VLAN, across the trunk.
        for src, dst in ((h1, a3), (h2, a4), (h3, "10.9.7.1"), (h4, a2)):
            r = ping(src, dst)
            assert r.returncode == 0, f"{src} -> {dst}: {r.stdout}{r.stderr}"
        # Never across VLANs (the same subnet: only the switch keeps them apart).
        for src, dst in ((h1, a4), (h1, a2), (h2, a3), (h4, "10.9.7.1")):
            assert ping(src, dst).returncode != 0, f"{src} -> {dst} crossed VLANs"
        # vb2 learnt h1 in VLAN 10 behind the trunk: the trunk carried the tag.
        fdb = json.loads(ctl(fulmar_bin, tmp_path, "fdb-show", "vb2", "--json"))
        learnt = {(e["mac"], e["vlan"], e["port"]) for e in fdb["entries"]}
        assert ("02:00:00:00:07:01", 10, 3) in learnt, fdb
        assert ("02:00:00:00:07:02", 20, 3) in learnt, fdb
        # h4's port moves to VLAN 10, live: now it reaches h1 and not h2.
        ctl(fulmar_bin, tmp_path, "set", "port", v4, "tag=10")
        show = json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))
        port = next(p for b in show["bridges"] for p in b["ports"] if p["interface"] == v4)
        assert port["vlan"] == {"tag": 10}, port
        r = ping(h4, "10.9.7.1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert ping(h4, a2).returncode != 0
    finally:
        rc, out, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err
