# amdgpu_dropin_check_iree_include_dirs(<dirs> <out_var>)
#
# Our vmem.h includes iree/base/api.h and iree/hal/drivers/amdgpu/util/libhsa.h,
# and libhsa.h includes the HSA headers. IREE at HEAD includes them as
# "third_party/hsa-runtime-headers/include/hsa/...", relative to IREE's root,
# so the include dirs need IREE's root besides runtime/src. This checks that
# every file the found libhsa.h includes with quotes resolves in <dirs>, and
# sets <out_var> to "" or to a message saying what to add. Used by the build
# tree (CMakeLists.txt) and by the installed package (amdgpu_dropinConfig.cmake).
function(amdgpu_dropin_check_iree_include_dirs dirs out_var)
  set(_message "")
  set(_libhsa "")
  foreach(_header iree/base/api.h iree/hal/drivers/amdgpu/util/libhsa.h)
    find_file(_found "${_header}" PATHS ${dirs} NO_DEFAULT_PATH NO_CACHE)
    if(NOT _found)
      string(APPEND _message "${_header} is not in AMDGPU_DROPIN_IREE_INCLUDE_DIRS (${dirs}): add IREE's "
             "runtime/src directory; ")
    elseif(_header MATCHES "libhsa.h$")
      set(_libhsa "${_found}")
    endif()
    unset(_found)
  endforeach()
  if(_libhsa)
    file(STRINGS "${_libhsa}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(_line IN LISTS _lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" _included "${_line}")
      get_filename_component(_libhsa_dir "${_libhsa}" DIRECTORY)
      find_file(_found "${_included}" PATHS "${_libhsa_dir}" ${dirs} NO_DEFAULT_PATH NO_CACHE)
      if(NOT _found)
        if(_included MATCHES "^third_party/")
          string(APPEND _message "${_libhsa} includes ${_included}, relative to IREE's root: add IREE's "
                 "root directory (the one holding third_party/hsa-runtime-headers) to "
                 "AMDGPU_DROPIN_IREE_INCLUDE_DIRS; ")
        else()
          string(APPEND _message "${_libhsa} includes ${_included}, which is not in "
                 "AMDGPU_DROPIN_IREE_INCLUDE_DIRS (${dirs}); ")
        endif()
      endif()
      unset(_found)
    endforeach()
  endif()
  set(${out_var} "${_message}" PARENT_SCOPE)
endfunction()
