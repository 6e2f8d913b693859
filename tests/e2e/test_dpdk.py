"""End-to-end over DPDK ports (a fulmar built with `--features dpdk`; the
tests build one when libdpdk-dev is installed, and are skipped otherwise).

- ping between the two namespaces through fulmar on two `net_af_packet`
  vdevs bound to the switch's veths, in both thread modes; run to
  completion with two workers reads each port through two receive queues
  (the vdev's `qpairs=2`, spread by the kernel's packet fanout hash), one
  per worker, and `fulmar ctl stats` says so;
- the seed-001 gateway rewrites (VLAN -> MPLS, MPLS -> VLAN, a VLAN
  rewrite, a miss, a flow with two outputs) through `net_pcap` vdevs, a
  pcap in and one pcap out per output port, checked packet by packet and
  in order against what `fulmar trace` says the same flows do with the
  same pcap.

The EAL runs without huge pages (`--no-huge -m 256`), PCI scan or shared
files, so nothing beyond root and the vdevs is needed.
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from scapy.contrib.mpls import MPLS
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.utils import rdpcap, wrpcap

from e2e_support import NS_A, ROOT, SW_A, SW_B, Switch, in_ns

EAL = '["-l", "0", "--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--no-telemetry", "--log-level", "lib.eal:error"]'


def has_dpdk(path):
    """Whether the binary was linked against DPDK."""
    try:
        with open(path, "rb") as f:
            return b"rte_eal_init" in f.read()
    except OSError:
        return False


@pytest.fixture(scope="session")
def dpdk_bin(fulmar_bin):
    if has_dpdk(fulmar_bin):
        return fulmar_bin
    if os.environ.get("FULMAR"):
        pytest.skip(f"$FULMAR ({fulmar_bin}) was built without --features dpdk")
    if shutil.which("pkg-config") is None or subprocess.run(["pkg-config", "--exists", "libdpdk"]).returncode != 0:
        pytest.skip("libdpdk-dev is not installed (scripts/test.sh installs it)")
    subprocess.run(["cargo", "build", "-q", "-p", "fulmar", "--features", "dpdk"], cwd=ROOT, check=True)
    path = str(ROOT / "target" / "debug" / "fulmar")
    assert has_dpdk(path)
    return path


def ctl(bin, sock, *args):
    r = subprocess.run([bin, "ctl", "-t", sock, *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def dpdk_config(mode, dataplane, bridge, ports):
    """A configuration: the DPDK EAL, the dataplane `mode` (and the
    `dataplane` lines), bridge br0 with `bridge` lines and DPDK ports,
    each (port, interface, devargs)."""
    text = f"""
[dpdk]
eal_args = {EAL}

[dataplane]
mode = "{mode}"
{dataplane}

[[bridges]]
name = "br0"
{bridge}
"""
    for port, interface, devargs in ports:
        text += f"""
[[bridges.ports]]
port = {port}
interface = "{interface}"
backend = "dpdk"
dpdk_devargs = "{devargs}"
"""
    return text


def start(bin, tmp_path, config):
    cfg = tmp_path / "fulmar.toml"
    cfg.write_text(config)
    sock = str(tmp_path / "fulmar.ctl")
    sw = Switch([bin, "run", "--config", str(cfg), "--ctl", sock, "--mgmt-dir", str(tmp_path)])
    return sw, sock


@pytest.mark.parametrize("mode", ["run-to-completion", "rx-worker-tx"])
def test_ping_through_dpdk_af_packet_ports(net, dpdk_bin, tmp_path, mode):
    if shutil.which("ping") is None:
        pytest.skip("no ping binary")
    if mode == "run-to-completion":
        threads, qpairs = "worker_threads = 2", 2
    else:
        threads, qpairs = "rx_threads = 1\nworker_threads = 1\ntx_threads = 1", 1
    sw, sock = start(
        dpdk_bin,
        tmp_path,
        dpdk_config(mode, threads,
                    'flows = ["priority=1,in_port=1,actions=output:2", "priority=1,in_port=2,actions=output:1"]',
                    [(1, "dpa", f"net_af_packet0,iface={SW_A},qpairs={qpairs}"),
                     (2, "dpb", f"net_af_packet1,iface={SW_B},qpairs={qpairs}")]),
    )
    try:
        r = in_ns(NS_A, "ping", "-n", "-q", "-c", "5", "-i", "0.2", "-W", "2", "10.9.0.2")
        assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr + "".join(sw.err_lines)
        stats = ctl(dpdk_bin, sock, "stats")
        report = json.loads(ctl(dpdk_bin, sock, "stats", "--json"))[0]
    finally:
        rc, out, err = sw.stop()
    assert rc == 0, err
    reads = [t["reads"] for t in report["threads"] if t["reads"]]
    if mode == "run-to-completion":
        # Each port's two queues, one per worker.
        assert sorted(reads) == [["1:q0", "2:q1"], ["1:q1", "2:q0"]], stats
    else:
        assert reads == [["1:q0", "2:q0"]], stats
    ports = {p["port"]: p for p in report["ports"]}
    # Five echo requests in, five replies back (ARP besides).
    assert ports[1]["rx_packets"] >= 5 and ports[2]["tx_packets"] >= 5, stats
    assert ports[2]["rx_packets"] >= 5 and ports[1]["tx_packets"] >= 5, stats


GATEWAY = [
    "priority=10,in_port=1,dl_vlan=10,actions=pop_vlan,push_mpls:0x8847,set_field:1010->mpls_label,output:2",
    "priority=10,in_port=1,dl_vlan=20,actions=pop_vlan,push_mpls:0x8847,set_field:1020->mpls_label,set_mpls_ttl:9,output:3",
    "priority=10,in_port=1,dl_vlan=30,actions=set_field:4127->vlan_vid,output:2",
    "priority=10,in_port=1,mpls,mpls_label=500,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4196->vlan_vid,output:3",
    "priority=10,in_port=1,mpls,mpls_label=501,actions=pop_mpls:0x0800,push_vlan:0x8100,set_field:4197->vlan_vid,output:2,output:3",
]


def gateway_frames():
    frames = []
    for i in range(120):
        pad = b"g" * [4, 18, 80, 900][i % 4]
        ip = IP(src="10.0.0.1", dst=f"10.1.{i % 7}.{i}", ttl=64) / UDP(sport=1000 + i, dport=2000) / pad
        eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        kind = i % 6
        if kind < 4:
            # VLAN 10, 20, 30 match; 40 misses.
            frames.append(eth / Dot1Q(vlan=[10, 20, 30, 40][kind]) / ip)
        else:
            frames.append(eth / MPLS(label=[500, 501][kind - 4], ttl=33) / ip)
    return frames


@pytest.mark.parametrize("mode", ["run-to-completion", "rx-worker-tx"])
def test_gateway_through_net_pcap_matches_fulmar_trace(dpdk_bin, tmp_path, mode):
    if os.geteuid() != 0:
        pytest.skip("DPDK needs root")
    frames = gateway_frames()
    pin = tmp_path / "in.pcap"
    wrpcap(str(pin), frames)
    flows = tmp_path / "gw.flows"
    flows.write_text("\n".join(GATEWAY) + "\n")
    # What the pipeline says, per output port in order.
    r = subprocess.run(
        [dpdk_bin, "trace", "--flows", str(flows), "--in-port", "1", "--pcap", str(pin), "--json", "--ports", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    expected = {2: [], 3: []}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        if isinstance(o.get("port"), int):
            expected[o["port"]].append(bytes.fromhex(o["packet"]))
    assert len(expected[2]) == 60 and len(expected[3]) == 60, {k: len(v) for k, v in expected.items()}
    outs = {n: tmp_path / f"out{n}.pcap" for n in (2, 3)}
    sw, sock = start(
        dpdk_bin,
        tmp_path,
        dpdk_config(mode, "", f'flows_file = "{flows}"',
                    [(1, "wan", f"net_pcap0,rx_pcap={pin}"),
                     (2, "dc2", f"net_pcap1,tx_pcap={outs[2]}"),
                     (3, "dc3", f"net_pcap2,tx_pcap={outs[3]}")]),
    )
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            report = json.loads(ctl(dpdk_bin, sock, "stats", "--json"))[0]
            ports = {p["port"]: p for p in report["ports"]}
            # Each thread publishes its own counters every few
            # milliseconds: the sender's may show the last burst before
            # the reader's does, so wait for both.
            sent = ports[2]["tx_packets"] + ports[3]["tx_packets"]
            if sent >= 120 and ports[1]["rx_packets"] >= len(frames):
                break
            time.sleep(0.2)
    finally:
        # Closing the devices writes the pcaps out.
        rc, out, err = sw.stop()
    assert rc == 0, err
    assert ports[1]["rx_packets"] == len(frames), report
    for n in (2, 3):
        got = [bytes(p) for p in rdpcap(str(outs[n]))]
        assert len(got) == len(expected[n]), f"port {n}: {len(got)} frames, trace says {len(expected[n])}"
        for i, (g, e) in enumerate(zip(got, expected[n])):
            assert g == e, f"port {n} frame {i}:\n got      {g.hex()}\n expected {e.hex()}"
    # The miss is counted, not silently lost.
    assert "no_match=20" in out, out
