"""End-to-end: OF-CONFIG 1.2 over NETCONF/SSH with ncclient against a running
`fulmar run -i SW_A -i SW_B --netconf PORT`, in the `net` fixture's
namespaces, as root. The client key is made here; the server's host key is
created by fulmar in the test's directory."""

import json
import socket
import subprocess
import xml.dom.minidom

import pytest

ncclient = pytest.importorskip("ncclient")
from ncclient import manager  # noqa: E402
from ncclient.operations import RPCError  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: E402

from e2e_support import SW_A, SW_B, Controller, Switch, wait_for  # noqa: E402

NS = "urn:onf:config:yang"
FLOWS = "table=0,priority=0,actions=drop\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def nc(fulmar_bin, net, tmp_path):
    key = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "client_key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    (tmp_path / "client_key").chmod(0o600)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    (tmp_path / "authorized_keys").write_bytes(pub + b" test\n")
    (tmp_path / "flows").write_text(FLOWS)
    port = free_port()
    sw = Switch([fulmar_bin, "run", "-i", SW_A, "-i", SW_B, "--flows", str(tmp_path / "flows"),
                 "--ctl", str(tmp_path / "ctl.sock"), "--mgmt-dir", str(tmp_path),
                 "--netconf", str(port), "--netconf-host-key", str(tmp_path / "host_key"),
                 "--netconf-authorized-keys", str(tmp_path / "authorized_keys")])
    m = None
    try:
        m = manager.connect(host="127.0.0.1", port=port, username="admin",
                            key_filename=str(tmp_path / "client_key"), hostkey_verify=False,
                            allow_agent=False, look_for_keys=False, timeout=10)
        yield m, sw
    finally:
        if m is not None and m.connected:
            m.close_session()
        if sw.proc.poll() is None:
            sw.stop()


def ctl(fulmar_bin, tmp_path, *args):
    r = subprocess.run([fulmar_bin, "ctl", "-t", str(tmp_path / "ctl.sock"), *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"fulmar ctl {' '.join(args)}: {r.stderr}"
    return r.stdout


def get_config(m):
    return m.get_config(source="running").data_xml


def texts(doc, tag):
    d = xml.dom.minidom.parseString(doc)
    return [e.firstChild.data if e.firstChild else "" for e in d.getElementsByTagNameNS(NS, tag)
            if not e.firstChild or e.firstChild.nodeType == e.TEXT_NODE]


def edit(m, body, **kw):
    return m.edit_config(target="running", config=f"""
<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">
  <capable-switch xmlns="{NS}"><id>fulmar</id>{body}</capable-switch>
</config>""", **kw)


def test_get_config_ports_and_switch(nc, tmp_path):
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


def test_malformed_xml_gets_rpc_error(nc, fulmar_bin, tmp_path):
    m, _ = nc
    before = ctl(fulmar_bin, tmp_path, "show", "--json")
    # ncclient parses what it sends; a raw rpc with a broken config body.
    with pytest.raises(RPCError) as e:
        m.dispatch(xml_rpc := __import__("lxml.etree").etree.fromstring(
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
