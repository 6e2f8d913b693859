"""Shared fixtures: the packet_tool binary and a runner for it.

The tool is built with `cargo build -p packet --example packet_tool` unless
the PACKET_TOOL environment variable names a binary.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from cargo_binary import cargo_binary  # noqa: E402


@pytest.fixture(scope="session")
def tool_path():
    return cargo_binary("PACKET_TOOL", "packet", "packet_tool")


@pytest.fixture
def tool(tool_path):
    def run(args, pkts):
        pkts = [bytes(p) for p in pkts]
        inp = "".join(p.hex() + "\n" for p in pkts)
        res = subprocess.run(
            [tool_path] + args.split(),
            input=inp,
            capture_output=True,
            text=True,
            check=True,
        )
        lines = res.stdout.splitlines()
        assert len(lines) == len(pkts), res.stderr
        return lines

    return run
