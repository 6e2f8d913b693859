#!/usr/bin/env bash
# Runs cargo-fuzz targets, one after the other, each for a given amount of
# CPU time (not wall time: on a shared machine a niced fuzzer gets less
# than a core, and the issue's measure is CPU-hours), and prints per target
# the CPU seconds spent, the inputs executed, the corpus size and whether
# it crashed.
#
#   bench/fuzz.sh [--cpu-seconds N] [--nice N] [--timeout S] [TARGET ...]
#       default: 3600 CPU seconds each, nice 19, libFuzzer's 1200 s per
#       input, the targets below
#
# libFuzzer times an input by the wall clock: a fuzzer stopped (SIGSTOP,
# to keep a benchmark's CPUs quiet) for longer than --timeout reports the
# input it was on as a timeout when it goes on. Give a larger --timeout
# when you mean to pause the fuzzers. Inputs written as slow-unit-* are
# reported, not counted as failures.
#
# Seeds each target's corpus (fuzz/corpus/TARGET, not committed) with
# inputs made from the repository (example configurations, os-ken's
# OpenFlow vectors, a pcap and a pcapng written here, ctl and NETCONF
# requests) the first time. Needs the nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly --profile minimal && cargo install cargo-fuzz
# A crash leaves its input in fuzz/artifacts/TARGET/ and makes the script
# exit 1 after the other targets have run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

cpu=3600
nice_level=19
timeout=1200
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu-seconds) cpu=$2; shift 2 ;;
        --nice) nice_level=$2; shift 2 ;;
        --timeout) timeout=$2; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(config_toml ctl_json pcap_read netconf ovsdb_stream agentx_pdu ofp_decode packet_parse flowtext_parse)

seed() {
    local t=$1 d=fuzz/corpus/$1
    [ -d "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ] && return 0
    mkdir -p "$d"
    case "$t" in
        config_toml)
            for f in crates/datastore/examples/*.toml; do cp "$f" "$d/"; done ;;
        ctl_json)
            printf '{"id":1,"method":"add-port","params":["br0","eth3","--","set-fail-mode","br0","standalone"]}' > "$d/txn"
            printf '{"id":"x","method":"add-flow","params":["br0","table=0,priority=1,in_port=1,actions=output:2"]}{"id":2,"method":"show","params":[]}' > "$d/two"
            printf '{"id":3,"method":"set-controller","params":["br0","tcp:192.0.2.1:6653","ptcp:6653"]}' > "$d/ctl" ;;
        pcap_read)
            python3 - "$d" <<'EOF'
import struct, sys
d = sys.argv[1]
frame = bytes.fromhex("02000000000b02000000000a8100000a08004500001c0001000040110000c0a80001c0a80002003500350008")
with open(f"{d}/classic.pcap", "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i in range(3):
        f.write(struct.pack("<IIII", i, 7, len(frame), len(frame)) + frame)
def block(t, body):
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", t, n) + body + struct.pack("<I", n)
ng = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
ng += block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HH", 9, 1) + b"\x09\0\0\0" + b"\0\0\0\0")
for i in range(3):
    ng += block(6, struct.pack("<IIIII", 0, 0, i, len(frame), len(frame)) + frame)
ng += block(3, struct.pack("<I", len(frame)) + frame)
open(f"{d}/capture.pcapng", "wb").write(ng)
EOF
            ;;
        netconf)
            local b='urn:ietf:params:xml:ns:netconf:base:1.0'
            printf '\x02<hello xmlns="%s"><capabilities><capability>%s</capability></capabilities></hello>]]>]]><rpc message-id="1" xmlns="%s"><get-config><source><running/></source></get-config></rpc>]]>]]>' "$b" "$b" "$b" > "$d/get"
            printf '\x00<rpc message-id="2" xmlns="%s"><edit-config><target><running/></target><config><capable-switch xmlns="urn:onf:config:yang"><logical-switches><switch><id>br0</id><controllers><controller><id>c</id><ip-address>192.0.2.1</ip-address><port>6653</port><protocol>tcp</protocol></controller></controllers></switch></logical-switches></capable-switch></config></edit-config></rpc>]]>]]>' "$b" > "$d/edit" ;;
        ofp_decode)
            local osken
            osken=$("$root/.venv/bin/python" -c 'import os, os_ken; print(os.path.dirname(os_ken.__file__))' 2>/dev/null || true)
            if [ -n "$osken" ]; then cp "$osken"/tests/packet_data/of13/*.packet "$d/" 2>/dev/null || true; fi ;;
        flowtext_parse)
            cp examples/gateway.flows "$d/" ;;
    esac
}

cpu_of() { # utime+stime of a process and its children, in seconds
    awk '{print int(($14+$15+$16+$17)/ENVIRON["HZ"])}' "/proc/$1/stat" 2>/dev/null || echo 0
}
export HZ
HZ=$(getconf CLK_TCK)

command -v cargo-fuzz >/dev/null 2>&1 || { echo "needs cargo-fuzz (cargo install cargo-fuzz)" >&2; exit 2; }
# Build every target first, so later edits to the tree cannot change or
# break what the runs below execute.
for t in "${targets[@]}"; do
    cargo +nightly fuzz build --release "$t" >/dev/null 2>&1 || cargo +nightly fuzz build --release "$t"
done
failed=0
printf '%-16s %10s %14s %10s %s\n' target cpu_s execs corpus result
for t in "${targets[@]}"; do
    seed "$t"
    bin=fuzz/target/x86_64-unknown-linux-gnu/release/$t
    log=$(mktemp)
    mkdir -p "fuzz/artifacts/$t"
    nice -n "$nice_level" "$bin" -print_final_stats=1 -timeout="$timeout" \
        -artifact_prefix="fuzz/artifacts/$t/" "fuzz/corpus/$t" >"$log" 2>&1 &
    pid=$!
    # The last CPU time read while it ran (after it exits /proc has none).
    spent=0
    while kill -0 "$pid" 2>/dev/null; do
        now=$(cpu_of "$pid")
        [ "$now" -gt 0 ] && spent=$now
        if [ "$spent" -ge "$cpu" ]; then
            kill -INT "$pid"
            break
        fi
        sleep 5
    done
    rc=0
    wait "$pid" || rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    corpus=$(ls "fuzz/corpus/$t" | wc -l)
    if grep -q 'ERROR: libFuzzer\|panicked at\|==ERROR' "$log" || ls "fuzz/artifacts/$t" | grep -qv '^slow-unit-'; then
        result="CRASH (fuzz/artifacts/$t/, log $log)"
        failed=1
    else
        result="no crash (exit $rc)"
        rm -f "$log"
    fi
    printf '%-16s %10s %14s %10s %s\n' "$t" "$spent" "${execs:-?}" "$corpus" "$result"
done
exit $failed
