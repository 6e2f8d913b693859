"""Fixtures for the controller tests: two network namespaces joined through
`fulmar run`, and a real OpenFlow controller process it connects to.

Topology:  ns fct-a: fcta-p (10.9.7.1) == fcta [port 1] fulmar [port 2] fctb == fctb-p (10.9.7.2) :ns fct-b

`fulmar_bin`, `Switch`, `in_ns`, `capture` and `send` are the end-to-end
tests' (tests/e2e/conftest.py), loaded under their own module name so the
two conftest modules do not replace each other.
"""

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "e2e_conftest", Path(__file__).resolve().parents[1] / "e2e" / "conftest.py"
)
e2e = importlib.util.module_from_spec(_spec)
sys.modules["e2e_conftest"] = e2e
_spec.loader.exec_module(e2e)

ROOT = e2e.ROOT
Switch = e2e.Switch
in_ns = e2e.in_ns
capture = e2e.capture
send = e2e.send
sh = e2e.sh
fulmar_bin = e2e.fulmar_bin  # the fixture: builds the debug binary unless $FULMAR names one

NS_A, NS_B = "fct-a", "fct-b"
DEV_A, DEV_B = "fcta", "fctb"  # fulmar's ports 1 and 2 (root namespace)
PEER_A, PEER_B = "fcta-p", "fctb-p"  # the hosts' ends
MAC_A = "02:00:00:00:0f:0a"
MAC_B = "02:00:00:00:0f:0b"
IP_A, IP_B = "10.9.7.1", "10.9.7.2"


def cleanup():
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)
    for link in (DEV_A, DEV_B):
        sh("ip", "link", "del", link, check=False)


@pytest.fixture
def fct_net(fulmar_bin):
    cleanup()
    try:
        for ns, dev, peer, mac, addr in (
            (NS_A, DEV_A, PEER_A, MAC_A, IP_A + "/24"),
            (NS_B, DEV_B, PEER_B, MAC_B, IP_B + "/24"),
        ):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", dev, "type", "veth", "peer", "name", peer, "netns", ns)
            sh("ip", "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", peer, "address", mac, "up")
            sh("ip", "-n", ns, "addr", "add", addr, "dev", peer)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
        yield
    finally:
        cleanup()


def wait_listening(port, proc, log, timeout=30.0):
    """Waits until something accepts on 127.0.0.1:port; fails with the
    process's log when it exits first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"controller exited ({proc.returncode}):\n{Path(log).read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"controller not listening on {port} after {timeout}s:\n{Path(log).read_text()}")


class Controller:
    """A controller process listening on 127.0.0.1:port; its output goes
    to `log`."""

    def __init__(self, argv, port, log, env=None):
        self.port = port
        self.log = Path(log)
        self._f = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=self._f, stderr=subprocess.STDOUT, env=env)
        wait_listening(port, self.proc, log)

    def text(self):
        return self.log.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._f.close()


@pytest.fixture
def controllers():
    """Starts controllers; stops them at the end, also after a failure."""
    started = []

    def start(argv, port, log, env=None):
        c = Controller(argv, port, log, env)
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


@pytest.fixture
def fulmar_switch(fulmar_bin):
    """Starts `fulmar run` on the two ports with extra arguments; stops it
    at the end."""
    started = []

    def start(*extra):
        s = Switch([fulmar_bin, "run", "-i", DEV_A, "-i", DEV_B, *extra])
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
