# Writes a text file (a kernel's PTX) into a header that defines it as a C++
# string: `constexpr const char <VARIABLE>[] = R"PTX(<the file>)PTX";`, the
# file's bytes unchanged. Run at build time by runtime/CMakeLists.txt, so
# that the PTX is edited as a file of its own and no Python is needed.
#   cmake -DINPUT=<file.ptx> -DOUTPUT=<header.inc> -DVARIABLE=<name>
#         -P EmbedPtx.cmake
foreach(argument INPUT OUTPUT VARIABLE)
  if(NOT ${argument})
    message(FATAL_ERROR "EmbedPtx.cmake: set ${argument}")
  endif()
endforeach()
file(READ "${INPUT}" text)
# The raw string ends at the first )PTX" in it.
string(FIND "${text}" ")PTX\"" end)
if(NOT end EQUAL -1)
  message(FATAL_ERROR "${INPUT} holds )PTX\", which would end the raw string "
    "it is embedded as")
endif()
get_filename_component(input_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}"
  "// Generated from ${input_name} by EmbedPtx.cmake at build time: edit the\n"
  "// .ptx, not this file.\n"
  "constexpr const char ${VARIABLE}[] = R\"PTX(${text})PTX\";\n")
