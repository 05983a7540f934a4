#!/usr/bin/env bash
# Smoke-fuzz the ebb-wire decoder: builds the `decode` target with cargo-fuzz on the stable
# toolchain (RUSTC_BOOTSTRAP=1 unlocks the -Z sanitizer flags), seeds its corpus with the valid
# encodings in seeds/ (one of each opcode and compressor, with sequences and a checksum), and
# runs for ${FUZZ_SECONDS:-60} seconds. Exits non-zero on a crash, leak, OOM or timeout; the
# input is then under artifacts/decode/ and can be replayed with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run decode artifacts/decode/<file>
set -euo pipefail

cd "$(dirname "$0")"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

export RUSTC_BOOTSTRAP="${RUSTC_BOOTSTRAP:-1}"

mkdir -p corpus/decode
cp -n seeds/* corpus/decode/

# CI keeps the (slow, sanitizer-instrumented) fuzz build outside the clone.
target_dir=()
if [[ -n "${EBB_FUZZ_TARGET_DIR:-}" ]]; then
    target_dir=(--target-dir "$EBB_FUZZ_TARGET_DIR")
fi

cargo fuzz run "${target_dir[@]}" decode corpus/decode -- \
    -max_total_time="${FUZZ_SECONDS:-60}" \
    -rss_limit_mb=2048 \
    -timeout=10 \
    -print_final_stats=1
