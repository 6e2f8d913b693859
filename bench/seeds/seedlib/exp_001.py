"""Seed 001 (Lagopus, the design paper): the VLAN-to-MPLS gateway at 100K
rules, against packet size and against the number of workers."""

from . import experiment
from .common import bench, check_alive, gateway_frames, gateway_rules, mpps, throughput
from .report import color, figure, num
from .switches import Fulmar, Ovs
from .topo import Topo

PAPER_MPPS = 10.1  # 64-byte packets, 100K rules, 16 threads, 2x Xeon E5-2660, DPDK 1.5


def line_rate_mpps(size, gbps=10):
    """Frames per second a 10 Gbit/s Ethernet carries (size with the FCS;
    preamble and gap add 20 bytes)."""
    return gbps * 1e9 / ((size + 20) * 8) / 1e6


def rows_by(res, *keys):
    return {tuple(r[k] for k in keys): r for r in res.rows}


@experiment("001-size", "001", "gateway throughput against packet size, 100K rules", (1.5, 4),
            plot="plot_size")
def size(ctx, res):
    rules = ctx.pick(1000, 100000, 100000)
    sizes = ctx.pick([64, 1518], [64, 512, 1518], [64, 128, 256, 512, 1024, 1518])
    secs = ctx.pick(0.3, 1.0, 3.0)
    warm = ctx.pick(0.2, 0.7, 2.0)
    res.caption = (f"The seed-001 gateway (in_port + VLAN id → pop_vlan, push_mpls, set mpls_label, output), "
                   f"{rules:,} rules. Left: frames per second against frame size: `fulmar bench` (the pipeline "
                   "alone, in memory, one worker; with and without the cost of refilling its packets), and "
                   "fulmar (run-to-completion, one worker) and Open vSwitch forwarding the same rules between two "
                   "veths (trafgen sending one flow per VLAN of port 1, 4094 flows, counted at the receiving "
                   "veth), beside 10GbE line rate and the paper's 10.1 Mpps. Right: fulmar / OVS on the veths, "
                   "same run.")
    res.setup = (f"Two CPUs: trafgen on CPU {ctx.gen_cpus}, the switch (or the bench worker) on CPU "
                 f"{ctx.switch_cpus(1)}; the kernel's veth work runs on the CPU of whoever sends; other builds "
                 "may have shared the machine.")
    res.paper = [("gateway VLAN → MPLS, 100K rules, 64 B", f"{PAPER_MPPS} Mpps (5.66 Gbit/s) on 16 threads "
                  "(2 × Xeon E5-2660, DPDK 1.5, Intel X520, Ixia tester)"),
                 ("long packets", "10 Gbit/s wire rate")]
    for s in sizes:
        d = bench(ctx, "gateway-vlan2mpls", rules, size=s, secs=secs)
        res.add(system="fulmar-bench", where="in-memory pipeline", size=s, rules=rules, mpps=d["mpps"],
                mpps_wall=d["mpps_wall"], gbps=d["mpps"] * s * 8 / 1e3, cpus=d["cpus"])
        ctx.log(f"  fulmar bench {s:5d} B: {d['mpps']:.2f} Mpps pipeline, {d['mpps_wall']:.2f} with the generator")
    topo = Topo(ctx, 2, mtu=1600).build()
    flows = gateway_rules(rules)
    for sw in (Fulmar(ctx, topo, label="fulmar"), Ovs(ctx, topo, label="ovs")):
        sw.start(flows)
        try:
            for s in sizes:
                r = throughput(ctx, topo, gateway_frames(rules, s), warm=warm, secs=secs)
                check_alive(sw)
                res.add(system=sw.label, where="veth", size=s, rules=rules, mpps=mpps(r["fwd_pps"]),
                        offered_mpps=mpps(r["offered_pps"]), loss=r["loss"], gbps=r["fwd_pps"] * s * 8 / 1e9,
                        cpus=sw.cpus, gen_cpus=ctx.gen_cpus)
                ctx.log(f"  {sw.label:8s} veth {s:5d} B: offered {r['offered_pps'] / 1e3:.0f} kpps, "
                        f"forwarded {r['fwd_pps'] / 1e3:.0f} kpps")
        finally:
            sw.stop()

    by = rows_by(res, "system", "size")
    rows = []
    for s in sizes:
        f, o, b = by.get(("fulmar", s)), by.get(("ovs", s)), by[("fulmar-bench", s)]
        ratio = f["mpps"] / o["mpps"] if f and o and o["mpps"] else None
        rows.append([s, num(b["mpps"]), num(b["mpps_wall"]), num(f and f["mpps"] * 1e3), num(o and o["mpps"] * 1e3),
                     num(ratio), num(line_rate_mpps(s))])
    res.table = (["frame bytes", "fulmar bench Mpps (pipeline)", "fulmar bench Mpps (with generator)",
                  "fulmar veth kpps", "OVS veth kpps", "fulmar / OVS", "10GbE line rate Mpps"], rows)
    ratios = [(r[0], r[5]) for r in rows if r[5] != "–"]
    if ratios:
        res.findings.append("On the veths fulmar forwards " + ", ".join(f"{x}× ({s} B)" for s, x in ratios)
                            + " what Open vSwitch does; both are bound by the veths and packet sockets, the "
                            "pipeline alone runs 10–100× faster.")


def plot_size(res):
    by = rows_by(res, "system", "size")
    xs = sorted({r["size"] for r in res.rows})
    fig, (ax, ax2) = figure(2)
    for sysname, key, style, lab in (("fulmar-bench", "mpps", "-o", "fulmar bench (pipeline only)"),
                                     ("fulmar-bench", "mpps_wall", ":o", "fulmar bench (with generator)"),
                                     ("fulmar", "mpps", "-s", "fulmar, veth"),
                                     ("ovs", "mpps", "-^", "OVS 3.1 netdev, veth")):
        pts = [(s, by[(sysname, s)][key]) for s in xs if (sysname, s) in by]
        if pts:
            ax.plot(*zip(*pts), style, color=color(sysname), label=lab, alpha=0.6 if key == "mpps_wall" else 1)
    ax.plot(xs, [line_rate_mpps(s) for s in xs], "--", color="#999999", label="10GbE line rate")
    ax.plot([64], [PAPER_MPPS], "*", color=color("paper"), markersize=12, label="paper: Lagopus, 16 threads")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(xs, [str(s) for s in xs])
    ax.set_xlabel("frame size (bytes)")
    ax.set_ylabel("Mpps (log)")
    ax.legend(fontsize=7)
    pts = [(str(s), by[("fulmar", s)]["mpps"] / by[("ovs", s)]["mpps"]) for s in xs
           if ("fulmar", s) in by and ("ovs", s) in by and by[("ovs", s)]["mpps"]]
    if pts:
        ax2.bar(*zip(*pts), color=color("fulmar"))
    ax2.axhline(1, color="#999999", lw=1)
    ax2.set_xlabel("frame size (bytes)")
    ax2.set_ylabel("fulmar / OVS, frames forwarded (veth)")
    return fig


@experiment("001-workers", "001", "gateway throughput against the number of workers", (1, 3),
            plot="plot_workers")
def workers(ctx, res):
    rules = ctx.pick(1000, 100000, 100000)
    counts = [n for n in (1, 2, 4, 8, 16) if n <= max(ctx.ncpu, 2)]
    secs = ctx.pick(0.3, 1.0, 3.0)
    warm = ctx.pick(0.2, 0.7, 2.0)
    res.caption = ("Frames per second of the seed-001 gateway (100K rules, 64-byte frames) against worker threads: "
                   "`fulmar bench` (in memory, each worker refilling its own packets) as far as this machine has "
                   "CPUs; fulmar rx-worker-tx (dispatch by 5-tuple over 4094 flows) and run-to-completion, and "
                   "Open vSwitch (its netdev datapath reads veths from one thread), forwarding between two veths; "
                   "the paper's 10.1 Mpps on 16 threads.")
    res.setup = (f"{ctx.ncpu} CPUs: trafgen on CPU {ctx.gen_cpus}; the switch on the CPUs in the table, never the "
                 "generator's (on a 2-CPU machine rx-worker-tx's RX, worker(s) and TX threads share CPU 1, so a "
                 "second worker adds a thread, not a core); `fulmar bench` on the CPUs in the table; other builds "
                 "may have shared the machine.")
    res.paper = [("gateway, 100K rules, 64 B", f"{PAPER_MPPS} Mpps with 16 threads (8 cores × 2 hyper-threads, "
                  "RX, worker and TX threads together)")]
    for n in counts:
        d = bench(ctx, "gateway-vlan2mpls", rules, secs=secs, workers=n)
        res.add(system="fulmar-bench", where="in-memory pipeline", workers=n, rules=rules, mpps=d["mpps"],
                mpps_wall=d["mpps_wall"], cpus=d["cpus"])
        ctx.log(f"  fulmar bench, {n} workers: {d['mpps']:.2f} Mpps")
    topo = Topo(ctx, 2, mtu=1600).build()
    flows = gateway_rules(rules)
    frames = gateway_frames(rules, 64)
    configs = [("fulmar-rwt", n, lambda n=n: Fulmar(ctx, topo, label=f"fulmar-rwt-{n}", mode="rx-worker-tx",
                                                     workers=n, cpus=ctx.switch_cpus(n),
                                                     dataplane={"dispatch": "5tuple"}))
               for n in counts if n <= 2]
    configs.append(("fulmar", 1, lambda: Fulmar(ctx, topo, label="fulmar-rtc-1")))
    configs.append(("ovs", 1, lambda: Ovs(ctx, topo, label="ovs")))
    for system, n, make in configs:
        sw = make()
        sw.start(flows)
        try:
            r = throughput(ctx, topo, frames, warm=warm, secs=secs)
            check_alive(sw)
        finally:
            sw.stop()
        res.add(system=system, where="veth", workers=n, rules=rules, mpps=mpps(r["fwd_pps"]),
                offered_mpps=mpps(r["offered_pps"]), loss=r["loss"], cpus=sw.cpus, gen_cpus=ctx.gen_cpus)
        ctx.log(f"  {sw.label:14s} veth: offered {r['offered_pps'] / 1e3:.0f} kpps, "
                f"forwarded {r['fwd_pps'] / 1e3:.0f} kpps")
    res.table = (["system", "where", "workers", "Mpps", "CPUs"],
                 [[r["system"], r["where"], r["workers"], num(r["mpps"]), r["cpus"]] for r in res.rows])
    b = [r for r in res.rows if r["system"] == "fulmar-bench"]
    if len(b) > 1:
        res.findings.append(f"In memory the pipeline gives {b[-1]['mpps'] / b[0]['mpps']:.2f}× from 1 to "
                            f"{b[-1]['workers']} workers on {ctx.ncpu} CPUs; the paper's 16 threads need cores "
                            "this machine does not have.")
    v = {r["workers"]: r["mpps"] for r in res.rows if r["system"] == "fulmar-rwt"}
    if 1 in v and 2 in v and v[1]:
        res.findings.append(f"On the veths two rx-worker-tx workers give {v[2] / v[1]:.2f}× one: the RX and TX "
                            "threads and the kernel's veth work, not the workers, bound it here.")


def plot_workers(res):
    fig, (ax,) = figure(1, width=6.4)
    for system, style, lab in (("fulmar-bench", "-o", "fulmar bench (in memory)"),
                               ("fulmar-rwt", "-s", "fulmar rx-worker-tx, veth"),
                               ("fulmar", "D", "fulmar run-to-completion, veth"),
                               ("ovs", "^", "OVS 3.1 netdev, veth")):
        pts = [(r["workers"], r["mpps"]) for r in res.rows if r["system"] == system]
        if pts:
            ax.plot(*zip(*pts), style, color=color(system), label=lab)
    ax.plot([16], [PAPER_MPPS], "*", color=color("paper"), markersize=12, label="paper: Lagopus, 16 threads")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
    ax.set_xlabel("worker threads")
    ax.set_ylabel("Mpps (log)")
    ax.legend(fontsize=7)
    return fig
