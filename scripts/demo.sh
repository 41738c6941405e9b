#!/usr/bin/env bash
# Builds and runs the demo on the built-in software HSA runtime (pass
# --system-hsa to use the system's ROCr instead). Installs missing build tools.
#   BUILD_DIR   build directory (default: build/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
bash scripts/setup.sh >&2

build_dir=${BUILD_DIR:-build/demo}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
mkdir -p "$build_dir"
log="$build_dir/demo-build.log"
echo "demo: building (log: $log)" >&2
if ! { cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build_dir" --target amdgpu_dropin_demo -j "$(nproc 2>/dev/null || echo 2)"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "demo: build failed (full log: $log)" >&2
  exit 1
fi
# The demo links libhsa-runtime64.so.1 through its RUNPATH (the built-in
# software runtime); LD_LIBRARY_PATH is searched first, so with --system-hsa
# the system ROCr is loaded instead: $ROCM_PATH/lib (default /opt/rocm/lib),
# else the one the dynamic loader knows (e.g. Debian's libhsa-runtime64-1).
# The demo exits with 77 (skipped) and says why when nothing can run there.
for arg in "$@"; do
  if [ "$arg" = --system-hsa ]; then
    rocm_lib="${ROCM_PATH:-/opt/rocm}/lib"
    if [ ! -e "$rocm_lib/libhsa-runtime64.so.1" ]; then
      rocm_lib=$(/sbin/ldconfig -p 2>/dev/null | awk '/libhsa-runtime64\.so\.1 / && !found {print $NF; found = 1}') || rocm_lib=""
      rocm_lib=${rocm_lib%/*}
    fi
    if [ -z "$rocm_lib" ]; then
      echo "demo: --system-hsa: no libhsa-runtime64.so.1 in ${ROCM_PATH:-/opt/rocm}/lib nor on the" \
        "loader's path (install ROCm, or Debian's libhsa-runtime64-1, or set ROCM_PATH)" >&2
      exit 1
    fi
    export LD_LIBRARY_PATH="$rocm_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done
exec "$build_dir/demo/amdgpu_dropin_demo" "$@"
