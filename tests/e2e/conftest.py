"""Fixtures for the end-to-end tests: root, network namespaces and veth
pairs (removed afterwards, also after a failure), and `fulmar run`.

Topology of `net`:  ns P-a: va (10.9.0.1) == P-sa [port 1] fulmar [port 2] P-sb == vb (10.9.0.2) :ns P-b

P is $FULMAR_E2E_PREFIX (default "fe"), so that two runs on one machine
can use different names.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests/: cargo_binary, shared with the other suites.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from e2e_support import *  # noqa: E402,F401,F403  (also offered to tests/controllers)
from e2e_support import MAC_A, MAC_B, NS_A, NS_B, ROOT, SW_A, SW_B, Switch, cleanup, host_veth, sh, switch_starter  # noqa: E402


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
            (NS_A, SW_A, "va", MAC_A, "10.9.0.1/24"),
            (NS_B, SW_B, "vb", MAC_B, "10.9.0.2/24"),
        ):
            host_veth(ns, root, peer, mac, addr)
        yield
    finally:
        cleanup()


@pytest.fixture
def ovsdb(tmp_path):
    """An ovsdb-server of the test's own (mgmt_support.Ovsdb), stopped after it."""
    from mgmt_support import Ovsdb

    o = Ovsdb(tmp_path)
    yield o
    o.stop()


@pytest.fixture
def switch(fulmar_bin, tmp_path):
    """start(flows, *extra): `fulmar run` on SW_A and SW_B with FLOWS."""

    def argv(flows, *extra):
        f = tmp_path / "flows"
        f.write_text(flows)
        return [fulmar_bin, "run", "-i", SW_A, "-i", SW_B, "--flows", str(f), *extra]

    yield from switch_starter(argv)
