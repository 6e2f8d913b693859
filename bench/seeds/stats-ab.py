"""Flow-stats replies over N flows, idle and under a trafgen flood, with
forwarding before and during the replies and each fulmar thread's CPU
per reply: the pieces of seed 004's statistics experiment (004-stats) for
one switch, to compare builds or settings side by side (fulmar only, as
root, nothing else running; the figures go to docs/results.md by hand).

    sudo .venv/bin/python bench/seeds/stats-ab.py BIN N REPS

Environment: NICE=K sets [dataplane] bulk_reply_nice; PIN=CPU pins this
client (default: unpinned, as the experiment); PERF=1 records the idle
replies with `perf record -g` into /tmp/stats.perf.data.
"""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seedlib.core import Ctx
from seedlib.exp_004 import install, delivered, load_and_rate
from seedlib.common import udp_frames, check_alive
from seedlib.ofclient import Client
from seedlib.switches import Fulmar, port_flows
from seedlib.topo import Topo

binp, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import resource
if os.environ.get("PIN"):
    os.sched_setaffinity(0, {int(os.environ["PIN"])})
def cpu1():
    for l in open("/proc/stat"):
        if l.startswith("cpu1 "):
            f = [int(x) for x in l.split()[1:]]
            return {"user": f[0] + f[1], "sys": f[2], "irq": f[5] + f[6], "idle": f[3]}
def selfcpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
ctx = Ctx("default", "sx", "/tmp/sx-out", binp)  # prefix sx: its namespaces and links
def threads(pid):
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            s = open(f"/proc/{pid}/task/{t}/stat").read()
        except OSError:
            continue
        name = s[s.index("(")+1:s.rindex(")")]
        f = s[s.rindex(")")+2:].split()
        out[(t, name)] = int(f[11]) + int(f[12])
    return out
try:
    topo = Topo(ctx, 2).build()
    frames = udp_frames(64, 64, dst_ip="10.0.0.99")
    dp = {}
    if os.environ.get("NICE") is not None:
        dp["bulk_reply_nice"] = int(os.environ["NICE"])
    sw = Fulmar(ctx, topo, capacity=max(65536, n * 2), dataplane=dp)
    sw.start(port_flows([(1, 2), (2, 1)]))
    pid = sw.proc.pid
    c = Client(sw.mgmt)
    t, err = install(c, 2, n - 2)
    print(f"installed {n} in {t:.1f}s err={err}", flush=True)
    for load in ("idle", "load"):
        g = None
        if load == "load":
            g, before = load_and_rate(ctx, topo, frames)
        a, t0 = delivered(topo, 2), time.monotonic()
        perf = None
        if os.environ.get("PERF") and load == "idle":
            import subprocess
            perf = subprocess.Popen(["perf", "record", "-F", "2000", "-g", "-p", str(pid), "-o", "/tmp/stats.perf.data"], stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        c0 = threads(pid); k0 = cpu1(); s0 = selfcpu()
        ft = [c.flow_stats() for _ in range(reps)]
        el = time.monotonic() - t0
        c1 = threads(pid); k1 = cpu1(); s1 = selfcpu()
        if perf:
            import signal
            perf.send_signal(signal.SIGINT); perf.wait()
        during = (delivered(topo, 2) - a) / el
        if g:
            g.stop()
        ms = sorted(x[0] * 1e3 for x in ft)
        line = f"{load}: reply ms {[round(m) for m in ms]}"
        if load == "load":
            line += f" fwd before {before/1e3:.0f} kpps during {during/1e3:.0f} ratio {during/before:.2f}"
        print(line, flush=True)
        cpu = {}
        for k, v in c1.items():
            d = v - c0.get(k, 0)
            if d:
                cpu[k[1]] = cpu.get(k[1], 0) + d
        print("  client cpu ms/reply", round((s1 - s0) * 1e3 / reps), " cpu1 ms/reply", {k: round((k1[k] - k0[k]) * 10 / reps) for k in k0})
        print("  cpu ms/reply by thread:", {k: round(v * 10 / reps) for k, v in sorted(cpu.items(), key=lambda x: -x[1])}, flush=True)
    check_alive(sw)
finally:
    ctx.cleanup()
