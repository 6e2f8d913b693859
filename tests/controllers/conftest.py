"""Fixtures for the controller tests: two network namespaces joined through
`fulmar run` (see ctl_support.py for the topology), real OpenFlow
controller processes, and the switch itself.
"""

import pytest

import ctl_support as ctl

fulmar_bin = ctl.e2e.fulmar_bin  # the fixture: builds the debug binary unless $FULMAR names one


@pytest.fixture
def fct_net(fulmar_bin):
    ctl.cleanup()
    try:
        ctl.e2e.host_veth(ctl.NS_A, ctl.DEV_A, ctl.PEER_A, ctl.MAC_A, ctl.IP_A + "/24")
        ctl.e2e.host_veth(ctl.NS_B, ctl.DEV_B, ctl.PEER_B, ctl.MAC_B, ctl.IP_B + "/24")
        yield
    finally:
        ctl.cleanup()


@pytest.fixture
def controllers():
    """Starts controllers; stops them at the end, also after a failure."""
    started = []

    def start(argv, port, log, env=None):
        c = ctl.Controller(argv, port, log, env)
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


@pytest.fixture
def fulmar_switch(fulmar_bin):
    """Starts `fulmar run` on the two ports with extra arguments; stops it
    at the end."""
    yield from ctl.e2e.switch_starter(lambda *extra: [fulmar_bin, "run", "-i", ctl.DEV_A, "-i", ctl.DEV_B, *extra])
