"""The binary a test suite runs: the one an environment variable names, or
else one cargo builds here (a no-op when up to date, so a stale binary is
never tested). Imported by the conftest.py of flowtext_ovs, packet_scapy and
pipeline_scapy (each puts this folder on sys.path)."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cargo_binary(env_var, package, example=None):
    """$ENV_VAR if set; else builds PACKAGE's binary (or its EXAMPLE) in
    debug and returns its path under target/debug."""
    env = os.environ.get(env_var)
    if env:
        return env
    if example is None:
        subprocess.run(["cargo", "build", "-q", "-p", package], cwd=ROOT, check=True)
        return str(ROOT / "target" / "debug" / package)
    subprocess.run(["cargo", "build", "-q", "-p", package, "--example", example], cwd=ROOT, check=True)
    return str(ROOT / "target" / "debug" / "examples" / example)
