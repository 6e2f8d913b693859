"""Shared pieces of the controller tests (imported by conftest.py and the
test modules under this unique name; a module named `conftest` may be
another directory's by the time a test module imports it).

Topology:  ns fct-a: fcta-p (10.9.7.1) == fcta [port 1] fulmar [port 2] fctb == fctb-p (10.9.7.2) :ns fct-b

`Switch`, `in_ns`, `capture`, `send`, `sh` and the `fulmar_bin` fixture
are the end-to-end tests' (tests/e2e/conftest.py), loaded under the name
`e2e_conftest`.
"""

import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

if "e2e_conftest" in sys.modules:
    e2e = sys.modules["e2e_conftest"]
else:
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
        e2e.terminate(self.proc)
        self._f.close()
