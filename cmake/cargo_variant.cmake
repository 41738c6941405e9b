# Runs one cargo build of the library with a feature set and lays out its
# artifacts in OUT_DIR as they are installed. Called (under a lock) by
# amdgpu_dropin_cargo_library().
# Inputs: CARGO, PROFILE, FEATURES (comma list, may be empty), MANIFEST,
#         CARGO_OUT, OUT_DIR, REAL_NAME, SONAME, NM, OBJCOPY, AR, LD.
#
# OUT_DIR/REAL_NAME     the shared library (its SONAME is set by build.rs),
#                       with the symlinks SONAME -> REAL_NAME and
#                       libamdgpu_dropin.so -> SONAME;
# OUT_DIR/libamdgpu_dropin.a
#                       the static library as one relocatable object in
#                       which only the API is global. Rust's staticlib holds
#                       every object of std and of our dependencies with
#                       their symbols global and default-visible: linked into
#                       a consumer's shared object, they would all be
#                       exported from it and could clash with another Rust
#                       library's copies. So the archive's objects are linked
#                       into one object (ld -r) and every defined symbol that
#                       is not exported by the shared library (the API, as
#                       the Rust source declares it) is made local. Nothing
#                       is asked of the consumer (no version script).
execute_process(
  COMMAND "${CARGO}" build --locked --lib --profile "${PROFILE}"
          --no-default-features --features "${FEATURES}" --manifest-path "${MANIFEST}"
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cargo build failed (features: '${FEATURES}')")
endif()
# A cross-style build (CARGO_BUILD_TARGET set, as scripts/tsan.sh does so
# that RUSTFLAGS instrument the library but not build scripts) puts its
# artifacts below <target dir>/<triple>/.
if(DEFINED ENV{CARGO_BUILD_TARGET})
  get_filename_component(target_dir "${CARGO_OUT}" DIRECTORY)
  get_filename_component(profile_dir "${CARGO_OUT}" NAME)
  set(CARGO_OUT "${target_dir}/$ENV{CARGO_BUILD_TARGET}/${profile_dir}")
endif()
file(MAKE_DIRECTORY "${OUT_DIR}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "${command} failed (${rc}):\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# Shared library, versioned file name and symlinks.
file(COPY_FILE "${CARGO_OUT}/libamdgpu_dropin.so" "${OUT_DIR}/${REAL_NAME}")
file(CREATE_LINK "${REAL_NAME}" "${OUT_DIR}/${SONAME}" SYMBOLIC)
file(CREATE_LINK "${SONAME}" "${OUT_DIR}/libamdgpu_dropin.so" SYMBOLIC)

# The API: the shared library's defined dynamic symbols.
run("${NM}" -D --defined-only "${OUT_DIR}/${REAL_NAME}")
string(REGEX REPLACE "[^\n]* ([^ \n@]+)(@[^\n]*)?\n" "\\1\n" api "${run_output}")
if(api STREQUAL "")
  message(FATAL_ERROR "${REAL_NAME} exports nothing (features: '${FEATURES}')")
endif()
set(work "${OUT_DIR}/static.tmp")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")
file(WRITE "${work}/api.txt" "${api}")

# One relocatable object from every member of the Rust archive, then only the
# API left global. Undefined references (libc, HSA in the libhsa-static
# build, the weak iree_status_allocate) stay as they are. The LLVM sections
# of std's objects (embedded bitcode, address-significance tables) lose their
# meaning once concatenated (the bitcode no longer parses: binutils' LLVM
# plugin aborts on it), so they go; they serve only LTO and ICF.
run("${LD}" -r --whole-archive "${CARGO_OUT}/libamdgpu_dropin.a" -o "${work}/amdgpu_dropin.o")
run("${OBJCOPY}" "--keep-global-symbols=${work}/api.txt" --remove-section=.llvmbc
    --remove-section=.llvmcmd --remove-section=.llvm_addrsig "${work}/amdgpu_dropin.o")
file(REMOVE "${work}/libamdgpu_dropin.a")
run("${AR}" rcs "${work}/libamdgpu_dropin.a" "${work}/amdgpu_dropin.o")
file(RENAME "${work}/libamdgpu_dropin.a" "${OUT_DIR}/libamdgpu_dropin.a")
file(REMOVE_RECURSE "${work}")
