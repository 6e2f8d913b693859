# Sourced by the bench scripts: the small pieces several of them share.

# cleanup_begin: how a cleanup that bench_deadline's watchdog guards
# starts: errors no longer stop it, no trap runs it again, and the
# watchdog and fulmar ($fulmar_pid, when set) are killed.
cleanup_begin() {
    set +e
    trap - EXIT INT TERM
    [ -n "${watchdog:-}" ] && kill "$watchdog" 2>/dev/null
    [ -n "${fulmar_pid:-}" ] && kill -9 "$fulmar_pid" 2>/dev/null
    return 0
}

# nsx NS CMD...: runs CMD inside network namespace NS.
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# bench_deadline SECS: Ctrl-C or TERM ends the script (so its EXIT trap
# cleans up), and a watchdog sends it TERM after SECS seconds; the
# watchdog's pid is left in `watchdog` for the cleanup to kill.
bench_deadline() {
    trap 'echo "interrupted" >&2; exit 130' INT TERM
    ( sleep "$1"; echo "$0: time limit reached, stopping" >&2; kill -TERM $$ ) &
    watchdog=$!
}

# wait_started PID ERR: waits (10 s at most) until the fulmar started as
# PID says "running bridges" on its stderr, file ERR, or exits; true when it
# said so.
wait_started() {
    local _
    for _ in $(seq 100); do
        grep -qs "running bridges" "$2" && return 0
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    grep -qs "running bridges" "$2"
}

# ports_toml [--backend B] IFACE...: the [[bridges.ports]] tables of a
# `fulmar run` config numbering the interfaces IFACE... from port 1, each
# on backend B when given, for a bridge table the caller writes above.
ports_toml() {
    local backend= n=0 dev
    if [ "$1" = --backend ]; then backend=$2; shift 2; fi
    for dev in "$@"; do
        n=$((n + 1))
        printf '[[bridges.ports]]\nport = %d\ninterface = "%s"\n' "$n" "$dev"
        [ -z "$backend" ] || printf 'backend = "%s"\n' "$backend"
    done
}

# parse_options USAGE SPEC... -- ARGS...: sets the caller's variables from
# its arguments ARGS. A SPEC is OPTION=VAR (the option takes a value, which
# goes into VAR) or OPTION=VAR=VALUE (a flag, which sets VAR to VALUE).
# Anything else, --help included, prints "usage: $0 USAGE" and exits 2.
parse_options() {
    local _po_usage=$1 _po_opt _po_rest
    local -A _po_takes=() _po_sets=()
    shift
    while [ "$1" != -- ]; do
        _po_opt=${1%%=*} _po_rest=${1#*=}
        if [[ $_po_rest == *=* ]]; then _po_sets[$_po_opt]=$_po_rest; else _po_takes[$_po_opt]=$_po_rest; fi
        shift
    done
    shift
    while [ $# -gt 0 ]; do
        if [[ $1 == --* && -n ${_po_takes[$1]+x} && $# -ge 2 ]]; then
            printf -v "${_po_takes[$1]}" '%s' "$2"
            shift 2
        elif [[ $1 == --* && -n ${_po_sets[$1]+x} ]]; then
            printf -v "${_po_sets[$1]%%=*}" '%s' "${_po_sets[$1]#*=}"
            shift
        else
            echo "usage: $0 $_po_usage" >&2
            exit 2
        fi
    done
}
