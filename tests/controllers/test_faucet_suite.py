"""A smoke subset of Faucet's own integration suite with fulmar as the
hardware switch under test (bench/faucet-suite.sh runs the whole suite,
about two hours here; its figures are in docs/results.md, "Faucet's
integration suite"; docs/guide.md, "Faucet's integration suite", says how
it is wired).

The subset, two classes of about a minute each on this 2-core machine:
the untagged basics (every host pings every other, then every switch port
is flapped by PORT_MOD and must report down and up again) and a meter
applied by an ACL (Gauge must read the meter's band counters). Each must
pass. ACLs, groups and tagged VLANs run in the whole suite (the tagged
classes need a kernel that makes 802.1Q interfaces on the test host).
Needs root, Debian's mininet and the suite's tools, and the faucet
1.10.12 source distribution with its venv under target/faucet-suite
(scripts/test.sh prepares all of them); skips saying which is missing
otherwise.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "faucet-suite.sh"
SUITE = ROOT / "target" / "faucet-suite"
SMOKE = ["FaucetUntaggedTest", "FaucetUntaggedApplyMeterTest"]
TOOLS = ["mn", "ovs-vswitchd", "ovsdb-server", "ebtables-nft", "tshark", "fping", "rdisc6", "ladvd", "exabgp", "nc",
         "lsof", "fuser", "tcpdump", "scapy"]


def prerequisites():
    if os.geteuid() != 0:
        return "needs root (namespaces, veths, Open vSwitch)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"the suite's tools are missing: {' '.join(missing)} (scripts/test.sh installs them)"
    venv = Path(os.environ.get("FAUCET_SUITE_VENV", SUITE / "venv"))
    if not (SUITE / "faucet-1.10.12" / "clib").is_dir() or not (venv / "bin" / "python").exists():
        return (f"no faucet 1.10.12 source distribution or venv under {SUITE} "
                "(scripts/test.sh, or bench/faucet-suite.sh --prepare, fetches them)")
    return None


@pytest.mark.timeout(1200)
def test_faucet_suite_smoke_subset_passes(fulmar_bin, tmp_path):
    why = prerequisites()
    if why:
        pytest.skip(why)
    report = tmp_path / "report.json"
    prefix = os.environ.get("FULMAR_E2E_PREFIX", "fe") + "s"
    smoke = list(SMOKE)
    env = dict(os.environ, FULMAR=str(fulmar_bin), FULMAR_E2E_PREFIX=prefix)
    r = subprocess.run([str(SCRIPT), "--tests", "(" + "|".join(smoke) + ")$", "--json", str(report)],
                       capture_output=True, text=True, env=env, timeout=1150)
    print(r.stdout[-6000:])
    assert report.exists(), f"no report (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    tests = json.loads(report.read_text())["tests"]
    ran = {t.split(".")[-2] for t in tests}
    assert ran == set(smoke), f"ran {sorted(ran)}, expected {sorted(smoke)}"
    bad = {t: v["status"] for t, v in tests.items() if v["status"] != "OK"}
    assert not bad, f"{bad}\n{r.stdout[-6000:]}"
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
