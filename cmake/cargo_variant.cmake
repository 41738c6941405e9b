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
file(MAKE_DIRECTORY "${OUT_DIR}")
foreach(artifact libamdgpu_dropin.so libamdgpu_dropin.a)
  file(COPY_FILE "${CARGO_OUT}/${artifact}" "${OUT_DIR}/${artifact}")
endforeach()
