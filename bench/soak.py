#!/usr/bin/env python3
"""A long run (run as root; `bench/soak.sh` calls this): fulmar with many
flows forwarding paced traffic for a long time while a controller changes
flows and asks for statistics, checking that resident memory stays flat
and that every packet sent is accounted for.

    sudo bench/soak.sh [--seconds 1800] [--flows 1000000] [--pps 20000]

- Topology: namespaces A and B (prefix FULMAR_E2E_PREFIX, default "fsk")
  behind `fulmar run` ports 1 and 2; static flows forward 1 <-> 2.
- Flows: the agent's `flowmod_rate` example installs N more (in_port,
  IPv4 destination 11.0.0.0 + i: never hit by the traffic) over OpenFlow.
- Traffic: UDP frames from A to an address on B's side nobody has (B's
  kernel counts them and drops them quietly), paced at --pps, in rounds
  of a few seconds, by nshelper's raw-socket sender.
- Control: every 10 s a controller adds and deletes 100 flows (cookie of
  its own) and waits for a barrier; every 10 s it asks for port, table
  and aggregate statistics; every 5 minutes for every flow (a full dump).
- Checks, printed at the end: frames sent by A = frames B's kernel
  received + drops counted by fulmar by name + drops counted by the
  kernel on the four veth ends; resident memory (VmRSS) sampled every
  10 s, the maximum of the last fifth against the maximum of the first
  fifth after the install (flat: within 5 %).

Exit status 0 when both checks hold and the controller never failed (a
missing reply within its timeout fails the run), 1 otherwise.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
os.environ.setdefault("FULMAR_E2E_PREFIX", "fsk")

import e2e_support as e  # noqa: E402

def frame():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    return bytes(Ether(src=e.MAC_A, dst="02:00:00:00:0e:ff") / IP(src="10.9.0.1", dst="10.9.0.2")
                 / UDP(sport=9, dport=9) / bytes(18)).hex()


def setup():
    e.cleanup()
    for ns, sw, peer, mac, addr in ((e.NS_A, e.SW_A, "va", e.MAC_A, "10.9.0.1/24"),
                                    (e.NS_B, e.SW_B, "vb", e.MAC_B, "10.9.0.2/24")):
        e.sh("ip", "netns", "add", ns)
        e.sh("ip", "link", "add", sw, "type", "veth", "peer", "name", peer, "netns", ns)
        e.sh("ip", "link", "set", sw, "up")
        e.sh("ip", "-n", ns, "link", "set", peer, "address", mac, "up")
        e.sh("ip", "-n", ns, "addr", "add", addr, "dev", peer)
        e.sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        e.sh("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1", check=False)


def kernel(ns, dev):
    pre = ["ip", "netns", "exec", ns] if ns else []
    names = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")
    vals = subprocess.run([*pre, "cat", *(f"/sys/class/net/{dev}/statistics/{n}" for n in names)],
                          check=True, capture_output=True, text=True).stdout.split()
    return dict(zip(names, map(int, vals)))


def ends():
    return {"va": kernel(e.NS_A, "va"), "sa": kernel(None, e.SW_A), "sb": kernel(None, e.SW_B),
            "vb": kernel(e.NS_B, "vb")}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def ctl(fulmar, d, *args):
    r = subprocess.run([fulmar, "ctl", "-t", str(d / "ctl.sock"), *args], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"fulmar ctl {args}: {r.stderr}")
    return r.stdout


def controller(port, stop, log):
    """Flow changes and statistics requests until `stop`; a failure is
    logged as ("error", why) and fails the run."""
    try:
        controller_rounds(port, stop, log)
    except Exception as ex:  # noqa: BLE001 (any failure fails the soak)
        log.append(("error", f"{type(ex).__name__}: {ex}"))


def controller_rounds(port, stop, log):
    from of_client import DP, OfClient, ofp, parser

    c = OfClient(port, timeout=60)
    cookie = 0x50a4
    n = 0
    last_dump = time.monotonic()
    while not stop.wait(10):
        t = time.monotonic()
        for i in range(100):
            c.flow({"in_port": 3, "eth_type": 0x0800, "ipv4_dst": f"12.{n % 200}.{i}.1"},
                   [parser.OFPActionOutput(1)], priority=30, cookie=cookie)
        c.barrier(timeout=120)
        c.send(parser.OFPFlowMod(DP, table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE, cookie=cookie,
                                 cookie_mask=0xffffffffffffffff, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                 match=parser.OFPMatch()))
        c.barrier(timeout=120)
        for req in (parser.OFPPortStatsRequest(DP, 0, ofp.OFPP_ANY), parser.OFPTableStatsRequest(DP, 0),
                    parser.OFPAggregateStatsRequest(DP, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, 0, 0,
                                                    parser.OFPMatch())):
            c.send(req)
        c.barrier(timeout=120)
        if time.monotonic() - last_dump > 300:
            c.send(parser.OFPFlowStatsRequest(DP, table_id=ofp.OFPTT_ALL))
            c.barrier(timeout=600)
            last_dump = time.monotonic()
            log.append(("dump", time.monotonic() - t))
        log.append(("round", time.monotonic() - t))
        n += 1
    c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=1800)
    ap.add_argument("--flows", type=int, default=1_000_000)
    ap.add_argument("--pps", type=int, default=20000)
    ap.add_argument("--fulmar", default=str(ROOT / "target" / "release" / "fulmar"))
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "fulmar", "-p", "agent", "--example", "flowmod_rate"],
                   cwd=ROOT, check=True)
    client = ROOT / "target" / "release" / "examples" / "flowmod_rate"
    d = Path(tempfile.mkdtemp(prefix="fulmar-soak-"))
    flows = d / "flows"
    flows.write_text("table=0,priority=10,in_port=1,actions=output:2\ntable=0,priority=10,in_port=2,actions=output:1\n")
    setup()
    sw = None
    stop = threading.Event()
    ok = True
    try:
        sw = e.Switch([a.fulmar, "run", "-i", e.SW_A, "-i", e.SW_B, "--flows", str(flows), "--listen",
                       "tcp:127.0.0.1:0", "--ctl", str(d / "ctl.sock"), "--mgmt-dir", str(d)])
        port = int(re.search(r"listening for controllers on [\d.]+:(\d+)", "".join(sw.err_lines)).group(1))
        t = time.monotonic()
        r = subprocess.run([str(client), str(a.flows), "1", "--target", f"127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            sys.exit(f"flowmod_rate: {r.stdout}{r.stderr}")
        print(f"installed {a.flows} flows in {time.monotonic() - t:.1f} s: {r.stdout.strip().splitlines()[-1]}",
              flush=True)
        log = []
        ctl_thread = threading.Thread(target=controller, args=(port, stop, log), daemon=True)
        ctl_thread.start()
        before = ends()
        drops_before = dict(json.loads(ctl(a.fulmar, d, "stats", "--json"))[0]["drops"])
        fr = frame()
        sent = 0
        samples = []
        end = time.monotonic() + a.seconds
        next_sample = 0.0
        while time.monotonic() < end:
            chunk = max(1, min(5, int(end - time.monotonic())))
            out = e.in_ns(e.NS_A, sys.executable, e.HELPER, "flood", "va", fr, str(a.pps * chunk), str(a.pps),
                          timeout=chunk + 60)
            m = re.search(r"sent (\d+) failed (\d+)", out.stdout)
            if not m:
                sys.exit(f"sender: {out.stdout}{out.stderr}")
            sent += int(m.group(1))
            if time.monotonic() >= next_sample:
                samples.append((time.monotonic(), rss_kib(sw.proc.pid)))
                next_sample = time.monotonic() + 10
                if len(samples) % 30 == 0:
                    print(f"{len(samples) * 10 // 60} min: sent {sent}, RSS {samples[-1][1]} KiB", flush=True)
        time.sleep(2)
        after = ends()
        report = json.loads(ctl(a.fulmar, d, "stats", "--json"))[0]
        drops = {k: v - drops_before.get(k, 0) for k, v in report["drops"]}
        named = sum(v for k, v in drops.items() if v and not k.startswith("no_match"))
        delta = {k: {c: after[k][c] - before[k][c] for c in after[k]} for k in after}
        received = delta["vb"]["rx_packets"]
        kernel_drops = (delta["va"]["tx_dropped"] + delta["sa"]["rx_dropped"] + delta["sb"]["tx_dropped"]
                        + delta["vb"]["rx_dropped"])
        accounted = received + named + kernel_drops
        print(f"sent {sent}; received {received}; fulmar drops {named} "
              f"{ {k: v for k, v in drops.items() if v} }; kernel drops {kernel_drops}; "
              f"unaccounted {sent - accounted}")
        if sent != accounted:
            ok = False
        fifth = max(1, len(samples) // 5)
        first = max(s[1] for s in samples[:fifth])
        last = max(s[1] for s in samples[-fifth:])
        print(f"RSS max first fifth {first} KiB, last fifth {last} KiB ({(last - first) / first * 100:+.1f} %); "
              f"min {min(s[1] for s in samples)}, max {max(s[1] for s in samples)} over {len(samples)} samples")
        if last > first * 1.05:
            ok = False
        errors = [t for k, t in log if k == "error"]
        if errors:
            print(f"controller failed: {errors[0]}")
            ok = False
        rounds = [t for k, t in log if k == "round"]
        if rounds:
            print(f"controller: {len(rounds)} rounds of 200 flow-mods + stats, slowest {max(rounds):.2f} s; "
                  f"{sum(1 for k, _ in log if k == 'dump')} full flow dumps")
        print("soak:", "OK" if ok else "FAILED")
    finally:
        stop.set()
        if sw and sw.proc.poll() is None:
            sw.stop()
        e.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
