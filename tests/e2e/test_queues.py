"""End-to-end: egress queues behind set_queue. Port 2 (toward namespace B)
gets a port maximum rate and two queues; flows put UDP on queue 2 (low
priority) and everything else from A, ICMP included, on queue 1 (high
priority). A UDP flood from A well above the port rate must not hurt the
high class: no ping is lost, the pings leave through queue 1, the low
queue drops at its tail, and nothing leaves faster than the port rate.
The ping RTTs (idle and loaded) are printed, not asserted: a delay bound
depends on the machine's speed and load, so it is measured by
bench/queues.sh instead.

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

PORT_RATE = 2_000_000  # bits/s
# Of 1042-byte frames: about 25 Mbit/s, 12 x the port rate, so that the
# low queue overflows even when a busy machine lets the sender reach only
# a fraction of its pace.
FLOOD_PPS = 3000
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
        "{ id = 1, priority = 0 }, { id = 2, priority = 1, min_rate = 200000 } ] }\n"
    )


def ofctl(*args):
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def ping_rtts(count):
    """RTTs in ms of `count` pings from A to B, 50 ms apart; lost ones are
    missing."""
    r = subprocess.run(
        ["ip", "netns", "exec", NS_A, "ping", "-n", "-c", str(count), "-i", "0.05", "-W", "5", "10.9.0.2"],
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

        # The high class lost nothing at the scheduler: every ping that was
        # answered went out through queue 1, and queue 1 dropped none. (A
        # ping can still be lost before the scheduler, in a receive queue
        # while the switch waits for a CPU; how many is a matter of the
        # machine's load, so it is printed, not asserted.)
        assert stats[1][2] == 0, stats
        assert stats[1][1] >= len(idle) + len(loaded), (stats, len(idle), len(loaded))
        med = lambda xs: f"{statistics.median(xs):.3f} ms" if xs else "-"
        print(f"{mode}: median RTT idle {med(idle)} ({len(idle)}/40 answered), "
              f"under the flood {med(loaded)} ({len(loaded)}/40 answered)")
    finally:
        rc, _out, err = sw.stop()
    assert rc == 0, err
    assert "qos_queue_full" in err, err


def test_ovs_vsctl_qos_and_fulmar_ctl_set_qos(net, fulmar_bin, tmp_path):
    """OVSDB's QoS and Queue rows (`ovs-vsctl set port ... qos=@q -- create
    qos ... -- create queue ...`) become the port's egress queues, as
    QUEUE_GET_CONFIG shows; `fulmar ctl clear-qos` / `set-qos` change them
    and the database follows."""
    from mgmt_support import Ovsdb, ctl, need

    need("ovs-ofctl", "ovs-vsctl", "ovsdb-server")
    db = Ovsdb(tmp_path)
    sw = None
    try:
        sw = Switch([fulmar_bin, "run", "--ovsdb", f"unix:{db.sock}", "--ctl", str(tmp_path / "ctl.sock"),
                     "--mgmt-dir", str(tmp_path)])
        db.vsctl("add-br", "br0", "--", "add-port", "br0", SW_A, "--", "set", "interface", SW_A, "ofport_request=1",
                 "--", "add-port", "br0", SW_B, "--", "set", "interface", SW_B, "ofport_request=2")
        db.vsctl("set", "port", SW_B, "qos=@q", "--",
                 "--id=@q", "create", "qos", "type=linux-htb", "other_config:max-rate=10000000",
                 "queues:1=@q1", "queues:2=@q2", "--",
                 "--id=@q1", "create", "queue", "other_config:priority=0", "other_config:max-rate=8000000", "--",
                 "--id=@q2", "create", "queue", "other_config:priority=1", "other_config:min-rate=1000000")
        mgmt = f"unix:{tmp_path}/br0.mgmt"

        def config():
            r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "queue-get-config", mgmt, "2"],
                               capture_output=True, text=True, timeout=30)
            return r.stdout if r.returncode == 0 else ""

        wait_for(lambda: re.search(r"queue 1:.*max_rate:80\.0%", config()) and re.search(r"queue 2:.*min_rate:10\.0%", config()),
                 timeout=10, what="the queues from OVSDB")
        shown = ctl(fulmar_bin, tmp_path, "save", str(tmp_path / "saved.toml"))
        assert "linux-htb" in (tmp_path / "saved.toml").read_text(), shown

        # fulmar ctl: cleared, and the database's port loses its qos.
        ctl(fulmar_bin, tmp_path, "clear-qos", "br0", SW_B)
        wait_for(lambda: "queue" not in config(), timeout=10, what="no queues")
        wait_for(lambda: db.get("Port", SW_B, "qos") == "[]", timeout=10, what="the port's qos cleared in OVSDB")
        # Set again by ctl: written into QoS and Queue rows.
        ctl(fulmar_bin, tmp_path, "set-qos", "br0", SW_B, "type=linux-hfsc", "max_rate=20000000",
            "queue:5=priority:1,min_rate:2000000")
        wait_for(lambda: re.search(r"queue 5:.*min_rate:10\.0%", config()), timeout=10, what="queue 5")
        wait_for(lambda: "linux-hfsc" in db.vsctl("--no-wait", "list", "qos").stdout, timeout=10,
                 what="the QoS row in OVSDB")
        assert "min-rate" in db.vsctl("--no-wait", "list", "queue").stdout
        # A bad value is refused and changes nothing.
        r = subprocess.run([fulmar_bin, "ctl", "-t", str(tmp_path / "ctl.sock"), "set-qos", "br0", SW_B,
                            "queue:1=min_rate:5,max_rate:4"], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "min_rate 5 is above max_rate 4" in r.stderr, r.stderr
        assert re.search(r"queue 5:", config())
    finally:
        if sw is not None:
            rc, _out, err = sw.stop()
            assert rc == 0, err
        db.stop()
