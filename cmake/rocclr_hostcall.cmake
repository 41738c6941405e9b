# amdgpu_dropin_replace_rocclr_hostcall(<target> [LINK STATIC|SHARED])
#
# For a ROCclr build: in <target> (ROCclr's `rocclr` target), replaces the
# source ROCclr's own device/devhostcall.cpp with amdgpu-dropin's adapter
# (integrations/rocclr/devhostcall.cpp, installed with the package) and links
# the library to <target> (PUBLIC): amdgpu_dropin::static by default, so the
# listener goes into the library ROCclr is linked into (libamdhip64.so), or
# amdgpu_dropin::shared with LINK SHARED (libamdgpu_dropin.so beside it).
# ROCclr's device/devhostcall.hpp, its callers and its other sources stay.
#
# Stops at configure time, saying why, when <target> does not exist, has no
# source named device/devhostcall.cpp (or more than one), or this package was
# built without the hostcall half.
#
# The adapter's path is a global property (AMDGPU_DROPIN_ROCCLR_ADAPTER), set
# by whoever includes this file: the installed package config, or the
# project's own CMakeLists.txt for a build that adds amdgpu-dropin with
# add_subdirectory.
include_guard(GLOBAL)

function(amdgpu_dropin_replace_rocclr_hostcall target)
  cmake_parse_arguments(PARSE_ARGV 1 _arg "" "LINK" "")
  set(_what "amdgpu_dropin_replace_rocclr_hostcall(${target})")
  if(_arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${_what}: unknown arguments '${_arg_UNPARSED_ARGUMENTS}' (only LINK STATIC|SHARED)")
  endif()
  if(NOT DEFINED _arg_LINK)
    set(_arg_LINK STATIC)
  endif()
  if(NOT _arg_LINK MATCHES "^(STATIC|SHARED)$")
    message(FATAL_ERROR "${_what}: LINK '${_arg_LINK}': STATIC or SHARED")
  endif()
  string(TOLOWER "${_arg_LINK}" _link)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${_what}: no target '${target}' (call it after ROCclr's add_library(rocclr ...))")
  endif()
  get_property(_adapter GLOBAL PROPERTY AMDGPU_DROPIN_ROCCLR_ADAPTER)
  if(NOT _adapter OR NOT EXISTS "${_adapter}")
    message(FATAL_ERROR "${_what}: amdgpu-dropin's ROCclr adapter (devhostcall.cpp) is not there "
                        "('${_adapter}'); was amdgpu-dropin built with AMDGPU_DROPIN_ROCCLR_HOSTCALL=ON?")
  endif()
  if(NOT TARGET amdgpu_dropin::${_link})
    message(FATAL_ERROR "${_what}: no target amdgpu_dropin::${_link} (find_package(amdgpu_dropin) first)")
  endif()

  get_target_property(_sources ${target} SOURCES)
  if(NOT _sources)
    set(_sources "")
  endif()
  set(_kept "")
  set(_found "")
  foreach(_source IN LISTS _sources)
    string(REPLACE "\\" "/" _path "${_source}")
    if(_path MATCHES "(^|/)device/devhostcall[.]cpp$")
      list(APPEND _found "${_source}")
      list(APPEND _kept "${_adapter}")
    else()
      list(APPEND _kept "${_source}")
    endif()
  endforeach()
  list(LENGTH _found _count)
  if(_count EQUAL 0)
    message(FATAL_ERROR "${_what}: '${target}' has no source device/devhostcall.cpp to replace "
                        "(is it ROCclr's rocclr target?)")
  elseif(_count GREATER 1)
    message(FATAL_ERROR "${_what}: '${target}' has ${_count} sources named device/devhostcall.cpp: ${_found}")
  endif()
  set_property(TARGET ${target} PROPERTY SOURCES "${_kept}")
  target_link_libraries(${target} PUBLIC amdgpu_dropin::${_link})
  message(STATUS "amdgpu_dropin: ${target}: ${_found} replaced by ${_adapter}, linked amdgpu_dropin::${_link}")
endfunction()
