#!/usr/bin/env bash
# The os-ken (Ryu) OpenFlow 1.3 switch test tool against a target switch.
#
#   tests/conformance/ryu-of13.sh [--target fulmar|ovs] [--fixed-tester] [--min-ok N] [--max-failed N]
#                                 [--sample K] [CATEGORY|DIR...]
#
# CATEGORY is any of match, action, group, meter (default: all four, the 991
# tests of os_ken/tests/switch/of13). A DIR (a path with a slash) runs the
# os-ken test files in it instead: copy a few JSON files there to rerun
# just those tests. The tester switch is Open vSwitch 3.1
# (userspace `netdev` datapath, dpid 2); the target (dpid 1) is fulmar, or
# Open vSwitch itself for a baseline. They are joined by three veth pairs:
# target port N <-> tester port N. Prints the OK and ERROR counts per category
# and the failing tests (full logs in target/conformance/); exits 0 when the run completed (the counts are the
# result), non-zero when the harness itself failed or, with --min-ok N, when
# fewer than N tests passed, or with --max-failed N, when more than N of the
# tests in the files run did not pass (ERROR, or never reported because the
# tester stopped early; the test command uses that as a regression floor).
#
# --sample K runs a fixed quarter (K=4), fifth, ... of each category: from
# every test file, the tests whose position plus the file's position is a
# multiple of K, and at least one, so that every match field and every
# action keeps a test and the packet kinds rotate between files. The same
# tests every run (no randomness). The test command runs match and action
# with --sample 4; the full run (no --sample) is the figure in
# docs/results.md, "Conformance".
#
# $FULMAR names the fulmar binary to test (the test command passes its
# debug build); without it a release build is made and tested.
#
# --fixed-tester runs the tester from a copy of os-ken with one bug mended:
# its SCTP CRC32c (os_ken/lib/packet/sctp.py, sctp._checksum) runs over the
# characters of str(bytearray) instead of the packet's bytes, so every SCTP
# packet it builds, expected ones included, carries a wrong checksum (see
# tests/conformance/README.md). The copy is made in the run's private
# directory at start; the installed package is not touched.
#
# Needs root. Installs openvswitch-switch if missing; uses .venv (made by
# scripts/test.sh) for os-ken 3.1.0. Leaves nothing behind: its OVS runs
# from a private directory and every veth is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

target=fulmar
min_ok=0
max_failed=""
sample=1
fixed_tester=0
categories=()
while [ $# -gt 0 ]; do
    case "$1" in
        --target) target=$2; shift 2 ;;
        --min-ok) min_ok=$2; shift 2 ;;
        --max-failed) max_failed=$2; shift 2
                      [[ "$max_failed" =~ ^[0-9]+$ ]] || { echo "$0: --max-failed takes a whole number" >&2; exit 2; } ;;
        --sample) sample=$2; shift 2
                  [[ "$sample" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --sample takes a positive whole number" >&2; exit 2; } ;;
        --fixed-tester) fixed_tester=1; shift ;;
        match|action|group|meter) categories+=("$1"); shift ;;
        */*) [ -d "$1" ] || { echo "$0: $1: not a directory" >&2; exit 2; }
             categories+=("$(cd "$1" && pwd)"); shift ;;
        *) echo "usage: $0 [--target fulmar|ovs] [--fixed-tester] [--min-ok N] [--max-failed N] [--sample K] [match|action|group|meter|DIR]..." >&2; exit 2 ;;
    esac
done
[ ${#categories[@]} -gt 0 ] || categories=(match action group meter)

if ! command -v ovs-vswitchd >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openvswitch-switch >/dev/null
fi
if [ ! -x .venv/bin/osken-manager ]; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet -r tests/requirements.txt
fi
if [ "$target" = fulmar ]; then
    if [ -n "${FULMAR:-}" ]; then
        fulmar_bin=$FULMAR
    else
        cargo build --release --locked -q -p fulmar
        fulmar_bin=$root/target/release/fulmar
    fi
fi
osken_dir=$(.venv/bin/python -c 'import os, os_ken; print(os.path.dirname(os_ken.__file__))')

# The tester, its OVS and the target run ahead of other work on the machine
# (builds): the group and meter tests measure rates that the tester's
# Python packet-out loop only reaches when it gets the CPU on time.
prio="nice -n -5"

work=$(mktemp -d /tmp/fulmar-ryu.XXXXXX)
tester_env=()
if [ "$fixed_tester" = 1 ]; then
    # A private copy of the package with the CRC32c taken over the bytes
    # (RFC 3309's definition); it comes first on the tester's PYTHONPATH.
    mkdir -p "$work/osken"
    cp -r "$osken_dir" "$work/osken/os_ken"
    .venv/bin/python - "$work/osken/os_ken/lib/packet/sctp.py" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = "        for c in str(data):\n            crc32 = (crc32 >> 8) ^ crc_c[(crc32 ^ (ord(c))) & 0xFF]\n"
new = "        for c in bytes(data):\n            crc32 = (crc32 >> 8) ^ crc_c[(crc32 ^ c) & 0xFF]\n"
if text.count(old) != 1:
    sys.exit(f"{path}: the CRC32c loop to mend is not there (another os-ken version?)")
open(path, "w").write(text.replace(old, new))
PY
    osken_dir=$work/osken/os_ken
    tester_env=(env "PYTHONPATH=$work/osken")
    echo "tester: os-ken with its SCTP CRC32c mended ($osken_dir)"
fi
export OVS_RUNDIR=$work OVS_DBDIR=$work OVS_LOGDIR=$work OVS_PKGDATADIR=/usr/share/openvswitch
pids=()
manager=""
fulmar_pid=""
cleanup() {
    set +e
    for p in $manager $fulmar_pid "${pids[@]}"; do kill "$p" 2>/dev/null; done
    [ -z "$manager" ] || pkill -f -- "--ofp-tcp-listen-port 16653" 2>/dev/null
    sleep 0.5
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    for i in 1 2 3; do ip link del "fry-t$i" 2>/dev/null; done
    # OVS's internal bridge ports, should a killed vswitchd leave them.
    ip link del fry-tester 2>/dev/null; ip link del fry-target 2>/dev/null
    [ ! -f "$work/vswitchd.log" ] || [ ! -d "$root/target/conformance" ] ||
        cp "$work/vswitchd.log" "$root/target/conformance/ovs-vswitchd.log"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for i in 1 2 3; do
    ip link del "fry-t$i" 2>/dev/null || true
    ip link add "fry-t$i" type veth peer name "fry-s$i"
    for end in t s; do
        ip link set "fry-$end$i" mtu 9000 up
        # No IPv6 router solicitations or DAD chatter on the test links.
        sysctl -qw "net.ipv6.conf.fry-$end$i.disable_ipv6=1" || true
    done
done

ovsdb-tool create "$work/conf.db" /usr/share/openvswitch/vswitch.ovsschema
$prio ovsdb-server "$work/conf.db" --remote="punix:$work/db.sock" --pidfile="$work/ovsdb.pid" \
    --log-file="$work/ovsdb.log" --detach
pids+=("$(cat "$work/ovsdb.pid")")
vsctl() { ovs-vsctl --db="unix:$work/db.sock" --no-wait "$@"; }
vsctl init
$prio ovs-vswitchd "unix:$work/db.sock" --disable-system --pidfile="$work/vswitchd.pid" \
    --log-file="$work/vswitchd.log" --detach
pids+=("$(cat "$work/vswitchd.pid")")

# Full tester logs stay after the run, one per category.
logs=$root/target/conformance
mkdir -p "$logs"
controller=tcp:127.0.0.1:16653
add_ovs_bridge() { # name dpid side
    local br=$1 dpid=$2 side=$3
    vsctl add-br "$br" -- set bridge "$br" datapath_type=netdev protocols=OpenFlow13 \
        other-config:datapath-id="$(printf '%016x' "$dpid")" fail_mode=secure
    for i in 1 2 3; do
        vsctl add-port "$br" "fry-$side$i" -- set interface "fry-$side$i" ofport_request="$i"
    done
    vsctl set-controller "$br" "$controller"
}

# The tester's datapath flow cache. Before every test the tester deletes
# and re-adds its in_port=2,actions=CONTROLLER flow, and sends the test
# packet a few milliseconds later. OVS brings its cached datapath flows in
# line with a flow-table change asynchronously (revalidator threads), so on
# this loaded 2-core machine a packet sometimes meets a cached flow that
# predates the re-added one and is dropped without a packet-in: the target
# forwarded it (the tester's rx counter grew), and the test fails with
# "Receiving timeout: increment in rx_packets in tester". Captures of such
# a failure show the target's frame leaving 0.13 ms after the ingress one
# and no PACKET_IN from the tester at all; 9 to 17 of the 714 match tests
# failed so, none with the cache off. With flow-limit 0 the tester caches
# no datapath flows, so each packet is looked up in its current OpenFlow
# table. That costs the tester a slow-path lookup per packet, which the
# rate tests of the group and meter categories cannot afford (they measure
# what the tester counts), so the cache is off only for the others.
tester_flow_cache() { # on|off
    if [ "$1" = off ]; then
        vsctl set Open_vSwitch . other_config:flow-limit=0
    else
        vsctl remove Open_vSwitch . other_config flow-limit
    fi
}

# select DIR K OUT: copies the test files under DIR to OUT, each cut down
# to its sample of 1 in K (see --sample); prints how many tests OUT holds.
select_tests() {
    .venv/bin/python - "$@" <<'PY'
import json, pathlib, sys
src, k, out = pathlib.Path(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])
n = 0
for i, f in enumerate(sorted(src.rglob("*.json"))):
    doc = json.loads(f.read_text())
    description, tests = doc[0], doc[1:]
    kept = [t for j, t in enumerate(tests) if (i + j) % k == 0] or tests[:1]
    n += len(kept)
    dst = out / f.relative_to(src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps([description, *kept], indent=1))
print(n)
PY
}

total_ok=0; total_err=0; total_tests=0
for cat in "${categories[@]}"; do
    if [ "${cat:0:1}" = / ]; then
        tests=$cat; name=$(basename "$cat")
    else
        tests=$osken_dir/tests/switch/of13/$cat; name=$cat
    fi
    # The tests the files hold (all of them when K is 1), so that a tester
    # that stops early counts its unrun tests as not passed.
    selected=$work/selected/$name
    count=$(select_tests "$tests" "$sample" "$selected")
    tests=$selected
    total_tests=$((total_tests + count))
    [ "$sample" = 1 ] || echo "$name: a sample of 1 in $sample, $count tests"
    log=$logs/$name.log
    case $cat in group|meter) tester_flow_cache on ;; *) tester_flow_cache off ;; esac
    # The tester app drives both switches; it exits when its tests are done.
    (cd "$osken_dir/.." && $prio "${tester_env[@]}" timeout 3000 "$root/.venv/bin/osken-manager" \
        --ofp-tcp-listen-port 16653 \
        --test-switch-target 0000000000000001 --test-switch-tester 0000000000000002 \
        --test-switch-dir "$tests" \
        "$osken_dir/tests/switch/tester.py" > "$log" 2>&1) &
    manager=$!
    sleep 2
    add_ovs_bridge fry-tester 2 s
    if [ "$target" = ovs ]; then
        add_ovs_bridge fry-target 1 t
    else
        $prio "$fulmar_bin" run --dpid 1 --controller "$controller" \
            --interface fry-t1 --interface fry-t2 --interface fry-t3 > "$logs/fulmar-$name.log" 2>&1 &
        fulmar_pid=$!
    fi
    wait "$manager" || true
    if [ "$target" = ovs ]; then vsctl del-br fry-target; else kill "$fulmar_pid" 2>/dev/null; wait "$fulmar_pid" 2>/dev/null || true; fi
    vsctl del-br fry-tester
    # The tester's own counters (datapath drops, upcalls), for diagnosis.
    ovs-appctl -t "$work/ovs-vswitchd.$(cat "$work/vswitchd.pid").ctl" coverage/show \
        > "$logs/ovs-coverage-$name.txt" 2>&1 || true
    ok=$(grep -cE ' OK$' "$log" || true)
    err=$(grep -cE ' ERROR$' "$log" || true)
    total_ok=$((total_ok + ok)); total_err=$((total_err + err))
    echo "$name: OK $ok, ERROR $err"
    grep -B1 -A3 -E ' ERROR$' "$log" | sed 's/^/    /' | head -200 || true
    sctp=$(grep -A1 -E "set_field:[0-9]+->sctp_(src|dst),.* ERROR$" "$log" | grep -c 'Received incorrect packet: sctp(csum=' || true)
    [ "$sctp" -eq 0 ] || echo "    ($sctp of these are set_field on sctp_src/dst: os-ken's expected packets carry its own wrong SCTP checksum; see tests/conformance/README.md)"
done
[ "$fixed_tester" = 1 ] && tester_name="os-ken (SCTP CRC32c mended)" || tester_name="os-ken 3.1.0 as released"
echo "tester: $tester_name"
echo "target $target: OK $total_ok, ERROR $total_err (of $((total_ok + total_err)) run, $total_tests selected)"
if [ "$total_ok" -lt "$min_ok" ]; then
    echo "FAIL: $total_ok tests passed, fewer than the floor of $min_ok" >&2
    exit 1
fi
if [ -n "$max_failed" ] && [ $((total_tests - total_ok)) -gt "$max_failed" ]; then
    echo "FAIL: $((total_tests - total_ok)) of the $total_tests selected tests did not pass, more than $max_failed" >&2
    exit 1
fi
