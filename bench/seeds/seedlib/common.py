"""Pieces several experiments share: `fulmar bench` runs, throughput
through a switch on veths, rule sets."""

import json

from .core import ExperimentError, sh
from .pkt import udp_frame
from .topo import host_ip, host_mac
from .traffic import Generator, measure

VIDS = 4094
FIRST_LABEL = 16


def bench(ctx, scenario, rules, size=64, secs=1.0, workers=1, flows=None, extra=""):
    """`fulmar bench ... --json` on ctx.bench_cpus(workers); its JSON, with "cpus"."""
    cpus = ctx.bench_cpus(workers)
    cmd = (f"taskset -c {cpus} {ctx.fulmar} bench {scenario} --rules {rules} --packet-size {size} "
           f"--seconds {secs} --workers {workers} --json")
    if flows:
        cmd += f" --flows {flows}"
    if extra:
        cmd += " " + extra
    r = sh(cmd, timeout=600)
    d = json.loads(r.stdout)
    if d.get("mismatches"):
        raise ExperimentError(f"fulmar bench {scenario}: {d['mismatches']} mismatches")
    d["cpus"] = cpus
    return d


def gateway_rules(n, out_port=2):
    """Seed 001's data-center-to-WAN gateway, as `fulmar bench
    gateway-vlan2mpls` generates it: in_port (4094 VLANs per port) and VLAN
    id to pop_vlan, push_mpls, set the label, output."""
    return "".join(
        f"table=0,priority=100,in_port={1 + i // VIDS},dl_vlan={1 + i % VIDS},"
        f"actions=pop_vlan,push_mpls:0x8847,set_field:{FIRST_LABEL + i}->mpls_label,output:{out_port}\n"
        for i in range(n)
    )


def gateway_frames(n_rules, size, src=1, dst=2):
    """Port 1's traffic of the gateway: one flow per VLAN of port 1 (its
    4094 rules, or fewer), each with its own UDP source port."""
    return [
        udp_frame(host_mac(dst), host_mac(src), host_ip(src), host_ip(dst), sport=1024 + v, size=size, vlan=v)
        for v in range(1, min(n_rules, VIDS) + 1)
    ]


def udp_frames(n, size, src=1, dst=2, dst_ip=None, dst_mac=None, vary="sport", **kw):
    """n UDP flows from host src to host dst, told apart by the UDP source
    port (vary="sport"), destination port ("dport") or source MAC
    ("src_mac")."""
    out = []
    for k in range(n):
        sport, dport, src_mac = 1024 + k % 60000, 4789, host_mac(src)
        if vary == "dport":
            sport, dport = 1024, 1 + k % 65535
        elif vary == "src_mac":
            src_mac = "06:%02x:%02x:%02x:%02x:%02x" % ((k >> 32) & 255, (k >> 24) & 255, (k >> 16) & 255,
                                                       (k >> 8) & 255, k & 255)
        out.append(udp_frame(dst_mac or host_mac(dst), src_mac, host_ip(src), dst_ip or host_ip(dst),
                             sport=sport, dport=dport, size=size, **kw))
    return out


def throughput(ctx, topo, frames, src=1, dsts=(2,), warm=1.0, secs=2.0, rate=None, during=None):
    """Offered and forwarded packets per second with trafgen on host src."""
    g = Generator(ctx, topo.host_ns(src), topo.host_dev(src), frames, rate_pps=rate)
    return measure([g], [(topo.host_ns(d), topo.host_dev(d)) for d in dsts], warm, secs, during=during)


def check_alive(sw):
    if hasattr(sw, "alive") and not sw.alive():
        raise ExperimentError(f"{sw.label} is no longer running")


def mpps(x):
    return x / 1e6 if x is not None else None
