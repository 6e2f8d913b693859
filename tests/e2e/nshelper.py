"""Run inside a network namespace (ip netns exec NS python3 nshelper.py ...):
send raw frames on an interface, or capture frames from one.

    send IFACE HEX [HEX...]
    capture IFACE SECONDS MAX ETHERTYPE_HEX...   (prints one hex frame per line)
    flood IFACE HEX COUNT PPS    (sends the frame COUNT times, PPS per second
                                  or, with 0, as fast as it can; prints
                                  "sent N failed M")
    seqflood IFACE HEX COUNT PPS [sleep]
                                 (the same, frame i carrying i in its last
                                  four bytes; with "sleep", paced by
                                  sleeping instead of spinning: a CPU free
                                  for the switch, timing within ~0.1 ms)
    seqs IFACE SECONDS ETHERTYPE_HEX [UNTIL] (prints the last four bytes,
                                  as a number, of each frame of that type;
                                  ends at frame UNTIL or a line on stdin)

Frames are read with PACKET_AUXDATA so an outer VLAN tag the kernel
stripped into metadata is put back, as it was on the wire.
"""

import socket
import struct
import sys
import time

SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
ETH_P_ALL = 3


def send(iface, frames):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((iface, 0))
    for f in frames:
        s.send(bytes.fromhex(f))


def flood(iface, frame, count, pps, numbered=False, sleep=False):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((iface, 0))
    f = bytes.fromhex(frame)
    sent = failed = 0
    start = time.perf_counter()
    for i in range(count):
        if pps:
            # Paced: frame i leaves at start + i / pps (busy wait; a sleep
            # would be too coarse).
            due = start + i / pps
            if sleep:
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            while time.perf_counter() < due:
                pass
        if numbered:
            f = f[:-4] + struct.pack("!I", i)
        try:
            s.send(f)
            sent += 1
        except OSError:
            failed += 1
    print(f"sent {sent} failed {failed} seconds {time.perf_counter() - start:.3f}", flush=True)


def capture(iface, seconds, limit, types):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((iface, 0))
    s.settimeout(0.05)
    print("ready", flush=True)
    end = time.time() + seconds
    n = 0
    while time.time() < end and n < limit:
        try:
            data, anc, _flags, addr = s.recvmsg(65536, 256)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        for level, typ, cdata in anc:
            if level == SOL_PACKET and typ == PACKET_AUXDATA and len(cdata) >= 20:
                status, _l, _s, _m, _n, tci, tpid = struct.unpack("IIIHHHH", cdata[:20])
                if status & TP_STATUS_VLAN_VALID:
                    if not (status & TP_STATUS_VLAN_TPID_VALID) or tpid == 0:
                        tpid = 0x8100
                    data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
        if types and data[12:14].hex() not in types:
            continue
        print(data.hex(), flush=True)
        n += 1


def seqs(iface, seconds, ethertype, until=None):
    """Captures for at most `seconds`, and ends early when a frame numbered
    `until` arrives or when a line (or EOF) comes on stdin."""
    import select

    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    want = bytes.fromhex(ethertype)
    print("ready", flush=True)
    got = []
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([s, sys.stdin], [], [], 0.05)
        if sys.stdin in ready:
            break
        if s not in ready:
            continue
        data, addr = s.recvfrom(65536)
        if addr[2] != socket.PACKET_OUTGOING and data[12:14] == want:
            got.append(struct.unpack("!I", data[-4:])[0])
            if got[-1] == until:
                break
    print(" ".join(map(str, got)), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] in ("flood", "seqflood"):
        flood(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[1] == "seqflood",
              sys.argv[6:7] == ["sleep"])
    elif sys.argv[1] == "seqs":
        seqs(sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]) if sys.argv[5:] else None)
    else:
        capture(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
