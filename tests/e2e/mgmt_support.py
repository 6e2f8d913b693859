"""What the management-protocol tests share: a private `ovsdb-server`
(`Ovsdb`), a private `snmpd` (`Snmpd`) with a trap sink (`TrapSink`),
`fulmar ctl` against a test's control socket, and free ports.

Imported by test_ovsdb.py, test_snmp.py, test_ofconfig.py and
test_mgmt_together.py (under this unique name, as e2e_support is)."""

import os
import re
import shutil
import socket
import subprocess
import threading
import xml.dom.minidom

import pytest

from e2e_support import sh, terminate, wait_for


def need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"needs {t}")


def ctl(fulmar_bin, tmp_path, *args):
    r = subprocess.run([fulmar_bin, "ctl", "-t", str(tmp_path / "ctl.sock"), *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"fulmar ctl {' '.join(args)}: {r.stderr}"
    return r.stdout


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# No MIB files are loaded: OIDs and values print numerically, and the
# tools print no warnings about missing MIBs.
ENV = dict(os.environ, MIBS="", MIBDIRS="/nonexistent")


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Snmpd:
    """A private snmpd: `master agentx` on DIR/agentx.sock, SNMP on
    127.0.0.1:PORT (community public read-only, private read-write), traps
    to 127.0.0.1:TRAP_PORT."""

    def __init__(self, tmp_path, trap_port, extra=("-I", "-ifTable,ifXTable,interface"), access=None, tcp=False):
        self.dir = tmp_path
        if tcp:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.sock = f"tcp:127.0.0.1:{s.getsockname()[1]}"
        else:
            self.sock = str(tmp_path / "agentx.sock")
        self.port = free_udp_port()
        self.conf = tmp_path / "snmpd.conf"
        self.conf.write_text(
            "master agentx\n"
            f"agentXSocket {self.sock}\n"
            "agentXTimeout 5\n"
            f"agentaddress udp:127.0.0.1:{self.port}\n"
            + (access or "rocommunity public 127.0.0.1\nrwcommunity private 127.0.0.1\n")
            + f"trap2sink 127.0.0.1:{trap_port} public\n"
        )
        self.extra = list(extra)
        (tmp_path / "persist").mkdir(exist_ok=True)
        self.proc = None
        self.start()

    def start(self):
        env = dict(ENV, SNMP_PERSISTENT_DIR=str(self.dir / "persist"))
        self.proc = subprocess.Popen(
            ["snmpd", "-f", "-C", "-c", str(self.conf), "-Lf", str(self.dir / "snmpd.log"), *self.extra],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        # Up when it answers sysUpTime.0.
        wait_for(lambda: self.get("1.3.6.1.2.1.1.3.0", check=False).returncode == 0,
                 timeout=10, what="snmpd to answer")

    def stop(self):
        terminate(self.proc)

    def run(self, tool, *args, community="public", check=True):
        r = subprocess.run(
            [tool, "-v2c", "-c", community, "-On", "-t", "2", "-r", "1", f"127.0.0.1:{self.port}", *args],
            capture_output=True, text=True, timeout=30, env=ENV,
        )
        if check:
            assert r.returncode == 0, f"{tool} {args}: {r.stdout}{r.stderr}"
        return r

    def get(self, *oids, check=True):
        return self.run("snmpget", *oids, check=check)

    def values(self, tool, *args):
        """{oid: value text} from snmpget/snmpwalk output ('.' and type
        prefix removed, strings unquoted)."""
        out = {}
        for line in self.run(tool, *args).stdout.splitlines():
            m = re.match(r"^\.([\d.]+) = (?:([\w-]+): )?(.*)$", line)
            if m:
                v = m.group(3).strip()
                if v.startswith('"') and v.endswith('"'):
                    v = v[1:-1]
                out[m.group(1)] = v
        return out


class TrapSink:
    """A UDP socket that keeps every datagram snmpd sends it."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.packets = []
        self.done = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done:
            try:
                self.packets.append(self.sock.recv(65535))
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self):
        self.done = True
        self.thread.join(timeout=2)
        self.sock.close()


class Ovsdb:
    """ovsdb-server on a fresh database in `d`, as a child process."""

    def __init__(self, d):
        need("ovsdb-server", "ovsdb-tool", "ovs-vsctl")
        self.dir = d
        self.db = d / "conf.db"
        self.sock = d / "db.sock"
        sh("ovsdb-tool", "create", str(self.db), "/usr/share/openvswitch/vswitch.ovsschema")
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["ovsdb-server", str(self.db), f"--remote=punix:{self.sock}",
             f"--unixctl={self.dir / 'ovsdb.ctl'}", "--no-chdir",
             f"--log-file={self.dir / 'ovsdb.log'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: self.sock.exists(), 10, "ovsdb-server's socket")

    def stop(self):
        terminate(self.proc)

    def vsctl(self, *args, ok=True, timeout=60):
        """`ovs-vsctl --timeout T` (waits for cur_cfg unless --no-wait). A
        switch that never brings cur_cfg up to date fails the call (exit
        status non-zero) after T; T is generous so that a slow machine does
        not."""
        r = subprocess.run(
            ["ovs-vsctl", f"--db=unix:{self.sock}", f"--timeout={timeout}", *args],
            capture_output=True, text=True, timeout=timeout + 10,
        )
        if ok:
            assert r.returncode == 0, f"ovs-vsctl {' '.join(args)}: rc {r.returncode}: {r.stderr}"
        return r

    def get(self, table, record, column):
        r = self.vsctl("--no-wait", "get", table, record, column, ok=False)
        return r.stdout.strip() if r.returncode == 0 else None

    def stats(self, iface):
        text = self.get("Interface", iface, "statistics") or "{}"
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}


NS = "urn:onf:config:yang"  # OF-CONFIG 1.2


def netconf_keys(d):
    """A client key pair for the NETCONF tests: d/client_key (OpenSSH
    private key, 0600) and d/authorized_keys (its public line), the file
    fulmar's --netconf-authorized-keys reads."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    (d / "client_key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    (d / "client_key").chmod(0o600)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    (d / "authorized_keys").write_bytes(pub + b" test\n")


def netconf_args(port, d):
    """`fulmar run` flags serving NETCONF on 127.0.0.1:port with the keys
    of netconf_keys(d) (the host key is created in d)."""
    return ["--netconf", str(port), "--netconf-host-key", str(d / "host_key"),
            "--netconf-authorized-keys", str(d / "authorized_keys")]


def netconf_connect(port, d):
    """An ncclient session to 127.0.0.1:port with d/client_key."""
    from ncclient import manager

    return manager.connect(host="127.0.0.1", port=port, username="admin",
                           key_filename=str(d / "client_key"), hostkey_verify=False,
                           allow_agent=False, look_for_keys=False, timeout=10)


def get_config(m):
    """The running configuration's XML."""
    return m.get_config(source="running").data_xml


def texts(doc, tag):
    """The text of every OF-CONFIG element named tag, in document order."""
    d = xml.dom.minidom.parseString(doc)
    return [e.firstChild.data if e.firstChild else "" for e in d.getElementsByTagNameNS(NS, tag)
            if not e.firstChild or e.firstChild.nodeType == e.TEXT_NODE]


def edit(m, body, **kw):
    """edit-config of running with body inside the capable switch."""
    return m.edit_config(target="running", config=f"""
<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">
  <capable-switch xmlns="{NS}"><id>fulmar</id>{body}</capable-switch>
</config>""", **kw)
