# The sources of the reference semantics, one file per section (or closely
# related pair of sections) of docs/semantics.md. Included by
# reference/CMakeLists.txt and by standalone projects that compile the
# reference in directly (the benchmark's baselines).
set(THDC_REFERENCE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/Common.cpp        # shared helpers, roundUp
  ${CMAKE_CURRENT_LIST_DIR}/Alignment.cpp     # S1
  ${CMAKE_CURRENT_LIST_DIR}/Scheduling.cpp    # S2, S3
  ${CMAKE_CURRENT_LIST_DIR}/DynamicCp.cpp     # S3b
  ${CMAKE_CURRENT_LIST_DIR}/DynamicCpAlignment.cpp # S3b, pipeline stages
  ${CMAKE_CURRENT_LIST_DIR}/Packing.cpp       # S4
  ${CMAKE_CURRENT_LIST_DIR}/PaddingMask.cpp   # S5 (S6 in PaddingMask.h)
  ${CMAKE_CURRENT_LIST_DIR}/CpSlice.cpp       # S7, and the S14 rank order
  ${CMAKE_CURRENT_LIST_DIR}/Positions.cpp     # S8
  ${CMAKE_CURRENT_LIST_DIR}/TailPadding.cpp   # S9, S10
  ${CMAKE_CURRENT_LIST_DIR}/GraphCapture.cpp  # S11, S12
  ${CMAKE_CURRENT_LIST_DIR}/Attention.cpp     # S14
  ${CMAKE_CURRENT_LIST_DIR}/LinearChunks.cpp  # S15
  ${CMAKE_CURRENT_LIST_DIR}/GraphStep.cpp     # S5-S10 composite
  ${CMAKE_CURRENT_LIST_DIR}/PackStep.cpp      # S1-S10 composite from a pool
)
