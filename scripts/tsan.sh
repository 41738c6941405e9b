#!/usr/bin/env bash
# Race detection with ThreadSanitizer: the Rust tests, then the C suite against
# a library whose Rust code is instrumented too.
#
#   bash scripts/tsan.sh            both parts
#   TSAN_PART=rust|c bash scripts/tsan.sh
#
# Needs a nightly toolchain (-Zsanitizer=thread). Without rust-src, std stays
# uninstrumented (-Cunsafe-allow-abi-mismatch=sanitizer); the reports that
# causes are suppressed in scripts/tsan.supp, each with its reason.
# --target keeps RUSTFLAGS off build scripts and proc macros.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
part=${TSAN_PART:-all}
triple=$(rustc -vV | sed -n 's/^host: //p')
# Legacy symbol mangling: GCC's libtsan (the C suite's runtime) demangles it
# (not v0), so reports and scripts/tsan.supp read alloc::sync::Arc etc.
rustflags="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer -Zunstable-options -Csymbol-mangling-version=legacy"
# halt_on_error: the first report fails the run. die_after_fork=0: the suite
# forks children that start threads (supported by the library; TSan only warns).
# report_thread_leaks=0: a process that exits with buffers enabled leaves its
# listener threads unjoined by design (the exit handler waits for them to
# leave their loop, not to be joined; see src/hostcall/registry.rs), which
# TSan would report as a leak at every such exit.
export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp halt_on_error=1 die_after_fork=0 report_thread_leaks=0 ${TSAN_OPTIONS:-}"
build_dir=${BUILD_DIR:-build/tsan}
jobs=$(nproc 2>/dev/null || echo 2)

# nm reads all output (an early grep exit would kill nm with SIGPIPE under pipefail).
has_symbol() { nm -D --defined-only "$1" 2>/dev/null | grep "$2" >/dev/null || nm "$1" 2>/dev/null | grep "$2" >/dev/null; }

if [ "$part" = all ] || [ "$part" = rust ]; then
  echo "== Rust tests under ThreadSanitizer (nightly, library instrumented)"
  # One test at a time: some unit tests panic on purpose, and two of them
  # panicking on two libtest threads at once meet inside std's uninstrumented
  # panic and output-capture code, which TSan reports without seeing std's
  # locks. Tests that start threads of their own are still checked as before.
  RUSTFLAGS="$rustflags" CARGO_TARGET_DIR=target/tsan \
    cargo +nightly test --locked --target "$triple" --workspace --lib --tests --no-fail-fast -- --test-threads=1
  lib_test=$(ls -t target/tsan/"$triple"/debug/deps/amdgpu_dropin-* | grep -v '\.d$' | head -n 1)
  if ! has_symbol "$lib_test" __tsan_init; then
    echo "tsan.sh: $lib_test has no TSan runtime" >&2
    exit 1
  fi
fi

if [ "$part" = all ] || [ "$part" = c ]; then
  echo "== C suite under ThreadSanitizer (library instrumented)"
  export RUSTUP_TOOLCHAIN=nightly RUSTFLAGS="$rustflags" CARGO_BUILD_TARGET="$triple"
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S . -B "$build_dir" "${generator[@]}" -DAMDGPU_DROPIN_TSAN=ON \
    -DAMDGPU_DROPIN_CARGO_PROFILE=dev -DAMDGPU_DROPIN_BUILD_BENCH=OFF
  # CMake tracks the Rust sources, not RUSTFLAGS: drop the copied libraries
  # so every variant goes through cargo (which rebuilds only what changed).
  rm -rf "$build_dir/lib"
  cmake --build "$build_dir" -j "$jobs"
  # Proof: the test binaries carry the TSan runtime and the library's Rust
  # code calls into it.
  if ! has_symbol "$build_dir/ctest/hostcall/hc_multi_buffer" __tsan_init; then
    echo "tsan.sh: the C tests have no TSan runtime" >&2
    exit 1
  fi
  if ! nm -D "$build_dir/lib/amdgpu_dropin/libamdgpu_dropin.so" | grep __tsan_func_entry >/dev/null; then
    echo "tsan.sh: the library is not instrumented" >&2
    exit 1
  fi
  ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
fi
