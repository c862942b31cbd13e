# THDC_STATIC_LLVM: link LLVM and MLIR into thdc's binaries from their static
# archives, so that what is built (the Python module of a wheel above all)
# needs no libLLVM or libMLIR at run time.
#
# Debian's LLVM is configured with LLVM_LINK_LLVM_DYLIB, so every imported
# MLIR library names the shared `LLVM` as its LLVM dependency. Here that
# name is replaced, in each imported target, by an interface target over
# LLVM's static component libraries (the linker takes from them only what
# is referenced). Included right after find_package(MLIR), before AddLLVM.
if(MLIR_LINK_MLIR_DYLIB)
  message(FATAL_ERROR "THDC_STATIC_LLVM links MLIR statically; configure "
    "without -DMLIR_LINK_MLIR_DYLIB=ON")
endif()
# llvm_add_library and llvm_config then map components to static libraries.
set(LLVM_LINK_LLVM_DYLIB OFF)

# LLVMSupport's interface names zstd's shared-library target, which
# LLVMConfig defines only for static builds of LLVM.
if(NOT TARGET zstd::libzstd_shared)
  find_library(THDC_ZSTD_LIBRARY NAMES zstd libzstd.so.1 REQUIRED)
  add_library(zstd::libzstd_shared UNKNOWN IMPORTED)
  set_target_properties(zstd::libzstd_shared PROPERTIES
    IMPORTED_LOCATION "${THDC_ZSTD_LIBRARY}")
endif()

# Every static component library that is installed and whose dependencies
# all are (that leaves out the few that need Polly, libcurl, libedit or
# libxml2, libpfm, which nothing in thdc uses).
function(thdc_llvm_usable lib out)
  get_property(known GLOBAL PROPERTY THDC_USABLE_${lib} SET)
  if(known)
    get_property(usable GLOBAL PROPERTY THDC_USABLE_${lib})
    set(${out} ${usable} PARENT_SCOPE)
    return()
  endif()
  set(usable OFF)
  if(TARGET ${lib})
    get_target_property(type ${lib} TYPE)
    set(usable ON)
    if(type STREQUAL "STATIC_LIBRARY")
      get_target_property(location ${lib} LOCATION)
      if(NOT EXISTS "${location}")
        set(usable OFF)
      endif()
      get_target_property(deps ${lib} INTERFACE_LINK_LIBRARIES)
      if(NOT deps)
        set(deps)
      endif()
      list(TRANSFORM deps REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1")
      foreach(dep ${deps})
        if(NOT usable)
          break()
        elseif(TARGET ${dep} OR dep MATCHES "::")
          thdc_llvm_usable(${dep} usable)
        elseif(IS_ABSOLUTE "${dep}")
          if(NOT EXISTS "${dep}")
            set(usable OFF)
          endif()
        elseif(NOT dep MATCHES "^(-.*|rt|dl|m|pthread)$")
          # Another system library named plainly (pfm): usable if present.
          find_library(THDC_SYSTEM_LIB_${dep} ${dep})
          if(NOT THDC_SYSTEM_LIB_${dep})
            set(usable OFF)
          endif()
        endif()
      endforeach()
    endif()
  endif()
  set_property(GLOBAL PROPERTY THDC_USABLE_${lib} ${usable})
  set(${out} ${usable} PARENT_SCOPE)
endfunction()
set(thdc_llvm_static_libs)
foreach(lib ${LLVM_AVAILABLE_LIBS})
  if(lib MATCHES "^LLVM." AND TARGET ${lib})
    get_target_property(type ${lib} TYPE)
    thdc_llvm_usable(${lib} usable)
    if(type STREQUAL "STATIC_LIBRARY" AND usable)
      list(APPEND thdc_llvm_static_libs ${lib})
    endif()
  endif()
endforeach()
if(NOT thdc_llvm_static_libs)
  message(FATAL_ERROR "THDC_STATIC_LLVM: ${LLVM_DIR} exports no static LLVM "
    "libraries (Debian: llvm-22-dev ships them)")
endif()
add_library(thdc_llvm_static INTERFACE IMPORTED)
# Each archive's exported dependencies order the link line.
set_target_properties(thdc_llvm_static PROPERTIES INTERFACE_LINK_LIBRARIES
  "${thdc_llvm_static_libs}")

# MLIR's ExecutionEngine (the host code's JIT) names the MLIR dylib for the
# translation libraries it uses; these are its upstream link libraries.
add_library(thdc_mlir_execution_engine_deps INTERFACE IMPORTED)
set_target_properties(thdc_mlir_execution_engine_deps PROPERTIES
  INTERFACE_LINK_LIBRARIES "MLIRBuiltinToLLVMIRTranslation;MLIRExecutionEngineUtils;MLIRLLVMDialect;MLIRLLVMToLLVMIRTranslation;MLIROpenMPToLLVMIRTranslation;MLIRTargetLLVMIRExport")

get_directory_property(thdc_imported IMPORTED_TARGETS)
set(thdc_relinked 0)
foreach(target ${thdc_imported})
  get_target_property(deps ${target} INTERFACE_LINK_LIBRARIES)
  if(deps AND ("LLVM" IN_LIST deps OR "MLIR" IN_LIST deps))
    list(TRANSFORM deps REPLACE "^LLVM$" thdc_llvm_static)
    list(TRANSFORM deps REPLACE "^MLIR$" thdc_mlir_execution_engine_deps)
    set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")
    math(EXPR thdc_relinked "${thdc_relinked} + 1")
  endif()
endforeach()
list(LENGTH thdc_llvm_static_libs thdc_llvm_static_count)
message(STATUS "Static LLVM/MLIR: ${thdc_relinked} imported libraries "
  "relinked against ${thdc_llvm_static_count} of LLVM's static archives")

# Static LLVM pulls compression and solver libraries into its interface;
# keep only those the linked code really uses.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_link_options("LINKER:--as-needed")
endif()
