# Fails when a source folder of ROOT includes a project header from a folder
# above it. The layers, bottom first: a folder may include headers of its
# own folder and of those before it, never of those after it (the runtime
# nothing of the compiler, the compiler nothing of the tools). Includes of
# system, LLVM and MLIR headers and of generated headers outside these
# folders are not checked here (test/runtime/CheckRuntimeIncludes.cmake
# keeps LLVM and MLIR out of runtime/).
#   cmake -DROOT=<source tree> -P CheckLayering.cmake
set(THDC_LAYERS
  reference    # the reference semantics, plain C++
  runtime      # loads and launches bundles; no MLIR, no LLVM
  planner      # the microbatch planner
  dialect      # the thd dialect
  passes       # the dialect's passes
  codegen      # the element lowering
  interpreter  # runs a pipeline through reference/
  compiler     # the driver: pipelines, targets, bundles, the JIT
  tools        # thdc, thd-opt, thd-run
  python       # the Python module
)

if(NOT ROOT)
  message(FATAL_ERROR "set ROOT to the source tree to check")
endif()
get_filename_component(ROOT "${ROOT}" ABSOLUTE)
set(violations "")
set(count 0)
set(rank 0)
foreach(layer ${THDC_LAYERS})
  file(GLOB_RECURSE sources LIST_DIRECTORIES false
    "${ROOT}/${layer}/*.h" "${ROOT}/${layer}/*.cpp" "${ROOT}/${layer}/*.inc"
    "${ROOT}/${layer}/*.td")
  foreach(source ${sources})
    math(EXPR count "${count} + 1")
    file(STRINGS "${source}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*$" "\\1"
        header "${line}")
      string(REGEX MATCH "^[^/]+" folder "${header}")
      list(FIND THDC_LAYERS "${folder}" included)
      if(included GREATER rank)
        file(RELATIVE_PATH relative "${ROOT}" "${source}")
        string(APPEND violations "\n  ${relative}: #include \"${header}\" "
          "(${folder}/ is above ${layer}/)")
      endif()
    endforeach()
  endforeach()
  math(EXPR rank "${rank} + 1")
endforeach()
if(violations)
  list(JOIN THDC_LAYERS " < " order)
  message(FATAL_ERROR "a folder may include only its own headers and those "
    "of the folders below it (${order}); found:${violations}")
endif()
message(STATUS "${count} files include nothing from a folder above their own")
