#!/usr/bin/env bash
# loom over the in-place table protocol (classifier::versioned): a writer
# inserting, modifying, removing, rebuilding and reclaiming against one or
# two readers refreshing, parking and looking up, a key in the overflow
# run with its candidates' spill bits, and the barrier a
# BARRIER_REPLY waits for (readers.rs), every interleaving up to
# a preemption bound (LOOM_MAX_PREEMPTIONS, or each model's own).
#
#   scripts/loom.sh            # well under two minutes on 2 cores
#
# `--cfg loom` swaps the module's atomics, Arc and Mutex for loom's
# (classifier/src/sync.rs). It changes every crate's build flags, so the
# build goes to its own target directory (target/loom, or loom/ under
# CARGO_TARGET_DIR when that is set) and leaves the normal build alone.
# The test command runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/loom"
export RUSTFLAGS="--cfg loom"
cargo test --locked -p classifier --release --lib versioned::loom
echo "loom: every explored interleaving kept the protocol"
