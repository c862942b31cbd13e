# Fails when a file under RUNTIME_DIR includes a project header from outside
# runtime/ (reference/StatusBits.h, constants only, and reference/Status.h,
# the error type, header-only, are the exceptions) or
# any LLVM or MLIR header: the runtime is linked into training processes and
# built on hosts without LLVM.
#   cmake -DRUNTIME_DIR=<folder> -P CheckRuntimeIncludes.cmake
if(NOT RUNTIME_DIR)
  message(FATAL_ERROR "set RUNTIME_DIR to the folder to check")
endif()
get_filename_component(RUNTIME_DIR "${RUNTIME_DIR}" ABSOLUTE)
file(GLOB_RECURSE sources LIST_DIRECTORIES false
  "${RUNTIME_DIR}/*.h" "${RUNTIME_DIR}/*.cpp" "${RUNTIME_DIR}/*.inc")
if(NOT sources)
  message(FATAL_ERROR "no sources under ${RUNTIME_DIR}")
endif()
set(violations "")
foreach(source ${sources})
  file(STRINGS "${source}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line ${lines})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*$"
      "\\1" header "${line}")
    set(bad FALSE)
    if(header MATCHES "^(llvm|llvm-c|mlir)/")
      set(bad TRUE)
    elseif(line MATCHES "\"" AND NOT header MATCHES "^runtime/"
           AND NOT header MATCHES "^reference/Status(Bits)?\\.h$")
      set(bad TRUE)
    endif()
    if(bad)
      file(RELATIVE_PATH relative "${RUNTIME_DIR}" "${source}")
      string(APPEND violations "\n  ${relative}: #include ${header}")
    endif()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "runtime/ may include only runtime/ headers, "
    "reference/StatusBits.h, reference/Status.h and system or CUDA headers; "
    "found:${violations}")
endif()
list(LENGTH sources count)
message(STATUS "${count} runtime files include nothing from outside runtime/")
