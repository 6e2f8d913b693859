"""Seed 002 (Zhao et al., softswitch performance factors): throughput
against the number of rules, packet size and number of ports, and several
switches sharing cores."""

import time

from . import experiment
from .common import bench, check_alive, mpps, throughput, udp_frames
from .core import ExperimentError, sh
from .report import color, figure, num
from .switches import Fulmar, Ovs, port_flows
from .topo import Topo, host_ip, link_stats
from .traffic import Generator, iperf3, measure, ping_until

T_RULE_NS = 20  # the paper's OFsoftswitch: ~20 ns per rule compared (linear search)
PAPER_CHAIN = {"topology 1": (341, 411), "topology 2": (336, 445)}  # Mbit/s: OS scheduling, best pinning


# --------------------------------------------------------------------------
def rules_before_match(n):
    """n rules: n - 1 of the same shape (UDP ports) that the traffic (source
    ports 1024..1087) does not match, at a higher priority, then the one it
    does."""
    lines = [f"table=0,priority=200,udp,tp_src={20000 + k // 40000},tp_dst={1 + k % 40000},actions=drop\n"
             for k in range(n - 1)]
    lines.append("table=0,priority=100,in_port=1,actions=output:2\n")
    lines.append("table=0,priority=100,in_port=2,actions=output:1\n")
    return "".join(lines)


@experiment("002-rules", "002", "throughput against the number of rules", (1.5, 4), plot="plot_rules")
def rules(ctx, res):
    counts = ctx.pick([1, 100], [1, 1000, 100000], [1, 10, 100, 1000, 10000, 100000])
    bcounts = ctx.pick([16, 256], [16, 1000, 10000], [16, 100, 1000, 10000, 50000])
    secs = ctx.pick(0.3, 1.0, 3.0)
    warm = ctx.pick(0.2, 0.7, 2.0)
    res.caption = (
        "The paper made every packet pass N rules before the one it matched (OFsoftswitch searches linearly, "
        "~20 ns a rule; Open vSwitch's hash kept throughput flat). Left: frames per second through fulmar and "
        "Open vSwitch between two veths (64-byte UDP, 64 flows) with N − 1 higher-priority rules of one shape "
        "(udp, tp_src, tp_dst) the traffic misses, then its own; and `fulmar bench` in memory with N rules of the acl "
        "scenario (wildcards of many shapes, distinct priorities: the classifier's hard case) and of the l2 "
        "scenario (exact MACs). Right: each relative to its smallest N, beside what a 20 ns-a-rule linear "
        "search would do at the veth per-packet cost measured here.")
    res.setup = ctx.two_cpus(f"trafgen on CPU {ctx.gen_cpus}, the switch or bench worker on CPU {ctx.switch_cpus(1)}")
    res.paper = [("OFsoftswitch (linear lookup)", "bandwidth falls with the rules passed, ≈ 20 ns a rule"),
                 ("Open vSwitch (kernel hash)", "bandwidth independent of the number of rules")]
    for scen in ("acl", "l2"):
        for n in bcounts:
            d = bench(ctx, scen, n, secs=secs)
            res.add(system=f"fulmar-bench-{scen}", where="in-memory pipeline", rules=n, mpps=d["mpps"],
                    ns_per_packet=d["ns_per_packet"], cpus=d["cpus"])
            ctx.log(f"  fulmar bench {scen} {n:6d} rules: {d['mpps']:.2f} Mpps")
    topo = Topo(ctx, 2).build()
    frames = udp_frames(64, 64, dst_ip="10.0.0.99")
    for make in (lambda: Fulmar(ctx, topo), lambda: Ovs(ctx, topo)):
        for n in counts:
            sw = make()
            sw.start(rules_before_match(n), timeout=900)
            try:
                r = throughput(ctx, topo, frames, warm=warm, secs=secs)
                check_alive(sw)
            finally:
                sw.stop()
            res.add(system=sw.label, where="veth", rules=n, mpps=mpps(r["fwd_pps"]),
                    offered_mpps=mpps(r["offered_pps"]), ns_per_packet=1e9 / r["fwd_pps"] if r["fwd_pps"] else None,
                    cpus=sw.cpus)
            ctx.log(f"  {sw.label:8s} {n:7d} rules: forwarded {r['fwd_pps'] / 1e3:.0f} kpps")
    res.table = (["system", "where", "rules", "Mpps", "relative to fewest rules"],
                 [[r["system"], r["where"], r["rules"], num(r["mpps"]), num(rel(res, r))] for r in res.rows])
    for s in ("fulmar", "ovs", "fulmar-bench-acl", "fulmar-bench-l2"):
        pts = [r for r in res.rows if r["system"] == s]
        if len(pts) > 1:
            res.findings.append(f"{s}: {pts[-1]['rules']:,} rules run at {rel(res, pts[-1]):.2f}× the speed of "
                                f"{pts[0]['rules']:,}.")


def rel(res, row):
    first = min((r for r in res.rows if r["system"] == row["system"]), key=lambda r: r["rules"])
    return row["mpps"] / first["mpps"] if first["mpps"] else None


def plot_rules(res):
    fig, (ax, ax2) = figure(2)
    styles = {"fulmar": ("-s", "fulmar, veth"), "ovs": ("-^", "OVS 3.1 netdev, veth"),
              "fulmar-bench-acl": ("-o", "fulmar bench acl (in memory)"),
              "fulmar-bench-l2": (":o", "fulmar bench l2 (in memory)")}
    for s, (st, lab) in styles.items():
        pts = [r for r in res.rows if r["system"] == s]
        if pts:
            ax.plot([r["rules"] for r in pts], [r["mpps"] for r in pts], st, color=color(s), label=lab)
            ax2.plot([r["rules"] for r in pts], [rel(res, r) for r in pts], st, color=color(s), label=lab)
    f = [r for r in res.rows if r["system"] == "fulmar"]
    if f and f[0]["ns_per_packet"]:
        t1 = f[0]["ns_per_packet"]
        xs = sorted({r["rules"] for r in res.rows})
        ax2.plot(xs, [t1 / (t1 + T_RULE_NS * x) for x in xs], "k--", lw=1,
                 label=f"linear search, 20 ns/rule, from {t1 / 1000:.1f} µs/packet")
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_xlabel("rules")
        a.legend(fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("Mpps (log)")
    ax2.set_yscale("log")
    ax2.set_ylabel("throughput ÷ throughput at the fewest rules (log)")
    return fig


# --------------------------------------------------------------------------
@experiment("002-size", "002", "TCP throughput against packet size", (1, 2), plot="plot_size")
def size(ctx, res):
    mss = ctx.pick([1460], [88, 536, 1460], [88, 216, 472, 984, 1460])
    secs = ctx.pick(1, 1.5, 4)
    res.caption = (
        "The paper measured iperf TCP bandwidth against packet size and found it proportional (a linear fit "
        "within 99.5 % for Open vSwitch, 99.95 % for OFsoftswitch): a switch forwards a fixed number of packets "
        "per second whatever their size. Here iperf3 TCP through a direct veth pair, fulmar and Open vSwitch, "
        "the segment size set with -M (offloads off, so each segment is one frame); left the throughput, right "
        "the data frames per second counted at the receiving veth, against the mean frame size.")
    res.setup = (f"Two CPUs: iperf3 client and server on CPU {ctx.gen_cpus}, the switch on CPU {ctx.switch_cpus(1)}; "
                 "other builds may have shared the machine.")
    res.paper = [("TCP bandwidth against packet size", "proportional: linear fit R² > 0.995 (OVS), > 0.9995 "
                  "(OFsoftswitch); the packet rate stays about constant")]
    topo = Topo(ctx, 2).build()
    flows = port_flows([(1, 2), (2, 1)])
    for label, make in (("direct", None), ("fulmar", lambda: Fulmar(ctx, topo)), ("ovs", lambda: Ovs(ctx, topo))):
        sw = make() if make else None
        if sw:
            sw.start(flows)
        else:
            # The same two namespaces, joined by a veth pair of their own.
            direct_pair(ctx, topo)
        try:
            dst = host_ip(2) if sw else "10.9.0.2"
            if not ping_until(topo.host_ns(1), dst):
                raise ExperimentError(f"{label}: no ping answered")
            for m in mss:
                dev = topo.host_dev(2) if sw else ctx.name("d2")
                s0 = link_stats(topo.host_ns(2), dev)
                t0 = time.monotonic()
                e = iperf3(ctx, topo.host_ns(1), topo.host_ns(2), dst, secs, args=f"-M {m}", cpus=ctx.gen_cpus)
                dt = time.monotonic() - t0
                s1 = link_stats(topo.host_ns(2), dev)
                pk = s1["rx"] - s0["rx"]
                frame = (s1["rx_bytes"] - s0["rx_bytes"]) / pk if pk else None
                mbps = e["sum_received"]["bits_per_second"] / 1e6
                sec = e["sum_received"].get("seconds") or secs
                res.add(system=label, mss=m, frame_bytes=frame, mbps=mbps, kpps=pk / dt / 1e3,
                        kpps_iperf=mbps * 1e6 / 8 / max(m - 12, 1) / 1e3, seconds=sec,
                        cpus=sw.cpus if sw else "-")
                ctx.log(f"  {label:8s} MSS {m:5d}: {mbps:7.0f} Mbit/s, {pk / dt / 1e3:6.1f} kpps "
                        f"(frames {frame:.0f} B)")
            if sw:
                check_alive(sw)
        finally:
            if sw:
                sw.stop()
    fits = {}
    for s in ("direct", "fulmar", "ovs"):
        pts = [(r["frame_bytes"], r["mbps"]) for r in res.rows if r["system"] == s and r["frame_bytes"]]
        if len(pts) >= 3:
            fits[s] = r2(pts)
    res.meta["r2"] = fits
    res.table = (["system", "MSS", "frame bytes (mean)", "Mbit/s", "data frames/s (k)"],
                 [[r["system"], r["mss"], num(r["frame_bytes"]), num(r["mbps"]), num(r["kpps"])] for r in res.rows])
    for s, v in fits.items():
        res.findings.append(f"{s}: linear fit of Mbit/s against frame size R² = {v:.4f}.")
    for s in ("fulmar", "ovs"):
        pts = [r["kpps"] for r in res.rows if r["system"] == s]
        if len(pts) > 1:
            res.findings.append(f"{s}: {min(pts):.0f}–{max(pts):.0f} k data frames/s across the sizes.")


def direct_pair(ctx, topo):
    """A veth pair d1 (10.9.0.1, in host 1's namespace) == d2 (10.9.0.2, host 2's)."""
    d1, d2 = ctx.name("d1"), ctx.name("d2")
    sh(f"ip link add {d1} netns {topo.host_ns(1)} type veth peer name {d2} netns {topo.host_ns(2)}")
    for ns, dev, ip in ((topo.host_ns(1), d1, "10.9.0.1"), (topo.host_ns(2), d2, "10.9.0.2")):
        sh(f"ip netns exec {ns} ethtool -K {dev} tx off tso off gso off gro off", check=False)
        sh(f"ip -n {ns} addr add {ip}/24 dev {dev}")
        sh(f"ip -n {ns} link set {dev} up")


def r2(pts):
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    syy = sum((p[1] - my) ** 2 for p in pts)
    if not sxx or not syy:
        return None
    return sxy * sxy / (sxx * syy)


def plot_size(res):
    fig, (ax, ax2) = figure(2)
    for s, st, lab in (("direct", ":o", "direct veth pair"), ("fulmar", "-s", "fulmar"),
                       ("ovs", "-^", "OVS 3.1 netdev")):
        pts = [r for r in res.rows if r["system"] == s and r["frame_bytes"]]
        if pts:
            ax.plot([r["frame_bytes"] for r in pts], [r["mbps"] / 1e3 for r in pts], st, color=color(s), label=lab)
            ax2.plot([r["frame_bytes"] for r in pts], [r["kpps"] for r in pts], st, color=color(s), label=lab)
    ax.set_xlabel("data frame size (bytes)")
    ax.set_ylabel("iperf3 TCP (Gbit/s)")
    ax2.set_xlabel("data frame size (bytes)")
    ax2.set_ylabel("data frames per second (thousands)")
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return fig


# --------------------------------------------------------------------------
@experiment("002-ports", "002", "throughput against the number of ports", (1, 3), plot="plot_ports")
def ports(ctx, res):
    counts = ctx.pick([4], [2, 8], [2, 4, 8, 16])
    secs = ctx.pick(0.3, 1.0, 3.0)
    warm = ctx.pick(0.2, 0.7, 2.0)
    res.caption = (
        "The paper: OFsoftswitch polls its ports in turn, so with n ports its throughput grows with the share of "
        "ports that have packets and levels off beyond 6; Open vSwitch does best with twice as many ports as "
        "cores. Here n ports in pairs (port 2k−1 → 2k), 64-byte frames, and either one pair carrying traffic (the "
        "other ports idle but polled) or every pair (one trafgen per input port); total frames per second "
        "forwarded through fulmar (one run-to-completion worker polling every port) and Open vSwitch.")
    res.setup = (f"Two CPUs: every trafgen on CPU {ctx.gen_cpus}, the switch on CPU {ctx.switch_cpus(1)}; other builds "
                 "may have shared the machine.")
    res.paper = [("OFsoftswitch, fixed n ports", "throughput grows with the ports that have packets; levels off "
                  "from about 6 ports"),
                 ("Open vSwitch, multi-core", "best with ports = 2 × cores; more ports, slightly less")]
    top = max(counts)
    topo = Topo(ctx, top).build()
    for n in counts:
        pairs = [(2 * k - 1, 2 * k) for k in range(1, n // 2 + 1)]
        flows = port_flows(pairs + [(b, a) for a, b in pairs])
        ports_used = [(i, topo.sw_dev(i)) for i in range(1, n + 1)]
        for make in (lambda: Fulmar(ctx, topo, ports=[(i, d, "afpacket") for i, d in ports_used]),
                     lambda: Ovs(ctx, topo, ports=ports_used)):
            sw = make()
            sw.start(flows)
            try:
                for active in sorted({1, len(pairs)}):
                    gens = [Generator(ctx, topo.host_ns(a), topo.host_dev(a),
                                    udp_frames(16, 64, src=a, dst=b, dst_ip="10.0.0.99"), name=f"tg{a}")
                            for a, b in pairs[:active]]
                    r = measure(gens, [(topo.host_ns(b), topo.host_dev(b)) for _, b in pairs[:active]], warm, secs)
                    check_alive(sw)
                    res.add(system=sw.label, ports=n, active_pairs=active, mpps=mpps(r["fwd_pps"]),
                            offered_mpps=mpps(r["offered_pps"]), cpus=sw.cpus, gen_cpus=ctx.gen_cpus)
                    ctx.log(f"  {sw.label:8s} {n:2d} ports, {active} pair(s) active: offered "
                            f"{r['offered_pps'] / 1e3:.0f} kpps, forwarded {r['fwd_pps'] / 1e3:.0f} kpps")
            finally:
                sw.stop()
    res.table = (["system", "ports", "pairs with traffic", "offered kpps", "forwarded kpps"],
                 [[r["system"], r["ports"], r["active_pairs"], num(r["offered_mpps"] * 1e3), num(r["mpps"] * 1e3)]
                  for r in res.rows])
    for s in ("fulmar", "ovs"):
        one = [r for r in res.rows if r["system"] == s and r["active_pairs"] == 1]
        if len(one) > 1 and one[0]["mpps"]:
            res.findings.append(f"{s}: one active pair among {one[-1]['ports']} ports forwards "
                                f"{one[-1]['mpps'] / one[0]['mpps']:.2f}× what it does with 2 ports.")


def plot_ports(res):
    fig, (ax,) = figure(1, width=6.4)
    for s, lab in (("fulmar", "fulmar"), ("ovs", "OVS 3.1 netdev")):
        for active, st in (("one", "-o"), ("all", "--s")):
            pts = [r for r in res.rows if r["system"] == s and (r["active_pairs"] == 1) == (active == "one")]
            if active == "all":
                pts = [r for r in pts if r["ports"] > 2] or pts
            if pts:
                ax.plot([r["ports"] for r in pts], [r["mpps"] * 1e3 for r in pts], st, color=color(s),
                        label=f"{lab}, {'one pair' if active == 'one' else 'every pair'} with traffic")
    ax.set_xscale("log", base=2)
    xs = sorted({r["ports"] for r in res.rows})
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("ports")
    ax.set_ylabel("kpps forwarded (all pairs)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return fig


# --------------------------------------------------------------------------
@experiment("002-bridges", "002", "several bridges sharing cores, chained", (1, 3), plot="plot_bridges")
def bridges(ctx, res):
    counts = ctx.pick([2], [1, 3], [1, 2, 3, 4, 5])
    secs = ctx.pick(0.3, 1.0, 3.0)
    warm = ctx.pick(0.2, 0.7, 2.0)
    res.caption = (
        "The paper chained five OFsoftswitch instances on three cores and found that choosing which switch runs "
        "on which core beat the OS scheduler by up to 30 %. Here a chain of k bridges between two veths "
        "(host 1 → bridge 1 → … → bridge k → host 2), 64-byte frames: fulmar with k bridges in one process "
        "joined by patch links (each bridge has its own worker thread), and Open vSwitch with k netdev bridges "
        "joined by patch ports; each either pinned to one CPU (the one trafgen does not use) or left to the "
        "scheduler on both. Right: the paper's figures and ours at the longest chain, scheduler ÷ pinned.")
    res.setup = (f"Two CPUs: trafgen always on CPU {ctx.gen_cpus}; 'pinned' = the switch on CPU {ctx.switch_cpus(1)} "
                 f"(all of the process: every bridge's worker), 'scheduler' = on CPUs 0-{ctx.ncpu - 1}; other "
                 "builds may have shared the machine.")
    res.paper = [(f"5 softswitches on 3 cores, {t}", f"{a} Mbit/s under the OS scheduler, {b} Mbit/s with the best "
                  f"pinning (+{100 * (b / a - 1):.0f} %)") for t, (a, b) in PAPER_CHAIN.items()]
    topo = Topo(ctx, 2).build()
    frames = udp_frames(16, 64, dst_ip="10.0.0.99")
    allcpu = f"0-{ctx.ncpu - 1}"
    for k in counts:
        names = [ctx.name(f"b{i}") for i in range(1, k + 1)]
        fb = {}
        bridges_f, bridges_o, links, patches = [], [], [], []
        for i, name in enumerate(names, 1):
            pf = [(1, topo.sw_dev(1), "afpacket")] if i == 1 else [(1, "", "patch")]
            pf += [(2, topo.sw_dev(2), "afpacket")] if i == k else [(2, "", "patch")]
            bridges_f.append({"name": name, "ports": pf})
            po = [(1, topo.sw_dev(1))] if i == 1 else []
            po += [(2, topo.sw_dev(2))] if i == k else []
            bridges_o.append({"name": name, "ports": po})
            fb[name] = port_flows([(1, 2), (2, 1)])
            if i < k:
                links.append((f"{name}:2", f"{names[i]}:1"))
                patches.append(((name, 2, ctx.name(f"p{i}a")), (names[i], 1, ctx.name(f"p{i}b"))))
        for pin in ("pinned", "scheduler"):
            cpus = ctx.switch_cpus(1) if pin == "pinned" else allcpu
            for make in (lambda: Fulmar(ctx, topo, bridges=bridges_f, patch_links=links, cpus=cpus),
                         lambda: Ovs(ctx, topo, bridges=bridges_o, patches=patches, cpus=cpus)):
                sw = make()
                sw.start(flows_by_bridge=fb)
                try:
                    r = throughput(ctx, topo, frames, warm=warm, secs=secs)
                    check_alive(sw)
                finally:
                    sw.stop()
                res.add(system=sw.label, bridges=k, placement=pin, mpps=mpps(r["fwd_pps"]),
                        offered_mpps=mpps(r["offered_pps"]), cpus=cpus, gen_cpus=ctx.gen_cpus)
                ctx.log(f"  {sw.label:8s} {k} bridge(s), {pin:9s}: forwarded {r['fwd_pps'] / 1e3:.0f} kpps "
                        f"(offered {r['offered_pps'] / 1e3:.0f})")
    res.table = (["system", "bridges", "placement", "forwarded kpps", "CPUs"],
                 [[r["system"], r["bridges"], r["placement"], num(r["mpps"] * 1e3), r["cpus"]] for r in res.rows])
    kmax = max(counts)
    for s in ("fulmar", "ovs"):
        v = {r["placement"]: r["mpps"] for r in res.rows if r["system"] == s and r["bridges"] == kmax}
        if v.get("pinned"):
            res.findings.append(f"{s}, {kmax} bridges: the scheduler's placement forwards "
                                f"{v.get('scheduler', 0) / v['pinned']:.2f}× the pinned one.")


def plot_bridges(res):
    fig, (ax, ax2) = figure(2)
    for s, lab in (("fulmar", "fulmar"), ("ovs", "OVS 3.1 netdev")):
        for pin, st in (("pinned", "-o"), ("scheduler", "--s")):
            pts = [r for r in res.rows if r["system"] == s and r["placement"] == pin]
            if pts:
                ax.plot([r["bridges"] for r in pts], [r["mpps"] * 1e3 for r in pts], st, color=color(s),
                        label=f"{lab}, {pin}")
    ax.set_xlabel("bridges in the chain")
    ax.set_ylabel("kpps forwarded")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    names, vals, cols = [], [], []
    for t, (a, b) in PAPER_CHAIN.items():
        names.append(f"paper\n{t}")
        vals.append(a / b)
        cols.append(color("paper"))
    kmax = max(r["bridges"] for r in res.rows)
    for s in ("fulmar", "ovs"):
        v = {r["placement"]: r["mpps"] for r in res.rows if r["system"] == s and r["bridges"] == kmax}
        if v.get("pinned") and "scheduler" in v:
            names.append(f"{s}\n{kmax} bridges")
            vals.append(v["scheduler"] / v["pinned"])
            cols.append(color(s))
    ax2.bar(range(len(vals)), vals, color=cols)
    ax2.set_xticks(range(len(vals)), names, fontsize=7)
    ax2.axhline(1, color="#999999", lw=1)
    ax2.set_ylabel("OS scheduler ÷ pinned (paper: ÷ best pinning)")
    return fig
