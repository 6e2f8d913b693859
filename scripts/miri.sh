#!/usr/bin/env bash
# Miri over the tests of the modules with `unsafe` that can run without
# system calls: the SPSC ring and the packet buffers' lent storage
# (dataplane), and the classifier's prefetching subtable. The port
# backends (packet sockets, AF_XDP, TAP, netlink, eventfd) are system
# calls through libc and cannot run under Miri; their invariants are
# stated at each `unsafe` block and exercised by the end-to-end tests.
#
#   scripts/miri.sh            # a few minutes on 2 cores
#
# Needs the nightly toolchain with the miri and rust-src components
# (installed here if missing). Tests that exchange many packets between
# threads run a shorter exchange under Miri (cfg!(miri)).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1 || true
# Proptest keeps failures in files (needs the file system) and runs 256
# cases by default, slow when every step is interpreted.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
export PROPTEST_CASES="${PROPTEST_CASES:-8}"
cargo +nightly miri test -p dataplane --lib -- spsc:: port::
cargo +nightly miri test -p classifier --lib -- subtable::
echo "miri: no undefined behaviour found"
