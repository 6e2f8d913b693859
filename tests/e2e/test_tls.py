"""End-to-end: OpenFlow over TLS. `fulmar run` listens on ptls: with a
certificate from a CA made here (openssl CLI); ovs-ofctl with a client
certificate from the same CA connects and gets the switch's features; a
client whose certificate comes from another CA is refused, and so is a
client without TLS.
"""

import re
import shutil
import subprocess

import pytest

from conftest import SW_A, SW_B, Switch


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
