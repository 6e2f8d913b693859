#!/usr/bin/env bash
# The project's test command (the README's second command; CI runs exactly this).
#
# It installs what the tests need on a fresh Debian 12 machine — the Rust
# toolchain components, Debian packages (openvswitch-switch for ovs-ofctl and
# ovs-appctl, iputils-ping, prometheus for promtool; netsniff-ng, tcpreplay,
# iperf3, ethtool and nftables for the seed experiments' smoke run; mininet
# and the tools Faucet's suite checks for; libdpdk-dev, pkg-config and
# libclang for the DPDK backend), and a Python venv (.venv) from PyPI with
# os-ken 3.1.0 (its OpenFlow 1.3 test vectors), scapy (an independent
# packet encoder and decoder), pytest and matplotlib (the seed
# experiments' plots), in the background while the first checks compile —
# then runs, in order: formatting, layer and lint checks, the Rust tests,
# the OpenFlow vector round trip through the `fulmar` binary, the DPDK
# backend (the `dpdk` feature's Rust tests and lints over virtual devices
# without huge pages, and a `fulmar` built with it for the Python tests),
# the Python tests (scapy as the independent decoder; ovs-ofctl
# parse-flow / parse-group / add-meter and ofp-print as the reference for
# the flow, group and meter text in tests/flowtext_ovs; end-to-end tests
# in network namespaces, DPDK ports, faults under traffic, restarts and
# `bench/seeds/run.sh --smoke` among them; os-ken's simple_switch_13,
# Faucet, a three-switch Faucet fabric and a smoke subset of Faucet's own
# integration suite driving fulmar in tests/controllers), and the os-ken
# OpenFlow 1.3 conformance run (a fixed quarter of match and action; the
# full run is tests/conformance/ryu-of13.sh); beside those last two, at
# nice 19, Miri over the unsafe code, loom over the in-place table
# protocol (classifier::versioned) and a compile check of the fuzz
# targets. Each step prints the time since the start; a table of each
# step's time ends the output, and each background job's output ends
# with when it started and ended.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Each step prints the time since the start, and the end (also after a
# failure) prints a table of each step's wall-clock time, so that a CI log
# shows where the time went.
step_names=()
step_starts=()
clock() { printf '%02d:%02d' $(($1 / 60)) $(($1 % 60)); }
step() {
    step_names+=("$*")
    step_starts+=("$SECONDS")
    printf '\n== [%s] %s\n' "$(clock "$SECONDS")" "$*"
}
step_times() {
    local i end n=${#step_names[@]}
    echo
    echo "time per step (mm:ss, wall clock):"
    for ((i = 0; i < n; i++)); do
        if ((i + 1 < n)); then end=${step_starts[i + 1]}; else end=$SECONDS; fi
        printf '  %s  %s\n' "$(clock $((end - step_starts[i])))" "${step_names[i]:0:72}"
    done
    printf '  %s  in all\n' "$(clock "$SECONDS")"
}
# Jobs started in the background (see `background` below); a failure
# before they are joined leaves none of them running behind the script.
bg_pids=()
bg_logs=()
bg_names=()
kill_tree() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
    kill "$1" 2>/dev/null || true
}
trap 'step_times; for p in "${bg_pids[@]}"; do kill_tree "$p"; done' EXIT

# A full run builds debug, the DPDK feature, Miri's build and the fuzz check,
# and the tests write to /tmp. One CI run failed with "No space left on
# device" in the Python tests, so the free space is printed before the
# build and again whenever a step fails.
free_space() { df -h "$root" /tmp 2>/dev/null | awk 'NR == 1 || !seen[$1]++' >&2; }
trap 'echo "a step failed; free space now:" >&2; free_space' ERR

step "free space"
free_space

# A fresh clone gains nothing from incremental compilation, whose caches
# took 4 GiB of a 12 GiB target directory.
export CARGO_INCREMENTAL=0

step "toolchain"
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
cargo --version

# The installs (apt, the venvs, Faucet's sdist) wait on the network and on
# dpkg rather than on the CPU, so they run in the background while the
# formatting, layer, lint and fuzz-target checks compile, and are joined
# before the first step that needs them (cargo test runs ovs-ofctl,
# promtool and tshark where installed, so none may be half-installed when
# it starts). On a fresh machine they took about four minutes in the
# foreground. Their output is printed when they are joined.
background() {
    local name=$1 log
    shift
    log=$(mktemp)
    (
        start=$SECONDS
        trap 'echo "[$name: $(clock $((SECONDS - start))), from $(clock "$start") to $(clock "$SECONDS")]"' EXIT
        "$@"
    ) >"$log" 2>&1 &
    bg_pids+=($!)
    bg_logs+=("$log")
    bg_names+=("$name")
    echo "started in the background: $name"
}
# Joins every background job, prints each one's output, fails if any failed.
join_background() {
    local i failed=0
    for i in "${!bg_pids[@]}"; do
        if wait "${bg_pids[i]}"; then
            echo "-- ${bg_names[i]}: done"
        else
            echo "-- ${bg_names[i]}: FAILED" >&2
            failed=1
        fi
        cat "${bg_logs[i]}"
        rm -f "${bg_logs[i]}"
    done
    bg_pids=()
    bg_logs=()
    bg_names=()
    return "$failed"
}

# System packages, one apt transaction: ovs-ofctl, ovs-appctl, ovs-vsctl
# and ovsdb-server (real OpenFlow, unixctl and OVSDB peers), ping,
# promtool, snmpd and snmpget/snmpwalk, trafgen, tcpreplay, iperf3,
# ethtool, nft; as root also mininet and the tools Faucet's integration
# suite checks for (tests/controllers), and libdpdk-dev, pkg-config and
# libclang (bindgen) for the DPDK step.
install_apt() {
    set -euo pipefail
    local need=() t
    for t in ovs-ofctl:openvswitch-switch snmpd:snmpd snmpget:snmp ping:iputils-ping promtool:prometheus \
             trafgen:netsniff-ng tcpreplay:tcpreplay iperf3:iperf3 ethtool:ethtool nft:nftables; do
        command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
    done
    if [ "$(id -u)" -ne 0 ]; then
        [ ${#need[@]} -eq 0 ] || echo "not root: cannot install ${need[*]}; the tests that need them will say so" >&2
        return 0
    fi
    for t in mn:mininet ebtables-nft:iptables tshark:tshark fping:fping rdisc6:ndisc6 ladvd:ladvd \
             exabgp:exabgp nc:netcat-openbsd lsof:lsof fuser:psmisc tcpdump:tcpdump scapy:python3-scapy \
             freeradius:freeradius wpa_supplicant:wpasupplicant; do
        command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
    done
    pkg-config --exists libdpdk 2>/dev/null || need+=(libdpdk-dev)
    command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
    dpkg -s libclang1-14 >/dev/null 2>&1 || need+=(libclang1-14)
    dpkg -s libclang-common-14-dev >/dev/null 2>&1 || need+=(libclang-common-14-dev)
    if [ ${#need[@]} -gt 0 ]; then
        echo "apt: ${need[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
        apt-get clean
    fi
}

# The Python venv (.venv: os-ken==3.1.0, scapy, pytest, pytest-timeout,
# ncclient, matplotlib); as root also the controllers for
# tests/controllers: Faucet in its own venv (it pins its own os-ken),
# os-ken's simple_switch_13 app, which os-ken 3.x no longer ships, taken
# unchanged from the os-ken 1.4.1 source distribution on PyPI, and the
# faucet sdist (clib/, tests/integration/) for Faucet's own integration
# suite (tests/controllers/test_faucet_suite.py, bench/faucet-suite.sh).
FAUCET_VERSION=1.10.12
install_python() {
    set -euo pipefail
    if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import os_ken, scapy, pytest, ncclient, pytest_timeout, matplotlib' 2>/dev/null; then
        python3 -m venv .venv
        .venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "skipped: the controller tests need root" >&2
        return 0
    fi
    if ! .venv-faucet/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('faucet') != '$FAUCET_VERSION')" 2>/dev/null; then
        python3 -m venv .venv-faucet
        .venv-faucet/bin/pip install --quiet --disable-pip-version-check "faucet==$FAUCET_VERSION"
    fi
    local app=target/controller-apps/simple_switch_13.py sdist
    if [ ! -s "$app" ]; then
        mkdir -p "$(dirname "$app")"
        sdist=$(mktemp -d)
        .venv/bin/pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: -d "$sdist" os-ken==1.4.1
        tar xzf "$sdist"/os-ken-1.4.1.tar.gz -O os-ken-1.4.1/os_ken/app/simple_switch_13.py > "$app.tmp"
        mv "$app.tmp" "$app"
        rm -rf "$sdist"
    fi
    bench/faucet-suite.sh --prepare
}

step "installs, in the background: system packages (apt) and the Python venvs with os-ken, Faucet and its suite's sdist"
background "system packages (apt)" install_apt
background "python venvs and controllers" install_python

step "cargo fmt --check"
cargo fmt --all -- --check

step "layers: crates depend only downward, no module cycles, layered crates import only downward"
python3 scripts/check-layers.py

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "join the installs"
join_background
OSKEN_DIR=$(.venv/bin/python -c 'import os, os_ken; print(os.path.dirname(os_ken.__file__))')
export OSKEN_DIR
echo "os-ken vectors: $OSKEN_DIR/tests/packet_data/of13"

step "cargo test"
cargo test --workspace --locked

step "debug binaries the later steps run: fulmar, and the packet, flow text, flow-mod, packet-in and reference forwarder tools"
# One build, so the examples share fulmar's build of their crates; a test
# that built its own (cargo build -p agent --example ...) compiled those
# crates again for that package's features, 30-40 s each inside the
# Python step. The variables below name them to the tests.
cargo build --locked -p fulmar -p packet -p flowtext -p agent -p dataplane \
    --example packet_tool --example flowtext_tool --example flowmod_rate --example packetio_rate \
    --example reference_forwarder
export FLOWMOD_RATE="$root/target/debug/examples/flowmod_rate"
export PACKETIO_RATE="$root/target/debug/examples/packetio_rate"
export FULMAR_REFERENCE="$root/target/debug/examples/reference_forwarder"

step "fulmar ofp decode --roundtrip on the os-ken OpenFlow 1.3 vectors"
vectors=()
for f in "$OSKEN_DIR"/tests/packet_data/of13/4-*.packet "$OSKEN_DIR"/tests/packet_data/of13/libofproto-OFP13-*.packet; do
    vectors+=("$f")
done
echo "${#vectors[@]} vector files"
target/debug/fulmar ofp decode --roundtrip "${vectors[@]}" > /dev/null
echo "all ${#vectors[@]} round-trip byte-exactly"

step "DPDK ports (cargo feature dpdk; libdpdk-dev installed above): tests over vdevs, --no-huge"
# DPDK 22.11 from Debian; the EAL runs without huge pages, PCI scan or
# shared files in every test, so CI needs none of them. The fulmar built
# here (a superset of the default one) is the one the Python tests run, so
# tests/e2e/test_dpdk.py pings through DPDK ports and checks the gateway
# rewrites through net_pcap against `fulmar trace`.
if [ "$(id -u)" -eq 0 ]; then
    cargo clippy --locked -p dpdk-sys -p dataplane -p runtime -p fulmar --all-targets --features fulmar/dpdk -- -D warnings
    cargo test --locked -p dpdk-sys -p dataplane -p runtime --features dataplane/dpdk,runtime/dpdk
    cargo build --locked -p fulmar --features dpdk
    # The loss-free search (a generator over DPDK ring ports), briefly.
    cargo test --locked -p fulmar-bench --features dpdk loss_free
    export FULMAR="$root/target/debug/fulmar"
else
    echo "skipped: DPDK's EAL needs root" >&2
fi

step "in the background, niced, beside the Python tests and the conformance run: Miri over the unsafe code, loom over the in-place table protocol, the fuzz targets' compile check"
# The Python tests and the conformance run wait on namespaces, veths,
# controllers and timeouts (a load average near 0.5 on 2 cores), while
# these three are pure CPU and depend on no time, so they run beside
# them at nice 19: a test's processes take the CPU first. Their output is
# printed at the end.
# Miri (scripts/miri.sh): a dated nightly with Miri, installed by rustup
# from static.rust-lang.org; two groups of tests side by side, about four
# minutes alone on 2 cores, over the SPSC ring, lent buffers, the
# prefetching subtable and the in-place table. loom (scripts/loom.sh):
# classifier::versioned's writer against one or two readers, every
# interleaving up to each model's preemption bound, in a target
# directory of its own. The fuzz targets: checked in the workspace's
# target directory rather than fuzz/target, so the dependencies clippy
# checked above are not checked again (only the fuzz crate, libfuzzer-sys
# and the path crates outside clippy's wrapper are); nothing else runs
# cargo on that directory until the join (the tests get their binaries
# from the variables above).
background "Miri" nice -n 19 scripts/miri.sh
background "loom over classifier::versioned" nice -n 19 scripts/loom.sh
background "fuzz targets compile" nice -n 19 env CARGO_TARGET_DIR="$root/target" \
    cargo check --quiet --manifest-path fuzz/Cargo.toml --bins

step "python tests (scapy as the independent decoder; ovs-ofctl as the reference for the flow, group and meter text)"
export PACKET_TOOL="$root/target/debug/examples/packet_tool"
export FLOWTEXT_TOOL="$root/target/debug/examples/flowtext_tool"
# --durations=15: the log names the slowest tests (where this step's time goes).
.venv/bin/python -m pytest -q --durations=15 tests

step "OpenFlow 1.3 conformance: os-ken switch test tool (SCTP CRC32c mended), a fixed quarter of match and action"
# 242 of the 940 match and action tests (--sample 4: from every test file,
# every fourth test, at least one, so each match field and each action
# keeps a test; the same ones every run), about 1.5 minutes, against the
# debug fulmar built above (no release build). The tester runs with
# os-ken's own SCTP checksum bug mended (--fixed-tester, see
# tests/conformance/README.md), so the SCTP rewrite tests check fulmar's
# checksum byte for byte. Up to 3 may fail so that a slow machine's
# occasional receive timeout does not fail CI, while a real regression
# does (a test the tester never reached counts as failed). The full run
# (all 991 tests of the four categories, a few minutes per category) is
# `tests/conformance/ryu-of13.sh --fixed-tester`; its figures are in
# docs/results.md, "Conformance".
if [ "$(id -u)" -eq 0 ]; then
    FULMAR="$root/target/debug/fulmar" tests/conformance/ryu-of13.sh --fixed-tester --sample 4 --max-failed 3 match action
else
    echo "skipped: the conformance run needs root (veths, Open vSwitch)" >&2
fi

step "join Miri, loom and the fuzz targets' check"
join_background

echo
echo "all checks passed"
