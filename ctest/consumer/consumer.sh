#!/bin/sh
# Consumer tests of an installed amdgpu_dropin. Usage:
#   consumer.sh MODE
# with the environment set by ctest/consumer/CMakeLists.txt:
#   BUILD_DIR PREFIX WORK_DIR SOURCE_DIR IREE_INCLUDE SONAME REAL_NAME LIBDIR
#   CMAKE GENERATOR CC NM READELF API_LISTS (space-separated files)
# MODE:
#   install      cmake --install BUILD_DIR to PREFIX; check the layout and SONAME
#   find_package build consumer.c and the static-archive plugin with CMake
#   pkg_config   build consumer.c with pkg-config's flags
#   plain        build consumer.c with plain -I/-L flags
#   plugin       the plugin's dynamic symbols are the API and its own only
#   no_iree      find_package(... vmem_header) without IREE headers fails at
#                configure time, naming AMDGPU_DROPIN_IREE_INCLUDE_DIRS
set -eu
mode=$1
lib="$PREFIX/$LIBDIR"
fail() { echo "consumer.sh $mode: $*" >&2; exit 1; }

# The program's NEEDED entry names the versioned library and it runs.
check_program() {
  program=$1
  needed=$("$READELF" -d "$program" | sed -n 's/.*(NEEDED).*\[\(libamdgpu_dropin[^]]*\)\].*/\1/p')
  [ "$needed" = "$SONAME" ] || fail "$program: NEEDED '$needed', expected '$SONAME'"
  "$program" || fail "$program exited with $?"
}

case "$mode" in
install)
  rm -rf "$PREFIX"
  "$CMAKE" --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null
  [ -f "$lib/$REAL_NAME" ] && [ ! -L "$lib/$REAL_NAME" ] || fail "no $lib/$REAL_NAME"
  [ "$(readlink "$lib/$SONAME")" = "$REAL_NAME" ] || fail "$SONAME does not link to $REAL_NAME"
  [ "$(readlink "$lib/libamdgpu_dropin.so")" = "$SONAME" ] || fail "libamdgpu_dropin.so does not link to $SONAME"
  for file in "$lib/libamdgpu_dropin.a" "$PREFIX/include/amdgpu_dropin/rochostcall.hpp" \
      "$PREFIX/include/amdgpu_dropin/iree-vmem/iree/hal/drivers/amdgpu/util/vmem.h" \
      "$lib/cmake/amdgpu_dropin/amdgpu_dropinConfig.cmake" \
      "$lib/cmake/amdgpu_dropin/amdgpu_dropinConfigVersion.cmake" \
      "$lib/pkgconfig/amdgpu_dropin.pc" "$lib/pkgconfig/amdgpu_dropin-iree-vmem.pc"; do
    [ -f "$file" ] || fail "missing $file"
  done
  # The default include dir must not hold an iree/ tree (it would shadow IREE's).
  [ ! -e "$PREFIX/include/amdgpu_dropin/iree" ] || fail "include/amdgpu_dropin/iree would shadow IREE's headers"
  soname=$("$READELF" -d "$lib/$REAL_NAME" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
  [ "$soname" = "$SONAME" ] || fail "SONAME '$soname', expected '$SONAME'"
  echo "installed: $REAL_NAME (SONAME $soname), static archive, headers, CMake package, pkg-config files"
  ;;
find_package)
  rm -rf "$WORK_DIR/find_package"
  "$CMAKE" -S "$SOURCE_DIR/project" -B "$WORK_DIR/find_package" -G "$GENERATOR" \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_PREFIX_PATH="$PREFIX" \
    "-DAMDGPU_DROPIN_IREE_INCLUDE_DIRS=$IREE_INCLUDE" >"$WORK_DIR/find_package.log" 2>&1 ||
    { cat "$WORK_DIR/find_package.log"; fail "configure failed"; }
  "$CMAKE" --build "$WORK_DIR/find_package" >>"$WORK_DIR/find_package.log" 2>&1 ||
    { cat "$WORK_DIR/find_package.log"; fail "build failed"; }
  check_program "$WORK_DIR/find_package/consumer_find_package"
  ;;
pkg_config)
  export PKG_CONFIG_PATH="$lib/pkgconfig"
  cflags=$(pkg-config --cflags amdgpu_dropin-iree-vmem) || fail "pkg-config --cflags failed"
  libs=$(pkg-config --libs amdgpu_dropin) || fail "pkg-config --libs failed"
  pkg-config --static --libs amdgpu_dropin | grep -q -- -lpthread || fail "no Libs.private for static linking"
  # shellcheck disable=SC2086 # word splitting of the flags is intended
  "$CC" -o "$WORK_DIR/consumer_pkg_config" "$SOURCE_DIR/consumer.c" $cflags -I"$IREE_INCLUDE" $libs \
    -Wl,-rpath,"$lib" || fail "compile failed (cflags: $cflags; libs: $libs)"
  check_program "$WORK_DIR/consumer_pkg_config"
  ;;
plain)
  "$CC" -o "$WORK_DIR/consumer_plain" "$SOURCE_DIR/consumer.c" -I"$PREFIX/include/amdgpu_dropin" \
    -I"$PREFIX/include/amdgpu_dropin/iree-vmem" -I"$IREE_INCLUDE" -L"$lib" -lamdgpu_dropin \
    -Wl,-rpath,"$lib" || fail "compile failed"
  check_program "$WORK_DIR/consumer_plain"
  ;;
plugin)
  plugin="$WORK_DIR/find_package/libconsumer_plugin.so"
  [ -f "$plugin" ] || fail "no $plugin (the find_package test builds it)"
  expected=$(mktemp); actual=$(mktemp)
  trap 'rm -f "$expected" "$actual"' EXIT
  # shellcheck disable=SC2086 # API_LISTS is a list of files
  { cat $API_LISTS; echo consumer_plugin_buffer_size; } | sed '/^$/d' | sort -u >"$expected"
  "$NM" -D --defined-only "$plugin" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$actual"
  diff -u "$expected" "$actual" ||
    fail "the plugin's dynamic symbols differ from the API plus its own (- expected, + actual)"
  echo "plugin exports $(wc -l <"$actual") symbols: the API and its own"
  ;;
no_iree)
  rm -rf "$WORK_DIR/no_iree"
  if "$CMAKE" -S "$SOURCE_DIR/no_iree" -B "$WORK_DIR/no_iree" -G "$GENERATOR" \
      -DCMAKE_C_COMPILER="$CC" -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK_DIR/no_iree.log" 2>&1; then
    fail "configure succeeded without IREE headers"
  fi
  grep -q "AMDGPU_DROPIN_IREE_INCLUDE_DIRS" "$WORK_DIR/no_iree.log" ||
    { cat "$WORK_DIR/no_iree.log"; fail "the configure error does not say what to set"; }
  sed -n '/Reason given/,/Configuring incomplete/p' "$WORK_DIR/no_iree.log"
  ;;
*)
  fail "unknown mode"
  ;;
esac
