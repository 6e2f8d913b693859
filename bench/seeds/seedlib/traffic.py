"""Traffic: trafgen (netsniff-ng) for the most a generator can send,
tcpreplay for paced rates, ping, a UDP echo for per-packet round trips,
iperf3 for TCP.

Forwarding is measured the same way for every switch: a generator in
host i's namespace sends on its end of the veth, and what arrives is read
from the kernel's counters of the receiving host's end (rx_packets: what
the switch handed to that veth) over a window after a warm-up, beside
what the generator put on its own end (tx_packets: the offered load).
"""

import json
import re
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

from .core import ExperimentError, sh
from .topo import link_stats

HERE = Path(__file__).resolve().parent


def trafgen_config(frames, path):
    """Writes frames (bytes) as a trafgen packet configuration; trailing
    zero bytes are written as fill() so big frames stay small on disk."""
    with open(path, "w") as f:
        for fr in frames:
            body = fr.rstrip(b"\0")
            zeros = len(fr) - len(body)
            items = ",".join(f"0x{b:02x}" for b in body)
            if zeros:
                items += f",fill(0x00,{zeros})" if items else f"fill(0x00,{zeros})"
            f.write("{" + items + "}\n")


def pcap_file(frames, path):
    """Writes frames as a classic pcap file (microsecond stamps 1 µs apart)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1_000_000, i % 1_000_000, len(fr), len(fr)))
            f.write(fr)


class Generator:
    """A generator sending frames round robin on a host's veth end: trafgen
    (netsniff-ng: a TX ring, as fast as it can) when no rate is given,
    tcpreplay paced at rate_pps otherwise (trafgen's own rate option sends
    each second's packets in one burst at the start of the second, and its
    gap option cannot go much beyond 20 kpps here; tcpreplay paces smoothly
    to a few hundred kpps)."""

    def __init__(self, ctx, ns, dev, frames, rate_pps=None, cpus=None, name="trafgen"):
        self.ctx, self.ns, self.dev = ctx, ns, dev
        self.rate = rate_pps
        self.cpus = cpus if cpus is not None else ctx.gen_cpus
        self.name = name
        if self.rate:
            self.file = ctx.work / f"{name}-{dev}.pcap"
            pcap_file(frames, self.file)
        else:
            self.file = ctx.work / f"{name}-{dev}.cfg"
            trafgen_config(frames, self.file)
        self.proc = None

    def start(self):
        if self.rate:
            argv = ["tcpreplay", "-q", "-i", self.dev, f"--pps={self.rate:.0f}", "--loop=0", "--preload-pcap",
                    str(self.file)]
        else:
            # Leave the machine's socket-memory sysctls and IRQ
            # affinities alone; -P 1: one process (pinned by taskset).
            argv = ["trafgen", "-i", str(self.file), "-o", self.dev, "-P", "1", "--no-sock-mem", "--notouch-irq",
                    "--no-cpu-stats"]
        self.proc = self.ctx.spawn(argv, ns=self.ns, cpus=self.cpus,
                                   stderr=self.ctx.work / f"{self.name}-{self.dev}.err", name=argv[0])
        return self

    def stop(self):
        if self.proc:
            if self.proc.poll() is not None and self.proc.returncode not in (0, None):
                err = (self.ctx.work / f"{self.name}-{self.dev}.err").read_text(errors="replace")
                self.proc = None
                raise ExperimentError(f"the generator on {self.dev} failed: {err[-500:]}")
            self.ctx.stop(self.proc, timeout=10)
            self.proc = None


def wait_ready(gens, timeout=15):
    """Waits until every generator's device has sent something (trafgen
    parses its configuration, tcpreplay loads its file first: large ones
    take a moment)."""
    deadline = time.monotonic() + timeout
    base = {g.dev: link_stats(g.ns, g.dev)["tx"] for g in gens}
    while True:
        if all(link_stats(g.ns, g.dev)["tx"] > base[g.dev] for g in gens):
            return
        for g in gens:
            if g.proc and g.proc.poll() is not None:
                err = (g.ctx.work / f"{g.name}-{g.dev}.err").read_text(errors="replace")
                raise ExperimentError(f"the generator on {g.dev} exited: {err[-500:]}")
        if time.monotonic() > deadline:
            raise ExperimentError("the generators sent nothing within %d s" % timeout)
        time.sleep(0.05)


def measure(gens, receivers, warm, secs, during=None, end=None):
    """Runs the generators; after `warm` s counts for `secs` s what they
    sent (their tx_packets) and what the receivers got (rx_packets of
    each (ns, dev) in receivers). Returns per-second rates:
    {"offered_pps", "fwd_pps", "rx_pps": {dev: pps}, "tx_pps": {dev: pps},
    "loss"}. `during` runs (and returns into "during") at the start of the
    window, `end` (into "end") right at its end, before the generators stop."""
    for g in gens:
        g.start()
    try:
        wait_ready(gens)
        time.sleep(warm)
        t0 = time.monotonic()
        tx0 = {g.dev: link_stats(g.ns, g.dev)["tx"] for g in gens}
        rx0 = {dev: link_stats(ns, dev)["rx"] for ns, dev in receivers}
        extra = during() if during else None
        left = secs - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
        tx1 = {g.dev: link_stats(g.ns, g.dev)["tx"] for g in gens}
        rx1 = {dev: link_stats(ns, dev)["rx"] for ns, dev in receivers}
        dt = time.monotonic() - t0
        last = end() if end else None
    finally:
        for g in gens:
            g.stop()
    tx = {d: (tx1[d] - tx0[d]) / dt for d in tx0}
    rx = {d: (rx1[d] - rx0[d]) / dt for d in rx0}
    off, fwd = sum(tx.values()), sum(rx.values())
    return {
        "offered_pps": off,
        "fwd_pps": fwd,
        "tx_pps": tx,
        "rx_pps": rx,
        "loss": max(0.0, 1 - fwd / off) if off else None,
        "window_s": dt,
        "during": extra,
        "end": last,
    }


def ping(ns, dst, count, interval, size=56, timeout=1, timestamps=False):
    """Per-ping RTTs in ms (and, with timestamps, (t, rtt) pairs), and the
    number sent."""
    w = max(int(count * float(interval) + 10), 5)
    cmd = (f"ip netns exec {ns} timeout {w} ping -n {'-D ' if timestamps else ''}-c {count} -i {interval} "
           f"-W {timeout} -s {size} {dst}")
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout
    if timestamps:
        pts = [(float(t), float(r)) for t, r in re.findall(r"\[([\d.]+)\].*time=([\d.]+) ms", out)]
        return pts, count
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)], count


def ping_until(ns, dst, timeout=10):
    """Waits until one ping is answered (the path works)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _ = ping(ns, dst, 1, 0.2, timeout=1)
        if r:
            return True
    return False


class UdpEcho:
    """A UDP echo server in one namespace; `rtts` sends from another and
    times each round trip (µs)."""

    def __init__(self, ctx, server_ns, server_ip, port=7000):
        self.ctx, self.ns, self.ip, self.port = ctx, server_ns, server_ip, port
        self.proc = None

    def start(self):
        self.proc = self.ctx.spawn([sys.executable, str(HERE / "udp_echo.py"), "serve", self.ip, str(self.port)],
                                   ns=self.ns, name="udp-echo")
        time.sleep(0.3)
        return self

    def rtts(self, client_ns, count, size, interval=0.0005, sport=None, dport=None, cpus=None, dst=None):
        argv = [sys.executable, str(HERE / "udp_echo.py"), "client", dst or self.ip,
                str(dport or self.port), str(count), str(size), str(interval)]
        if sport:
            argv.append(str(sport))
        cmd = ["ip", "netns", "exec", client_ns] + argv
        if cpus is not None:
            cmd = ["taskset", "-c", str(cpus)] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=count * (interval + 1.0) + 30)
        if r.returncode != 0:
            raise ExperimentError(f"udp echo client failed: {r.stderr.strip()[-500:]}")
        return json.loads(r.stdout)

    def stop(self):
        if self.proc:
            self.ctx.stop(self.proc)
            self.proc = None


def iperf3(ctx, client_ns, server_ns, server_ip, secs, args="", port=5201, cpus=None):
    """One iperf3 test; returns the parsed JSON's end section."""
    srv = ctx.spawn(["iperf3", "-s", "-1", "-B", server_ip, "-p", str(port)], ns=server_ns, name="iperf3-s")
    try:
        for _ in range(100):
            r = sh(f"ip netns exec {server_ns} ss -Hltn 'sport = :{port}'", check=False)
            if r.stdout.strip():
                break
            time.sleep(0.05)
        pre = f"taskset -c {cpus} " if cpus is not None else ""
        r = sh(f"{pre}ip netns exec {client_ns} timeout {secs + 15} iperf3 -c {server_ip} -p {port} "
               f"-t {secs} --connect-timeout 3000 -J {args}", check=False, timeout=secs + 30)
        try:
            d = json.loads(r.stdout)
        except json.JSONDecodeError:
            raise ExperimentError(f"iperf3 gave no JSON: {r.stderr.strip()[-300:]}")
        if "error" in d:
            raise ExperimentError(f"iperf3: {d['error']}")
        return d["end"]
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        ctx.stop(srv)


def summary(values):
    """n, mean, median, p10, p90, p99, sd of a list."""
    v = sorted(values)
    if not v:
        return {"n": 0}
    n = len(v)
    return {
        "n": n,
        "mean": statistics.fmean(v),
        "median": statistics.median(v),
        "p10": v[n // 10],
        "p90": v[min(n - 1, n * 9 // 10)],
        "p99": v[min(n - 1, n * 99 // 100)],
        "sd": statistics.pstdev(v),
    }
