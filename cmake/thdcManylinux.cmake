# THDC_MANYLINUX: link the Python module so that it loads on every Linux
# with glibc >= THDC_MANYLINUX_GLIBC (2.28: manylinux_2_28, the platform
# PyTorch and NumPy publish for), although it is built on a newer one
# (Debian 12: glibc 2.36, GCC 12). The wheel's build turns it on
# (scripts/test-wheel.sh); a build tree has no use for it.
#
# A shared object records, for each glibc function it calls, the symbol
# version of the libc it was linked against: linked against this machine's,
# the module needs glibc 2.36. So:
# - it is linked against stub libraries of the older glibc (libc.so.6,
#   libm, libpthread, libdl, librt: every symbol with the version it had in
#   that release, and libc_nonshared.a), which PyPI's ziglang writes for any
#   glibc release (`zig cc -target x86_64-linux-gnu.2.28`). Only the stubs
#   come from zig: the link stays GCC's and GNU ld's. The headers stay this
#   machine's, whose functions glibc keeps, under the same names, in every
#   later release; before 2.34 dlopen and pthread_* live in libdl and
#   libpthread, linked here by name.
# - libstdc++ is linked in statically (GCC 12's needs GLIBCXX_3.4.30, newer
#   than many of those systems have); --exclude-libs keeps its symbols local
#   (python/CMakeLists.txt). libgcc_s stays shared: every such system has it,
#   with older symbol versions than ours, whereas GCC 12's static unwinder
#   (libgcc_eh.a) calls _dl_find_object, glibc 2.35.
# - zlib and zstd, which LLVM's support library calls, are linked in from
#   their static archives: the system's libzstd.so.1 needs glibc 2.34, and
#   auditwheel would copy it into the wheel.
# - the few functions that the static archives (LLVM's, libstdc++'s) call and
#   the older glibc lacks are defined in python/glibc_compat.c.
# scripts/check-glibc-versions.py checks the result: every symbol version at
# or below the target and no other undefined symbol than Python's.
# Included after cmake/thdcStaticLLVM.cmake (the module links LLVM statically).
set(THDC_MANYLINUX_GLIBC "2.28" CACHE STRING
  "The oldest glibc that the module loads on, with THDC_MANYLINUX")
set(THDC_ZIG "" CACHE FILEPATH
  "zig (PyPI's ziglang), which writes the glibc stubs for THDC_MANYLINUX")
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  message(FATAL_ERROR "THDC_MANYLINUX is for Linux (glibc) builds")
endif()
if(NOT THDC_ZIG)
  find_program(THDC_ZIG_ON_PATH zig)
  if(THDC_ZIG_ON_PATH)
    set(THDC_ZIG "${THDC_ZIG_ON_PATH}")
  else()
    execute_process(COMMAND "${Python_EXECUTABLE}" -c
      "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"
      OUTPUT_VARIABLE THDC_ZIG OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
endif()
if(NOT THDC_ZIG OR NOT EXISTS "${THDC_ZIG}")
  message(FATAL_ERROR "THDC_MANYLINUX needs zig to write the glibc "
    "${THDC_MANYLINUX_GLIBC} stubs: `pip install ziglang` and set THDC_ZIG "
    "(pip: the THDC_ZIG environment variable) to its zig")
endif()

# The stubs, written once per build tree by linking an empty library for the
# target glibc in zig's cache (kept in the build tree); the linker scripts
# that -lc, -lm, ... find name them.
set(THDC_GLIBC_STUBS "${CMAKE_BINARY_DIR}/glibc-${THDC_MANYLINUX_GLIBC}")
if(NOT EXISTS "${THDC_GLIBC_STUBS}/libc.so")
  set(cache "${THDC_GLIBC_STUBS}/zig-cache")
  file(WRITE "${THDC_GLIBC_STUBS}/empty.c" "")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ZIG_GLOBAL_CACHE_DIR=${cache} ZIG_LOCAL_CACHE_DIR=${cache}
      "${THDC_ZIG}" cc -target ${CMAKE_SYSTEM_PROCESSOR}-linux-gnu.${THDC_MANYLINUX_GLIBC}
      -O2 -fno-sanitize=all -shared -o "${THDC_GLIBC_STUBS}/empty.so"
      "${THDC_GLIBC_STUBS}/empty.c"
    RESULT_VARIABLE failed OUTPUT_VARIABLE out ERROR_VARIABLE out)
  file(GLOB_RECURSE libc "${cache}/*/libc.so.6")
  file(GLOB_RECURSE nonshared "${cache}/*/libc_nonshared.a")
  list(LENGTH libc libc_count)
  list(LENGTH nonshared nonshared_count)
  if(failed OR NOT libc_count EQUAL 1 OR NOT nonshared_count EQUAL 1)
    message(FATAL_ERROR "${THDC_ZIG} wrote no glibc ${THDC_MANYLINUX_GLIBC} "
      "stubs (${libc_count} libc.so.6, ${nonshared_count} libc_nonshared.a): ${out}")
  endif()
  get_filename_component(dir "${libc}" DIRECTORY)
  # zig names the dynamic loader's stub libld.so.2 (its soname is the
  # loader's).
  foreach(pair "m;libm.so.6" "pthread;libpthread.so.0" "dl;libdl.so.2" "rt;librt.so.1")
    list(GET pair 0 name)
    list(GET pair 1 stub)
    file(WRITE "${THDC_GLIBC_STUBS}/lib${name}.so" "INPUT ( \"${dir}/${stub}\" )\n")
  endforeach()
  # Written last: its presence marks the stubs complete.
  file(WRITE "${THDC_GLIBC_STUBS}/libc.so" "GROUP ( \"${dir}/libc.so.6\" "
    "\"${nonshared}\" AS_NEEDED ( \"${dir}/libld.so.2\" ) )\n")
endif()
message(STATUS "manylinux: linking the Python module against glibc "
  "${THDC_MANYLINUX_GLIBC}'s stubs in ${THDC_GLIBC_STUBS}")

# zlib and zstd from their static archives, in every imported target that
# names their shared libraries (LLVMSupport's interface).
find_library(THDC_ZLIB_STATIC NAMES libz.a)
find_library(THDC_ZSTD_STATIC NAMES libzstd.a)
if(NOT THDC_ZLIB_STATIC OR NOT THDC_ZSTD_STATIC)
  message(FATAL_ERROR "THDC_MANYLINUX links zlib and zstd statically: "
    "apt-get install zlib1g-dev libzstd-dev (scripts/setup.sh)")
endif()
get_directory_property(thdc_imported IMPORTED_TARGETS)
foreach(target ${thdc_imported})
  get_target_property(deps ${target} INTERFACE_LINK_LIBRARIES)
  if(deps)
    list(TRANSFORM deps REPLACE "^ZLIB::ZLIB$" "${THDC_ZLIB_STATIC}")
    list(TRANSFORM deps REPLACE "^zstd::libzstd_shared$" "${THDC_ZSTD_STATIC}")
    set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")
  endif()
endforeach()

# TARGET (the module): linked as above.
function(thdc_manylinux_module target)
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/python/glibc_compat.c)
  # -L first on the link line: -lc, -lm, ... find the stubs' linker scripts
  # before the system's libraries.
  target_link_options(${target} PRIVATE -L${THDC_GLIBC_STUBS} -static-libstdc++)
  target_link_libraries(${target} PRIVATE m pthread dl rt)
endfunction()
