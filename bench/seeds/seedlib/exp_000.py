"""Seed 000 (Rahimi et al., an evaluation of Lagopus): the batching
parameter against delay at light load, worker threads against
throughput, table size against drop rate at a fixed offered rate, and the
delay of a delay-sensitive flow under load with and without a worker of
its own (priority-class dispatch)."""

import threading
import time

from . import experiment
from .common import FIRST_LABEL, bench, check_alive, throughput
from .core import ExperimentError, sh, wait_quiet
from .pkt import udp_frame
from .report import color, figure, label_axes, num
from .switches import Fulmar, Ovs, port_flows
from .topo import Topo, host_ip, host_mac
from .traffic import Generator, iperf3, measure, ping, ping_until, summary

# Table II: ping delay (ms) at light load with the I/O loop count at 100
# and 10000; iperf3 throughput the same (939.6 / 939.8 Mbit/s).
PAPER_PING = {100: (0.507, 0.447), 10000: (4.468, 1.159)}
# Table IV: packet drop rate (%) at ~9.8 Gbit/s against table size, 1 and 4 workers.
PAPER_DROP = {1: {100_000: 0.002, 400_000: 0.03, 1_000_000: 0.27}, 4: {100_000: 0.003, 400_000: 0.6, 1_000_000: 3.0}}
# Table III: iperf3 Mbit/s, two opposite flows, sum of the two.
PAPER_WORKERS = {(1, 3): 940.0, (2, 3): 1871.1, (1, 1000): 429.5, (2, 1000): 788.9}


# --------------------------------------------------------------------------
@experiment("000-batching", "000", "ping delay at light load against the batching parameter", (1, 3),
            plot="plot_batching")
def batching(ctx, res):
    # Each size's settings, ping count and interval, and iperf3 seconds (0: none).
    settings, count, interval, tsecs = ctx.pick(([0, 1000], 5, 0.02, 0),
                                                ([0, 100, 1000], 20, 0.1, 1),
                                                ([0, 10, 100, 300, 1000], 60, 0.1, 4))
    res.caption = (
        "Lagopus's batching knob is a loop count: how many polling rounds a partly filled burst may wait before "
        "it is pushed on. fulmar has no loop count; its closest settings are time bounds, so the x axis is "
        "fulmar's `flush_idle_us` = `max_batch_wait_us` (a partial burst leaves once its thread's input has been "
        "idle that long, and never waits longer; default 0 and 100 µs). Left: ping round trip at light load "
        f"({count} pings {interval} s apart, median and 10th–90th percentile) through fulmar rx-worker-tx (the "
        "Lagopus arrangement: RX, worker and TX threads) and run-to-completion, beside Open vSwitch and a direct "
        "veth pair (no knob: lines), and the paper's two figures. Right: iperf3 TCP throughput with each setting "
        "(the paper: unchanged by the loop count).")
    res.setup = (f"Two CPUs: the switch on CPU {ctx.switch_cpus(1)}; ping and iperf3 unpinned; other builds may "
                 "have shared the machine.")
    res.paper = [("ping delay, I/O loop count 100", "0.507 ms (SD 0.447)"),
                 ("ping delay, I/O loop count 10000", "4.468 ms (SD 1.159)"),
                 ("iperf3 throughput, either loop count", "939.6–939.8 Mbit/s (1 GbE)")]
    topo = Topo(ctx, 2).build()
    flows = port_flows([(1, 2), (2, 1)])

    def one(label, system, setting, sw=None):
        if sw:
            sw.start(flows)
        try:
            if not ping_until(topo.host_ns(1), host_ip(2)):
                raise ExperimentError(f"{label}: no ping answered")
            rtts, sent = ping(topo.host_ns(1), host_ip(2), count, interval)
            tcp = iperf3(ctx, topo.host_ns(1), topo.host_ns(2), host_ip(2), tsecs) if tsecs else None
            if sw:
                check_alive(sw)
        finally:
            if sw:
                sw.stop()
        s = summary(rtts)
        mbps = tcp["sum_received"]["bits_per_second"] / 1e6 if tcp else None
        res.add(system=system, setting_us=setting, label=label, pings=sent, answered=s["n"],
                rtt_median_ms=s.get("median"), rtt_mean_ms=s.get("mean"), rtt_p10_ms=s.get("p10"),
                rtt_p90_ms=s.get("p90"), rtt_sd_ms=s.get("sd"), tcp_mbps=mbps,
                cpus=sw.cpus if sw else "-")
        ctx.log(f"  {label:28s} ping median {s.get('median', 0):.3f} ms (p90 {s.get('p90', 0):.3f}), "
                f"TCP {mbps or 0:.0f} Mbit/s")

    # The direct pair: the same hosts without a switch (a veth pair between
    # two namespaces of their own).
    d1, d2 = ctx.name("d1"), ctx.name("d2")
    topo.netns(d1)
    topo.netns(d2)
    sh(f"ip link add {d1} netns {d1} type veth peer name {d2} netns {d2}")
    for ns, ip in ((d1, "10.9.0.1"), (d2, "10.9.0.2")):
        sh(f"ip -n {ns} addr add {ip}/24 dev {ns}")
        sh(f"ip netns exec {ns} ethtool -K {ns} tx off tso off gso off gro off", check=False)
        sh(f"ip -n {ns} link set {ns} up")
    rtts, sent = ping(d1, "10.9.0.2", count, interval)
    tcp = iperf3(ctx, d1, d2, "10.9.0.2", tsecs) if tsecs else None
    s = summary(rtts)
    res.add(system="direct", setting_us=None, label="direct veth pair", pings=sent, answered=s["n"],
            rtt_median_ms=s.get("median"), rtt_mean_ms=s.get("mean"), rtt_p10_ms=s.get("p10"),
            rtt_p90_ms=s.get("p90"), rtt_sd_ms=s.get("sd"),
            tcp_mbps=tcp["sum_received"]["bits_per_second"] / 1e6 if tcp else None, cpus="-")
    for mode, system in (("rx-worker-tx", "fulmar-rwt"), ("run-to-completion", "fulmar")):
        for us in settings:
            sw = Fulmar(ctx, topo, label=f"{system}-{us}", mode=mode,
                        dataplane={"flush_idle_us": us, "max_batch_wait_us": us})
            one(f"{system} flush {us} µs", system, us, sw)
    one("ovs", "ovs", None, Ovs(ctx, topo))
    rows = []
    for r in res.rows:
        rows.append([r["label"], num(r["rtt_median_ms"]), num(r["rtt_mean_ms"]), num(r["rtt_p90_ms"]),
                     f"{r['answered']}/{r['pings']}", num(r["tcp_mbps"])])
    res.table = (["system and setting", "ping median ms", "mean ms", "p90 ms", "answered", "TCP Mbit/s"], rows)
    for system in ("fulmar-rwt", "fulmar"):
        pts = [(r["setting_us"], r["rtt_median_ms"]) for r in res.rows if r["system"] == system]
        if len(pts) >= 2 and pts[0][1]:
            res.findings.append(f"{system}: the median ping goes from {pts[0][1]:.3f} ms at {pts[0][0]} µs to "
                                f"{pts[-1][1]:.3f} ms at {pts[-1][0]} µs ({pts[-1][1] / pts[0][1]:.1f}×); a partial "
                                "burst waits the whole bound at each hand-over, as Lagopus's loop count made it.")


def plot_batching(res):
    fig, (ax, ax2) = figure(2)
    for system, style, lab in (("fulmar-rwt", "-o", "fulmar rx-worker-tx"),
                               ("fulmar", "-s", "fulmar run-to-completion")):
        pts = [r for r in res.rows if r["system"] == system and r["rtt_median_ms"] is not None]
        if not pts:
            continue
        xs = [max(r["setting_us"], 1) for r in pts]
        ys = [r["rtt_median_ms"] for r in pts]
        err = [[y - r["rtt_p10_ms"] for y, r in zip(ys, pts)], [r["rtt_p90_ms"] - y for y, r in zip(ys, pts)]]
        ax.errorbar(xs, ys, yerr=err, fmt=style, color=color(system), label=lab, capsize=3)
        if all(r["tcp_mbps"] for r in pts):
            ax2.plot(xs, [r["tcp_mbps"] / 1e3 for r in pts], style, color=color(system), label=lab)
    for system, ls, lab in (("ovs", "-.", "OVS 3.1 netdev (no such knob)"), ("direct", ":", "direct veth pair")):
        for r in res.rows:
            if r["system"] == system and r["rtt_median_ms"] is not None:
                ax.axhline(r["rtt_median_ms"], ls=ls, color=color(system), label=lab)
                if r["tcp_mbps"]:
                    ax2.axhline(r["tcp_mbps"] / 1e3, ls=ls, color=color(system), label=lab)
    for loops, (v, _) in PAPER_PING.items():
        ax.axhline(v, ls="--", color=color("paper"), lw=0.8)
        ax.text(1, v * 1.08, f"paper: Lagopus, loop count {loops}: {v} ms", fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("flush_idle_us = max_batch_wait_us (µs; 0 drawn at 1)")
    ax.set_ylabel("ping RTT (ms, log)")
    ax.legend(fontsize=7, loc="center right")
    ax2.set_xscale("log")
    ax2.set_xlabel("flush_idle_us = max_batch_wait_us (µs; 0 drawn at 1)")
    ax2.set_ylabel("iperf3 TCP (Gbit/s)")
    ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=7)
    return fig


# --------------------------------------------------------------------------
@experiment("000-workers", "000", "worker threads against throughput, two opposite flows", (1.5, 3),
            plot="plot_workers")
def workers(ctx, res):
    tsecs = ctx.pick(1, 2, 5)
    bsecs = ctx.pick(0.3, 1.0, 3.0)
    tables = ctx.pick([1000], [3, 1000], [3, 1000])
    res.caption = (
        "The paper's Table III: two iperf3 flows in opposite directions through the switch, 1 or 2 worker "
        "threads, a table of 3 entries or of 1000 destination-MAC entries. Left: the sum of the two flows' "
        "throughput through fulmar rx-worker-tx (dispatch by Ethernet addresses, as Lagopus 0.2.2 did: the "
        "two directions land on different workers) and through Open vSwitch, between two veths. Right: 2 "
        "workers ÷ 1 worker, ours (veth, and `fulmar bench l2` in memory with as many rules) beside the paper's.")
    res.setup = ("Two CPUs, nothing pinned: the two iperf3 clients and servers and the switch share them (so on the "
                 "veths the hosts' TCP stacks, not the workers, bound the sum); `fulmar bench` workers on CPUs "
                 f"{ctx.bench_cpus(1)} (1) and {ctx.bench_cpus(2)} (2); other builds may have shared the machine.")
    res.paper = [("3 entries, 1 worker, 2 flows", "470 + 470 Mbit/s"), ("3 entries, 2 workers", "935.6 + 935.5 Mbit/s"),
                 ("1000 entries, 1 worker, 2 flows", "184 + 245.5 Mbit/s"),
                 ("1000 entries, 2 workers", "398.5 + 390.4 Mbit/s (1 GbE links, Lagopus 0.2.2, Patricia trie)")]
    for n_rules in tables:
        for w in (1, 2):
            d = bench(ctx, "l2", n_rules, secs=bsecs, workers=w)
            res.add(system="fulmar-bench", where="in-memory pipeline", table=n_rules, workers=w, mbps=None,
                    mpps=d["mpps"], cpus=d["cpus"])
            ctx.log(f"  fulmar bench l2 {n_rules} rules, {w} workers: {d['mpps']:.2f} Mpps")
    topo = Topo(ctx, 2).build()
    for n_rules in tables:
        flows = l2_flows(n_rules)
        configs = [("fulmar-rwt", w, lambda w=w: Fulmar(ctx, topo, label=f"fulmar-rwt-{w}", mode="rx-worker-tx",
                                                          workers=w, cpus=f"0-{ctx.ncpu - 1}",
                                                          dataplane={"dispatch": "l2"}))
                   for w in (1, 2)]
        configs.append(("ovs", 1, lambda: Ovs(ctx, topo, cpus=f"0-{ctx.ncpu - 1}")))
        for system, w, make in configs:
            sw = make()
            sw.start(flows)
            try:
                if not ping_until(topo.host_ns(1), host_ip(2)):
                    raise ExperimentError(f"{sw.label}: no ping answered")
                out = {}

                def run(src, dst, key, port):
                    try:
                        out[key] = iperf3(ctx, topo.host_ns(src), topo.host_ns(dst), host_ip(dst), tsecs, port=port)
                    except ExperimentError as e:
                        out[key] = e

                ts = [threading.Thread(target=run, args=(1, 2, "ab", 5301)),
                      threading.Thread(target=run, args=(2, 1, "ba", 5302))]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                for k in out:
                    if isinstance(out[k], Exception):
                        raise out[k]
                per_worker = []
                if sw.kind == "fulmar":
                    st = sw.stats()[0]
                    per_worker = [t["packets"] for t in st["threads"] if t["role"] == "worker"]
                check_alive(sw)
            finally:
                sw.stop()
            ab = out["ab"]["sum_received"]["bits_per_second"] / 1e6
            ba = out["ba"]["sum_received"]["bits_per_second"] / 1e6
            res.add(system=system, where="veth", table=n_rules, workers=w, mbps=ab + ba, mbps_ab=ab, mbps_ba=ba,
                    worker_packets=" ".join(str(p) for p in per_worker), cpus=sw.cpus)
            ctx.log(f"  {sw.label:14s} {n_rules:5d} entries: {ab:.0f} + {ba:.0f} Mbit/s"
                    + (f" (packets per worker: {per_worker})" if per_worker else ""))
    rows = []
    for r in res.rows:
        rows.append([r["system"], r["where"], r["table"], r["workers"],
                     num(r.get("mbps")) if r.get("mbps") else num(r.get("mpps")) + " Mpps",
                     r.get("worker_packets", "")])
    res.table = (["system", "where", "table entries", "workers", "Mbit/s (sum of both flows)",
                  "packets per worker"], rows)
    for sysname in ("fulmar-rwt", "fulmar-bench"):
        for t in tables:
            v = by_workers(res, sysname, t)
            if 1 in v and 2 in v and v[1]:
                paper = PAPER_WORKERS[(2, t)] / PAPER_WORKERS[(1, t)]
                res.findings.append(f"{sysname}, {t} entries: 2 workers give {v[2] / v[1]:.2f}× one "
                                    f"(paper: {paper:.2f}×).")


def by_workers(res, system, table):
    """workers -> Mbit/s (veth) or Mpps (bench) of one system and table size."""
    return {r["workers"]: (r.get("mbps") or r.get("mpps")) for r in res.rows
            if r["system"] == system and r["table"] == table}


def l2_flows(n):
    """n entries: the two hosts' MACs (forwarding) and n - 2 other
    destination MACs that no packet carries."""
    # (The paper's third entry sent unmatched packets to the controller.)
    lines = [f"table=0,priority=100,dl_dst={host_mac(2)},actions=output:2\n",
             f"table=0,priority=100,dl_dst={host_mac(1)},actions=output:1\n"]
    for i in range(max(n - 2, 0)):
        lines.append(f"table=0,priority=100,dl_dst=0a:00:00:{(i >> 16) & 255:02x}:{(i >> 8) & 255:02x}:{i & 255:02x},"
                     "actions=output:2\n")
    return "".join(lines)


def plot_workers(res):
    fig, (ax, ax2) = figure(2)
    tables = sorted({r["table"] for r in res.rows})
    labels, vals, cols = [], [], []
    for system in ("fulmar-rwt", "ovs"):
        for t in tables:
            for w in (1, 2):
                for r in res.rows:
                    if r["system"] == system and r["table"] == t and r["workers"] == w and r.get("mbps"):
                        labels.append(f"{'fulmar' if system != 'ovs' else 'OVS'}\n{t}e/{w}w")
                        vals.append(r["mbps"] / 1e3)
                        cols.append(color(system))
    ax.bar(range(len(vals)), vals, color=cols)
    ax.set_xticks(range(len(vals)), labels, fontsize=7)
    ax.set_ylabel("Gbit/s, both flows (veth)")
    ax.set_xlabel("entries (e) / workers (w)")
    names, ratios, cols = [], [], []
    for t in tables:
        for system in ("fulmar-rwt", "fulmar-bench"):
            v = by_workers(res, system, t)
            if 1 in v and 2 in v and v[1]:
                names.append(f"{'veth' if system == 'fulmar-rwt' else 'bench'}\n{t}e")
                ratios.append(v[2] / v[1])
                cols.append(color(system))
        names.append(f"paper\n{t}e")
        ratios.append(PAPER_WORKERS[(2, t)] / PAPER_WORKERS[(1, t)])
        cols.append(color("paper"))
    ax2.bar(range(len(ratios)), ratios, color=cols)
    ax2.set_xticks(range(len(ratios)), names, fontsize=7)
    ax2.axhline(1, color="#999999", lw=1)
    ax2.set_ylabel("2 workers ÷ 1 worker")
    return fig


# --------------------------------------------------------------------------
def mpls_flows(n):
    return "".join(f"table=0,priority=100,in_port=1,mpls,mpls_label={FIRST_LABEL + i},actions=output:2\n"
                   for i in range(n))


def mpls_frames(n_rules, k, size):
    """k flows spread evenly over n_rules MPLS labels, each with its own
    source MAC (so dispatch by Ethernet addresses spreads them)."""
    out = []
    for j in range(k):
        i = j * n_rules // k
        src = "06:00:%02x:%02x:%02x:01" % ((j >> 16) & 255, (j >> 8) & 255, j & 255)
        out.append(udp_frame(host_mac(2), src, host_ip(1), host_ip(2), sport=1024 + j % 60000, size=size,
                             mpls=FIRST_LABEL + i))
    return out


# 000-tablesize offers every table the highest rate at which fulmar, with
# the smallest table, loses at most LOSS_FREE_PCT (found by a bisection
# below a calibration), so that a growing table's loss shows beside none.
LOSS_FREE_PCT = 0.1  # the most loss (%) the rate search counts as "without loss"
QUIET_LOAD = 0.5  # each row waits for the 1-minute load average to fall under this
WITHIN_PP = 1.0  # the bound: each size's loss within this many points of the smallest table's


def rate_search(ctx, topo, flows, frames, top, steps, warm, secs):
    """Bisection of the offered rate (tcpreplay --pps) between 0 and top
    pps through fulmar run-to-completion holding `flows`, started afresh
    for each step as it is for each row (no step after an overload): the
    highest rate tried whose loss was at most LOSS_FREE_PCT (0 if none
    was), and every step (requested, offered and forwarded pps, loss %,
    within tolerance)."""
    lo, hi, out = 0.0, top, []
    for i in range(steps):
        mid = (lo + hi) / 2
        sw = Fulmar(ctx, topo, label="fulmar-search")
        sw.start(flows)
        try:
            r = throughput(ctx, topo, frames, warm=warm, secs=secs, rate=mid)
            check_alive(sw)
        finally:
            sw.stop()
        loss = 100 * r["loss"] if r["loss"] is not None else None
        ok = loss is not None and loss <= LOSS_FREE_PCT
        out.append({"rate_pps": mid, "offered_pps": r["offered_pps"], "fwd_pps": r["fwd_pps"], "loss_pct": loss,
                    "ok": ok})
        ctx.log(f"  search {i + 1}/{steps}: {mid / 1e3:.1f} kpps asked, offered {r['offered_pps'] / 1e3:.1f}, "
                f"forwarded {r['fwd_pps'] / 1e3:.1f}, loss {loss if loss is not None else float('nan'):.3f} % "
                f"({'within' if ok else 'above'} {LOSS_FREE_PCT} %)")
        if ok:
            lo = mid
        else:
            hi = mid
    return lo, out


def search_text(steps):
    return "; ".join(f"{s['rate_pps'] / 1e3:.1f} kpps → offered {s['offered_pps'] / 1e3:.1f}, forwarded "
                     f"{s['fwd_pps'] / 1e3:.1f}, loss {num(s['loss_pct'])} %" for s in steps)


def load_cell(r):
    """A row's load for the table: flagged when it was not under QUIET_LOAD."""
    if r.get("load") is None:
        return "?"
    return f"{r['load']:.2f}" + ("" if r.get("quiet") else f" ⚠ ≥ {QUIET_LOAD}")


@experiment("000-tablesize", "000", "table size against drop rate at a fixed offered rate", (3, 12),
            plot="plot_tablesize")
def tablesize(ctx, res):
    sizes = ctx.pick([1000], [1000, 100000], [10000, 100000, 400000, 1000000])
    k = ctx.pick(256, 4096, 16384)
    frame = 1500
    secs = ctx.pick(0.3, 1.5, 5.0)
    warm = ctx.pick(0.2, 0.7, 2.0)
    steps = ctx.pick(2, 4, 6)  # bisection steps of the rate search
    step_secs = ctx.pick(0.3, 1.0, 2.0)
    quiet_wait = ctx.pick(0, 10, 60)  # s each row waits at most for the load to fall under QUIET_LOAD
    res.paper = [(f"drop rate, 1 worker, {n // 1000}K entries", f"{d} %") for n, d in PAPER_DROP[1].items()]
    res.paper += [(f"drop rate, 4 workers, {n // 1000}K entries", f"{d} %") for n, d in PAPER_DROP[4].items()]
    res.paper.append(("offered", "≈9.8 Gbit/s of 1500-byte MPLS frames from pktgen, I/O loop count 10000"))
    topo = Topo(ctx, 2, mtu=1600).build()
    frames_by_n = {n: mpls_frames(n, min(k, n), frame) for n in sizes}
    # Calibration (the most fulmar forwards with the smallest table), then
    # the rate search below it.
    n0 = sizes[0]
    load0, quiet0 = wait_quiet(ctx, QUIET_LOAD, quiet_wait)
    sw = Fulmar(ctx, topo, label="fulmar-calibration")
    sw.start(mpls_flows(n0))
    try:
        cal = throughput(ctx, topo, frames_by_n[n0], warm=warm, secs=secs)
        check_alive(sw)
        if cal["fwd_pps"] < 1000:
            raise ExperimentError(f"calibration forwarded only {cal['fwd_pps']:.0f} pps")
    finally:
        sw.stop()
    ctx.log(f"  calibration: fulmar forwards {cal['fwd_pps'] / 1e3:.1f} kpps at {n0} entries "
            f"(offered {cal['offered_pps'] / 1e3:.0f}); searching for the highest rate with loss "
            f"<= {LOSS_FREE_PCT} % ({steps} steps of {step_secs} s)")
    rate, search = rate_search(ctx, topo, mpls_flows(n0), frames_by_n[n0], cal["fwd_pps"], steps, warm, step_secs)
    loss_free = rate > 0
    if not loss_free:
        # Say so and measure at the lowest rate tried rather than fail the
        # run: the rows still show how loss grows with the table.
        rate = min(s["rate_pps"] for s in search)
    res.meta.update(offered_pps=rate, calibration_pps=cal["fwd_pps"], loss_free=loss_free,
                    loss_free_tolerance_pct=LOSS_FREE_PCT, rate_search=search, quiet_load=QUIET_LOAD,
                    quiet_wait_s=quiet_wait)
    how = (f"the highest rate at which fulmar run-to-completion holding the smallest table ({n0:,} entries) lost "
           f"at most {LOSS_FREE_PCT} % in a bisection of {steps} steps of {step_secs} s (each on a fulmar started "
           f"afresh, as for each row) between 0 and what it "
           f"forwarded in a calibration at the start of this run ({cal['fwd_pps'] / 1e3:.1f} kpps, trafgen as "
           f"fast as it can): {rate / 1e3:.1f} kpps")
    if not loss_free:
        how = (f"the lowest rate tried, {rate / 1e3:.1f} kpps, because no rate of a bisection of {steps} steps of "
               f"{step_secs} s below fulmar's calibration ({cal['fwd_pps'] / 1e3:.1f} kpps, {n0:,} entries) "
               f"stayed within {LOSS_FREE_PCT} % loss")
    ctx.log(f"  offering {rate / 1e3:.1f} kpps to every table" + ("" if loss_free else
                                                                  f" (no rate was within {LOSS_FREE_PCT} % loss)"))
    res.caption = (
        f"The paper's Table IV: MPLS label match, simple forwarding, {frame}-byte frames at a fixed offered rate, "
        f"table size varied. Here {k} flows spread evenly over the labels installed (each with its own source "
        f"MAC), offered by tcpreplay at {how}; loss = 1 − received ÷ sent (veth counters), the difference from "
        "the smallest table in percentage points in the findings. fulmar run-to-completion with 1 worker, "
        "rx-worker-tx with 1 and 2 workers (dispatch by Ethernet addresses; "
        "the paper used 1 and 4), and Open vSwitch. Dashed: the paper's drop rates.")
    res.setup = (f"Two CPUs: trafgen and tcpreplay on CPU {ctx.gen_cpus}; fulmar with one worker and OVS on CPU "
                 f"{ctx.switch_cpus(1)}, fulmar with two workers on CPUs {ctx.switch_cpus(2)} (never the "
                 "generator's: a paced generator sharing a CPU with busy threads stalls and bursts). Rate search "
                 f"(load {num(load0)} before it{'' if quiet0 else ' ⚠'}): {search_text(search)}. Before each row "
                 + (f"the run waited up to {quiet_wait} s for the 1-minute load average to fall under {QUIET_LOAD} "
                    if quiet_wait else "the run read the 1-minute load average (no wait at this size) ")
                 + f"(column load, read before the switch started; ⚠: not under {QUIET_LOAD}); other builds may "
                 "have shared the machine.")
    configs = [
        ("fulmar", 1, lambda: Fulmar(ctx, topo, label="fulmar-rtc-1")),
        ("fulmar-rwt", 1, lambda: Fulmar(ctx, topo, label="fulmar-rwt-1", mode="rx-worker-tx",
                                         dataplane={"dispatch": "l2"})),
        ("fulmar-rwt", 2, lambda: Fulmar(ctx, topo, label="fulmar-rwt-2", mode="rx-worker-tx", workers=2,
                                         cpus=ctx.switch_cpus(2), dataplane={"dispatch": "l2"})),
        ("ovs", 1, lambda: Ovs(ctx, topo)),
    ]
    for system, w, make in configs:
        for n in sizes:
            load, quiet = wait_quiet(ctx, QUIET_LOAD, quiet_wait)
            sw = make()
            t0 = time.monotonic()
            sw.start(mpls_flows(n), timeout=900)
            install = time.monotonic() - t0
            try:
                r = throughput(ctx, topo, frames_by_n[n], warm=warm, secs=secs, rate=rate)
                check_alive(sw)
                rss = sw.rss_kib()
            finally:
                sw.stop()
            row = res.add(system=system, workers=w, table=n, flows=min(k, n), frame=frame, rate_pps=rate,
                          offered_pps=r["offered_pps"], fwd_pps=r["fwd_pps"], loss_pct=100 * (r["loss"] or 0),
                          start_s=install, rss_mib=(rss or 0) / 1024, load=load, quiet=quiet, cpus=sw.cpus)
            ctx.log(f"  {sw.label:14s} {n:8d} entries: offered {r['offered_pps'] / 1e3:.1f} kpps, "
                    f"loss {100 * (r['loss'] or 0):.3f} % (start {install:.1f} s, load {load_cell(row)})")
    rows = [[r["system"], r["workers"], r["table"], num(r["offered_pps"] / 1e3), num(r["fwd_pps"] / 1e3),
             f"{r['loss_pct']:.3f}", num(r["start_s"]), num(r["rss_mib"]), load_cell(r)] for r in res.rows]
    res.table = (["system", "workers", "entries", "offered kpps", "forwarded kpps", "loss %", "start/install s",
                  "RSS MiB", "load"], rows)
    res.findings.append(
        (f"fulmar run-to-completion with {n0:,} entries forwarded {rate / 1e3:.1f} kpps with at most "
         f"{LOSS_FREE_PCT} % loss (the search: {search_text(search)}); every row was offered that."
         if loss_free else f"No rate of the search stayed within {LOSS_FREE_PCT} % loss ({search_text(search)}); "
         f"every row was offered the lowest tried, {rate / 1e3:.1f} kpps."))
    res.findings += size_findings(res.rows)


def size_findings(rows):
    """Per system: each table size's loss minus the smallest table's, in
    percentage points, and whether all are within WITHIN_PP."""
    out = []
    for system, w in dict.fromkeys((r["system"], r["workers"]) for r in rows):
        pts = sorted((r for r in rows if r["system"] == system and r["workers"] == w), key=lambda r: r["table"])
        base = pts[0]
        name = {"fulmar": "fulmar run-to-completion", "fulmar-rwt": "fulmar rx-worker-tx",
                "ovs": "Open vSwitch"}.get(system, system) + f", {w} worker{'s' if w > 1 else ''}"
        noisy = [f"{r['table']:,}" for r in pts if r.get("quiet") is False]
        note = f"; measured at load ≥ {QUIET_LOAD}: {', '.join(noisy)} entries" if noisy else ""
        if len(pts) < 2:
            out.append(f"{name}: loss {base['loss_pct']:.3f} % at {base['table']:,} entries (one size only){note}.")
            continue
        diffs = [(r["table"], r["loss_pct"] - base["loss_pct"]) for r in pts[1:]]
        within = all(abs(d) <= WITHIN_PP for _, d in diffs)
        out.append(f"{name}: loss {base['loss_pct']:.3f} % at {base['table']:,} entries; "
                   + ", ".join(f"{n:,}: {d:+.3f} pp" for n, d in diffs)
                   + (f": within {WITHIN_PP:g} pp" if within else f": not within {WITHIN_PP:g} pp") + f"{note}.")
    return out


def plot_tablesize(res):
    fig, (ax,) = figure(1, width=6.4)
    for (system, w), style in ((("fulmar", 1), "-o"), (("fulmar-rwt", 1), "-s"), (("fulmar-rwt", 2), "--s"),
                               (("ovs", 1), "-^")):
        pts = [(r["table"], max(r["loss_pct"], 1e-4)) for r in res.rows if r["system"] == system and r["workers"] == w]
        if pts:
            name = {"fulmar": "fulmar run-to-completion", "fulmar-rwt": "fulmar rx-worker-tx",
                    "ovs": "OVS 3.1 netdev"}[system]
            ax.plot(*zip(*pts), style, color=color(system), label=f"{name}, {w} worker{'s' if w > 1 else ''}")
    noisy = [(r["table"], max(r["loss_pct"], 1e-4)) for r in res.rows if r.get("quiet") is False]
    if noisy:
        ax.plot(*zip(*noisy), "o", ms=11, mfc="none", mec="#ff7f0e", label=f"measured at load ≥ {QUIET_LOAD}")
    for w, style in ((1, "k--"), (4, "k:")):
        ax.plot(list(PAPER_DROP[w]), list(PAPER_DROP[w].values()), style, lw=1,
                label=f"paper: Lagopus, {w} worker{'s' if w > 1 else ''}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    label_axes(ax, "flow entries (MPLS label, exact)", "loss % (log; 0 drawn at 1e-4)")
    return fig


# --------------------------------------------------------------------------
@experiment("000-priority", "000",
            "delay of a delay-sensitive flow under load, with and without priority-class dispatch", (1.5, 3),
            plot="plot_priority")
def priority(ctx, res):
    loads = ctx.pick([2.0], [0.5, 1.0, 2.0], [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0])
    count = ctx.pick(10, 50, 200)
    interval = 0.01
    warm = ctx.pick(0.2, 0.7, 1.0)
    chain = CHAIN
    res.caption = (
        "The paper's Fig. 3: a ping shares the switch with a bulk flow from the same host to the same host, and "
        "its delay grows while both use one worker. fulmar rx-worker-tx with 2 workers: dispatch by Ethernet "
        "addresses (ping and bulk on one worker, as in Lagopus 0.2.2), or `dispatch = \"priority-class\"` with "
        "ICMP (ip_proto 1) given worker 1 and the rest spread by Ethernet addresses over the other; and Open "
        f"vSwitch. The bulk frames (64-byte UDP) go through a chain of {chain} tables (goto_table) while the "
        "ping matches in table 0, so that the worker, not the veths or the RX thread, is the bottleneck, as "
        "Lagopus's worker was in the paper. trafgen offers the bulk flow at multiples of what fulmar forwarded "
        f"of it in a calibration at the start (the x axis); {count} pings 10 ms apart meanwhile: RTT median, 90th "
        "percentile, and the pings lost. fulmar's four threads (RX, two workers, TX) share one CPU here, so even "
        "on a worker of its own the ping waits for the scheduler at each hand-over while the bulk worker is busy; "
        "with a core per thread that wait goes.")
    res.setup = ctx.two_cpus(f"trafgen on CPU {ctx.gen_cpus}; fulmar's RX, two worker and TX threads, and OVS, "
                             f"on CPU {ctx.switch_cpus(1)}")
    res.paper = [("ping alone, loop count 100 / 10000", "0.507 / 4.468 ms mean"),
                 ("ping beside a 1 Gbit/s iperf3 flow on the same worker", "delay grows linearly with time while "
                  "the flow lasts (Fig. 3), back to normal when it ends")]
    topo = Topo(ctx, 2).build()
    flows = chain_flows(chain)
    frames = [udp_frame(host_mac(2), host_mac(1), host_ip(1), "10.0.0.99", sport=1024 + j, size=64) for j in range(64)]
    rwt = dict(mode="rx-worker-tx", workers=2, cpus=ctx.switch_cpus(1))
    configs = [
        ("fulmar-l2", lambda: Fulmar(ctx, topo, label="fulmar-l2", dataplane={"dispatch": "l2"}, **rwt)),
        ("fulmar-priority", lambda: Fulmar(ctx, topo, label="fulmar-priority",
                                           dataplane={"dispatch": "priority-class", "dispatch_fallback": "l2"},
                                           priority_classes=[{"ip_proto": 1, "worker": 1}], **rwt)),
        ("ovs", lambda: Ovs(ctx, topo)),
    ]
    # Calibration: what fulmar (Ethernet dispatch) forwards of the bulk flow at most.
    sw = configs[0][1]()
    sw.start(flows)
    try:
        cal = throughput(ctx, topo, frames, warm=warm, secs=ctx.pick(0.3, 1.0, 3.0))
    finally:
        sw.stop()
    base = cal["fwd_pps"]
    if base < 100:
        raise ExperimentError(f"calibration: fulmar forwarded {base:.0f} pps")
    res.meta["calibration_pps"] = base
    ctx.log(f"  calibration: fulmar rx-worker-tx forwards {base / 1e3:.1f} kpps of the bulk flow "
            f"(offered {cal['offered_pps'] / 1e3:.0f})")
    for system, make in configs:
        sw = make()
        sw.start(flows)
        try:
            if not ping_until(topo.host_ns(1), host_ip(2)):
                raise ExperimentError(f"{system}: no ping answered")
            for load in [0.0] + loads:
                if load == 0:
                    rtts, sent = ping(topo.host_ns(1), host_ip(2), count, interval)
                    r = {"offered_pps": 0, "fwd_pps": 0}
                else:
                    g = Generator(ctx, topo.host_ns(1), topo.host_dev(1), frames, rate_pps=load * base)
                    r = measure([g], [(topo.host_ns(2), topo.host_dev(2))], warm, count * interval + 1,
                                during=lambda: ping(topo.host_ns(1), host_ip(2), count, interval))
                    rtts, sent = r["during"]
                check_alive(sw)
                s = summary(rtts)
                res.add(system=system, load=load, offered_pps=r["offered_pps"], fwd_pps=r["fwd_pps"], pings=sent,
                        answered=s["n"], ping_loss_pct=100 * (1 - s["n"] / sent), rtt_median_ms=s.get("median"),
                        rtt_p90_ms=s.get("p90"), rtt_p99_ms=s.get("p99"), cpus=sw.cpus)
                ctx.log(f"  {system:16s} load {load:4.2f} ({r['offered_pps'] / 1e3:5.1f} kpps): ping median "
                        f"{s.get('median', float('nan')):.3f} ms, p90 {s.get('p90', float('nan')):.3f}, "
                        f"{s['n']}/{sent} answered")
        finally:
            sw.stop()
    rows = [[r["system"], r["load"], num(r["offered_pps"] / 1e3), num(r["fwd_pps"] / 1e3), num(r["rtt_median_ms"]),
             num(r["rtt_p90_ms"]), f"{r['answered']}/{r['pings']}"] for r in res.rows]
    res.table = (["system", "load (× calibration)", "offered kpps", "forwarded kpps", "ping median ms", "p90 ms",
                  "answered"], rows)
    for load in loads:
        a = next((r for r in res.rows if r["system"] == "fulmar-l2" and r["load"] == load), None)
        b = next((r for r in res.rows if r["system"] == "fulmar-priority" and r["load"] == load), None)
        if load >= 1 and a and b and a["rtt_median_ms"] and b["rtt_median_ms"]:
            res.findings.append(f"At {load}× the bulk flow's calibrated rate the ping's median is "
                                f"{a['rtt_median_ms']:.3f} ms on the bulk flow's worker and "
                                f"{b['rtt_median_ms']:.3f} ms on a worker of its own ({a['answered']} and "
                                f"{b['answered']} of {a['pings']} answered).")


CHAIN = 100


def chain_flows(n):
    """ICMP forwarded in table 0; other traffic from port 1 through n
    tables (goto_table) before it is sent; port 2 straight back."""
    f = ["table=0,priority=100,icmp,in_port=1,actions=output:2",
         "table=0,priority=10,in_port=2,actions=output:1",
         "table=0,priority=10,in_port=1,actions=goto_table:1"]
    for t in range(1, n):
        f.append(f"table={t},priority=10,in_port=1,actions=" + (f"goto_table:{t + 1}" if t < n - 1 else "output:2"))
    return "\n".join(f) + "\n"


def plot_priority(res):
    fig, (ax, ax2) = figure(2)
    for system, lab in (("fulmar-l2", "fulmar, one worker for both (dispatch l2)"),
                        ("fulmar-priority", "fulmar, ICMP on its own worker (priority-class)"),
                        ("ovs", "OVS 3.1 netdev")):
        pts = [r for r in res.rows if r["system"] == system and r["rtt_median_ms"] is not None]
        c = color("fulmar-rwt") if system == "fulmar-l2" else color(system)
        if pts:
            ax.plot([r["load"] for r in pts], [r["rtt_median_ms"] for r in pts], "-o", color=c, label=lab + " median")
            ax.plot([r["load"] for r in pts], [r["rtt_p90_ms"] for r in pts], ":", color=c)
        pts = [r for r in res.rows if r["system"] == system]
        ax2.plot([r["load"] for r in pts], [r["ping_loss_pct"] for r in pts], "-o", color=c, label=lab)
    ax.set_yscale("log")
    label_axes(ax, "bulk load (× what fulmar forwarded in the calibration)", "ping RTT ms (log; dotted: p90)")
    label_axes(ax2, "bulk load (× calibration)", "pings lost (%)")
    return fig
