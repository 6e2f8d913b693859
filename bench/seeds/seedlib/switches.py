"""The switches under test, all started inside the topology's switch
namespace on the same veths: fulmar, Open vSwitch (userspace netdev
datapath, `ovs-vswitchd --disable-system`, its own ovsdb-server and run
directory), the Linux bridge and Linux IP forwarding.

fulmar and Open vSwitch take the same flows (ovs-ofctl text, table 0 when
no table is named) and are both driven over their OpenFlow management
sockets (unix:DIR/BRIDGE.mgmt) with ovs-ofctl or seedlib.ofclient, so the
control path is the same for both.
"""

import json
import os
import signal
import time
from pathlib import Path

from .core import ExperimentError, sh
from .topo import host_mac, switch_mac


def pid_alive(pid):
    """Whether pid runs (a zombie does not: detached daemons may be left
    unreaped where PID 1 does not reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


class Switch:
    kind = "?"
    label = "?"
    cpus = None
    mgmt = None  # unix socket path of the OpenFlow management channel

    def start(self, flows=""):
        raise NotImplementedError

    def stop(self):
        raise NotImplementedError

    def pid(self):
        return None

    def rss_kib(self):
        p = self.pid()
        return rss_kib(p) if p else None

    def add_flows(self, text):
        f = self.ctx.work / f"{self.label}-add.flows"
        f.write_text(text)
        sh(f"ovs-ofctl -O OpenFlow13 add-flows unix:{self.mgmt} {f}", timeout=900)

    def replace_flows(self, text):
        """Deletes every flow, then adds these."""
        sh(f"ovs-ofctl -O OpenFlow13 del-flows unix:{self.mgmt}", timeout=300)
        if text.strip():
            self.add_flows(text)


class Fulmar(Switch):
    """`fulmar run --config` with a generated configuration."""

    kind = "fulmar"

    def __init__(self, ctx, topo, label="fulmar", mode="run-to-completion", workers=1,
                 ports=None, bridges=None, patch_links=(), cpus=None, capacity=None,
                 dataplane=None, priority_classes=(), args=()):
        self.ctx, self.topo, self.label = ctx, topo, label
        self.mode, self.workers = mode, workers
        self.cpus = cpus if cpus is not None else ctx.switch_cpus(1)
        self.capacity = capacity
        self.dataplane = dict(dataplane or {})
        self.priority_classes = list(priority_classes)
        self.args = list(args)
        self.dir = ctx.work / label
        self.dir.mkdir(parents=True, exist_ok=True)
        brname = ctx.name("br")
        if bridges is None:
            ports = ports or [(i, topo.sw_dev(i), "afpacket") for i in range(1, topo.n + 1)]
            bridges = [{"name": brname, "ports": ports}]
        self.bridges = bridges
        self.patch_links = list(patch_links)
        self.bridge = bridges[0]["name"]
        self.mgmt = str(self.dir / f"{self.bridge}.mgmt")
        self.ctl = str(self.dir / "ctl")
        self.proc = None

    def mgmt_of(self, bridge):
        return str(self.dir / f"{bridge}.mgmt")

    def config(self, flows_by_bridge):
        q = json.dumps
        lines = ["[dataplane]", f"mode = {q(self.mode)}", f"worker_threads = {self.workers}"]
        for k, v in self.dataplane.items():
            lines.append(f"{k} = {q(v)}")
        for pc in self.priority_classes:
            lines.append("[[dataplane.priority_class]]")
            for k, v in pc.items():
                lines.append(f"{k} = {q(v)}")
        for b in self.bridges:
            name = b["name"]
            lines += ["", "[[bridges]]", f"name = {q(name)}", 'fail_mode = "secure"']
            text = flows_by_bridge.get(name, "")
            # fulmar's tables have no limit below what memory holds by
            # default; a run that studies a configured limit sets one.
            if self.capacity:
                lines.append(f"flow_table_capacity = {self.capacity}")
            ff = self.dir / f"{name}.flows"
            ff.write_text(text)
            lines.append(f"flows_file = {q(str(ff))}")
            for number, iface, backend in b["ports"]:
                lines += ["[[bridges.ports]]", f"port = {number}", f"backend = {q(backend)}"]
                if backend != "patch":
                    lines.append(f"interface = {q(iface)}")
        for a, b in self.patch_links:
            lines += ["", "[[patch_links]]", f"a = {q(a)}", f"b = {q(b)}"]
        return "\n".join(lines) + "\n"

    def start(self, flows="", flows_by_bridge=None, timeout=300):
        fb = dict(flows_by_bridge or {})
        if flows:
            fb[self.bridge] = flows
        cfg = self.dir / "fulmar.toml"
        cfg.write_text(self.config(fb))
        self.err = self.dir / "stderr.txt"
        self.out = self.dir / "stdout.txt"
        argv = [self.ctx.fulmar, "run", "--config", str(cfg), "--ctl", self.ctl,
                "--mgmt-dir", str(self.dir), "--log-level", "error", *self.args]
        self.proc = self.ctx.spawn(argv, ns=self.topo.sw, cpus=self.cpus, stdout=self.out,
                                   stderr=self.err, name=self.label)
        deadline = time.monotonic() + timeout
        while True:
            text = self.err.read_text(errors="replace") if self.err.exists() else ""
            if "running bridges" in text:
                break
            if self.proc.poll() is not None:
                raise ExperimentError(f"{self.label} exited ({self.proc.returncode}) at start:\n{text[-1500:]}")
            if time.monotonic() > deadline:
                raise ExperimentError(f"{self.label} did not start within {timeout} s")
            time.sleep(0.05)
        return self

    def pid(self):
        # taskset and ip netns exec exec() into fulmar: the same pid.
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ctl_json(self, *args):
        r = sh(f"{self.ctx.fulmar} ctl -t {self.ctl} {' '.join(args)}", timeout=60)
        return json.loads(r.stdout)

    def stats(self):
        return self.ctl_json("stats", "--json")

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is not None:
            code = self.proc.returncode
            self.proc = None
            raise ExperimentError(f"{self.label} died during the run ({code}): "
                                  f"{self.err.read_text(errors='replace')[-1500:]}")
        # SIGTERM prints every flow's counters: a second or more with 1M
        # flows; nothing here needs them.
        self.ctx.stop(self.proc, signal.SIGTERM, timeout=30)
        self.proc = None


class Ovs(Switch):
    """Open vSwitch 3.x, userspace (netdev) datapath, in the switch namespace."""

    kind = "ovs"

    def __init__(self, ctx, topo, label="ovs", ports=None, bridges=None, patches=(), cpus=None):
        self.ctx, self.topo, self.label = ctx, topo, label
        self.cpus = cpus if cpus is not None else ctx.switch_cpus(1)
        self.dir = ctx.work / label
        self.dir.mkdir(parents=True, exist_ok=True)
        brname = ctx.name("br")
        if bridges is None:
            ports = ports or [(i, topo.sw_dev(i)) for i in range(1, topo.n + 1)]
            bridges = [{"name": brname, "ports": ports}]
        self.bridges = bridges
        self.patches = list(patches)  # ((br, port, name), (br, port, name))
        self.bridge = bridges[0]["name"]
        self.mgmt = str(self.dir / f"{self.bridge}.mgmt")
        self.vpid = None

    def mgmt_of(self, bridge):
        return str(self.dir / f"{bridge}.mgmt")

    def env(self):
        d = str(self.dir)
        return f"OVS_RUNDIR={d} OVS_DBDIR={d} OVS_LOGDIR={d} OVS_PKGDATADIR=/usr/share/openvswitch"

    def vsctl(self, args):
        sh(f"{self.env()} ovs-vsctl --db=unix:{self.dir}/db.sock --timeout=20 {args}", timeout=60)

    def start(self, flows="", flows_by_bridge=None, timeout=300):
        d = self.dir
        for f in ("conf.db", "db.sock"):
            (d / f).unlink(missing_ok=True)
        e = self.env()
        sh(f"ovsdb-tool create {d}/conf.db /usr/share/openvswitch/vswitch.ovsschema")
        sh(f"{e} ovsdb-server {d}/conf.db --remote=punix:{d}/db.sock --pidfile={d}/ovsdb.pid "
           f"--log-file={d}/ovsdb.log --detach")
        self.ctx.pidfiles.append(d / "ovsdb.pid")
        sh(f"{e} ovs-vsctl --db=unix:{d}/db.sock --no-wait init")
        sh(f"{e} taskset -c {self.cpus} ip netns exec {self.topo.sw} ovs-vswitchd unix:{d}/db.sock "
           f"--disable-system --pidfile={d}/vswitchd.pid --log-file={d}/vswitchd.log --detach")
        self.ctx.pidfiles.append(d / "vswitchd.pid")
        self.vpid = int((d / "vswitchd.pid").read_text().strip())
        for b in self.bridges:
            br = b["name"]
            cmd = (f"add-br {br} -- set bridge {br} datapath_type=netdev protocols=OpenFlow13 "
                   f"fail_mode=secure")
            for number, iface in b["ports"]:
                cmd += f" -- add-port {br} {iface} -- set interface {iface} ofport_request={number}"
            self.vsctl(cmd)
        for (b1, p1, n1), (b2, p2, n2) in self.patches:
            self.vsctl(
                f"add-port {b1} {n1} -- set interface {n1} type=patch options:peer={n2} ofport_request={p1} "
                f"-- add-port {b2} {n2} -- set interface {n2} type=patch options:peer={n1} ofport_request={p2}"
            )
        fb = dict(flows_by_bridge or {})
        if flows:
            fb[self.bridge] = flows
        for br, text in fb.items():
            sh(f"ovs-ofctl -O OpenFlow13 del-flows unix:{self.mgmt_of(br)}")
            if text.strip():
                f = d / f"{br}.flows"
                f.write_text(text)
                sh(f"ovs-ofctl -O OpenFlow13 add-flows unix:{self.mgmt_of(br)} {f}", timeout=timeout)
        return self

    def pid(self):
        return self.vpid

    def alive(self):
        return self.vpid is not None and pid_alive(self.vpid)

    def stop(self):
        d = self.dir
        if self.vpid and not self.alive():
            self.vpid = None
            raise ExperimentError(f"{self.label}: ovs-vswitchd died during the run (see {d}/vswitchd.log)")
        # ovs-vswitchd takes seconds to exit on SIGTERM here; nothing of it
        # is kept, so it gets half a second.
        for name in ("vswitchd", "ovsdb"):
            pf = d / f"{name}.pid"
            try:
                pid = int(pf.read_text().strip())
                os.kill(pid, signal.SIGTERM)
                for _ in range(10):
                    if not pid_alive(pid):
                        break
                    time.sleep(0.05)
                else:
                    os.kill(pid, signal.SIGKILL)
                    for _ in range(100):
                        if not pid_alive(pid):
                            break
                        time.sleep(0.02)
            except (OSError, ValueError):
                pass
            if pf in self.ctx.pidfiles:
                self.ctx.pidfiles.remove(pf)
        # A netdev bridge leaves its tap behind when killed.
        sh(f"ip -n {self.topo.sw} link del ovs-netdev", check=False)
        for b in self.bridges:
            sh(f"ip -n {self.topo.sw} link del {b['name']}", check=False)
        self.vpid = None


class LinuxBridge(Switch):
    """The Linux bridge in the switch namespace (no STP, no netfilter)."""

    kind = "linux-bridge"

    def __init__(self, ctx, topo, label="linux-bridge", ports=None):
        self.ctx, self.topo, self.label = ctx, topo, label
        self.cpus = "softirq (the sender's CPU)"
        self.br = ctx.name("lbr")
        self.ports = ports or list(range(1, topo.n + 1))

    def start(self, flows="", fdb=()):
        ns = self.topo.sw
        sh(f"ip -n {ns} link add {self.br} type bridge stp_state 0 ageing_time 360000")
        sh(f"ip netns exec {ns} sysctl -qw net.bridge.bridge-nf-call-iptables=0", check=False)
        sh(f"ip netns exec {ns} sysctl -qw net.bridge.bridge-nf-call-arptables=0", check=False)
        for i in self.ports:
            sh(f"ip -n {ns} link set {self.topo.sw_dev(i)} master {self.br}")
        sh(f"ip -n {ns} link set {self.br} up")
        # The hosts' MACs, as learning would find them.
        lines = [f"fdb replace {host_mac(i)} dev {self.topo.sw_dev(i)} master static" for i in self.ports]
        lines += [f"fdb replace {mac} dev {self.topo.sw_dev(port)} master static" for mac, port in fdb]
        self.batch(lines)
        return self

    def batch(self, lines):
        f = self.ctx.work / "bridge.batch"
        f.write_text("\n".join(lines) + "\n")
        sh(f"ip netns exec {self.topo.sw} bridge -batch {f}", timeout=600)

    def stop(self):
        ns = self.topo.sw
        for i in self.ports:
            sh(f"ip -n {ns} link set {self.topo.sw_dev(i)} nomaster", check=False)
        sh(f"ip -n {ns} link del {self.br}", check=False)


class IpForward(Switch):
    """Linux IPv4 forwarding in the switch namespace: port i is 10.{i}.1.1/24,
    host i 10.{i}.1.2 (static neighbours both ways), hosts route the
    other hosts' 10.{j}.1.0/24 through the switch."""

    kind = "linux-ip"

    def __init__(self, ctx, topo, label="linux-ip-forward", ports=None):
        self.ctx, self.topo, self.label = ctx, topo, label
        self.cpus = "softirq (the sender's CPU)"
        self.ports = ports or list(range(1, topo.n + 1))

    def start(self, flows="", routes=()):
        ns, t = self.topo.sw, self.topo
        sh(f"ip netns exec {ns} sysctl -qw net.ipv4.ip_forward=1")
        sh(f"ip netns exec {ns} sysctl -qw net.ipv4.conf.all.rp_filter=0", check=False)
        for i in self.ports:
            sh(f"ip netns exec {ns} sysctl -qw net.ipv4.conf.{t.sw_dev(i)}.rp_filter=0", check=False)
            sh(f"ip -n {ns} addr add 10.{i}.1.1/24 dev {t.sw_dev(i)}")
            # The host, and the addresses the generators aim at behind it.
            for last in (2, 99):
                sh(f"ip -n {ns} neigh replace 10.{i}.1.{last} lladdr {host_mac(i)} dev {t.sw_dev(i)} nud permanent")
            for j in self.ports:
                if j != i:
                    sh(f"ip -n {t.host_ns(i)} route replace 10.{j}.1.0/24 via 10.{i}.1.1")
                    sh(f"ip -n {t.host_ns(i)} neigh replace 10.{i}.1.1 lladdr {switch_mac(i)} "
                       f"dev {t.host_dev(i)} nud permanent")
        if routes:
            f = self.ctx.work / "routes.batch"
            f.write_text("".join(f"route replace {net} via {via}\n" for net, via in routes))
            sh(f"ip -n {ns} -batch {f}", timeout=600)
        return self

    def stop(self):
        ns, t = self.topo.sw, self.topo
        sh(f"ip netns exec {ns} sysctl -qw net.ipv4.ip_forward=0", check=False)
        for i in self.ports:
            sh(f"ip -n {ns} addr flush dev {t.sw_dev(i)}", check=False)
            sh(f"ip -n {ns} neigh flush dev {t.sw_dev(i)}", check=False)
            for j in self.ports:
                if j != i:
                    sh(f"ip -n {t.host_ns(i)} route del 10.{j}.1.0/24", check=False)


def port_flows(pairs):
    """Static flows forwarding in_port a -> b for each (a, b)."""
    return "".join(f"table=0,priority=10,in_port={a},actions=output:{b}\n" for a, b in pairs)


def wait_file(path, timeout=10):
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
