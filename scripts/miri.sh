#!/usr/bin/env bash
# Miri over the tests of the modules with `unsafe` or lock-free handshakes
# that can run without system calls: the SPSC ring, the port layer's
# counters, the AF_PACKET ring's slot lending and the snapshots with an
# in-place table read at their versions, by threads (dataplane),
# the packet buffer with its lent storage and pool (packet), and the
# classifier's prefetching subtable and in-place table (`versioned`: the
# array pointer's dereference and the retire/free path, with threads, so
# the data-race detector checks that every shared word is atomic). The port
# backends (packet sockets, AF_XDP, TAP, netlink, eventfd) are system
# calls through libc and cannot run under Miri; their invariants are
# stated at each `unsafe` block and exercised by the end-to-end tests.
#
#   scripts/miri.sh            # about four minutes on 2 cores
#
# Needs a nightly toolchain with the miri and rust-src components: the
# dated one below (a nightly known to ship Miri), installed here if
# missing; MIRI_TOOLCHAIN picks another. Tests that exchange many packets
# between threads, and the classifier's model tests, run shorter under
# Miri (cfg!(miri)). The test command runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
tc=${MIRI_TOOLCHAIN:-nightly-2026-05-20}
rustup toolchain install --profile minimal --component miri,rust-src "$tc" >/dev/null
# Proptest keeps failures in files (needs the file system) and runs 256
# cases by default, slow when every step is interpreted.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
export PROPTEST_CASES="${PROPTEST_CASES:-8}"
# Miri interprets a test binary on one host thread, so the two groups
# below (about the same length) run side by side, one a CPU. The sysroot
# they share is built first; their builds take the target directory's
# lock in turn, the runs do not hold it. Each group's output is printed
# whole when both are done, with each test's time (--report-time).
cargo +"$tc" miri setup >/dev/null
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
times=(-Zunstable-options --report-time)
(cargo +"$tc" miri test -p dataplane --lib -- spsc:: port:: afpacket::lend:: snapshot:: "${times[@]}") \
    >"$logs/dataplane" 2>&1 &
first=$!
(
    cargo +"$tc" miri test -p packet --lib -- buffer:: "${times[@]}"
    # The in-place table's differential property test is left to the
    # normal run: under Miri it took a minute for a few cases, and the
    # unit tests already take every unsafe path of the module (array
    # pointer, rebuild, retire and free) with threads.
    cargo +"$tc" miri test -p classifier --lib -- subtable:: versioned:: \
        --skip versioned::tests::agrees_with_a_model "${times[@]}"
) >"$logs/packet-classifier" 2>&1 &
second=$!
failed=()
wait "$first" || failed+=(dataplane)
wait "$second" || failed+=("packet, classifier")
for f in dataplane packet-classifier; do
    echo "--- miri: $f"
    cat "$logs/$f"
done
if ((${#failed[@]})); then
    echo "miri: failed in ${failed[*]} (output above)" >&2
    exit 1
fi
echo "miri: no undefined behaviour found"
