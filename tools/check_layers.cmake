# The layering rule, checked before any layer compiles (CMakeLists.txt runs this script) over the
# files of engine/, kernels/ and models/ (tests and tools are not checked): a file includes only
# headers of its own layer or the layers below it, and only kernels/ itself includes a backend's
# headers (kernels/cpu, kernels/cuda); the other layers reach the kernels through kernels/ops.h,
# compute_backend.h, exec_context.h, op_profiler.h and kernels/contracts/. Layers, bottom to top:
#   0 engine/base  1 kernels  2 engine/distributed  3 models  4 engine/app
# Usage: cmake -DROOT=<source dir> -P tools/check_layers.cmake  (a violation fails with each one listed)

function(zt_layer_of path out)
  if(path MATCHES "^engine/base/")
    set(${out} 0 PARENT_SCOPE)
  elseif(path MATCHES "^kernels/")
    set(${out} 1 PARENT_SCOPE)
  elseif(path MATCHES "^engine/distributed/")
    set(${out} 2 PARENT_SCOPE)
  elseif(path MATCHES "^models/")
    set(${out} 3 PARENT_SCOPE)
  elseif(path MATCHES "^engine/app/")
    set(${out} 4 PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

set(_names "engine/base" "kernels" "engine/distributed" "models" "engine/app")
file(GLOB_RECURSE _files RELATIVE ${ROOT}
  ${ROOT}/engine/*.h ${ROOT}/engine/*.cpp ${ROOT}/kernels/*.h ${ROOT}/kernels/*.cpp ${ROOT}/kernels/*.cu
  ${ROOT}/kernels/*.cuh ${ROOT}/models/*.h ${ROOT}/models/*.cpp)
set(_violations "")
foreach(_file IN LISTS _files)
  zt_layer_of(${_file} _from)
  if(_from STREQUAL "")
    list(APPEND _violations "${_file}: not under any layer's folder")
    continue()
  endif()
  file(STRINGS ${ROOT}/${_file} _includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
  foreach(_line IN LISTS _includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*$" "\\1" _header "${_line}")
    zt_layer_of(${_header} _to)
    if(_to STREQUAL "")
      continue()  # a header beside the file, or a third party's
    endif()
    if(_to GREATER _from)
      list(GET _names ${_from} _from_name)
      list(GET _names ${_to} _to_name)
      list(APPEND _violations "${_file} includes ${_header}: ${_from_name} may not use ${_to_name}, a layer above it")
    elseif(_header MATCHES "^kernels/(cpu|cuda)/" AND NOT _file MATCHES "^kernels/")
      list(APPEND _violations "${_file} includes ${_header}: only kernels/ includes a backend's headers (use kernels/ops.h)")
    endif()
  endforeach()
endforeach()

if(_violations)
  list(LENGTH _violations _count)
  list(JOIN _violations "\n  " _text)
  message(FATAL_ERROR "layering: ${_count} include(s) against docs/architecture.md's layers:\n  ${_text}")
endif()
