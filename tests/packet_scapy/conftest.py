"""Shared fixtures: the packet_tool binary and a runner for it.

The tool is built with `cargo build -p packet --example packet_tool` unless
the PACKET_TOOL environment variable names a binary.
"""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tool_path():
    env = os.environ.get("PACKET_TOOL")
    if env:
        return env
    subprocess.run(
        ["cargo", "build", "-q", "-p", "packet", "--example", "packet_tool"],
        cwd=ROOT,
        check=True,
    )
    return str(ROOT / "target" / "debug" / "examples" / "packet_tool")


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
