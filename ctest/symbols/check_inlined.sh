#!/bin/sh
# Usage: check_inlined.sh NM LIBRARY CARGO_PROFILE ALLOWED_LIST
# The hostcall core is a crate of its own, and cargo does not run LTO for a
# library that is also built as an rlib, so a core function reaches the
# library's hot path inlined only when it is marked #[inline] (or generic).
# Fails if LIBRARY holds an out-of-line copy of any core function other than
# those ALLOWED_LIST names (one per line: the large serving steps and cold
# functions); those steps' own presence shows the symbol table was read.
set -eu
nm_tool=$1; library=$2; profile=$3; allowed=$4
if [ "$profile" != "release" ]; then
  echo "skip: the $profile profile inlines nothing across crates; only a release build is checked"
  exit 77
fi
[ -f "$library" ] || { echo "missing library: $library"; exit 1; }
found=$(mktemp); expected=$(mktemp)
trap 'rm -f "$found" "$expected"' EXIT
"$nm_tool" -C --defined-only "$library" | awk '$2 ~ /^[tT]$/ { $1 = ""; $2 = ""; sub(/^  /, ""); print }' |
  grep -E '^<?amdgpu_dropin_hostcall_core::' | sort -u > "$found" || true
sed '/^$/d; /^#/d' "$allowed" | sort -u > "$expected"
if [ ! -s "$found" ]; then
  echo "no function of the hostcall core in the symbol table of $(basename "$library"): stripped?"
  exit 1
fi
extra=$(comm -23 "$found" "$expected")
if [ -n "$extra" ]; then
  echo "out-of-line copies of hostcall core functions (mark them #[inline], or list them in $(basename "$allowed")):"
  echo "$extra"
  exit 1
fi
echo "every other core function the library calls is inlined; out of line: $(wc -l < "$found") allowed"
