"""UDP echo for per-packet round trips.

    udp_echo.py serve IP PORT
    udp_echo.py client IP PORT COUNT SIZE INTERVAL [SPORT]

The client sends COUNT datagrams of SIZE bytes of payload one at a time,
each after the previous reply (or a 1 s timeout) and INTERVAL seconds,
and prints a JSON object: {"rtt_us": [...], "sent": N, "lost": N}.
"""

import json
import socket
import sys
import time


def serve(ip, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, port))
    while True:
        data, addr = s.recvfrom(65536)
        s.sendto(data, addr)


def client(ip, port, count, size, interval, sport=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", sport))
    s.settimeout(1.0)
    payload = bytearray(max(size, 8))
    rtts, lost = [], 0
    for i in range(count):
        payload[:8] = i.to_bytes(8, "big")
        t0 = time.perf_counter_ns()
        s.sendto(payload, (ip, port))
        while True:
            try:
                data = s.recv(65536)
            except socket.timeout:
                lost += 1
                break
            if data[:8] == payload[:8]:
                rtts.append((time.perf_counter_ns() - t0) / 1000.0)
                break
        if interval > 0:
            time.sleep(interval)
    print(json.dumps({"rtt_us": rtts, "sent": count, "lost": lost}))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]),
               int(sys.argv[7]) if len(sys.argv) > 7 else 0)
