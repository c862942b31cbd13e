# Installs thdc into a fresh prefix, compiles a bundle with the installed
# thdc, then configures, builds and runs test/install/ against that prefix:
# once with the runtime alone (MLIR may not be found), once with the
# compiler's libraries.
#
#   cmake -DTHDC_BUILD_DIR=... -DTHDC_SOURCE_DIR=... -DWORK_DIR=...
#         -DGENERATOR=... -DCXX_COMPILER=... -DMLIR_DIR=...
#         -DCXX_FLAGS=... -DLINKER_FLAGS=... [-DPYTHON_EXECUTABLE=...
#         -DPYTHON_INSTALL_DIR=... [-DPYTHON_PRELOAD=...]] -P RunInstallTest.cmake
#
# The consumer is compiled and linked with thdc's flags: a sanitized build's
# libraries need the sanitizers' runtimes.

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
    ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${command}\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} --install "${THDC_BUILD_DIR}" --prefix "${prefix}")

foreach(file bin/thdc bin/thd-opt bin/thd-run include/thdc/runtime/Executable.h
    include/thdc/reference/StatusBits.h include/thdc/dialect/THDOps.h.inc
    include/thdc/compiler/Jit.h lib/cmake/thdc/thdcConfig.cmake
    lib/cmake/thdc/thdcConfigVersion.cmake)
  if(NOT EXISTS "${prefix}/${file}")
    message(FATAL_ERROR "not installed: ${file}")
  endif()
endforeach()
# Every header is under include/thdc/: nothing else in include/ (a folder
# named runtime/ or dialect/ there would collide with other packages').
file(GLOB installed_includes RELATIVE "${prefix}/include" "${prefix}/include/*")
if(NOT installed_includes STREQUAL "thdc")
  message(FATAL_ERROR "include/ holds ${installed_includes}; expected thdc only")
endif()

# The Python package, where the interpreter finds it (its platlib folder
# under the prefix): importable from there, with the JIT.
if(PYTHON_EXECUTABLE)
  if(EXISTS "${prefix}/thdc")
    message(FATAL_ERROR "the Python package is installed at the prefix's top "
      "(${prefix}/thdc), not under ${PYTHON_INSTALL_DIR}")
  endif()
  # A sanitized module needs its runtime preloaded into Python
  # (PYTHON_PRELOAD, test/CMakeLists.txt's THDC_PYTEST_PRELOAD).
  set(preload)
  if(PYTHON_PRELOAD)
    set(preload "LD_PRELOAD=${PYTHON_PRELOAD}"
      "ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0:alloc_dealloc_mismatch=0")
  endif()
  run(${CMAKE_COMMAND} -E env "PYTHONPATH=${prefix}/${PYTHON_INSTALL_DIR}" ${preload}
    "${PYTHON_EXECUTABLE}" -c "import thdc\nprint(thdc.__file__, thdc.has_jit)")
  set(expected "${prefix}/${PYTHON_INSTALL_DIR}/thdc/__init__.py True\n")
  if(NOT output STREQUAL expected)
    message(FATAL_ERROR "the installed package printed:\n${output}\nexpected:\n${expected}")
  endif()
endif()

run("${prefix}/bin/thdc" "${THDC_SOURCE_DIR}/examples/megatron_graph_step.mlir"
  -o "${WORK_DIR}/bundle")

run(${CMAKE_COMMAND} -S "${THDC_SOURCE_DIR}/test/install"
  -B "${WORK_DIR}/consumer" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}"
  -DCMAKE_DISABLE_FIND_PACKAGE_MLIR=ON -DCMAKE_DISABLE_FIND_PACKAGE_LLVM=ON)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("${WORK_DIR}/consumer/thdc-consumer" "${WORK_DIR}/bundle")

# The golden outputs of CP rank 0 (test/tools/thd-run.test, RANK0).
set(expected "entry megatron_graph_step, format 3, 17 buffers
tokens: 11 0 21 0 31 34 0 0
status: 0 (ok)
")
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "thdc-consumer printed:\n${output}\nexpected:\n${expected}")
endif()
# Any size of the same pipeline: the golden microbatch in C = 32768 rows a
# rank (the consumer used to read past its 16 values and crash).
run("${prefix}/bin/thdc" "${THDC_SOURCE_DIR}/examples/megatron_graph_step.mlir"
  --param C=32768 --param N=64 -o "${WORK_DIR}/large-bundle")
run("${WORK_DIR}/consumer/thdc-consumer" "${WORK_DIR}/large-bundle")
set(expected "entry megatron_graph_step, format 3, 17 buffers
tokens: 11 0 21 0 31 34 0 0 ... (32760 more)
status: 0 (ok)
")
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "thdc-consumer printed:\n${output}\nexpected:\n${expected}")
endif()
# The compiler's libraries, found with MLIR.
run(${CMAKE_COMMAND} -S "${THDC_SOURCE_DIR}/test/install"
  -B "${WORK_DIR}/compiler-consumer" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}"
  "-DMLIR_DIR=${MLIR_DIR}" -DTHDC_CONSUMER_COMPILER=ON)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/compiler-consumer"
  --target thdc-compiler-consumer)
run("${WORK_DIR}/compiler-consumer/thdc-compiler-consumer"
  "${THDC_SOURCE_DIR}/examples/megatron_graph_step.mlir")
set(expected "entry megatron_graph_step, 17 buffers, block 256
.visible .entry megatron_graph_step
")
if(NOT output STREQUAL expected)
  message(FATAL_ERROR
    "thdc-compiler-consumer printed:\n${output}\nexpected:\n${expected}")
endif()
message(STATUS "installed thdc works from a consumer project")
