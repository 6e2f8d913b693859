#!/usr/bin/env bash
# Faucet's own integration suite with fulmar as the hardware switch under
# test: tests/integration/mininet_tests.py of the faucet 1.10.12 source
# distribution (PyPI), in the suite's hw_switch mode.
#
#   bench/faucet-suite.sh [--tests REGEX] [--json FILE] [--keep]
#   bench/faucet-suite.sh --prepare
#
# --tests: only the test classes whose names match REGEX (Python re.match,
#          e.g. 'FaucetUntagged(Test|ACLDropTest)$'); default: all of them.
# --json:  also copy the suite's JSON report to FILE.
# --keep:  keep the suite's logs of passing tests too (/var/tmp/faucet-tests-*).
# --prepare: only fetch the source distribution and make the venv.
#
# The wiring (docs/guide.md, "Faucet's integration suite"):
#
#   netns $P-fsuite (the test host)                 netns $P-fswitch (the switch)
#   mininet hosts - OVS (patch panel) - fchw1..4 ==== fcsw1..4  fulmar ports 1..4
#   Faucet :6636, Gauge :6637 on fccpn 10.37.0.1 ==== fccpnsw 10.37.0.2 (fulmar's
#                                                     two controller connections)
#
# Needs root, Debian's mininet, openvswitch-switch, iptables (ebtables-nft), tshark,
# freeradius and wpasupplicant (the 802.1X tests), ethtool, fping,
# ndisc6, ladvd, exabgp, netcat-openbsd, python3-scapy (the suite checks
# them; scripts/test.sh installs them), and a venv with faucet==1.10.12
# (made here under target/faucet-suite/venv unless $FAUCET_SUITE_VENV names
# one). Prints a table: one line per test, its result, and for each failure
# its cause. Exit status 0 when no test failed.
#
# $FULMAR: the fulmar binary (default target/debug/fulmar, built if absent).
# $FULMAR_E2E_PREFIX: two letters that prefix every namespace and link
# (default "fc"). $FAUCET_SUITE_MAX_LOAD: the suite's load-average gate
# (default 50; see tests/controllers/faucet_suite_runner.py).
# $FAUCET_SUITE_SHUFFLE=SEED: the classes in a random order (a run stopped
# early is then a sample of the whole suite; its table is in the output).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

tests_re=""
json_out=""
keep=()
prepare=0
while [ $# -gt 0 ]; do
    case $1 in
        --tests) tests_re=$2; shift 2 ;;
        --json) json_out=$2; shift 2 ;;
        --keep) keep=(-k); shift ;;
        --prepare) prepare=1; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

[ "$prepare" = 1 ] || [ "$(id -u)" -eq 0 ] || { echo "faucet-suite: needs root (namespaces, veths, Open vSwitch)" >&2; exit 2; }
[ "$prepare" = 1 ] || for tool in mn ovs-vswitchd ovsdb-server ebtables-nft tshark fping rdisc6 ladvd exabgp nc lsof fuser tcpdump scapy; do
    command -v "$tool" >/dev/null 2>&1 || { echo "faucet-suite: $tool not found (scripts/test.sh installs it)" >&2; exit 2; }
done

P=${FULMAR_E2E_PREFIX:-fc}
NS_SUITE=$P-fsuite
NS_SW=$P-fswitch
VERSION=1.10.12
work=$root/target/faucet-suite
mkdir -p "$work"

# The faucet source distribution: clib/ and tests/integration/.
sdist=$work/faucet-$VERSION
if [ ! -d "$sdist/clib" ]; then
    pip=${FAUCET_SUITE_VENV:-$work/venv}/bin/pip
    [ -x "$pip" ] || pip=pip3
    tmp=$(mktemp -d)
    "$pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: -d "$tmp" "faucet==$VERSION"
    tar xzf "$tmp/faucet-$VERSION.tar.gz" -C "$work"
    rm -rf "$tmp"
fi

# A venv that sees Debian's mininet and scapy (system site packages) and has
# Faucet with the suite's Python requirements.
venv=${FAUCET_SUITE_VENV:-$work/venv}
if ! "$venv/bin/python" -c "import faucet, mininet, requests, psutil, netifaces, bitstring, concurrencytest, tinyrpc, webob" 2>/dev/null; then
    # Debian's python3: mininet and scapy are its packages.
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "faucet==$VERSION" requests psutil netifaces \
        packaging bitstring concurrencytest "tinyrpc<1.1.6" webob
fi

[ "$prepare" = 0 ] || exit 0

fulmar=${FULMAR:-$root/target/debug/fulmar}
[ -x "$fulmar" ] || cargo build --quiet -p fulmar
run=$(mktemp -d "$work/run.XXXXXX")
pids=()
suite_pid=""

# A process and everything under it (the suite's mininet hosts run in
# namespaces of their own, out of reach of `ip netns pids`).
kill_tree() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
    kill "$1" 2>/dev/null || true
}

cleanup() {
    [ -z "$suite_pid" ] || kill_tree "$suite_pid"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.5
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    # Whatever the suite left running in its namespace (controllers,
    # tcpdumps, mininet hosts' shells) goes with it.
    for ns in "$NS_SUITE" "$NS_SW"; do
        local left
        left=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -z "$left" ] || kill -9 $left 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup

ip netns add "$NS_SUITE"
ip netns add "$NS_SW"
ip -n "$NS_SUITE" link set lo up
ip -n "$NS_SW" link set lo up
# The switch sends nothing of its own on its ports (a hardware switch's
# ports have no IP stack).
ip netns exec "$NS_SW" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
for i in 1 2 3 4; do
    ip link add fchw$i netns "$NS_SUITE" type veth peer name fcsw$i netns "$NS_SW"
    ip -n "$NS_SW" link set fcsw$i up
    ip -n "$NS_SUITE" link set fchw$i up
done
ip link add fccpn netns "$NS_SUITE" type veth peer name fccpnsw netns "$NS_SW"
ip -n "$NS_SUITE" addr add 10.37.0.1/24 dev fccpn
ip -n "$NS_SW" addr add 10.37.0.2/24 dev fccpnsw
ip -n "$NS_SUITE" link set fccpn up
ip -n "$NS_SW" link set fccpnsw up

# Open vSwitch of the suite's own (its patch panel and nothing else), every
# file in $run/ovs, the userspace datapath (no kernel module here).
ovs=$run/ovs
mkdir -p "$ovs"
export OVS_RUNDIR=$ovs OVS_DBDIR=$ovs OVS_LOGDIR=$ovs OVS_PKGDATADIR=/usr/share/openvswitch
ovsdb-tool create "$ovs/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ip netns exec "$NS_SUITE" ovsdb-server "$ovs/conf.db" --remote="punix:$ovs/db.sock" --pidfile="$ovs/ovsdb.pid" \
    --log-file="$ovs/ovsdb.log" --detach
pids+=("$(cat "$ovs/ovsdb.pid")")
ovs-vsctl --db="unix:$ovs/db.sock" --no-wait init
ip netns exec "$NS_SUITE" ovs-vswitchd "unix:$ovs/db.sock" --disable-system --pidfile="$ovs/vswitchd.pid" \
    --log-file="$ovs/vswitchd.log" --detach
pids+=("$(cat "$ovs/vswitchd.pid")")

# fulmar: four ports, two controllers (Faucet, Gauge), already running
# before the suite starts, reconnecting to every test's new controllers.
DPID=0x37fc0001
cat > "$run/fulmar.toml" <<EOF
[[bridges]]
name = "fcdut"
dpid = $((DPID))
fail_mode = "secure"
$(for i in 1 2 3 4; do printf '[[bridges.ports]]\nport = %d\ninterface = "fcsw%d"\n' "$i" "$i"; done)
[[bridges.controllers]]
target = "tcp:10.37.0.1:6636"
backoff_min_ms = 200
backoff_max_ms = 1000
[[bridges.controllers]]
target = "tcp:10.37.0.1:6637"
backoff_min_ms = 200
backoff_max_ms = 1000
EOF
ip netns exec "$NS_SW" "$fulmar" run --config "$run/fulmar.toml" --ctl "$run/fulmar.ctl" --mgmt-dir "$run" \
    --saved-tables none > "$run/fulmar.log" 2>&1 &
pids+=($!)

cat > "$run/hw_switch_config.yaml" <<EOF
hw_switch: True
hardware: 'Open vSwitch'
dp_ports:
  1: fchw1
  2: fchw2
  3: fchw3
  4: fchw4
dpid: $((DPID))
cpn_intf: fccpn
of_port: 6636
gauge_of_port: 6637
EOF

# The suite's ebtables rules through nftables (the legacy ebtables needs a
# kernel table this kernel may not have); ebtables-nft is iptables'.
mkdir -p "$run/bin"
ln -s "$(command -v ebtables-nft)" "$run/bin/ebtables"

args=(--retries 1 "${keep[@]}")
[ -z "$tests_re" ] || args+=(--regex "$tests_re")
report=$run/report.json
echo "faucet-suite: fulmar $("$fulmar" --version 2>/dev/null || echo '?'), faucet $VERSION, logs in $run" >&2
start=$(date +%s)
set +e
cd "$run"
ip netns exec "$NS_SUITE" env PATH="$run/bin:$venv/bin:$PATH" FAUCET_DIR="$sdist/faucet" \
    PYTHONPATH="$sdist" "$venv/bin/python" "$root/tests/controllers/faucet_suite_runner.py" run "$sdist" "$report" \
    "${args[@]}" > "$run/suite.log" 2>&1 &
suite_pid=$!
wait "$suite_pid"
rc=$?
suite_pid=""
cd "$root"
set -e
secs=$(( $(date +%s) - start ))
if kill -0 "${pids[-1]}" 2>/dev/null; then fulmar_alive=yes; else fulmar_alive="NO (it exited; see $run/fulmar.log)"; fi
if [ ! -s "$report" ] && [ ! -s "$report.progress" ]; then
    echo "faucet-suite: no report (suite exit $rc); the suite's output:" >&2
    tail -n 40 "$run/suite.log" >&2
    exit 1
fi
[ -z "$json_out" ] || [ ! -s "$report" ] || cp "$report" "$json_out"
set +e
"$venv/bin/python" "$root/tests/controllers/faucet_suite_runner.py" table "$report"
failed=$?
set -e
echo
echo "time: ${secs} s; fulmar still running: $fulmar_alive; suite exit status $rc; suite output: $run/suite.log"
exit $failed
