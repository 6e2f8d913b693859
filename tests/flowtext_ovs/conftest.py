"""Shared fixtures: the flowtext_tool binary (crates/flowtext/examples).

The tool is built with `cargo build -p flowtext --example flowtext_tool`
unless the FLOWTEXT_TOOL environment variable names a binary.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from cargo_binary import cargo_binary  # noqa: E402


@pytest.fixture(scope="session")
def tool_path():
    return cargo_binary("FLOWTEXT_TOOL", "flowtext", "flowtext_tool")


@pytest.fixture(scope="session")
def flowtext(tool_path):
    """Runs the tool in MODE over LINES; returns one (ok, text) per line."""

    def run(mode, lines):
        res = subprocess.run(
            [tool_path, mode],
            input="".join(line + "\n" for line in lines),
            capture_output=True,
            text=True,
            check=True,
        )
        out = res.stdout.splitlines()
        assert len(out) == len(lines), res.stderr
        return [(o.startswith("ok "), o.split(" ", 1)[1] if " " in o else "") for o in out]

    return run


@pytest.fixture(scope="session")
def ovs_ofctl():
    path = shutil.which("ovs-ofctl")
    if path is None:
        pytest.skip("ovs-ofctl not installed (scripts/test.sh installs openvswitch-switch)")
    return path
