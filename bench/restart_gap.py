#!/usr/bin/env python3
"""The forwarding gap of a graceful restart (run as root).

Two namespaces A and B behind a `fulmar run --config` bridge whose flows
were installed over OpenFlow (ovs-ofctl on the management socket, as a
controller would; no controller runs). A sends numbered frames to B at a
fixed rate, one every `--interval` seconds, whatever arrives; B records
the numbers it receives. The switch is stopped (SIGINT) and started again
`--restarts` times; each time the gap is the longest run of numbers B did
not receive, in time, and the restart time is from the signal until the
new process says it runs.

(An earlier version pinged and counted unanswered ICMP sequence numbers.
That undercounts: iputils ping stops sending while its replies are
missing, so a 270 ms outage left no hole in the sequence and was reported
as 9 ms.) With `--no-saved` the tables are not saved (fulmar's
`--saved-tables none`), so after a restart nothing passes until a
controller would reinstall the flows: the gap then ends only when this
script reinstalls them (what a controller reconnecting would do).

    sudo python3 bench/restart_gap.py [--restarts 10] [--interval 0.001] [--flows N] [--no-saved]

`--flows N` adds N more flows (distinct priorities, never hit) so the
save and restore have a table of that size to carry. Prints one line per
restart and the median, in milliseconds.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
os.environ.setdefault("FULMAR_E2E_PREFIX", "frg")

import e2e_support as e  # noqa: E402

# A to B, EtherType 0x88b5 (local experimental), 60 bytes; the sender
# writes the frame's number into its last four bytes.
FRAME = ("020000000e0b" "020000000e0a" "88b5") + "00" * 46


def setup():
    e.cleanup()
    for ns, sw, peer, addr in ((e.NS_A, e.SW_A, "va", "10.9.0.1/24"), (e.NS_B, e.SW_B, "vb", "10.9.0.2/24")):
        e.sh("ip", "netns", "add", ns)
        e.sh("ip", "link", "add", sw, "type", "veth", "peer", "name", peer, "netns", ns)
        e.sh("ip", "link", "set", sw, "up")
        e.sh("ip", "-n", ns, "link", "set", peer, "up")
        e.sh("ip", "-n", ns, "addr", "add", addr, "dev", peer)


def ofctl(d, *args):
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", args[0], f"unix:{d}/br0.mgmt", *args[1:]],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"ovs-ofctl {args[0]}: {r.stderr}")


def install(d, extra):
    flows = d / "flows"
    lines = ["table=0,priority=65000,in_port=1,actions=output:2",
             "table=0,priority=65000,in_port=2,actions=output:1"]
    # (at most 60,000 a table: tables hold 65,536 entries by default)
    lines += [f"table={1 + i // 60000},priority={1 + i % 60000},tcp,tp_dst={1 + i % 65000},nw_dst=10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255},actions=drop"
              for i in range(extra)]
    flows.write_text("\n".join(lines) + "\n")
    ofctl(d, "add-flows", str(flows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--restarts", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.001)
    ap.add_argument("--flows", type=int, default=0)
    ap.add_argument("--no-saved", action="store_true")
    ap.add_argument("--fulmar", default=str(ROOT / "target" / "release" / "fulmar"))
    a = ap.parse_args()
    if not Path(a.fulmar).exists():
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "fulmar"], cwd=ROOT, check=True)
    d = Path(tempfile.mkdtemp(prefix="fulmar-restart-"))
    cfg = d / "switch.toml"
    cfg.write_text('[[bridges]]\nname = "br0"\nfail_mode = "secure"\n'
                   f'[[bridges.ports]]\nport = 1\ninterface = "{e.SW_A}"\n'
                   f'[[bridges.ports]]\nport = 2\ninterface = "{e.SW_B}"\n')
    argv = [a.fulmar, "run", "--config", str(cfg), "--ctl", str(d / "ctl.sock"), "--mgmt-dir", str(d)]
    if a.no_saved:
        argv += ["--saved-tables", "none"]
    setup()
    sw = None
    try:
        sw = e.Switch(argv)
        install(d, a.flows)
        gaps, restarts = [], []
        for i in range(a.restarts):
            span = 2.0 + (a.flows / 100_000)
            count = int((span + 3.0) / a.interval)
            pps = 1.0 / a.interval
            receiver = subprocess.Popen(["ip", "netns", "exec", e.NS_B, sys.executable, e.HELPER, "seqs", "vb",
                                         str(span + 4.0), "88b5"], stdout=subprocess.PIPE, text=True)
            if receiver.stdout.readline().strip() != "ready":
                sys.exit("the receiver in B did not start")
            sender = subprocess.Popen(["ip", "netns", "exec", e.NS_A, sys.executable, e.HELPER, "seqflood", "va",
                                       FRAME, str(count), str(pps), "sleep"], stdout=subprocess.PIPE, text=True)
            time.sleep(1.0)
            t0 = time.monotonic()
            sw.stop()
            sw = e.Switch(argv)
            restart = time.monotonic() - t0
            if a.no_saved:
                install(d, a.flows)
            sent, _ = sender.communicate(timeout=span + 60)
            m = re.search(r"sent (\d+) failed (\d+)", sent)
            if not m or int(m.group(2)) != 0:
                sys.exit(f"the sender in A failed: {sent}")
            got, _ = receiver.communicate(timeout=span + 60)
            seqs = sorted({int(x) for x in got.split()})
            # Numbers before the first and after the last count as missing.
            edges = [-1, *seqs, count]
            gap = max(y - x - 1 for x, y in zip(edges, edges[1:])) * a.interval
            gaps.append(gap)
            restarts.append(restart)
            print(f"restart {i + 1}: process restart {restart * 1000:.0f} ms, forwarding gap {gap * 1000:.0f} ms "
                  f"({len(seqs)} of {count} frames arrived)", flush=True)
        print(f"median: process restart {statistics.median(restarts) * 1000:.0f} ms, "
              f"forwarding gap {statistics.median(gaps) * 1000:.0f} ms "
              f"(flows {a.flows + 2}, {'no saved tables: flows reinstalled by this script' if a.no_saved else 'saved tables'})")
    finally:
        if sw and sw.proc.poll() is None:
            sw.stop()
        e.cleanup()


if __name__ == "__main__":
    main()
