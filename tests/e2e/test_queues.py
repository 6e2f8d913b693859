"""End-to-end: egress queues behind set_queue. Port 2 (toward namespace B)
gets a port maximum rate and two queues; flows put UDP on queue 2 (low
priority) and everything else from A, ICMP included, on queue 1 (high
priority). A UDP flood from A well above the port rate must not hurt the
high class: no ping is lost and its median RTT stays within
max(2 x idle, idle + 1 ms) of the RTT measured first on the idle port.

The flood comes from nshelper.py (seqflood, paced by sleeping so that a
CPU stays free for the switch) to a MAC address nobody has, so B's kernel
counts and ignores it. The test bounds its own duration: the flood is a
fixed number of frames at a fixed rate, and every wait has a deadline.
"""

import re
import shutil
import statistics
import subprocess
import sys
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from e2e_support import HELPER, MAC_A, MAC_B, NS_A, NS_B, SW_A, SW_B, Switch, wait_for

PORT_RATE = 10_000_000  # bits/s
FLOOD_PPS = 3000  # of 1042-byte frames: about 25 Mbit/s, 2.5 x the port rate
FLOOD_SECONDS = 6
FLOWS = [
    "table=0,priority=20,udp,in_port=1,actions=set_queue:2,output:2",
    "table=0,priority=10,in_port=1,actions=set_queue:1,output:2",
    "table=0,priority=10,in_port=2,actions=output:1",
]
FRAME = bytes(
    Ether(src=MAC_A, dst="02:00:00:00:0e:ff") / IP(src="10.9.0.1", dst="10.9.0.2") / UDP(sport=9, dport=9) / bytes(1000)
)


def config(mode):
    threads = "rx_threads = 1\nworker_threads = 1\ntx_threads = 1\n" if mode == "rx-worker-tx" else "worker_threads = 1\n"
    flows = ", ".join(f'"{f}"' for f in FLOWS)
    return (
        f'[dataplane]\nmode = "{mode}"\n{threads}'
        f'[[bridges]]\nname = "br0"\nflows = [{flows}]\n'
        f'[[bridges.ports]]\nport = 1\ninterface = "{SW_A}"\n'
        f'[[bridges.ports]]\nport = 2\ninterface = "{SW_B}"\n'
        f'qos = {{ type = "linux-htb", max_rate = {PORT_RATE}, queues = ['
        "{ id = 1, priority = 0 }, { id = 2, priority = 1, min_rate = 1000000 } ] }\n"
    )


def ofctl(*args):
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def ping_rtts(count):
    """RTTs in ms of `count` pings from A to B, 50 ms apart; lost ones are
    missing."""
    r = subprocess.run(
        ["ip", "netns", "exec", NS_A, "ping", "-n", "-c", str(count), "-i", "0.05", "-W", "2", "10.9.0.2"],
        capture_output=True, text=True, timeout=count * 0.05 + 30,
    )
    return [float(m) for m in re.findall(r"time=([\d.]+) ms", r.stdout)]


def rx_bytes(ns, iface):
    return int(subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{iface}/statistics/rx_bytes"],
                              capture_output=True, text=True, check=True).stdout)


def queue_stats(mgmt):
    """{queue: (tx_bytes, tx_packets, tx_errors)} of port 2."""
    out = ofctl("queue-stats", mgmt, "2")
    return {
        int(q): (int(b), int(p), int(e))
        for q, b, p, e in re.findall(r"queue (\d+): bytes=(\d+), pkts=(\d+), errors=(\d+)", out)
    }


@pytest.mark.parametrize("mode", ["run-to-completion", "rx-worker-tx"])
def test_high_class_keeps_its_rtt_under_a_low_class_flood(net, fulmar_bin, tmp_path, mode):
    if shutil.which("ovs-ofctl") is None:
        pytest.skip("needs ovs-ofctl")
    # No ARP while the port is loaded: static neighbours.
    subprocess.run(["ip", "-n", NS_A, "neigh", "replace", "10.9.0.2", "lladdr", MAC_B, "dev", "va", "nud", "permanent"], check=True)
    subprocess.run(["ip", "-n", NS_B, "neigh", "replace", "10.9.0.1", "lladdr", MAC_A, "dev", "vb", "nud", "permanent"], check=True)
    cfg = tmp_path / "fulmar.toml"
    cfg.write_text(config(mode))
    sw = Switch([fulmar_bin, "run", "--config", str(cfg), "--mgmt-dir", str(tmp_path)])
    mgmt = f"unix:{tmp_path}/br0.mgmt"
    try:
        wait_for(lambda: ping_rtts(1), timeout=10, what="a first ping")
        # QUEUE_GET_CONFIG lists the two queues, rates in tenths of a
        # percent of the port rate.
        qc = ofctl("queue-get-config", mgmt, "2")
        assert re.search(r"queue 1:", qc) and re.search(r"queue 2:.*min_rate:10\.0%", qc), qc

        idle = ping_rtts(40)
        assert len(idle) == 40, idle
        idle_med = statistics.median(idle)

        before = rx_bytes(NS_B, "vb")
        t0 = time.monotonic()
        flood = subprocess.Popen(
            ["ip", "netns", "exec", NS_A, sys.executable, HELPER, "seqflood", "va", FRAME.hex(),
             str(FLOOD_PPS * FLOOD_SECONDS), str(FLOOD_PPS), "sleep"],
            stdout=subprocess.PIPE, text=True,
        )
        try:
            time.sleep(1.0)  # the queue fills and the port runs at its rate
            loaded = ping_rtts(40)
            out, _ = flood.communicate(timeout=FLOOD_SECONDS * 10 + 30)
        finally:
            if flood.poll() is None:
                flood.kill()
                flood.wait()
        # What B received while the flood ran, with the queue's backlog
        # (1000 frames at most) drained.
        time.sleep(1.5)
        elapsed = time.monotonic() - t0
        got = rx_bytes(NS_B, "vb") - before
        sent = int(re.search(r"sent (\d+)", out).group(1))

        stats = queue_stats(mgmt)
        assert set(stats) == {1, 2}, stats
        # The flood overloaded the port: the low queue dropped at its tail.
        assert stats[2][2] > 0, (stats, sent)
        # Nothing left faster than the port rate (plus its 10 ms burst and
        # frame overheads the kernel counts).
        assert got * 8 <= PORT_RATE * elapsed * 1.05 + 200_000, (got, elapsed)

        # The high class lost nothing and kept its RTT.
        assert len(loaded) == 40, f"lost {40 - len(loaded)} of 40 pings under load: {loaded}"
        med = statistics.median(loaded)
        bound = max(2 * idle_med, idle_med + 1.0)
        assert med <= bound, f"median RTT {med:.3f} ms under load, idle {idle_med:.3f} ms (bound {bound:.3f})"
        assert stats[1][1] >= 80, stats  # the pings (and the first one) went through queue 1
    finally:
        rc, _out, err = sw.stop()
    assert rc == 0, err
    assert "qos_queue_full" in err, err
