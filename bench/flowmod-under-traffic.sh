#!/usr/bin/env bash
# Flow-mod rate while fulmar forwards: `fulmar run` on two veths between
# two network namespaces carries iperf3 traffic while one OpenFlow client
# (crates/agent/examples/flowmod_rate.rs --target) installs N flows into
# table 0 and waits for the barrier reply. Prints, for each N, the
# flow-mods/s with no traffic and under traffic, and the forwarding rate
# before and during the install (and their ratio).
#
#   sudo bench/flowmod-under-traffic.sh [--flows 100000,1000000] [--traffic udp|tcp]
#                                        [--rate 10M] [--len 64] [--keep DIR]
#
#   ns fct-ba: fctba-p 10.9.8.1 == fctba [port 1] fulmar [port 2] fctbb == fctbb-p 10.9.8.2 :ns fct-bb
#
# Traffic: iperf3 A -> B, UDP at a fixed offered rate (--rate, payload
# --len bytes; default 10 Mbit/s of 64-byte datagrams, about 20 kpps, below
# what the switch forwards here, so a drop means the install disturbed it)
# or TCP (as fast as it goes: then the client, the switch and iperf3
# compete for the cores). The forwarding rate is what B received, from the receiver's
# 0.1 s intervals: "before" averages the whole first run (no flow-mods),
# "during" the intervals inside the install window (first flow-mod
# written .. barrier reply, as flowmod_rate prints it in Unix time).
#
# The installed flows match in_port 1..48, IPv4 and ipv4_dst 11.0.0.0 + i
# (cookie 0xf10e), at a priority above the two forwarding flows (in_port
# 1 -> 2, 2 -> 1), so the traffic (10.9.8.x) keeps its flows while the
# table it is looked up in grows to N + 2 entries. Before each install the
# previous run's flows are deleted (not timed). The bridge's per-table
# capacity is raised to hold them (flow_table_capacity).
#
# Nothing is pinned: the client, the switch and iperf3 share the cores.
# Needs root; removes what it made on exit (also on Ctrl-C).
# Names: fct-b* (namespaces, links), ports 6740-6742 on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
root=$PWD

flows=100000,1000000
traffic=udp
rate=10M
len=64
keep=
parse_options '[--flows N[,N...]] [--traffic udp|tcp] [--rate RATE] [--len BYTES] [--keep DIR]' \
    --flows=flows --traffic=traffic --rate=rate --len=len --keep=keep -- "$@"
case "$traffic" in udp|tcp) ;; *) echo "$0: --traffic udp or tcp" >&2; exit 2 ;; esac

[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 1; }
for tool in iperf3 ethtool python3; do
    command -v "$tool" >/dev/null || { echo "$0: needs $tool" >&2; exit 1; }
done
cargo build --release --quiet -p fulmar
cargo build --release --quiet -p agent --example flowmod_rate
fulmar=$root/target/release/fulmar
client=$root/target/release/examples/flowmod_rate

ctl_port=6740
iperf_port=6741
work=$(mktemp -d /tmp/fct-flowmod-bench.XXXXXX)
fpid=
spid=

cleanup() {
    set +e
    [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
    [ -n "$fpid" ] && kill -INT "$fpid" 2>/dev/null && wait "$fpid" 2>/dev/null
    ip netns del fct-ba 2>/dev/null
    ip netns del fct-bb 2>/dev/null
    ip link del fctba 2>/dev/null
    ip link del fctbb 2>/dev/null
    if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$work"/. "$keep"/; fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

cleanup_links() {
    ip netns del fct-ba 2>/dev/null || true
    ip netns del fct-bb 2>/dev/null || true
    ip link del fctba 2>/dev/null || true
    ip link del fctbb 2>/dev/null || true
}
cleanup_links
for side in a:1 b:2; do
    s=${side%:*} n=${side#*:}
    ip netns add "fct-b$s"
    ip link add "fctb$s" type veth peer name "fctb$s-p" netns "fct-b$s"
    ip link set "fctb$s" up
    ip -n "fct-b$s" link set "fctb$s-p" up
    ip -n "fct-b$s" link set lo up
    ip -n "fct-b$s" addr add "10.9.8.$n/24" dev "fctb$s-p"
    # Real frames: no segmentation or checksum offload on either end.
    ethtool -K "fctb$s" tso off gso off gro off tx off >/dev/null 2>&1 || true
    ip netns exec "fct-b$s" ethtool -K "fctb$s-p" tso off gso off gro off tx off >/dev/null 2>&1 || true
done

max=$(echo "$flows" | tr ',' '\n' | sort -n | tail -1)
cat > "$work/bench.toml" <<EOF
[[bridges]]
name = "br0"
dpid = "0x1"
flow_table_capacity = $((max + 1024))
flows = ["table=0,priority=10,in_port=1,actions=output:2", "table=0,priority=10,in_port=2,actions=output:1"]
$(ports_toml fctba fctbb)
[[bridges.controllers]]
listen = "tcp:127.0.0.1:$ctl_port"
EOF
"$fulmar" run --config "$work/bench.toml" > "$work/fulmar.out" 2> "$work/fulmar.err" &
fpid=$!
for _ in $(seq 50); do
    grep -q "running bridges" "$work/fulmar.err" 2>/dev/null && break
    sleep 0.1
done
grep -q "running bridges" "$work/fulmar.err" || { cat "$work/fulmar.err" >&2; exit 1; }
ip netns exec fct-ba ping -c 3 -i 0.2 -q 10.9.8.2 >/dev/null || { echo "$0: no ping through fulmar" >&2; exit 1; }

ip netns exec fct-bb iperf3 -s -p "$iperf_port" -i 0.1 --json > "$work/iperf-server.log" 2>&1 &
spid=$!
sleep 0.5

# iperf3 A -> B for $1 seconds; the client's JSON (with the server's) in $2.
traffic_run() {
    local secs=$1 out=$2
    local args=(-c 10.9.8.2 -p "$iperf_port" -t "$secs" -i 0.1 --json --get-server-output)
    if [ "$traffic" = udp ]; then
        args+=(-u -b "$rate" -l "$len")
    fi
    ip netns exec fct-ba iperf3 "${args[@]}" > "$out"
}

# Receiver-side rate (Mbit/s and kpps) from a client JSON, over the
# server intervals inside [t0, t1] (Unix seconds; whole run if omitted).
rate_of() {
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t0 = float(sys.argv[2]) if len(sys.argv) > 2 else None
t1 = float(sys.argv[3]) if len(sys.argv) > 3 else None
srv = d.get("server_output_json") or {}
start = srv.get("start", {}).get("timestamp", {}).get("timesecs") or d["start"]["timestamp"]["timesecs"]
bits = pkts = secs = 0.0
for iv in srv.get("intervals", []):
    s = iv["sum"]
    a, b = start + s["start"], start + s["end"]
    if t0 is not None and (b <= t0 or a >= t1):
        continue
    secs += s["seconds"]
    bits += s["bytes"] * 8
    if "packets" in s:
        pkts += s["packets"] - s.get("lost_packets", 0)
if secs == 0:
    print("nan nan")
else:
    print(f"{bits / secs / 1e6:.1f} {pkts / secs / 1e3:.1f}")
PY
}

fm_rate_of() { grep '^run 1:' "$1" | sed -E 's/.*: ([0-9]+) flow-mods\/s.*/\1/'; }

printf '\n%-8s %-7s %-12s %-14s %-22s %-22s %-5s\n' flows traffic "fm/s idle" "fm/s traffic" "before Mbit/s (kpps)" "during Mbit/s (kpps)" ratio
for n in $(echo "$flows" | tr ',' ' '); do
    # The same install with no traffic, for comparison.
    "$client" "$n" 1 --target "tcp:127.0.0.1:$ctl_port" > "$work/client-idle-$n.txt"
    idle_rate=$(fm_rate_of "$work/client-idle-$n.txt")
    # Before: traffic alone (the previous run's flows still installed).
    traffic_run 4 "$work/before-$n.json"
    read -r b_mbit b_kpps < <(rate_of "$work/before-$n.json")
    # During: traffic running, then the install; the traffic lasts long
    # enough to cover the delete of the previous flows and the install.
    secs=$((6 + n / 20000))
    traffic_run "$secs" "$work/during-$n.json" &
    tpid=$!
    sleep 1.5
    "$client" "$n" 1 --target "tcp:127.0.0.1:$ctl_port" > "$work/client-$n.txt"
    wait "$tpid"
    line=$(grep '^run 1:' "$work/client-$n.txt")
    fm_rate=$(fm_rate_of "$work/client-$n.txt")
    read -r t0 t1 < <(echo "$line" | sed -E 's/.*\(window ([0-9.]+) ([0-9.]+);.*/\1 \2/')
    next_ms=$(echo "$line" | sed -E 's/.*barrier: ([0-9.]+) ms\).*/\1/')
    read -r d_mbit d_kpps < <(rate_of "$work/during-$n.json" "$t0" "$t1")
    ratio=$(python3 -c "print(f'{float(\"$d_mbit\") / float(\"$b_mbit\"):.2f}')" 2>/dev/null || echo nan)
    printf '%-8s %-7s %-12s %-14s %-22s %-22s %-5s\n' "$n" "$traffic" "$idle_rate" "$fm_rate" "$b_mbit ($b_kpps)" "$d_mbit ($d_kpps)" "$ratio"
    printf '         install window under traffic %.2f s; the next flow-mod + barrier %s ms; fulmar RSS %s MiB\n' \
        "$(python3 -c "print($t1 - $t0)")" "$next_ms" "$(( $(ps -o rss= -p "$fpid") / 1024 ))"
done
