#!/bin/sh
# Runs hostcall_bench from a copied build (bench/README.md, "On another
# machine"): DIR holds hostcall_bench, the seven listener libraries and the
# software runtime. Usage: bench/device_run.sh DIR OUT_JSON HOST [bench options]
set -eu
dir=$1 out=$2 host=$3
shift 3
LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$dir/hostcall_bench" \
  --lib-dir "$dir" --host "$host" --json "$out" "$@"
