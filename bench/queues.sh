#!/usr/bin/env bash
# Egress queues under overload: the high class's ping RTT on an idle port
# and while a low-class UDP flood overloads the port, side by side.
#
#   sudo bench/queues.sh [--rate BITS] [--flood-pps N] [--seconds S] [--pings N]
#                        [--mode run-to-completion|rx-worker-tx] [--fulmar PATH]
#
# Two namespaces joined through fulmar on veths (qb-a 10.9.9.1 -- port 1,
# port 2 -- qb-b 10.9.9.2). Port 2 has a port maximum rate (--rate, default
# 20 Mbit/s) and two queues: queue 1 (priority 0) takes everything from A
# but UDP, queue 2 (priority 1) takes UDP. A UDP flood of 1042-byte frames
# (--flood-pps, default 5000: about 42 Mbit/s, twice the default rate) from
# A to a MAC nobody has, for --seconds (default 10), fills queue 2; pings
# (--pings, default 100, 20 ms apart) measure the high class, first on the
# idle port, then under the flood. Prints the median, p99 and max RTT and
# the losses of both, what queue 2 sent and dropped (ovs-ofctl
# queue-stats), and the load average (a busy machine makes every figure
# worse; compare the two lines of one run).
set -euo pipefail

RATE=20000000
PPS=5000
SECONDS_LOAD=10
PINGS=100
MODE=run-to-completion
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/lib.sh"
FULMAR="$ROOT/target/release/fulmar"
while [ $# -gt 0 ]; do
    case "$1" in
        --rate) RATE=$2; shift 2 ;;
        --flood-pps) PPS=$2; shift 2 ;;
        --seconds) SECONDS_LOAD=$2; shift 2 ;;
        --pings) PINGS=$2; shift 2 ;;
        --mode) MODE=$2; shift 2 ;;
        --fulmar) FULMAR=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;/^set -e/d'; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
for t in ip ping ovs-ofctl python3; do
    command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 1; }
done
if [ ! -x "$FULMAR" ]; then
    (cd "$ROOT" && cargo build --release -q -p fulmar)
fi

DIR=$(mktemp -d /tmp/fulmar-queues.XXXXXX)
NSA=qb-a NSB=qb-b SWA=qb-sa SWB=qb-sb
MACA=02:00:00:00:9e:0a MACB=02:00:00:00:9e:0b
FPID=""
cleanup() {
    [ -n "$FPID" ] && kill -INT "$FPID" 2>/dev/null && wait "$FPID" 2>/dev/null || true
    ip netns del $NSA 2>/dev/null || true
    ip netns del $NSB 2>/dev/null || true
    ip link del $SWA 2>/dev/null || true
    ip link del $SWB 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
cleanup 2>/dev/null || true
DIR=$(mktemp -d /tmp/fulmar-queues.XXXXXX)

for side in a b; do
    ns=qb-$side sw=qb-s$side peer=v$side
    mac=$([ $side = a ] && echo $MACA || echo $MACB)
    addr=$([ $side = a ] && echo 10.9.9.1/24 || echo 10.9.9.2/24)
    ip netns add "$ns"
    ip link add "$sw" type veth peer name "$peer" netns "$ns"
    ip link set "$sw" up
    ip -n "$ns" link set "$peer" address "$mac" up
    ip -n "$ns" addr add "$addr" dev "$peer"
done
ip -n $NSA neigh replace 10.9.9.2 lladdr $MACB dev va nud permanent
ip -n $NSB neigh replace 10.9.9.1 lladdr $MACA dev vb nud permanent

threads="worker_threads = 1"
[ "$MODE" = rx-worker-tx ] && threads=$'rx_threads = 1\nworker_threads = 1\ntx_threads = 1'
cat > "$DIR/fulmar.toml" <<EOF
[dataplane]
mode = "$MODE"
$threads
[[bridges]]
name = "br0"
flows = ["table=0,priority=20,udp,in_port=1,actions=set_queue:2,output:2",
         "table=0,priority=10,in_port=1,actions=set_queue:1,output:2",
         "table=0,priority=10,in_port=2,actions=output:1"]
$(ports_toml "$SWA" "$SWB")
qos = { type = "linux-htb", max_rate = $RATE, queues = [ { id = 1, priority = 0 }, { id = 2, priority = 1 } ] }
EOF
"$FULMAR" run --config "$DIR/fulmar.toml" --mgmt-dir "$DIR" >"$DIR/fulmar.out" 2>"$DIR/fulmar.log" &
FPID=$!
for _ in $(seq 100); do
    grep -q "running bridges" "$DIR/fulmar.log" && break
    sleep 0.1
done
grep -q "running bridges" "$DIR/fulmar.log" || { cat "$DIR/fulmar.log" >&2; exit 1; }

# RTTs (ms) of N pings, one per line; prints the loss to stderr.
pings() {
    ip netns exec $NSA ping -n -c "$1" -i 0.02 -W 2 10.9.9.2 >"$DIR/ping.txt" || true
    grep -o 'time=[0-9.]*' "$DIR/ping.txt" | cut -d= -f2
}
summary() {
    python3 -c '
import statistics, sys
v = sorted(float(x) for x in sys.stdin.read().split())
n = int(sys.argv[2])
if not v:
    print(f"{sys.argv[1]:<8} all {n} pings lost"); sys.exit()
p99 = v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
print(f"{sys.argv[1]:<8} median {statistics.median(v):7.3f} ms  p99 {p99:7.3f} ms  max {v[-1]:7.3f} ms  lost {n - len(v)}/{n}")
' "$1" "$2"
}

pings 3 >/dev/null   # warm up the path
IDLE=$(pings "$PINGS")
FRAME=$(python3 -c "
import struct
eth = bytes.fromhex('02000000 0eff'.replace(' ', '')) + bytes.fromhex('$MACA'.replace(':', '')) + b'\x08\x00'
ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + 8 + 1000, 0, 0, 64, 17, 0, bytes([10, 9, 9, 1]), bytes([10, 9, 9, 2]))
udp = struct.pack('!HHHH', 9, 9, 8 + 1000, 0)
print((eth + ip + udp + bytes(1000)).hex())")
ip netns exec $NSA python3 "$ROOT/tests/e2e/nshelper.py" seqflood va "$FRAME" $((PPS * SECONDS_LOAD)) "$PPS" sleep \
    >"$DIR/flood.txt" &
FLOOD=$!
sleep 1
LOADED=$(pings "$PINGS")
wait $FLOOD || true

echo "fulmar egress queues: port rate $RATE bit/s, flood $PPS pps x 1042 bytes ($(( PPS * 1042 * 8 / 1000000 )) Mbit/s) for ${SECONDS_LOAD}s, mode $MODE"
echo "high class (queue 1, priority 0), $PINGS pings 20 ms apart:"
echo "$IDLE" | summary idle "$PINGS"
echo "$LOADED" | summary loaded "$PINGS"
echo "flood: $(cat "$DIR/flood.txt")"
ovs-ofctl -O OpenFlow13 queue-stats "unix:$DIR/br0.mgmt" 2 | grep -o 'queue [0-9]*: bytes=[0-9]*, pkts=[0-9]*, errors=[0-9]*' \
    | sed 's/errors=/dropped=/; s/^/  /'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)   cpus: $(nproc)"
