"""End-to-end: a hitless restart. Flows, a group and a meter installed
over OpenFlow (`ovs-ofctl` on the management socket, as a controller
would) are saved when `fulmar run --config` stops gracefully and are in
force when it starts again, before any controller connects (fail mode
secure, no controller at all): a ping flood across the restart loses only
the restart's gap, and what the second run dumps is what the first held.

Topology: the `net` fixture's hosts A (10.9.0.1) and B (10.9.0.2) behind
SW_A (port 1) and SW_B (port 2).
"""

import re
import shutil
import subprocess
import time

import pytest

from e2e_support import NS_A, SW_A, SW_B, Switch, in_ns

FLOWS = [
    "table=0,priority=10,in_port=1,actions=meter:1,goto_table:1",
    "table=1,priority=10,actions=group:5",
    "table=0,priority=10,in_port=2,actions=output:1",
]
GROUP = "group_id=5,type=all,bucket=actions=output:2"
METER = "meter=1,pktps,bands=type=drop,rate=100000"


def config(tmp_path):
    c = tmp_path / "switch.toml"
    c.write_text(
        '[[bridges]]\nname = "br0"\nfail_mode = "secure"\n'
        f'[[bridges.ports]]\nport = 1\ninterface = "{SW_A}"\n'
        f'[[bridges.ports]]\nport = 2\ninterface = "{SW_B}"\n'
    )
    return c


def ofctl(tmp_path, *args):
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args[:1], f"unix:{tmp_path}/br0.mgmt", *args[1:]],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"ovs-ofctl {args}: {r.stderr}"
    return r.stdout


def dump(tmp_path):
    """Flows without counters and ages, sorted; groups; meters."""
    flows = sorted(re.sub(r"(duration|n_packets|n_bytes)=[^,]*, ", "", line.strip())
                   for line in ofctl(tmp_path, "dump-flows").splitlines() if "actions=" in line)
    groups = [line.strip() for line in ofctl(tmp_path, "dump-groups").splitlines() if "group_id" in line]
    meters = [line.strip() for line in ofctl(tmp_path, "dump-meters").splitlines() if "meter=" in line]
    return flows, groups, meters


def start(fulmar_bin, tmp_path, cfg):
    return Switch([fulmar_bin, "run", "--config", str(cfg), "--ctl", str(tmp_path / "ctl.sock"),
                   "--mgmt-dir", str(tmp_path)])


def received_seqs(ping_output):
    return sorted({int(m) for m in re.findall(r"icmp_seq=(\d+)", ping_output)})


def test_flows_from_openflow_survive_a_graceful_restart(net, fulmar_bin, tmp_path):
    for tool in ("ping", "ovs-ofctl"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool}")
    cfg = config(tmp_path)
    saved = tmp_path / "switch.toml.saved" / "br0.tables"
    sw = start(fulmar_bin, tmp_path, cfg)
    try:
        # Secure, no controller, no flows: nothing passes.
        assert in_ns(NS_A, "ping", "-n", "-c", "1", "-W", "1", "10.9.0.2").returncode != 0
        ofctl(tmp_path, "add-meter", METER)
        ofctl(tmp_path, "add-group", GROUP)
        for f in FLOWS:
            ofctl(tmp_path, "add-flow", f)
        before = dump(tmp_path)
        assert len(before[0]) == 3 and len(before[1]) == 1 and len(before[2]) == 1, before
        r = in_ns(NS_A, "ping", "-n", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.2")
        assert r.returncode == 0, r.stdout + r.stderr

        # A ping every 5 ms across a graceful stop and a start.
        pinger = subprocess.Popen(["ip", "netns", "exec", NS_A, "ping", "-n", "-D", "-i", "0.005", "-W", "1",
                                   "-w", "6", "10.9.0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        t0 = time.monotonic()
        t0_wall = time.time()
        rc, _, err = sw.stop()
        assert rc == 0, err
        assert saved.exists(), err
        sw = start(fulmar_bin, tmp_path, cfg)
        restart_s = time.monotonic() - t0
        out, _ = pinger.communicate(timeout=30)
        seqs = received_seqs(out)
        assert seqs, out
        # In time between replies: ping stops sending while replies are
        # missing, so holes in the sequence numbers undercount the gap.
        times = sorted(float(t) for t in re.findall(r"^\[(\d+\.\d+)\]", out, re.M))
        gap = max(b - a for a, b in zip(times, times[1:]))
        after_restart = [t for t in times if t > t0_wall + restart_s + 0.5]
        print(f"restart took {restart_s:.3f} s; longest gap in replies {gap:.3f} s; "
              f"{len(seqs)} replies of {max(seqs) + 1} pings, {len(after_restart)} after the restart")
        # The flows are back: A reaches B (asked apart from the pinger,
        # whose 6 s may end before a slow machine's restart does).
        r = in_ns(NS_A, "ping", "-n", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.2")
        assert r.returncode == 0, "no replies after the restart: the flows were not restored\n" + r.stdout

        # The second run holds what the first did, and the file is used.
        assert dump(tmp_path) == before
        assert not saved.exists()
        # A controller may replace them: deleting the flows stops the traffic.
        ofctl(tmp_path, "del-flows")
        assert in_ns(NS_A, "ping", "-n", "-c", "1", "-W", "1", "10.9.0.2").returncode != 0
    finally:
        rc, _, err = sw.stop()
        assert rc == 0, err
