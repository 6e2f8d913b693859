#!/usr/bin/env bash
# A long run (root): many flows, paced traffic, flow changes and statistics
# requests for --seconds (default 30 minutes); checks that resident memory
# stays flat and that every packet is accounted for. See bench/soak.py.
#   sudo bench/soak.sh [--seconds 1800] [--flows 1000000] [--pps 20000]
set -euo pipefail
cd "$(dirname "$0")/.."
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python   # scapy and os-ken (the test venv)
exec "$py" bench/soak.py "$@"
