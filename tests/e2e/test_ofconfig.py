"""End-to-end: OF-CONFIG 1.2 over NETCONF/SSH with ncclient (and paramiko by
hand for base:1.0 framing and bytes ncclient would not send) against a
running `fulmar run -i SW_A -i SW_B --netconf PORT`, in the `net` fixture's
namespaces, as root. The client key is made here; the server's host key is
created by fulmar in the test's directory.

Covers: get-config shows the running ports and logical switch; edit-config
adds a controller and the switch connects to it (and `fulmar ctl show` lists
it); bad edits (unknown element, bad value, a datastore failure half way)
get rpc-errors and change nothing; broken XML, a DTD and an undeclared
entity get malformed-message; a `fulmar ctl` change shows in get-config;
locks, kill-session, port references, an unknown client key refused;
queue resources made, shown, refused and deleted."""

import json
import re
import shutil
import subprocess
import time

import pytest

ncclient = pytest.importorskip("ncclient")
from lxml import etree  # noqa: E402  (ncclient's XML library)
from ncclient.operations import RPCError  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: E402

from e2e_support import SW_A, SW_B, Controller, Switch, wait_for  # noqa: E402
from mgmt_support import NS, ctl, edit, free_port, get_config, netconf_args, netconf_connect, netconf_keys, texts  # noqa: E402

FLOWS = "table=0,priority=0,actions=drop\n"


@pytest.fixture
def nc(fulmar_bin, net, tmp_path):
    netconf_keys(tmp_path)
    (tmp_path / "flows").write_text(FLOWS)
    port = free_port()
    sw = Switch([fulmar_bin, "run", "-i", SW_A, "-i", SW_B, "--flows", str(tmp_path / "flows"),
                 "--ctl", str(tmp_path / "ctl.sock"), "--mgmt-dir", str(tmp_path),
                 *netconf_args(port, tmp_path)])
    sw.port, sw.dir = port, tmp_path
    m = None
    try:
        m = netconf_connect(port, tmp_path)
        yield m, sw
    finally:
        if m is not None and m.connected:
            m.close_session()
        if sw.proc.poll() is None:
            rc, _, err = sw.stop()
            assert rc == 0, err


def test_get_config_ports_and_switch(nc, fulmar_bin, tmp_path):
    m, _ = nc
    assert "urn:ietf:params:netconf:base:1.1" in m.server_capabilities
    doc = get_config(m)
    assert texts(doc, "resource-id") == [SW_A, SW_B]
    assert texts(doc, "number") == ["1", "2"]
    assert "br0" in texts(doc, "id")
    assert texts(doc, "datapath-id") == ["00:00:00:00:00:00:00:01"]
    assert texts(doc, "lost-connection-behavior") == ["failSecureMode"]
    # get adds state; a subtree filter keeps only what it selects.
    full = m.get().data_xml
    assert texts(full, "oper-state") == ["up", "up"]
    only = m.get_config(source="running", filter=("subtree", f'<capable-switch xmlns="{NS}"><logical-switches/></capable-switch>')).data_xml
    assert texts(only, "resource-id") == [] and "br0" in texts(only, "id")
    # What get-config returns, sent back (merge, then replace), changes nothing.
    show = ctl(fulmar_bin, tmp_path, "show", "--json")
    cs = etree.tostring(etree.fromstring(doc.encode())[0]).decode()
    for op in ("merge", "replace"):
        m.edit_config(target="running", default_operation=op,
                      config=f'<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">{cs}</config>')
    assert get_config(m) == doc
    assert ctl(fulmar_bin, tmp_path, "show", "--json") == show


def test_edit_config_adds_controller_and_switch_connects(nc, fulmar_bin, tmp_path):
    m, _ = nc
    c = Controller()
    edit(m, f"""<logical-switches><switch><id>br0</id><controllers><controller>
<id>c1</id><ip-address>127.0.0.1</ip-address><port>{c.port}</port><protocol>tcp</protocol>
</controller></controllers></switch></logical-switches>""")
    assert c.connected.wait(10), "the switch did not connect to the controller"
    assert f"tcp:127.0.0.1:{c.port}" in ctl(fulmar_bin, tmp_path, "show")
    assert str(c.port) in texts(get_config(m), "port")
    assert texts(get_config(m), "ip-address") == ["127.0.0.1"]
    wait_for(lambda: "up" in texts(m.get().data_xml, "connection-state"), 10, "connection-state up")
    # test-only validates and changes nothing; delete removes it.
    edit(m, """<logical-switches><switch><id>br1</id></switch></logical-switches>""", test_option="test-only")
    assert "br1" not in texts(get_config(m), "id")
    edit(m, f"""<logical-switches><switch><id>br0</id><controllers><controller operation="delete"
xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><id>tcp:127.0.0.1:{c.port}</id></controller></controllers></switch></logical-switches>""")
    assert f"tcp:127.0.0.1:{c.port}" not in ctl(fulmar_bin, tmp_path, "show")


@pytest.mark.parametrize("body,tag", [
    ("<logical-switches><switch><id>br0</id><bogus/></switch></logical-switches>", "unknown-element"),
    ("<logical-switches><switch><id>br0</id><lost-connection-behavior>sometimes</lost-connection-behavior></switch></logical-switches>", "invalid-value"),
    ("<logical-switches><switch><id>br0</id><datapath-id>zz</datapath-id></switch></logical-switches>", "invalid-value"),
    # The first part is good, the second fails in the datastore: nothing applies.
    ("<logical-switches><switch><id>br0</id><lost-connection-behavior>failStandaloneMode</lost-connection-behavior>"
     "<resources><port>no-such-if0</port></resources></switch><switch operation=\"create\"><id>br0</id></switch></logical-switches>", None),
])
def test_bad_edit_config_changes_nothing(nc, fulmar_bin, tmp_path, body, tag):
    m, _ = nc
    before, show = get_config(m), ctl(fulmar_bin, tmp_path, "show", "--json")
    with pytest.raises(RPCError) as e:
        edit(m, body)
    if tag:
        assert e.value.tag == tag
    assert get_config(m) == before
    assert ctl(fulmar_bin, tmp_path, "show", "--json") == show


def test_unknown_namespace_and_datastore_get_rpc_errors(nc, fulmar_bin, tmp_path):
    m, _ = nc
    before = ctl(fulmar_bin, tmp_path, "show", "--json")
    # (ncclient parses what it sends: broken XML is test_base10_framing_and_malformed_messages'.)
    with pytest.raises(RPCError) as e:
        m.dispatch(etree.fromstring(
            '<edit-config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><target><running/></target>'
            '<config><capable-switch xmlns="urn:x:unknown"/></config></edit-config>'))
    assert e.value.tag in ("unknown-namespace", "unknown-element")
    with pytest.raises(RPCError) as e:
        m.get_config(source="candidate")
    assert e.value.tag == "operation-not-supported"
    assert ctl(fulmar_bin, tmp_path, "show", "--json") == before


def test_ctl_change_shows_in_get_config(nc, fulmar_bin, tmp_path):
    m, _ = nc
    ctl(fulmar_bin, tmp_path, "set-fail-mode", "br0", "standalone")
    assert texts(get_config(m), "lost-connection-behavior") == ["failStandaloneMode"]
    edit(m, "<logical-switches><switch><id>br0</id><lost-connection-behavior>failSecureMode</lost-connection-behavior></switch></logical-switches>")
    assert json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))["bridges"][0]["fail_mode"] == "secure"
    # lock: a second session cannot edit while the first holds it.
    with m.locked("running"):
        m.get_config(source="running")


def test_port_reference_removed_and_added(nc, fulmar_bin, tmp_path):
    m, _ = nc
    ls = "<logical-switches><switch><id>br0</id><resources>{}</resources></switch></logical-switches>"
    edit(m, ls.format(f'<port xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0" nc:operation="delete">{SW_B}</port>'))
    assert texts(get_config(m), "resource-id") == [SW_A]
    edit(m, f"<resources><port><resource-id>{SW_B}</resource-id><number>5</number></port></resources>"
         + ls.format(f"<port>{SW_B}</port>"))
    doc = get_config(m)
    assert texts(doc, "resource-id") == [SW_A, SW_B] and texts(doc, "number") == ["1", "5"]
    show = json.loads(ctl(fulmar_bin, tmp_path, "show", "--json"))
    assert [(p["ofport"], p["interface"]) for p in show["bridges"][0]["ports"]] == [(1, SW_A), (5, SW_B)]


def saved_queues(fulmar_bin, tmp_path, iface):
    """The port's `qos` as `fulmar ctl save` writes the configuration."""
    import tomllib
    saved = tmp_path / "saved.toml"
    ctl(fulmar_bin, tmp_path, "save", str(saved))
    cfg = tomllib.loads(saved.read_text())
    port = next(p for p in cfg["bridges"][0]["ports"] if p.get("interface") == iface)
    return port.get("qos")


def queue_get_config(tmp_path, port_no):
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "queue-get-config", f"unix:{tmp_path}/br0.mgmt", str(port_no)],
                       capture_output=True, text=True, timeout=30)
    return r.stdout if r.returncode == 0 else ""


def test_queue_resource_created_shown_and_deleted(nc, fulmar_bin, tmp_path):
    """A queue resource made through edit-config is the port's egress queue
    (saved configuration, QUEUE_GET_CONFIG, get-config with the switch's
    reference), its rates tenths of a percent of the port's QoS max_rate;
    a bad queue edit changes nothing; delete removes it."""
    m, _ = nc
    nc_ns = 'xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"'
    rid = f"{SW_B}:3"
    # The port's ceiling first (OF-CONFIG has no word for it).
    ctl(fulmar_bin, tmp_path, "set-qos", "br0", SW_B, "max_rate=10000000")
    assert texts(get_config(m), "queue") == []
    edit(m, f"""<resources><queue {nc_ns} nc:operation="create"><resource-id>{rid}</resource-id><id>3</id>
<port>{SW_B}</port><properties><min-rate>200</min-rate><max-rate>500</max-rate></properties></queue></resources>""")
    qos = saved_queues(fulmar_bin, tmp_path, SW_B)
    assert qos["max_rate"] == 10000000, qos
    assert [(q["id"], q.get("min_rate"), q.get("max_rate")) for q in qos["queues"]] == [(3, 2000000, 5000000)], qos
    if shutil.which("ovs-ofctl"):
        wait_for(lambda: re.search(r"queue 3:.*min_rate:20\.0%.*max_rate:50\.0%", queue_get_config(tmp_path, 2)),
                 timeout=10, what="queue 3 in QUEUE_GET_CONFIG")
    doc = get_config(m)
    # The resource (resource-id, id, port, properties) and br0's reference.
    assert rid in texts(doc, "resource-id") and "3" in texts(doc, "id")
    assert texts(doc, "min-rate") == ["200"] and texts(doc, "max-rate") == ["500"]
    assert texts(doc, "queue") == [rid]
    # A subtree filter selects the queue alone.
    only = m.get_config(source="running", filter=("subtree",
        f'<capable-switch xmlns="{NS}"><resources><queue><resource-id>{rid}</resource-id></queue></resources></capable-switch>')).data_xml
    assert texts(only, "resource-id") == [rid] and texts(only, "number") == []
    # get-config sent back changes nothing (exact bits/s kept).
    cs = etree.tostring(etree.fromstring(doc.encode())[0]).decode()
    m.edit_config(target="running", default_operation="replace",
                  config=f'<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">{cs}</config>')
    assert saved_queues(fulmar_bin, tmp_path, SW_B) == qos
    # Bad edits: an rpc-error naming the element, nothing changed.
    for body, tag in [
        (f"<resources><queue><resource-id>{rid}</resource-id><properties><min-rate>1001</min-rate></properties></queue></resources>", "invalid-value"),
        (f"<resources><queue><resource-id>{SW_B}:4</resource-id><properties><experimenter>1</experimenter></properties></queue></resources>", "operation-not-supported"),
        (f'<resources><queue {nc_ns} nc:operation="create"><resource-id>{rid}</resource-id></queue></resources>', "data-exists"),
        ("<resources><queue><resource-id>nosuchport:1</resource-id></queue></resources>", "data-missing"),
    ]:
        with pytest.raises(RPCError) as e:
            edit(m, body)
        assert e.value.tag == tag, body
    assert get_config(m) == doc
    assert saved_queues(fulmar_bin, tmp_path, SW_B) == qos
    # delete: gone from the port (its ceiling stays), from get-config.
    edit(m, f'<resources><queue {nc_ns} nc:operation="delete"><resource-id>{rid}</resource-id></queue></resources>')
    qos = saved_queues(fulmar_bin, tmp_path, SW_B)
    assert qos["max_rate"] == 10000000 and not qos.get("queues"), qos
    doc = get_config(m)
    assert rid not in texts(doc, "resource-id") and texts(doc, "queue") == []
    with pytest.raises(RPCError) as e:
        edit(m, f'<resources><queue {nc_ns} nc:operation="delete"><resource-id>{rid}</resource-id></queue></resources>')
    assert e.value.tag == "data-missing"


class Raw:
    """A NETCONF session over paramiko by hand: base:1.0 framing, and bytes
    ncclient would not send."""

    def __init__(self, port, key_file):
        import paramiko
        self.t = paramiko.Transport(("127.0.0.1", port))
        try:
            self.t.connect()
            self.t.auth_publickey("raw", paramiko.Ed25519Key.from_private_key_file(key_file))
        except Exception:
            self.t.close()
            raise
        self.ch = self.t.open_session()
        self.ch.settimeout(10)
        self.ch.invoke_subsystem("netconf")
        self.buf = b""
        self.hello = self.recv()
        self.send('<hello xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities>'
                  "<capability>urn:ietf:params:netconf:base:1.0</capability></capabilities></hello>")

    def send(self, text):
        self.ch.sendall(text.encode() + b"]]>]]>")

    def recv(self):
        end = time.time() + 10
        while b"]]>]]>" not in self.buf and time.time() < end:
            data = self.ch.recv(65536)
            if not data:
                break
            self.buf += data
        msg, _, self.buf = self.buf.partition(b"]]>]]>")
        return msg.decode()

    def rpc(self, body, mid="1"):
        self.send(f'<rpc message-id="{mid}" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">{body}</rpc>')
        return self.recv()

    def close(self):
        self.t.close()


def test_base10_framing_and_malformed_messages(nc, fulmar_bin, tmp_path):
    m, sw = nc
    raw = Raw(sw.port, str(tmp_path / "client_key"))
    try:
        assert "<session-id>" in raw.hello and "urn:ietf:params:netconf:base:1.0" in raw.hello
        before = ctl(fulmar_bin, tmp_path, "show", "--json")
        assert "<id>br0</id>" in raw.rpc("<get-config><source><running/></source></get-config>", mid="a7")
        for bad in (
            '<rpc message-id="2" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><edit-config><target><running/>',
            '<!DOCTYPE r [<!ENTITY a "x">]><rpc message-id="3" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"/>',
            '<rpc message-id="4" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><get>&a;</get></rpc>',
        ):
            raw.send(bad)
            r = raw.recv()
            assert "<error-tag>malformed-message</error-tag>" in r, r
        r = raw.rpc('<edit-config><target><running/></target><config><capable-switch xmlns="urn:onf:config:yang">'
                    "<logical-switches><switch><id>br0</id><lost-connection-behavior>failStandaloneMode"
                    "</lost-connection-behavior><nope/></switch></logical-switches></capable-switch></config></edit-config>")
        assert "<error-tag>unknown-element</error-tag>" in r, r
        assert ctl(fulmar_bin, tmp_path, "show", "--json") == before
        # Another session holds the lock: edits are refused; kill-session frees it.
        assert "<ok/>" in raw.rpc("<lock><target><running/></target></lock>")
        with pytest.raises(RPCError) as e:
            edit(m, "<logical-switches><switch><id>br0</id></switch></logical-switches>")
        assert e.value.tag == "in-use"
        sid = raw.hello.split("<session-id>")[1].split("<")[0]
        m.kill_session(sid)
        edit(m, "<logical-switches><switch><id>br0</id></switch></logical-switches>")
    finally:
        raw.close()


def test_unknown_key_is_refused(nc, tmp_path):
    import paramiko
    _, sw = nc
    other = tmp_path / "other_key"
    k = ed25519.Ed25519PrivateKey.generate()
    other.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                      serialization.NoEncryption()))
    with pytest.raises(paramiko.AuthenticationException):
        Raw(sw.port, str(other))


def test_port_mod_shows_in_port_configuration(nc, tmp_path):
    m, _ = nc
    if shutil.which("ovs-ofctl") is None:
        pytest.skip("needs ovs-ofctl")
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "mod-port", f"unix:{tmp_path}/br0.mgmt", "2", "no-forward"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    doc = get_config(m)
    assert texts(doc, "no-forward") == ["false", "true"]
    assert texts(doc, "admin-state") == ["up", "up"]
    # Port configuration is OpenFlow's to set: edit-config refuses it.
    with pytest.raises(RPCError) as e:
        edit(m, f"<resources><port><resource-id>{SW_B}</resource-id><configuration><no-forward>false"
                "</no-forward></configuration></port></resources>")
    assert e.value.tag == "operation-not-supported"
