"""End-to-end: one `fulmar run` with every management module at once
(OVSDB through the real ovsdb-server and ovs-vsctl, SNMP through the real
snmpd, OF-CONFIG through ncclient, and `fulmar ctl`), showing that each is
a client of the one datastore: a change made through any of them is seen
through all the others, and the counters each reports agree.

Topology: the `net` fixture's hosts A (10.9.0.1) and B (10.9.0.2) behind
SW_A and SW_B, plus a spare veth SW_M; the bridge is made by ovs-vsctl.
"""

import json
import re
import subprocess

import pytest

from e2e_support import NS_A, P, SW_A, SW_B, Controller, Switch, in_ns, spare_veth, wait_for
from mgmt_support import (Ovsdb, Snmpd, TrapSink, ctl, edit, free_port, get_config, need, netconf_args,
                          netconf_connect, netconf_keys, texts)

pytest.importorskip("ncclient")

SW_M = f"{P}-mx"  # a third port, added and removed through the modules
IF_NAME = "1.3.6.1.2.1.31.1.1.1.1"  # ifXTable ifName
IF_HC_IN_OCTETS = "1.3.6.1.2.1.31.1.1.1.6"


@pytest.fixture
def link_m(net):
    with spare_veth(SW_M):
        yield


@pytest.fixture
def managed(net, link_m, fulmar_bin, tmp_path):
    """(ovsdb, snmpd, ncclient session, switch) around one fulmar."""
    need("ovsdb-server", "ovs-vsctl", "ovs-ofctl", "snmpd", "snmpwalk", "ping")
    (tmp_path / "db").mkdir()
    (tmp_path / "snmp").mkdir()
    traps = TrapSink()
    ovsdb = snmpd = sw = m = None
    try:
        ovsdb = Ovsdb(tmp_path / "db")
        snmpd = Snmpd(tmp_path / "snmp", traps.port)
        netconf_keys(tmp_path)
        port = free_port()
        sw = Switch([fulmar_bin, "run", "--ovsdb", f"unix:{ovsdb.sock}", "--ovsdb-stats-interval", "1",
                     "--agentx", snmpd.sock, *netconf_args(port, tmp_path),
                     "--ctl", str(tmp_path / "ctl.sock"), "--mgmt-dir", str(tmp_path)])
        m = netconf_connect(port, tmp_path)
        yield ovsdb, snmpd, m, sw
    finally:
        if m is not None and m.connected:
            m.close_session()
        if sw and sw.proc.poll() is None:
            rc, _, err = sw.stop()
            assert rc == 0 and "panicked" not in err, err
        for d in (snmpd, ovsdb):
            if d:
                d.stop()
        traps.close()


def if_names(snmpd):
    """{ifIndex: ifName} as snmpwalk sees them."""
    return {int(oid.rsplit(".", 1)[1]): name for oid, name in snmpd.values("snmpwalk", IF_NAME).items()}


def show(fulmar_bin, tmp_path):
    """{bridge: {interface: ofport}}, fail modes and controllers, from `fulmar ctl show --json`."""
    out = json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))
    return {b["name"]: {p["interface"]: p["ofport"] for p in b["ports"]} for b in out["bridges"]}, out


def everywhere(ovsdb, snmpd, m, fulmar_bin, tmp_path, port, present):
    """Waits until `port` is (or is not) on br0 in all four views."""
    views = {
        "ovs-vsctl list-ports": lambda: port in ovsdb.vsctl("list-ports", "br0").stdout.split(),
        "fulmar ctl show": lambda: port in show(fulmar_bin, tmp_path)[0].get("br0", {}),
        "SNMP ifName": lambda: port in if_names(snmpd).values(),
        "OF-CONFIG resource-id": lambda: port in texts(get_config(m), "resource-id"),
    }
    for what, seen in views.items():
        wait_for(lambda: seen() == present, 10, f"{port} {'in' if present else 'gone from'} {what}")


def test_a_change_through_any_module_shows_in_all(managed, fulmar_bin, tmp_path):
    ovsdb, snmpd, m, _ = managed

    # OVSDB makes the bridge and its ports: ctl, SNMP and OF-CONFIG see them.
    ovsdb.vsctl("add-br", "br0", "--", "add-port", "br0", SW_A, "--", "set", "Interface", SW_A, "ofport_request=1",
                "--", "add-port", "br0", SW_B, "--", "set", "Interface", SW_B, "ofport_request=2")
    assert show(fulmar_bin, tmp_path)[0] == {"br0": {SW_A: 1, SW_B: 2}}
    for p in (SW_A, SW_B):
        everywhere(ovsdb, snmpd, m, fulmar_bin, tmp_path, p, True)
    assert "br0" in texts(get_config(m), "id")

    # OF-CONFIG sets a controller: the switch connects, OVSDB and ctl show it.
    c = Controller()
    target = f"tcp:127.0.0.1:{c.port}"
    edit(m, f"""<logical-switches><switch><id>br0</id><controllers><controller>
<id>c1</id><ip-address>127.0.0.1</ip-address><port>{c.port}</port><protocol>tcp</protocol>
</controller></controllers></switch></logical-switches>""")
    assert c.connected.wait(10), "the switch did not connect to the controller"
    wait_for(lambda: ovsdb.vsctl("get-controller", "br0").stdout.split() == [target], 10,
             "OF-CONFIG's controller in OVSDB")
    wait_for(lambda: ovsdb.get("Controller", "br0", "is_connected") == "true", 10, "is_connected in OVSDB")
    assert target in ctl(fulmar_bin, tmp_path, "show")

    # fulmar ctl adds a port: OVSDB, SNMP and OF-CONFIG see it; OF-CONFIG removes it again.
    ctl(fulmar_bin, tmp_path, "add-port", "br0", SW_M)
    everywhere(ovsdb, snmpd, m, fulmar_bin, tmp_path, SW_M, True)
    edit(m, f'<logical-switches><switch><id>br0</id><resources><port xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"'
            f' nc:operation="delete">{SW_M}</port></resources></switch></logical-switches>')
    everywhere(ovsdb, snmpd, m, fulmar_bin, tmp_path, SW_M, False)

    # OVSDB sets the fail mode: ctl and OF-CONFIG show it.
    ovsdb.vsctl("set-fail-mode", "br0", "standalone")
    assert show(fulmar_bin, tmp_path)[1]["bridges"][0]["fail_mode"] == "standalone"
    assert texts(get_config(m), "lost-connection-behavior") == ["failStandaloneMode"]

    # Traffic: OpenFlow port stats, OVSDB statistics and SNMP ifHCInOctets agree.
    mgmt = f"unix:{tmp_path}/br0.mgmt"
    for flow in ("in_port=1,actions=output:2", "in_port=2,actions=output:1"):
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", mgmt, flow],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    r = in_ns(NS_A, "ping", "-n", "-q", "-c", "5", "-i", "0.2", "-W", "2", "10.9.0.2")
    assert r.returncode == 0, r.stdout + r.stderr

    def rx_bytes_agree():
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", mgmt, "1"],
                           capture_output=True, text=True, timeout=30)
        of = int(re.search(r"rx pkts=\d+, bytes=(\d+)", r.stdout).group(1))
        index = next(i for i, n in if_names(snmpd).items() if n == SW_A)
        snmp = int(snmpd.values("snmpget", f"{IF_HC_IN_OCTETS}.{index}")[f"{IF_HC_IN_OCTETS}.{index}"])
        return of > 5 * 98 and of == snmp == ovsdb.stats(SW_A).get("rx_bytes")

    wait_for(rx_bytes_agree, 10, "the same rx bytes in OpenFlow, SNMP and OVSDB")
