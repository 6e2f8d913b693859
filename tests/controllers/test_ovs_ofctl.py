"""A real client against the real switch: `ovs-ofctl -O OpenFlow13` drives
`fulmar run --listen` on two veth ports between namespaces, and every
command's effect is checked against what else can be observed — the
dumps, the counters, the frames on the far side of a veth.

(crates/agent/tests/ovs_ofctl.rs runs ovs-ofctl against the in-memory
switch; these need root and the real datapath, and are skipped otherwise.)
"""

import re
import shutil
import subprocess
import time

import pytest

from ctl_support import DEV_A, DEV_B, MAC_A, MAC_B, NS_A, NS_B, PEER_B, capture, send

OFCTL = ["ovs-ofctl", "-O", "OpenFlow13", "--timeout=20"]


@pytest.fixture
def target(fct_net, fulmar_switch):
    if shutil.which("ovs-ofctl") is None:
        pytest.skip("needs ovs-ofctl (Debian: openvswitch-common)")
    # Port 0: the kernel picks a free port; fulmar says which.
    sw = fulmar_switch("--listen", "tcp:127.0.0.1:0")
    m = re.search(r"listening for controllers on ([\d.]+:\d+)", "".join(sw.err_lines))
    assert m, sw.err_lines
    yield "tcp:" + m.group(1)
    rc, _out, err = sw.stop()
    assert rc == 0, err


def ofctl(target, cmd, *args, opts=()):
    r = subprocess.run([*OFCTL, *opts, cmd, target, *args], capture_output=True, text=True)
    assert r.returncode == 0, f"ovs-ofctl {cmd} {args}: {r.stdout}{r.stderr}"
    return r.stdout


def flows(target, *match):
    """The flow table as a set of 'table=T,priority=P,MATCH actions=A'
    strings (cookie kept when not 0)."""
    out = ofctl(target, "dump-flows", *match, opts=["--no-stats"])
    got = set()
    for line in out.splitlines()[1:] if out.startswith("OFPST_FLOW") else out.splitlines():
        line = line.strip()
        if not line:
            continue
        if "table=" not in line:
            line = "table=0, " + line
        got.add(line.replace(", ", ","))
    return got


def counts(target):
    """{flow text: n_packets} from dump-flows with statistics."""
    out = ofctl(target, "dump-flows")
    res = {}
    for line in out.splitlines()[1:]:
        m = re.search(r"table=(\d+), n_packets=(\d+), n_bytes=\d+, (.*)$", line)
        if m:
            res[f"table={m.group(1)},{m.group(3)}"] = int(m.group(2))
    return res


def port_stats(target):
    """{port: (rx_pkts, tx_pkts)} from dump-ports."""
    out = ofctl(target, "dump-ports")
    return {
        int(p): (int(rx), int(tx))
        for p, rx, tx in re.findall(r"port\s+(\d+): rx pkts=(\d+),.*?\n\s+tx pkts=(\d+)", out)
    }


def raw_frame(src, dst, ethertype, payload):
    return bytes.fromhex(dst.replace(":", "") + src.replace(":", "") + ethertype) + payload


FLOWS = """\
table=0,priority=10,in_port=1,actions=output:2
table=0,priority=10,in_port=2,actions=output:1
table=0,priority=20,ip,nw_dst=10.1.0.1,actions=drop
table=0,priority=20,ip,nw_dst=10.1.0.2,actions=drop
table=0,priority=30,ip,nw_dst=10.1.0.2,actions=output:1
table=1,priority=5,cookie=0x7,udp,tp_dst=53,actions=output:1
table=1,priority=6,cookie=0x8,udp,tp_dst=54,actions=output:2
"""


def test_add_mod_del_flows_agree_with_dump_flows(target, tmp_path):
    f = tmp_path / "flows"
    f.write_text(FLOWS)
    ofctl(target, "add-flows", str(f))
    assert flows(target) == {
        "table=0,priority=10,in_port=1 actions=output:2",
        "table=0,priority=10,in_port=2 actions=output:1",
        "table=0,priority=20,ip,nw_dst=10.1.0.1 actions=drop",
        "table=0,priority=20,ip,nw_dst=10.1.0.2 actions=drop",
        "table=0,priority=30,ip,nw_dst=10.1.0.2 actions=output:1",
        "cookie=0x7,table=1,priority=5,udp,tp_dst=53 actions=output:1",
        "cookie=0x8,table=1,priority=6,udp,tp_dst=54 actions=output:2",
    }
    # dump-flows with a match: the flows at least as specific (non-strict).
    assert flows(target, "table=0,ip,nw_dst=10.1.0.2") == {
        "table=0,priority=20,ip,nw_dst=10.1.0.2 actions=drop",
        "table=0,priority=30,ip,nw_dst=10.1.0.2 actions=output:1",
    }
    assert "flow_count=7" in ofctl(target, "dump-aggregate")

    # Non-strict mod: every flow the match covers, whatever its priority.
    ofctl(target, "mod-flows", "table=0,ip,nw_dst=10.1.0.2,actions=output:2")
    # Strict mod: only the flow with exactly this match and priority.
    ofctl(target, "mod-flows", "table=0,priority=20,ip,nw_dst=10.1.0.1,actions=output:1", opts=["--strict"])
    # A strict mod that matches nothing changes nothing (and adds nothing).
    ofctl(target, "mod-flows", "table=0,priority=99,ip,nw_dst=10.1.0.1,actions=drop", opts=["--strict"])
    # By cookie: only table 1's cookie 0x8.
    ofctl(target, "mod-flows", "table=1,cookie=0x8/-1,actions=drop")
    after_mod = {
        "table=0,priority=10,in_port=1 actions=output:2",
        "table=0,priority=10,in_port=2 actions=output:1",
        "table=0,priority=20,ip,nw_dst=10.1.0.1 actions=output:1",
        "table=0,priority=20,ip,nw_dst=10.1.0.2 actions=output:2",
        "table=0,priority=30,ip,nw_dst=10.1.0.2 actions=output:2",
        "cookie=0x7,table=1,priority=5,udp,tp_dst=53 actions=output:1",
        "cookie=0x8,table=1,priority=6,udp,tp_dst=54 actions=drop",
    }
    assert flows(target) == after_mod

    # Strict delete: exactly one of the two nw_dst=10.1.0.2 flows.
    ofctl(target, "del-flows", "table=0,priority=20,ip,nw_dst=10.1.0.2", opts=["--strict"])
    after_mod.discard("table=0,priority=20,ip,nw_dst=10.1.0.2 actions=output:2")
    assert flows(target) == after_mod
    # Non-strict delete by cookie across all tables.
    ofctl(target, "del-flows", "cookie=0x7/-1")
    after_mod.discard("cookie=0x7,table=1,priority=5,udp,tp_dst=53 actions=output:1")
    assert flows(target) == after_mod
    # Non-strict delete by match: every ip flow of table 0, nothing else.
    ofctl(target, "del-flows", "table=0,ip")
    assert flows(target) == {
        "table=0,priority=10,in_port=1 actions=output:2",
        "table=0,priority=10,in_port=2 actions=output:1",
        "cookie=0x8,table=1,priority=6,udp,tp_dst=54 actions=drop",
    }
    # Delete with out_port: only the flow that outputs to port 1.
    ofctl(target, "del-flows", "table=0,out_port=1")
    assert flows(target) == {
        "table=0,priority=10,in_port=1 actions=output:2",
        "cookie=0x8,table=1,priority=6,udp,tp_dst=54 actions=drop",
    }
    ofctl(target, "del-flows")
    assert flows(target) == set()
    assert "flow_count=0" in ofctl(target, "dump-aggregate")


def test_traffic_moves_flow_port_and_table_counters(target):
    ofctl(target, "add-flow", "table=0,priority=10,in_port=1,actions=output:2")
    ofctl(target, "add-flow", "table=0,priority=10,in_port=2,actions=output:1")
    before_ports = port_stats(target)
    assert set(before_ports) == {1, 2}, before_ports
    before_tables = ofctl(target, "dump-tables")
    m = re.search(r"table 0:\s+active=(\d+), lookup=(\d+), matched=(\d+)", before_tables)
    assert m and int(m.group(1)) == 2, before_tables
    lookup0 = int(m.group(2))

    n = 20
    got = capture(NS_B, PEER_B, 3, n, "88b5")
    send(NS_A, "fcta-p", *[raw_frame(MAC_A, MAC_B, "88b5", b"count%02d" % i) for i in range(n)])
    assert len(got()) == n
    time.sleep(0.2)

    after_ports = port_stats(target)
    assert after_ports[1][0] - before_ports[1][0] >= n, (before_ports, after_ports)
    assert after_ports[2][1] - before_ports[2][1] >= n, (before_ports, after_ports)
    c = counts(target)
    assert c["table=0,priority=10,in_port=1 actions=output:2"] >= n, c
    m = re.search(r"table 0:\s+active=2, lookup=(\d+), matched=(\d+)", ofctl(target, "dump-tables"))
    assert m and int(m.group(1)) - lookup0 >= n
    # One port only.
    one = ofctl(target, "dump-ports", "2")
    assert re.findall(r"port\s+(\d+):", one) == ["2"], one


def test_ports_desc_and_table_features_describe_the_switch(target):
    desc = ofctl(target, "dump-ports-desc")
    for no, dev in ((1, DEV_A), (2, DEV_B)):
        mac = open(f"/sys/class/net/{dev}/address").read().strip()
        assert f" {no}({dev}): addr:{mac}" in desc, desc
    show = ofctl(target, "show")
    n_tables = int(re.search(r"n_tables:(\d+)", show).group(1))
    features = ofctl(target, "dump-table-features")
    tables = [int(t) for t in re.findall(r"^  table (\d+)", features, re.M)]
    assert tables == list(range(n_tables)), (n_tables, tables[:5], tables[-5:])
    assert "apply_actions" in features and "goto_table" in features
    # The last table cannot go anywhere.
    dump = ofctl(target, "dump-tables")
    assert re.search(rf"tables? .*{n_tables - 1}", dump), dump


def test_groups_and_meters_round_trip_and_count(target):
    # Each added, then in the dump as the switch shows it.
    for add, spec, dump, shown in (
        ("add-group", "group_id=5,type=select,bucket=weight:1,output:1,bucket=weight:2,output:2",
         "dump-groups", "group_id=5,type=select,bucket=actions=output:1,bucket=weight:2,actions=output:2"),
        ("add-group", "group_id=6,type=all,bucket=output:1,bucket=output:2",
         "dump-groups", "group_id=6,type=all,bucket=actions=output:1,bucket=actions=output:2"),
        ("add-meter", "meter=1,pktps,burst,stats,band=type=drop,rate=1000,burst_size=100",
         "dump-meters", "meter=1 pktps burst stats bands=\ntype=drop rate=1000 burst_size=100"),
        ("add-meter", "meter=2,kbps,band=type=drop,rate=5000", "dump-meters", "meter=2 kbps bands=\ntype=drop rate=5000"),
    ):
        ofctl(target, add, spec)
        out = ofctl(target, dump)
        assert shown in out, out
    ofctl(target, "mod-group", "group_id=6,type=all,bucket=output:2")
    ofctl(target, "del-groups", "group_id=5")
    groups = ofctl(target, "dump-groups")
    assert "group_id=6,type=all,bucket=actions=output:2" in groups and "group_id=5" not in groups, groups

    # A flow through meter 1 and group 6: the frames reach port 2 and
    # both count them.
    ofctl(target, "add-flow", "table=0,priority=10,in_port=1,actions=meter:1,group:6")
    stats = ofctl(target, "dump-group-stats")
    assert re.search(r"group_id=6,duration=[\d.]+s,ref_count=1,packet_count=0", stats), stats
    n = 10
    got = capture(NS_B, PEER_B, 3, n, "88b5")
    send(NS_A, "fcta-p", *[raw_frame(MAC_A, MAC_B, "88b5", b"grp%02d" % i) for i in range(n)])
    assert len(got()) == n
    time.sleep(0.2)
    stats = ofctl(target, "dump-group-stats")
    m = re.search(r"group_id=6,.*?packet_count=(\d+)", stats)
    assert m and int(m.group(1)) == n, stats
    ms = ofctl(target, "meter-stats")
    m = re.search(r"meter:1 flow_count:1 packet_in_count:(\d+)", ms)
    assert m and int(m.group(1)) == n, ms
    ofctl(target, "del-meter", "meter=2")
    assert "meter=2" not in ofctl(target, "dump-meters")


def test_packet_out_reaches_the_peer_veth(target):
    frame = raw_frame(MAC_A, MAC_B, "88b5", b"fulmar packet-out")
    # Straight to port 2.
    got = capture(NS_B, PEER_B, 3, 1, "88b5")
    ofctl(target, "packet-out", f"in_port=controller,packet={frame.hex()},actions=output:2")
    assert got() == [frame]
    # OUTPUT:TABLE: through the flow table as if it came in on port 1; the
    # flow rewrites the destination and counts it.
    ofctl(target, "add-flow", f"table=0,priority=10,in_port=1,actions=set_field:{MAC_A}->eth_dst,output:2")
    got = capture(NS_B, PEER_B, 3, 1, "88b5")
    ofctl(target, "packet-out", f"in_port=1,packet={frame.hex()},actions=output:table")
    out = got()
    assert out == [raw_frame(MAC_A, MAC_A, "88b5", b"fulmar packet-out")], out


def test_packet_out_to_table_counts_in_the_flow(target):
    frame = raw_frame(MAC_A, MAC_B, "88b5", b"fulmar packet-out")
    ofctl(target, "add-flow", "table=0,priority=10,in_port=1,actions=output:2")
    got = capture(NS_B, PEER_B, 3, 1, "88b5")
    ofctl(target, "packet-out", f"in_port=1,packet={frame.hex()},actions=output:table")
    assert got() == [frame]
    c = counts(target)
    assert c["table=0,priority=10,in_port=1 actions=output:2"] == 1, c
