"""End-to-end: `[dataplane] max_queue_delay_us` reaches the kernel. In
socket mode (`--afpacket-mode socket`; the default ring mode is deep and
drops by age in user space, see crates/dataplane/src/afpacket.rs and its
tests) the thread that reads an afpacket port sizes the port's receive
buffer to its bound: the delay times its drain rate. The ports here are idle, so
the thread has measured no rate and uses the initial 1 Mpps: 100 µs is
100 frames, asked as 100 x 832 / 2 bytes, which the kernel doubles
(`ss` shows rb = 83200). With 0 (deep queues) the port keeps the 8 MiB
it asked for at open (rb = 16 MiB). Nothing is timed: each check waits
for the buffer size with a deadline.
"""

import re
import subprocess

import pytest

from e2e_support import SW_A, SW_B, Switch, wait_for

BOUNDED_RB = 100 * 832  # 100 µs at 1 Mpps, 832 bytes a frame
DEEP_RB = 2 * (8 << 20)


def config(mode, delay_us):
    threads = "rx_threads = 1\nworker_threads = 1\ntx_threads = 1\n" if mode == "rx-worker-tx" else "worker_threads = 1\n"
    return (
        f'[dataplane]\nmode = "{mode}"\n{threads}max_queue_delay_us = {delay_us}\n'
        '[[bridges]]\nname = "br0"\nflows = ["table=0,priority=0,actions=drop"]\n'
        f'[[bridges.ports]]\nport = 1\ninterface = "{SW_A}"\n'
        f'[[bridges.ports]]\nport = 2\ninterface = "{SW_B}"\n'
    )


def receive_buffers(pid, iface):
    """The rb (receive buffer, bytes) of each packet socket of `pid` bound
    to `iface`."""
    out = subprocess.run(["ss", "-0", "-m", "-p", "-n"], capture_output=True, text=True, timeout=30).stdout
    rbs = []
    for line in out.splitlines():
        if f"*:{iface} " in line and f"pid={pid}," in line:
            m = re.search(r"rb(\d+)", line)
            if m:
                rbs.append(int(m.group(1)))
    return rbs


@pytest.mark.parametrize("mode", ["run-to-completion", "rx-worker-tx"])
@pytest.mark.parametrize("delay_us,rb", [(100, BOUNDED_RB), (0, DEEP_RB)])
def test_max_queue_delay_sizes_the_receive_buffer(net, fulmar_bin, tmp_path, mode, delay_us, rb):
    cfg = tmp_path / "switch.toml"
    cfg.write_text(config(mode, delay_us))
    sw = Switch([fulmar_bin, "run", "--config", str(cfg), "--mgmt-dir", str(tmp_path), "--saved-tables", "none",
                 "--afpacket-mode", "socket"])
    try:
        for iface in (SW_A, SW_B):
            wait_for(lambda: rb in receive_buffers(sw.proc.pid, iface), timeout=20,
                     what=f"{iface}: a receive buffer of {rb} bytes (have {receive_buffers(sw.proc.pid, iface)})")
    finally:
        rc, _out, err = sw.stop()
    assert rc == 0, err


def test_a_bad_max_queue_delay_is_refused_naming_the_field(fulmar_bin, tmp_path):
    cfg = tmp_path / "switch.toml"
    cfg.write_text(config("run-to-completion", 2_000_000))
    r = subprocess.run([fulmar_bin, "run", "--check", "--config", str(cfg)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0
    assert "dataplane.max_queue_delay_us: max_queue_delay_us 2000000 is not valid (0..=1000000)" in r.stderr, r.stderr
