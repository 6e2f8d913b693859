#!/usr/bin/env bash
# Runs the target configurations of the benchmark issue with `fulmar bench`
# (one worker, 64-byte packets, in-memory packets, no root) and prints a
# table of the figures and the exact command lines.
#
#   bench/run-all.sh            # every configuration, 10 s of traffic each
#   SECONDS_PER_RUN=3 bench/run-all.sh
#   ONLY=l3 bench/run-all.sh    # configurations whose name contains "l3"
#
# Each run is bounded: SECONDS_PER_RUN of traffic (at most 10) plus the
# rule install. The 1M-rule gateway runs are skipped when the install rate
# measured on the 100K gateway run says installing 1M rules alone would
# take more than INSTALL_LIMIT seconds (default 120); the table says so.
#
# Needs: cargo; jq for the table (without it the JSON lines are printed).
set -u
cd "$(dirname "$0")/.."

SECS=${SECONDS_PER_RUN:-10}
if awk "BEGIN{exit !($SECS > 10)}"; then SECS=10; fi
INSTALL_LIMIT=${INSTALL_LIMIT:-120}
ONLY=${ONLY:-}
OUT=${OUT_DIR:-target/bench-results}
mkdir -p "$OUT"

echo "building fulmar (release)..." >&2
cargo build --release -q -p fulmar || exit 1
BIN=target/release/fulmar

# name | scenario | rules | extra options
CONFIGS="
gateway-vlan2mpls-100k gateway-vlan2mpls 100000
gateway-mpls2vlan-100k gateway-mpls2vlan 100000
gateway-vlan2mpls-1m gateway-vlan2mpls 1000000
gateway-mpls2vlan-1m gateway-mpls2vlan 1000000
l3-100k l3 100000
acl-10k acl 10000
l2-100k l2 100000
gateway-vlan2mpls-10k-fm gateway-vlan2mpls 10000 --flow-mods 1000
"

rows=()
status=0
rate_100k=""   # gateway install rate (rules/s) measured at 100K
fmrows=()
while read -r name scenario rules extra; do
    [ -z "$name" ] && continue
    case "$name" in *"$ONLY"*) ;; *) continue ;; esac
    cmd="$BIN bench $scenario --rules $rules --workers 1 --packet-size 64 --seconds $SECS --json${extra:+ $extra}"
    if [ "$rules" -ge 1000000 ] && [ -n "$rate_100k" ]; then
        est=$(awk "BEGIN{printf \"%.0f\", $rules / $rate_100k}")
        if [ "$est" -gt "$INSTALL_LIMIT" ]; then
            rows+=("$name|skipped: installing $rules rules would take ~${est} s at the 100K install rate ($(printf %.0f "$rate_100k") rules/s), limit ${INSTALL_LIMIT} s|$cmd")
            continue
        fi
    fi
    echo "running $name: $cmd" >&2
    # Bound: traffic + install estimate + slack for generation and the check.
    limit=$((SECS + INSTALL_LIMIT + 120))
    if timeout "$limit" $cmd >"$OUT/$name.json" 2>"$OUT/$name.err"; then
        :
    else
        rc=$?
        status=1
        rows+=("$name|failed (exit $rc): $(tail -n 3 "$OUT/$name.err" | tr '\n' ' ')|$cmd")
        continue
    fi
    if [ "$scenario" = gateway-vlan2mpls ] && [ "$rules" -lt 1000000 ] && command -v jq >/dev/null; then
        rate_100k=$(jq -r '.install_rate' "$OUT/$name.json")
    fi
    if [ -n "$extra" ] && command -v jq >/dev/null; then
        fmrows+=("$(jq -r '.flow_mods | "\(.count) flow-mods: \(.per_sec|round)/s alone; with traffic \(.applied_with_traffic) applied at \(.per_sec_with_traffic|round)/s, \(.publishes) snapshots of \(.publish_ms_mean*1000|round/1000) ms; forwarding \(.mpps_while_installing*1000000|round/1000000) Mpps while installing"' "$OUT/$name.json") vs $(jq -r '.mpps*1000000|round/1000000' "$OUT/$name.json") Mpps undisturbed")
    fi
    if command -v jq >/dev/null; then
        rows+=("$name|$(jq -r '[
            (.mpps*1000000|round/1000000), (.mpps*1000000|round), (.ns_per_packet|round), (.mpps_wall*1000000|round/1000000),
            (.generator_ns_per_packet*10|round/10), (if .cache_hit_rate == null then "n/a" else .cache_hit_rate end),
            ((.rss_bytes // 0)/1048576|round), (.install_seconds*100|round/100), (.install_rate|round),
            "\(.checked - .mismatches)/\(.checked)"] | map(tostring) | join("|")' "$OUT/$name.json")|$cmd")
    else
        rows+=("$name|$(cat "$OUT/$name.json")|$cmd")
    fi
done <<<"$CONFIGS"

echo
echo "fulmar bench, one worker, 64-byte packets, ${SECS} s of traffic per run ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs)"
echo "Mpps, pkts/s and ns/pkt: pipeline only (template refill subtracted); wall Mpps includes it; gen_ns = refill cost per packet."
echo
if command -v jq >/dev/null; then
    printf '%-24s %10s %10s %10s %10s %7s %6s %8s %9s %10s %7s\n' config Mpps pkts/s ns/pkt wallMpps gen_ns cache RSS_MiB install_s install/s check
fi

for r in "${rows[@]}"; do
    IFS='|' read -r -a f <<<"$r"
    if [ "${#f[@]}" -ge 12 ]; then
        printf '%-24s %10s %10s %10s %10s %7s %6s %8s %9s %10s %7s\n' "${f[@]:0:11}"
    else
        printf '%-24s %s\n' "${f[0]}" "${f[1]}"
    fi

done
if [ "${#fmrows[@]}" -gt 0 ]; then
    echo
    echo "flow-mods (gateway-vlan2mpls, 10K rules installed; a snapshot published per flow-mod, as the runtime does):"
    for r in "${fmrows[@]}"; do printf '  %s\n' "$r"; done
fi
echo
echo "commands:"
for r in "${rows[@]}"; do
    printf '  %s\n' "${r##*|}"
done
echo "JSON results in $OUT/"
exit $status
