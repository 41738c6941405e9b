#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout: the docs check and its self-test, rustfmt and
# clippy (warnings are errors), Rust unit, header-drift and model-checking tests, a bounded fuzz
# run, then the C suite with ctest (software HSA runtime, vmem, hostcall,
# printf, exported symbols, install-tree consumers, crate packaging, demo)
# twice: with ASan+UBSan against a debug library, and as users build it; then
# the tests labelled gpu on the system ROCr when one is installed; then, with a
# nightly toolchain, ThreadSanitizer (scripts/tsan.sh) and Rust ASan.
# Installs missing build tools first. A test passes only on exit code 0; exit
# 77 is a skip with its reason, never a pass in disguise of a failure.
#   BUILD_DIR      build directory (default: build/test)
#   FUZZ_SECONDS   how long the printf fuzz target runs (default: 30)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
bash scripts/setup.sh

build_dir=${BUILD_DIR:-build/test}
jobs=$(nproc 2>/dev/null || echo 2)
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

echo "== docs check (every Markdown file and the headers' comments), and its self-test"
python3 scripts/docs_check.py
python3 scripts/docs_check_test.py

echo "== cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test (workspace, with the header drift test)"
cargo test --workspace --locked --features amdgpu-dropin/generate-headers

# The models live with what they check, in the hostcall core's crate.
if ls hostcall-core/tests/loom_*.rs >/dev/null 2>&1; then
  echo "== loom model checking"
  for test in hostcall-core/tests/loom_*.rs; do
    name=$(basename "$test" .rs)
    LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2} RUSTFLAGS="--cfg loom" \
      CARGO_TARGET_DIR=target/loom cargo test --locked --release -p amdgpu-dropin-hostcall-core --test "$name"
  done
fi

echo "== fuzzing the printf service (libFuzzer, bounded)"
bash fuzz/run.sh "${FUZZ_SECONDS:-30}"

echo "== C suite under ASan + UBSan (debug library)"
cmake -S . -B "$build_dir-asan" "${generator[@]}" -DAMDGPU_DROPIN_SANITIZE=ON \
  -DAMDGPU_DROPIN_CARGO_PROFILE=dev -DAMDGPU_DROPIN_BUILD_BENCH=OFF
cmake --build "$build_dir-asan" -j "$jobs"
# Proof that the sanitizers are really in the test binaries (grep reads all of
# nm's output: an early exit would kill nm with SIGPIPE under pipefail).
if ! nm "$build_dir-asan/ctest/vmem/vmem_layout_aug2026" | grep __asan_init >/dev/null; then
  echo "test.sh: the sanitized build has no ASan runtime" >&2
  exit 1
fi
ctest --test-dir "$build_dir-asan" --output-on-failure -j "$jobs"

echo "== C suite (cmake + ctest)"
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"

# The tests that need a real AMD GPU (label gpu: the vmem suite and the demo
# on the system ROCr), when a system ROCr is installed. Without a GPU, or with
# a ROCr that predates the vmem API, they report "skipped" (exit 77) and say
# why (shown here); ctest counts a skip as no failure, any other exit fails.
if /sbin/ldconfig -p 2>/dev/null | grep 'libhsa-runtime64\.so\.1 ' >/dev/null ||
   [ -e "${ROCM_PATH:-/opt/rocm}/lib/libhsa-runtime64.so.1" ]; then
  echo "== tests needing a GPU, on the system ROCr (ctest -L gpu)"
  cmake -S . -B "$build_dir-system-hsa" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAMDGPU_DROPIN_USE_SYSTEM_HSA=ON -DAMDGPU_DROPIN_BUILD_BENCH=OFF \
    -DAMDGPU_DROPIN_CARGO_TARGET_DIR="$(cd "$build_dir" && pwd)/cargo"
  cmake --build "$build_dir-system-hsa" -j "$jobs"
  ctest --test-dir "$build_dir-system-hsa" -L gpu --output-on-failure -j "$jobs"
  grep -E '^(vmem_test|demo): ' "$build_dir-system-hsa/Testing/Temporary/LastTest.log" | awk '!seen[$0]++'
else
  echo "== no system ROCr (libhsa-runtime64.so.1): the tests labelled gpu were not run"
fi

# Race detection and the Rust ASan run need a nightly toolchain
# (-Zsanitizer); without one they are skipped, saying so. AMDGPU_DROPIN_TSAN=0
# skips them on purpose.
if [ "${AMDGPU_DROPIN_TSAN:-1}" != 0 ] && cargo +nightly --version >/dev/null 2>&1; then
  echo "== ThreadSanitizer: Rust tests and C suite, library instrumented (scripts/tsan.sh)"
  BUILD_DIR="$build_dir-tsan" bash scripts/tsan.sh
  echo "== AddressSanitizer over the raw-memory Rust unit tests (scripts/rust-asan.sh)"
  bash scripts/rust-asan.sh
else
  echo "== skipped: ThreadSanitizer and Rust ASan (no nightly toolchain: rustup toolchain install nightly)"
fi
