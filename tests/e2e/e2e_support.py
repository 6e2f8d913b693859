"""What the end-to-end tests share besides fixtures: names of the
namespaces and links, `Switch` (a running `fulmar run`), and helpers to run
commands in a namespace, capture and send frames.

Test modules import these from here, not from `conftest`: when several
test directories are collected in one run, the module named `conftest` may
be another directory's.
"""

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPER = str(Path(__file__).with_name("nshelper.py"))
MAC_A = "02:00:00:00:0e:0a"
MAC_B = "02:00:00:00:0e:0b"
P = os.environ.get("FULMAR_E2E_PREFIX", "fe")
NS_A, NS_B = f"{P}-a", f"{P}-b"
SW_A, SW_B = f"{P}-sa", f"{P}-sb"


def ports_toml(ports, **keys):
    """The [[bridges.ports]] tables of a `fulmar run` config, each after a
    blank line, for PORTS ({port number: interface}), each with the string
    KEYS too (backend="afpacket"), for a bridge table written above."""
    more = "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    return "".join(f'\n[[bridges.ports]]\nport = {n}\ninterface = "{dev}"\n{more}' for n, dev in ports.items())


# SW_A as port 1, SW_B as port 2.
PORTS_TOML = ports_toml({1: SW_A, 2: SW_B})


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def cleanup():
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)
    for link in (SW_A, SW_B):
        sh("ip", "link", "del", link, check=False)


def host_veth(ns, root, peer, mac, addr):
    """Makes namespace NS holding end PEER (MAC, ADDR: "ip/len") of a veth
    whose end ROOT stays in the root namespace, both up, with no IPv6 (so
    no autoconfiguration noise on the links)."""
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", root, "type", "veth", "peer", "name", peer, "netns", ns)
    sh("ip", "link", "set", root, "up")
    sh("ip", "-n", ns, "link", "set", peer, "address", mac, "up")
    sh("ip", "-n", ns, "addr", "add", addr, "dev", peer)
    sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
    sh("sysctl", "-qw", f"net.ipv6.conf.{root}.disable_ipv6=1", check=False)


class Switch:
    """A running `fulmar run`; stop() sends SIGINT and returns its output.

    A thread reads stderr as it comes (into err_lines), so nothing is lost
    between the start-up line and stop() and the pipe never fills."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err_lines = []
        started = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                self.err_lines.append(line)
                if "running bridges" in line:
                    started.set()
            started.set()

        self.reader = threading.Thread(target=read_stderr, daemon=True)
        self.reader.start()
        # Started when it says so on stderr.
        started.wait(timeout=10)
        if not any("running bridges" in l for l in self.err_lines):
            raise RuntimeError("fulmar did not start: " + "".join(self.err_lines))

    def stop(self):
        self.proc.send_signal(2)
        # Killed if it has not stopped within 20 s (the test then fails on
        # the exit status).
        watchdog = threading.Timer(20, self.proc.kill)
        watchdog.start()
        try:
            out = self.proc.stdout.read()
            self.proc.wait()
        finally:
            watchdog.cancel()
        self.reader.join(timeout=10)
        return self.proc.returncode, out, "".join(self.err_lines)

    def kill(self):
        """SIGKILL, if it is still running (a test's cleanup)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def switch_starter(argv):
    """The body of a fixture that starts switches: `yield from
    switch_starter(argv)` gives the test start(*args), which runs
    Switch(argv(*args)) and returns it; every switch still running when the
    test ends is killed."""
    started = []

    def start(*args):
        s = Switch(argv(*args))
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()


def terminate(proc, timeout=10):
    """Stops a child process: SIGTERM, then SIGKILL after `timeout` s."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def spare_veth(name):
    """A veth pair NAME / NAMEp in the root namespace, both ends up,
    removed afterwards (a port to add to a running switch)."""
    sh("ip", "link", "del", name, check=False)
    try:
        sh("ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p")
        sh("ip", "link", "set", name, "up")
        sh("ip", "link", "set", f"{name}p", "up")
        yield name
    finally:
        sh("ip", "link", "del", name, check=False)


def split_messages(buf):
    """The whole OpenFlow messages at the front of `buf` as (type, xid,
    bytes), and the bytes left over."""
    msgs = []
    while len(buf) >= 8:
        _, typ, length, xid = struct.unpack("!BBHI", buf[:8])
        if length < 8 or len(buf) < length:
            break
        msgs.append((typ, xid, buf[:length]))
        buf = buf[length:]
    return msgs, buf


def recv_messages(sock, buf, timeout_ok=False):
    """Read once from `sock` and split what has come so far: (messages,
    bytes left over), or None once the connection is closed or fails. A
    receive timeout is a failure unless `timeout_ok`, which makes it an
    empty read."""
    try:
        data = sock.recv(65536)
    except socket.timeout:
        if timeout_ok:
            return [], buf
        return None
    except OSError:
        return None
    if not data:
        return None
    return split_messages(buf + data)


def in_ns(ns, *argv, **kw):
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, **kw)


def capture(ns, iface, seconds, limit, *types):
    """Starts a capture in a namespace; returns a function giving the frames."""
    p = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, HELPER, "capture", iface, str(seconds), str(limit), *types],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "ready"

    def frames():
        out, _ = p.communicate(timeout=seconds + 10)
        return [bytes.fromhex(l) for l in out.split()]

    return frames


def send(ns, iface, *frames):
    r = in_ns(ns, sys.executable, HELPER, "send", iface, *[bytes(f).hex() for f in frames])
    assert r.returncode == 0, r.stderr


class Controller:
    """A minimal OpenFlow 1.3 controller: answers HELLO and ECHO, asks for
    the port descriptions, and records every PORT_STATUS (reason, port,
    name)."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)
        self.port = self.srv.getsockname()[1]
        self.port_status = []
        self.port_desc = []
        self.connected = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        conn, _ = self.srv.accept()
        self.connected.set()
        conn.sendall(struct.pack("!BBHI", 4, 0, 8, 1))  # HELLO
        conn.sendall(struct.pack("!BBHIHH4x", 4, 18, 16, 2, 13, 0))  # PORT_DESC request
        buf = b""
        while (got := recv_messages(conn, buf)) is not None:
            msgs, buf = got
            for typ, xid, msg in msgs:
                length = len(msg)
                if typ == 2:  # ECHO_REQUEST
                    conn.sendall(struct.pack("!BBHI", 4, 3, length, xid) + msg[8:])
                elif typ == 12:  # PORT_STATUS: reason, pad, ofp_port
                    reason = msg[8]
                    port_no = struct.unpack("!I", msg[16:20])[0]
                    name = msg[16 + 16:16 + 32].rstrip(b"\0").decode()
                    self.port_status.append((reason, port_no, name))
                elif typ == 19:  # MULTIPART_REPLY
                    mtype = struct.unpack("!H", msg[8:10])[0]
                    if mtype == 13:
                        body = msg[16:]
                        for i in range(0, len(body) - 63, 64):
                            no = struct.unpack("!I", body[i:i + 4])[0]
                            self.port_desc.append((no, body[i + 16:i + 32].rstrip(b"\0").decode()))
        self.closed.set()


def wait_for(pred, timeout=5.0, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
