# Sourced by the bench scripts that run Open vSwitch 3.1 beside fulmar.
#
# ovs_private_start DIR NS starts an ovsdb-server and an ovs-vswitchd of
# their own (userspace netdev datapath, --disable-system: no kernel
# module), every file in DIR, the vswitchd inside network namespace NS: its
# netdev datapath makes a tap named "ovs-netdev", so one runs per
# namespace, and another OVS (tests/conformance/ryu-of13.sh) may hold the
# root one. Both pids are appended to the caller's `pids` array (the
# caller's cleanup stops them). `vsctl` and `ovs_appctl` then talk to them.
#
# It sources bench/lib.sh too (run from the repository root, as the
# scripts are), so that a script needs one `source` line.

source bench/lib.sh

ovs_private_start() {
    local dir=$1 ns=$2
    export OVS_RUNDIR=$dir OVS_DBDIR=$dir OVS_LOGDIR=$dir OVS_PKGDATADIR=/usr/share/openvswitch
    mkdir -p "$dir"
    ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$dir/conf.db" --remote="punix:$dir/db.sock" --pidfile="$dir/ovsdb.pid" \
        --log-file="$dir/ovsdb.log" --detach 2>>"$dir/console.log"
    pids+=("$(cat "$dir/ovsdb.pid")")
    vsctl --no-wait init
    ip netns exec "$ns" ovs-vswitchd "unix:$dir/db.sock" --disable-system --pidfile="$dir/vswitchd.pid" \
        --log-file="$dir/vswitchd.log" --detach 2>>"$dir/console.log"
    pids+=("$(cat "$dir/vswitchd.pid")")
}

vsctl() { ovs-vsctl --db="unix:$OVS_RUNDIR/db.sock" --timeout=10 "$@"; }

ovs_appctl() { ovs-appctl -t "$OVS_RUNDIR/ovs-vswitchd.$(cat "$OVS_RUNDIR/vswitchd.pid").ctl" "$@"; }

# For a cleanup: reap_namespaces SIG NS... sends TERM to the caller's `pids`
# and SIG to everything still running inside the namespaces NS (INT where
# a generator such as trafgen must pass it on to its child), KILL to both
# 0.3 s later, then deletes the namespaces.
reap_namespaces() {
    local sig=$1 ns p
    shift
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for ns in "$@"; do kill "-$sig" $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null; done
    sleep 0.3
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    for ns in "$@"; do kill -9 $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null; done
    for ns in "$@"; do ip netns del "$ns" 2>/dev/null; done
    return 0
}
