"""End-to-end: the bridge-local port (OFPP_LOCAL), as root, in network
namespaces.

fulmar runs in a namespace of its own (NS_SW), so that the TAP interface
named after the bridge is made there and never meets a `br0` of the
machine. Topology:

    ns NS_SW: br0 (TAP, 10.77.9.1) = [LOCAL] fulmar [port 1] VS == VH (10.77.9.2) :ns NS_H

The bridge comes from `ovs-vsctl add-br` (a private ovsdb-server holding
Open vSwitch's schema) or from `fulmar run -i ... --local-port`.
"""

import json
import re
import subprocess

import pytest

from e2e_support import P, in_ns, sh, switch_starter, wait_for
from mgmt_support import ctl, need

NS_SW, NS_H = f"{P}-lsw", f"{P}-lh"
VS, VH = f"{P}-ls", f"{P}-lh"
HOST_IP, BRIDGE_IP = "10.77.9.2", "10.77.9.1"


def cleanup():
    for ns in (NS_SW, NS_H):
        sh("ip", "netns", "del", ns, check=False)


@pytest.fixture
def lnet(fulmar_bin):
    cleanup()
    try:
        for ns in (NS_SW, NS_H):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            # Quiet links: no IPv6 autoconfiguration noise.
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", check=False)
        sh("ip", "-n", NS_SW, "link", "add", VS, "type", "veth", "peer", "name", VH, "netns", NS_H)
        sh("ip", "-n", NS_SW, "link", "set", VS, "up")
        sh("ip", "-n", NS_H, "link", "set", VH, "up")
        sh("ip", "-n", NS_H, "addr", "add", f"{HOST_IP}/24", "dev", VH)
        yield
    finally:
        cleanup()


@pytest.fixture
def fulmar(fulmar_bin, tmp_path):
    yield from switch_starter(lambda *args: ["ip", "netns", "exec", NS_SW, fulmar_bin, "run",
                                             "--ctl", str(tmp_path / "ctl.sock"), "--mgmt-dir", str(tmp_path), *args])


def tap_exists(name="br0"):
    return sh("ip", "-n", NS_SW, "-d", "link", "show", name, check=False)


def ofctl(tmp_path, *args):
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args[:1], f"unix:{tmp_path}/br0.mgmt", *args[1:]],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"ovs-ofctl {' '.join(args)}: {r.stderr}"
    return r.stdout


def ping(count=3):
    return in_ns(NS_SW, "ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2", HOST_IP)


def bridge_show(fulmar_bin, tmp_path, name="br0"):
    show = json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))
    return next((b for b in show["bridges"] if b["name"] == name), None)


def test_add_br_makes_the_local_port_and_the_host_pings_through_it(lnet, ovsdb, fulmar, fulmar_bin, tmp_path):
    """ovs-vsctl add-br: the TAP br0 exists, shows as OFPP_LOCAL in
    PORT_DESC, ctl show and OVSDB (ofport 65534); the host on br0 pings the
    port's host through NORMAL at once, and in fail mode secure through
    flows between LOCAL and port 1; del-br removes the TAP."""
    need("ping", "ovs-ofctl")
    sw = fulmar("--ovsdb", f"unix:{ovsdb.sock}", "--ovsdb-stats-interval", "1")
    ovsdb.vsctl("add-br", "br0", "--", "add-port", "br0", VS, "--", "set", "Interface", VS, "ofport_request=1")
    r = tap_exists()
    assert r.returncode == 0 and "tun type tap" in r.stdout, r.stdout + r.stderr
    wait_for(lambda: ovsdb.get("Interface", "br0", "ofport") == "65534", 5, "br0's ofport 65534 in OVSDB")
    assert ovsdb.get("Interface", "br0", "type") == "internal"
    assert ovsdb.get("Interface", "br0", "error") == "[]"

    desc = ofctl(tmp_path, "dump-ports-desc")
    assert re.search(r"LOCAL\(br0\):", desc), desc
    b = bridge_show(fulmar_bin, tmp_path)
    assert b["local_port"]["ofport"] == 0xFFFFFFFE and b["local_port"]["type"] == "internal", b
    assert [p["interface"] for p in b["ports"]] == [VS]
    text = ctl(fulmar_bin, tmp_path, "show")
    assert re.search(r"Port br0\n\s+ofport: LOCAL\n\s+Interface br0\n\s+type: internal", text), text

    # As ovs-vsctl leaves it (standalone, no controller), NORMAL switches
    # between the host on br0 and the port's host at once.
    sh("ip", "-n", NS_SW, "addr", "add", f"{BRIDGE_IP}/24", "dev", "br0")
    sh("ip", "-n", NS_SW, "link", "set", "br0", "up")
    r = ping()
    assert r.returncode == 0, r.stdout + r.stderr
    # Fail mode secure and no flows: nothing forwards.
    ovsdb.vsctl("set-fail-mode", "br0", "secure")
    sh("ip", "-n", NS_SW, "neigh", "flush", "dev", "br0")
    assert ping(1).returncode != 0
    ofctl(tmp_path, "add-flow", "in_port=LOCAL,actions=output:1")
    ofctl(tmp_path, "add-flow", "in_port=1,actions=LOCAL")
    # The failed ARP above is not remembered against the next ping.
    sh("ip", "-n", NS_SW, "neigh", "flush", "dev", "br0")
    r = ping()
    assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr

    # Counted on both sides, in OpenFlow and in OVSDB.
    stats = ofctl(tmp_path, "dump-ports", "LOCAL")
    m = re.search(r"port LOCAL: rx pkts=(\d+).*?\n\s+tx pkts=(\d+)", stats, re.S)
    assert m and int(m.group(1)) >= 3 and int(m.group(2)) >= 3, stats
    wait_for(lambda: ovsdb.get("Interface", "br0", "link_state") == "up", 10, "br0 link_state up")
    wait_for(lambda: ovsdb.stats("br0").get("rx_packets", 0) >= 3, 10, "br0 statistics in OVSDB")

    # Without the return flow the replies stop at the bridge.
    ofctl(tmp_path, "del-flows", "in_port=1")
    assert ping(1).returncode != 0

    ovsdb.vsctl("del-br", "br0")
    assert bridge_show(fulmar_bin, tmp_path) is None
    wait_for(lambda: tap_exists().returncode != 0, 10, "the TAP br0 removed with its bridge")

    # A bridge made with fulmar ctl is written into the database with its
    # internal interface, as ovs-vsctl add-br would have made it.
    ctl(fulmar_bin, tmp_path, "add-br", "br1")
    wait_for(lambda: ovsdb.get("Interface", "br1", "ofport") == "65534", 10, "br1's local port in OVSDB")
    assert ovsdb.get("Interface", "br1", "type") == "internal"
    assert re.search(r"Port br1\n\s+Interface br1\n\s+type: internal", ovsdb.vsctl("show").stdout)
    ovsdb.vsctl("del-br", "br1")
    wait_for(lambda: tap_exists("br1").returncode != 0, 10, "the TAP br1 removed with its bridge")
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err


def test_a_taken_name_leaves_the_bridge_running_without_it(lnet, ovsdb, fulmar, fulmar_bin, tmp_path):
    """br0 exists already and is no TAP: add-br still makes the bridge,
    its ports work, and the log, ctl show and OVSDB say why there is no
    local port."""
    sh("ip", "-n", NS_SW, "link", "add", "br0", "type", "veth", "peer", "name", "br0p")
    sw = fulmar("--ovsdb", f"unix:{ovsdb.sock}")
    ovsdb.vsctl("add-br", "br0", "--", "add-port", "br0", VS, "--", "set", "Interface", VS, "ofport_request=1")
    assert ovsdb.get("Interface", VS, "ofport") == "1"
    b = bridge_show(fulmar_bin, tmp_path)
    assert "local_port" not in b, b
    assert "could not be made" in b["local_port_error"], b
    assert "local_port: none: the local port" in ctl(fulmar_bin, tmp_path, "show")
    wait_for(lambda: "could not be made" in (ovsdb.get("Interface", "br0", "error") or ""), 5,
             "why in br0's error")
    assert ovsdb.get("Interface", "br0", "ofport") == "-1"
    # The dummy interface is left alone, also when the bridge goes.
    ovsdb.vsctl("del-br", "br0")
    assert tap_exists().returncode == 0
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "could not be made" in err


def test_flag_bridges_have_it_only_when_asked(lnet, fulmar, fulmar_bin, tmp_path):
    """`fulmar run -i IF` makes no TAP; with --local-port it does, and the
    pipeline sends to it; `fulmar ctl add-br` makes one, del-br removes
    it."""
    need("ping")
    sw = fulmar("-i", VS)
    assert tap_exists().returncode != 0
    assert "local_port" not in bridge_show(fulmar_bin, tmp_path)
    rc, _, err = sw.stop()
    assert rc == 0, err

    flows = tmp_path / "flows"
    flows.write_text("in_port=LOCAL,actions=output:1\nin_port=1,actions=LOCAL\n")
    sw = fulmar("-i", VS, "--local-port", "--flows", str(flows))
    r = tap_exists()
    assert r.returncode == 0 and "tun type tap" in r.stdout, r.stdout + r.stderr
    sh("ip", "-n", NS_SW, "addr", "add", f"{BRIDGE_IP}/24", "dev", "br0")
    sh("ip", "-n", NS_SW, "link", "set", "br0", "up")
    r = ping()
    assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr
    # fulmar ctl add-br makes one too; del-br removes it.
    ctl(fulmar_bin, tmp_path, "add-br", "br1")
    assert "tun type tap" in tap_exists("br1").stdout
    assert bridge_show(fulmar_bin, tmp_path, "br1")["local_port"]["interface"] == "br1"
    ctl(fulmar_bin, tmp_path, "del-br", "br1")
    wait_for(lambda: tap_exists("br1").returncode != 0, 10, "the TAP br1 removed with its bridge")
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert tap_exists().returncode != 0, "the TAP outlived the switch"
