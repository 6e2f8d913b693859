"""Real controllers drive `fulmar run` and forward real traffic: two
network namespaces ping each other through fulmar while a controller
nobody here wrote decides what the switch does.

- os-ken's `simple_switch_13` (a MAC-learning switch: a table-miss flow to
  the controller, then a flow per learned destination). os-ken 3.x no
  longer ships its sample apps, so the app file comes unchanged from the
  os-ken 1.4.1 source distribution on PyPI (scripts/test.sh puts it in
  target/controller-apps/) and runs on os-ken 3.1.0 from .venv.
- Faucet (its own venv, .venv-faucet, made by scripts/test.sh): one VLAN
  with both ports untagged members; it programs its multi-table pipeline
  (VLAN push, source learning, destination lookup, flooding).

Both need root (namespaces, veths); skipped otherwise, and skipped with the
command to run when the controller is not installed. Each test checks that
pings pass both ways, that the controller saw the hosts, and that the
pings were forwarded by flows the controller installed (their counters in
fulmar's final report), not only by packet-outs.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctl_support import IP_A, IP_B, MAC_A, MAC_B, NS_A, NS_B, ROOT

SIMPLE_SWITCH_PORT = 6710
FAUCET_PORT = 6711
FAUCET_PROMETHEUS_PORT = 6712

FETCH_HINT = "scripts/test.sh fetches it (as root)"


def ping(ns, dst, count=5):
    if shutil.which("ping") is None:
        pytest.skip("no ping binary")
    return subprocess.run(
        ["ip", "netns", "exec", ns, "ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst],
        capture_output=True,
        text=True,
    )


def received(ping_result):
    m = re.search(r"(\d+) received", ping_result.stdout)
    return int(m.group(1)) if m else 0


def flow_lines(report):
    """(n_packets, flow text) for each flow in fulmar's final report."""
    return [(int(n), rest) for n, rest in re.findall(r"n_packets=(\d+) n_bytes=\d+ (\S+)", report)]


def ping_both_ways(ctl, sw):
    # The first exchange teaches the controller both hosts (ARP, then
    # ICMP); losses are allowed while it learns.
    r = ping(NS_A, IP_B)
    assert received(r) >= 1, f"no reply through the switch:\n{r.stdout}{r.stderr}\ncontroller:\n{ctl.text()}"
    # Learned now: every ping passes, both ways.
    for ns, dst in ((NS_A, IP_B), (NS_B, IP_A)):
        r = ping(ns, dst)
        assert received(r) == 5, f"{ns} -> {dst}:\n{r.stdout}\ncontroller:\n{ctl.text()}"


def simple_switch_13_app():
    env = os.environ.get("SIMPLE_SWITCH_13")
    if env:
        return env
    p = subprocess.run([sys.executable, "-c", "import os_ken.app.simple_switch_13"], capture_output=True)
    if p.returncode == 0:
        return "os_ken.app.simple_switch_13"
    f = ROOT / "target" / "controller-apps" / "simple_switch_13.py"
    if f.exists():
        return str(f)
    pytest.skip(f"os-ken's simple_switch_13 app not found ({f}); {FETCH_HINT}")


def test_os_ken_simple_switch_13_forwards_pings(fct_net, controllers, fulmar_switch, tmp_path):
    app = simple_switch_13_app()
    manager = Path(sys.executable).parent / "osken-manager"
    if not manager.exists():
        pytest.skip(f"no osken-manager next to {sys.executable}")
    ctl = controllers(
        [str(manager), "--ofp-tcp-listen-port", str(SIMPLE_SWITCH_PORT), app],
        SIMPLE_SWITCH_PORT,
        tmp_path / "os-ken.log",
    )
    sw = fulmar_switch("--controller", f"tcp:127.0.0.1:{SIMPLE_SWITCH_PORT}")
    ping_both_ways(ctl, sw)
    rc, out, err = sw.stop()
    assert rc == 0, err
    log = ctl.text()
    # simple_switch_13 logs "packet in DPID SRC DST IN_PORT".
    assert re.search(rf"packet in 1 {MAC_A} \S+ 1", log), log
    assert re.search(rf"packet in 1 {MAC_B} \S+ 2", log), log
    flows = flow_lines(out)
    # Its table-miss flow, and learned flows that carried the pings.
    assert any(f.startswith("table=0,priority=0,") and "CONTROLLER" in f for _, f in flows), out
    learned = {dst: n for n, f in flows for dst in (MAC_A, MAC_B) if f"eth_dst={dst}" in f and "priority=1," in f}
    assert learned.get(MAC_A, 0) >= 5 and learned.get(MAC_B, 0) >= 5, out


FAUCET_YAML = """\
vlans:
  office:
    vid: 100
dps:
  fulmar:
    dp_id: 1
    hardware: "Open vSwitch"
    interfaces:
      1:
        native_vlan: office
      2:
        native_vlan: office
"""


def faucet_venv():
    venv = Path(os.environ.get("FAUCET_VENV", ROOT / ".venv-faucet"))
    python = venv / "bin" / "python"
    manager = venv / "bin" / "osken-manager"
    if not python.exists() or not manager.exists():
        pytest.skip(
            f"Faucet venv not found ({venv}); scripts/test.sh makes it (as root), or: "
            "python3 -m venv .venv-faucet && .venv-faucet/bin/pip install faucet==1.10.12"
        )
    if subprocess.run([str(python), "-c", "import faucet"], capture_output=True).returncode != 0:
        pytest.skip(f"{venv} has no faucet package")
    return manager


def test_faucet_vlan_forwards_pings(fct_net, controllers, fulmar_switch, tmp_path):
    manager = faucet_venv()
    config = tmp_path / "faucet.yaml"
    config.write_text(FAUCET_YAML)
    env = dict(
        os.environ,
        FAUCET_CONFIG=str(config),
        FAUCET_LOG=str(tmp_path / "faucet.log"),
        FAUCET_EXCEPTION_LOG=str(tmp_path / "faucet_exception.log"),
        FAUCET_PROMETHEUS_ADDR="127.0.0.1",
        FAUCET_PROMETHEUS_PORT=str(FAUCET_PROMETHEUS_PORT),
    )
    ctl = controllers(
        [str(manager), "--ofp-tcp-listen-port", str(FAUCET_PORT), "faucet.faucet"],
        FAUCET_PORT,
        tmp_path / "faucet.out",
        env=env,
    )
    sw = fulmar_switch("--controller", f"tcp:127.0.0.1:{FAUCET_PORT}")
    # Faucet programs the datapath once it has the port descriptions.
    faucet_log = tmp_path / "faucet.log"
    deadline = time.time() + 20
    while time.time() < deadline:
        if faucet_log.exists() and "Port 2 (2) configured" in faucet_log.read_text():
            break
        time.sleep(0.2)
    ping_both_ways(ctl, sw)
    rc, out, err = sw.stop()
    assert rc == 0, err
    log = faucet_log.read_text()
    assert f"L2 learned on Port 1 {MAC_A}" in log, log
    assert f"L2 learned on Port 2 {MAC_B}" in log, log
    exc = tmp_path / "faucet_exception.log"
    assert not exc.exists() or not exc.read_text().strip(), exc.read_text()
    flows = flow_lines(out)
    # Untagged in: VLAN 100 pushed (vlan_vid 0x1064 = present bit | 100).
    pushed = [n for n, f in flows if f.startswith("table=0,") and "set_field:0x1064->vlan_vid" in f]
    assert len(pushed) == 2 and min(pushed) >= 5, out
    # Learned destinations: the eth_dst table pops the tag and outputs.
    for mac, port in ((MAC_A, 1), (MAC_B, 2)):
        n = [n for n, f in flows if f"eth_dst={mac}," in f and f.endswith(f"pop_vlan,output:{port}")]
        assert n and n[0] >= 5, out
