"""End-to-end: OpenFlow over TLS. `fulmar run` listens on ptls: with a
certificate from a CA made here (openssl CLI); ovs-ofctl with a client
certificate from the same CA connects and gets the switch's features; a
client whose certificate comes from another CA is refused, and so is a
client without TLS. And as a client (`tls:`): it gets to a controller
whose certificate comes from its CA and names the address it dialled, and
refuses one from another CA.
"""

import re
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest

from e2e_support import SW_A, SW_B, Switch


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN=fulmar test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )


def make_leaf(d, name, ca):
    """A certificate for `name` signed by `ca`, usable by a server and a client."""
    openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
        cwd=d,
    )
    (d / f"{name}.ext").write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
        "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext",
        cwd=d,
    )


@pytest.fixture
def pki(tmp_path):
    if shutil.which("openssl") is None or shutil.which("ovs-ofctl") is None:
        pytest.skip("needs openssl and ovs-ofctl")
    make_ca(tmp_path, "ca")
    make_ca(tmp_path, "other-ca")
    make_leaf(tmp_path, "switch", "ca")
    make_leaf(tmp_path, "controller", "ca")
    make_leaf(tmp_path, "intruder", "other-ca")
    return tmp_path


def ofctl_show(d, target, who, trusts="ca"):
    return subprocess.run(
        [
            "ovs-ofctl", "-O", "OpenFlow13", "-t", "5",
            f"--private-key={d / (who + '.key')}", f"--certificate={d / (who + '.crt')}",
            f"--ca-cert={d / (trusts + '.crt')}", "show", target,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_tls_listener_serves_its_ca_and_refuses_others(net, fulmar_bin, pki):
    cfg = pki / "fulmar.toml"
    cfg.write_text(
        '[tls]\nprivate_key = "switch.key"\ncertificate = "switch.crt"\nca_cert = "ca.crt"\n'
        '[[bridges]]\nname = "br0"\ndpid = "0xf00d"\n'
        f'[[bridges.ports]]\nport = 1\ninterface = "{SW_A}"\nbackend = "afpacket"\n'
        f'[[bridges.ports]]\nport = 2\ninterface = "{SW_B}"\nbackend = "afpacket"\n'
        '[[bridges.controllers]]\ntarget = "ptls:0:127.0.0.1"\n'
    )
    sw = Switch([fulmar_bin, "run", "--config", str(cfg)])
    try:
        m = re.search(r"listening for controllers on ([\d.]+:\d+)", "".join(sw.err_lines))
        assert m, sw.err_lines
        addr = m.group(1)
        # A controller with a certificate from the switch's CA: features.
        ok = ofctl_show(pki, "ssl:" + addr, "controller")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "dpid:000000000000f00d" in ok.stdout, ok.stdout
        assert f"1({SW_A})" in ok.stdout and f"2({SW_B})" in ok.stdout, ok.stdout
        # A certificate from another CA (the client trusts the switch's CA,
        # so only the switch can refuse): no features.
        bad = ofctl_show(pki, "ssl:" + addr, "intruder")
        assert bad.returncode != 0, bad.stdout
        assert "dpid" not in bad.stdout, bad.stdout
        # Plain TCP to the TLS listener: no features either.
        plain = subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "-t", "5", "show", "tcp:" + addr], capture_output=True, text=True, timeout=30
        )
        assert plain.returncode != 0 and "dpid" not in plain.stdout, plain.stdout
        # The listener still serves good clients afterwards.
        again = ofctl_show(pki, "ssl:" + addr, "controller")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        rc, out, err = sw.stop()
    assert rc == 0, err


def read_until(conn, want_type, deadline):
    """Reads OpenFlow messages until one of `want_type`; returns it."""
    buf = b""
    while time.time() < deadline:
        while len(buf) >= 8:
            length = struct.unpack("!H", buf[2:4])[0]
            if length < 8 or len(buf) < length:
                break
            msg, buf = buf[:length], buf[length:]
            if msg[1] == want_type:
                return msg
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
    return None


def controller(d, cert, timeout=15):
    """A one-shot OpenFlow controller on TLS (Python's ssl module): waits
    for the switch, says HELLO, asks for FEATURES; returns the dpid, or the
    error that ended it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / f"{cert}.crt", d / f"{cert}.key")
    ctx.load_verify_locations(d / "ca.crt")
    ctx.verify_mode = ssl.CERT_REQUIRED
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    lsock.settimeout(timeout)
    result = {}

    def serve():
        deadline = time.time() + timeout
        try:
            raw, _ = lsock.accept()
            raw.settimeout(timeout)
            with ctx.wrap_socket(raw, server_side=True) as conn:
                conn.sendall(struct.pack("!BBHI", 4, 0, 8, 1))  # HELLO
                if read_until(conn, 0, deadline) is None:
                    result["error"] = "no HELLO"
                    return
                conn.sendall(struct.pack("!BBHI", 4, 5, 8, 2))  # FEATURES_REQUEST
                reply = read_until(conn, 6, deadline)
                if reply is None:
                    result["error"] = "no FEATURES_REPLY"
                    return
                result["dpid"] = struct.unpack("!Q", reply[8:16])[0]
        except (OSError, ssl.SSLError) as e:
            result["error"] = repr(e)
        finally:
            lsock.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return lsock.getsockname()[1], t, result


@pytest.mark.parametrize("cert,accepted", [("controller", True), ("intruder", False)])
def test_tls_connection_to_a_controller_checks_its_certificate(net, fulmar_bin, pki, cert, accepted):
    port, thread, result = controller(pki, cert)
    cfg = pki / "fulmar.toml"
    cfg.write_text(
        '[tls]\nprivate_key = "switch.key"\ncertificate = "switch.crt"\nca_cert = "ca.crt"\n'
        '[[bridges]]\nname = "br0"\ndpid = "0xbeef"\n'
        f'[[bridges.ports]]\nport = 1\ninterface = "{SW_A}"\nbackend = "afpacket"\n'
        f'[[bridges.ports]]\nport = 2\ninterface = "{SW_B}"\nbackend = "afpacket"\n'
        f'[[bridges.controllers]]\ntarget = "tls:127.0.0.1:{port}"\n'
    )
    sw = Switch([fulmar_bin, "run", "--config", str(cfg)])
    try:
        thread.join(timeout=20)
    finally:
        rc, out, err = sw.stop()
    assert rc == 0, err
    if accepted:
        assert result.get("dpid") == 0xBEEF, result
    else:
        # The switch checks the controller's chain and refuses it.
        assert "dpid" not in result, result
        assert "error" in result, result
