#!/usr/bin/env python3
"""A/B of fulmar builds or settings through a saturated switch: the
setup of 003-forwarding's load-1.0 row (two hosts on veths, 64-byte
frames paced by tcpreplay at the rate trafgen reaches here), one config
after the other, round after round, so that drift on the machine lands
on every config alike. Prints each run and then, per config, the ping
round trip over all rounds, the pings answered, the forwarded rate and
the receive drops the switch counted.

    sudo .venv/bin/python bench/seeds/ab.py [--rounds 3] [--pings 100] [--rate 600000] \\
        NAME=BINARY:MODE[:JSON] ...

MODE is run-to-completion or rx-worker-tx; JSON (optional) is extra
[dataplane] settings, e.g. '{"max_batch_wait_us": 100}'. Example:

    sudo .venv/bin/python bench/seeds/ab.py old=/tmp/fulmar-old:rx-worker-tx \\
        new=target/release/fulmar:rx-worker-tx

Needs root; the runner stays on the generators' CPU (CPU 0), the switch
on CPU 1, as in the seed experiments.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seedlib.core import Ctx, load1, pin_harness  # noqa: E402
from seedlib.exp_003 import frame_for  # noqa: E402
from seedlib.switches import Fulmar, port_flows  # noqa: E402
from seedlib.topo import Topo  # noqa: E402
from seedlib.traffic import Generator, measure, ping, summary  # noqa: E402


def config(arg):
    name, _, rest = arg.partition("=")
    parts = rest.split(":", 2)
    if not name or len(parts) < 2 or parts[1] not in ("run-to-completion", "rx-worker-tx"):
        raise argparse.ArgumentTypeError(f"{arg!r}: want NAME=BINARY:MODE[:JSON]")
    extra = json.loads(parts[2]) if len(parts) == 3 and parts[2] else {}
    return name, str(Path(parts[0]).resolve()), parts[1], extra


def drops(binary, ctl):
    """The switch's named drops (`fulmar ctl stats`), as a dict."""
    out = subprocess.run([binary, "ctl", "-t", ctl, "stats"], capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        if line.strip().startswith("drops:"):
            for k, v in re.findall(r"(\w+)=(\d+)", line):
                got[k] = got.get(k, 0) + int(v)
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="+", type=config, metavar="NAME=BINARY:MODE[:JSON]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pings", type=int, default=100)
    ap.add_argument("--rate", type=float, default=600e3, help="tcpreplay's target rate, frames/s")
    ap.add_argument("--prefix", default="ab")
    args = ap.parse_args()
    pin_harness()
    ctx = Ctx("quick", args.prefix, "/tmp", args.configs[0][1])
    res = {c[0]: {"rtt": [], "sent": 0, "fwd": [], "drops": {}} for c in args.configs}
    try:
        topo = Topo(ctx, 2).build()
        flows = port_flows([(1, 2), (2, 1)])
        for r in range(args.rounds):
            for name, binary, mode, extra in args.configs:
                ctx.fulmar = binary
                sw = Fulmar(ctx, topo, label=name, mode=mode, dataplane=extra)
                sw.start(flows)
                try:
                    frames = [frame_for("fulmar", 64, sport=1024 + j) for j in range(16)]
                    g = Generator(ctx, topo.host_ns(1), topo.host_dev(1), frames, rate_pps=args.rate)
                    m = measure([g], [(topo.host_ns(2), topo.host_dev(2))], 0.7, args.pings * 0.01 + 0.5,
                                during=lambda: ping(topo.host_ns(1), "10.0.0.2", args.pings, 0.01))
                    rtts, sent = m["during"]
                    d = drops(binary, sw.ctl)
                finally:
                    sw.stop()
                s = summary(rtts)
                o = res[name]
                o["rtt"] += rtts
                o["sent"] += sent
                o["fwd"].append(m["fwd_pps"])
                for k, v in d.items():
                    o["drops"][k] = o["drops"].get(k, 0) + v
                print(f"  round {r} {name:12s} offered {m['offered_pps'] / 1e3:.0f} kpps, forwarded "
                      f"{m['fwd_pps'] / 1e3:.0f}; ping median {s.get('median', 0) * 1e3:.0f} µs, p90 "
                      f"{s.get('p90', 0) * 1e3:.0f}, {s['n']}/{sent}; drops {d or '-'}; load average {load1()}",
                      flush=True)
    finally:
        ctx.cleanup()
        ctx.remove_work()
    for name, o in res.items():
        v = sorted(o["rtt"])
        if not v:
            print(f"{name:12s} no ping answered")
            continue
        q = lambda f: v[min(len(v) - 1, int(f * len(v)))] * 1e3  # noqa: E731
        print(f"{name:12s} ping median {statistics.median(v) * 1e3:.0f} µs, p75 {q(0.75):.0f}, p90 {q(0.9):.0f}; "
              f"answered {len(v)}/{o['sent']}; forwarded {statistics.mean(o['fwd']) / 1e3:.0f} kpps; "
              f"drops {o['drops'] or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
