#!/usr/bin/env bash
# Runs the printf fuzz target (libFuzzer + AddressSanitizer) for a bounded time
# in seconds (default 60). Builds with the flags cargo-fuzz passes by default,
# with plain cargo, so no cargo-fuzz install is needed. On a stable toolchain
# RUSTC_BOOTSTRAP=1 unlocks the -Z sanitizer flag for this build only (the
# stable rust-std ships the ASan runtime); a nightly toolchain is used as is.
set -euo pipefail
seconds="${1:-60}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
mkdir -p corpus/printf artifacts/printf
triple="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks \
-Zsanitizer=address -Cforce-frame-pointers"
cargo build --locked --release --target "$triple" --bin printf
echo "fuzz/run.sh: fuzzing the printf message parser and formatter for ${seconds}s"
log="artifacts/printf/last-run.log"
status=0
"target/$triple/release/printf" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix=artifacts/printf/ corpus/printf >"$log" 2>&1 || status=$?
# The summary: inputs run, and any sanitizer or crash report.
grep -E "^(#[0-9]+ *DONE|Done|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|INFO: seed)" "$log" || true
if [ "$status" != 0 ]; then
  tail -n 40 "$log" >&2
  echo "fuzz/run.sh: the fuzzer found a failure (exit $status; see fuzz/$log and fuzz/artifacts/printf/)" >&2
  exit "$status"
fi
echo "fuzz/run.sh: no crash in ${seconds}s"
