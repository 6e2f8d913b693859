"""Namespaces and veth pairs.

The standard topology: the switch's namespace PREFIXsw holds one end of
each veth pair (PREFIXs1, PREFIXs2, ...: OpenFlow port 1, 2, ...); host i
lives in namespace PREFIXh{i} with the other end PREFIXh{i}:

    ns PREFIXh1: PREFIXh1 10.0.0.1 == PREFIXs1 [port 1] SWITCH [port 2] PREFIXs2 == PREFIXh2 10.0.0.2 :ns PREFIXh2

Switches run inside PREFIXsw (a netdev-datapath ovs-vswitchd makes a tap
named "ovs-netdev" in its namespace, so each needs its own). Hosts also
carry 10.{i}.1.2/24 for the Linux IP forwarding runs (the switch side then
gets 10.{i}.1.1). Every host knows every other host's MAC statically, so
no ARP has to cross the switch. Offloads (TSO, GSO, GRO, TX checksum) are
off on every end: each frame is a real frame with its checksum, as on a
wire.
"""

import json
import subprocess

from .core import ExperimentError, sh


def host_mac(i):
    return f"02:00:00:00:{i:02x}:01"


def switch_mac(i):
    return f"02:00:00:00:{i:02x}:00"


def host_ip(i):
    return f"10.0.0.{i}"


def quiet(ns, dev, mtu):
    pre = f"ip netns exec {ns} " if ns else ""
    sh(f"{pre}ethtool -K {dev} tx off tso off gso off gro off", check=False)
    sh(f"{pre}sysctl -qw net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
    sh(f"ip {'-n ' + ns + ' ' if ns else ''}link set {dev} mtu {mtu} up")


class Topo:
    """The switch namespace and n hosts, one veth pair each."""

    def __init__(self, ctx, n_hosts=2, mtu=1500):
        self.ctx = ctx
        self.n = n_hosts
        self.mtu = mtu
        self.sw = ctx.name("sw")
        self.hosts = [ctx.name(f"h{i}") for i in range(1, n_hosts + 1)]

    def host_ns(self, i):
        return self.hosts[i - 1]

    def host_dev(self, i):
        return self.ctx.name(f"h{i}")

    def sw_dev(self, i):
        return self.ctx.name(f"s{i}")

    def netns(self, ns):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        sh(f"ip netns add {ns}")
        self.ctx.namespaces.append(ns)
        sh(f"ip -n {ns} link set lo up")
        sh(f"ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1", check=False)
        sh(f"ip netns exec {ns} sysctl -qw net.ipv6.conf.default.disable_ipv6=1", check=False)

    def build(self):
        self.netns(self.sw)
        for i in range(1, self.n + 1):
            ns, hd, sd = self.host_ns(i), self.host_dev(i), self.sw_dev(i)
            self.netns(ns)
            sh(f"ip link add {sd} netns {self.sw} type veth peer name {hd} netns {ns}")
            sh(f"ip -n {self.sw} link set {sd} address {switch_mac(i)}")
            sh(f"ip -n {ns} link set {hd} address {host_mac(i)}")
            quiet(self.sw, sd, self.mtu)
            quiet(ns, hd, self.mtu)
            sh(f"ip -n {ns} addr add {host_ip(i)}/24 dev {hd}")
            sh(f"ip -n {ns} addr add 10.{i}.1.2/24 dev {hd}")
            sh(f"ip netns exec {ns} sysctl -qw net.ipv4.conf.all.rp_filter=0", check=False)
            sh(f"ip netns exec {ns} sysctl -qw net.ipv4.conf.{hd}.rp_filter=0", check=False)
        for i in range(1, self.n + 1):
            for j in range(1, self.n + 1):
                if i != j:
                    sh(f"ip -n {self.host_ns(i)} neigh replace {host_ip(j)} lladdr {host_mac(j)} "
                       f"dev {self.host_dev(i)} nud permanent")
        return self

    def add_link(self, a, b):
        """A veth pair inside the switch namespace (bridge-to-bridge links)."""
        sh(f"ip -n {self.sw} link add {a} type veth peer name {b}")
        quiet(self.sw, a, self.mtu)
        quiet(self.sw, b, self.mtu)

    def set_mtu(self, mtu):
        self.mtu = mtu
        for i in range(1, self.n + 1):
            sh(f"ip -n {self.sw} link set {self.sw_dev(i)} mtu {mtu}")
            sh(f"ip -n {self.host_ns(i)} link set {self.host_dev(i)} mtu {mtu}")


def link_stats(ns, dev):
    """(rx_packets, tx_packets, rx_dropped, tx_dropped, rx_bytes) of a link."""
    r = subprocess.run(
        ["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev], capture_output=True, text=True
    )
    if r.returncode != 0:
        raise ExperimentError(f"no link {dev} in {ns}: {r.stderr.strip()}")
    s = json.loads(r.stdout)[0]["stats64"]
    return {
        "rx": s["rx"]["packets"],
        "tx": s["tx"]["packets"],
        "rx_dropped": s["rx"]["dropped"],
        "tx_dropped": s["tx"]["dropped"],
        "rx_bytes": s["rx"]["bytes"],
    }
