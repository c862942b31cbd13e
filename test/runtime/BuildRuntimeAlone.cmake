# Configures runtime/ as a project of its own (no LLVM or MLIR anywhere on its
# include path) and builds the THDRuntime library, as a GPU host without LLVM
# does. Fails if the configure or the build fails, or if a compile command
# names an LLVM or MLIR include folder.
#   cmake -DSOURCE_DIR=<repo>/runtime -DBINARY_DIR=<tmp> [-DGENERATOR=Ninja]
#         [-DEXTRA_ARGS=arg|arg...] -P BuildRuntimeAlone.cmake
# EXTRA_ARGS: configure arguments separated by '|' (a ';' would split the
# command line of the test that runs this script).
file(REMOVE_RECURSE "${BINARY_DIR}")
string(REPLACE "|" ";" EXTRA_ARGS "${EXTRA_ARGS}")
set(generator_args)
if(GENERATOR)
  set(generator_args -G "${GENERATOR}")
endif()
set(launcher_args)
if(DEFINED ENV{CMAKE_CXX_COMPILER_LAUNCHER})
  set(launcher_args "-DCMAKE_CXX_COMPILER_LAUNCHER=$ENV{CMAKE_CXX_COMPILER_LAUNCHER}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" ${generator_args} -S "${SOURCE_DIR}" -B "${BINARY_DIR}"
          -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
          ${launcher_args} ${EXTRA_ARGS}
  RESULT_VARIABLE configured)
if(NOT configured EQUAL 0)
  message(FATAL_ERROR "configuring ${SOURCE_DIR} alone failed")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${BINARY_DIR}" --target THDRuntime
  RESULT_VARIABLE built)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "building THDRuntime from ${SOURCE_DIR} alone failed")
endif()
file(READ "${BINARY_DIR}/compile_commands.json" commands)
if(commands MATCHES "-I[^ ]*(llvm|mlir)")
  message(FATAL_ERROR "a compile command of the runtime alone names an "
    "LLVM/MLIR include folder: ${CMAKE_MATCH_0}")
endif()
message(STATUS "THDRuntime builds from ${SOURCE_DIR} alone")
