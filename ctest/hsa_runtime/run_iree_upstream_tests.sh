#!/usr/bin/env bash
# Builds IREE's own libhsa_test, topology_test and vmem_test from an IREE
# checkout, unchanged, with vmem.c left out and libamdgpu_dropin.a linked in
# its place, and runs them on the software HSA runtime (no GPU needed).
#
# Usage: run_iree_upstream_tests.sh <iree checkout> <project build dir> [GPU counts...]
#   <iree checkout>      an IREE source tree (runtime/src/...) whose
#                        third_party/hsa-runtime-headers submodule is present
#   <project build dir>  a CMake build of this project (has
#                        ctest/hsa_runtime/libhsa-runtime64.so.1 and the
#                        library under cargo/<profile>/libamdgpu_dropin.a)
#   GPU counts           simulated GPUs per run (default: 1 2 4)
# Needs gcc, g++ and GoogleTest (Debian: libgtest-dev libgmock-dev).
# Only the IREE sources these tests need are compiled (iree/base, a few of
# iree/base/internal and iree/io, libhsa.c, topology.c, gtest_main.cc), into
# <project build dir>/iree-upstream-tests. Exit status: 0 when every test of
# every run passed.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,18p' "$0"
  exit 2
fi
IREE=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
shift 2
if [[ $# -gt 0 ]]; then GPU_COUNTS=("$@"); else GPU_COUNTS=(1 2 4); fi

R="$IREE/runtime/src"
HEADERS="$IREE/third_party/hsa-runtime-headers/include/hsa/hsa.h"
SIM_DIR="$BUILD/ctest/hsa_runtime"
LIB=$(ls "$BUILD"/cargo/*/libamdgpu_dropin.a 2>/dev/null | head -n1 || true)
OUT="$BUILD/iree-upstream-tests"
for f in "$R/iree/hal/drivers/amdgpu/util/libhsa.c" "$HEADERS" \
         "$SIM_DIR/libhsa-runtime64.so.1" "$LIB"; do
  [[ -n "$f" && -f "$f" ]] || { echo "missing: ${f:-libamdgpu_dropin.a}" >&2; exit 2; }
done
mkdir -p "$OUT/obj"

# IREE's status mode with messages, its libc system allocator.
FLAGS=(-O1 -g -fPIC "-I$R" "-I$IREE" -DIREE_STATUS_MODE=3
       -DIREE_ALLOCATOR_SYSTEM_CTL=iree_allocator_libc_ctl)
SOURCES=()
for f in "$R"/iree/base/*.c; do
  [[ "$f" == *allocator_mimalloc.c ]] || SOURCES+=("$f")
done
SOURCES+=("$R"/iree/base/internal/{dynamic_library_posix,path,memory,time,cpu,sysfs,unicode,unicode_tables}.c
          "$R"/iree/base/tooling/flags.c "$R"/iree/io/{file_contents,file_handle}.c
          "$R"/iree/hal/drivers/amdgpu/util/{libhsa,topology}.c)
OBJECTS=()
for f in "${SOURCES[@]}"; do
  o="$OUT/obj/$(echo "${f#"$R"/}" | tr / _).o"
  gcc -std=gnu11 "${FLAGS[@]}" -c "$f" -o "$o"
  OBJECTS+=("$o")
done
rm -f "$OUT/libiree_subset.a"
ar rcs "$OUT/libiree_subset.a" "${OBJECTS[@]}"

TESTS=(libhsa_test topology_test vmem_test)
for t in "${TESTS[@]}"; do
  g++ -std=c++17 "${FLAGS[@]}" "$R/iree/hal/drivers/amdgpu/util/$t.cc" \
    "$R/iree/testing/gtest_main.cc" -o "$OUT/$t" "$OUT/libiree_subset.a" "$LIB" \
    -lgtest -lgmock -lpthread -ldl -lm
done

failed=0
for gpus in "${GPU_COUNTS[@]}"; do
  for t in "${TESTS[@]}"; do
    printf '%-14s %s GPU(s): ' "$t" "$gpus"
    if IREE_HAL_AMDGPU_LIBHSA_PATH="$SIM_DIR" HSA_SIM_GPU_COUNT="$gpus" \
        "$OUT/$t" > "$OUT/$t.$gpus.log" 2>&1; then
      grep -E '^\[  (PASSED  |SKIPPED )\] [0-9]' "$OUT/$t.$gpus.log" | tr '\n' ' '
      echo
    else
      echo "FAILED (see $OUT/$t.$gpus.log)"
      failed=1
    fi
  done
done
exit $failed
