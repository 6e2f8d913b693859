"""Shared fixtures: the fulmar binary and a runner for `fulmar trace --json`.

The binary is <repo>/target/debug/fulmar (built first with
`cargo build -p fulmar`) unless the FULMAR environment variable names another one.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from cargo_binary import cargo_binary  # noqa: E402


@pytest.fixture(scope="session")
def fulmar_bin():
    return cargo_binary("FULMAR", "fulmar")


class TraceResult:
    """The JSON lines of one trace run."""

    def __init__(self, lines):
        self.lines = lines

    def tx(self):
        """(port, bytes) of each transmitted packet, in order."""
        return [
            (l["port"], bytes.fromhex(l["packet"]))
            for l in self.lines
            if l["port"] != "CONTROLLER"
        ]

    def packet_ins(self):
        return [l for l in self.lines if l["port"] == "CONTROLLER"]

    def only(self, port):
        """The bytes of the single packet sent out of `port`."""
        got = [b for (p, b) in self.tx() if p == port]
        assert len(got) == 1, self.lines
        return got[0]


@pytest.fixture
def trace(fulmar_bin, tmp_path):
    """trace(flows, pkt, in_port=1, groups=None, meters=None, extra=())."""

    def run(flows, pkt, in_port=1, groups=None, meters=None, extra=()):
        f = tmp_path / "flows.txt"
        f.write_text(flows)
        args = [fulmar_bin, "trace", "--json", "--flows", str(f), "--in-port", str(in_port)]
        if groups is not None:
            g = tmp_path / "groups.txt"
            g.write_text(groups)
            args += ["--groups", str(g)]
        if meters is not None:
            m = tmp_path / "meters.txt"
            m.write_text(meters)
            args += ["--meters", str(m)]
        pkts = pkt if isinstance(pkt, list) else [pkt]
        for p in pkts:
            args += ["--packet", bytes(p).hex()]
        args += list(extra)
        res = subprocess.run(args, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        return TraceResult([json.loads(l) for l in res.stdout.splitlines()])

    return run
