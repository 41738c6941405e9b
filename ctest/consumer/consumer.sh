#!/bin/sh
# Consumer tests of an installed amdgpu_dropin. Usage:
#   consumer.sh MODE
# with the environment set by ctest/consumer/CMakeLists.txt:
#   BUILD_DIR PREFIX WORK_DIR SOURCE_DIR STANDIN_INCLUDE SONAME REAL_NAME LIBDIR
#   CMAKE GENERATOR CC CXX NM READELF STRIP API_LISTS (space-separated files)
#   README HSA_SIM (the software HSA runtime)
#   ROCCLR_STANDIN_DIR ROCCLR_STANDIN_SOURCES (the stand-in ROCclr; a CMake list)
# The caller's IREE is a stand-in tree laid out as IREE's: WORK_DIR/iree with
# runtime/src/iree/... and third_party/hsa-runtime-headers/include/hsa/...,
# made from the suite's stand-in headers by the install mode. Its libhsa.h
# includes the HSA headers relative to IREE's root, as IREE's does at HEAD.
# MODE:
#   install      cmake --install BUILD_DIR to PREFIX; check the layout and SONAME;
#                make the stand-in IREE tree
#   find_package build consumer.c and the static-archive plugin with CMake
#   pkg_config   build consumer.c with pkg-config's flags
#   plain        build consumer.c with plain -I/-L flags
#   plugin       the plugin's dynamic symbols are the API and its own only
#   no_iree      find_package(... vmem_header) without IREE headers fails at
#                configure time, naming AMDGPU_DROPIN_IREE_INCLUDE_DIRS
#   iree_root    the same with IREE's runtime/src and an HSA include dir but
#                without IREE's root fails at configure time, naming it
#   readme_program  the first C program of README.md, built and run as the
#                README says (pkg-config), on the software HSA runtime
#   strip        cmake --install --strip leaves no debug info in the libraries
#   rocclr       find_package(amdgpu_dropin COMPONENTS rocclr) and
#                amdgpu_dropin_replace_rocclr_hostcall in a rocclr target built
#                from the stand-in ROCclr (project rocclr/), linked static
#                and shared; the programs run
#   rocclr_errors  the function stops at configure time, saying why, for a
#                target without device/devhostcall.cpp and for no target
set -eu
mode=$1
lib="$PREFIX/$LIBDIR"
iree="$WORK_DIR/iree"
iree_dirs="$iree/runtime/src;$iree"
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
      "$lib/pkgconfig/amdgpu_dropin.pc" "$lib/pkgconfig/amdgpu_dropin-iree-vmem.pc" \
      "$lib/cmake/amdgpu_dropin/rocclr_hostcall.cmake" "$PREFIX/share/amdgpu_dropin/rocclr/devhostcall.cpp"; do
    [ -f "$file" ] || fail "missing $file"
  done
  # The default include dir must not hold an iree/ tree (it would shadow IREE's).
  [ ! -e "$PREFIX/include/amdgpu_dropin/iree" ] || fail "include/amdgpu_dropin/iree would shadow IREE's headers"
  soname=$("$READELF" -d "$lib/$REAL_NAME" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
  [ "$soname" = "$SONAME" ] || fail "SONAME '$soname', expected '$SONAME'"
  rm -rf "$iree"
  mkdir -p "$iree/runtime/src" "$iree/third_party/hsa-runtime-headers/include"
  cp -R "$STANDIN_INCLUDE/iree" "$iree/runtime/src/"
  cp -R "$STANDIN_INCLUDE/hsa" "$iree/third_party/hsa-runtime-headers/include/"
  echo "installed: $REAL_NAME (SONAME $soname), static archive, headers, CMake package, pkg-config files"
  ;;
find_package)
  rm -rf "$WORK_DIR/find_package"
  "$CMAKE" -S "$SOURCE_DIR/project" -B "$WORK_DIR/find_package" -G "$GENERATOR" \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_PREFIX_PATH="$PREFIX" \
    "-DAMDGPU_DROPIN_IREE_INCLUDE_DIRS=$iree_dirs" >"$WORK_DIR/find_package.log" 2>&1 ||
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
  "$CC" -o "$WORK_DIR/consumer_pkg_config" "$SOURCE_DIR/consumer.c" $cflags -I"$iree/runtime/src" -I"$iree" $libs \
    -Wl,-rpath,"$lib" || fail "compile failed (cflags: $cflags; libs: $libs)"
  check_program "$WORK_DIR/consumer_pkg_config"
  ;;
plain)
  "$CC" -o "$WORK_DIR/consumer_plain" "$SOURCE_DIR/consumer.c" -I"$PREFIX/include/amdgpu_dropin" \
    -I"$PREFIX/include/amdgpu_dropin/iree-vmem" -I"$iree/runtime/src" -I"$iree" -L"$lib" -lamdgpu_dropin \
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
iree_root)
  # IREE's runtime/src and the HSA headers' own directory, as the README once
  # said: IREE's libhsa.h includes "third_party/hsa-runtime-headers/..." from
  # IREE's root, so this must stop at configure time, naming the root.
  rm -rf "$WORK_DIR/iree_root"
  if "$CMAKE" -S "$SOURCE_DIR/no_iree" -B "$WORK_DIR/iree_root" -G "$GENERATOR" \
      -DCMAKE_C_COMPILER="$CC" -DCMAKE_PREFIX_PATH="$PREFIX" \
      "-DAMDGPU_DROPIN_IREE_INCLUDE_DIRS=$iree/runtime/src;$iree/third_party/hsa-runtime-headers/include" \
      >"$WORK_DIR/iree_root.log" 2>&1; then
    fail "configure succeeded without IREE's root in the include dirs"
  fi
  grep -q "IREE's root" "$WORK_DIR/iree_root.log" ||
    { cat "$WORK_DIR/iree_root.log"; fail "the configure error does not name IREE's root"; }
  sed -n '/Reason given/,/Configuring incomplete/p' "$WORK_DIR/iree_root.log"
  ;;
readme_program)
  # The C block under "## A first C program" and the shell block after it
  # (the block before it builds and installs, as consumer.install does).
  dir="$WORK_DIR/readme_program"
  rm -rf "$dir"; mkdir -p "$dir"
  awk '/^## A first C program/{on=1; next} on && /^## /{exit}
       on && /^```c$/{c=1; next} on && seen_c && /^```sh$/{sh=1; next}
       /^```$/{if (c) seen_c=1; c=0; sh=0; next}
       c{print > "'"$dir"'/first.c"} sh{print > "'"$dir"'/commands.sh"}' "$README"
  [ -s "$dir/first.c" ] || fail "README.md has no C block under '## A first C program'"
  [ -s "$dir/commands.sh" ] || fail "README.md has no sh block under '## A first C program'"
  lines=$(wc -l <"$dir/first.c")
  [ "$lines" -le 30 ] || fail "the README's first program has $lines lines (about 20 wanted)"
  # The README's commands, with its example prefix replaced by the test's.
  # The README's commands, with its example prefix replaced by the test's and
  # ROCm's include and library dirs by the suite's stand-ins.
  sim_dir=$(dirname "$HSA_SIM")
  sed -e "s|/usr/local/lib|$lib|g" -e "s|/usr/local|$PREFIX|g" -e "s|/opt/rocm/include|$STANDIN_INCLUDE|g" \
    -e "s|/opt/rocm/lib|$sim_dir|g" "$dir/commands.sh" >"$dir/run.sh"
  (cd "$dir" && sh -eux ./run.sh) || fail "the README's commands failed (above)"
  check_program "$dir/first" >/dev/null
  ;;
strip)
  rm -rf "$WORK_DIR/strip"
  DESTDIR="$WORK_DIR/strip" "$CMAKE" --install "$BUILD_DIR" --prefix /opt/amdgpu_dropin --strip >/dev/null
  stripped="$WORK_DIR/strip/opt/amdgpu_dropin/$LIBDIR"
  for file in "$lib/$REAL_NAME" "$stripped/$REAL_NAME" "$stripped/libamdgpu_dropin.a"; do
    [ -f "$file" ] || fail "no $file"
  done
  # The build has debug info (else this test proves nothing); the stripped install has none.
  "$READELF" -S --wide "$BUILD_DIR/lib/amdgpu_dropin/$REAL_NAME" | grep -q '\.debug_' ||
    fail "the built library has no debug info to strip"
  for file in "$stripped/$REAL_NAME" "$stripped/libamdgpu_dropin.a"; do
    if "$READELF" -S --wide "$file" | grep '\.debug_'; then
      fail "$file still has debug sections after --strip (above)"
    fi
  done
  "$NM" -D --defined-only "$stripped/$REAL_NAME" | grep -q ' T getHostcallBufferSize$' ||
    fail "the stripped library lost its dynamic symbols"
  "$NM" "$stripped/libamdgpu_dropin.a" | grep -q ' T getHostcallBufferSize$' ||
    fail "the stripped archive lost its symbol table"
  echo "stripped: $(wc -c <"$stripped/$REAL_NAME") bytes (unstripped $(wc -c <"$BUILD_DIR/lib/amdgpu_dropin/$REAL_NAME"))"
  ;;
rocclr)
  for case in static shared; do
    dir="$WORK_DIR/rocclr_$case"
    rm -rf "$dir"
    "$CMAKE" -S "$SOURCE_DIR/rocclr" -B "$dir" -G "$GENERATOR" -DCMAKE_C_COMPILER="$CC" \
      -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_PREFIX_PATH="$PREFIX" -DROCCLR_CASE=$case \
      "-DSTANDIN_DIR=$ROCCLR_STANDIN_DIR" "-DSTANDIN_SOURCES=$ROCCLR_STANDIN_SOURCES" >"$dir.log" 2>&1 ||
      { cat "$dir.log"; fail "$case: configure failed"; }
    grep -q "rocclr: .*device/devhostcall.cpp replaced by $PREFIX/.*/amdgpu_dropin/rocclr/devhostcall.cpp" "$dir.log" ||
      { cat "$dir.log"; fail "$case: the configure log does not say the installed adapter replaced ROCclr's file"; }
    "$CMAKE" --build "$dir" >>"$dir.log" 2>&1 || { cat "$dir.log"; fail "$case: build failed"; }
    needed=$("$READELF" -d "$dir/rocclr_consumer" | sed -n 's/.*(NEEDED).*\[\(libamdgpu_dropin[^]]*\)\].*/\1/p')
    if [ $case = shared ]; then
      [ "$needed" = "$SONAME" ] || fail "shared: NEEDED '$needed', expected '$SONAME'"
    else
      [ -z "$needed" ] || fail "static: the program needs '$needed'; the library should be linked in"
    fi
    "$dir/rocclr_consumer" || fail "$case: rocclr_consumer exited with $?"
  done
  ;;
rocclr_errors)
  for case in no_devhostcall no_target; do
    dir="$WORK_DIR/rocclr_$case"
    rm -rf "$dir"
    if "$CMAKE" -S "$SOURCE_DIR/rocclr" -B "$dir" -G "$GENERATOR" -DCMAKE_C_COMPILER="$CC" \
        -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_PREFIX_PATH="$PREFIX" -DROCCLR_CASE=$case \
        "-DSTANDIN_DIR=$ROCCLR_STANDIN_DIR" "-DSTANDIN_SOURCES=$ROCCLR_STANDIN_SOURCES" >"$dir.log" 2>&1; then
      fail "$case: configure succeeded"
    fi
    case $case in
    no_devhostcall) want="has no source device/devhostcall.cpp to replace" ;;
    *) want="no target 'no_such_rocclr'" ;;
    esac
    # CMake wraps the message: compare with the lines joined.
    tr -s ' \n' '  ' <"$dir.log" | grep -q "$want" ||
      { cat "$dir.log"; fail "$case: the configure error does not say '$want'"; }
    sed -n '/CMake Error/,/^$/p' "$dir.log" | head -4
  done
  ;;
*)
  fail "unknown mode"
  ;;
esac
