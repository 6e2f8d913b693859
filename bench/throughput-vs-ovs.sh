#!/usr/bin/env bash
# fulmar vs Open vSwitch (userspace netdev datapath): ping RTT, iperf3 TCP
# and UDP through each switch, between two network namespaces, in one run.
#
#   sudo bench/throughput-vs-ovs.sh [--secs N] [--udp-rate 200M] [--workers N] [--queue-delay-us N]
#                                   [--keep DIR] [--with-socket]
#
# --keep DIR copies the raw outputs (iperf3 JSON, switch logs) there.
# --with-socket adds a fulmar run-to-completion run with --afpacket-mode socket
# (a packet socket per port, the default before the TPACKET_V2 ring).
#
#   ns ftp-a: ftp-a1 10.0.0.1 == ftp-a0 [port 1] SWITCH [port 2] ftp-b0 == ftp-b1 10.0.0.2 :ns ftp-b
#   (the switch and its ports ftp-a0, ftp-b0 live in ns ftp-sw: a netdev-datapath
#   ovs-vswitchd makes a tap named "ovs-netdev", so only one can run per
#   namespace, and another OVS, e.g. tests/conformance/ryu-of13.sh, may hold
#   the root one. fulmar runs there too, so both see the same setup.)
#   baseline: ns ftp-da: ftp-d1 10.0.0.1 ======== ftp-d2 10.0.0.2 :ns ftp-db (a plain veth pair)
#
# The switches, one after another on the same veths and with the same two
# static flows (port 1 -> 2, 2 -> 1): fulmar --mode run-to-completion,
# fulmar --mode rx-worker-tx (both --io afpacket, ring mode, the defaults)
# and ovs-vswitchd 3.x with a netdev bridge (fail_mode=secure, OpenFlow13,
# flows added with ovs-ofctl). For each: 20 pings 10 ms apart, iperf3 TCP
# A->B, iperf3 UDP at a fixed offered rate with 64- and 1400-byte payloads
# (receiver-side loss, split into B's own UDP socket and before B), the
# switch's own drop counters, and frames the kernel put on the switch's
# veths that the switch never read (packet-socket overflow). Offloads (TSO,
# GSO, GRO, TX checksum) are off on every veth, also for the baseline, so
# every frame is a real <= 1500-byte frame with a full checksum.
#
# Nothing is pinned: iperf3 client, iperf3 server and the switch share the
# machine's cores (the figures are only as quiet as the machine is). Needs
# root; installs iperf3/ethtool with apt if missing. Bounded to about four
# minutes (a watchdog stops it); removes everything it made on exit, also
# on Ctrl-C. Names: ftp-* (links, namespaces, bridge), /tmp/ftp-bench.*.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source bench/ovs-private.sh  # and bench/lib.sh

secs=5
udp_rate=200M
workers=
queue_delay=
keep=
with_socket=
parse_options '[--secs N] [--udp-rate RATE] [--workers N] [--queue-delay-us N] [--keep DIR] [--with-socket]' \
    --secs=secs --udp-rate=udp_rate --workers=workers --queue-delay-us=queue_delay --keep=keep \
    --with-socket=with_socket=1 -- "$@"

[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 1; }
fulmar=$root/target/release/fulmar
[ -x "$fulmar" ] || { echo "$0: build first: cargo build --release -p fulmar" >&2; exit 1; }
for tool in iperf3 ethtool; do
    command -v "$tool" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null
done
command -v ovs-vswitchd >/dev/null || { echo "$0: needs Open vSwitch (ovs-vswitchd)" >&2; exit 1; }

work=$(mktemp -d /tmp/ftp-bench.XXXXXX)
pids=()       # long-lived helpers (iperf3 servers, OVS daemons)
fulmar_pid=
watchdog=
cleanup() {
    cleanup_begin
    # Our daemons, then anything still running inside our namespaces.
    reap_namespaces TERM ftp-a ftp-b ftp-da ftp-db ftp-sw
    rm -rf "$work"
}
trap cleanup EXIT
# The whole run is bounded: the watchdog stops it (and cleanup runs).
bench_deadline 230

quiet_link() { # [ns] dev: no offloads, no IPv6 chatter, up
    local pre=()
    [ $# = 2 ] && pre=(ip netns exec "$1") && shift
    "${pre[@]}" ethtool -K "$1" tx off tso off gso off gro off >/dev/null 2>&1 || true
    "${pre[@]}" sysctl -qw "net.ipv6.conf.$1.disable_ipv6=1" 2>/dev/null || true
    "${pre[@]}" ip link set "$1" up
}

# --- topology -------------------------------------------------------------
for ns in ftp-a ftp-b ftp-da ftp-db ftp-sw; do ip netns del "$ns" 2>/dev/null || true; done
ip netns add ftp-sw
nsx ftp-sw ip link set lo up
for side in a b; do
    ns=ftp-$side
    ip netns add "$ns"
    ip link add "ftp-${side}0" netns ftp-sw type veth peer name "ftp-${side}1" netns "$ns"
    quiet_link ftp-sw "ftp-${side}0"
    quiet_link "$ns" "ftp-${side}1"
    nsx "$ns" ip link set lo up
done
ip -n ftp-a addr add 10.0.0.1/24 dev ftp-a1
ip -n ftp-b addr add 10.0.0.2/24 dev ftp-b1
ip netns add ftp-da
ip netns add ftp-db
ip link add ftp-d1 netns ftp-da type veth peer name ftp-d2 netns ftp-db
quiet_link ftp-da ftp-d1
quiet_link ftp-db ftp-d2
ip -n ftp-da addr add 10.0.0.1/24 dev ftp-d1
ip -n ftp-db addr add 10.0.0.2/24 dev ftp-d2

printf 'table=0,priority=10,in_port=1,actions=output:2\ntable=0,priority=10,in_port=2,actions=output:1\n' >"$work/flows"

# --- measurement ----------------------------------------------------------
declare -A R   # R[config.metric] = value
configs=()

kernel_rx() { # frames the kernel delivered to the switch's two veth ends
    echo $(( $(nsx ftp-sw cat /sys/class/net/ftp-a0/statistics/rx_packets) + $(nsx ftp-sw cat /sys/class/net/ftp-b0/statistics/rx_packets) ))
}

kernel_drops() { # sum of rx/tx dropped over the four switch-side veth ends
    local n=0 v
    for p in "ftp-sw ftp-a0" "ftp-sw ftp-b0" "ftp-a ftp-a1" "ftp-b ftp-b1"; do
        set -- $p
        for c in rx_dropped tx_dropped; do v=$(nsx "$1" cat "/sys/class/net/$2/statistics/$c"); n=$((n + v)); done
    done
    echo "$n"
}

iperf_json() { # file what -> prints the number(s) asked for
    python3 - "$1" "$2" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("-"); sys.exit()
if "error" in d:
    print("-"); sys.exit()
e = d.get("end", {})
what = sys.argv[2]
if what == "tcp":
    r, s = e.get("sum_received", {}), e.get("sum_sent", {})
    print(f'{r.get("bits_per_second", 0) / 1e6:.0f} {s.get("retransmits", "-")}')
else:
    # UDP: the client's report carries the server's (receiver's) counts.
    s, r = e.get("sum_sent", {}), e.get("sum_received", {})
    print(f'{s.get("packets", 0) / (s.get("seconds") or 1) / 1e3:.0f} '
          f'{r.get("bits_per_second", 0) / 1e6:.1f} {r.get("lost_percent", 0):.2f} '
          f'{r.get("lost_packets", 0)}')
EOF
}

port=5200
iperf() { # client-ns json-file iperf3-client-args...: a fresh one-off server per test
    local ns=$1 json=$2 sns srv; shift 2
    [ "$ns" = ftp-a ] && sns=ftp-b || sns=ftp-db
    port=$((port + 1))
    ip netns exec "$sns" iperf3 -s -1 -B 10.0.0.2 -p "$port" >"$json.server" 2>&1 &
    srv=$!
    for _ in $(seq 50); do
        [ -n "$(nsx "$sns" ss -Hltn "sport = :$port")" ] && break
        sleep 0.05
    done
    timeout $((secs + 10)) ip netns exec "$ns" iperf3 -c 10.0.0.2 -p "$port" -t "$secs" --connect-timeout 2000 -J "$@" \
        >"$json" 2>&1 || true
    for _ in $(seq 30); do kill -0 "$srv" 2>/dev/null || break; sleep 0.1; done
    kill "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
}

rcvbuf_errors() { # client-ns -> UDP RcvbufErrors of the receiving namespace
    local sns
    [ "$1" = ftp-a ] && sns=ftp-b || sns=ftp-db
    nsx "$sns" awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 } else print $c }' /proc/net/snmp
}

measure() { # config client-ns
    local cfg=$1 ns=$2 out v
    configs+=("$cfg")
    echo "== $cfg" >&2
    nsx "$ns" ping -n -q -c 3 -i 0.05 -W 1 10.0.0.2 >/dev/null 2>&1 || true   # ARP, warm-up
    out=$(nsx "$ns" ping -n -q -c 20 -i 0.01 -W 1 10.0.0.2 2>&1 || true)
    R[$cfg.ping_loss]=$(grep -oE '[0-9.]+% packet loss' <<<"$out" | cut -d% -f1 || true)
    if [[ $out =~ =\ ([0-9.]+)/([0-9.]+)/([0-9.]+)/ ]]; then
        R[$cfg.rtt_min]=${BASH_REMATCH[1]}; R[$cfg.rtt_avg]=${BASH_REMATCH[2]}; R[$cfg.rtt_max]=${BASH_REMATCH[3]}
    fi
    iperf "$ns" "$work/$cfg-tcp.json"
    read -ra v <<<"$(iperf_json "$work/$cfg-tcp.json" tcp)"
    R[$cfg.tcp_mbps]=${v[0]:--}; R[$cfg.tcp_retr]=${v[1]:--}
    for len in 64 1400; do
        b0=$(rcvbuf_errors "$ns")
        iperf "$ns" "$work/$cfg-udp$len.json" -u -b "$udp_rate" -l "$len"
        b1=$(rcvbuf_errors "$ns")
        read -ra v <<<"$(iperf_json "$work/$cfg-udp$len.json" udp)"
        R[$cfg.udp${len}_kpps_sent]=${v[0]:--}; R[$cfg.udp${len}_mbps_rcvd]=${v[1]:--}; R[$cfg.udp${len}_loss]=${v[2]:--}
        # Where the lost datagrams went: B's own UDP socket overflowing (the
        # receiver too slow), or before B (the switch path).
        R[$cfg.udp${len}_lost_at_b]=$((b1 - b0))
        if [[ ${v[3]:-} =~ ^[0-9]+$ ]]; then R[$cfg.udp${len}_lost_path]=$((v[3] - (b1 - b0))); fi
    done
}

# Baseline: the direct veth pair.
measure direct ftp-da

# fulmar, both thread modes (and, with --with-socket, socket mode).
runs=("fulmar-rtc run-to-completion ring" "fulmar-rwt rx-worker-tx ring")
[ -n "$with_socket" ] && runs+=("fulmar-socket run-to-completion socket")
for run in "${runs[@]}"; do
    read -r cfg mode af <<<"$run"
    extra=(--afpacket-mode "$af")
    [ -n "$workers" ] && extra+=(--workers "$workers")
    [ -n "$queue_delay" ] && extra+=(--max-queue-delay-us "$queue_delay")
    k0=$(kernel_drops)
    r0=$(kernel_rx)
    # Not through nsx: a function in the background is a subshell, and
    # $! would be that subshell rather than fulmar (SIGTERM would miss it).
    ip netns exec ftp-sw "$fulmar" run -i ftp-a0 -i ftp-b0 --flows "$work/flows" --mode "$mode" "${extra[@]}" \
        >"$work/$cfg.out" 2>"$work/$cfg.err" &
    fulmar_pid=$!
    wait_started "$fulmar_pid" "$work/$cfg.err" || { echo "fulmar ($mode) did not start:" >&2; cat "$work/$cfg.err" >&2; exit 1; }
    measure "$cfg" ftp-a
    kill -TERM "$fulmar_pid"
    for _ in $(seq 100); do kill -0 "$fulmar_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$fulmar_pid" 2>/dev/null; then
        echo "fulmar ($mode) did not stop within 10 s of SIGTERM; killed" >&2
        kill -9 "$fulmar_pid"
    fi
    wait "$fulmar_pid" 2>/dev/null || true
    fulmar_pid=
    R[$cfg.kdrops]=$(( $(kernel_drops) - k0 ))
    # Frames the kernel put on the switch's veths that the switch never read
    # (dropped at its packet sockets, which only ring mode counts).
    R[$cfg.unread]=$(( $(kernel_rx) - r0 - $({ grep -oE ': rx [0-9]+' "$work/$cfg.out" || true; } | awk '{s += $3} END {print s + 0}') ))
    # The switch's own drop counters: the per-port rx/tx "drop N" figures
    # of its final counters (the named causes are shown under the table).
    R[$cfg.swdrops]=$({ grep -oE 'drop [0-9]+' "$work/$cfg.out" || true; } | awk '{s += $2} END {print s + 0}')
    R[$cfg.swdrops2]=$({ grep -E '^  drops:' "$work/$cfg.out" | grep -oE '=[0-9]+' || true; } | tr -d = | awk '{s += $1} END {print s + 0}')
done

# Open vSwitch, userspace netdev datapath, private run directory.
ovs_private_start "$work/ovs" ftp-sw
vsctl add-br ftp-br -- set bridge ftp-br datapath_type=netdev protocols=OpenFlow13 fail_mode=secure
vsctl add-port ftp-br ftp-a0 -- set interface ftp-a0 ofport_request=1
vsctl add-port ftp-br ftp-b0 -- set interface ftp-b0 ofport_request=2
ovs-ofctl -O OpenFlow13 del-flows ftp-br
ovs-ofctl -O OpenFlow13 add-flows ftp-br "$work/flows"
sleep 0.5
k0=$(kernel_drops)
r0=$(kernel_rx)
measure ovs ftp-a
r1=$(kernel_rx)
R[ovs.kdrops]=$(( $(kernel_drops) - k0 ))
ovs-ofctl -O OpenFlow13 dump-ports ftp-br >"$work/ovs-ports.txt" 2>&1 || true
ovs_appctl dpctl/show >"$work/ovs-dp.txt" 2>&1 || true
ports_drops=$({ grep -oE 'drop=[0-9]+' "$work/ovs-ports.txt" || true; } | cut -d= -f2 | awk '{s += $1} END {print s + 0}')
lost=$({ grep -oE 'lost:[0-9]+' "$work/ovs-dp.txt" || true; } | cut -d: -f2 | awk '{s += $1} END {print s + 0}')
# Packets the datapath looked up (hit + missed + lost) = frames it read.
looked=$({ grep -oE '(hit|missed|lost):[0-9]+' "$work/ovs-dp.txt" || true; } | cut -d: -f2 | awk '{s += $1} END {print s + 0}')
R[ovs.unread]=$((r1 - r0 - looked))
R[ovs.swdrops]=$ports_drops
R[ovs.swdrops2]=$lost

# --- report ---------------------------------------------------------------
ratio() { # a b -> a/b (two decimals) or -
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}
rows=(rtt_min rtt_avg rtt_max ping_loss tcp_mbps tcp_retr
      udp64_kpps_sent udp64_mbps_rcvd udp64_loss udp64_lost_at_b udp64_lost_path
      udp1400_kpps_sent udp1400_mbps_rcvd udp1400_loss udp1400_lost_at_b udp1400_lost_path
      swdrops swdrops2 unread kdrops)
declare -A label=(
    [rtt_min]="ping RTT min (ms)" [rtt_avg]="ping RTT avg (ms)" [rtt_max]="ping RTT max (ms)"
    [ping_loss]="ping loss (%)" [tcp_mbps]="TCP A->B (Mbit/s)" [tcp_retr]="TCP retransmits"
    [udp64_kpps_sent]="UDP -l 64 sent (kpps)" [udp64_mbps_rcvd]="UDP -l 64 rcvd (Mbit/s)"
    [udp64_loss]="UDP -l 64 loss at B (%)" [udp1400_kpps_sent]="UDP -l 1400 sent (kpps)"
    [udp1400_mbps_rcvd]="UDP -l 1400 rcvd (Mbit/s)" [udp1400_loss]="UDP -l 1400 loss at B (%)"
    [udp64_lost_at_b]="  lost in B's UDP socket" [udp64_lost_path]="  lost before B (pkts)"
    [udp1400_lost_at_b]="  lost in B's UDP socket" [udp1400_lost_path]="  lost before B (pkts)"
    [swdrops]="switch port drop counters" [swdrops2]="switch other drops" [kdrops]="kernel veth drops"
    [unread]="frames never read by switch")
echo
echo "fulmar $(git rev-parse --short HEAD 2>/dev/null || echo '?') vs $(ovs-vswitchd --version | head -1);" \
    "$(nproc) cores, nothing pinned (iperf3 client, server and switch share them); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "iperf3 ${secs}s per test, UDP offered -b $udp_rate; offloads off on all veths; fulmar --io afpacket, ring mode (fulmar-socket: --afpacket-mode socket), rtc = run-to-completion, rwt = rx-worker-tx${workers:+, --workers $workers}${queue_delay:+, --max-queue-delay-us $queue_delay}"
fcfgs=()
for c in "${configs[@]}"; do [[ $c == fulmar-* ]] && fcfgs+=("$c"); done
echo "ratios are fulmar/OVS (RTT, loss, drops, retransmits: lower is better)"
printf '%-30s' ""
for c in "${configs[@]}"; do printf ' %11s' "$c"; done
for c in "${fcfgs[@]}"; do printf ' %11s' "${c#fulmar-}/ovs"; done
echo
for r in "${rows[@]}"; do
    printf '%-30s' "${label[$r]}"
    for c in "${configs[@]}"; do
        v=${R[$c.$r]:--}
        [ "$c" = direct ] && case $r in swdrops*|kdrops|unread) v=n/a ;; esac
        printf ' %11s' "$v"
    done
    for c in "${fcfgs[@]}"; do printf ' %11s' "$(ratio "${R[$c.$r]:--}" "${R[ovs.$r]:--}")"; done
    echo
done
echo
echo "UDP lost in B's UDP socket = B's UdpRcvbufErrors delta (receiver too slow); lost before B = iperf3's lost - that"
echo "  (approximate: datagrams B drops after iperf3 stops counting make it slightly negative)."
echo "switch port drop counters: fulmar = sum of the ports' rx/tx 'drop N' in its final counters (printed on SIGTERM;"
echo "  they include the thread rings' drops, counted against a port), OVS = sum of drop= in ovs-ofctl dump-ports."
echo "  switch other drops: fulmar = sum of its 'drops:' line (the same drops by cause, plus pipeline drops),"
echo "  OVS = 'lost' upcalls in ovs-appctl dpctl/show."
echo "frames never read by switch = rx_packets of its two veths (kernel) - frames the switch read (fulmar: ports' rx;"
echo "  OVS: dpctl lookups hit+missed+lost): lost at the switch's packet sockets, counted by no switch counter."
echo "kernel veth drops = rx_dropped+tx_dropped deltas over the four veth ends of the switch path."
for cfg in "${fcfgs[@]}"; do
    echo; echo "$cfg final counters:"; sed 's/^/  /' "$work/$cfg.out"
    grep -iE 'warn|error' "$work/$cfg.err" | sed 's/^/  stderr: /' || true
done
echo; echo "ovs dump-ports:"; sed 's/^/  /' "$work/ovs-ports.txt"
grep -E 'lookups|flows' "$work/ovs-dp.txt" | sed 's/^/  dpctl: /' || true
if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$work"/*.json "$work"/*.out "$work"/*.err "$work"/*.txt "$work"/*.log "$keep"/ 2>/dev/null || true; echo "raw outputs: $keep"; fi
