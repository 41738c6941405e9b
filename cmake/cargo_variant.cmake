# Runs one cargo build of the library with a feature set and copies its
# artifacts to OUT_DIR. Called (under a lock) by amdgpu_dropin_cargo_library().
# Inputs: CARGO, PROFILE, FEATURES (comma list, may be empty), MANIFEST, CARGO_OUT, OUT_DIR.
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
foreach(artifact libamdgpu_dropin.so libamdgpu_dropin.a)
  file(COPY_FILE "${CARGO_OUT}/${artifact}" "${OUT_DIR}/${artifact}")
endforeach()
