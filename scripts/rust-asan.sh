#!/usr/bin/env bash
# AddressSanitizer over the Rust unit tests that touch raw memory and layouts:
# both hostcall protocols (layouts, buffer views in device memory, serving
# steps, the packet view: the hostcall core's crate, hostcall-core/), the
# slow-buffer classifier, and the vmem ringbuffer against the Rust fake HSA.
# These tests call no foreign code, so Miri can run the same selection:
#
#   cargo +nightly miri test -p amdgpu-dropin-hostcall-core --lib -- protocol::
#   cargo +nightly miri test -p amdgpu-dropin --lib -- \
#       hostcall::listener::classifier vmem::ringbuffer
#
# (the miri component is not installed on every machine; this script needs
# only a nightly toolchain with -Zsanitizer=address).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
triple=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer" CARGO_TARGET_DIR=target/asan \
  cargo +nightly test --locked --target "$triple" -p amdgpu-dropin-hostcall-core --lib -- protocol::
RUSTFLAGS="-Zsanitizer=address -Cunsafe-allow-abi-mismatch=sanitizer" CARGO_TARGET_DIR=target/asan \
  cargo +nightly test --locked --target "$triple" -p amdgpu-dropin --lib -- \
  hostcall::listener::classifier vmem::ringbuffer
# Proof the sanitizer is linked (nm reads all output: no SIGPIPE under pipefail).
for crate in amdgpu_dropin amdgpu_dropin_hostcall_core; do
  lib_test=$(ls -t target/asan/"$triple"/debug/deps/"$crate"-* | grep -v '\.d$' | head -n 1)
  if ! nm "$lib_test" | grep __asan_init >/dev/null; then
    echo "rust-asan.sh: $lib_test has no ASan runtime" >&2
    exit 1
  fi
done
echo "rust-asan.sh: OK"
