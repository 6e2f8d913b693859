"""End-to-end: fulmar managed through OVSDB, with the real `ovsdb-server`
(holding Open vSwitch's vswitch.ovsschema) and the real `ovs-vsctl`, in
network namespaces, as root.

Topology: the `net` fixture's hosts A (10.9.0.1) and B (10.9.0.2) behind
SW_A and SW_B, which `ovs-vsctl add-port` puts on bridge br0 as ports 1
and 2. ovsdb-server runs as a child of the test in its temporary
directory; fulmar runs with `--ovsdb unix:SOCK`.
"""

import json
import re
import subprocess
import time

import pytest

from e2e_support import MAC_A, MAC_B, NS_A, P, PORTS_TOML, SW_A, SW_B, Controller, in_ns, sh, spare_veth, switch_starter, wait_for
from mgmt_support import ctl, need

SW_X = f"{P}-ox"  # a third link, added with `fulmar ctl`
MISSING = f"{P}-nope"  # an interface that does not exist


@pytest.fixture
def link_x(net):
    with spare_veth(SW_X):
        yield


@pytest.fixture
def fulmar(fulmar_bin, tmp_path, ovsdb):
    yield from switch_starter(lambda *extra: [fulmar_bin, "run", "--ovsdb", f"unix:{ovsdb.sock}", "--ovsdb-stats-interval", "1",
                                              "--ctl", str(tmp_path / "ctl.sock"), "--mgmt-dir", str(tmp_path), *extra])


def switch_ports(fulmar_bin, tmp_path, bridge="br0"):
    show = json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))
    b = next((b for b in show["bridges"] if b["name"] == bridge), None)
    return {p["interface"]: p["ofport"] for p in b["ports"]} if b else None


def ping(count=3):
    return in_ns(NS_A, "ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2", "10.9.0.2")


def test_ovs_vsctl_configures_the_switch_and_sees_it_live(net, link_x, ovsdb, fulmar, fulmar_bin, tmp_path):
    """add-br, two add-ports, set-controller, set-fail-mode, flows over the
    management socket, a ping; show and list interface carry the live
    state; a missing interface fails alone; fulmar ctl's changes show in
    the database; del-port."""
    need("ping", "ovs-ofctl")
    sw = fulmar()
    taken = sh("ip", "link", "show", "br0", check=False).returncode == 0
    ovsdb.vsctl("add-br", "br0")
    # add-br's internal interface is the bridge's local port, a TAP named
    # br0 (test_localport.py tests it); where this machine has a br0
    # already, the bridge runs without it and its row says why.
    if taken:
        wait_for(lambda: "could not be made" in (ovsdb.get("Interface", "br0", "error") or ""), 5, "why")
    else:
        wait_for(lambda: ovsdb.get("Interface", "br0", "ofport") == "65534", 5, "br0's ofport 65534")
    for iface, n in ((SW_A, 1), (SW_B, 2)):
        r = ovsdb.vsctl("add-port", "br0", iface, "--", "set", "Interface", iface, f"ofport_request={n}")
        assert "Error" not in r.stderr, r.stderr
        assert ovsdb.get("Interface", iface, "ofport") == str(n)
    assert switch_ports(fulmar_bin, tmp_path) == {SW_A: 1, SW_B: 2}
    assert re.fullmatch(r'"[0-9a-f]{16}"', ovsdb.get("Bridge", "br0", "datapath_id"))

    c = Controller()
    ovsdb.vsctl("set-controller", "br0", f"tcp:127.0.0.1:{c.port}")
    assert c.connected.wait(10), "fulmar did not connect to the controller"
    wait_for(lambda: ovsdb.get("Controller", "br0", "is_connected") == "true", 5, "is_connected true")
    ovsdb.vsctl("set-fail-mode", "br0", "secure")
    assert json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))["bridges"][0]["fail_mode"] == "secure"

    mgmt = f"unix:{tmp_path}/br0.mgmt"
    for flow in ("in_port=1,actions=output:2", "in_port=2,actions=output:1"):
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", mgmt, flow],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    r = ping()
    assert r.returncode == 0, r.stdout + r.stderr

    show = ovsdb.vsctl("show").stdout
    for text in ("Bridge br0", f"Port {SW_A}", f"Interface {SW_B}", "is_connected: true", "fail_mode: secure"):
        assert text in show, show
    listing = ovsdb.vsctl("list", "Interface", SW_A).stdout
    assert re.search(r"ofport\s+: 1\n", listing), listing
    assert re.search(r"link_state\s+: up\n", listing), listing
    assert re.search(r"admin_state\s+: up\n", listing), listing
    before = wait_for(lambda: ovsdb.stats(SW_A).get("rx_packets", 0) >= 3 and ovsdb.stats(SW_A), 5, "statistics")
    assert ping().returncode == 0
    wait_for(lambda: ovsdb.stats(SW_A).get("rx_packets", 0) >= before["rx_packets"] + 3
             and ovsdb.stats(SW_A)["tx_bytes"] > before["tx_bytes"], 5, "statistics growing with traffic")

    # A missing interface: the error is in its row, the rest still works.
    ovsdb.vsctl("add-port", "br0", MISSING)
    assert ovsdb.get("Interface", MISSING, "ofport") == "-1"
    assert "No such device" in ovsdb.get("Interface", MISSING, "error")
    assert ping().returncode == 0
    ovsdb.vsctl("del-port", "br0", MISSING)

    # fulmar ctl add-port shows in the database; ovs-vsctl del-port removes it.
    ctl(fulmar_bin, tmp_path, "add-port", "br0", SW_X)
    wait_for(lambda: SW_X in ovsdb.vsctl("list-ports", "br0").stdout.split(), 5, "ctl's port in list-ports")
    wait_for(lambda: ovsdb.get("Interface", SW_X, "link_state") == "up", 5, "ctl's port's link state")
    ovsdb.vsctl("del-port", "br0", SW_X)
    assert SW_X not in switch_ports(fulmar_bin, tmp_path)
    # ... and a ctl change is not bounced back: still gone a moment later.
    time.sleep(0.5)
    assert SW_X not in ovsdb.vsctl("list-ports", "br0").stdout.split()

    # Link state follows the link.
    sh("ip", "link", "set", SW_B, "down")
    wait_for(lambda: ovsdb.get("Interface", SW_B, "link_state") == "down", 5, "link_state down")
    sh("ip", "link", "set", SW_B, "up")

    ovsdb.vsctl("del-port", "br0", SW_B)
    assert switch_ports(fulmar_bin, tmp_path) == {SW_A: 1}
    assert ping(1).returncode != 0

    ovsdb.vsctl("del-br", "br0")
    assert switch_ports(fulmar_bin, tmp_path) is None
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err


def first_ping():
    """One ping, the first frame the hosts send each other (neighbours
    forgotten, so it starts with ARP): no warm-up, no retry."""
    sh("ip", "-n", NS_A, "neigh", "flush", "all")
    return in_ns(NS_A, "ping", "-n", "-q", "-c", "1", "-W", "3", "10.9.0.2")


@pytest.mark.parametrize("controller", [None, "tcp:127.0.0.1:9"], ids=["no-controller", "unreachable"])
def test_a_bridge_made_by_ovs_vsctl_forwards_the_first_ping(net, ovsdb, fulmar, fulmar_bin, tmp_path, controller):
    """add-br and two add-ports, as every Open vSwitch tutorial starts: the
    first ping gets through with no controller and no fail mode set
    (standalone, as in Open vSwitch), and with fail mode standalone and a
    controller that cannot be reached.
    Without a controller the flow tables stay in force (a table miss goes
    to NORMAL), so a flow added beside it takes precedence; NORMAL's
    learnt addresses are listed by fdb-show (and ovs-appctl fdb/show)."""
    need("ping")
    sw = fulmar()
    args = ["add-br", "br0", "--", "add-port", "br0", SW_A, "--", "add-port", "br0", SW_B]
    if controller:
        args += ["--", "set-controller", "br0", controller, "--", "set-fail-mode", "br0", "standalone"]
    ovsdb.vsctl(*args)
    assert json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))["bridges"][0]["fail_mode"] == "standalone"
    r = first_ping()
    assert r.returncode == 0, r.stdout + r.stderr
    fdb = json.loads(ctl(fulmar_bin, tmp_path, "fdb-show", "br0", "--json"))
    learnt = {(e["mac"], e["port"]) for e in fdb["entries"]}
    assert {(MAC_A, 1), (MAC_B, 2)} <= learnt, fdb
    text = ctl(fulmar_bin, tmp_path, "fdb/show", "br0")
    assert re.search(rf"^\s+1\s+0\s+{MAC_A}\s+\d+$", text, re.M), text
    if controller is None:
        # The tables are in force: a drop flow beside the NORMAL miss wins.
        mgmt = f"unix:{tmp_path}/br0.mgmt"
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", mgmt, "priority=10,icmp,actions=drop"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert first_ping().returncode != 0
    # Fail mode secure: misses are dropped again.
    ovsdb.vsctl("set-fail-mode", "br0", "secure")
    if controller is None:
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", f"unix:{tmp_path}/br0.mgmt"],
                       capture_output=True, text=True, timeout=30, check=True)
    assert first_ping().returncode != 0
    rc, _, err = sw.stop()
    assert rc == 0, err


def test_port_vlan_settings_through_ovsdb(net, ovsdb, fulmar, fulmar_bin, tmp_path):
    """tag, trunks and vlan_mode set with ovs-vsctl reach the switch (and
    a fulmar ctl change reaches the database); settings that do not go
    together refuse the port with the reason; two access ports of
    different VLANs do not talk, of the same VLAN they do."""
    need("ping")
    sw = fulmar()
    ovsdb.vsctl("add-br", "br0", "--", "add-port", "br0", SW_A, "tag=10", "--", "add-port", "br0", SW_B, "tag=20")

    def vlan(iface):
        show = json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))
        return next(p for p in show["bridges"][0]["ports"] if p["interface"] == iface).get("vlan")

    wait_for(lambda: vlan(SW_A) == {"tag": 10}, 5, "tag 10 in the switch")
    assert first_ping().returncode != 0, "VLAN 10 and VLAN 20 must not talk"
    ovsdb.vsctl("set", "Port", SW_B, "tag=10")
    wait_for(lambda: vlan(SW_B) == {"tag": 10}, 5, "tag 10 on the second port")
    r = first_ping()
    assert r.returncode == 0, r.stdout + r.stderr
    # A trunk with a native VLAN, written by fulmar ctl, shows in the database.
    ctl(fulmar_bin, tmp_path, "set", "port", SW_B, "vlan_mode=native-untagged", "trunks=10,30")
    wait_for(lambda: ovsdb.get("Port", SW_B, "vlan_mode") == "native-untagged", 5, "vlan_mode in the database")
    assert ovsdb.get("Port", SW_B, "trunks") == "[10, 30]"
    assert first_ping().returncode == 0
    # native-tagged without a tag does not go together: refused, with why.
    ovsdb.vsctl("clear", "Port", SW_B, "tag", "--", "set", "Port", SW_B, "vlan_mode=native-tagged")
    wait_for(lambda: "needs a tag" in ovsdb.get("Interface", SW_B, "error"), 5, "the refusal in the row")
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err


def test_reconnects_when_ovsdb_server_restarts(net, ovsdb, fulmar, fulmar_bin, tmp_path):
    """ovsdb-server goes away and comes back on the same database: fulmar
    reconnects, writes the lost ephemeral columns again, and follows new
    changes."""
    sw = fulmar()
    ovsdb.vsctl("add-br", "br0", "--", "add-port", "br0", SW_A)
    assert ovsdb.get("Interface", SW_A, "link_state") == "up"
    ovsdb.stop()
    time.sleep(1)
    assert sw.proc.poll() is None
    assert switch_ports(fulmar_bin, tmp_path) == {SW_A: 1}
    ovsdb.start()
    wait_for(lambda: ovsdb.get("Interface", SW_A, "link_state") == "up", 10, "link_state written again")
    ovsdb.vsctl("add-port", "br0", SW_B)
    assert switch_ports(fulmar_bin, tmp_path) == {SW_A: 1, SW_B: 2}
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "reconnecting" in err or "lost" in err


def test_config_bridges_are_written_into_an_empty_database(net, ovsdb, fulmar, fulmar_bin, tmp_path):
    """A --config switch on an empty database: the database gets its root
    row and the switch's bridge, ports and settings; ovs-vsctl then
    changes them."""
    cfg = tmp_path / "switch.toml"
    cfg.write_text(f"""
[[bridges]]
name = "br0"
dpid = "0x2a"
fail_mode = "secure"
{PORTS_TOML}""")
    fulmar("--config", str(cfg))
    wait_for(lambda: ovsdb.vsctl("--no-wait", "list-ports", "br0", ok=False).stdout.split() == sorted([SW_A, SW_B]),
             5, "the config's ports in the database")
    assert ovsdb.get("Bridge", "br0", "fail_mode") == "secure"
    assert ovsdb.get("Bridge", "br0", "datapath_id") == '"000000000000002a"'
    assert ovsdb.get("Interface", SW_B, "ofport") == "2"
    ovsdb.vsctl("set-fail-mode", "br0", "standalone")
    assert json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))["bridges"][0]["fail_mode"] == "standalone"

    # fulmar ctl's bridge and controller changes show in the database too.
    ctl(fulmar_bin, tmp_path, "add-br", "br1")
    ctl(fulmar_bin, tmp_path, "set-controller", "br1", "ptcp:0:127.0.0.1")
    wait_for(lambda: ovsdb.vsctl("--no-wait", "list-br").stdout.split() == ["br0", "br1"], 5, "br1 in the database")
    wait_for(lambda: ovsdb.get("Bridge", "br1", "controller") not in (None, "[]"), 5, "br1's controller row")
    assert ovsdb.vsctl("--no-wait", "get-controller", "br1").stdout.strip() == "ptcp:0:127.0.0.1"
    ctl(fulmar_bin, tmp_path, "del-br", "br1")
    wait_for(lambda: ovsdb.vsctl("--no-wait", "list-br").stdout.split() == ["br0"], 5, "br1 gone from the database")
