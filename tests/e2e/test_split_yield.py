"""End-to-end: split-mode threads that share a CPU yield after busy rounds
(issue #34), and `fulmar ctl stats` says which do, as root.

With `core_assign = "minimum"` the RX and TX threads share one CPU and the
worker gets the next (the same one when the process has only two CPUs,
the first being left to the control side): the threads on a CPU with
another busy-polling thread must report `yields`, a worker alone on its
CPU must not, and pings still get through.
"""

import json
import os
import re
import shutil

import pytest

from e2e_support import NS_A
from test_live_mgmt import Live, config_text, flood


def minimum_plan():
    """{role: cpu} as `core_assign = "minimum"` places one thread of each
    kind on the CPUs this process (and so fulmar) may use."""
    cpus = sorted(os.sched_getaffinity(0))
    usable = cpus[1:] if len(cpus) > 1 else cpus
    io = usable[0]
    work = usable[1] if len(usable) > 1 else usable[0]
    return {"rx": io, "worker": work, "tx": io}


def test_threads_sharing_a_cpu_yield_and_say_so(net, fulmar_bin, tmp_path):
    if shutil.which("ping") is None:
        pytest.skip("needs ping")
    config = '[dataplane]\nmode = "rx-worker-tx"\ncore_assign = "minimum"\n' + config_text(tmp_path)
    live = Live(fulmar_bin, tmp_path, config=config)
    try:
        plan = minimum_plan()
        out, _ = flood(NS_A, "10.9.0.2", 100, "0.01").communicate(timeout=120)
        assert " 0% packet loss" in out, out

        [report] = json.loads(live.ctl("stats", "br0", "--json").stdout)
        threads = report["threads"]
        assert sorted(t["role"] for t in threads) == ["rx", "tx", "worker"], threads
        text = live.ctl("stats", "br0").stdout
        for t in threads:
            cpu = plan[t["role"]]
            assert t["core"] == cpu, (t, plan)
            shared = sum(1 for c in plan.values() if c == cpu) > 1
            assert t["yields"] == shared, (t, plan)
            suffix = ", yields" if shared else ""
            line = rf"^  thread {re.escape(t['name'])} \({t['role']}, core {cpu}{suffix}\): "
            assert re.search(line, text, re.M), f"{line} not in:\n{text}"
    finally:
        rc, out, err = live.stop()
    assert rc == 0, err
