"""Seed 004 (Costa et al., performance evaluation of OpenFlow data
planes): packet delay by match type and by rewrite action, flow-stats and
port-stats reply delay against table size, and table capacity until the
switch refuses (or fails)."""

import random
import struct
import time

from . import experiment
from .common import check_alive, udp_frames
from .core import ExperimentError, sh
from .ofclient import TABLE_FULL, ERR_FLOW_MOD_FAILED, Client, apply_actions, flow_mod, match, output, oxm
from .report import color, figure, label_axes, num
from .switches import Fulmar, Ovs, port_flows
from .topo import Topo, host_ip, host_mac
from .traffic import Generator, UdpEcho, ping_until, summary

# Table III (ms, 99 % confidence interval of the mean delay, 64 B): Open vSwitch 2.3.
PAPER_MATCH_OVS = {"port": (0.514, 0.519), "mac": (0.502, 0.508), "ip": (0.504, 0.508), "udp": (0.513, 0.517),
                   "exact": (0.508, 0.511)}
# Table VI (ms): Open vSwitch 2.3 with header rewrites.
PAPER_REWRITE_OVS = {"none": (0.508, 0.511), "mac": (0.511, 0.516), "ip": (0.510, 0.515), "tos": (0.506, 0.510),
                     "udp": (0.512, 0.515)}
# Tables VII and VIII (ms): Open vSwitch 2.3, one rule vs a nearly full table (~750K), light/heavy load.
PAPER_FLOWSTATS_OVS = {"one rule": (1.763, 2.293, 1.502, 1.954), "nearly full": (459.776, 598.012, 483.018, 628.242)}
PAPER_PORTSTATS_OVS = {"one rule": (1.261, 1.641, 1.120, 1.456), "nearly full": (1.258, 1.636, 1.131, 1.471)}
PAPER_CAPACITY = {"Open vSwitch 2.3": 750000, "Pica8 P-3297": 4096, "Datacom DM4001": 2051,
                  "Extreme x460": 1200, "Mikrotik": 389, "Extreme x440": 248, "NetFPGA": 124}

SPORT, DPORT = 40000, 7000
A, B = host_ip(1), host_ip(2)
MA, MB = host_mac(1), host_mac(2)


def match_flows(kind):
    """Both directions of the echo, matched on kind's fields."""
    def both(fwd, rev):
        return (f"table=0,priority=100,{fwd},actions=output:2\n"
                f"table=0,priority=100,{rev},actions=output:1\n")

    if kind == "port":
        return both("in_port=1", "in_port=2")
    if kind == "mac":
        return both(f"dl_src={MA},dl_dst={MB}", f"dl_src={MB},dl_dst={MA}")
    if kind == "ip":
        return both(f"ip,nw_src={A},nw_dst={B}", f"ip,nw_src={B},nw_dst={A}")
    if kind == "udp":
        return both(f"udp,nw_src={A},nw_dst={B},tp_src={SPORT},tp_dst={DPORT}",
                    f"udp,nw_src={B},nw_dst={A},tp_src={DPORT},tp_dst={SPORT}")
    if kind == "exact":
        common = "udp,vlan_tci=0x0000,nw_tos=0,nw_ecn=0"
        return both(f"in_port=1,dl_src={MA},dl_dst={MB},{common},nw_src={A},nw_dst={B},tp_src={SPORT},tp_dst={DPORT}",
                    f"in_port=2,dl_src={MB},dl_dst={MA},{common},nw_src={B},nw_dst={A},tp_src={DPORT},tp_dst={SPORT}")
    if kind == "wildcard":
        # The echo's own rules are prefixes; above them, 1000 ACL-like rules
        # of many shapes (source and destination prefixes of mixed lengths,
        # protocol, destination port or not) that it does not match, so the
        # classifier searches several subtables.
        rng = random.Random(7)
        lines = []
        for k in range(1000):
            sl, dl = rng.choice((8, 16, 24, 28, 32)), rng.choice((8, 16, 20, 24, 32))
            src, dst = prefix(rng, sl), prefix(rng, dl)
            proto = rng.choice(("tcp", "udp", "ip"))
            port = f",tp_dst={rng.randrange(1, 65535)}" if proto != "ip" and rng.random() < 0.7 else ""
            lines.append(f"table=0,priority={2000 - k},{proto},nw_src={src}/{sl},nw_dst={dst}/{dl}{port},"
                         "actions=drop\n")
        lines.append(both("ip,nw_src=10.0.0.0/30,nw_dst=10.0.0.2/31", "ip,nw_src=10.0.0.2/31,nw_dst=10.0.0.0/30")
                     .replace("priority=100", "priority=10"))
        return "".join(lines)
    if kind.startswith("ip+"):
        # The echo's rules installed last after n other exact IP rules.
        n = int(kind[3:])
        lines = [f"table=0,priority=100,ip,nw_src=11.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255},nw_dst={B},"
                 "actions=drop\n" for i in range(n)]
        return "".join(lines) + match_flows("ip")
    raise ValueError(kind)


def prefix(rng, length):
    """A random address in 20.0.0.0–199.255.255.255 with its host bits clear."""
    a = (rng.randrange(20, 200) << 24) | rng.randrange(1 << 24)
    a &= (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF
    return ".".join(str((a >> s) & 255) for s in (24, 16, 8, 0))


REWRITES = {
    "none": ("in_port=1", "", "in_port=2", ""),
    "mac": ("in_port=1", "set_field:02:00:00:00:ee:01->eth_src,", "in_port=2", "set_field:02:00:00:00:ee:02->eth_src,"),
    "ip": ("ip,in_port=1", "set_field:10.0.0.99->ip_src,", "ip,in_port=2,nw_dst=10.0.0.99",
           f"set_field:{A}->ip_dst,"),
    "tos": ("ip,in_port=1", "set_field:46->ip_dscp,", "ip,in_port=2", "set_field:0->ip_dscp,"),
    "ttl": ("ip,in_port=1", "dec_ttl,", "ip,in_port=2", "dec_ttl,"),
    "udp": (f"udp,in_port=1,tp_dst={DPORT + 1}", f"set_field:{DPORT}->udp_dst,", f"udp,in_port=2,tp_src={DPORT}",
            f"set_field:{DPORT + 1}->udp_src,"),
}


def rewrite_flows(kind):
    if kind == "vlan":
        # No 802.1Q in this kernel to give a host a tagged interface: the
        # tag is pushed (VLAN 10, priority 5), looked up again in table 1
        # and popped on the way out.
        return ("table=0,priority=100,in_port=1,actions=push_vlan:0x8100,set_field:4106->vlan_vid,"
                "set_field:5->vlan_pcp,goto_table:1\n"
                "table=1,priority=100,in_port=1,dl_vlan=10,actions=pop_vlan,output:2\n"
                "table=0,priority=100,in_port=2,actions=output:1\n")
    fm, fa, rm, ra = REWRITES[kind]
    extra = "table=0,priority=1,in_port=2,actions=output:1\n" if kind == "ip" else ""
    return (f"table=0,priority=100,{fm},actions={fa}output:2\n"
            f"table=0,priority=100,{rm},actions={ra}output:1\n" + extra)


def echo_setup(ctx, topo, kind):
    """Host-side preparation: for the IP rewrite host 2 answers 10.0.0.99
    through host 1's MAC."""
    if kind == "ip":
        sh(f"ip -n {topo.host_ns(2)} neigh replace 10.0.0.99 lladdr {MA} dev {topo.host_dev(2)} nud permanent")


def echo_target(kind):
    """Where the client sends for a rewrite: the UDP case sends to the port
    the switch rewrites to the server's."""
    if kind == "udp":
        return B, DPORT + 1
    return B, DPORT


def delay_runs(ctx, res, kinds, flows_of, sizes, count, part, target=lambda kind: (B, DPORT)):
    topo = Topo(ctx, 2).build()
    for make in (lambda: Fulmar(ctx, topo), lambda: Ovs(ctx, topo)):
        sw = make()
        sw.start("")
        try:
            for kind in kinds:
                sw.replace_flows(flows_of(kind))
                if part == "rewrite":
                    echo_setup(ctx, topo, kind)
                ip, port = target(kind)
                echo = UdpEcho(ctx, topo.host_ns(2), "0.0.0.0", DPORT).start()
                try:
                    time.sleep(0.2)
                    for s in sizes:
                        payload = max(s - 42, 8)  # Ethernet + IPv4 + UDP headers
                        warm = echo.rtts(topo.host_ns(1), 20, payload, sport=SPORT, dport=port, dst=ip)
                        if not warm["rtt_us"]:
                            raise ExperimentError(f"{sw.label}, {part} {kind}: no echo answered")
                        r = echo.rtts(topo.host_ns(1), count, payload, sport=SPORT, dport=port, dst=ip,
                                      interval=0.0002, cpus=ctx.gen_cpus)
                        st = summary(r["rtt_us"])
                        ci = 2.576 * st["sd"] / max(st["n"], 1) ** 0.5 if st["n"] else None
                        res.add(system=sw.label, kind=kind, size=s, sent=r["sent"], answered=st["n"],
                                mean_us=st.get("mean"), median_us=st.get("median"), p10_us=st.get("p10"),
                                p90_us=st.get("p90"), ci99_us=ci, cpus=sw.cpus)
                        ctx.log(f"  {sw.label:7s} {part} {kind:9s} {s:4d} B: median {st.get('median', 0):6.1f} µs, "
                                f"mean {st.get('mean', 0):6.1f} ± {ci or 0:4.1f} µs ({st['n']}/{r['sent']})")
                    check_alive(sw)
                finally:
                    echo.stop()
        finally:
            sw.stop()


def delay_table(res, paper):
    rows = []
    for r in res.rows:
        p = paper.get(r["kind"])
        rows.append([r["system"], r["kind"], r["size"], num(r["median_us"]), num(r["mean_us"]),
                     f"± {r['ci99_us']:.1f}" if r["ci99_us"] is not None else "–", f"{r['answered']}/{r['sent']}",
                     f"{p[0] * 1e3:.0f}–{p[1] * 1e3:.0f}" if p and r["system"] == "ovs" and r["size"] == 64 else ""])
    return (["system", "kind", "frame bytes", "median µs", "mean µs", "99 % CI", "answered",
             "paper's OVS 2.3 at 64 B, µs"], rows)


def plot_match(res):
    return plot_delay(res, PAPER_MATCH_OVS, "match")


def plot_rewrite(res):
    return plot_delay(res, PAPER_REWRITE_OVS, "rewrite")


def plot_delay(res, paper, xlabel):
    kinds = []
    for r in res.rows:
        if r["kind"] not in kinds:
            kinds.append(r["kind"])
    fig, (ax, ax2) = figure(2)
    sizes = sorted({r["size"] for r in res.rows})
    width = 0.8 / (2 * len(sizes))
    for j, (system, lab) in enumerate((("fulmar", "fulmar"), ("ovs", "OVS 3.1 netdev"))):
        for si, s in enumerate(sizes):
            pts = {r["kind"]: r for r in res.rows if r["system"] == system and r["size"] == s}
            xs = [i + (j * len(sizes) + si) * width - 0.4 + width / 2 for i, k in enumerate(kinds) if k in pts]
            ys = [pts[k]["median_us"] for k in kinds if k in pts]
            lo = [pts[k]["median_us"] - pts[k]["p10_us"] for k in kinds if k in pts]
            hi = [pts[k]["p90_us"] - pts[k]["median_us"] for k in kinds if k in pts]
            ax.bar(xs, ys, width, yerr=[lo, hi], color=color(system), alpha=1 - 0.25 * si, capsize=2,
                   label=f"{lab}, {s} B")
    ax.set_xticks(range(len(kinds)), kinds, fontsize=8)
    label_axes(ax, xlabel, "UDP echo round trip, median µs (bars: p10–p90)")
    # Relative to the first kind, same switch and size: what the match or
    # rewrite itself costs; the paper's OVS beside.
    for system in ("fulmar", "ovs"):
        for s in sizes[:1]:
            pts = {r["kind"]: r for r in res.rows if r["system"] == system and r["size"] == s}
            base = pts.get(kinds[0])
            if base and base["median_us"]:
                ks = [k for k in kinds if k in pts]
                ax2.plot(range(len(ks)), [pts[k]["median_us"] / base["median_us"] for k in ks], "-o",
                         color=color(system), label=f"{system}, {s} B")
    pk = [k for k in kinds if k in paper]
    if pk:
        b = sum(paper[kinds[0]]) / 2
        ax2.plot([kinds.index(k) for k in pk], [sum(paper[k]) / 2 / b for k in pk], "k--", marker="x",
                 label="paper: OVS 2.3 (hardware testbed)")
    ax2.axhline(1, color="#999999", lw=1)
    ax2.set_xticks(range(len(kinds)), kinds, fontsize=8)
    label_axes(ax2, xlabel, f"median ÷ median with '{kinds[0]}'")
    return fig


@experiment("004-match", "004", "packet delay by match type", (1.5, 4), plot="plot_match")
def matches(ctx, res):
    kinds = ctx.pick(["port", "udp", "wildcard"], ["port", "mac", "ip", "udp", "exact", "wildcard"],
                     ["port", "mac", "ip", "udp", "exact", "wildcard", "ip+100000"])
    sizes = ctx.pick([64], [64, 256], [64, 128, 256])
    count = ctx.pick(30, 300, 2000)
    res.caption = (
        "The paper's Tables III and V: the round trip of UDP packets echoed back through the switch, with the "
        "two rules (one each way) matching on: the input port; source and destination MAC; IPv4 addresses; "
        "addresses, protocol and UDP ports; every field (exact); IPv4 prefixes below 1000 wildcard rules of many "
        f"shapes the echo misses (wildcard)"
        f"{'; the IP rules installed after 100,000 others (ip+100000)' if len(kinds) > 6 else ''}. "
        f"{count} echoes per case, one at a time 0.2 ms apart, from a Python client; fulmar (run-to-completion, "
        "defaults) and Open vSwitch, the same rules over their management sockets. Left: median and p10–p90; "
        "right: relative to matching the input port, beside the paper's Open vSwitch 2.3.")
    res.setup = (f"Two CPUs: the echo client on CPU {ctx.gen_cpus}, the switch on CPU {ctx.switch_cpus(1)}, the echo "
                 "server unpinned; other builds may have shared the machine.")
    res.paper = [(f"Open vSwitch 2.3, match on {k}, 64 B", f"{a}–{b} ms (99 % CI of the mean)")
                 for k, (a, b) in PAPER_MATCH_OVS.items()]
    res.paper.append(("hardware switches (Extreme, Pica8, NetFPGA...)", "0.1–0.25 ms whatever the match; HP "
                      "and LinkSys about 1 ms"))
    res.paper.append(("one rule vs a full table (Table V), Open vSwitch", "0.508–0.511 vs 0.513–0.517 ms"))
    delay_runs(ctx, res, kinds, match_flows, sizes, count, "match")
    res.table = delay_table(res, PAPER_MATCH_OVS)
    for system in ("fulmar", "ovs"):
        pts = {r["kind"]: r["median_us"] for r in res.rows if r["system"] == system and r["size"] == sizes[0]}
        if pts.get("port"):
            res.findings.append(f"{system}: medians at {sizes[0]} B from {min(pts.values()):.0f} to "
                                f"{max(pts.values()):.0f} µs across the match types "
                                f"({max(pts.values()) / min(pts.values()):.2f}×).")


@experiment("004-rewrite", "004", "packet delay by rewrite action", (1, 3), plot="plot_rewrite")
def rewrites(ctx, res):
    kinds = ctx.pick(["none", "ip", "vlan"], ["none", "mac", "ip", "tos", "ttl", "udp", "vlan"],
                     ["none", "mac", "ip", "tos", "ttl", "udp", "vlan"])
    count = ctx.pick(30, 300, 2000)
    res.caption = (
        "The paper's Table VI: the echo's round trip when the switch rewrites a header on the way: nothing; the "
        "source MAC; the source IPv4 address (restored on the way back); the DSCP; the TTL (dec_ttl); the UDP "
        "destination port (restored on the way back); a VLAN tag with a priority pushed, looked up in a "
        "second table and popped (this kernel has no 802.1Q to give a host a tagged interface). "
        f"64-byte frames, {count} echoes per case; fulmar and Open vSwitch. Right: relative to no rewrite, "
        "beside the paper's Open vSwitch 2.3.")
    res.setup = (f"Two CPUs: the echo client on CPU {ctx.gen_cpus}, the switch on CPU {ctx.switch_cpus(1)}, the echo "
                 "server unpinned; other builds may have shared the machine.")
    res.paper = [(f"Open vSwitch 2.3, rewrite {k}", f"{a}–{b} ms") for k, (a, b) in PAPER_REWRITE_OVS.items()]
    delay_runs(ctx, res, kinds, rewrite_flows, [64], count, "rewrite", target=echo_target)
    res.table = delay_table(res, PAPER_REWRITE_OVS)
    for system in ("fulmar", "ovs"):
        pts = {r["kind"]: r["median_us"] for r in res.rows if r["system"] == system}
        if pts.get("none"):
            worst = max(pts, key=pts.get)
            res.findings.append(f"{system}: the costliest rewrite ({worst}) adds "
                                f"{pts[worst] - pts['none']:.0f} µs to the {pts['none']:.0f} µs median.")


# --------------------------------------------------------------------------
def ip_rule_mods(start, n, xid0=1000):
    """Encoded flow-mods: exact IPv4 destination rules 11.0.0.0 + i, output 2
    (in_port 1), i in [start, start + n)."""
    inst = apply_actions(output(2))
    head = oxm(0, struct.pack("!I", 1)) + oxm(5, struct.pack("!H", 0x0800))
    out = []
    for i in range(start, start + n):
        m = match(head + oxm(12, struct.pack("!I", (11 << 24) + i)))
        out.append(flow_mod(xid0 + i, m, inst, priority=100))
    return out


def install(client, start, n, batch=20000):
    """Adds rules [start, start+n) in batches closed by barriers; returns
    (seconds, first error or None)."""
    t = 0.0
    i = start
    while i < start + n:
        k = min(batch, start + n - i)
        t += client.send_batch(ip_rule_mods(i, k))
        if client.errors:
            return t, client.errors[0]
        i += k
    return t, None


@experiment("004-stats", "004", "flow-stats and port-stats reply delay against table size", (1.5, 6),
            plot="plot_stats")
def stats(ctx, res):
    sizes = ctx.pick([1, 100], [1, 1000, 10000], [1, 1000, 10000, 100000, 1000000])
    nflow = ctx.pick(2, 3, 5)
    nport = ctx.pick(3, 10, 20)
    loads = ctx.pick(["idle"], ["idle", "load"], ["idle", "load"])
    res.caption = (
        "The paper's Tables VII and VIII and Figs. 7–10: how long a controller waits for a flow-stats (every "
        "flow) and a port-stats reply, against the number of flows installed, with the switch idle or "
        "forwarding (trafgen sending 64-byte frames as fast as it can). A Python OpenFlow 1.3 client on the "
        "management socket times each request to the last part of its reply; exact IPv4 rules added in batches "
        f"with barriers; {nflow} flow-stats and {nport} port-stats requests per point (median; bars: min–max). "
        "fulmar (flow table capacity raised to fit) and Open vSwitch. Forwarding: what the receiving host got "
        "per second in the second before the requests, and while the flow-stats replies ran (the ratio in "
        "brackets; the switch's control work shares its one CPU with its forwarding).")
    res.setup = (f"Two CPUs: trafgen on CPU {ctx.gen_cpus}, the switch on CPU {ctx.switch_cpus(1)}, the client "
                 "unpinned; other builds may have shared the machine.")
    res.paper = [(f"Open vSwitch 2.3 flow stats, {k}", f"{a}–{b} ms light load, {c}–{d} ms heavy load")
                 for k, (a, b, c, d) in PAPER_FLOWSTATS_OVS.items()]
    res.paper += [(f"Open vSwitch 2.3 port stats, {k}", f"{a}–{b} ms light load, {c}–{d} ms heavy load")
                  for k, (a, b, c, d) in PAPER_PORTSTATS_OVS.items()]
    res.paper.append(("nearly full", "about 750,000 rules for Open vSwitch 2.3; hardware switches 124–4096"))
    topo = Topo(ctx, 2).build()
    frames = udp_frames(64, 64, dst_ip="10.0.0.99")
    top = max(sizes)
    for make in (lambda: Fulmar(ctx, topo, capacity=max(65536, top * 2)), lambda: Ovs(ctx, topo)):
        sw = make()
        sw.start(port_flows([(1, 2), (2, 1)]))
        try:
            c = Client(sw.mgmt)
            have = 2
            for n in sizes:
                if n > have:
                    t, err = install(c, have, n - have)
                    if err:
                        raise ExperimentError(f"{sw.label}: flow-mod refused at {have}+: error {err}")
                    ctx.log(f"  {sw.label:7s} {n - have:,} flows added in {t:.1f} s")
                    have = n
                for load in loads:
                    g = None
                    fwd_before = fwd_during = None
                    if load == "load":
                        # What host 2 receives per second without a
                        # request, then during the flow-stats replies.
                        g, fwd_before = load_and_rate(ctx, topo, frames)
                    try:
                        a, t0 = delivered(topo, 2), time.monotonic()
                        ft = [c.flow_stats() for _ in range(nflow)]
                        if load == "load":
                            fwd_during = (delivered(topo, 2) - a) / (time.monotonic() - t0)
                        pt = [c.port_stats() for _ in range(nport)]
                    finally:
                        if g:
                            g.stop()
                    check_alive(sw)
                    fs = sorted(x[0] * 1e3 for x in ft)
                    ps = sorted(x[0] * 1e3 for x in pt)
                    res.add(system=sw.label, flows=have, load=load, flow_stats_ms=fs[len(fs) // 2],
                            flow_stats_min_ms=fs[0], flow_stats_max_ms=fs[-1], flow_entries=ft[0][1],
                            flow_reply_bytes=ft[0][2], port_stats_ms=ps[len(ps) // 2], port_stats_min_ms=ps[0],
                            port_stats_max_ms=ps[-1], rss_mib=(sw.rss_kib() or 0) / 1024, cpus=sw.cpus,
                            fwd_kpps=fwd_before / 1e3 if fwd_before is not None else "",
                            fwd_during_kpps=fwd_during / 1e3 if fwd_during is not None else "")
                    fwd = (f", forwarding {fwd_before / 1e3:.0f} kpps, during the replies {fwd_during / 1e3:.0f}"
                           if fwd_before is not None else "")
                    ctx.log(f"  {sw.label:7s} {have:8,d} flows {load:4s}: flow stats {fs[len(fs) // 2]:9.1f} ms "
                            f"({ft[0][1]:,} entries), port stats {ps[len(ps) // 2]:6.2f} ms{fwd}")
            c.close()
        finally:
            sw.stop()
    def fwd(r):
        if r.get("fwd_kpps") in (None, ""):
            return ""
        b, d = float(r["fwd_kpps"]), float(r["fwd_during_kpps"])
        return f"{b:.0f} / {d:.0f} ({d / b:.2f})" if b > 0 else f"{b:.0f} / {d:.0f}"

    res.table = (["system", "flows", "load", "flow-stats ms (median)", "entries returned", "port-stats ms (median)",
                  "forwarded kpps: without / during flow-stats", "RSS MiB"],
                 [[r["system"], f"{r['flows']:,}", r["load"], num(r["flow_stats_ms"]), f"{r['flow_entries']:,}",
                   num(r["port_stats_ms"]), fwd(r), num(r["rss_mib"])] for r in res.rows])
    for system in ("fulmar", "ovs"):
        pts = [r for r in res.rows if r["system"] == system and r["load"] == "idle"]
        if len(pts) > 1:
            last = pts[-1]
            res.findings.append(f"{system}: a flow-stats reply for {last['flows']:,} flows takes "
                                f"{last['flow_stats_ms']:.0f} ms ({last['flow_stats_ms'] * 1e3 / last['flows']:.2f} "
                                f"µs a flow); port stats {pts[0]['port_stats_ms']:.2f} → "
                                f"{last['port_stats_ms']:.2f} ms.")
        loaded = [r for r in res.rows if r["system"] == system and r["load"] == "load"]
        if loaded and loaded[-1].get("fwd_kpps") not in (None, ""):
            r = loaded[-1]
            b, d = float(r["fwd_kpps"]), float(r["fwd_during_kpps"])
            res.findings.append(f"{system}, forwarding, {r['flows']:,} flows: the reply takes "
                                f"{r['flow_stats_ms']:.0f} ms; {b:.0f} kpps forwarded before it, {d:.0f} during it"
                                + (f" ({d / b:.2f})." if b > 0 else "."))


def load_and_rate(ctx, topo, frames):
    """Starts the generator on host 1 and, after a second to settle, what
    host 2 receives per second over the next one: (generator, rate)."""
    g = Generator(ctx, topo.host_ns(1), topo.host_dev(1), frames).start()
    time.sleep(1.0)
    a, t0 = delivered(topo, 2), time.monotonic()
    time.sleep(1.0)
    return g, (delivered(topo, 2) - a) / (time.monotonic() - t0)


def delivered(topo, host):
    """Frames host `host`'s interface has received (its kernel counter)."""
    out = sh(f"ip netns exec {topo.host_ns(host)} cat /sys/class/net/{topo.host_dev(host)}/statistics/rx_packets")
    return int(out.stdout.strip())


def plot_stats(res):
    fig, (ax, ax2) = figure(2)
    for system in ("fulmar", "ovs"):
        for load, st in (("idle", "-o"), ("load", "--s")):
            pts = [r for r in res.rows if r["system"] == system and r["load"] == load]
            if not pts:
                continue
            lab = f"{'OVS 3.1 netdev' if system == 'ovs' else 'fulmar'}, {'idle' if load == 'idle' else 'forwarding'}"
            x = [r["flows"] for r in pts]
            for a, key in ((ax, "flow_stats"), (ax2, "port_stats")):
                y = [r[f"{key}_ms"] for r in pts]
                err = [[r[f"{key}_ms"] - r[f"{key}_min_ms"] for r in pts],
                       [r[f"{key}_max_ms"] - r[f"{key}_ms"] for r in pts]]
                a.errorbar(x, y, yerr=err, fmt=st, color=color(system), label=lab, capsize=2)
    for k, (a, b, c, d) in PAPER_FLOWSTATS_OVS.items():
        x = 1 if k == "one rule" else 750000
        ax.plot([x, x], [a, d], "k-", lw=3, alpha=0.5)
        ax.plot([x], [(a + b) / 2], "kx")
    for k, (a, b, c, d) in PAPER_PORTSTATS_OVS.items():
        x = 1 if k == "one rule" else 750000
        ax2.plot([x], [(a + b) / 2], "kx")
    ax.plot([], [], "kx", label="paper: OVS 2.3 (1 rule, ~750K)")
    ax2.plot([], [], "kx", label="paper: OVS 2.3 (1 rule, ~750K)")
    for a, t in ((ax, "flow-stats reply (ms, log)"), (ax2, "port-stats reply (ms, log)")):
        a.set_xscale("symlog", linthresh=1)
        a.set_yscale("log")
        a.set_xlabel("flows installed")
        a.set_ylabel(t)
        a.legend(fontsize=7)
    return fig


# --------------------------------------------------------------------------
@experiment("004-capacity", "004", "flow table capacity until the switch refuses or fails", (1.5, 5),
            plot="plot_capacity")
def capacity(ctx, res):
    configured_cap = 65536
    big = ctx.pick(2000, 200000, 1000000)
    batch = ctx.pick(500, 10000, 50000)
    res.caption = (
        "The paper's Table IV: how many rules each switch takes before it refuses them (its table-full error) or "
        "becomes unstable. Exact IPv4 rules are added in batches closed by a barrier by a Python OpenFlow 1.3 "
        "client until the switch answers FLOW_MOD_FAILED/TABLE_FULL or the limit of this run; after each batch "
        "the switch's resident memory, and at the end whether it still forwards (a ping through it). fulmar "
        f"with its defaults (no table limit below what memory holds) up to {int(big * 1.1):,}, and with "
        f"`flow_table_capacity = {configured_cap:,}` (refuses at that limit); Open vSwitch (no table limit) up to "
        f"{int(big * 1.1):,}. Left: memory against rules; right: flow-mods per second per batch.")
    res.setup = (f"Two CPUs: the switch on CPU {ctx.switch_cpus(1)}, the client unpinned; other builds may have "
                 "shared the machine.")
    res.paper = [(k, f"{v:,} rules in OpenFlow mode") for k, v in PAPER_CAPACITY.items()]
    res.paper.append(("stability", "most switches became unstable about 10 % below their maximum, and almost all "
                      "hung on flow/port-stats requests with nearly full tables"))
    topo = Topo(ctx, 2).build()
    runs = [("fulmar", configured_cap, int(configured_cap * 1.05)), ("fulmar", None, int(big * 1.1)),
            ("ovs", None, int(big * 1.1))]
    for system, cap, limit in runs:
        sw = (Fulmar(ctx, topo, label=f"fulmar-{cap or 'default'}", capacity=cap) if system == "fulmar"
              else Ovs(ctx, topo))
        sw.start(port_flows([(1, 2), (2, 1)]))
        if system == "ovs":
            label = "OVS 3.1 netdev"
        else:
            label = f"fulmar, capacity {cap:,}" if cap else "fulmar, default (no table limit)"
        try:
            c = Client(sw.mgmt)
            have, err = 2, None
            res.add(system=system, run=label, flows=have, rate=None, rss_mib=(sw.rss_kib() or 0) / 1024, refused=None)
            while have < limit and not err:
                k = min(batch, limit - have)
                t, err = install(c, have, k, batch=k)
                if err:
                    # How many of the batch went in: the table's count.
                    _, entries, _ = c.flow_stats()
                    added = entries - have
                    have = entries
                    res.add(system=system, run=label, flows=have, rate=(added / t) if added > 0 else None,
                            rss_mib=(sw.rss_kib() or 0) / 1024, refused=f"type {err[1]} code {err[2]}")
                    break
                have += k
                res.add(system=system, run=label, flows=have, rate=k / t, rss_mib=(sw.rss_kib() or 0) / 1024,
                        refused=None)
            ok = ping_until(topo.host_ns(1), host_ip(2), timeout=5)
            check_alive(sw)
            res.rows[-1]["forwards_after"] = ok
            full = err is not None and err[1] == ERR_FLOW_MOD_FAILED and err[2] == TABLE_FULL
            ctx.log(f"  {label:28s}: {have:,} flows, RSS {res.rows[-1]['rss_mib']:.0f} MiB, "
                    f"{'TABLE_FULL' if full else ('error ' + str(err) if err else 'no refusal')}, "
                    f"{'still forwards' if ok else 'DOES NOT FORWARD'}")
            c.close()
        finally:
            sw.stop()
    last = {}
    for r in res.rows:
        last[r["run"]] = r
    res.table = (["switch", "rules held", "refused with", "RSS MiB", "forwards afterwards"],
                 [[k, f"{r['flows']:,}", r["refused"] or "nothing (limit of the run)", num(r["rss_mib"]),
                   "yes" if r.get("forwards_after") else "no"] for k, r in last.items()])
    for k, r in last.items():
        res.findings.append(f"{k}: {r['flows']:,} rules, {r['rss_mib']:.0f} MiB, "
                            f"{'refused with ' + r['refused'] if r['refused'] else 'no refusal'}, "
                            f"{'still forwarding' if r.get('forwards_after') else 'not forwarding'}.")


def plot_capacity(res):
    fig, (ax, ax2) = figure(2)
    runs = []
    for r in res.rows:
        if r["run"] not in runs:
            runs.append(r["run"])
    for i, run in enumerate(runs):
        pts = [r for r in res.rows if r["run"] == run]
        c = color("ovs") if run.startswith("OVS") else (color("fulmar") if i == 1 else color("fulmar-bench"))
        ax.plot([r["flows"] for r in pts], [r["rss_mib"] for r in pts], "-o", color=c, label=run, ms=3)
        q = [r for r in pts if r["rate"]]
        ax2.plot([r["flows"] for r in q], [r["rate"] / 1e3 for r in q], "-o", color=c, label=run, ms=3)
        refused = [r for r in pts if r["refused"]]
        for r in refused:
            ax.plot([r["flows"]], [r["rss_mib"]], "X", color=c, ms=10)
    ax.plot([], [], "kX", ls="", label="table full (refused)")
    for name, v in PAPER_CAPACITY.items():
        if v > 100000:
            ax.axvline(v, color=color("paper"), ls="--", lw=0.8)
            ax.text(v, ax.get_ylim()[1] * 0.9, f" paper: {name}", fontsize=7, rotation=90, va="top")
    label_axes(ax, "rules installed", "resident memory (MiB)")
    label_axes(ax2, "rules installed", "thousand flow-mods per second (per batch)")
    return fig
