"""Runs Faucet's own integration suite (tests/integration/mininet_tests.py
of the faucet source distribution) in its hardware-switch mode, then
prints a table of the results. bench/faucet-suite.sh sets up the network,
Open vSwitch and fulmar and calls this inside the suite's namespace.

    faucet_suite_runner.py run SDIST REPORT_JSON [suite arguments...]
    faucet_suite_runner.py table REPORT_JSON

`run` imports only the single-datapath module (mininet_tests), not the
multi-datapath one, and changes these things of the suite's for this
machine, all written down in docs/guide.md ("Faucet's integration suite"):

- the patch-panel Open vSwitch uses the userspace datapath (there is no
  kernel module here): FaucetTestBase.OVS_TYPE = "user";
- the test hosts' links to that Open vSwitch have no 1 ms netem delay
  (this kernel has no netem qdisc): FaucetSwitchTopo.DELAY = None;
- FaucetSanityTest.test_listening (no process may hold a socket on a test
  interface) does not count the patch panel's own ovs-vswitchd: its
  userspace datapath reads the test interfaces through packet sockets,
  where the kernel datapath, on a real test host, holds none;
- a test whose setUp fails has its network and controllers stopped
  (unittest runs no tearDown then; they would hold the controller ports
  and fail the tests after it);
- the test hosts compute their own checksums (transmit checksum offload
  off on their interfaces): a veth passes a frame on with its TCP/UDP
  checksum left for the NIC to fill in, where a real test host's NIC fills
  it before the frame reaches the cable, and fulmar's packet-socket ports
  forward frames as they get them;
- the suite's load-average gate (it fails a test when the 1-minute load
  stays above 1.5 per physical core) is raised to FAUCET_SUITE_MAX_LOAD
  (default 50): the machine is shared, and other jobs' load is not the
  switch's.
"""

import json
import os
import re
import sys


def run(sdist, report, argv):
    sys.path[:0] = [sdist, os.path.join(sdist, "tests", "integration")]
    from clib import clib_mininet_test_main as main  # noqa: E402
    from clib import mininet_test_base  # noqa: E402

    from clib import mininet_test_topo  # noqa: E402

    mininet_test_base.FaucetTestBase.OVS_TYPE = "user"
    from mininet.node import Host  # noqa: E402

    host_config = Host.config

    def config_without_tx_offload(self, *a, **kw):
        r = host_config(self, *a, **kw)
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd("ethtool -K %s tx off >/dev/null 2>&1" % intf.name)
        return r

    Host.config = config_without_tx_offload
    mininet_test_topo.FaucetSwitchTopo.DELAY = None
    max_load = int(os.environ.get("FAUCET_SUITE_MAX_LOAD", "50"))
    main.max_loadavg = lambda: max_load
    import mininet_tests  # noqa: E402

    sanity_listening = mininet_tests.FaucetSanityTest.test_listening

    def test_listening(self):
        get = self._get_controller

        class WithoutPatchPanel:
            # The controller node, whose `ss -lnep` leaves out the patch
            # panel's own packet sockets on the test interfaces.
            def __init__(self, node):
                self.node = node

            def cmd(self, *args, **kwargs):
                out = self.node.cmd(*args, **kwargs)
                return "\n".join(ln for ln in out.splitlines() if '(("ovs-vswitchd",' not in ln)

            def __getattr__(self, name):
                return getattr(self.node, name)

        self._get_controller = lambda: WithoutPatchPanel(get())
        try:
            sanity_listening(self)
        finally:
            del self._get_controller

    mininet_tests.FaucetSanityTest.test_listening = test_listening

    # A test whose setUp fails after its controllers started gets no
    # tearDown (unittest's rule), and its Faucet and Gauge would hold the
    # switch's controller ports until their 600 s timeout, failing every
    # test after it: stop its network (controllers included) then.
    base_setup = mininet_test_base.FaucetTestBase.setUp

    def guarded_setup(self, _base=base_setup):
        try:
            _base(self)
        except BaseException:
            if getattr(self, "net", None) is not None:
                try:
                    self._stop_net()
                except Exception as e:  # the setUp's error is the one to report
                    print(f"stopping the failed test's network: {e}", file=sys.stderr)
                self.net = None
            raise

    for cls in vars(mininet_tests).values():
        if isinstance(cls, type) and issubclass(cls, mininet_test_base.FaucetTestBase) and "setUp" in vars(cls):
            cls.setUp = (lambda orig: lambda self: guarded_setup(self, orig))(vars(cls)["setUp"])

    seed = os.environ.get("FAUCET_SUITE_SHUFFLE")
    if seed:
        # The classes in a random order (the suite runs them by name): a
        # run stopped early is then a sample of the whole suite.
        import random

        expand = main.expand_tests

        def shuffled(*a, **kw):
            sanity, single, parallel = expand(*a, **kw)
            random.Random(int(seed)).shuffle(single._tests)
            return sanity, single, parallel

        main.expand_tests = shuffled
    progress(report + ".progress")
    sys.argv = ["mininet_tests", "-j", report, *argv]
    main.test_main([mininet_tests.__name__])


def progress(path):
    """Appends each test's result to `path` (JSON lines) as it ends: the
    suite writes its report only when every test has run, and a long run
    may be stopped before."""
    import time
    import traceback
    import unittest

    base = unittest.TextTestResult
    started = {}
    start_test = base.startTest

    def timed_start(self, test):
        started[test.id()] = time.monotonic()
        return start_test(self, test)

    base.startTest = timed_start

    def record(status, test, err=None, text=""):
        if err is not None:
            text = "".join(traceback.format_exception(*err))
        with open(path, "a", encoding="utf-8") as f:
            secs = int(time.monotonic() - started.get(test.id(), time.monotonic()))
            f.write(json.dumps({"id": test.id(), "status": status, "output": text.replace("\n", "\t"),
                                "test_duration_secs": secs}) + "\n")

    for name, status in (("addSuccess", "OK"), ("addFailure", "FAIL"), ("addError", "ERROR"), ("addSkip", "SKIPPED")):
        orig = getattr(base, name)

        def wrapped(self, test, *rest, _orig=orig, _status=status):
            if _status in ("FAIL", "ERROR"):
                record(_status, test, err=rest[0])
            elif _status == "SKIPPED":
                record(_status, test, text=str(rest[0]))
            else:
                record(_status, test)
            return _orig(self, test, *rest)

        setattr(base, name, wrapped)


# Failures that come from the test host, not the switch: (pattern in the
# failure's text, what to call it).
TEST_HOST = [
    (re.compile(r"type vlan id \d+.*Unknown device type", re.S),
     "test host: this kernel makes no 802.1Q interfaces (no 8021q module) for the suite's tagged hosts"),
    (re.compile(r"type bond .*Unknown device type", re.S),
     "test host: this kernel makes no bonding interfaces (no bonding module) for the suite's LACP host"),
    (re.compile(r"No such file or directory: '/etc/freeradius"), "test host: freeradius not installed"),
    (re.compile(r"Specified qdisc kind is unknown"), "test host: a qdisc this kernel lacks"),
]


def test_host_cause(output):
    for pattern, what in TEST_HOST:
        if pattern.search(output):
            return what
    return None


def cause(output):
    """One line saying why a test failed, from its unittest text (the
    suite's report joins the traceback's lines with tabs)."""
    lines = [ln.strip() for ln in output.split("\t") if ln.strip()]
    for i, ln in enumerate(lines):
        if re.match(r"^(AssertionError|[A-Za-z_.]*Error|[A-Za-z_.]*Exception)\b", ln):
            text = " ".join(lines[i:i + 3])
            return text[:300]
    return (lines[-1] if lines else "?")[:300]


ORDER = {"ERROR": 0, "FAIL": 1, "SKIPPED": 2, "OK": 3}


def classes(report):
    """{class: (result, secs, [(method, status, output)])} from the
    suite's JSON report; a class's result is its worst method's."""
    if os.path.exists(report):
        with open(report, encoding="utf-8") as f:
            tests = json.load(f)["tests"]
    else:
        # A run stopped early: what its tests recorded as they ended.
        tests = {}
        with open(report + ".progress", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                tests[r["id"]] = r
    by_class = {}
    for test_id, r in tests.items():
        # "mininet_tests.FaucetUntaggedTest.test_untagged"
        parts = test_id.split(".")
        cls, method = (parts[-2], parts[-1]) if len(parts) >= 2 else (test_id, "")
        by_class.setdefault(cls, []).append((method, r["status"], r.get("test_duration_secs", 0), r.get("output", "")))
    out = {}
    for cls, methods in by_class.items():
        result = min((m[1] for m in methods), key=lambda st: ORDER.get(st, 0))
        out[cls] = (result, sum(m[2] for m in methods), methods)
    return out


def table(report):
    rows = classes(report)
    counts = {}
    for result, _, _ in rows.values():
        counts[result] = counts.get(result, 0) + 1
    width = max([len(c) for c in rows] + [10])
    print(f"{'test class':<{width}}  result   secs")
    for cls in sorted(rows):
        result, secs, _ = rows[cls]
        print(f"{cls:<{width}}  {result:<7} {secs:>5}")
    print()
    print("classes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f" (of {len(rows)})")
    failed = [(c, m) for c, (res, _, ms) in sorted(rows.items()) for m in ms if m[1] in ("FAIL", "ERROR")]
    host_failed = {c for c, m in failed if test_host_cause(m[3])}
    switch_failed = {c for c, _ in failed} - host_failed
    if failed:
        print(f"failed classes: {len(switch_failed)} with the switch to blame or not yet classified, "
              f"{len(host_failed)} for the test host (below: 'test host: ...')")
        print()
        print("causes of failures:")
        for cls, (method, status, _, output) in failed:
            print(f"  {cls}.{method} ({status}): {test_host_cause(output) or cause(output)}")
    skipped = [(c, m) for c, (res, _, ms) in sorted(rows.items()) for m in ms if m[1] == "SKIPPED"]
    if skipped:
        print()
        print("reasons for skips:")
        for cls, (method, _, _, output) in skipped:
            print(f"  {cls}.{method}: {output.strip()[:200]}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        sys.exit(table(sys.argv[2]))
    else:
        sys.exit(__doc__)
