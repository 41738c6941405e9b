#!/usr/bin/env bash
# Runs the printf fuzz target for a bounded time (seconds, default 60).
# Uses cargo-fuzz when installed; otherwise builds the same libFuzzer binary
# with plain nightly cargo (the flags cargo-fuzz passes by default).
set -euo pipefail
seconds="${1:-60}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
mkdir -p corpus/printf artifacts/printf
if cargo +nightly fuzz --version >/dev/null 2>&1; then
  exec cargo +nightly fuzz run printf -- -max_total_time="$seconds"
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz/run.sh: no nightly toolchain; skipping (the stable randomized test tests/printf_fuzz.rs still runs)" >&2
  exit 0
fi
triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks \
-Zsanitizer=address -Cforce-frame-pointers"
cargo +nightly build --release --target "$triple" --bin printf
"target/$triple/release/printf" -max_total_time="$seconds" -rss_limit_mb=2048 \
  -artifact_prefix=artifacts/printf/ corpus/printf
