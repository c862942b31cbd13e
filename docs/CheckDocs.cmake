# Fails when a published doc under docs/dialect/ differs from the one the
# build generated from the ODS files. Run with -DGENERATED=<list>
# -DPUBLISHED=<list> (same length, paired by position).
list(LENGTH GENERATED count)
list(LENGTH PUBLISHED published_count)
if(NOT count EQUAL published_count OR count EQUAL 0)
  message(FATAL_ERROR "CheckDocs.cmake: GENERATED and PUBLISHED must be "
                      "non-empty lists of the same length")
endif()
math(EXPR last "${count} - 1")
set(stale)
foreach(i RANGE ${last})
  list(GET GENERATED ${i} generated)
  list(GET PUBLISHED ${i} published)
  if(NOT EXISTS "${generated}")
    message(FATAL_ERROR "${generated} was not generated; build the project "
                        "first (cmake --build build)")
  endif()
  if(NOT EXISTS "${published}")
    list(APPEND stale "${published} (missing)")
    continue()
  endif()
  file(READ "${generated}" generated_text)
  file(READ "${published}" published_text)
  if(NOT generated_text STREQUAL published_text)
    list(APPEND stale "${published} (differs from ${generated})")
  endif()
endforeach()
if(stale)
  list(JOIN stale "\n  " stale_lines)
  message(FATAL_ERROR
    "The published dialect/pass docs are out of date with the .td files:\n"
    "  ${stale_lines}\n"
    "Run `cmake --build build --target thdc-docs` and commit docs/dialect/.")
endif()
message(STATUS "docs/dialect/ matches the generated docs (${count} files)")
