"""Fixtures for the controller tests: two network namespaces joined through
`fulmar run` (see ctl_support.py for the topology), real OpenFlow
controller processes, and the switch itself.
"""

import pytest

from ctl_support import (
    DEV_A,
    DEV_B,
    IP_A,
    IP_B,
    MAC_A,
    MAC_B,
    NS_A,
    NS_B,
    PEER_A,
    PEER_B,
    Controller,
    Switch,
    cleanup,
    e2e,
    sh,
)

fulmar_bin = e2e.fulmar_bin  # the fixture: builds the debug binary unless $FULMAR names one


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
