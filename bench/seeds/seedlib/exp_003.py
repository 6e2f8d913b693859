"""Seed 003 (Bianco et al., OpenFlow switching data-plane performance):
OpenFlow forwarding against the Linux bridge and Linux IP forwarding on
the same veths; forwarding table size; fairness between input ports
under overload."""

import json
import random

from . import experiment
from .common import check_alive, mpps
from .core import ExperimentError, load1, sh
from .pkt import udp_frame
from .report import color, figure, label_axes, num
from .switches import Fulmar, IpForward, LinuxBridge, Ovs, port_flows
from .topo import Topo, host_mac, switch_mac
from .traffic import Generator, measure, ping, summary

# Fig. 5 / text: relative throughput drop at 96-byte packets for 8K, 64K,
# 128K entries (OpenFlow 0.8.9 exact-match hash, Linux routing, Linux
# bridge), 1 Gbit/s links, Core 2 Duo, kernel 2.6.27.
PAPER_DROP_96 = {"openflow": (0.6, 5.0, 11.3), "linux-ip": (0.1, 5.4, 8.9), "linux-bridge": (13.6, 70.4, 89.5)}
PAPER_SIZES = (8192, 65536, 131072)

SYSTEMS = ("fulmar", "ovs", "linux-bridge", "linux-ip")
# 003-forwarding also runs fulmar in both thread modes, with the queues
# bounded in time (the default) and deep (max_queue_delay_us = 0, the
# byte-sized queues fulmar had before), and with its AF_PACKET ports in
# socket mode (the default before the TPACKET_V2 ring, where the kernel
# tail-drops at the bounded socket buffer): the delay under overload side
# by side in one run.
FWD_SYSTEMS = ("fulmar", "fulmar-rwt", "fulmar-socket", "fulmar-rwt-socket", "fulmar-deep", "fulmar-rwt-deep",
               "ovs", "linux-bridge", "linux-ip")
LABELS = {"fulmar": "fulmar", "ovs": "OVS 3.1 netdev", "linux-bridge": "Linux bridge",
          "linux-ip": "Linux IP forwarding", "fulmar-rwt": "fulmar rx-worker-tx",
          "fulmar-deep": "fulmar, deep queues", "fulmar-rwt-deep": "fulmar rx-worker-tx, deep queues",
          "fulmar-socket": "fulmar, socket mode", "fulmar-rwt-socket": "fulmar rx-worker-tx, socket mode"}
# 003-fairness: fulmar bounded (the default) and deep, and in rx-worker-tx.
FAIR_SYSTEMS = ("fulmar", "fulmar-deep", "fulmar-rwt", "ovs", "linux-bridge", "linux-ip")
SOCKET = ("--afpacket-mode", "socket")
FULMAR_VARIANTS = {"fulmar-rwt": ("rx-worker-tx", None, ()), "fulmar-deep": ("run-to-completion", 0, ()),
                   "fulmar-rwt-deep": ("rx-worker-tx", 0, ()),
                   "fulmar-socket": ("run-to-completion", None, SOCKET),
                   "fulmar-rwt-socket": ("rx-worker-tx", None, SOCKET)}


def make_switch(ctx, topo, kind, **kw):
    if kind in FULMAR_VARIANTS:
        mode, delay, args = FULMAR_VARIANTS[kind]
        dp = {} if delay is None else {"max_queue_delay_us": delay}
        return Fulmar(ctx, topo, label=kind, mode=mode, dataplane=dp, args=args, **kw)
    cls = {"fulmar": Fulmar, "ovs": Ovs, "linux-bridge": LinuxBridge, "linux-ip": IpForward}[kind]
    return cls(ctx, topo, **kw)


def frame_for(kind, size, src=1, dst=2, sport=1024, dport=4789, dst_mac=None, dst_ip=None):
    """A frame host src sends toward host dst: to host dst's MAC for the
    L2 switches, to the switch port's MAC for IP forwarding; the IP
    destination is an address behind host dst that it does not own, so
    it drops the frame quietly (no replies)."""
    if kind == "linux-ip":
        mac = switch_mac(src)
    else:
        mac = dst_mac or host_mac(dst)
    return udp_frame(mac, host_mac(src), f"10.{src}.1.2", dst_ip or f"10.{dst}.1.99", sport=sport, dport=dport,
                     size=size)


def start(sw, flows, **kw):
    if sw.kind in ("fulmar", "ovs"):
        sw.start(flows)
    else:
        sw.start(**kw)
    return sw


# --------------------------------------------------------------------------
@experiment("003-forwarding", "003", "OpenFlow forwarding against the Linux bridge and IP forwarding", (1.5, 4),
            plot="plot_forwarding")
def forwarding(ctx, res):
    sizes = ctx.pick([64], [64, 1500], [64, 128, 256, 512, 1024, 1500])
    loads = ctx.pick([0.5], [0.5, 1.0], [0.1, 0.25, 0.5, 0.75, 1.0])
    secs = ctx.pick(0.3, 1.0, 3.0)
    warm = ctx.pick(0.2, 0.7, 1.5)
    npings = ctx.pick(10, 50, 100)  # enough to judge a median and every ping answered
    res.caption = (
        "The paper's Figs. 2–4 on veths: one flow, a one-entry table (fulmar and Open vSwitch: in_port → output), "
        "the Linux bridge (static FDB entries) and Linux IPv4 forwarding (static route and neighbours), all "
        "between the same two veths. Left: frames per second forwarded against frame size, trafgen sending as "
        "fast as it can (what it managed: dotted). Middle and right: 64-byte frames at fixed offered rates "
        "(fractions of the most trafgen offered in the left part); frames forwarded, and the median ping round "
        f"trip ({npings} pings 10 ms apart, from the sending host: each request waits behind the load on the "
        "same input port; the table adds the 90th percentile and the maximum) meanwhile. fulmar runs in both "
        "thread modes (run-to-completion; rx-worker-tx), with its "
        "queues bounded in time (the default, max_queue_delay_us = 100) and deep (max_queue_delay_us = 0, the "
        "byte-sized queues it had before).")
    res.setup = (f"Two CPUs: trafgen (and the runner, ping) on CPU {ctx.gen_cpus}, fulmar and OVS on CPU {ctx.switch_cpus(1)}; the Linux "
                 f"bridge and IP forwarding run in the kernel's receive path on the sending CPU (trafgen's, CPU "
                 f"{ctx.gen_cpus}, for this direction), so they share a CPU with the generator; the 1-minute load "
                 "average read before each row is in the table (column load avg); other builds may have shared the "
                 "machine.")
    res.paper = [("max throughput against packet size", "OpenFlow and IP routing near the offered load except "
                  "for small packets; the bridge worse; all at wire speed from 256 B (1 Gbit/s, Core 2 Duo)"),
                 ("64 B, latency under load", "below saturation about 30 µs for all three")]
    topo = Topo(ctx, 2).build()
    flows = port_flows([(1, 2), (2, 1)])
    for kind in ctx.only(FWD_SYSTEMS):
        sw = start(make_switch(ctx, topo, kind), flows)
        try:
            for s in sizes:
                load_avg = load1()
                frames = [frame_for(kind, s, sport=1024 + j) for j in range(16)]
                g = Generator(ctx, topo.host_ns(1), topo.host_dev(1), frames)
                r = measure([g], [(topo.host_ns(2), topo.host_dev(2))], warm, secs)
                check_alive(sw)
                res.add(part="size", system=kind, size=s, load=None, offered_mpps=mpps(r["offered_pps"]),
                        mpps=mpps(r["fwd_pps"]), load1=load_avg, cpus=sw.cpus)
                ctx.log(f"  {kind:13s} {s:5d} B: offered {r['offered_pps'] / 1e3:.0f} kpps, "
                        f"forwarded {r['fwd_pps'] / 1e3:.0f} kpps (load average {num(load_avg)})")
        finally:
            sw.stop()
    top = max(r["offered_mpps"] for r in res.rows if r["size"] == 64) * 1e6
    res.meta["reference_pps"] = top
    for kind in ctx.only(FWD_SYSTEMS):
        sw = start(make_switch(ctx, topo, kind), flows)
        dst = "10.2.1.2" if kind == "linux-ip" else "10.0.0.2"
        try:
            for load in [0.0] + loads:
                load_avg = load1()
                if load == 0:
                    rtts, sent = ping(topo.host_ns(1), dst, npings, 0.01)
                    r = {"offered_pps": 0, "fwd_pps": 0}
                else:
                    g = Generator(ctx, topo.host_ns(1), topo.host_dev(1),
                                [frame_for(kind, 64, sport=1024 + j) for j in range(16)], rate_pps=load * top)
                    r = measure([g], [(topo.host_ns(2), topo.host_dev(2))], warm, npings * 0.01 + 0.5,
                                during=lambda: ping(topo.host_ns(1), dst, npings, 0.01))
                    rtts, sent = r["during"]
                check_alive(sw)
                s = summary(rtts)
                res.add(part="load", system=kind, size=64, load=load, offered_mpps=mpps(r["offered_pps"]),
                        mpps=mpps(r["fwd_pps"]), rtt_median_us=s.get("median", 0) * 1e3 if s["n"] else None,
                        rtt_p90_us=s.get("p90", 0) * 1e3 if s["n"] else None,
                        rtt_max_us=max(rtts) * 1e3 if rtts else None, pings=f"{s['n']}/{sent}", load1=load_avg,
                        cpus=sw.cpus)
                ctx.log(f"  {kind:13s} load {load:4.2f}: offered {r['offered_pps'] / 1e3:.0f} kpps, forwarded "
                        f"{r['fwd_pps'] / 1e3:.0f}, ping median {s.get('median', float('nan')) * 1e3:.0f} µs, "
                        f"p90 {s.get('p90', float('nan')) * 1e3:.0f}, max {max(rtts or [float('nan')]) * 1e3:.0f} "
                        f"({s['n']}/{sent}; load average {num(load_avg)})")
        finally:
            sw.stop()
    rows = []
    for r in res.rows:
        rows.append([r["part"], LABELS[r["system"]], r["size"], "–" if r["load"] is None else r["load"],
                     num(r["offered_mpps"] * 1e3), num(r["mpps"] * 1e3), num(r.get("rtt_median_us")),
                     num(r.get("rtt_p90_us")), num(r.get("rtt_max_us")), r.get("pings", "–"), num(r.get("load1"))])
    res.table = (["part", "system", "frame bytes", "load", "offered kpps", "forwarded kpps", "ping median µs",
                  "p90 µs", "max µs", "pings answered", "load avg (1 min)"], rows)
    f64 = {r["system"]: r["mpps"] for r in res.rows if r["part"] == "size" and r["size"] == 64}
    if f64.get("linux-ip"):
        res.findings.append("64-byte frames forwarded, relative to Linux IP forwarding: " + ", ".join(
            f"{LABELS[k]} {v / f64['linux-ip']:.2f}×" for k, v in f64.items()) + ".")
    top_load = max(loads)
    for r in res.rows:
        if r["part"] == "load" and r["load"] == top_load and r.get("rtt_median_us") is not None:
            res.findings.append(f"{LABELS[r['system']]} at load {top_load}: ping median {r['rtt_median_us']:.0f} µs, "
                                f"p90 {r['rtt_p90_us']:.0f}, max {r['rtt_max_us']:.0f}; {r['pings']} answered "
                                f"(load average {num(r.get('load1'))}).")


def plot_forwarding(res):
    fig, (ax, ax2, ax3) = figure(3, width=13)
    for kind in FWD_SYSTEMS:
        pts = [r for r in res.rows if r["part"] == "size" and r["system"] == kind]
        if pts:
            ax.plot([r["size"] for r in pts], [r["mpps"] * 1e3 for r in pts], "-o", color=color(kind),
                    label=LABELS[kind])
            ax.plot([r["size"] for r in pts], [r["offered_mpps"] * 1e3 for r in pts], ":", color=color(kind), lw=0.8)
        pts = [r for r in res.rows if r["part"] == "load" and r["system"] == kind]
        if pts:
            ax2.plot([r["offered_mpps"] * 1e3 for r in pts], [r["mpps"] * 1e3 for r in pts], "-o", color=color(kind),
                     label=LABELS[kind])
            q = [r for r in pts if r.get("rtt_median_us")]
            ax3.plot([r["offered_mpps"] * 1e3 for r in q], [r["rtt_median_us"] for r in q], "-o", color=color(kind),
                     label=LABELS[kind])
    lim = max([r["offered_mpps"] * 1e3 for r in res.rows if r["part"] == "load"] or [1])
    ax2.plot([0, lim], [0, lim], "--", color="#999999", lw=0.8, label="offered")
    ax.set_xscale("log", base=2)
    xs = sorted({r["size"] for r in res.rows if r["part"] == "size"})
    ax.set_xticks(xs, [str(x) for x in xs])
    label_axes(ax, "frame size (bytes)", "kpps forwarded (dotted: offered)")
    label_axes(ax2, "offered kpps (64 B)", "kpps forwarded")
    ax3.set_xlabel("offered kpps (64 B)")
    ax3.set_ylabel("ping RTT median (µs, log)")
    ax3.set_yscale("log")
    return fig


# --------------------------------------------------------------------------
def udp_pair_rule(i):
    return 1000 + (i >> 8), 1000 + (i & 255)


@experiment("003-tablesize", "003", "forwarding table size with random header fields", (1.5, 5),
            plot="plot_tablesize")
def tablesize(ctx, res):
    tables = ctx.pick([256], [8192, 131072], [8192, 65536, 131072])
    sizes = ctx.pick([64], [64], [64, 512, 1500])
    k = ctx.pick(256, 4096, 16384)
    secs = ctx.pick(0.3, 1.0, 3.0)
    warm = ctx.pick(0.2, 0.7, 2.0)
    res.caption = (
        "The paper's Fig. 5: throughput with small, medium and large forwarding tables, the traffic's header "
        f"fields drawn at random among the entries. Here {k:,} flows drawn at random (fixed seed) among N "
        "entries: fulmar and Open vSwitch with N exact UDP source/destination port rules, Linux IP forwarding "
        "with N /24 routes (random destination addresses), the Linux bridge with N static FDB entries (random "
        "destination MACs, all behind port 2). Frames per second forwarded, relative to each system's smallest "
        "table (the paper's relative drop at 96 B dashed).")
    res.setup = (f"Two CPUs: trafgen (and the runner, ping) on CPU {ctx.gen_cpus}, fulmar and OVS on CPU {ctx.switch_cpus(1)}, the kernel's "
                 "forwarding on the sending CPU; other builds may have shared the machine.")
    res.paper = [(f"relative drop at 96 B, 8K / 64K / 128K entries, {LABELS.get(k2, 'OpenFlow 0.8.9')}",
                  " / ".join(f"{x} %" for x in v)) for k2, v in PAPER_DROP_96.items()]
    topo = Topo(ctx, 2, mtu=1600).build()
    rng = random.Random(3)
    for kind in SYSTEMS:
        for n in tables:
            pick = [rng.randrange(n) for _ in range(min(k, n * 4))]
            sw = make_switch(ctx, topo, kind)
            if kind in ("fulmar", "ovs"):
                flows = "".join(f"table=0,priority=100,udp,tp_src={a},tp_dst={b},actions=output:2\n"
                                for a, b in map(udp_pair_rule, range(n)))
                flows += "table=0,priority=10,in_port=2,actions=output:1\n"
                sw.start(flows, timeout=900)
                mk = lambda s: [frame_for(kind, s, sport=udp_pair_rule(i)[0], dport=udp_pair_rule(i)[1]) for i in pick]
            elif kind == "linux-ip":
                routes = [(f"{11 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.0/24", "10.2.1.99") for i in range(n)]
                sw.start(routes=routes)
                mk = lambda s: [frame_for(kind, s, dst_ip=f"{11 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.1")
                                for i in pick]
            else:
                macs = [f"0e:00:00:{(i >> 16) & 255:02x}:{(i >> 8) & 255:02x}:{i & 255:02x}" for i in range(n)]
                sw.start(fdb=[(m, 2) for m in macs])
                mk = lambda s: [frame_for(kind, s, dst_mac=macs[i]) for i in pick]
            try:
                for s in sizes:
                    g = Generator(ctx, topo.host_ns(1), topo.host_dev(1), mk(s))
                    r = measure([g], [(topo.host_ns(2), topo.host_dev(2))], warm, secs)
                    check_alive(sw)
                    res.add(system=kind, entries=n, size=s, flows=len(set(pick)), offered_mpps=mpps(r["offered_pps"]),
                            mpps=mpps(r["fwd_pps"]), cpus=sw.cpus)
                    ctx.log(f"  {kind:13s} {n:7d} entries {s:5d} B: offered {r['offered_pps'] / 1e3:.0f} kpps, "
                            f"forwarded {r['fwd_pps'] / 1e3:.0f} kpps")
            finally:
                sw.stop()
    res.table = (["system", "entries", "frame bytes", "offered kpps", "forwarded kpps", "relative to smallest table"],
                 [[LABELS[r["system"]], r["entries"], r["size"], num(r["offered_mpps"] * 1e3), num(r["mpps"] * 1e3),
                   num(rel_t(res, r))] for r in res.rows])
    big = max(tables)
    for kind in SYSTEMS:
        v = [rel_t(res, r) for r in res.rows if r["system"] == kind and r["entries"] == big]
        v = [x for x in v if x is not None]
        if v:
            res.findings.append(f"{LABELS[kind]}: {big:,} entries forward {min(v):.2f}–{max(v):.2f}× the smallest "
                                "table's frames.")


def rel_t(res, row):
    base = min((r for r in res.rows if r["system"] == row["system"] and r["size"] == row["size"]),
               key=lambda r: r["entries"])
    return row["mpps"] / base["mpps"] if base["mpps"] else None


def plot_tablesize(res):
    fig, (ax, ax2) = figure(2)
    sizes = sorted({r["size"] for r in res.rows})
    for kind in SYSTEMS:
        for s, st in zip(sizes, ("-o", "--s", ":^")):
            pts = [r for r in res.rows if r["system"] == kind and r["size"] == s]
            if pts:
                ax.plot([r["entries"] for r in pts], [r["mpps"] * 1e3 for r in pts], st, color=color(kind),
                        label=f"{LABELS[kind]}, {s} B")
                ax2.plot([r["entries"] for r in pts], [rel_t(res, r) for r in pts], st, color=color(kind))
    for kind, v in PAPER_DROP_96.items():
        c = color(kind) if kind != "openflow" else color("paper")
        ax2.plot(PAPER_SIZES, [1 - x / 100 for x in v], "--", color=c, lw=0.8, alpha=0.7)
    ax2.text(PAPER_SIZES[-1], 0.15, "dashed: paper, 96 B\n(black: OpenFlow 0.8.9)", fontsize=7, ha="right")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlabel("entries")
    ax.set_yscale("log")
    ax.set_ylabel("kpps forwarded (log)")
    ax.legend(fontsize=6)
    ax2.set_ylabel("forwarded ÷ forwarded with the smallest table")
    ax2.set_ylim(0, 1.3)
    return fig


# --------------------------------------------------------------------------
class Counters:
    """nftables counters by IPv4 source on a host's veth (ingress), to tell
    two flows apart at the receiver."""

    def __init__(self, ctx, ns, dev, sources):
        self.ctx, self.ns, self.table = ctx, ns, ctx.name("cnt")
        script = [f"add table netdev {self.table}",
                  f"add chain netdev {self.table} in {{ type filter hook ingress device {dev} priority 0 ; }}"]
        for a in sources:
            script.append(f"add rule netdev {self.table} in ip saddr {a} counter")
        f = ctx.work / "nft.txt"
        f.write_text("\n".join(script) + "\n")
        sh(f"ip netns exec {ns} nft -f {f}")

    def read(self):
        r = sh(f"ip netns exec {self.ns} nft -j list table netdev {self.table}")
        out = {}
        for item in json.loads(r.stdout)["nftables"]:
            rule = item.get("rule")
            if not rule:
                continue
            mac = cnt = None
            for e in rule["expr"]:
                if "match" in e:
                    mac = e["match"]["right"]
                if "counter" in e:
                    cnt = e["counter"]["packets"]
            out[mac] = cnt
        return out


@experiment("003-fairness", "003", "fairness between two input ports under overload", (1.5, 4),
            plot="plot_fairness")
def fairness(ctx, res):
    f2s = ctx.pick([1.5], [0.5, 1.5], [0.4, 0.5, 0.6, 0.9, 1.2, 1.5])
    secs = ctx.pick(0.3, 1.5, 4.0)
    warm = ctx.pick(0.2, 0.7, 1.5)
    size = 96
    npings = ctx.pick(10, 20, 50)
    res.caption = (
        "The paper's Fig. 10: flow F1 at a fixed 10 % and flow F2 at a growing share of the capacity, entering "
        "on two different ports, both to a third port; the loss of each flow. Here the capacity C is what each "
        "system forwarded of one 96-byte flow from one port (measured first, in this run); F1 = 0.1 C from "
        "host 1, F2 = x · C from host 3, both to host 2, each from its own trafgen; loss per flow from the "
        "senders' counters and per-source-address counters (nftables) at the receiver. Left: each flow's loss; right: "
        "loss(F1) − loss(F2), the paper's fairness measure (0: both lose alike). Meanwhile host 1 pings host 2 "
        f"({npings} pings 10 ms apart): behind the overload on another input port (F2's), beside F1 on its own; "
        "fulmar also with deep queues (max_queue_delay_us = 0) and in rx-worker-tx.")
    res.setup = (f"Two CPUs: both trafgens on CPU {ctx.gen_cpus}, fulmar (one run-to-completion worker polling all "
                 f"three ports) and OVS on CPU {ctx.switch_cpus(1)}, the kernel's forwarding on the sending CPU; "
                 "other builds may have shared the machine.")
    res.paper = [("single input port, 96 B", "all three fair: |loss(F1) − loss(F2)| < 1.5 %"),
                 ("two input ports, 96 B", "F1 (the small flow) favoured by NAPI's round robin between interfaces, "
                  "more so the more the system is overloaded; OpenFlow slightly fairer than routing; the bridge "
                  "saturated from the lowest load")]
    topo = Topo(ctx, 3).build()
    flows = port_flows([(1, 2), (3, 2), (2, 1)])
    counters = Counters(ctx, topo.host_ns(2), topo.host_dev(2), ["10.1.1.2", "10.3.1.2"])
    for kind in ctx.only(FAIR_SYSTEMS):
        sw = start(make_switch(ctx, topo, kind), flows)
        try:
            f1 = [frame_for(kind, size, src=1, sport=1024 + j) for j in range(8)]
            f3 = [frame_for(kind, size, src=3, sport=2048 + j) for j in range(8)]
            g = Generator(ctx, topo.host_ns(1), topo.host_dev(1), f1)
            cap = measure([g], [(topo.host_ns(2), topo.host_dev(2))], warm, secs)["fwd_pps"]
            if cap < 100:
                raise ExperimentError(f"{kind} forwarded {cap:.0f} pps of one flow")
            ctx.log(f"  {kind:13s} capacity C = {cap / 1e3:.0f} kpps")
            for x in f2s:
                g1 = Generator(ctx, topo.host_ns(1), topo.host_dev(1), f1, rate_pps=0.1 * cap, name="f1")
                g3 = Generator(ctx, topo.host_ns(3), topo.host_dev(3), f3, rate_pps=x * cap, name="f2")
                dst = "10.2.1.2" if kind == "linux-ip" else "10.0.0.2"
                r = measure([g1, g3], [(topo.host_ns(2), topo.host_dev(2))], warm, secs,
                            during=lambda: (counters.read(), ping(topo.host_ns(1), dst, npings, 0.01)),
                            end=counters.read)
                (before, (rtts, sent)), after = r["during"], r["end"]
                ps = summary(rtts)
                dt = r["window_s"]
                got1 = (after["10.1.1.2"] - before["10.1.1.2"]) / dt
                got3 = (after["10.3.1.2"] - before["10.3.1.2"]) / dt
                sent1, sent3 = r["tx_pps"][topo.host_dev(1)], r["tx_pps"][topo.host_dev(3)]
                l1 = max(0.0, 1 - got1 / sent1) if sent1 else None
                l3 = max(0.0, 1 - got3 / sent3) if sent3 else None
                check_alive(sw)
                res.add(system=kind, capacity_pps=cap, f2_share=x, f1_sent_pps=sent1, f2_sent_pps=sent3,
                        f1_got_pps=got1, f2_got_pps=got3, f1_loss_pct=100 * l1, f2_loss_pct=100 * l3,
                        diff_pct=100 * (l1 - l3), cpus=sw.cpus,
                        rtt_median_us=ps.get("median", 0) * 1e3 if ps["n"] else None, pings=f"{ps['n']}/{sent}")
                ctx.log(f"  {kind:13s} F2 {x:.1f} C: loss F1 {100 * l1:5.1f} %, F2 {100 * l3:5.1f} %, ping median "
                        f"{ps.get('median', float('nan')) * 1e3:.0f} µs ({ps['n']}/{sent})")
        finally:
            sw.stop()
    res.table = (["system", "C kpps", "F2 (× C)", "F1 sent kpps", "F2 sent kpps", "F1 loss %", "F2 loss %",
                  "loss(F1) − loss(F2)", "ping median µs (host 1 → 2)", "pings answered"],
                 [[LABELS[r["system"]], num(r["capacity_pps"] / 1e3), r["f2_share"], num(r["f1_sent_pps"] / 1e3),
                   num(r["f2_sent_pps"] / 1e3), f"{r['f1_loss_pct']:.1f}", f"{r['f2_loss_pct']:.1f}",
                   f"{r['diff_pct']:+.1f}", num(r.get("rtt_median_us")), r.get("pings", "–")] for r in res.rows])
    for kind in FAIR_SYSTEMS:
        pts = [r for r in res.rows if r["system"] == kind]
        if pts:
            last = pts[-1]
            res.findings.append(f"{LABELS[kind]} at F2 = {last['f2_share']} C: F1 loses {last['f1_loss_pct']:.1f} %, "
                                f"F2 {last['f2_loss_pct']:.1f} %.")


def plot_fairness(res):
    fig, (ax, ax2) = figure(2)
    for kind in FAIR_SYSTEMS:
        pts = [r for r in res.rows if r["system"] == kind]
        if pts:
            x = [r["f2_share"] for r in pts]
            ax.plot(x, [r["f1_loss_pct"] for r in pts], "-o", color=color(kind), label=f"{LABELS[kind]}: F1")
            ax.plot(x, [r["f2_loss_pct"] for r in pts], "--s", color=color(kind), label=f"{LABELS[kind]}: F2")
            ax2.plot(x, [r["diff_pct"] for r in pts], "-o", color=color(kind), label=LABELS[kind])
    ax.set_xlabel("F2 offered (× capacity C; F1 = 0.1 C)")
    ax.set_ylabel("loss (%)")
    ax.legend(fontsize=6)
    ax2.axhline(0, color="#999999", lw=1)
    label_axes(ax2, "F2 offered (× capacity C)", "loss(F1) − loss(F2), percentage points")
    return fig
