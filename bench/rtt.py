#!/usr/bin/env python3
"""Light-load latency: ping RTT through fulmar vs a direct veth pair and vs
the least a userspace forwarder can do, measured in alternation.

    sudo python3 bench/rtt.py [--rounds 3] [--count 50] [--interval 0.02]
                              [--only LABEL,...] [--variant LABEL=ARGS]...
                              [--prefix rtt-] [--json]

Topology (names PREFIX*, by default rtt-*, removed on exit, also on Ctrl-C):

    ns rtt-a: rtt-va 10.77.0.1 == rtt-sa [port 1] FORWARDER [port 2] rtt-sb == rtt-vb 10.77.0.2 :ns rtt-b
    ns rtt-d1: rtt-d1 10.78.0.1 ===================================== rtt-d2 10.78.0.2 :ns rtt-d2

Forwarders, each started for its own measurement and stopped after it:

    reference       target/release/examples/reference_forwarder (poll, recv,
                    send: what any forwarder that sleeps when idle pays)
    reference-busy  the same, never sleeping
    rtc, rwt        fulmar run --mode run-to-completion / rx-worker-tx,
                    defaults otherwise (threads sleep when idle)
    rtc-busy, rwt-busy  the same with --poll-us busy (a core per thread)

Every round pings the direct pair, then each forwarder in turn, then the
direct pair again, so a slow minute on a shared machine hits all of them.
ICMP echo is answered by the far namespace's kernel, so the direct pair
involves no process wake-up at all; through a forwarder the forwarder and
the pinging process each wait for one. The table gives per-ping medians,
10th/90th percentiles and the median's ratio to the direct pair's and to
the sleeping reference forwarder's. Needs root, ip(8) and ping(8).
"""

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
P = "rtt-"  # --prefix
FLOWS = "table=0,priority=10,in_port=1,actions=output:2\ntable=0,priority=10,in_port=2,actions=output:1\n"


def sh(cmd, check=True):
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


def cleanup():
    for ns in ("a", "b", "d1", "d2"):
        sh(f"ip netns del {P}{ns}", check=False)
    for link in ("sa", "sb"):
        sh(f"ip link del {P}{link}", check=False)


def setup():
    cleanup()
    for side, addr in (("a", "10.77.0.1/24"), ("b", "10.77.0.2/24")):
        ns, root, peer = f"{P}{side}", f"{P}s{side}", f"{P}v{side}"
        sh(f"ip netns add {ns}")
        sh(f"ip link add {root} type veth peer name {peer} netns {ns}")
        sh(f"ip link set {root} up")
        sh(f"ip -n {ns} link set {peer} up")
        sh(f"ip -n {ns} addr add {addr} dev {peer}")
        sh(f"ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1", check=False)
        sh(f"sysctl -qw net.ipv6.conf.{root}.disable_ipv6=1", check=False)
    sh(f"ip netns add {P}d1")
    sh(f"ip netns add {P}d2")
    sh(f"ip link add {P}d1 netns {P}d1 type veth peer name {P}d2 netns {P}d2")
    for side, addr in (("d1", "10.78.0.1/24"), ("d2", "10.78.0.2/24")):
        sh(f"ip -n {P}{side} addr add {addr} dev {P}{side}")
        sh(f"ip -n {P}{side} link set {P}{side} up")


def pings(ns, dst, count, interval):
    out = sh(f"ip netns exec {ns} ping -n -c {count} -i {interval} -W 2 {dst}", check=False).stdout
    return [float(x) * 1000.0 for x in re.findall(r"time=([\d.]+) ms", out)]


def forwarders(fulmar, reference, flows):
    run = [fulmar, "run", "-i", f"{P}sa", "-i", f"{P}sb", "--flows", str(flows)]
    ref = [reference, f"{P}sa", f"{P}sb"]
    return run, {
        "reference": ref,
        "reference-busy": ref + ["--busy"],
        "rtc": run + ["--mode", "run-to-completion"],
        "rwt": run + ["--mode", "rx-worker-tx"],
        "rtc-busy": run + ["--mode", "run-to-completion", "--poll-us", "busy"],
        "rwt-busy": run + ["--mode", "rx-worker-tx", "--poll-us", "busy"],
    }


def summary(values):
    v = sorted(values)
    return {
        "n": len(v),
        "median_us": statistics.median(v),
        "p10_us": v[len(v) // 10],
        "p90_us": v[len(v) * 9 // 10],
        "mean_us": statistics.mean(v),
    }


def main():
    global P
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=50, help="pings per forwarder per round")
    ap.add_argument("--interval", default="0.02", help="seconds between pings")
    ap.add_argument("--only", help="comma-separated forwarder labels")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=ARGS",
        help="also measure `fulmar run` with these extra arguments (repeatable); "
        "leading NAME=VALUE words set its environment; ARGS starting with "
        "'reference' give the reference forwarder's flags instead",
    )
    ap.add_argument("--fulmar", default=str(ROOT / "target/release/fulmar"))
    ap.add_argument("--reference", default=str(ROOT / "target/release/examples/reference_forwarder"))
    ap.add_argument("--prefix", default=P, help="of every namespace and link made (at most 6 characters)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    P = args.prefix
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,6}", P):
        sys.exit(f"bench/rtt.py: --prefix {P!r}: 1 to 6 letters, digits, '-' or '_'")
    if os.geteuid() != 0:
        sys.exit("bench/rtt.py: needs root (network namespaces)")
    for tool, path in (("fulmar", args.fulmar), ("reference forwarder", args.reference)):
        if not os.access(path, os.X_OK):
            sys.exit(
                f"bench/rtt.py: no {tool} at {path} (cargo build --release -p fulmar; "
                "cargo build --release -p dataplane --example reference_forwarder)"
            )
    flows = Path(f"/tmp/{P}flows")
    flows.write_text(FLOWS)
    run, table = forwarders(args.fulmar, args.reference, flows)
    reference = table["reference"]
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in table]
        if unknown:
            sys.exit(f"bench/rtt.py: unknown forwarder {', '.join(unknown)}; known: {', '.join(table)}")
        table = {k: table[k] for k in wanted}
    for v in args.variant:
        label, sep, extra = v.partition("=")
        if not sep or not label:
            sys.exit(f"bench/rtt.py: --variant {v!r}: expected LABEL=ARGS")
        words = shlex.split(extra)
        env = []
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            env.append(words.pop(0))
        # Leading NAME=VALUE words set the forwarder's environment.
        prefix = ["env", *env] if env else []
        if words[:1] == ["reference"]:
            table[label] = prefix + reference + words[1:]
        else:
            table[label] = prefix + run + words

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    results = {"direct": []}
    results.update({k: [] for k in table})
    try:
        setup()
        for _ in range(args.rounds):
            results["direct"] += pings(f"{P}d1", "10.78.0.2", args.count, args.interval)
            for label, argv in table.items():
                proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                try:
                    # Up when the far side answers (ARP learnt, threads started).
                    deadline = time.monotonic() + 10
                    while not pings(f"{P}a", "10.77.0.2", 1, "0.2"):
                        if proc.poll() is not None or time.monotonic() > deadline:
                            err = proc.stderr.read() if proc.poll() is not None else ""
                            raise SystemExit(f"bench/rtt.py: {label} does not forward: {shlex.join(argv)}\n{err}")
                    results[label] += pings(f"{P}a", "10.77.0.2", args.count, args.interval)
                finally:
                    proc.terminate()
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
            results["direct"] += pings(f"{P}d1", "10.78.0.2", args.count, args.interval)
    finally:
        cleanup()
        flows.unlink(missing_ok=True)

    stats = {k: summary(v) for k, v in results.items() if v}
    direct = stats["direct"]["median_us"]
    ref = stats.get("reference", {}).get("median_us")
    for s in stats.values():
        s["vs_direct"] = s["median_us"] / direct
        if ref:
            s["vs_reference"] = s["median_us"] / ref
    if args.json:
        print(json.dumps({"rounds": args.rounds, "count": args.count, "interval_s": float(args.interval), "rtt": stats}))
        return
    print(f"ping RTT, {args.rounds} rounds x {args.count} pings {args.interval} s apart (µs):")
    print(f"  {'':16s} {'n':>5s} {'median':>7s} {'p10':>6s} {'p90':>6s} {'mean':>6s} {'÷direct':>8s} {'÷reference':>10s}")
    for k, s in stats.items():
        vr = f"{s['vs_reference']:10.2f}" if "vs_reference" in s else f"{'':10s}"
        print(
            f"  {k:16s} {s['n']:5d} {s['median_us']:7.1f} {s['p10_us']:6.1f} {s['p90_us']:6.1f} "
            f"{s['mean_us']:6.1f} {s['vs_direct']:8.2f} {vr}"
        )


if __name__ == "__main__":
    main()
