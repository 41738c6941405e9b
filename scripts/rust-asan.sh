#!/usr/bin/env bash
# AddressSanitizer over the Rust unit tests that touch raw memory and layouts:
# both hostcall protocols (layouts, buffer views in device memory, serving
# steps, the packet view), the slow-buffer classifier, and the vmem ringbuffer
# against the Rust fake HSA.
# These tests call no foreign code, so Miri can run the same selection:
#
#   cargo +nightly miri test --lib -- hostcall::protocol \
#       hostcall::listener::classifier vmem::ringbuffer
#
# (the miri component is not installed on every machine; this script needs
# only a nightly toolchain with -Zsanitizer=address).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
triple=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer" CARGO_TARGET_DIR=target/asan \
  cargo +nightly test --locked --target "$triple" --lib -- \
  hostcall::protocol hostcall::listener::classifier vmem::ringbuffer
lib_test=$(ls -t target/asan/"$triple"/debug/deps/amdgpu_dropin-* | grep -v '\.d$' | head -n 1)
# Proof the sanitizer is linked (nm reads all output: no SIGPIPE under pipefail).
if ! nm "$lib_test" | grep __asan_init >/dev/null; then
  echo "rust-asan.sh: $lib_test has no ASan runtime" >&2
  exit 1
fi
echo "rust-asan.sh: OK"
