"""`bench/seeds/run.sh --smoke`: every seed experiment, tiny, through the
same code as the real runs (namespaces, veths, fulmar, Open vSwitch, the
Linux bridge and IP forwarding, trafgen, tcpreplay, iperf3, the OpenFlow
client), must write its CSV, SVG and markdown fragment. The figures of a
smoke run mean nothing and nothing here asserts a rate or a delay; what is
checked is that each experiment measured what it claims to (traffic went
through, replies came back, the table filled to its capacity and no
further, a flow-stats reply held every flow).
"""

import csv
import json
import os
import subprocess

import pytest
from e2e_support import P, ROOT

SEEDS = ROOT / "bench" / "seeds"


def experiments():
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(SEEDS / "seeds.py"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def rows(out, name):
    with open(out / f"{name}.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.timeout(900)
def test_every_seed_experiment_runs_small(fulmar_bin, tmp_path):
    for tool in ("trafgen", "tcpreplay", "iperf3", "ovs-vswitchd", "nft"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            pytest.skip(f"needs {tool} (scripts/test.sh installs it)")
    prefix = (P.replace("-", "") + "sd")[:5]
    env = dict(os.environ, FULMAR=fulmar_bin)
    r = subprocess.run([str(SEEDS / "run.sh"), "--smoke", "--prefix", prefix, "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=880)
    log = r.stdout[-6000:] + r.stderr[-3000:]
    assert r.returncode == 0, log
    names = experiments()
    assert len(names) >= 17
    for n in names:
        for ext in ("csv", "svg", "md", "json"):
            assert (tmp_path / f"{n}.{ext}").stat().st_size > 0, f"{n}.{ext} missing\n{log}"
        assert rows(tmp_path, n), f"{n}: no rows"
        assert "<svg" in (tmp_path / f"{n}.svg").read_text()[:2000]
        md = (tmp_path / f"{n}.md").read_text()
        assert f"]({n}.svg)" in md and "Measured " in md
        meta = json.loads((tmp_path / f"{n}.json").read_text())
        assert meta["ok"], f"{n} failed: {meta.get('findings')}"

    # Traffic went through fulmar and Open vSwitch on the veths.
    for name in ("001-size", "002-rules", "002-bridges", "003-forwarding"):
        for sysname in ("fulmar", "ovs"):
            got = [float(x["mpps"]) for x in rows(tmp_path, name)
                   if x["system"] == sysname and x["mpps"] and float(x.get("offered_mpps") or 1) > 0]
            assert got and all(v > 0 for v in got), f"{name}: {sysname} forwarded nothing"
    # Pings and echoes came back.
    for x in rows(tmp_path, "000-batching"):
        assert int(x["answered"]) > 0, x
    for name in ("004-match", "004-rewrite"):
        for x in rows(tmp_path, name):
            assert int(x["answered"]) > 0, x
    # A configured capacity: the table took exactly that many, refused the
    # next rule with TABLE_FULL and still forwarded. With its defaults (no
    # table limit) fulmar, like Open vSwitch, took every rule of the run.
    cap = rows(tmp_path, "004-capacity")
    last = [x for x in cap if x["run"] == "fulmar, capacity 65,536"][-1]
    assert int(last["flows"]) == 65536 and last["refused"] == "type 5 code 1", last
    assert last["forwards_after"] == "True", last
    ovs = [x for x in cap if x["system"] == "ovs"][-1]
    assert not ovs["refused"] and ovs["forwards_after"] == "True", ovs
    last = [x for x in cap if x["run"] == "fulmar, default (no table limit)"][-1]
    assert not last["refused"] and last["forwards_after"] == "True", last
    assert int(last["flows"]) == int(ovs["flows"]), (last, ovs)
    # A flow-stats reply held every flow.
    for x in rows(tmp_path, "004-stats"):
        assert int(x["flow_entries"]) == int(x["flows"]), x
    # 000-tablesize searched for its rate (every step offered traffic) and
    # offered every row that rate, each with the load average read before it.
    meta = json.loads((tmp_path / "000-tablesize.json").read_text())
    assert meta["rate_search"] and all(s["offered_pps"] > 0 for s in meta["rate_search"]), meta
    for x in rows(tmp_path, "000-tablesize"):
        assert float(x["rate_pps"]) == pytest.approx(meta["offered_pps"], rel=1e-4) and x["load"], x
    # 003-forwarding's delay rows under load have their tail beside the median.
    for x in rows(tmp_path, "003-forwarding"):
        if x["part"] == "load" and x["rtt_median_us"]:
            assert float(x["rtt_max_us"]) >= float(x["rtt_p90_us"]) >= float(x["rtt_median_us"]), x
    # Both flows of the fairness test were counted at the receiver.
    for x in rows(tmp_path, "003-fairness"):
        assert float(x["f1_got_pps"]) > 0 and float(x["f2_got_pps"]) > 0, x


def test_publish_rewrites_only_between_the_markers(tmp_path):
    """--publish copies plots and tables and replaces the part of
    docs/results.md between its markers, leaving the rest alone (run on a
    copy of the repository's docs)."""
    text = (ROOT / "docs" / "results.md").read_text()
    assert "<!-- seeds:begin -->" in text and "<!-- seeds:end -->" in text
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", PUBLISH_CHECK, str(ROOT), str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


PUBLISH_CHECK = r"""
import shutil, sys
from pathlib import Path
root, tmp = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(root / "bench" / "seeds"))
import seeds
fake = tmp / "repo"
(fake / "docs").mkdir(parents=True)
kept = ("### 002-rules: throughput against the number of rules (seed 002)\n\nkept as it was\n")
doc = ("# Results\n\nbefore\n<!-- seeds:begin -->\nold\n"
       "| [002-rules](#x) | 002 | then | a finding |\n\n" + kept +
       "\nNot measured yet: 001-size.\n<!-- seeds:end -->\nafter\n")
(fake / "docs" / "results.md").write_text(doc)
out = tmp / "out"
out.mkdir()
(out / "001-size.md").write_text("### 001-size\n\n![001-size](001-size.svg)\nrows in [001-size.csv](001-size.csv)\n")
(out / "001-size.svg").write_text("<svg/>")
(out / "001-size.csv").write_text("a\n1\n")
seeds.ROOT = fake
seeds.publish(out)
new = (fake / "docs" / "results.md").read_text()
assert new.startswith("# Results\n\nbefore\n<!-- seeds:begin -->\n"), new
assert new.endswith("<!-- seeds:end -->\nafter\n"), new
assert "old" not in new and "](results/seeds/001-size.svg)" in new and "](results/seeds/001-size.csv)" in new
assert "Not measured yet:" in new
# An experiment the output directory has no results for keeps its section
# and index row; one it has is no longer listed as not measured.
assert kept in new and "| [002-rules](#x) | 002 | then | a finding |" in new, new
assert "Not measured yet: 001-size" not in new and "001-size," not in new.split("Not measured yet:")[1], new
assert (fake / "docs" / "results" / "seeds" / "001-size.svg").read_text() == "<svg/>"
"""
