#!/usr/bin/env bash
# Flow-mod install speed as real clients feel it, fulmar beside Open
# vSwitch 3.1 (userspace netdev datapath) in the same run:
#
#  1. `ovs-ofctl -O OpenFlow13 add-flows` of N gateway flows (in_port +
#     VLAN id -> pop_vlan, push_mpls, set mpls_label, output). ovs-ofctl
#     sends a BARRIER after every flow-mod and waits for its reply, so this
#     is N round trips: what a controller that syncs often feels. Rounds
#     alternate fulmar, OVS, fulmar, OVS...; each round starts from an empty
#     table (del-flows, not timed).
#  2. A pipelined client (crates/agent/examples/flowmod_rate.rs: every
#     flow-mod written back to back, one BARRIER at the end) installing M
#     flows (--pipelined, default 100000,1000000) into each switch.
#
#     Beside them, the same add-flows into a floor: a "switch" that
#     applies nothing and answers each BARRIER at once, spinning on its
#     socket (crates/agent/examples/barrier_floor.rs), started only for its
#     own timing. What it takes is ovs-ofctl's own work and the kernel's
#     wake-ups: no switch can do a round trip faster on this machine.
#
# Prints the seconds and rates side by side with their ratios. The targets
# of issue 15: fulmar's add-flows time <= 2/3 of OVS's; pipelined >= 200K
# flow-mods/s at 100K and 1M flows and >= 5x OVS with the same client.
#
#   sudo bench/flowmods-vs-ovs.sh [--flows N] [--rounds R] [--pipelined N[,N...]] [--keep DIR]
#
# fulmar runs with default settings (`fulmar run --config`: one bridge, two
# memory ports, a ptcp controller listener, its management socket in a
# private directory). OVS runs from a private directory inside its own
# network namespace (its netdev datapath makes a tap named "ovs-netdev").
# Nothing is pinned; run it under `flock /tmp/fulmar-heavy.lock` on a shared
# machine. Needs root (the namespace). Names: fc-fm* (namespace, bridge),
# TCP ports 6750 (fulmar) and 6751 (OVS, inside its namespace).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source bench/ovs-private.sh  # and bench/lib.sh

flows=100000
rounds=2
pipelined=100000,1000000
keep=
parse_options '[--flows N] [--rounds R] [--pipelined N[,N...]|none] [--keep DIR]' \
    --flows=flows --rounds=rounds --pipelined=pipelined --keep=keep -- "$@"
[ "$(id -u)" = 0 ] || { echo "$0: needs root (a network namespace for OVS)" >&2; exit 1; }
for tool in ovs-vswitchd ovsdb-server ovs-ofctl ovs-vsctl python3; do
    command -v "$tool" >/dev/null || { echo "$0: needs $tool" >&2; exit 1; }
done
cargo build --release --quiet -p fulmar
cargo build --release --quiet -p agent --example flowmod_rate --example barrier_floor
fulmar=$root/target/release/fulmar
client=$root/target/release/examples/flowmod_rate
floor=$root/target/release/examples/barrier_floor

ns=fc-fmovs
fport=6750
oport=6751
work=$(mktemp -d /tmp/fc-flowmods.XXXXXX)
fpid=
pids=()
cleanup() {
    set +e
    [ -n "$fpid" ] && kill -INT "$fpid" 2>/dev/null && wait "$fpid" 2>/dev/null
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    sleep 0.2
    ip netns del "$ns" 2>/dev/null
    if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$work"/. "$keep"/; fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The gateway flows: ports 1..48 toward the data centers, 4094 VLANs each.
python3 - "$flows" > "$work/gateway.flows" <<'PY'
import sys
n = int(sys.argv[1])
for i in range(n):
    port, vid = 1 + i // 4094, 1 + i % 4094
    print(f"table=0,priority=100,in_port={port},dl_vlan={vid},"
          f"actions=pop_vlan,push_mpls:0x8847,set_field:{16 + i}->mpls_label,output:{100 + port % 8}")
PY

# fulmar, default settings.
cat > "$work/fulmar.toml" <<EOF
[[bridges]]
name = "br0"
$(ports_toml --backend memory m1 m2)
[[bridges.controllers]]
listen = "tcp:127.0.0.1:$fport"
EOF
"$fulmar" run --config "$work/fulmar.toml" --ctl "$work/fulmar.ctl" --mgmt-dir "$work" \
    > "$work/fulmar.out" 2> "$work/fulmar.err" &
fpid=$!
for _ in $(seq 100); do
    [ -S "$work/br0.mgmt" ] && break
    sleep 0.1
done
[ -S "$work/br0.mgmt" ] || { cat "$work/fulmar.err" >&2; exit 1; }

# Open vSwitch, private directory, its own namespace.
ip netns del "$ns" 2>/dev/null || true
ip netns add "$ns"
ip -n "$ns" link set lo up
ovs_private_start "$work/ovs" "$ns"
vsctl add-br fc-fmbr -- set bridge fc-fmbr datapath_type=netdev protocols=OpenFlow13 fail_mode=secure \
    -- set-controller fc-fmbr "ptcp:$oport:127.0.0.1"
for _ in $(seq 50); do
    [ -S "$work/ovs/fc-fmbr.mgmt" ] && break
    sleep 0.1
done

F=(unix:"$work/br0.mgmt")
O=(unix:"$work/ovs/fc-fmbr.mgmt")
count() { ovs-ofctl -O OpenFlow13 dump-aggregate "$1" | sed -nE 's/.*flow_count=([0-9]+).*/\1/p'; }
timed_add() {
    local target=$1
    ovs-ofctl -O OpenFlow13 del-flows "$target"
    local t0 t1
    t0=$(date +%s.%N)
    ovs-ofctl -O OpenFlow13 add-flows "$target" "$work/gateway.flows"
    t1=$(date +%s.%N)
    local got
    got=$(count "$target")
    [ "$got" = "$flows" ] || { echo "$0: $target holds $got flows, not $flows" >&2; exit 1; }
    python3 -c "print(f'{$t1 - $t0:.2f}')"
}
timed_floor() {
    "$floor" "$work/floor.sock" > "$work/floor.out" 2>&1 &
    local p=$!
    for _ in $(seq 50); do
        [ -S "$work/floor.sock" ] && break
        sleep 0.1
    done
    local t0 t1
    t0=$(date +%s.%N)
    ovs-ofctl -O OpenFlow13 add-flows "unix:$work/floor.sock" "$work/gateway.flows"
    t1=$(date +%s.%N)
    sleep 0.1
    kill "$p" 2>/dev/null
    wait "$p" 2>/dev/null || true
    grep -q "after $flows flow-mods" "$work/floor.out" ||
        { echo "$0: the floor did not see $flows flow-mods" >&2; cat "$work/floor.out" >&2; exit 1; }
    rm -f "$work/floor.sock"
    python3 -c "print(f'{$t1 - $t0:.2f}')"
}

echo "fulmar $(git rev-parse --short HEAD 2>/dev/null || echo '?') vs $(ovs-vswitchd --version | head -1), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
echo
echo "ovs-ofctl -O OpenFlow13 add-flows, $flows gateway flows (a BARRIER after each flow-mod):"
printf '  %-6s %-10s %-10s %-10s %-13s %-13s %-16s %s\n' round "fulmar s" "OVS s" "floor s" \
    "fulmar fm/s" "OVS fm/s" "fulmar/OVS time" "floor/OVS time"
fs=() os=()
for r in $(seq "$rounds"); do
    f=$(timed_add "${F[0]}")
    o=$(timed_add "${O[0]}")
    z=$(timed_floor)
    fs+=("$f") os+=("$o")
    printf '  %-6s %-10s %-10s %-10s %-13s %-13s %-16s %s\n' "$r" "$f" "$o" "$z" \
        "$(python3 -c "print(int($flows / $f))")" "$(python3 -c "print(int($flows / $o))")" \
        "$(python3 -c "print(f'{$f / $o:.2f}')")" "$(python3 -c "print(f'{$z / $o:.2f}')")"
done
ft=$(printf '%s\n' "${fs[@]}" | sort -n | head -1)
ot=$(printf '%s\n' "${os[@]}" | sort -n | head -1)
ratio=$(python3 -c "print(f'{$ft / $ot:.2f}')")
met=$(python3 -c "print('met' if $ft <= $ot * 2 / 3 else 'NOT met')")
echo "  best: fulmar $ft s, OVS $ot s, ratio $ratio (target <= 0.67: $met)"
ovs-ofctl -O OpenFlow13 del-flows "${F[0]}"
ovs-ofctl -O OpenFlow13 del-flows "${O[0]}"

if [ "$pipelined" != none ]; then
    echo
    echo "pipelined client (flowmod_rate: N flow-mods back to back, one BARRIER):"
    printf '  %-9s %-14s %-14s %-8s %s\n' flows "fulmar fm/s" "OVS fm/s" ratio "targets (>= 200K, >= 5x)"
    rate_of() { sed -nE 's/^run 1: .*: ([0-9]+) flow-mods\/s.*/\1/p' "$1"; }
    for n in $(echo "$pipelined" | tr ',' ' '); do
        "$client" "$n" 1 --target "tcp:127.0.0.1:$fport" > "$work/pipe-fulmar-$n.txt"
        ip netns exec "$ns" "$client" "$n" 1 --target "tcp:127.0.0.1:$oport" > "$work/pipe-ovs-$n.txt"
        fr=$(rate_of "$work/pipe-fulmar-$n.txt")
        orate=$(rate_of "$work/pipe-ovs-$n.txt")
        printf '  %-9s %-14s %-14s %-8s %s\n' "$n" "$fr" "$orate" \
            "$(python3 -c "print(f'{$fr / $orate:.1f}')")" \
            "$(python3 -c "print(('met' if $fr >= 200000 else 'NOT met') + ', ' + ('met' if $fr >= 5 * $orate else 'NOT met'))")"
        # Empty both before the next size (not timed).
        ovs-ofctl -O OpenFlow13 del-flows "${F[0]}"
        ovs-ofctl -O OpenFlow13 del-flows "${O[0]}"
    done
fi
echo
echo "fulmar RSS at the end: $(( $(ps -o rss= -p "$fpid") / 1024 )) MiB"
