"""End-to-end: the packet-in / packet-out controller of
bench/packetio-vs-ovs.sh (crates/agent/examples/packetio_rate.rs) against
`fulmar run --listen`, briefly, with frame counts rather than rates:

- reactive: a few hundred frames sent into port 1 miss into packet-ins;
  the controller answers each with a packet-out to port 2, and exactly
  those frames, unchanged, reach host B.
- packet-out: a second of packet-outs back to back; every one the switch
  acknowledged left port 2 or is one of port 2's counted drops, and what
  port 2 counts as sent reached B (or is a drop the kernel counted).

Topology: the `net` fixture's hosts A (port 1) and B (port 2).
"""

import json
import re
import subprocess
import sys

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from cargo_binary import cargo_binary
from e2e_support import HELPER, MAC_A, NS_A, NS_B, SW_A, SW_B, Switch, capture, in_ns, wait_for
from of_client import listen_port

# To a MAC address nobody has: B's kernel counts the frame and ignores it.
FRAME = bytes(Ether(src=MAC_A, dst="02:00:00:00:0e:ff") / IP(src="10.9.0.1", dst="10.9.0.2")
              / UDP(sport=9, dport=9) / bytes(22))
FRAMES = 300


@pytest.fixture(scope="session")
def packetio_bin(fulmar_bin):
    return cargo_binary("PACKETIO_RATE", "agent", "packetio_rate")


@pytest.fixture
def fulmar(net, fulmar_bin, tmp_path):
    sw = Switch([fulmar_bin, "run", "--listen", "tcp:127.0.0.1:0", "--ctl", str(tmp_path / "ctl.sock"),
                 "--mgmt-dir", str(tmp_path), "--saved-tables", "none", "-i", SW_A, "-i", SW_B])
    yield sw
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err, err


def link_counter(ns, dev, name):
    argv = ["cat", f"/sys/class/net/{dev}/statistics/{name}"]
    r = in_ns(ns, *argv) if ns else subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def ports(fulmar_bin, tmp_path):
    """br0's ports by number, from `fulmar ctl stats --json`."""
    r = subprocess.run([fulmar_bin, "ctl", "-t", str(tmp_path / "ctl.sock"), "stats", "--json"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)[0]
    return {p["port"]: p for p in report["ports"]}, dict(report["drops"])


def start_controller(packetio_bin, sw, mode, seconds):
    p = subprocess.Popen([packetio_bin, mode, "--target", f"tcp:127.0.0.1:{listen_port(sw)}", "--seconds",
                          str(seconds), "--out-port", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    if line.strip() != "ready":
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"the controller did not start: {line}{err}{out}")
    return p


def results(p):
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err + out
    return {k: v for k, v in re.findall(r"^(\w+)=(.*)$", out, re.M)}


def test_reactive_packet_ins_answered_by_packet_outs_reach_b(fulmar, fulmar_bin, packetio_bin, tmp_path):
    b0 = link_counter(NS_B, "vb", "rx_packets")
    got = capture(NS_B, "vb", 6, FRAMES, "0800")
    ctl = start_controller(packetio_bin, fulmar, "reactive", 2)
    # Paced at half of the packet-in rate limit's 1000/s: every frame
    # should become a packet-in.
    r = in_ns(NS_A, sys.executable, HELPER, "flood", "va", FRAME.hex(), str(FRAMES), "500", timeout=60)
    assert r.returncode == 0 and re.search(r"sent (\d+) failed 0", r.stdout), r.stdout + r.stderr
    res = results(ctl)
    packet_ins, packet_outs = int(res["packet_ins"]), int(res["packet_outs"])
    print(f"{FRAMES} frames sent: {res}")
    assert packet_ins > 0, res
    assert packet_outs == packet_ins, res
    # Every packet-out the switch acknowledged reaches B.
    wait_for(lambda: link_counter(NS_B, "vb", "rx_packets") - b0 >= packet_outs, what="the packet-outs at B")
    assert link_counter(NS_B, "vb", "rx_packets") - b0 == packet_outs
    frames = got()
    assert len(frames) == packet_outs
    assert all(f == FRAME for f in frames), frames[:3]
    # Every frame port 1 received is a packet-in answered, one that came
    # after the window, or a packet-in drop counted by name. Each thread
    # publishes its own counters every few milliseconds: B may have the
    # last packet-out before port 2's count says so.

    def settled():
        p, drops = ports(fulmar_bin, tmp_path)
        done = p[2]["tx_packets"] >= packet_outs and p[1]["rx_packets"] + p[1]["rx_dropped"] >= FRAMES
        return done and (p, drops)

    p, drops = wait_for(settled, timeout=30, what="ports 1 and 2 to count every frame")
    pin_drops = sum(v for k, v in drops.items() if k.startswith("packet_in") or k == "controller_event_queue_full")
    assert p[1]["rx_packets"] + p[1]["rx_dropped"] == FRAMES, p
    assert packet_ins + int(res["late_packet_ins"]) + pin_drops == p[1]["rx_packets"], (res, drops)
    assert p[2]["tx_packets"] == packet_outs, p


def test_packet_outs_back_to_back_reach_b_or_are_counted(fulmar, fulmar_bin, packetio_bin, tmp_path):
    b0 = link_counter(NS_B, "vb", "rx_packets")
    k0 = link_counter(None, SW_B, "tx_dropped")
    ctl = start_controller(packetio_bin, fulmar, "packet-out", 1)
    res = results(ctl)
    packet_outs = int(res["packet_outs"])
    print(f"packet-out mode: {res}")
    assert packet_outs > 0, res

    def settled():
        p, _ = ports(fulmar_bin, tmp_path)
        return p[2]["tx_packets"] + p[2]["tx_dropped"] >= packet_outs and p

    p = wait_for(settled, what="port 2 to account for every packet-out")
    print(f"port 2: {p[2]}")
    # Acknowledged = sent by port 2 + port 2's counted drops (the injection
    # ring once lost packet-outs uncounted), and what port 2 sent reached B
    # unless the kernel's veth dropped it.
    assert p[2]["tx_packets"] + p[2]["tx_dropped"] == packet_outs, p[2]

    def at_b():
        return link_counter(NS_B, "vb", "rx_packets") - b0, link_counter(None, SW_B, "tx_dropped") - k0

    wait_for(lambda: sum(at_b()) >= p[2]["tx_packets"], what="the frames at B")
    assert sum(at_b()) == p[2]["tx_packets"], (at_b(), p[2])


def test_packet_ins_over_the_rate_limit_are_in_the_final_counters(net, fulmar_bin, packetio_bin, tmp_path):
    """Packet-ins the agent's rate limit refused are drops like any other:
    `fulmar ctl stats` names them while the switch runs, and the final
    counters printed at stop name them too (they once left them out)."""
    sw = Switch([fulmar_bin, "run", "--listen", "tcp:127.0.0.1:0", "--ctl", str(tmp_path / "ctl.sock"),
                 "--mgmt-dir", str(tmp_path), "--saved-tables", "none", "--packet-in-rate", "100",
                 "--packet-in-burst", "10", "-i", SW_A, "-i", SW_B])
    try:
        ctl = start_controller(packetio_bin, sw, "reactive", 2)
        # 300 frames as fast as A sends them against a limit of 100/s
        # (burst 10): most are refused however slow the machine is.
        r = in_ns(NS_A, sys.executable, HELPER, "flood", "va", FRAME.hex(), str(FRAMES), "0", timeout=60)
        assert r.returncode == 0 and re.search(r"sent (\d+) failed 0", r.stdout), r.stdout + r.stderr
        res = results(ctl)
        _, drops = ports(fulmar_bin, tmp_path)
        limited = drops.get("packet_in_rate_limited", 0)
        print(f"controller: {res}; drops while running: {drops}")
        assert limited > 0, drops
        assert int(res["packet_ins"]) < FRAMES - limited + 1, res
    finally:
        rc, out, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err, err
    m = re.search(r"^  drops: .*\bpacket_in_rate_limited=(\d+)", out, re.M)
    assert m, out
    assert int(m.group(1)) >= limited, out
