#!/usr/bin/env bash
# fulmar vs Open vSwitch with DPDK, on the same DPDK I/O, one forwarding
# core each, in one run.
#
#   sudo bench/dpdk-vs-ovs.sh [--scenarios "gw:1 gw:100000 gw:1000000 l2:100000 l3:100000"]
#                             [--flows N] [--warmup S] [--seconds S] [--workers N] [--keep DIR]
#                             [--fulmar PATH] [--fulmar-only] [--dpdk-plugins DIR]
#                             [--input pcap|nic] [--no-floor] [--autogroup-nice N]
#
# For each scenario (`KIND:RULES`, KIND gw = fulmar bench's
# gateway-mpls2vlan, the WAN -> data-center gateway keyed on the MPLS label
# of one input port; l2; l3), `fulmar bench --export` writes the rules
# (ovs-ofctl syntax, every rule outputting to port 2) and a pcap of 64-byte
# packets, one per flow (--flows, default 4096, spread evenly over the
# rules; one flow for a one-rule scenario). OVS recirculates after
# pop_mpls, so each gateway flow takes two megaflows, and its datapath
# starts with a dynamic limit of 10000 megaflows that grows only while
# its revalidators keep up: with many more flows than that (try --flows
# 65536) OVS keeps missing to the slow path and runs far below its steady
# state, so the default keeps every megaflow in its cache. Then, one after the other:
#
# - Open vSwitch 3.1 with DPDK (Debian's openvswitch-switch-dpdk,
#   ovs-vswitchd-dpdk --disable-system, in a network namespace of its own
#   and with its own database and run directory, so no other OVS is
#   touched): a netdev bridge with port 1 = a net_pcap vdev replaying the
#   pcap forever (infinite_rx=1) and port 2 = a net_null vdev, one PMD
#   thread on CPU 1 (pmd-cpu-mask), its main thread on CPU 0; the rules
#   added with ovs-ofctl; a warm-up for its megaflow cache to fill, until
#   the count of megaflows (dpctl/dump-flows, every 5 s) has set no new
#   high for 15 s (at least 20 s, at most --warmup, default 300; a row
#   that reaches the limit says so); then `dpif-netdev/pmd-stats-clear`, --seconds (default
#   10), `dpif-netdev/pmd-stats-show`: packets / seconds is the rate, and
#   its processing cycles / packets the cycles per packet.
# - fulmar run (release, --features dpdk) with the same two vdevs as DPDK
#   ports, the same rules as its flows file, one run-to-completion worker
#   pinned to CPU 1 (busy polling), EAL main lcore on CPU 0; a short
#   warm-up, then two `fulmar ctl stats --json` --seconds apart: port 2's
#   transmitted packets / seconds is the rate, the worker's busy time per
#   packet times the TSC rate (taken from OVS's own cycle counts) the
#   cycles per packet.
#
# On a shared machine other processes take time from the forwarding
# core, so the table gives both rates per second their forwarding thread
# was on a CPU (its schedstat run time; both threads busy-poll, so this is
# the rate they would have with the core to themselves), cycles per packet
# over that time, and their ratio; the wall-clock rates follow on the next
# line. Both forward every packet (port 2's counters are checked against
# the input's).
#
# With --workers N (N > 1) a third run gives fulmar N workers on N receive
# queues of the input port (the pcap given N times: net_pcap has one queue
# per rx_pcap, each replaying the file; a NIC would spread one stream
# with RSS) to show how the rate grows with workers, for every count from
# 2 to N, or for the counts listed (--workers 2,4,8,15); the machine needs
# N + 1 CPUs for that to mean anything (with fewer, the last workers share
# CPU 0 with everything else).
#
# The I/O floor: before the switches, DPDK's testpmd (Debian's dpdk-dev)
# forwards the same input to the same net_null vdev in `io` mode (no
# lookup, no rewrite: receive a burst, send it) on the same CPU, its
# forwarding cycles recorded (--record-core-cycles): what any forwarder
# pays for this I/O. The table prints its rate and cycles per packet beside
# both switches, and for fulmar its cycles minus the floor next to the
# cycles `fulmar bench` takes for the same scenario, rules and flows in
# memory (pinned to the same CPU, the same --seconds): the issue's target is
# a ratio of at most 1.25. --no-floor skips testpmd and the in-memory run.
#
# --input picks what feeds port 1:
# - pcap (the default): a net_pcap vdev replaying the exported pcap
#   forever. net_pcap keeps the whole file in mbufs of the port's pool
#   (one 2 KiB mbuf per flow: 128 MiB for 65,536 flows) and copies each
#   into a fresh mbuf as it is read, so the input's own cost grows with the
#   number of flows (the floor shows by how much).
# - nic: a net_memif client port fed by bench/nicgen.c (built here with
#   gcc against libdpdk), a generator in a process of its own that copies
#   the exported frames round-robin from a compact table (64 bytes a flow)
#   into recycled mbufs and sends them into the memif's shared ring (1,024
#   slots): like a NIC, the switch reads from a small set of recycled
#   buffers whatever the number of flows, and the flows' bytes are the
#   generator's memory, not the switch's. A memif socket is the one input
#   here that testpmd, OVS (dpdk-devargs, across its network namespace: a
#   socket path, not an abstract socket) and fulmar can all open; a net_ring
#   belongs to one process, and an in-process generator vdev would need
#   DPDK's driver headers, which Debian does not ship. The generator runs
#   on CPU 2 (on CPU 0 beside the control threads, at nice 19, where there
#   are only two CPUs) and must stay ahead of the switch for the figures to
#   be the switch's (the floor's rate shows whether it did); every packet
#   then crosses from its core to the switch's through the shared ring (a
#   NIC writes to memory or the last-level cache instead), which the floor
#   includes. With this
#   input the forwarding threads may poll an empty ring, so cycles per
#   packet are taken over the bursts that carried packets (OVS's processing
#   cycles, testpmd's busy cycles, fulmar's worker busy time) rather than
#   over the thread's CPU time, and the rate is the wall-clock one.
#
# --autogroup-nice N sets the scheduler autogroup nice of the script and
# of what it starts (OVS detaches into a session of its own and gets the
# same): on a machine where other sessions run builds, a plain `nice`
# competes only inside one's own session, so this is how the benchmark
# gets its CPUs (run it under setsid, e.g. `setsid bench/dpdk-vs-ovs.sh
# --autogroup-nice -10`). The load average is printed beside each row.
#
# --fulmar-only skips Open vSwitch (no packages installed, no namespace):
# fulmar's rates alone, for a machine that has the cores but not OVS, given
# a fulmar built elsewhere (--fulmar). Where no huge pages can be reserved
# (a sandboxed kernel) it then runs the EAL with --no-huge and says so.
# --dpdk-plugins DIR loads DPDK's drivers from DIR (`-d DIR`), for a
# machine where they are not in the path DPDK was built with.
#
# Huge pages: 1024 x 2 MiB are reserved (vm.nr_hugepages) and a hugetlbfs
# mounted at a private directory for the run; both are put back on exit,
# also on Ctrl-C. Installs openvswitch-switch-dpdk (and what building
# fulmar with DPDK needs) with apt when missing, leaving the ovs-vswitchd
# alternative as it was. Needs root. Run it alone (`flock
# /tmp/fulmar-heavy.lock ...` on a shared machine): the figures are only as
# quiet as the machine is. Names: fdd-* (namespace), /tmp/fdd-bench.*.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
root=$PWD

scenarios="gw:1 gw:100000 gw:1000000 l2:100000 l3:100000"
flows=4096
warmup=300
seconds=10
workers=1
keep=
fulmar=
fulmar_only=
plugins=
input=pcap
floor=1
agnice=
parse_options '[--scenarios "gw:1 gw:100000 ..."] [--flows N] [--warmup S] [--seconds S] [--workers N|N,N...] [--keep DIR] [--fulmar PATH] [--fulmar-only] [--dpdk-plugins DIR] [--input pcap|nic] [--no-floor] [--autogroup-nice N]' \
    --scenarios=scenarios --flows=flows --warmup=warmup --seconds=seconds --workers=workers --keep=keep --fulmar=fulmar --fulmar-only=fulmar_only=1 --dpdk-plugins=plugins --input=input --no-floor=floor= --autogroup-nice=agnice -- "$@"
case "$input" in
    pcap|nic) ;;
    *) echo "$0: --input is pcap or nic" >&2; exit 2 ;;
esac
if [ "$input" = nic ] && [ "$workers" != 1 ]; then
    echo "$0: --workers needs --input pcap (the generator feeds one queue)" >&2; exit 2
fi
if [ -n "$agnice" ]; then
    echo "$agnice" > /proc/self/autogroup 2>/dev/null \
        || { echo "$0: cannot set the autogroup nice to $agnice (kernel without autogroups?)" >&2; exit 1; }
fi
[ "$(id -u)" = 0 ] || { echo "$0: needs root (huge pages, DPDK)" >&2; exit 1; }
[ -z "$fulmar_only" ] || [ -n "$fulmar" ] || { echo "$0: --fulmar-only needs --fulmar PATH" >&2; exit 2; }
# The worker counts of the multi-queue runs: 2..N, or the list given.
case "$workers" in
    *,*) counts=$(echo "$workers" | tr ',' ' ') ;;
    *) counts=$(seq 2 "$workers") ;;
esac

# --- packages -----------------------------------------------------------------
ovs_dpdk=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
need=()
if [ -z "$fulmar_only" ]; then
    [ -x "$ovs_dpdk" ] || need+=(openvswitch-switch-dpdk)
    command -v ovs-ofctl >/dev/null || need+=(openvswitch-switch)
    pkg-config --exists libdpdk 2>/dev/null || need+=(libdpdk-dev)
    command -v pkg-config >/dev/null || need+=(pkg-config)
    dpkg -s libclang1-14 >/dev/null 2>&1 || need+=(libclang1-14)
    dpkg -s libclang-common-14-dev >/dev/null 2>&1 || need+=(libclang-common-14-dev)
fi
# testpmd for the floor; gcc and libdpdk-dev to build the generator.
[ -z "$floor" ] || command -v dpdk-testpmd >/dev/null || need+=(dpdk-dev)
if [ "$input" = nic ]; then
    command -v gcc >/dev/null || need+=(gcc)
    command -v pkg-config >/dev/null || need+=(pkg-config)
    pkg-config --exists libdpdk 2>/dev/null || need+=(libdpdk-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
    # Installing openvswitch-switch-dpdk may move the ovs-vswitchd
    # alternative; it is put back as it was.
    alt_before=$(readlink -f /etc/alternatives/ovs-vswitchd 2>/dev/null || true)
    alt_mode=$(update-alternatives --query ovs-vswitchd 2>/dev/null | awk '/^Status:/ {print $2}')
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    if [ "$alt_mode" = auto ] || [ -z "$alt_before" ]; then
        update-alternatives --auto ovs-vswitchd >/dev/null 2>&1 || true
    else
        update-alternatives --set ovs-vswitchd "$alt_before" >/dev/null 2>&1 || true
    fi
fi
if [ -z "$fulmar" ]; then
    fulmar=$root/target/release/fulmar
    echo "building fulmar (release, --features dpdk)" >&2
    cargo build --quiet --release --locked -p fulmar --features dpdk
fi
[ -x "$fulmar" ] || { echo "$0: no fulmar binary at $fulmar" >&2; exit 1; }

# --- the run's directory, huge pages, cleanup ---------------------------------
work=$(mktemp -d /tmp/fdd-bench.XXXXXX)
ns=fdd-ovs
huge=$work/huge
hp_before=$(cat /proc/sys/vm/nr_hugepages)
mounted=
ovs_pids=()
fulmar_pid=
gen_pid=
tp_pid=
cleanup() {
    set +e
    trap - EXIT INT TERM
    [ -n "$gen_pid" ] && gen_stop
    [ -n "$tp_pid" ] && kill "$tp_pid" 2>/dev/null && sleep 1 && kill -9 "$tp_pid" 2>/dev/null
    [ -n "$fulmar_pid" ] && kill "$fulmar_pid" 2>/dev/null && sleep 1 && kill -9 "$fulmar_pid" 2>/dev/null
    stop_ovs
    ip netns del "$ns" 2>/dev/null
    # The run directory DPDK made for OVS's EAL (--file-prefix fddovs).
    rm -rf /var/run/dpdk/fddovs /var/run/dpdk/fddgen /var/run/dpdk/fddtp
    [ -n "$mounted" ] && umount "$huge"
    echo "$hp_before" > /proc/sys/vm/nr_hugepages 2>/dev/null
    if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$work"/run-* "$work"/*.txt "$keep"/ 2>/dev/null; fi
    rm -rf "$work"
}
stop_ovs() {
    local p
    for p in "${ovs_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${ovs_pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
    ovs_pids=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# fulmar's EAL memory: the huge pages below, or none (--fulmar-only on a
# machine that cannot reserve them).
eal_mem=("--huge-dir" "$huge")
# Compacting first: on a machine whose memory is fragmented (a long uptime,
# builds) the kernel otherwise finds only a few hundred free 2 MiB pages.
echo 1 > /proc/sys/vm/compact_memory 2>/dev/null || true
echo 1024 > /proc/sys/vm/nr_hugepages 2>/dev/null || true
got=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)
if [ "$got" -ge 512 ] && mkdir -p "$huge" && mount -t hugetlbfs -o pagesize=2M nodev "$huge"; then
    mounted=1
elif [ -n "$fulmar_only" ]; then
    echo "$0: no huge pages here ($got reserved); fulmar's EAL runs with --no-huge" >&2
    eal_mem=("--no-huge" "-m" "4096")
else
    echo "$0: only $got huge pages could be reserved" >&2
    exit 1
fi
[ -n "$plugins" ] && eal_mem+=("-d" "$plugins")
[ -n "$fulmar_only" ] || ip netns add "$ns"

cpus=$(nproc)
[ "$cpus" -ge 2 ] || { echo "$0: needs 2 CPUs (one forwarding core, one for the rest)" >&2; exit 1; }

# TSC cycles per second, from testpmd's or OVS's own cycle counts when they ran.
tsc_hz=

# The EAL memory of testpmd and the generator: the same huge pages, or
# none, with a run directory of their own.
if [ -n "$mounted" ]; then
    aux_mem=("--in-memory" "--huge-dir" "$huge")
else
    aux_mem=("--no-huge" "-m" "1024")
fi
[ -n "$plugins" ] && aux_mem+=("-d" "$plugins")

# --- the input ----------------------------------------------------------------
gen_cpu=$(( cpus >= 3 ? 2 : 0 ))
if [ "$input" = nic ]; then
    # shellcheck disable=SC2046 # pkg-config's flags are words
    gcc -O2 $(pkg-config --cflags libdpdk) "$root/bench/nicgen.c" -o "$work/nicgen" $(pkg-config --libs libdpdk)
fi

# in_devargs PCAP [N]: port 1's devargs (net_pcap: the file N times, a queue each).
in_devargs() {
    local pcap=$1 n=${2:-1} d=net_pcap0
    if [ "$input" = nic ]; then
        echo "net_memif0,role=client,socket=$work/memif.sock,socket-abstract=no"
        return
    fi
    for _ in $(seq "$n"); do d="$d,rx_pcap=$pcap"; done
    echo "$d,infinite_rx=1"
}

# gen_start PCAP: with --input nic, starts the generator (the memif server)
# on CPU 2, or on CPU 0 (beside the control threads, at nice 19) where
# there are only two, and waits for its socket. gen_stop stops it; it is
# stopped before its client goes (DPDK 22.11's memif server has been seen
# to crash when the client leaves while it sends).
gen_start() {
    [ "$input" = nic ] || return 0
    rm -f "$work/memif.sock"
    # Beside the control threads (two CPUs), the generator yields to them:
    # OVS's handlers and revalidators fill its megaflow cache from CPU 0,
    # and a busy generator at the same priority would starve them.
    local nice=()
    [ "$gen_cpu" -ne 0 ] || nice=(nice -n 19)
    "${nice[@]}" "$work/nicgen" -l "$gen_cpu" --file-prefix fddgen "${aux_mem[@]}" --no-pci --no-telemetry \
        --vdev "net_memif0,role=server,socket=$work/memif.sock,socket-abstract=no" \
        -- "$1" > "$work/nicgen.log" 2>&1 &
    gen_pid=$!
    for _ in $(seq 300); do
        [ -S "$work/memif.sock" ] && return 0
        kill -0 "$gen_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$work/nicgen.log" >&2
    echo "$0: the generator did not start" >&2
    return 1
}
gen_stop() {
    [ -n "$gen_pid" ] || return 0
    kill "$gen_pid" 2>/dev/null || true
    wait "$gen_pid" 2>/dev/null || true
    gen_pid=
    tail -1 "$work/nicgen.log" >&2
}

# --- the I/O floor: testpmd in io mode ----------------------------------------
# floor_run DIR PCAP: prints "wall_mpps busy_cycles_per_packet tsc_hz
# oncpu_mpps oncpu_cycles_per_packet share_on_cpu"
floor_run() {
    local dir=$1 pcap=$2
    local run=$dir/testpmd
    mkdir -p "$run"
    mkfifo "$run/cmd"
    gen_start "$pcap"
    dpdk-testpmd -l 0,1 --file-prefix fddtp "${aux_mem[@]}" --no-pci --no-telemetry \
        --vdev "$(in_devargs "$pcap")" --vdev net_null0,no-rx=1 -- \
        -i --forward-mode=io --nb-cores=1 --record-core-cycles \
        --total-num-mbufs=$(( flows + 16384 )) < "$run/cmd" > "$run/log" 2>&1 &
    tp_pid=$!
    local cmd
    exec {cmd}> "$run/cmd"
    for _ in $(seq 600); do
        grep -q 'testpmd>' "$run/log" 2>/dev/null && break
        kill -0 "$tp_pid" 2>/dev/null || break
        sleep 0.1
    done
    if ! grep -q 'testpmd>' "$run/log"; then
        cat "$run/log" >&2
        echo "$0: testpmd did not start" >&2
        return 1
    fi
    # A short warm-up (the floor has no cache to fill), then the measured
    # period: `start` clears the forwarding counters, `stop` prints them.
    echo start >&"$cmd"; sleep 2; echo stop >&"$cmd"; sleep 0.5
    local mark=$(wc -l < "$run/log")
    echo start >&"$cmd"
    local c0=$(oncpu "$tp_pid" rte-worker)
    local s0=$(date +%s.%N)
    sleep "$seconds"
    echo stop >&"$cmd"
    local c1=$(oncpu "$tp_pid" rte-worker)
    local s1=$(date +%s.%N)
    sleep 1
    gen_stop
    echo quit >&"$cmd"
    exec {cmd}>&-
    for _ in $(seq 100); do kill -0 "$tp_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$tp_pid" 2>/dev/null || true
    wait "$tp_pid" 2>/dev/null || true
    tp_pid=
    tail -n +"$mark" "$run/log" > "$dir/testpmd-stats.txt"
    python3 - "$dir/testpmd-stats.txt" "$s0" "$s1" "$c0" "$c1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
secs = float(sys.argv[3]) - float(sys.argv[2])
oncpu = (int(sys.argv[5]) - int(sys.argv[4])) / 1e9
# The last report is the measured period's (the warm-up's may come late
# enough to be in the file too).
found = re.findall(r"total cycles=(\d+) / total \w+ packets=(\d+)\) at (\d+) MHz", text)
if not found:
    sys.exit("testpmd printed no cycle counts (see testpmd/log)")
busy, pkts, mhz = (int(x) for x in found[-1])
hz = mhz * 1e6
cpu_mpps = pkts / oncpu / 1e6 if oncpu > 0 else 0.0
cpu_cpp = oncpu * hz / pkts if pkts else 0.0
print(f"{pkts / secs / 1e6:.3f} {busy / max(pkts, 1):.0f} {hz:.0f} {cpu_mpps:.3f} {cpu_cpp:.0f} {oncpu / secs:.2f}")
PY
}

# bench_ns SCENARIO RULES FLOWS: fulmar bench's nanoseconds per packet, in
# memory, on the forwarding CPU.
bench_ns() {
    taskset -c 1 "$fulmar" bench "$1" --rules "$2" --flows "$3" --seconds "$seconds" --json 2>/dev/null \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["ns_per_packet"])'
}

# oncpu PID COMM_PREFIX: nanoseconds the process's threads named COMM_PREFIX*
# have run on a CPU (schedstat), summed.
oncpu() {
    local pid=$1 prefix=$2 sum=0 t
    for t in /proc/"$pid"/task/*; do
        case "$(cat "$t/comm" 2>/dev/null)" in
            "$prefix"*) sum=$(( sum + $(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0) )) ;;
        esac
    done
    echo "$sum"
}

# --- Open vSwitch with DPDK ---------------------------------------------------
# ovs_run DIR RULES PCAP: prints "mpps cycles_per_packet tsc_hz megaflows forwarded_share"
ovs_run() {
    local dir=$1 rules=$2 pcap=$3
    local run=$dir/ovs
    mkdir -p "$run"
    export OVS_RUNDIR=$run OVS_LOGDIR=$run OVS_DBDIR=$run
    ovsdb-tool create "$run/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$run/conf.db" --remote="punix:$run/db.sock" --pidfile="$run/ovsdb.pid" \
        --unixctl="$run/ovsdb.ctl" --log-file="$run/ovsdb.log" --detach --no-chdir
    ovs_pids+=("$(cat "$run/ovsdb.pid")")
    local vsctl=(ovs-vsctl --db="unix:$run/db.sock" --no-wait)
    "${vsctl[@]}" init
    "${vsctl[@]}" set Open_vSwitch . other_config:dpdk-init=true \
        other_config:dpdk-lcore-mask=0x1 other_config:pmd-cpu-mask=0x2 \
        "other_config:dpdk-extra=--no-pci --huge-dir $huge --file-prefix fddovs --no-telemetry"
    ip netns exec "$ns" "$ovs_dpdk" "unix:$run/db.sock" --disable-system --pidfile="$run/vswitchd.pid" \
        --unixctl="$run/vswitchd.ctl" --log-file="$run/vswitchd.log" --detach --no-chdir
    ovs_pids+=("$(cat "$run/vswitchd.pid")")
    # --detach made a session (and so an autogroup) of its own.
    [ -z "$agnice" ] || echo "$agnice" > "/proc/$(cat "$run/vswitchd.pid")/autogroup"
    gen_start "$pcap"
    local appctl=(ovs-appctl -t "$run/vswitchd.ctl")
    local vs=(ovs-vsctl --db="unix:$run/db.sock" --timeout=60)
    "${vs[@]}" add-br br0 -- set bridge br0 datapath_type=netdev protocols=OpenFlow13 fail_mode=secure \
        -- add-port br0 in0 -- set Interface in0 type=dpdk ofport_request=1 \
            "options:dpdk-devargs=$(in_devargs "$pcap")" \
        -- add-port br0 out0 -- set Interface out0 type=dpdk ofport_request=2 \
            "options:dpdk-devargs=net_null0,no-rx=1"
    local of="unix:$run/br0.mgmt"
    for _ in $(seq 100); do [ -S "$run/br0.mgmt" ] && break; sleep 0.2; done
    ovs-ofctl -O OpenFlow13 del-flows "$of"
    local t0=$(date +%s)
    ovs-ofctl -O OpenFlow13 --bundle add-flows "$of" "$rules" 2>/dev/null \
        || ovs-ofctl -O OpenFlow13 add-flows "$of" "$rules"
    echo "  OVS: $(wc -l < "$rules") rules in $(( $(date +%s) - t0 )) s; warming up until its megaflow count stops growing (at most ${warmup} s)" >&2
    # Warm until the megaflow count stops growing: no new high for 15 s
    # (counted every 5 s), at least 20 s, at most --warmup s.
    local w0=$(date +%s) high=-1 n now
    local high_at=$w0
    while :; do
        sleep 5
        n=$("${appctl[@]}" dpctl/dump-flows 2>/dev/null | wc -l)
        now=$(date +%s)
        if [ "$n" -gt "$high" ]; then high=$n; high_at=$now; fi
        if [ $(( now - w0 )) -ge "$warmup" ]; then
            echo "  OVS: warm-up limit of ${warmup} s reached with $high megaflows (the last new high $(( now - high_at )) s before): its figures may be below its steady state" | tee -a "$work/summary.txt" >&2
            break
        fi
        if [ $(( now - w0 )) -ge 20 ] && [ $(( now - high_at )) -ge 15 ]; then
            echo "  OVS: warmed $(( now - w0 )) s: $high megaflows, no new high for $(( now - high_at )) s" | tee -a "$work/summary.txt" >&2
            break
        fi
    done
    local tx0=$(ovs-ofctl -O OpenFlow13 dump-ports "$of" 2 | awk -F'pkts=' '/tx/ {split($2,a,","); print a[1]}')
    local vpid=$(cat "$run/vswitchd.pid")
    "${appctl[@]}" dpif-netdev/pmd-stats-clear
    local c0=$(oncpu "$vpid" pmd)
    local s0=$(date +%s.%N)
    sleep "$seconds"
    local stats=$("${appctl[@]}" dpif-netdev/pmd-stats-show)
    local c1=$(oncpu "$vpid" pmd)
    local s1=$(date +%s.%N)
    local tx1=$(ovs-ofctl -O OpenFlow13 dump-ports "$of" 2 | awk -F'pkts=' '/tx/ {split($2,a,","); print a[1]}')
    local megaflows=$("${appctl[@]}" dpctl/dump-flows 2>/dev/null | wc -l)
    echo "$stats" > "$dir/ovs-pmd-stats.txt"
    gen_stop
    python3 - "$stats" "$s0" "$s1" "$tx0" "$tx1" "$megaflows" "$c0" "$c1" <<'PY'
import re, sys
stats, s0, s1, tx0, tx1, mf = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4] or 0), int(sys.argv[5] or 0), sys.argv[6]
oncpu = (int(sys.argv[8]) - int(sys.argv[7])) / 1e9
def num(key):
    m = re.search(key + r":\s*([0-9.]+)", stats)
    return float(m.group(1)) if m else 0.0
secs = s1 - s0
pkts = num("packets received")
idle, proc = num("idle cycles"), num("processing cycles")
cpp = proc / pkts if pkts else 0.0
hz = (idle + proc) / secs if secs else 0.0
fwd = (tx1 - tx0) / pkts if pkts else 0.0
# Rate per second the PMD thread was on a CPU (it busy-polls: wall time
# minus what other processes took from its CPU), and cycles per packet
# over that time.
cpu_mpps = pkts / oncpu / 1e6 if oncpu > 0 else 0.0
cpu_cpp = oncpu * hz / pkts if pkts else 0.0
print(f"{pkts / secs / 1e6:.3f} {cpp:.0f} {hz:.0f} {mf} {fwd:.3f} {cpu_mpps:.3f} {cpu_cpp:.0f} {oncpu / secs:.2f}")
PY
    stop_ovs
    unset OVS_RUNDIR OVS_LOGDIR OVS_DBDIR
}

# --- fulmar -------------------------------------------------------------------
# fulmar_run DIR RULES PCAP WORKERS: prints "mpps busy_ns_per_packet forwarded_share"
fulmar_run() {
    local dir=$1 rules=$2 pcap=$3 n=$4
    local run=$dir/fulmar
    mkdir -p "$run"
    local devargs
    devargs=$(in_devargs "$pcap" "$n")
    local cores="1" q=""
    if [ "$n" -gt 1 ]; then
        # Workers on CPUs 1..n when the machine has them; otherwise the
        # last ones share CPU 0 with the control threads.
        cores=$(for i in $(seq 1 "$n"); do echo $(( i < cpus ? i : 0 )); done | paste -sd,)
        q="dpdk_rx_queues = $n"
    fi
    cat > "$run/fulmar.toml" <<EOF
[dpdk]
eal_args = ["-l", "0", "--in-memory", $(printf '"%s", ' "${eal_mem[@]}")"--no-pci", "--no-telemetry"]

[dataplane]
worker_threads = $n
worker_cores = [$cores]

[[bridges]]
name = "br0"
flow_table_capacity = 2000000
flows_file = "$rules"

[[bridges.ports]]
port = 1
interface = "in0"
backend = "dpdk"
dpdk_devargs = "$devargs"
dpdk_mbufs = $(( (flows * n + 4096 * n + 8192) | 1023 ))
$q

[[bridges.ports]]
port = 2
interface = "out0"
backend = "dpdk"
dpdk_devargs = "net_null0,no-rx=1"
EOF
    gen_start "$pcap"
    "$fulmar" run --config "$run/fulmar.toml" --ctl "$run/ctl" --mgmt-dir "$run" \
        --poll-us busy --log-level warn > "$run/log" 2>&1 &
    fulmar_pid=$!
    local t0=$(date +%s)
    for _ in $(seq 600); do
        "$fulmar" ctl -t "$run/ctl" stats >/dev/null 2>&1 && break
        kill -0 "$fulmar_pid" 2>/dev/null || { cat "$run/log" >&2; return 1; }
        sleep 0.5
    done
    echo "  fulmar: started with $(wc -l < "$rules") rules in $(( $(date +%s) - t0 )) s; warming up 5 s" >&2
    sleep 5
    local a=$("$fulmar" ctl -t "$run/ctl" stats --json)
    local c0=$(oncpu "$fulmar_pid" br0-w)
    local s0=$(date +%s.%N)
    sleep "$seconds"
    local b=$("$fulmar" ctl -t "$run/ctl" stats --json)
    local c1=$(oncpu "$fulmar_pid" br0-w)
    local s1=$(date +%s.%N)
    "$fulmar" ctl -t "$run/ctl" stats > "$dir/fulmar-stats.txt" 2>&1 || true
    gen_stop
    kill "$fulmar_pid"; wait "$fulmar_pid" 2>/dev/null || true
    fulmar_pid=
    python3 - "$a" "$b" "$s0" "$s1" "$c0" "$c1" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1])[0], json.loads(sys.argv[2])[0]
secs = float(sys.argv[4]) - float(sys.argv[3])
oncpu = (int(sys.argv[6]) - int(sys.argv[5])) / 1e9
def port(r, n, k):
    return next(p[k] for p in r["ports"] if p["port"] == n)
def work(r, k):
    return sum(t[k] for t in r["threads"] if t["role"] == "worker")
tx = port(b, 2, "tx_packets") - port(a, 2, "tx_packets")
rx = port(b, 1, "rx_packets") - port(a, 1, "rx_packets")
busy = work(b, "busy_ns") - work(a, "busy_ns")
pk = work(b, "packets") - work(a, "packets")
n = max(1, sum(1 for t in b["threads"] if t["role"] == "worker"))
# On-CPU: packets per second the workers ran (summed over workers), and
# nanoseconds of worker CPU per packet.
cpu_mpps = tx / oncpu * n / 1e6 if oncpu > 0 else 0.0
cpu_ns = oncpu / max(tx, 1) * 1e9
print(f"{tx / secs / 1e6:.3f} {busy / max(pk, 1) * n:.1f} {tx / max(rx, 1):.3f} {cpu_mpps:.3f} {cpu_ns:.1f} {oncpu / secs:.2f}")
PY
}

# --- the scenarios ------------------------------------------------------------
{
    echo "# $(date -u +%FT%TZ) $(uname -n): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $cpus CPUs"
    ovs_version=none
    [ -n "$fulmar_only" ] || ovs_version=$("$ovs_dpdk" --version | head -1)
    echo "# fulmar $("$fulmar" --version | head -1), OVS: $ovs_version, fulmar's EAL: ${eal_mem[*]}, input $input, flows $flows, OVS warm-up until its megaflows stop growing (at most ${warmup} s), ${seconds} s each, autogroup nice ${agnice:-unchanged}, load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$input" = nic ]; then
        echo "# input nic: rates are wall-clock, cycles per packet over the bursts that carried packets"
        [ "$cpus" -ge 3 ] || echo "# (only $cpus CPUs: the generator shares CPU 0 at nice 19; a row is the switch's only where the floor's rate is well above the switch's, else the generator set the pace and left part-filled bursts)"
    else
        echo "# input pcap: rates per second the forwarding thread was on a CPU, cycles per packet over that time"
    fi
} | tee "$work/summary.txt"
if [ -z "$fulmar_only" ]; then
    printf '%-12s %6s %8s %8s %8s %8s %8s %8s %7s %9s\n' scenario load "floor" "floor c" "OVS" "OVS c" fulmar "fulmar c" ratio megaflows | tee -a "$work/summary.txt"
fi
for s in $scenarios; do
    kind=${s%%:*}; rules=${s#*:}
    case "$kind" in
        gw) scen=gateway-mpls2vlan ;;
        l2) scen=l2 ;;
        l3) scen=l3 ;;
        *) echo "$0: unknown scenario kind $kind (gw, l2, l3)" >&2; exit 2 ;;
    esac
    f=$flows; [ "$rules" -lt "$f" ] && f=$rules
    dir=$work/run-$kind-$rules
    mkdir -p "$dir"
    echo "== $scen, $rules rules, $f flows" >&2
    "$fulmar" bench "$scen" --rules "$rules" --flows "$f" --export "$dir" --out-port 2 2>/dev/null
    load=$(cut -d' ' -f1 /proc/loadavg)
    # The floor: testpmd on the same input and output, the same CPU.
    p_mpps=- p_cpp=- p_cmpps=- p_ccpp=- p_hz=
    if [ -n "$floor" ]; then
        floor_run "$dir" "$dir/traffic.pcap" > "$dir/floor.res"
        read -r p_mpps p_cpp p_hz p_cmpps p_ccpp p_share < "$dir/floor.res"
        tsc_hz=$p_hz
    fi
    # Called in this shell (not a subshell), so cleanup knows the daemons.
    [ -n "$fulmar_only" ] || ovs_run "$dir" "$dir/rules.flows" "$dir/traffic.pcap" > "$dir/ovs.res"
    fulmar_run "$dir" "$dir/rules.flows" "$dir/traffic.pcap" 1 > "$dir/fulmar.res"
    read -r f_mpps f_ns f_fwd f_cmpps f_cns f_share < "$dir/fulmar.res"
    if [ -z "$fulmar_only" ]; then
        read -r o_mpps o_cpp o_hz o_mf o_fwd o_cmpps o_ccpp o_share < "$dir/ovs.res"
        [ -n "$tsc_hz" ] || { [ -n "$o_hz" ] && [ "${o_hz%.*}" -gt 0 ] && tsc_hz=$o_hz; }
    fi
    # fulmar's cycles per packet: over its on-CPU time (pcap), or over its
    # busy time (nic: the worker may poll an empty ring); likewise for the
    # others. The rates: per on-CPU second (pcap) or wall-clock (nic).
    if [ "$input" = nic ]; then
        f_rate=$f_mpps; f_c=$(python3 -c "print(f'{$f_ns * ${tsc_hz:-0} / 1e9:.0f}')")
        p_rate=$p_mpps; p_c=$p_cpp
        o_rate=${o_mpps:-}; o_c=${o_cpp:-}
    else
        f_rate=$f_cmpps; f_c=$(python3 -c "print(f'{$f_cns * ${tsc_hz:-0} / 1e9:.0f}')")
        p_rate=$p_cmpps; p_c=$p_ccpp
        o_rate=${o_cmpps:-}; o_c=${o_ccpp:-}
    fi
    if [ -n "$fulmar_only" ]; then
        echo "$kind $rules (load $load): fulmar $f_rate Mpps, $f_c cycles/packet; floor (testpmd io) $p_rate Mpps, $p_c cycles/packet; fulmar $f_mpps Mpps wall (worker on CPU $f_share); forwarded share of input $f_fwd" | tee -a "$work/summary.txt"
    else
        ratio=$(python3 -c "print(f'{$f_rate / $o_rate:.1f}' if $o_rate > 0 else 'n/a')")
        printf '%-12s %6s %8s %8s %8s %8s %8s %8s %7s %9s\n' "$kind $rules" "$load" "$p_rate" "$p_c" "$o_rate" "$o_c" "$f_rate" "$f_c" "${ratio}x" "$o_mf" | tee -a "$work/summary.txt"
        echo "  wall clock: OVS $o_mpps Mpps (PMD on CPU $o_share of the time), fulmar $f_mpps Mpps (worker on CPU $f_share), floor $p_mpps Mpps; forwarded share of input: OVS $o_fwd, fulmar $f_fwd; TSC ${tsc_hz:-?} Hz" | tee -a "$work/summary.txt"
    fi
    if [ -n "$floor" ]; then
        # fulmar above the floor against fulmar bench in memory (same
        # scenario, rules, flows; pinned to the forwarding CPU).
        # fulmar bench makes its bursts from the flows: at least 32 of them
        # (flows beyond the rules repeat them), so that its bursts are as
        # full as the DPDK ports' and not one packet each.
        mf=$(( f < 32 ? 32 : f ))
        m_ns=$(bench_ns "$scen" "$rules" "$mf" || echo 0)
        python3 - "$f_c" "$p_c" "$m_ns" "${tsc_hz:-0}" "$(cut -d' ' -f1 /proc/loadavg)" "$mf" <<'PY' | tee -a "$work/summary.txt"
import sys
f, p, m_ns, hz, load, mf = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3] or 0), float(sys.argv[4]), sys.argv[5], sys.argv[6]
m = m_ns * hz / 1e9
r = f"{(f - p) / m:.2f}x" if m > 0 else "n/a"
print(f"  fulmar above the floor: {f - p:.0f} cycles/packet; in memory (fulmar bench, {mf} flows): {m:.0f} ({m_ns:.1f} ns, load {load}); ratio {r} (target <= 1.25)")
PY
    fi
    if [ -n "$counts" ]; then
        for n in $counts; do
            fulmar_run "$dir" "$dir/rules.flows" "$dir/traffic.pcap" "$n" > "$dir/fulmar-$n.res"
            read -r m_mpps m_ns m_fwd m_cmpps m_cns m_share < "$dir/fulmar-$n.res"
            echo "  fulmar, $n workers on $n RX queues: $m_mpps Mpps wall ($m_cmpps per worker CPU-second summed, workers on CPU $m_share), 1 worker: $f_mpps wall; forwarded share $m_fwd" | tee -a "$work/summary.txt"
        done
    fi
    rm -f "$dir/traffic.pcap" "$dir/rules.flows"
done
cp "$work/summary.txt" "$work/../fdd-bench-last.txt" 2>/dev/null || true
