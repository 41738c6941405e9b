#!/bin/sh
# Usage: check_exports.sh NM LIBRARY API_LIST...
# Fails unless the defined dynamic symbols of LIBRARY are exactly the union of
# the API lists (one name per line). Prints the difference on failure.
set -eu
nm_tool=$1; library=$2; shift 2
[ -f "$library" ] || { echo "missing library: $library"; exit 1; }
actual=$(mktemp); expected=$(mktemp)
trap 'rm -f "$actual" "$expected"' EXIT
"$nm_tool" -D --defined-only "$library" | awk '{print $NF}' | sed 's/@.*//' | sort -u > "$actual"
cat "$@" | sed '/^$/d' | sort -u > "$expected"
if ! diff -u "$expected" "$actual"; then
  echo "exported symbols of $(basename "$library") differ from the API (- expected, + actual)"
  exit 1
fi
echo "exports match the API: $(wc -l < "$actual") symbols"
