"""A fabric: three `fulmar run` switches under one Faucet with stacking
(several datapaths joined by stack links that Faucet watches with LLDP),
a host on each in its own network namespace, all in one VLAN.

    h1 --1-[ sw1 ]-3 ==== 3-[ sw2 ]-4 ==== 3-[ sw3 ]-1-- h3
                               |1
                               h2

Every host pings every other; then the middle switch is killed (SIGKILL:
nothing saved), h1 and h3 lose each other, it is started again, rejoins
the stack, and every host pings every other again.

Names come from FULMAR_E2E_PREFIX (default "fe") with an "f" after it.
Needs root and the Faucet venv (scripts/test.sh makes it).
"""

import os
import re
import subprocess
import time

import pytest

from ctl_support import Switch, sh
from test_controllers import faucet_venv

P = os.environ.get("FULMAR_E2E_PREFIX", "fe") + "f"
FAUCET_PORT = 6713
PROM_PORT = 6714
HOSTS = {1: "10.9.8.1", 2: "10.9.8.2", 3: "10.9.8.3"}
# (switch, port) <-> (switch, port) stack links.
LINKS = [((1, 3), (2, 3)), ((2, 4), (3, 3))]

FAUCET_YAML = """\
vlans:
  fabric:
    vid: 200
dps:
  sw1:
    dp_id: 1
    hardware: "Open vSwitch"
    stack:
      priority: 1
    interfaces:
      1:
        native_vlan: fabric
      3:
        stack: {dp: sw2, port: 3}
  sw2:
    dp_id: 2
    hardware: "Open vSwitch"
    interfaces:
      1:
        native_vlan: fabric
      3:
        stack: {dp: sw1, port: 3}
      4:
        stack: {dp: sw3, port: 3}
  sw3:
    dp_id: 3
    hardware: "Open vSwitch"
    interfaces:
      1:
        native_vlan: fabric
      3:
        stack: {dp: sw2, port: 4}
"""


def host_ns(n):
    return f"{P}-h{n}"


def port_dev(sw, port):
    return f"{P}{sw}p{port}"


def cleanup():
    for n in HOSTS:
        sh("ip", "netns", "del", host_ns(n), check=False)
        sh("ip", "link", "del", port_dev(n, 1), check=False)
    for (a, _) in LINKS:
        sh("ip", "link", "del", port_dev(*a), check=False)


@pytest.fixture
def fabric_net():
    cleanup()
    try:
        for n, ip in HOSTS.items():
            ns, dev = host_ns(n), port_dev(n, 1)
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", ns, "link", "set", "eth0", "address", f"02:00:00:00:08:0{n}", "up")
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        for a, b in LINKS:
            sh("ip", "link", "add", port_dev(*a), "type", "veth", "peer", "name", port_dev(*b))
        for sw in (1, 2, 3):
            for port in (1, 3, 4):
                dev = port_dev(sw, port)
                if os.path.exists(f"/sys/class/net/{dev}"):
                    sh("ip", "link", "set", dev, "up")
                    sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
        yield
    finally:
        cleanup()


def ports_of(sw):
    return [p for p in (1, 3, 4) if os.path.exists(f"/sys/class/net/{port_dev(sw, p)}")]


def start_switch(fulmar_bin, tmp_path, sw):
    cfg = tmp_path / f"sw{sw}.toml"
    cfg.write_text(
        f'[[bridges]]\nname = "sw{sw}"\ndpid = {sw}\nfail_mode = "secure"\n'
        + "".join(f'[[bridges.ports]]\nport = {p}\ninterface = "{port_dev(sw, p)}"\n' for p in ports_of(sw))
        + f'[[bridges.controllers]]\ntarget = "tcp:127.0.0.1:{FAUCET_PORT}"\n'
    )
    return Switch([fulmar_bin, "run", "--config", str(cfg), "--ctl", str(tmp_path / f"sw{sw}.ctl"),
                   "--mgmt-dir", str(tmp_path), "--saved-tables", "none"])


def ping(src, dst_ip, count=3):
    r = subprocess.run(["ip", "netns", "exec", host_ns(src), "ping", "-n", "-c", str(count), "-i", "0.2", "-W", "1",
                        dst_ip], capture_output=True, text=True)
    m = re.search(r"(\d+) received", r.stdout)
    return int(m.group(1)) if m else 0


def all_pairs_ping(deadline_s, pairs=None):
    """Waits (up to deadline_s) until every pair's ping gets every reply;
    returns the pairs that never did."""
    pairs = pairs or [(a, b) for a in HOSTS for b in HOSTS if a != b]
    left = list(pairs)
    end = time.time() + deadline_s
    while left and time.time() < end:
        left = [(a, b) for a, b in left if ping(a, HOSTS[b]) < 3]
        if left:
            time.sleep(0.5)
    return left


def up_count(log, link):
    """How often Faucet logged stack port `link` ("swN Stack Port P") up."""
    return len(re.findall(rf"{link} state UP\b", log.read_text()))


def test_three_switches_under_faucet_stacking(fabric_net, fulmar_bin, controllers, tmp_path):
    manager = faucet_venv()
    config = tmp_path / "faucet.yaml"
    config.write_text(FAUCET_YAML)
    faucet_log = tmp_path / "faucet.log"
    env = dict(os.environ, FAUCET_CONFIG=str(config), FAUCET_LOG=str(faucet_log),
               FAUCET_EXCEPTION_LOG=str(tmp_path / "faucet_exception.log"),
               FAUCET_PROMETHEUS_ADDR="127.0.0.1", FAUCET_PROMETHEUS_PORT=str(PROM_PORT))
    ctl = controllers([str(manager), "--ofp-tcp-listen-port", str(FAUCET_PORT), "faucet.faucet"], FAUCET_PORT,
                      tmp_path / "faucet.out", env=env)
    switches = {}
    try:
        for sw in (1, 2, 3):
            switches[sw] = start_switch(fulmar_bin, tmp_path, sw)
        left = all_pairs_ping(60)
        assert not left, f"pairs that never pinged: {left}\n{faucet_log.read_text()[-4000:]}\n{ctl.text()[-2000:]}"
        # The traffic crossed stack links Faucet saw come up (LLDP both ways).
        for link in ("sw1 Stack Port 3", "sw2 Stack Port 3", "sw2 Stack Port 4", "sw3 Stack Port 3"):
            assert up_count(faucet_log, link) >= 1, faucet_log.read_text()[-4000:]

        # The middle switch dies: h1 and h3 lose each other.
        switches[2].proc.kill()
        switches[2].proc.wait()
        time.sleep(1)
        assert ping(1, HOSTS[3], count=2) == 0, "h1 reached h3 with the middle switch dead"

        # It comes back, rejoins the stack; every pair pings again.
        t = time.monotonic()
        switches[2] = start_switch(fulmar_bin, tmp_path, 2)
        left = all_pairs_ping(60)
        print(f"after the restart, every pair pinged within {time.monotonic() - t:.1f} s")
        assert not left, f"pairs that never pinged after the restart: {left}\n{faucet_log.read_text()[-4000:]}"
        # Faucet configured the new sw2 from cold: it rejoined as a datapath.
        log = faucet_log.read_text()
        assert log.count("sw2 Cold start configuring DP") == 2, log[-4000:]
        exc = tmp_path / "faucet_exception.log"
        assert not exc.exists() or not exc.read_text().strip(), exc.read_text()
    finally:
        for s in switches.values():
            if s.proc.poll() is None:
                rc, _, err = s.stop()
                assert rc == 0, err
