"""Fixtures for the end-to-end tests: root, network namespaces and veth
pairs (removed afterwards, also after a failure), and `fulmar run`.

Topology of `net`:  ns fe-a: va (10.9.0.1) == sa [port 1] fulmar [port 2] sb == vb (10.9.0.2) :ns fe-b
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELPER = str(Path(__file__).with_name("nshelper.py"))
MAC_A = "02:00:00:00:0e:0a"
MAC_B = "02:00:00:00:0e:0b"


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def cleanup():
    for ns in ("fe-a", "fe-b", "fe-d1", "fe-d2"):
        sh("ip", "netns", "del", ns, check=False)
    for link in ("sa", "sb"):
        sh("ip", "link", "del", link, check=False)


@pytest.fixture(scope="session")
def fulmar_bin():
    if os.geteuid() != 0:
        pytest.skip("end-to-end tests need root (network namespaces)")
    if shutil.which("ip") is None:
        pytest.skip("needs ip(8)")
    env = os.environ.get("FULMAR")
    if env:
        return env
    subprocess.run(["cargo", "build", "-q", "-p", "fulmar"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "debug" / "fulmar")


@pytest.fixture
def net(fulmar_bin):
    cleanup()
    try:
        for ns, root, peer, mac, addr in (
            ("fe-a", "sa", "va", MAC_A, "10.9.0.1/24"),
            ("fe-b", "sb", "vb", MAC_B, "10.9.0.2/24"),
        ):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", root, "type", "veth", "peer", "name", peer, "netns", ns)
            sh("ip", "link", "set", root, "up")
            sh("ip", "-n", ns, "link", "set", peer, "address", mac, "up")
            sh("ip", "-n", ns, "addr", "add", addr, "dev", peer)
            # Quiet links: no IPv6 autoconfiguration noise.
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        sh("sysctl", "-qw", "net.ipv6.conf.sa.disable_ipv6=1", check=False)
        sh("sysctl", "-qw", "net.ipv6.conf.sb.disable_ipv6=1", check=False)
        yield
    finally:
        cleanup()


class Switch:
    """A running `fulmar run`; stop() sends SIGINT and returns its output."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        # Started when it says so on stderr.
        self.err_lines = []
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.err_lines.append(line)
            if "running bridges" in line:
                return
        raise RuntimeError("fulmar did not start: " + "".join(self.err_lines))

    def stop(self):
        self.proc.send_signal(2)
        out, err = self.proc.communicate(timeout=20)
        return self.proc.returncode, out, "".join(self.err_lines) + err


@pytest.fixture
def switch(fulmar_bin, tmp_path):
    started = []

    def start(flows, *extra):
        f = tmp_path / "flows"
        f.write_text(flows)
        s = Switch([fulmar_bin, "run", "-i", "sa", "-i", "sb", "--flows", str(f), *extra])
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


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
