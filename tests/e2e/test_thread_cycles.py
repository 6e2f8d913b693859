"""End-to-end: cycles per packet per stage per thread (`fulmar ctl stats`
and `/metrics`), in both thread modes, in network namespaces, as root.

Host A pings host B through the switch; each data-plane thread's cycle
counters for the stages its role has (rx, pipeline, tx) must appear and
grow, `ctl stats` must print them per packet with the counter's rate, and
the metrics page must carry them and still pass promtool.
"""

import json
import re
import shutil
import socket
import subprocess
import urllib.request

import pytest

from e2e_support import NS_A, wait_for
from test_live_mgmt import Live, config_text, flood

# The stages each role counts in (see crates/dataplane/src/threads/cycles.rs).
STAGES = {
    ("run-to-completion", "worker"): ("rx", "pipeline", "tx"),
    ("rx-worker-tx", "rx"): ("rx", "tx"),
    ("rx-worker-tx", "worker"): ("rx", "pipeline", "tx"),
    ("rx-worker-tx", "tx"): ("rx", "tx"),
}


def cycles(live):
    """Per thread: (role, packets, {stage: cycles}), from `ctl stats --json`."""
    [report] = json.loads(live.ctl("stats", "br0", "--json").stdout)
    return report["tsc_hz"], {
        t["name"]: (t["role"], t["packets"],
                    {s: t[f"{s}_cycles"] for s in ("rx", "pipeline", "tx")})
        for t in report["threads"]
    }


def metric_cycles(body):
    """`fulmar_thread_cycles_total` samples: {(thread, stage): value}."""
    return {
        (m["thread"], m["stage"]): int(m["v"])
        for m in re.finditer(
            r'^fulmar_thread_cycles_total\{bridge="br0",thread="(?P<thread>[^"]+)",'
            r'role="[^"]+",stage="(?P<stage>[^"]+)"\} (?P<v>\d+)$', body, re.M)
    }


@pytest.mark.parametrize("mode", ["run-to-completion", "rx-worker-tx"])
def test_cycles_per_stage_appear_and_grow_after_traffic(net, fulmar_bin, tmp_path, mode):
    if shutil.which("ping") is None:
        pytest.skip("needs ping")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = f'[dataplane]\nmode = "{mode}"\n' + config_text(tmp_path)
    live = Live(fulmar_bin, tmp_path, "--metrics", f"127.0.0.1:{port}", config=config)

    def scrape():
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()

    try:
        hz, before = cycles(live)
        assert hz > 0
        roles = sorted({role for role, _, _ in before.values()})
        assert roles == sorted({r for (m, r) in STAGES if m == mode}), before
        metrics_before = metric_cycles(scrape())
        # Every thread's three stages are listed, even before any packet.
        assert set(metrics_before) == {(t, s) for t in before for s in ("rx", "pipeline", "tx")}

        out, _ = flood(NS_A, "10.9.0.2", 200, "0.01").communicate(timeout=120)
        assert " 0% packet loss" in out, out

        # The counters each role has grow (the threads publish every few
        # milliseconds: wait for it), and only those.
        def grown():
            _, now = cycles(live)
            ok = all(
                stats[2][s] > before[name][2][s]
                for name, stats in now.items()
                if stats[1] > before[name][1]
                for s in STAGES[(mode, stats[0])]
            )
            busy = [n for n, st in now.items() if st[1] > before[n][1]]
            return now if ok and len(busy) == len(now) else None
        after = wait_for(grown, timeout=30, what=f"every thread's stage cycles to grow: {before}")
        for name, (role, _, c) in after.items():
            if "pipeline" not in STAGES[(mode, role)]:
                assert c["pipeline"] == 0, (name, c)

        # `ctl stats`: the cycles section, per packet, one line per thread.
        text = live.ctl("stats", "br0").stdout
        assert re.search(r"^  cycles per packet, by thread \(TSC \d+\.\d{3} GHz\):$", text, re.M), text
        for name, (role, packets, c) in after.items():
            m = re.search(
                rf"^    {re.escape(name)} \({role}\): rx (\d+), pipeline (\d+), tx (\d+), total (\d+)$",
                text, re.M)
            assert m, f"{name} not in:\n{text}"
            for s, v in zip(("rx", "pipeline", "tx"), map(int, m.groups()[:3])):
                assert (v > 0) == (s in STAGES[(mode, role)]), (name, s, m.group(0))

        # /metrics: the same counters, grown, and the rate; promtool agrees.
        body = scrape()
        r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True) \
            if shutil.which("promtool") else None
        assert r is None or r.returncode == 0, r.stdout + r.stderr
        assert re.search(r"^fulmar_thread_cycle_rate_hertz \d+$", body, re.M), body
        got = metric_cycles(body)
        for name, (role, _, _) in after.items():
            for s in STAGES[(mode, role)]:
                assert got[(name, s)] > metrics_before[(name, s)], (name, s, got, metrics_before)
    finally:
        rc, out, err = live.stop()
    assert rc == 0, err
