#!/usr/bin/env bash
# The seed papers' experiments on fulmar, with Open vSwitch beside it
# (bench/seeds/README.md says what each measures and how).
#
#   sudo bench/seeds/run.sh [NAME|SEED...] [--quick|--smoke] [--out DIR] [--prefix P] [--lock FILE] [--systems A,B]
#   bench/seeds/run.sh --list
#   bench/seeds/run.sh --publish [--out DIR]      # results into docs/results.md (no root)
#   bench/seeds/run.sh --replot [NAME...] [--out DIR]   # redraw plots and tables from the CSVs (no root)
#
# Installs what it uses when missing (Debian: netsniff-ng for trafgen,
# tcpreplay, iperf3, ethtool, nftables, openvswitch-switch; the .venv from
# tests/requirements.txt for matplotlib), builds fulmar (release) unless
# FULMAR names a binary, then runs bench/seeds/seeds.py with the same
# arguments. Everything it creates is named from --prefix (default sd) and
# removed at the end, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

measuring=1
for a in "$@"; do
    case "$a" in --list | --publish | --replot | -h | --help) measuring= ;; esac
done

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import matplotlib' 2>/dev/null; then
    echo "bench/seeds: making .venv from tests/requirements.txt (matplotlib)" >&2
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
fi

if [ -n "$measuring" ]; then
    [ "$(id -u)" = 0 ] || { echo "bench/seeds: needs root (network namespaces, veths, Open vSwitch)" >&2; exit 1; }
    need=()
    command -v trafgen >/dev/null || need+=(netsniff-ng)
    command -v tcpreplay >/dev/null || need+=(tcpreplay)
    command -v iperf3 >/dev/null || need+=(iperf3)
    command -v ethtool >/dev/null || need+=(ethtool)
    command -v nft >/dev/null || need+=(nftables)
    command -v ovs-vswitchd >/dev/null || need+=(openvswitch-switch)
    command -v ping >/dev/null || need+=(iputils-ping)
    if [ ${#need[@]} -gt 0 ]; then
        echo "bench/seeds: installing ${need[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    if [ -z "${FULMAR:-}" ]; then
        cargo build --release --locked -q -p fulmar
        export FULMAR=$root/target/release/fulmar
    fi
fi

exec .venv/bin/python bench/seeds/seeds.py "$@"
