"""The run context: sizes, names, processes, CPUs, and cleaning up.

Everything an experiment creates (namespaces, links, processes, files) is
named from the context's prefix and registered here, so `Ctx.cleanup`
removes it whatever way the run ends (normal end, exception, SIGTERM,
Ctrl-C).
"""

import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# The three sizes of every experiment: "smoke" (the test command, seconds),
# "quick" (every experiment small, minutes in all) and "default" (minutes
# each, the figures in docs/results.md).
SIZES = ("smoke", "quick", "default")


# The generators' CPU, where the runner and everything it starts without a
# CPU of its own (ping, ip, tcpdump, ovsdb-server) run too: see
# pin_harness.
HARNESS_CPU = 0


def pin_harness():
    """Moves this process (and so what it starts from now on) to the
    generators' CPU. On the switch's CPU a ping's start-up alone took it
    for 9 ms, long enough for the switch's receive ring to overflow
    (docs/results.md, "Delay at saturation"). Switches and generators are
    pinned by taskset, which overrides this."""
    if HARNESS_CPU in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {HARNESS_CPU})


class ExperimentError(Exception):
    """An experiment could not measure what it should (a switch did not
    start, nothing was forwarded...): the run reports it and goes on."""


def sh(cmd, check=True, timeout=120, input=None):
    """Runs a shell command line; returns CompletedProcess (text)."""
    r = subprocess.run(
        cmd, shell=True, capture_output=True, text=True, timeout=timeout, input=input
    )
    if check and r.returncode != 0:
        raise ExperimentError(f"`{cmd}` failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-800:]}")
    return r


def machine():
    """A line describing the machine: CPU model, cores, memory, kernel."""
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) // (1024 * 1024)
    except OSError:
        pass
    virt = ""
    r = subprocess.run("systemd-detect-virt", shell=True, capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip() not in ("", "none"):
        virt = f", virtualized ({r.stdout.strip()})"
    return f"{os.cpu_count()} × {model}, {mem + 1 if mem else '?'} GiB{virt}, Linux {platform.release()}"


def git_commit():
    r = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    commit = r.stdout.strip() or "?"
    d = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "crates"],
        capture_output=True,
        text=True,
    )
    return commit + ("+changes" if d.stdout.strip() else "")


def ovs_version():
    r = subprocess.run("ovs-vswitchd --version", shell=True, capture_output=True, text=True)
    m = re.search(r"\(Open vSwitch\) (\S+)", r.stdout)
    return m.group(1) if m else None


class Ctx:
    """What every experiment gets: size, prefix, binaries, CPUs, a work
    directory, and the registry of things to clean up."""

    def __init__(self, size, prefix, out_dir, fulmar, log=print, systems=None):
        assert size in SIZES
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,4}", prefix):
            raise SystemExit(f"--prefix {prefix!r}: 1 to 5 lower-case letters, digits or '-', starting with a letter")
        self.size = size
        self.P = prefix
        self.out = Path(out_dir)
        self.fulmar = str(fulmar)
        self.log = log
        self.ncpu = os.cpu_count() or 1
        self.work = Path(tempfile.mkdtemp(prefix=f"{prefix}-seeds."))
        self.procs = []  # Popen objects to stop
        self.pidfiles = []  # daemons (OVS) by pid file
        self.namespaces = []
        self.links = []  # root-namespace links
        self.cleanups = []  # callables
        self.systems = systems  # None: every system an experiment knows; else only these (--systems)

    # -- sizes ---------------------------------------------------------
    def pick(self, smoke, quick, default):
        """The value for this run's size."""
        return {"smoke": smoke, "quick": quick, "default": default}[self.size]

    def only(self, systems):
        """The experiment's systems that --systems kept, in its order."""
        if self.systems is None:
            return tuple(systems)
        kept = tuple(s for s in systems if s in self.systems)
        if not kept:
            raise ExperimentError(f"--systems {','.join(self.systems)}: none of this experiment's "
                                  f"({', '.join(systems)})")
        return kept

    # -- CPUs ----------------------------------------------------------
    @property
    def gen_cpus(self):
        """Where traffic generators run: CPU 0."""
        return str(HARNESS_CPU)

    def two_cpus(self, where):
        """A result's setup line on the usual two-CPU machine: `where` each
        program ran, then the caveat every figure carries."""
        return f"Two CPUs: {where}; other builds may have shared the machine."

    def switch_cpus(self, n=1):
        """Where a switch with n busy threads runs beside a generator: CPUs
        from 1 up, never the generator's CPU 0 (a paced generator sharing
        its CPU with busy threads stalls and then bursts), so on a small
        machine several threads share a CPU."""
        if self.ncpu < 2:
            return "0"
        return ",".join(str(c) for c in range(1, min(1 + n, self.ncpu)))

    def bench_cpus(self, n=1):
        """Where `fulmar bench` with n workers runs (no generator beside it):
        CPUs from 1 up, wrapping to 0."""
        return ",".join(str((1 + i) % self.ncpu) for i in range(min(n, self.ncpu)))

    # -- names ---------------------------------------------------------
    def name(self, suffix):
        n = f"{self.P}{suffix}"
        assert len(n) <= 15, n
        return n

    # -- processes -----------------------------------------------------
    def spawn(self, argv, ns=None, cpus=None, stdout=None, stderr=None, env=None, name=None):
        """Starts argv (in namespace ns, on CPUs cpus); registered for cleanup."""
        cmd = list(argv)
        if ns:
            cmd = ["ip", "netns", "exec", ns] + cmd
        if cpus is not None:
            cmd = ["taskset", "-c", str(cpus)] + cmd
        out = open(stdout, "wb") if isinstance(stdout, (str, Path)) else (stdout or subprocess.DEVNULL)
        err = open(stderr, "wb") if isinstance(stderr, (str, Path)) else (stderr or subprocess.DEVNULL)
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
        p.label = name or os.path.basename(argv[0])
        p.cmdline = shlex.join(cmd)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, timeout=10):
        """Stops one process started by spawn (its whole process group)."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
        if p in self.procs:
            self.procs.remove(p)
        return p.returncode

    # -- cleanup -------------------------------------------------------
    def cleanup(self):
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - clean up as much as possible
                self.log(f"  cleanup: {e}")
        self.cleanups.clear()
        for p in list(self.procs):
            try:
                self.stop(p, signal.SIGKILL, timeout=5)
            except Exception:  # noqa: BLE001
                pass
        for pf in self.pidfiles:
            try:
                pid = int(Path(pf).read_text().strip())
                os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
        self.pidfiles.clear()
        for ns in reversed(self.namespaces):
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        time.sleep(0.1)
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces.clear()
        for link in self.links:
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        self.links.clear()

    def remove_work(self):
        subprocess.run(["rm", "-rf", str(self.work)])

    def stamp(self):
        return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def loadavg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def load1():
    """The 1-minute load average (None when /proc/loadavg cannot be read)."""
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wait_quiet(ctx, below, deadline_s):
    """Waits (up to deadline_s seconds, polling every 2 s) until the
    1-minute load average is under `below`; returns (load, quiet): the
    last load read and whether it was under `below`. With deadline_s = 0
    it reads the load once and does not wait. The load average decays with
    a one-minute time constant, so a busy spell of the run itself (a large
    table installed) takes tens of seconds to fade."""
    t0 = time.monotonic()
    load = load1()
    waited = False
    while load is not None and load >= below and time.monotonic() - t0 < deadline_s:
        if not waited:
            ctx.log(f"  load {load:.2f} >= {below}: waiting up to {deadline_s:.0f} s for it to fall")
            waited = True
        time.sleep(min(2.0, max(0.0, deadline_s - (time.monotonic() - t0))))
        load = load1()
    quiet = load is not None and load < below
    if waited:
        ctx.log(f"  load {load:.2f} after {time.monotonic() - t0:.0f} s"
                + ("" if quiet else ": still above, measuring anyway"))
    return load, quiet


def die(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)
