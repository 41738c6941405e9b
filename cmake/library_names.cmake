# Names and versions of the installed library, after cargo-c's conventions:
# the SONAME carries the major version, or "0.<minor>" while the major version
# is 0 (every 0.x minor release may break the ABI, as in Cargo's semver);
# the file carries the full version. For 0.1.0:
#   libamdgpu_dropin.so.0.1.0   the library (SONAME libamdgpu_dropin.so.0.1)
#   libamdgpu_dropin.so.0.1     -> libamdgpu_dropin.so.0.1.0   (what programs load)
#   libamdgpu_dropin.so         -> libamdgpu_dropin.so.0.1     (what -lamdgpu_dropin finds)
# build.rs computes the same SONAME for cargo-only builds; the consumer tests
# check the built file against these names.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(AMDGPU_DROPIN_SOVERSION "0.${PROJECT_VERSION_MINOR}")
  # The CMake package accepts the same versions as the dynamic loader.
  set(AMDGPU_DROPIN_VERSION_COMPATIBILITY SameMinorVersion)
else()
  set(AMDGPU_DROPIN_SOVERSION "${PROJECT_VERSION_MAJOR}")
  set(AMDGPU_DROPIN_VERSION_COMPATIBILITY SameMajorVersion)
endif()
set(AMDGPU_DROPIN_SONAME "libamdgpu_dropin.so.${AMDGPU_DROPIN_SOVERSION}")
set(AMDGPU_DROPIN_REAL_NAME "libamdgpu_dropin.so.${PROJECT_VERSION}")

# What the Rust static archive needs from the system when linked into a C
# program (rustc --print native-static-libs for x86_64-unknown-linux-gnu:
# unwinding, threads, dlopen/dlsym, libm, clock and pty helpers of std). One
# list for the build tree's and the installed static target and for
# Libs.private of the pkg-config file.
set(AMDGPU_DROPIN_STATIC_SYSTEM_LIBS pthread dl m gcc_s util rt)
set(AMDGPU_DROPIN_STATIC_LINK_LIBRARIES ${AMDGPU_DROPIN_STATIC_SYSTEM_LIBS})
list(TRANSFORM AMDGPU_DROPIN_STATIC_LINK_LIBRARIES REPLACE "^pthread$" "Threads::Threads")
