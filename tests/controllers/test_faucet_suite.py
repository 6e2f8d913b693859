"""A smoke subset of Faucet's own integration suite with fulmar as the
hardware switch under test (bench/faucet-suite.sh runs the whole suite;
docs/guide.md, "Faucet's integration suite", says how it is wired).

The subset: untagged and tagged basics, an ACL, a meter and a group test.
Each class must pass. The tagged class runs only where the kernel can make
802.1Q interfaces (the suite's tagged test hosts are VLAN interfaces; a
kernel without the 8021q module cannot make them, whatever the switch). Needs root, Debian's mininet and the suite's tools,
and the faucet 1.10.12 source distribution with its venv under
target/faucet-suite (scripts/test.sh prepares all of them); skips saying
which is missing otherwise.
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
SMOKE = ["FaucetUntaggedTest", "FaucetTaggedTest", "FaucetUntaggedACLTest", "FaucetUntaggedApplyMeterTest",
         "FaucetGroupTableTest"]
TOOLS = ["mn", "ovs-vswitchd", "ovsdb-server", "ebtables-nft", "tshark", "fping", "rdisc6", "ladvd", "exabgp", "nc",
         "lsof", "fuser", "tcpdump", "scapy"]


def kernel_has_vlans(prefix):
    """Whether this kernel makes 802.1Q interfaces (tried in a scratch
    namespace)."""
    ns = f"{prefix}-vlanprobe"
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
        subprocess.run(["ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"], check=True,
                       capture_output=True)
        r = subprocess.run(["ip", "-n", ns, "link", "add", "link", "v0", "name", "v0.100", "type", "vlan", "id", "100"],
                           capture_output=True)
        return r.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


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
    if not kernel_has_vlans(prefix):
        smoke.remove("FaucetTaggedTest")
        print("FaucetTaggedTest left out: this kernel makes no 802.1Q interfaces (the 8021q module)")
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
