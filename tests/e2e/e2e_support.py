"""What the end-to-end tests share besides fixtures: names of the
namespaces and links, `Switch` (a running `fulmar run`), and helpers to run
commands in a namespace, capture and send frames.

Test modules import these from here, not from `conftest`: when several
test directories are collected in one run, the module named `conftest` may
be another directory's.
"""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPER = str(Path(__file__).with_name("nshelper.py"))
MAC_A = "02:00:00:00:0e:0a"
MAC_B = "02:00:00:00:0e:0b"
P = os.environ.get("FULMAR_E2E_PREFIX", "fe")
NS_A, NS_B = f"{P}-a", f"{P}-b"
SW_A, SW_B = f"{P}-sa", f"{P}-sb"


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def cleanup():
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)
    for link in (SW_A, SW_B):
        sh("ip", "link", "del", link, check=False)


class Switch:
    """A running `fulmar run`; stop() sends SIGINT and returns its output.

    A thread reads stderr as it comes (into err_lines), so nothing is lost
    between the start-up line and stop() and the pipe never fills."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err_lines = []
        started = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                self.err_lines.append(line)
                if "running bridges" in line:
                    started.set()
            started.set()

        self.reader = threading.Thread(target=read_stderr, daemon=True)
        self.reader.start()
        # Started when it says so on stderr.
        started.wait(timeout=10)
        if not any("running bridges" in l for l in self.err_lines):
            raise RuntimeError("fulmar did not start: " + "".join(self.err_lines))

    def stop(self):
        self.proc.send_signal(2)
        # Killed if it has not stopped within 20 s (the test then fails on
        # the exit status).
        watchdog = threading.Timer(20, self.proc.kill)
        watchdog.start()
        try:
            out = self.proc.stdout.read()
            self.proc.wait()
        finally:
            watchdog.cancel()
        self.reader.join(timeout=10)
        return self.proc.returncode, out, "".join(self.err_lines)


def in_ns(ns, *argv, **kw):
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, **kw)


def capture(ns, iface, seconds, limit, *types):
    """Starts a capture in a namespace; returns a function giving the frames."""
    p = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, HELPER, "capture", iface, str(seconds), str(limit), *types],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "ready"

    def frames():
        out, _ = p.communicate(timeout=seconds + 10)
        return [bytes.fromhex(l) for l in out.split()]

    return frames


def send(ns, iface, *frames):
    r = in_ns(ns, sys.executable, HELPER, "send", iface, *[bytes(f).hex() for f in frames])
    assert r.returncode == 0, r.stderr
