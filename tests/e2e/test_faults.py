"""End-to-end: faults under traffic, each counting what it sends and
checking that nothing is lost that should not be.

- A controller that connects and disconnects every second (fail mode
  secure and standalone): a ping flood loses nothing, memory stays flat.
- A link going down and up under a fast-failover group: frames move to
  the backup port and back; the frames lost at each switch are one short
  run, and the switching time is printed.
- A packet-in flood: every frame is a packet-in the controller got or a
  packet-in drop counted by name; memory is bounded and flow-mods are
  still answered.
- A controller that stops reading: the switch's buffers stay bounded,
  the channel is closed, and forwarding never stops.
- Tens of thousands of flow-mods while forwarding: a ping flood loses
  nothing.
- Configuration changes with errors while forwarding: each is refused,
  nothing changes, a ping flood loses nothing.
- Flows removed by the tens of thousands (one DELETE, idle timeouts): the
  controller gets a FLOW_REMOVED for every one, and a flow deleted right
  after traffic, or timed out during it, reports every frame it forwarded.

Topology: the `net` fixture's hosts A (10.9.0.1, port 1) and B (10.9.0.2,
port 2); the failover test adds a second link into B (port 3).
Durations are short here; `FULMAR_FAULT_SECONDS` lengthens the flapping
and the reading-stall runs (bench/soak.sh runs the long versions).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from cargo_binary import cargo_binary
from e2e_support import HELPER, MAC_A, NS_A, NS_B, P, SW_A, SW_B, Switch, in_ns, sh, wait_for
from of_client import DP, OfClient, listen_port, ofp, parser

SECONDS = int(os.environ.get("FULMAR_FAULT_SECONDS", "12"))
FORWARD = "table=0,priority=10,in_port=1,actions=output:2\ntable=0,priority=10,in_port=2,actions=output:1\n"
# UDP to a MAC address nobody has: B's kernel counts the frame and ignores
# it; the last four bytes carry a sequence number (nshelper seqflood).
FRAME = bytes(Ether(src=MAC_A, dst="02:00:00:00:0e:ff") / IP(src="10.9.0.1", dst="10.9.0.2") / UDP(sport=9, dport=9)
              / bytes(22))


def need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"needs {t}")


def start(fulmar_bin, tmp_path, *extra, interfaces=(SW_A, SW_B)):
    argv = [fulmar_bin, "run", "--listen", "tcp:127.0.0.1:0", "--ctl", str(tmp_path / "ctl.sock"),
            "--mgmt-dir", str(tmp_path), "--saved-tables", "none"]
    for i in interfaces:
        argv += ["-i", i]
    return Switch(argv + list(extra))


def stop_ok(sw):
    rc, _, err = sw.stop()
    assert rc == 0, err
    assert "panicked" not in err, err


def rss_kib(sw):
    with open(f"/proc/{sw.proc.pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def ctl_json(fulmar_bin, tmp_path, *args):
    r = subprocess.run([fulmar_bin, "ctl", "-t", str(tmp_path / "ctl.sock"), *args, "--json"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def report(fulmar_bin, tmp_path):
    """br0's report: ports by number, drops by name."""
    r = ctl_json(fulmar_bin, tmp_path, "stats")[0]
    return {p["port"]: p for p in r["ports"]}, dict(r["drops"])


def channels(fulmar_bin, tmp_path):
    return sum(c["channels"] for c in ctl_json(fulmar_bin, tmp_path, "show")["bridges"][0]["controllers"])


class Pinger:
    """A ping from A to B every `interval` seconds, `count` times."""

    def __init__(self, count, interval=0.01):
        self.p = subprocess.Popen(["ip", "netns", "exec", NS_A, "ping", "-n", "-q", "-c", str(count), "-i",
                                   str(interval), "-W", "2", "10.9.0.2"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def result(self, timeout=120):
        """(transmitted, received)."""
        out, err = self.p.communicate(timeout=timeout)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert m, out + err
        return int(m.group(1)), int(m.group(2))


def flood(count, pps, numbered=False):
    r = in_ns(NS_A, sys.executable, HELPER, "seqflood" if numbered else "flood", "va", FRAME.hex(), str(count),
              str(pps), timeout=120)
    assert r.returncode == 0, r.stderr
    m = re.search(r"sent (\d+) failed (\d+)", r.stdout)
    assert m and m.group(2) == "0", r.stdout
    return int(m.group(1))


@pytest.mark.parametrize("mode", ["secure", "standalone"])
def test_a_controller_flapping_every_second_loses_no_traffic(net, fulmar_bin, tmp_path, mode):
    """A controller connects (HELLO, installs its two flows, BARRIER) and
    disconnects every second for FULMAR_FAULT_SECONDS; meanwhile a ping
    every 10 ms loses nothing (secure: the flows stay; standalone: the
    learning switch takes over while it is away), and the switch's
    resident memory after the flaps is within 2 MiB of before."""
    need("ping")
    flows = tmp_path / "flows"
    flows.write_text(FORWARD)
    sw = start(fulmar_bin, tmp_path, "--flows", str(flows), "--fail-mode", mode)
    try:
        port = listen_port(sw)
        # Warm up: one connection, so what a channel allocates once is in.
        c = OfClient(port)
        c.forward(1, 2)
        c.barrier()
        c.close()
        pinger = Pinger(SECONDS * 100)
        time.sleep(0.5)
        rss0 = rss_kib(sw)
        # A fixed number of flaps, each about a second, within the pings.
        flaps = 0
        while flaps < max(1, SECONDS - 2):
            c = OfClient(port)
            c.forward(1, 2)
            c.barrier()
            time.sleep(0.5)
            c.close()
            flaps += 1
            time.sleep(0.5)
        wait_for(lambda: channels(fulmar_bin, tmp_path) == 0, 5, "the last channel to close")
        rss1 = rss_kib(sw)
        sent, got = pinger.result()
        print(f"{mode}: {flaps} flaps, ping {got}/{sent}, RSS {rss0} -> {rss1} KiB")
        assert got == sent, f"{sent - got} pings lost while the controller flapped"
        assert rss1 - rss0 < 2048, f"resident memory grew {rss1 - rss0} KiB over {flaps} flaps"
    finally:
        stop_ok(sw)


@pytest.fixture
def second_link_to_b(net):
    """A third switch port, SW_C, whose far end vb3 is in B's namespace."""
    sw_c = f"{P}-sc"
    sh("ip", "link", "del", sw_c, check=False)
    sh("ip", "link", "add", sw_c, "type", "veth", "peer", "name", "vb3", "netns", NS_B)
    sh("ip", "link", "set", sw_c, "up")
    sh("ip", "-n", NS_B, "link", "set", "vb3", "up")
    sh("sysctl", "-qw", f"net.ipv6.conf.{sw_c}.disable_ipv6=1", check=False)
    try:
        yield sw_c
    finally:
        sh("ip", "link", "del", sw_c, check=False)


def runs(missing):
    """Consecutive runs in a sorted list of numbers: [(first, last), ...]."""
    out = []
    for n in missing:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def test_fast_failover_moves_traffic_when_a_link_goes_down_and_back(second_link_to_b, fulmar_bin, tmp_path):
    """Port 1's frames go to group 1 (fast failover: port 2 while it is
    live, else port 3). 6000 numbered frames at 1000/s; port 2's link
    goes down after about 1 s and up after about 2 s. Frames reach B on
    vb, then vb3, then vb again; none twice; the lost ones are at most one
    run per switch (how long each lasted is printed: a figure, not a
    bound), and each is counted: by the switch as a frame its port could
    not send (port_tx_link_down), or by the kernel as a frame dropped on
    the veth going down."""
    sw_c = second_link_to_b
    cfg = tmp_path / "ff.toml"
    cfg.write_text(
        '[[bridges]]\nname = "br0"\n'
        'groups = ["group_id=1,type=fast_failover,bucket=watch_port:2,actions=output:2,'
        'bucket=watch_port:3,actions=output:3"]\n'
        'flows = ["table=0,priority=10,in_port=1,actions=group:1"]\n'
        + "".join(f'[[bridges.ports]]\nport = {n}\ninterface = "{i}"\n' for n, i in ((1, SW_A), (2, SW_B), (3, sw_c)))
    )
    sw = Switch([fulmar_bin, "run", "--config", str(cfg), "--ctl", str(tmp_path / "ctl.sock"),
                 "--mgmt-dir", str(tmp_path), "--saved-tables", "none"])
    def kernel_drops():
        return sum(int(open(f"/sys/class/net/{SW_B}/statistics/{c}").read()) for c in ("tx_dropped", "rx_dropped"))

    frames = 6000
    caps = {}
    try:
        k0 = kernel_drops()
        # vb's capture ends at the last frame (port 2 is back by then),
        # vb3's when told; both at the latest after two minutes.
        caps = {dev: subprocess.Popen(["ip", "netns", "exec", NS_B, sys.executable, HELPER, "seqs", dev, "120", "0800",
                                       *([str(frames - 1)] if dev == "vb" else [])],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for dev in ("vb", "vb3")}
        for c in caps.values():
            assert c.stdout.readline().strip() == "ready"
        sender = threading.Thread(target=lambda: flood(frames, 1000, numbered=True))
        sender.start()
        time.sleep(1.0)
        sh("ip", "link", "set", SW_B, "down")
        time.sleep(1.0)
        sh("ip", "link", "set", SW_B, "up")
        sender.join()
        # (Not communicate(): closing vb's stdin would end it at once.)
        on_b = [int(x) for x in caps["vb"].stdout.read().split()]
        caps["vb"].wait(timeout=30)
        on_c = [int(x) for x in caps["vb3"].communicate(input="stop\n", timeout=30)[0].split()]
        assert not set(on_b) & set(on_c), "a frame arrived on both links"
        assert on_c, "nothing moved to the backup port"
        first_c, last_c = min(on_c), max(on_c)
        assert [s for s in on_b if s > last_c], "nothing came back to port 2 after its link came up"
        missing = sorted(set(range(frames)) - set(on_b) - set(on_c))
        gaps = runs(missing)
        ports, drops = report(fulmar_bin, tmp_path)
        print(f"backup port took frames {first_c}..{last_c}; lost runs {gaps} (ms at 1000/s); "
              f"port 2 tx drops {ports[2]['tx_dropped']}, drops { {k: v for k, v in drops.items() if v} }")
        assert len(gaps) <= 2, f"frames lost outside the two switches: {gaps}"
        assert len(missing) == drops["port_tx_link_down"] + kernel_drops() - k0
    finally:
        for c in caps.values():
            c.kill()
        stop_ok(sw)


def test_a_packet_in_flood_is_bounded_and_accounted_for(net, fulmar_bin, tmp_path):
    """Every frame misses into a packet-in. 20000 frames as fast as A can
    send: the controller's packet-ins plus the packet-in drops by name
    (rate limit, full queues, none sent) equal what port 1 received;
    memory grows by less than 32 MiB; a flow-mod and barrier every 50 ms
    are all answered."""
    sw = start(fulmar_bin, tmp_path)
    try:
        c = OfClient(listen_port(sw))
        c.miss_to_controller()
        c.barrier()
        rss0 = rss_kib(sw)
        latencies, stop = [], threading.Event()

        def flow_mods():
            i = 0
            while not stop.is_set():
                c.flow({"in_port": 1, "eth_type": 0x0800, "ipv4_dst": f"11.0.{i // 250}.{i % 250 + 1}"},
                       [parser.OFPActionOutput(2)], priority=100)
                latencies.append(c.barrier(timeout=10))
                i += 1
                time.sleep(0.05)

        t = threading.Thread(target=flow_mods)
        t.start()
        sent = flood(20000, 0)
        time.sleep(1)
        rss1 = rss_kib(sw)
        # At least five flow-mods and barriers answered during and after
        # the flood, however long they take on this machine.
        wait_for(lambda: len(latencies) >= 5, 120, "five flow-mods and barriers answered")
        stop.set()
        t.join(timeout=30)
        # The queues drain at the rate limit; wait until nothing more comes.
        last = -1
        while c.packet_ins != last:
            last = c.packet_ins
            time.sleep(1)
        ports, drops = report(fulmar_bin, tmp_path)
        received = ports[1]["rx_packets"]
        pin_drops = {k: v for k, v in drops.items() if k.startswith("packet_in")}
        print(f"sent {sent}, port 1 rx {received} (+{ports[1]['rx_dropped']} dropped at the port), "
              f"packet-ins {c.packet_ins}, {pin_drops}; RSS {rss0} -> {rss1} KiB; "
              f"barrier max {max(latencies) * 1000:.1f} ms over {len(latencies)}")
        assert sent == received + ports[1]["rx_dropped"]
        assert received == c.packet_ins + sum(pin_drops.values())
        assert c.packet_ins > 0 and len(latencies) >= 5
        assert rss1 - rss0 < 32 * 1024
        c.close()
    finally:
        stop_ok(sw)


def test_a_controller_that_stops_reading_is_disconnected_and_forwarding_goes_on(net, fulmar_bin, tmp_path):
    """A controller installs 3000 flows, then stops reading and asks for
    the flow table again and again (each reply ~300 KB): the switch's
    output to it stays bounded (memory within 64 MiB), the channel closes
    once its output has waited the keepalive time (15 s), and a ping every
    10 ms between A and B, forwarded by the flows, loses nothing."""
    need("ping")
    flows = tmp_path / "flows"
    flows.write_text(FORWARD)
    sw = start(fulmar_bin, tmp_path, "--flows", str(flows))
    try:
        c = OfClient(listen_port(sw))
        for i in range(3000):
            c.flow({"in_port": 3, "eth_type": 0x0800, "ipv4_dst": f"12.0.{i // 250}.{i % 250 + 1}"},
                   [parser.OFPActionOutput(1)], priority=50)
        c.barrier()
        # Past the close (15 s after the stall) by a few seconds; a late
        # close only leaves fewer pings after it.
        pinger = Pinger((SECONDS + 9) * 100)
        rss0 = rss_kib(sw)
        c.reading.clear()
        t0 = time.monotonic()

        def ask():
            try:
                for _ in range(200):
                    c.send(parser.OFPFlowStatsRequest(DP, table_id=ofp.OFPTT_ALL))
            except OSError:
                pass  # the switch closed the channel (or stopped reading ours)

        threading.Thread(target=ask, daemon=True).start()
        wait_for(lambda: channels(fulmar_bin, tmp_path) == 0, 40, "the switch to close the stalled channel")
        closed_after = time.monotonic() - t0
        rss1 = rss_kib(sw)
        sent, got = pinger.result()
        print(f"closed after {closed_after:.1f} s; RSS {rss0} -> {rss1} KiB; ping {got}/{sent}")
        assert got == sent, f"{sent - got} pings lost"
        assert rss1 - rss0 < 64 * 1024
        c.close()
    finally:
        stop_ok(sw)


def test_flow_mods_while_forwarding_lose_no_traffic(net, fulmar_bin, tmp_path):
    """A controller (the agent's flowmod_rate example) installs 50,000
    flows, as fast as the switch takes them, while A pings B every 5 ms
    through two other flows: no ping is lost, and every flow is in."""
    need("ping")
    client = cargo_binary("FLOWMOD_RATE", "agent", "flowmod_rate")
    flows = tmp_path / "flows"
    flows.write_text(FORWARD)
    sw = start(fulmar_bin, tmp_path, "--flows", str(flows))
    try:
        port = listen_port(sw)
        pinger = Pinger(1000, interval=0.005)
        time.sleep(0.5)
        r = subprocess.run([str(client), "50000", "1", "--target", f"127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        sent, got = pinger.result()
        print(r.stdout.strip().splitlines()[-1], f"; ping {got}/{sent}")
        assert got == sent, f"{sent - got} pings lost while flows went in"
    finally:
        stop_ok(sw)


def test_configuration_changes_with_errors_change_nothing_under_traffic(net, fulmar_bin, tmp_path):
    """While A pings B every 10 ms: a port on a missing interface, a
    transaction whose second part is bad, a bad controller target, a bad
    value, loading a broken file. Each is refused with its reason, `show`
    is the same after each, and no ping is lost."""
    need("ping")
    cfg = tmp_path / "switch.toml"
    cfg.write_text(
        '[[bridges]]\nname = "br0"\n'
        'flows = ["table=0,priority=10,in_port=1,actions=output:2", "table=0,priority=10,in_port=2,actions=output:1"]\n'
        f'[[bridges.ports]]\nport = 1\ninterface = "{SW_A}"\n[[bridges.ports]]\nport = 2\ninterface = "{SW_B}"\n'
    )
    bad = tmp_path / "bad.toml"
    bad.write_text('[[bridges]]\nname = "br0"\n[[bridges.ports]]\nport = "one"\n')
    sw = Switch([fulmar_bin, "run", "--config", str(cfg), "--ctl", str(tmp_path / "ctl.sock"),
                 "--mgmt-dir", str(tmp_path), "--saved-tables", "none"])
    try:
        before = ctl_json(fulmar_bin, tmp_path, "show")
        saved = cfg.read_text()
        pinger = Pinger(400)
        time.sleep(0.5)
        for words in (
            ["add-port", "br0", f"{P}-missing"],
            ["add-br", "br1", "--", "add-port", "br1", f"{P}-missing"],
            ["set-controller", "br0", "tcp:10.0.0.1:99999"],
            ["set", "bridge:br0", "miss_send_len=notanumber"],
            ["load", str(bad)],
        ):
            r = subprocess.run([fulmar_bin, "ctl", "-t", str(tmp_path / "ctl.sock"), *words],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode != 0, f"{words} was accepted: {r.stdout}"
            assert r.stderr.strip(), f"{words} refused without a reason"
            assert ctl_json(fulmar_bin, tmp_path, "show") == before, words
            time.sleep(0.3)
        sent, got = pinger.result()
        assert got == sent, f"{sent - got} pings lost"
        assert cfg.read_text() == saved
    finally:
        stop_ok(sw)


def test_every_removed_flow_reaches_the_controller_as_flow_removed(net, fulmar_bin, tmp_path):
    """20000 flows with OFPFF_SEND_FLOW_REM and one DELETE of every flow:
    the controller gets 20000 FLOW_REMOVED, one per cookie (the switch's
    event queue of 1024, shared with packet-ins, once delivered 1024 and
    lost the rest without counting them), all before the BARRIER_REPLY
    that follows the DELETE (OpenFlow: what a message before a barrier
    causes is sent before the barrier's reply). Then 5000 flows with a
    1 s idle timeout expire: 5000 more, reason IDLE_TIMEOUT."""
    sw = start(fulmar_bin, tmp_path)
    try:
        c = OfClient(listen_port(sw))

        def flows(n, base, **kw):
            return [parser.OFPFlowMod(DP, table_id=0, priority=10, cookie=base + i, flags=ofp.OFPFF_SEND_FLOW_REM,
                                      match=parser.OFPMatch(eth_type=0x0800, ipv4_dst=0x0B000000 + base + i),
                                      instructions=[parser.OFPInstructionActions(
                                          ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(2)])], **kw)
                    for i in range(n)]

        def wait_removed(n, timeout=30):
            deadline = time.monotonic() + timeout
            while len(c.flow_removed) < n and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)  # and nothing more
            return len(c.flow_removed)

        c.send_all(flows(20000, 0))
        c.barrier(timeout=60)
        assert not c.flow_removed
        c.send(parser.OFPFlowMod(DP, table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                                 out_group=ofp.OFPG_ANY, match=parser.OFPMatch()))
        c.barrier(timeout=60)
        before = len(c.flow_removed)
        got = wait_removed(20000)
        print(f"DELETE of 20000 flows: {got} FLOW_REMOVED, {before} of them before the BARRIER_REPLY")
        assert got == 20000
        assert before == 20000
        assert sorted(c.flow_removed) == [(i, ofp.OFPRR_DELETE) for i in range(20000)]
        c.flow_removed.clear()
        c.send_all(flows(5000, 100000, idle_timeout=1))
        c.barrier(timeout=60)
        got = wait_removed(5000)
        print(f"idle timeout of 5000 flows: {got} FLOW_REMOVED")
        assert got == 5000
        assert sorted(c.flow_removed) == [(i, ofp.OFPRR_IDLE_TIMEOUT) for i in range(100000, 105000)]
        assert not c.errors
        c.close()
    finally:
        stop_ok(sw)


def test_a_flow_deleted_right_after_traffic_reports_every_frame_in_its_flow_removed(net, fulmar_bin, tmp_path):
    """A flow with OFPFF_SEND_FLOW_REM forwards 3000 frames from A and is
    deleted 50 ms later, inside the workers' 20 ms counter hand-over
    period at worst: its FLOW_REMOVED counts every frame port 1 received
    but those the worker read after the delete, which miss (it used to
    say 0: a delete did not collect the workers' counters)."""
    sw = start(fulmar_bin, tmp_path)
    try:
        c = OfClient(listen_port(sw))
        c.flow({"in_port": 1}, [parser.OFPActionOutput(2)], cookie=9, flags=ofp.OFPFF_SEND_FLOW_REM)
        c.barrier()
        sent = flood(3000, 0)
        time.sleep(0.05)
        c.flow({"in_port": 1}, command=ofp.OFPFC_DELETE_STRICT, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)
        c.barrier()
        counts = c.removed_counts.get(9)
        assert counts is not None, "no FLOW_REMOVED before the barrier's reply"
        # A frame the worker reads after the delete (a backlog the flood
        # left) misses: every frame port 1 received is in the flow's
        # count or a miss. Each thread publishes its counters every few
        # milliseconds, so read them until they say so or a deadline.
        deadline = time.monotonic() + 10
        while True:
            ports, drops = report(fulmar_bin, tmp_path)
            missed = drops.get("no_match", 0)
            if counts[0] + missed == ports[1]["rx_packets"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        print(f"sent {sent}, port 1 rx {ports[1]['rx_packets']} frames {ports[1]['rx_bytes']} bytes, "
              f"{missed} missed after the delete; FLOW_REMOVED {counts}")
        assert counts[0] > 0
        assert counts[0] + missed == ports[1]["rx_packets"], (counts, ports[1], drops)
        frame_len = ports[1]["rx_bytes"] // ports[1]["rx_packets"]
        assert counts[1] == counts[0] * frame_len, (counts, ports[1])
        c.close()
    finally:
        stop_ok(sw)


def removed_counts_what_port_2_sent(fulmar_bin, tmp_path, c, sent, what):
    """The FLOW_REMOVED of cookie 9 (in_port 1 -> 2) counts exactly the
    frames port 2 sent, and the flow went while traffic ran (later frames
    missed)."""
    time.sleep(0.5)
    ports, drops = report(fulmar_bin, tmp_path)
    counts = c.removed_counts.get(9)
    forwarded = ports[2]["tx_packets"]
    print(f"sent {sent}, port 1 rx {ports[1]['rx_packets']}, port 2 tx {forwarded}, "
          f"no_match {drops.get('no_match')}; FLOW_REMOVED {counts}")
    assert counts is not None and forwarded > 0 and drops.get("no_match", 0) > 0, \
        f"the flow did not {what} under traffic"
    assert counts[0] == forwarded


def test_a_flow_timed_out_under_traffic_reports_the_frames_it_forwarded(net, fulmar_bin, tmp_path):
    """A flow with a 1 s hard timeout and OFPFF_SEND_FLOW_REM forwards A's
    10,000 frames/s until it expires (the rest miss): its FLOW_REMOVED
    counts exactly what port 2 sent. The expiry used to take the counters
    the workers handed over every 20 ms without asking (up to 200 frames
    short, 9-178 measured), then asked for them before removing the flow
    but not after, which missed the frames forwarded until the workers
    took the new tables (2-3 frames on a quiet machine, about 40 with both
    cores busy)."""
    sw = start(fulmar_bin, tmp_path)
    try:
        c = OfClient(listen_port(sw))
        c.flow({"in_port": 1}, [parser.OFPActionOutput(2)], cookie=9, flags=ofp.OFPFF_SEND_FLOW_REM, hard_timeout=1)
        c.barrier()
        sent = flood(25000, 10000)
        removed_counts_what_port_2_sent(fulmar_bin, tmp_path, c, sent, "time out")
        c.close()
    finally:
        stop_ok(sw)


def test_a_flow_deleted_under_traffic_reports_the_frames_it_forwarded(net, fulmar_bin, tmp_path):
    """A flow with OFPFF_SEND_FLOW_REM forwards A's 10,000 frames/s and is
    deleted in the middle of the flood (the rest miss): its FLOW_REMOVED
    counts exactly what port 2 sent. A delete used to take the workers'
    counters and report at once, before the tables without the flow were
    published at the end of the agent's batch, so the frames forwarded
    until the workers took them were missing (as with timeouts, see the
    test above)."""
    sw = start(fulmar_bin, tmp_path)
    try:
        c = OfClient(listen_port(sw))
        c.flow({"in_port": 1}, [parser.OFPActionOutput(2)], cookie=9, flags=ofp.OFPFF_SEND_FLOW_REM)
        c.barrier()
        sent = []
        t = threading.Thread(target=lambda: sent.append(flood(25000, 10000)))
        t.start()
        time.sleep(1.0)
        c.flow({"in_port": 1}, command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)
        c.barrier()
        t.join(timeout=60)
        removed_counts_what_port_2_sent(fulmar_bin, tmp_path, c, sent, "get deleted")
        c.close()
    finally:
        stop_ok(sw)
