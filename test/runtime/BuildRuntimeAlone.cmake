# Configures runtime/ as a project of its own (no LLVM or MLIR anywhere on its
# include path) and builds the THDRuntime library, as a GPU host without LLVM
# does. Fails if the configure or the build fails, or if a compile command
# names an LLVM or MLIR include folder.
#   cmake -DSOURCE_DIR=<repo>/runtime -DBINARY_DIR=<tmp> [-DGENERATOR=Ninja]
#         [-DEXTRA_ARGS=arg|arg...] [-DONE_SOURCE=File.cpp]
#         -P BuildRuntimeAlone.cmake
# EXTRA_ARGS: configure arguments separated by '|' (a ';' would split the
# command line of the test that runs this script).
# ONE_SOURCE: compile only that source of THDRuntime, with its own compile
# command from the configure: for a variant that changes only where a
# header-only dependency's headers come from, one file that uses it shows
# the configure found them, and the other files would compile the same code
# against the same headers again.
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
file(READ "${BINARY_DIR}/compile_commands.json" commands)
if(commands MATCHES "-I[^ ]*(llvm|mlir)")
  message(FATAL_ERROR "a compile command of the runtime alone names an "
    "LLVM/MLIR include folder: ${CMAKE_MATCH_0}")
endif()
if(NOT ONE_SOURCE)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --build "${BINARY_DIR}" --target THDRuntime
    RESULT_VARIABLE built)
  if(NOT built EQUAL 0)
    message(FATAL_ERROR "building THDRuntime from ${SOURCE_DIR} alone failed")
  endif()
  message(STATUS "THDRuntime builds from ${SOURCE_DIR} alone")
  return()
endif()
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
set(command)
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  if(file MATCHES "/${ONE_SOURCE}$")
    string(JSON command GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
    break()
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "THDRuntime has no source ${ONE_SOURCE}")
endif()
# The object goes to a file of the script's own: the build's object folder
# need not exist before a build.
separate_arguments(command UNIX_COMMAND "${command}")
list(FIND command -o at)
if(at EQUAL -1)
  message(FATAL_ERROR "the compile command of ${ONE_SOURCE} names no -o: ${command}")
endif()
math(EXPR at "${at} + 1")
list(REMOVE_AT command ${at})
list(INSERT command ${at} "${BINARY_DIR}/one-source.o")
execute_process(COMMAND ${command} WORKING_DIRECTORY "${directory}" RESULT_VARIABLE built)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "compiling THDRuntime's ${ONE_SOURCE} from ${SOURCE_DIR} alone failed")
endif()
message(STATUS "THDRuntime's ${ONE_SOURCE} builds from ${SOURCE_DIR} alone")
