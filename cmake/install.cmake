# Install rules: the layout of `cmake --install` (cargo-c's layout plus a CMake
# package). With <lib> = CMAKE_INSTALL_LIBDIR and <inc> = CMAKE_INSTALL_INCLUDEDIR:
#   <lib>/libamdgpu_dropin.so.X.Y.Z, .so.<soversion>, .so   shared library + symlinks
#   <lib>/libamdgpu_dropin.a                                static library (only the API global)
#   <inc>/amdgpu_dropin/                                    hostcall-side headers (rochostcall.hpp, ...)
#   <inc>/amdgpu_dropin/iree-vmem/iree/hal/drivers/amdgpu/util/vmem.h
#                                                           the vmem header, opt-in include dir
#   <lib>/cmake/amdgpu_dropin/                              package config, version file,
#                                                           rocclr_hostcall.cmake
#   <data>/amdgpu_dropin/rocclr/devhostcall.cpp             the ROCclr adapter (hostcall half;
#                                                           <data> = CMAKE_INSTALL_DATADIR)
#   <lib>/pkgconfig/amdgpu_dropin.pc                        library + hostcall-side headers
#   <lib>/pkgconfig/amdgpu_dropin-iree-vmem.pc              adds the vmem header's dir
include(CMakePackageConfigHelpers)

set(_out "${CMAKE_BINARY_DIR}/lib/amdgpu_dropin")
install(FILES "${_out}/${AMDGPU_DROPIN_REAL_NAME}" "${_out}/${AMDGPU_DROPIN_SONAME}"
              "${_out}/libamdgpu_dropin.so" "${_out}/libamdgpu_dropin.a"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}")

# Every generated header is installed: new headers need no rule here.
set(_include_dest "${CMAKE_INSTALL_INCLUDEDIR}/amdgpu_dropin")
if(AMDGPU_DROPIN_ROCCLR_HOSTCALL)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/" DESTINATION "${_include_dest}"
          PATTERN "iree-vmem" EXCLUDE)
endif()
if(AMDGPU_DROPIN_IREE_VMEM)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/iree-vmem" DESTINATION "${_include_dest}")
endif()

# The ROCclr adapter, compiled by a ROCclr build in place of its own
# device/devhostcall.cpp (amdgpu_dropin_replace_rocclr_hostcall).
set(AMDGPU_DROPIN_ROCCLR_ADAPTER_DIR "${CMAKE_INSTALL_DATADIR}/amdgpu_dropin/rocclr")
if(AMDGPU_DROPIN_ROCCLR_HOSTCALL)
  install(FILES "${PROJECT_SOURCE_DIR}/integrations/rocclr/devhostcall.cpp"
          DESTINATION "${AMDGPU_DROPIN_ROCCLR_ADAPTER_DIR}")
endif()

# CMake package.
set(AMDGPU_DROPIN_HALVES "")
if(AMDGPU_DROPIN_IREE_VMEM)
  list(APPEND AMDGPU_DROPIN_HALVES vmem)
endif()
if(AMDGPU_DROPIN_ROCCLR_HOSTCALL)
  list(APPEND AMDGPU_DROPIN_HALVES hostcall)
endif()
set(_cmake_dest "${CMAKE_INSTALL_LIBDIR}/cmake/amdgpu_dropin")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/amdgpu_dropinConfig.cmake.in"
  "${CMAKE_BINARY_DIR}/package/amdgpu_dropinConfig.cmake"
  INSTALL_DESTINATION "${_cmake_dest}"
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR AMDGPU_DROPIN_ROCCLR_ADAPTER_DIR)
write_basic_package_version_file("${CMAKE_BINARY_DIR}/package/amdgpu_dropinConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${AMDGPU_DROPIN_VERSION_COMPATIBILITY})
install(FILES "${CMAKE_BINARY_DIR}/package/amdgpu_dropinConfig.cmake"
              "${CMAKE_BINARY_DIR}/package/amdgpu_dropinConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/iree_include_check.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/rocclr_hostcall.cmake"
        DESTINATION "${_cmake_dest}")

# pkg-config files, relocatable (prefix found from the file's own place).
file(RELATIVE_PATH AMDGPU_DROPIN_PC_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" AMDGPU_DROPIN_PC_PREFIX "${AMDGPU_DROPIN_PC_PREFIX}")
list(TRANSFORM AMDGPU_DROPIN_STATIC_SYSTEM_LIBS PREPEND "-l" OUTPUT_VARIABLE _private)
list(JOIN _private " " AMDGPU_DROPIN_PC_LIBS_PRIVATE)
list(JOIN AMDGPU_DROPIN_HALVES ", " AMDGPU_DROPIN_PC_HALVES)
configure_file("${PROJECT_SOURCE_DIR}/cmake/amdgpu_dropin.pc.in"
               "${CMAKE_BINARY_DIR}/package/amdgpu_dropin.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/package/amdgpu_dropin.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(AMDGPU_DROPIN_IREE_VMEM)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/amdgpu_dropin-iree-vmem.pc.in"
                 "${CMAKE_BINARY_DIR}/package/amdgpu_dropin-iree-vmem.pc" @ONLY)
  install(FILES "${CMAKE_BINARY_DIR}/package/amdgpu_dropin-iree-vmem.pc"
          DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endif()

# `cmake --install --strip` strips the libraries too: they are installed as
# files (cargo builds them), which CMake's own strip step skips. The shared
# library keeps its dynamic symbols, the archive its symbol table; both lose
# their debug info (the release profile builds with line tables, see Cargo.toml).
if(CMAKE_STRIP)
  set(_libdir "${CMAKE_INSTALL_LIBDIR}")
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      foreach(_lib \"${AMDGPU_DROPIN_REAL_NAME}\" libamdgpu_dropin.a)
        if(_lib MATCHES \"[.]a$\")
          set(_how --strip-debug)
        else()
          set(_how --strip-unneeded)
        endif()
        if(IS_ABSOLUTE \"${_libdir}\")
          set(_path \"\$ENV{DESTDIR}${_libdir}/\${_lib}\")
        else()
          set(_path \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${_libdir}/\${_lib}\")
        endif()
        execute_process(COMMAND \"${CMAKE_STRIP}\" \${_how} \"\${_path}\" RESULT_VARIABLE _rc)
        if(NOT _rc EQUAL 0)
          message(FATAL_ERROR \"cannot strip \${_path}\")
        endif()
      endforeach()
    endif()")
endif()
