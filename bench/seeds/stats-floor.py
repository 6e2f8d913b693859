"""How much forwarding a flow-stats reply of N flows can leave, on this
machine, with seed 004's client: fulmar's own replies beside a canned
replier that sends the same bytes and does nothing else.

Seed 004's statistics experiment (004-stats) floods the switch with
trafgen on CPU 0, runs the switch on CPU 1 and times the replies with a
Python client left unpinned. The client walks every entry of the reply
(about 240 ms of CPU for 1M entries here), so on two CPUs its work comes
out of the generator's CPU or the switch's, whatever the switch does. To
see what part of the loss is the switch's, this script records one of
fulmar's replies and then, while trafgen floods fulmar, alternates:

- a canned replier on the switch's CPU (this script with `--canned`: it
  answers each MULTIPART_REQUEST on a unix socket with the recorded
  bytes, the xid patched, paced to last PACE seconds or as fast as it
  can with 0), so the same client reads the same bytes from a peer that
  costs next to nothing;
- fulmar's own reply to the same client.

For each it prints the reply times, what host 2 received per second
during the replies and in the second after, their ratio (#35 asks for
≥ 0.9 with the reply no slower than Open vSwitch's), and the replier's
CPU per reply (for fulmar: the whole process, its worker included).

    sudo .venv/bin/python bench/seeds/stats-floor.py BIN N REPS [PACE...]

Environment: NICE=K sets fulmar's [dataplane] bulk_reply_nice. Root,
nothing else running; the figures go to docs/results.md by hand.
"""
import os
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seedlib.ofclient import MP_FLOW, MULTIPART_REPLY, MULTIPART_REQUEST, Client, header, match

REPLY_MORE = 1
FLOW_REQUEST = struct.pack("!B3xII4xQQ", 0xFF, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0) + match()


def canned(path, recorded, pace):
    """Serves `recorded` (OpenFlow messages back to back) to each
    MULTIPART_REQUEST on a unix socket at `path`, one connection at a
    time, the xid of every message set to the request's."""
    rec = bytearray(open(recorded, "rb").read())
    offsets, at = [], 0
    while at < len(rec):
        offsets.append(at)
        at += struct.unpack_from("!H", rec, at + 2)[0]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    chunk = 1 << 18
    while True:
        s, _ = srv.accept()
        s.sendall(header(0, 8, 1))  # HELLO
        buf = bytearray()
        while data := s.recv(65536):
            buf += data
            while len(buf) >= 8:
                _, typ, length, xid = struct.unpack_from("!BBHI", buf)
                if len(buf) < length:
                    break
                del buf[:length]
                if typ != MULTIPART_REQUEST:
                    continue
                for o in offsets:
                    struct.pack_into("!I", rec, o + 4, xid)
                view, t0 = memoryview(rec), time.monotonic()
                for i in range(0, len(rec), chunk if pace > 0 else len(rec)):
                    s.sendall(view[i:i + chunk] if pace > 0 else view)
                    late = t0 + pace * (i + chunk) / len(rec) - time.monotonic()
                    if late > 0:
                        time.sleep(late)
        s.close()


def record_reply(c, path):
    """One FLOW reply of every entry, as the switch sent it, into `path`;
    returns its size in bytes."""
    xid = c.next_xid()
    body = struct.pack("!HH4x", MP_FLOW, 0) + FLOW_REQUEST
    c.s.sendall(header(MULTIPART_REQUEST, 8 + len(body), xid) + body)
    rec = bytearray()
    while True:
        while len(c.buf) < 8:
            c.buf += c.s.recv(1 << 20)
        _, typ, length, rxid = struct.unpack_from("!BBHI", c.buf)
        while len(c.buf) < length:
            c.buf += c.s.recv(1 << 20)
        msg = bytes(c.buf[:length])
        del c.buf[:length]
        if typ == MULTIPART_REPLY and rxid == xid:
            rec += msg
            if struct.unpack_from("!H", msg, 10)[0] & REPLY_MORE == 0:
                break
    open(path, "wb").write(rec)
    return len(rec)


def cpu_ticks(pid):
    s = open(f"/proc/{pid}/stat").read()
    f = s[s.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])


def main():
    from seedlib.common import check_alive, udp_frames
    from seedlib.core import Ctx
    from seedlib.exp_004 import delivered, install, load_and_rate
    from seedlib.switches import Fulmar, port_flows
    from seedlib.topo import Topo

    binp, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    paces = [float(x) for x in sys.argv[4:]] or [0.0, 1.1]
    ctx = Ctx("default", "sf", "/tmp/sf-out", binp)  # prefix sf: its namespaces and links
    sock, recorded = "/tmp/sf-canned.sock", "/tmp/sf-reply.bin"
    server = None
    try:
        topo = Topo(ctx, 2).build()
        dp = {}
        if os.environ.get("NICE") is not None:
            dp["bulk_reply_nice"] = int(os.environ["NICE"])
        sw = Fulmar(ctx, topo, capacity=max(65536, n * 2), dataplane=dp)
        sw.start(port_flows([(1, 2), (2, 1)]))
        c = Client(sw.mgmt)
        t, err = install(c, 2, n - 2)
        print(f"installed {n} in {t:.1f}s err={err}", flush=True)
        print(f"recorded one reply: {record_reply(c, recorded) / 1e6:.1f} MB", flush=True)
        g, before = load_and_rate(ctx, topo, udp_frames(64, 64, dst_ip="10.0.0.99"))
        print(f"forwarding before: {before / 1e3:.0f} kpps; load average {os.getloadavg()[0]:.2f}", flush=True)
        for _ in range(2):
            for pace in paces:
                if os.path.exists(sock):
                    os.unlink(sock)
                # On the switch's CPU, as the switch's own replier is.
                server = subprocess.Popen(["taskset", "-c", ctx.switch_cpus(1), sys.executable,
                                           os.path.abspath(__file__), "--canned", sock, recorded, str(pace)])
                deadline = time.monotonic() + 30
                while not os.path.exists(sock) and time.monotonic() < deadline:
                    time.sleep(0.1)
                cc = Client(sock)
                for who, cl, pid in ((f"canned, paced to {pace:.1f} s", cc, server.pid),
                                     ("fulmar", c, sw.proc.pid)):
                    a, t0, k0 = delivered(topo, 2), time.monotonic(), cpu_ticks(pid)
                    times = [cl.multipart(MP_FLOW, FLOW_REQUEST)[0] for _ in range(reps)]
                    during = (delivered(topo, 2) - a) / (time.monotonic() - t0)
                    ticks = cpu_ticks(pid) - k0
                    a, t0 = delivered(topo, 2), time.monotonic()
                    time.sleep(1.0)
                    after = (delivered(topo, 2) - a) / (time.monotonic() - t0)
                    print(f"{who}: reply ms {[round(x * 1e3) for x in times]}, forwarded during "
                          f"{during / 1e3:.0f} kpps, after {after / 1e3:.0f}: ratio {during / after:.2f}; "
                          f"replier CPU {ticks * 10 / reps:.0f} ms a reply", flush=True)
                cc.s.close()
                server.kill()
                server.wait()
                server = None
        g.stop()
        check_alive(sw)
    finally:
        if server:
            server.kill()
        for p in (sock, recorded):
            if os.path.exists(p):
                os.unlink(p)
        ctx.cleanup()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--canned"]:
        canned(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        main()
