# Sourced by the bench scripts: the small pieces several of them share.

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

# memory_ports_toml: the [[bridges.ports]] tables of a `fulmar run` config
# for ports 1 and 2 on the in-memory backend (interfaces m1 and m2), for a
# bridge table the caller writes around it.
memory_ports_toml() {
    cat <<'TOML'
[[bridges.ports]]
port = 1
interface = "m1"
backend = "memory"
[[bridges.ports]]
port = 2
interface = "m2"
backend = "memory"
TOML
}
