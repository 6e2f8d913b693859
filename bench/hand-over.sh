#!/usr/bin/env bash
# What the workers' counter hand-over costs per packet (issue #34):
# `fulmar bench` with `--hand-over-ms 20` (the runtime's SYNC_EVERY, the
# default) and `--hand-over-ms 0` (never), for one or two binaries, in
# alternating rounds, load average printed before each run.
#
#   bench/hand-over.sh [--rounds N] [--seconds S] [--rules N] [--flows N]
#                      BINARY [BINARY2]
#
# Prints one line per run: binary, hand-over period, ns/packet (pipeline
# only) and Mpps; then the median ns/packet of each (binary, period).
# The default is the gateway scenario with 100K rules and 65,536 flows,
# the shape whose DPDK profile showed the cost.
set -euo pipefail
rounds=3 seconds=4 rules=100000 flows=65536
while [[ $# -gt 0 && $1 == --* ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --rules) rules=$2; shift 2 ;;
        --flows) flows=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $# -ge 1 ]] || { echo "usage: $0 [options] BINARY [BINARY2]" >&2; exit 2; }
bins=("$@")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
    # The order turns each round, so that neither runs always first.
    pairs=()
    for b in "${bins[@]}"; do for ms in 20 0; do pairs+=("$b|$ms"); done; done
    if ((r % 2)); then
        rev=()
        for ((i = ${#pairs[@]} - 1; i >= 0; i--)); do rev+=("${pairs[i]}"); done
        pairs=("${rev[@]}")
    fi
    for p in "${pairs[@]}"; do
        b=${p%|*} ms=${p##*|}
        load=$(cut -d' ' -f1 /proc/loadavg)
        json=$("$b" bench gateway-vlan2mpls --rules "$rules" --flows "$flows" \
            --seconds "$seconds" --hand-over-ms "$ms" --json 2>/dev/null)
        ns=$(sed -n 's/.*"ns_per_packet":\([0-9.]*\).*/\1/p' <<<"$json")
        mpps=$(sed -n 's/.*"mpps":\([0-9.]*\).*/\1/p' <<<"$json")
        printf '%s\t%s ms\t%.1f ns/packet\t%.2f Mpps\tload %s\n' "$b" "$ms" "$ns" "$mpps" "$load"
        printf '%s %s %s\n' "$b" "$ms" "$ns" >>"$out"
    done
done
echo "medians (ns/packet):"
cut -d' ' -f1,2 "$out" | sort -u | while read -r b ms; do
    awk -v b="$b" -v ms="$ms" '$1 == b && $2 == ms { print $3 }' "$out" | sort -n |
        awk -v b="$b" -v ms="$ms" '{ v[++n] = $1 } END {
            m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            printf "  %s, hand-over every %s ms: %.1f ns/packet (%d runs)\n", b, ms, m, n }'
done
