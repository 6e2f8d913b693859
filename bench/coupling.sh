#!/usr/bin/env bash
# The control/data coupling benchmark of issue #35 (after OPNFV VSPERF's):
# the gateway at N rules (default 1M) forwarding on one worker while a
# controller's flow-mods (adds and deletes, the table's size kept) are
# applied at 1K, 10K and 100K flow-mods a second, one step each, with an
# idle step before and after each (a step's ratio is to the mean of its
# two idle neighbours, so a drifting load shows in the idle steps rather
# than in the ratios). `fulmar bench SCENARIO
# --coupling RATES` does the run in memory (crates/bench/src/coupling.rs
# says how); this builds it in release and prints, per step, the flow-mod
# rate achieved, the forwarding rate, its ratio to the idle step's and the
# load average, and the command line. No root, no ports.
#
#   bench/coupling.sh [--quick] [--rules N] [--flows N] [--seconds S]
#                     [--rates R,R,...] [--window N] [--workers N]
#                     [--scenario NAME] [--binary PATH] [--json]
#
#   --quick   100K rules, 65,536 flows, 2 s a step (a first look)
#
# Defaults: gateway-vlan2mpls, 1,000,000 rules, 65,536 flows, 5 s a step,
# rates 0,1000,0,10000,0,100000,0, a churn window of 1024 rules, one worker.
# Issue #35's target: forwarding at 100K flow-mods/s >= 0.90 of idle.
# The figures are this machine's at its load: the load average is printed
# before the run and with every step; compare ratios, not rates, and only
# from a quiet machine. Heavy runs take /tmp/fulmar-heavy.lock when flock
# is there, so two of them do not share the cores.
set -euo pipefail
cd "$(dirname "$0")/.."

scenario=gateway-vlan2mpls rules=1000000 flows=65536 seconds=5
rates=0,1000,0,10000,0,100000,0 window=1024 workers=1 bin= json=
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) rules=100000 seconds=2; shift ;;
        --rules) rules=$2; shift 2 ;;
        --flows) flows=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --rates) rates=$2; shift 2 ;;
        --window) window=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --scenario) scenario=$2; shift 2 ;;
        --binary) bin=$2; shift 2 ;;
        --json) json=--json; shift ;;
        *) sed -n '2,/^set /p' "$0" | sed 's/^# \{0,1\}//;/^set /d' >&2; exit 2 ;;
    esac
done
if [[ -z $bin ]]; then
    echo "building fulmar (release)..." >&2
    cargo build --release -q -p fulmar
    bin=target/release/fulmar
fi
cmd=("$bin" bench "$scenario" --rules "$rules" --flows "$flows" --workers "$workers"
     --seconds "$seconds" --coupling "$rates" --coupling-window "$window" $json)
echo "# $(date -u '+%F %H:%M UTC'), $(nproc) CPUs, $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
     "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ${cmd[*]}"
if command -v flock >/dev/null; then
    flock /tmp/fulmar-heavy.lock "${cmd[@]}"
else
    "${cmd[@]}"
fi
