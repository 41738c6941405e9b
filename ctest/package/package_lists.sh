#!/bin/sh
# Usage: package_lists.sh CARGO MANIFEST
# Every crate can be published: `cargo package --list` holds what a build
# needs (license, readme, build script, cbindgen configs, checked-in headers,
# source) and none of the C suite, benchmark, fuzz target, demo or scripts,
# and cargo reports no missing metadata. A consumer's build (normal and build
# dependencies, default features) compiles no cbindgen.
set -eu
cargo=$1; manifest=$2
status=0
check() {
  package=$1; shift
  log=$(mktemp); list=$(mktemp)
  if ! "$cargo" package --no-verify --list --allow-dirty --locked --manifest-path "$manifest" \
      -p "$package" >"$list" 2>"$log"; then
    cat "$log"; echo "$package: cargo package --list failed"; status=1; return
  fi
  if grep -i "warning: manifest has no" "$log"; then
    echo "$package: incomplete metadata"; status=1
  fi
  for file in "$@"; do
    grep -qx "$file" "$list" || { echo "$package: the package lacks $file"; status=1; }
  done
  if grep -E '^(ctest|bench|fuzz|demo|scripts|\.ci|cmake|tests|target|build)/' "$list"; then
    echo "$package: the package holds files a build does not need (above)"; status=1
  fi
  echo "$package: $(wc -l <"$list") files"
  rm -f "$log" "$list"
}
check hsa-sys LICENSE README.md Cargo.toml src/lib.rs
check amdgpu-dropin-hostcall-core LICENSE README.md Cargo.toml src/lib.rs src/protocol/mod.rs
check amdgpu-dropin-hostcall-printf LICENSE README.md Cargo.toml src/lib.rs src/format.rs
check amdgpu-dropin LICENSE README.md Cargo.toml build.rs codegen/headers.rs cbindgen.toml cbindgen-hostcall.toml \
  cbindgen-hostcall-ext.toml cbindgen-test-constants.toml \
  include/rochostcall.hpp include/amdgpu_dropin_hostcall.h include/iree-vmem/iree/hal/drivers/amdgpu/util/vmem.h src/lib.rs
if "$cargo" tree -e normal,build --locked --manifest-path "$manifest" -p amdgpu-dropin | grep cbindgen; then
  echo "amdgpu-dropin: a consumer's build compiles cbindgen (above)"; status=1
fi
exit $status
