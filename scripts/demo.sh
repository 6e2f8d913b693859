#!/usr/bin/env bash
# Builds fulmar (release) and runs `fulmar demo` as root: two network
# namespaces, three veth pairs, the seed-001 gateway over two bridges
# (VLAN 10 -> MPLS -> VLAN 20), a ping across, the counters, then cleanup.
# Extra arguments go to `fulmar demo` (e.g. --mode rx-worker-tx, --hold).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p fulmar
if [ "$(id -u)" -ne 0 ]; then
    exec sudo target/release/fulmar demo "$@"
fi
exec target/release/fulmar demo "$@"
