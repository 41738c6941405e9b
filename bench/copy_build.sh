#!/bin/sh
# Copies what bench/device_run.sh needs from a build folder into DIR.
# Usage: bench/copy_build.sh BUILD_DIR DIR
set -eu
build=$1 dir=$2
mkdir -p "$dir"
cp "$build/bench/hostcall_bench" "$dir/"
for lib in hostcall_baseline hostcall_classic2026 hostcall_phase2026 hostcall_floor_doorbell \
           hostcall_floor_stack; do
  cp "$build/bench/lib$lib.so" "$dir/"
done
cp -L "$build/lib/amdgpu_dropin/libamdgpu_dropin.so" "$dir/libamdgpu_dropin.so"
cp -L "$build/ctest/hsa_runtime/libhsa-runtime64.so.1" "$dir/libhsa-runtime64.so.1"
