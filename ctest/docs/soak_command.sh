#!/bin/sh
# Runs the soak commands of docs/testing.md ("## Soak") as written there, in
# this build directory instead of build/test and shortened: --soak 2, and 3
# dlclose rounds. Fails when a command's binary is not at the path the doc
# shows (relative to the build directory) or when a command fails.
# Environment: DOC BINARY_DIR PROBES DLCLOSE (the binaries' real paths).
set -eu
fail() { echo "soak_command.sh: $*" >&2; exit 1; }
commands=$(awk '/^## Soak/{on=1; next} on && /^## /{exit} on && /^```sh$/{sh=1; next}
                on && /^```$/{sh=0; next} sh' "$DOC")
[ -n "$commands" ] || fail "no sh block under '## Soak' in $DOC"
for binary in "$PROBES" "$DLCLOSE"; do
  relative=${binary#"$BINARY_DIR"/}
  echo "$commands" | grep -q "build/test/$relative" ||
    fail "the doc does not show build/test/$relative, where the build puts it"
done
echo "$commands" | sed -e "s|build/test/|$BINARY_DIR/|g" -e 's|--soak [0-9]*|--soak 2|' \
  -e 's|HC_DLCLOSE_ROUNDS=[0-9]*|HC_DLCLOSE_ROUNDS=3|' >"$BINARY_DIR/ctest/docs/soak_commands.sh"
cd "$BINARY_DIR" && sh -eux ctest/docs/soak_commands.sh >/dev/null || fail "a soak command failed"
echo "soak commands of the doc ran"
