"""End-to-end: fulmar's SNMP module (an AgentX subagent) under the real
net-snmp `snmpd`, read with `snmpget`/`snmpwalk`/`snmpbulkwalk`, in network
namespaces, as root.

Each test starts its own snmpd (an unprivileged UDP port on 127.0.0.1, the
AgentX master socket and persistent files in the test's tmp dir, its own
config file, and its own IF-MIB modules off: `-I -ifTable,ifXTable,interface`,
the set-up the module's doc recommends) and a `fulmar run -i SW_A -i SW_B`
(bridge br0, ports 1 and 2, so ifIndex 1 and 2) with `--agentx` pointing at
that socket. Traps go to a UDP socket of the test (snmpd's trap2sink).

Topology: the `net` fixture's hosts A (10.9.0.1, port 1) and B (10.9.0.2,
port 2), forwarded 1 <-> 2 by static flows.
"""

import contextlib
import re
import subprocess
import time

import pytest

from e2e_support import MAC_A, MAC_B, NS_A, SW_A, SW_B, Switch, in_ns, wait_for
from mgmt_support import Snmpd, TrapSink, ctl, need

FORWARD = (
    "table=0,priority=10,in_port=1,actions=output:2\n"
    "table=0,priority=10,in_port=2,actions=output:1\n"
)

IF_ENTRY = "1.3.6.1.2.1.2.2.1"
IF_X_ENTRY = "1.3.6.1.2.1.31.1.1.1"
DOT1D_BASE = "1.3.6.1.2.1.17.1"
LINK_DOWN = "1.3.6.1.6.3.1.1.5.3"
LINK_UP = "1.3.6.1.6.3.1.1.5.4"

def ber_oid(dotted):
    """The BER content octets of an OID (to find it in a trap's bytes)."""
    parts = [int(x) for x in dotted.split(".")]
    out = bytes([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        chunk = [p & 0x7F]
        p >>= 7
        while p:
            chunk.insert(0, 0x80 | (p & 0x7F))
            p >>= 7
        out += bytes(chunk)
    return bytes([0x06, len(out)]) + out


def has_link_trap(packets, trap_oid, if_index, oper):
    """A v2c trap naming trap_oid with the varbinds ifIndex.N = N and
    ifOperStatus.N = oper."""
    want = [
        ber_oid(trap_oid),
        ber_oid(f"{IF_ENTRY}.1.{if_index}") + bytes([0x02, 0x01, if_index]),
        ber_oid(f"{IF_ENTRY}.8.{if_index}") + bytes([0x02, 0x01, oper]),
    ]
    return any(all(w in p for w in want) for p in packets)


def fulmar_switch(fulmar_bin, tmp_path, d, *extra):
    """A fulmar between SW_A and SW_B forwarding FORWARD, a subagent of
    snmpd `d`, with `extra` options."""
    flows = tmp_path / "flows"
    flows.write_text(FORWARD)
    return Switch([fulmar_bin, "run", "-i", SW_A, "-i", SW_B, "--flows", str(flows),
                   "--ctl", str(tmp_path / "ctl.sock"), "--mgmt-dir", str(tmp_path),
                   "--agentx", d.sock, *extra])


@contextlib.contextmanager
def own_snmpd(fulmar_bin, tmp_path, **snmpd):
    """(snmpd started with `snmpd` options, start(*extra), its trap sink):
    start starts a fulmar subagent of it; all stopped at the end."""
    traps = TrapSink()
    started = []
    d = None

    def start(*extra):
        started.append(fulmar_switch(fulmar_bin, tmp_path, d, *extra))
        return started[-1]

    try:
        d = Snmpd(tmp_path, traps.port, **snmpd)
        yield d, start, traps
    finally:
        for sw in started:
            sw.kill()
        if d:
            d.stop()
        traps.close()


@pytest.fixture
def snmp(net, fulmar_bin, tmp_path):
    """(snmpd, fulmar Switch, trap sink, start_fulmar) with fulmar already
    registered; start_fulmar(*extra) starts another one (after stop)."""
    need("snmpd", "snmpget", "snmpwalk", "snmpbulkwalk")
    with own_snmpd(fulmar_bin, tmp_path) as (d, start_fulmar, traps):
        sw = start_fulmar()
        wait_for(lambda: d.values("snmpget", f"{IF_X_ENTRY}.1.1").get(f"{IF_X_ENTRY}.1.1") == SW_A,
                 timeout=15, what="the subagent to register")
        yield d, sw, traps, start_fulmar


def stop_ok(sw):
    rc, _, err = sw.stop()
    assert rc == 0, err
    return err


def ofctl_ports(mgmt):
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", mgmt],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    out = {}
    for no in (1, 2):
        m = re.search(rf"port\s+{no}: rx pkts=(\d+), bytes=(\d+).*?\n\s+tx pkts=(\d+), bytes=(\d+)", r.stdout)
        assert m, r.stdout
        out[no] = tuple(map(int, m.groups()))
    return out


def test_counters_equal_openflow_port_stats(snmp, tmp_path):
    """After a ping through the switch, each port's ifHCIn/OutOctets and
    ifHCIn/OutUcastPkts (and the 32-bit ifIn/OutOctets) equal what
    OpenFlow PORT_STATS answers over the bridge's management socket."""
    need("ping", "ovs-ofctl")
    d, sw, _, _ = snmp
    r = in_ns(NS_A, "ping", "-n", "-q", "-c", "20", "-i", "0.05", "-W", "2", "10.9.0.2", timeout=60)
    assert " 0% packet loss" in r.stdout, r.stdout + r.stderr
    mgmt = f"unix:{tmp_path}/br0.mgmt"
    oids = []
    for i in (1, 2):
        oids += [f"{IF_X_ENTRY}.7.{i}", f"{IF_X_ENTRY}.6.{i}", f"{IF_X_ENTRY}.11.{i}", f"{IF_X_ENTRY}.10.{i}",
                 f"{IF_ENTRY}.10.{i}", f"{IF_ENTRY}.16.{i}"]

    def agree():
        # The subagent answers from a reading at most 0.5 s old: read
        # until both sides show the same (quiet) counters.
        of = ofctl_ports(mgmt)
        v = d.values("snmpget", *oids)
        got = {i: (int(v[f"{IF_X_ENTRY}.7.{i}"]), int(v[f"{IF_X_ENTRY}.6.{i}"]),
                   int(v[f"{IF_X_ENTRY}.11.{i}"]), int(v[f"{IF_X_ENTRY}.10.{i}"])) for i in (1, 2)}
        c32 = {i: (int(v[f"{IF_ENTRY}.10.{i}"]), int(v[f"{IF_ENTRY}.16.{i}"])) for i in (1, 2)}
        ok = got == of and all(c32[i] == (of[i][1] % 2**32, of[i][3] % 2**32) for i in (1, 2))
        return (of, got) if ok else None

    of, got = wait_for(agree, timeout=10, what="SNMP counters to equal OpenFlow port stats")
    # The ping's 20 requests came in on port 1 and its 20 replies on port 2.
    assert of[1][0] >= 20 and of[2][0] >= 20, of
    assert of[1][1] >= 20 * 98, of
    stop_ok(sw)


def test_walks_show_the_ports(snmp, tmp_path):
    """snmpwalk of ifTable, ifXTable and dot1dBase (and snmpbulkwalk, the
    GetBulk path) shows br0's two ports; a missing instance is
    noSuchInstance; a SET is refused as notWritable."""
    d, sw, _, _ = snmp
    t = d.values("snmpwalk", "1.3.6.1.2.1.2")
    mac_a = open(f"/sys/class/net/{SW_A}/address").read().strip()
    assert t["1.3.6.1.2.1.2.1.0"] == "2"
    assert t[f"{IF_ENTRY}.1.1"] == "1" and t[f"{IF_ENTRY}.1.2"] == "2"
    assert t[f"{IF_ENTRY}.2.1"] == f"fulmar br0 port 1 {SW_A}"
    assert t[f"{IF_ENTRY}.3.1"] == "6" and t[f"{IF_ENTRY}.3.2"] == "6"
    assert t[f"{IF_ENTRY}.6.1"].lower().split() == mac_a.split(":")
    assert t[f"{IF_ENTRY}.7.1"] == "1" and t[f"{IF_ENTRY}.8.1"] == "1"
    assert t[f"{IF_ENTRY}.8.2"] == "1"
    assert not any(k.startswith(f"{IF_ENTRY}.1.3") for k in t)
    x = d.values("snmpwalk", "1.3.6.1.2.1.31.1.1")
    assert x[f"{IF_X_ENTRY}.1.1"] == SW_A and x[f"{IF_X_ENTRY}.1.2"] == SW_B
    assert f"{IF_X_ENTRY}.6.2" in x and f"{IF_X_ENTRY}.15.1" in x
    b = d.values("snmpbulkwalk", DOT1D_BASE)
    assert b[f"{DOT1D_BASE}.1.0"].split() == ["00", "00", "00", "00", "00", "01"]  # dpid 1
    assert b[f"{DOT1D_BASE}.2.0"] == "2"
    assert b[f"{DOT1D_BASE}.4.1.2.1"] == "1" and b[f"{DOT1D_BASE}.4.1.2.2"] == "2"
    # The bulk walk of the whole set agrees with the plain walks.
    bulk = d.values("snmpbulkwalk", "-Cr25", "1.3.6.1.2.1.2")
    assert set(bulk) == set(t)
    r = d.get(f"{IF_ENTRY}.2.9")
    assert "No Such Instance" in r.stdout, r.stdout
    r = d.run("snmpset", f"{IF_X_ENTRY}.18.1", "s", "uplink", community="private", check=False)
    assert r.returncode != 0 and "notWritable" in r.stdout + r.stderr, r.stdout + r.stderr
    assert d.values("snmpget", f"{IF_X_ENTRY}.18.1")[f"{IF_X_ENTRY}.18.1"] == ""
    stop_ok(sw)


def test_fdb_table_lists_what_normal_learnt(snmp, fulmar_bin, tmp_path):
    """BRIDGE-MIB dot1dTpFdbTable: after pings through NORMAL, both hosts'
    addresses, on their ports, status learned(3)."""
    d, sw, _, _ = snmp
    ctl(fulmar_bin, tmp_path, "add-flow", "br0", "priority=20,actions=NORMAL")
    r = in_ns(NS_A, "ping", "-n", "-q", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.2")
    assert r.returncode == 0, r.stdout + r.stderr
    fdb = "1.3.6.1.2.1.17.4.3.1"
    index = lambda mac: ".".join(str(int(b, 16)) for b in mac.split(":"))
    ports = wait_for(lambda: (v := d.values("snmpwalk", f"{fdb}.2")) and
                     f"{fdb}.2.{index(MAC_A)}" in v and f"{fdb}.2.{index(MAC_B)}" in v and v,
                     timeout=5, what="both hosts in dot1dTpFdbTable")
    assert ports[f"{fdb}.2.{index(MAC_A)}"] == "1", ports
    assert ports[f"{fdb}.2.{index(MAC_B)}"] == "2", ports
    status = d.values("snmpget", f"{fdb}.3.{index(MAC_A)}")
    assert status[f"{fdb}.3.{index(MAC_A)}"] == "3", status
    addr = d.values("snmpget", f"{fdb}.1.{index(MAC_B)}")[f"{fdb}.1.{index(MAC_B)}"]
    assert addr.lower().split() == MAC_B.split(":"), addr
    stop_ok(sw)


def test_link_down_and_up_traps(snmp):
    """Host A's end of the port-1 veth goes down: snmpd sends a linkDown
    trap for ifIndex 1 (ifOperStatus down) and ifOperStatus.1 reads 2;
    back up: a linkUp trap."""
    d, sw, traps, _ = snmp
    try:
        subprocess.run(["ip", "-n", NS_A, "link", "set", "va", "down"], check=True)
        wait_for(lambda: has_link_trap(traps.packets, LINK_DOWN, 1, 2), timeout=10, what="a linkDown trap")
        assert d.values("snmpget", f"{IF_ENTRY}.8.1")[f"{IF_ENTRY}.8.1"] == "2"
        # ifLastChange is the master's sysUpTime at the change: a few
        # seconds before sysUpTime now at most.
        v = d.values("snmpget", "1.3.6.1.2.1.1.3.0", f"{IF_ENTRY}.9.1", f"{IF_ENTRY}.9.2")
        up, changed, unchanged = (int(v[k].split()[0].strip("()"))
                                  for k in ("1.3.6.1.2.1.1.3.0", f"{IF_ENTRY}.9.1", f"{IF_ENTRY}.9.2"))
        assert up - 1500 < changed <= up + 100, v
        assert unchanged < changed, v
    finally:
        subprocess.run(["ip", "-n", NS_A, "link", "set", "va", "up"], check=True)
    wait_for(lambda: has_link_trap(traps.packets, LINK_UP, 1, 1), timeout=10, what="a linkUp trap")
    assert not has_link_trap(traps.packets, LINK_DOWN, 2, 2)
    stop_ok(sw)


def test_snmpd_restart_and_reregistration(snmp, tmp_path):
    """snmpd stops and starts again on the same socket: the subagent
    opens a new session, registers again and answers; stopping fulmar
    closes the session (snmpd's ifTable is then empty again)."""
    d, sw, _, _ = snmp
    d.stop()
    time.sleep(0.5)
    d.start()
    wait_for(lambda: d.values("snmpget", f"{IF_X_ENTRY}.1.2").get(f"{IF_X_ENTRY}.1.2") == SW_B,
             timeout=15, what="the subagent to register again")
    err = stop_ok(sw)
    assert "session with" in err, err
    r = d.get(f"{IF_X_ENTRY}.1.1")
    assert "No Such Object" in r.stdout, r.stdout


def test_priority_takes_if_mib_over_from_snmpd(net, fulmar_bin, tmp_path):
    """With snmpd's own IF-MIB modules loaded, `--agentx-priority 1`
    makes snmpd answer ifTable from fulmar (here over AgentX on TCP)."""
    need("snmpd", "snmpget", "snmpwalk")
    with own_snmpd(fulmar_bin, tmp_path, extra=(), tcp=True) as (d, start, _):
        # snmpd's own ifTable is there: ifName.1 is the host's (lo).
        assert d.values("snmpget", f"{IF_X_ENTRY}.1.1")[f"{IF_X_ENTRY}.1.1"] != SW_A
        sw = start("--agentx-priority", "1")
        wait_for(lambda: d.values("snmpget", f"{IF_X_ENTRY}.1.1").get(f"{IF_X_ENTRY}.1.1") == SW_A,
                 timeout=15, what="fulmar's ifXTable to take over")
        assert d.values("snmpget", "1.3.6.1.2.1.2.1.0")["1.3.6.1.2.1.2.1.0"] == "2"
        stop_ok(sw)


def test_context_beside_the_hosts_if_mib(net, fulmar_bin, tmp_path):
    """`--agentx-context fulmar`: the switch's IF-MIB in the SNMP context
    `fulmar` (community `switch` mapped to it), the host's own IF-MIB
    still in the default context (community `public`)."""
    need("snmpd", "snmpget")
    access = (
        "com2sec -Cn fulmar fsec 127.0.0.1 switch\n"
        "com2sec hsec 127.0.0.1 public\n"
        "group fgroup v2c fsec\n"
        "group hgroup v2c hsec\n"
        "view all included .1\n"
        "access fgroup fulmar any noauth exact all none none\n"
        'access hgroup "" any noauth exact all none none\n'
    )
    with own_snmpd(fulmar_bin, tmp_path, extra=(), access=access) as (d, start, _):
        sw = start("--agentx-context", "fulmar")

        def in_context():
            r = d.run("snmpget", f"{IF_X_ENTRY}.1.1", community="switch", check=False)
            return r.returncode == 0 and f'"{SW_A}"' in r.stdout

        wait_for(in_context, timeout=15, what="fulmar's ifXTable in context fulmar")
        host = d.values("snmpget", f"{IF_X_ENTRY}.1.1")[f"{IF_X_ENTRY}.1.1"]
        assert host != SW_A
        stop_ok(sw)
