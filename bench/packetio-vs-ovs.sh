#!/usr/bin/env bash
# Packet-in and packet-out rates a reactive controller sees, through
# `fulmar run` and through Open vSwitch 3.x's userspace netdev datapath,
# one after the other on the same veths, in one run.
#
#   sudo bench/packetio-vs-ovs.sh [--secs N] [--rates PPS[,PPS...]] [--raised-rate PPS] [--keep DIR]
#
#   ns fpio-a: fpio-a1 == fpio-a0 [port 1] SWITCH [port 2] fpio-b0 == fpio-b1 :ns fpio-b
#   The switch, its two ports and the controller live in ns fpio-sw (a
#   netdev-datapath ovs-vswitchd makes a tap named "ovs-netdev", so it gets
#   a namespace of its own; fulmar runs there too, so both see the same
#   setup). The controller is crates/agent/examples/packetio_rate.rs,
#   connected over TCP on 127.0.0.1 inside fpio-sw (fulmar --listen, OVS
#   set-controller ptcp: with type=primary: by default OVS makes a passive
#   controller a service connection, which gets no packet-ins).
#
# Traffic: one 64-byte UDP frame to a MAC address nobody has, sent from
# ns fpio-a into port 1, at each fixed offered rate of --rates (tcpreplay
# --pps; default 10000,100000) and as fast as one trafgen process goes
# ("max"). Nothing in the switch matches it but the controller's
# table-miss flow.
#
# Each switch configuration, for each offered rate:
#   reactive  the controller installs a table-miss flow (output CONTROLLER,
#             whole packets) and answers every packet-in with a packet-out
#             of its data to port 2, for --secs from its first packet-in.
#             Reported: packet-ins per second it received, how many
#             packet-outs it sent, how many frames reached ns fpio-b
#             (rx_packets of fpio-b1), and the rate A really offered.
# and once:
#   packet-out the controller sends packet-outs of the same frame to port
#             2 back to back for --secs (a BARRIER every 256, at most 8
#             unanswered). Reported: packet-outs per second the switch
#             acknowledged, and per second that reached ns fpio-b.
#
# Configurations, each switch started afresh:
#   fulmar-default  `fulmar run` as shipped: packet-in token bucket 1000/s,
#                   burst 100 (agent::PacketInConfig), queues of 100
#   fulmar-raised   the same with --packet-in-rate RAISED (--raised-rate;
#                   default 0: no rate limit; queues unchanged)
#   ovs-default     ovs-vswitchd as shipped: no controller rate limit
#                   (controller_rate_limit unset; ovs-vswitchd.conf.db(5):
#                   "If no value is specified, rate limiting is
#                   disabled"), controller queue 100 packets
#   ovs-limited     controller_rate_limit=1000, controller_burst_limit=100:
#                   fulmar's default limit, for a like-for-like row
# Ratios are fulmar/OVS: default/default (each as shipped), raised/default
# (neither rate-limited) and default/limited (the same limit).
#
# Nothing is pinned: the generator, the switch and the controller share the
# machine's cores (the figures are only as quiet as the machine is; run it
# under `flock /tmp/fulmar-heavy.lock` on a shared machine). Needs root;
# installs tcpreplay and netsniff-ng (trafgen) with apt if missing. Takes
# about three minutes, bounded to seven (a watchdog stops it); removes
# everything it made on exit, also on Ctrl-C. Names: fpio-* (namespaces,
# links, bridge), /tmp/fpio-bench.*, TCP port 6760 inside fpio-sw.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source bench/ovs-private.sh  # and bench/lib.sh

secs=3
rates=10000,100000
raised=0
keep=
parse_options '[--secs N] [--rates PPS[,PPS...]] [--raised-rate PPS] [--keep DIR]' \
    --secs=secs --rates=rates --raised-rate=raised --keep=keep -- "$@"
[[ $secs =~ ^[0-9]+$ && $secs -ge 1 && $secs -le 30 ]] || { echo "$0: --secs: 1..30" >&2; exit 2; }
[[ $rates =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "$0: --rates: numbers separated by commas" >&2; exit 2; }
[[ $raised =~ ^[0-9]+$ ]] || { echo "$0: --raised-rate: a number (0: no limit)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 1; }
for tool in ovs-vswitchd ovsdb-server ovs-vsctl ovs-appctl python3; do
    command -v "$tool" >/dev/null || { echo "$0: needs $tool (Open vSwitch)" >&2; exit 1; }
done
need=()
command -v tcpreplay >/dev/null || need+=(tcpreplay)
command -v trafgen >/dev/null || need+=(netsniff-ng)
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
cargo build --release --quiet -p fulmar
cargo build --release --quiet -p agent --example packetio_rate
fulmar=$root/target/release/fulmar
client=$root/target/release/examples/packetio_rate

namespaces=(fpio-a fpio-b fpio-sw)
port=6760
work=$(mktemp -d /tmp/fpio-bench.XXXXXX)
pids=()       # OVS daemons
fulmar_pid=
watchdog=
cleanup() {
    cleanup_begin
    # The OVS daemons, then anything still running inside our namespaces
    # (generators: a trafgen parent waits for its child, so every process
    # is told).
    reap_namespaces INT "${namespaces[@]}"
    if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$work"/. "$keep"/ 2>/dev/null; echo "raw outputs: $keep" >&2; fi
    rm -rf "$work"
}
trap cleanup EXIT
bench_deadline 420

counter() { nsx "$1" cat "/sys/class/net/$2/statistics/$3"; }

# --- topology -------------------------------------------------------------
for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
for ns in "${namespaces[@]}"; do
    ip netns add "$ns"
    nsx "$ns" ip link set lo up
    nsx "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    nsx "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
done
for side in a b; do
    ip link add "fpio-${side}0" netns fpio-sw type veth peer name "fpio-${side}1" netns "fpio-$side"
    nsx fpio-sw ip link set "fpio-${side}0" up
    nsx "fpio-$side" ip link set "fpio-${side}1" up
done

# The frame (64 bytes: Ethernet, IPv4, UDP, 22 zero bytes), as a pcap of
# 1000 copies for tcpreplay and as a trafgen packet.
python3 - "$work" <<'EOF'
import struct, sys
ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 50, 0, 0x4000, 64, 17, 0,
                           bytes([10, 15, 0, 1]), bytes([10, 15, 0, 2])))
s = sum(struct.unpack("!10H", ip)); s = (s & 0xffff) + (s >> 16); s = (s & 0xffff) + (s >> 16)
ip[10:12] = struct.pack("!H", ~s & 0xffff)
frame = bytes.fromhex("020000000fff" "020000000f0a" "0800") + bytes(ip) + struct.pack("!HHHH", 9, 9, 30, 0) + bytes(22)
assert len(frame) == 64
with open(f"{sys.argv[1]}/frame.pcap", "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    for i in range(1000):
        f.write(struct.pack("<IIII", 0, i, len(frame), len(frame)) + frame)
with open(f"{sys.argv[1]}/frame.trafgen", "w") as f:
    f.write("{ " + ", ".join("0x%02x" % b for b in frame) + " }\n")
EOF

# --- measurement ----------------------------------------------------------
declare -A R   # R[config.metric] = value
configs=()
gen_rates=()
for r in $(tr ',' ' ' <<<"$rates"); do gen_rates+=("$r"); done
gen_rates+=(max)

gen_start() { # rate|max: a generator in fpio-a, in the background
    local rate=$1
    if [ "$rate" = max ]; then
        # -n: a bound of its own in case nothing stops it.
        nsx fpio-a trafgen -i "$work/frame.trafgen" -o fpio-a1 -P 1 -n $(( (secs + 30) * 5000000 )) \
            --no-sock-mem --notouch-irq --no-cpu-stats >"$work/gen.out" 2>&1 &
    else
        nsx fpio-a timeout $((secs + 40)) tcpreplay -q -i fpio-a1 --pps="$rate" --loop=0 --preload-pcap \
            "$work/frame.pcap" >"$work/gen.out" 2>&1 &
    fi
}
gen_stop() {
    local p
    for _ in $(seq 50); do
        p=$(ip netns pids fpio-a)
        [ -z "$p" ] && return 0
        kill -INT $p 2>/dev/null || true
        sleep 0.1
    done
    kill -9 $(ip netns pids fpio-a) 2>/dev/null || true
}

client_start() { # mode out-file: the controller in fpio-sw; waits for "ready"
    nsx fpio-sw "$client" "$1" --target "tcp:127.0.0.1:$port" --seconds "$secs" --out-port 2 \
        >"$2" 2>"$2.err" &
    client_pid=$!
    for _ in $(seq 100); do
        grep -qs "^ready" "$2.err" && return 0
        kill -0 "$client_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "$0: the controller did not start:" >&2; cat "$2.err" >&2; exit 1
}
client_wait() {
    wait "$client_pid" || { echo "$0: the controller failed:" >&2; cat "$1.err" >&2; exit 1; }
}
field() { sed -n "s/^$1=//p" "$2"; }

measure() { # config
    local cfg=$1 rate out a0 b0 bd0 a1 b1 bd1 t0 t1
    configs+=("$cfg")
    for rate in "${gen_rates[@]}"; do
        echo "== $cfg reactive $rate" >&2
        out=$work/$cfg-reactive-$rate.txt
        client_start reactive "$out"
        a0=$(counter fpio-a fpio-a1 tx_packets)
        b0=$(counter fpio-b fpio-b1 rx_packets)
        bd0=$(counter fpio-b fpio-b1 rx_dropped)
        t0=$(date +%s.%N)
        gen_start "$rate"
        client_wait "$out"
        gen_stop
        t1=$(date +%s.%N)
        sleep 0.3
        a1=$(counter fpio-a fpio-a1 tx_packets)
        b1=$(counter fpio-b fpio-b1 rx_packets)
        bd1=$(counter fpio-b fpio-b1 rx_dropped)
        R[$cfg.offered_$rate]=$(awk -v n=$((a1 - a0)) -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
        R[$cfg.pin_rate_$rate]=$(field packet_in_rate "$out")
        R[$cfg.pouts_$rate]=$(field packet_outs "$out")
        R[$cfg.at_b_$rate]=$((b1 - b0))
        R[$cfg.b_dropped_$rate]=$((bd1 - bd0))
    done
    echo "== $cfg packet-out" >&2
    out=$work/$cfg-packet-out.txt
    b0=$(counter fpio-b fpio-b1 rx_packets)
    client_start packet-out "$out"
    client_wait "$out"
    sleep 0.3
    b1=$(counter fpio-b fpio-b1 rx_packets)
    R[$cfg.po_acked]=$(field packet_outs "$out")
    R[$cfg.po_rate]=$(field packet_out_rate "$out")
    R[$cfg.po_at_b]=$((b1 - b0))
    R[$cfg.po_at_b_rate]=$(awk -v n=$((b1 - b0)) -v s="$(field seconds "$out")" 'BEGIN { printf "%.0f", n / s }')
}

# fulmar: default, then with the packet-in limit raised.
for run in "fulmar-default" "fulmar-raised --packet-in-rate $raised"; do
    read -r cfg extra <<<"$run"
    # Not through nsx: $! must be fulmar itself (SIGINT reaches it).
    # shellcheck disable=SC2086
    ip netns exec fpio-sw "$fulmar" run -i fpio-a0 -i fpio-b0 --listen "tcp:127.0.0.1:$port" \
        --ctl "$work/$cfg.ctl" --mgmt-dir "$work" --saved-tables none $extra \
        >"$work/$cfg.out" 2>"$work/$cfg.err" &
    fulmar_pid=$!
    wait_started "$fulmar_pid" "$work/$cfg.err" || { echo "$0: fulmar did not start:" >&2; cat "$work/$cfg.err" >&2; exit 1; }
    measure "$cfg"
    "$fulmar" ctl -t "$work/$cfg.ctl" stats >"$work/$cfg.stats" 2>&1 || true
    kill -INT "$fulmar_pid"
    for _ in $(seq 100); do kill -0 "$fulmar_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$fulmar_pid" 2>/dev/null || true
    wait "$fulmar_pid" 2>/dev/null || true
    fulmar_pid=
done

# Open vSwitch, userspace netdev datapath, private directory, in fpio-sw.
ovs_private_start "$work/ovs" fpio-sw
vsctl add-br fpio-br -- set bridge fpio-br datapath_type=netdev protocols=OpenFlow13 fail_mode=secure
vsctl add-port fpio-br fpio-a0 -- set interface fpio-a0 ofport_request=1
vsctl add-port fpio-br fpio-b0 -- set interface fpio-b0 ofport_request=2
# type=primary: OVS takes a passive (ptcp:) controller for a service
# connection by default, and those get no packet-ins unless they set a
# miss_send_len; a reactive controller is a primary one.
vsctl set-controller fpio-br "ptcp:$port:127.0.0.1" -- set controller fpio-br type=primary connection_mode=out-of-band
for _ in $(seq 50); do
    [ -n "$(nsx fpio-sw ss -Hltn "sport = :$port")" ] && break
    sleep 0.1
done
ovs_appctl coverage/show >"$work/ovs-coverage-0.txt" 2>&1 || true
measure ovs-default
ovs_appctl coverage/show >"$work/ovs-coverage-1.txt" 2>&1 || true
vsctl set controller fpio-br controller_rate_limit=1000 controller_burst_limit=100
sleep 0.5
measure ovs-limited
ovs_appctl coverage/show >"$work/ovs-coverage-2.txt" 2>&1 || true

# --- report ---------------------------------------------------------------
ratio() { # a b -> a/b (two decimals) or -
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}
rows=()
declare -A label
for rate in "${gen_rates[@]}"; do
    [ "$rate" = max ] && what="max (trafgen)" || what="$rate pps"
    rows+=(offered_$rate pin_rate_$rate pouts_$rate at_b_$rate b_dropped_$rate)
    label[offered_$rate]="reactive, offered $what: A sent/s"
    label[pin_rate_$rate]="  packet-ins/s at the controller"
    label[pouts_$rate]="  packet-outs sent (${secs} s)"
    label[at_b_$rate]="  of them reached B"
    label[b_dropped_$rate]="  B rx_dropped"
done
rows+=(po_rate po_acked po_at_b po_at_b_rate)
label[po_rate]="packet-out: acknowledged/s"
label[po_acked]="  acknowledged (${secs} s)"
label[po_at_b]="  reached B"
label[po_at_b_rate]="  reached B per second"
pairs=("fulmar-default ovs-default" "fulmar-raised ovs-default" "fulmar-default ovs-limited")

echo
echo "fulmar $(git rev-parse --short HEAD 2>/dev/null || echo '?') vs $(ovs-vswitchd --version | head -1);" \
    "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, nothing pinned; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "controller: packetio_rate (one thread), ${secs} s per figure; 64-byte UDP frames from ns fpio-a into port 1, packet-outs to port 2"
echo "fulmar-raised: --packet-in-rate $raised$([ "$raised" = 0 ] && echo ' (no limit)'); ovs-limited: controller_rate_limit=1000, controller_burst_limit=100"
printf '%-40s' ""
for c in "${configs[@]}"; do printf ' %14s' "$c"; done
for p in "${pairs[@]}"; do read -r f o <<<"$p"; printf ' %14s' "${f#fulmar-}/${o#ovs-}"; done
echo
for r in "${rows[@]}"; do
    printf '%-40s' "${label[$r]}"
    for c in "${configs[@]}"; do printf ' %14s' "${R[$c.$r]:--}"; done
    for p in "${pairs[@]}"; do
        read -r f o <<<"$p"
        case $r in
            pin_rate_*|at_b_*|po_rate|po_at_b_rate) printf ' %14s' "$(ratio "${R[$f.$r]:--}" "${R[$o.$r]:--}")" ;;
            *) printf ' %14s' "" ;;
        esac
    done
    echo
done
echo
echo "A sent/s = tx_packets of fpio-a1 over the generator's run (it starts when the controller is ready and stops"
echo "  when the controller is done, so it runs a little longer than the measured ${secs} s)."
echo "packet-ins/s: received in the ${secs} s after the first one; each answered by a packet-out; the controller then"
echo "  deletes its flow and waits for a BARRIER_REPLY, so every packet-out sent has been handled by the switch."
echo "reached B = rx_packets of fpio-b1 (ns fpio-b) over the run; nothing else reaches it."
echo "packet-out: acknowledged = packet-outs the switch answered a later BARRIER for; per second from the first write"
echo "  to the last BARRIER_REPLY; reached B per second = reached B over the same seconds."
for cfg in fulmar-default fulmar-raised; do
    echo; echo "$cfg, its counters at the end (all runs):"
    sed 's/^/  /' "$work/$cfg.stats"
done
echo
echo "ovs coverage (ovs-default, then ovs-limited; events per run):"
python3 - "$work"/ovs-coverage-{0,1,2}.txt <<'EOF'
import re, sys
def read(p):
    d = {}
    try:
        for l in open(p):
            m = re.match(r"(\S+)\s+\S+/sec\s+\S+/sec\s+\S+/sec\s+total: (\d+)", l)
            if m:
                d[m.group(1)] = int(m.group(2))
    except OSError:
        pass
    return d
c = [read(p) for p in sys.argv[1:]]
for k in sorted(set(c[2]) | set(c[1])):
    if re.search(r"packet_in|pinsched|rconn|upcall|ofproto_dpif_expired|dpif_execute|netdev_sent|drop", k):
        d1 = c[1].get(k, 0) - c[0].get(k, 0)
        d2 = c[2].get(k, 0) - c[1].get(k, 0)
        if d1 or d2:
            print(f"  {k:<40} {d1:>12} {d2:>12}")
EOF
echo "  (OVS 3.1 counts every controller upcall as datapath_drop_userspace_action_error, also those that became"
echo "  packet-ins: its upcall callback returns EAGAIN after queuing the packet-in.)"
