//===- Reference.h - Reference semantics of THD data prep -------*- C++ -*-===//
//
// Plain C++17 reference implementation of every step of the THD
// data-preparation pipeline defined in docs/semantics.md (Megatron-LM PR
// #4359 semantics, sections S1..S14). It has no MLIR/LLVM dependency and
// uses no exceptions: fallible steps return `Result<T>`.
//
// Vocabulary (docs/semantics.md, Overview and Glossary):
//   cu_seqlens         `cu`  = [0, v0, v0+v1, ...]  cumulative valid lengths
//   cu_seqlens_padded  `cup` = [0, p0, p0+p1, ...]  physical buffer offsets
//   cp / rank          context-parallel size / rank
//   C                  max_seqlen_per_dp_cp_rank (token budget per CP rank)
//   N                  thd_max_packed_sequences (capacity incl. the dummy)
// Masks are std::vector<uint8_t> holding 0/1, with 1 (true) = padding.
//
// The declarations are split by section, one header each, all included
// here (a user may include only the one it needs):
//   Status.h (errors: every fallible step returns a Result), Common.h
//   (shared helpers), Alignment.h S1,
//   Scheduling.h S2-S3, DynamicCp.h S3b, Packing.h S4, PaddingMask.h S5-S6,
//   CpSlice.h S7, Positions.h S8, TailPadding.h S9-S10, GraphCapture.h
//   S11-S12, Attention.h S14, LinearChunks.h S15, GraphStep.h (the
//   graph-mode composite), PackStep.h (the same from a pool of samples),
//   StatusBits.h (the composites' status bits); the templates (S4 pack, S6
//   sanitize, S7 cpSlice, S10 padTail, S14 readHalf) are defined at the end of
//   their section's header. The definitions follow the same sections
//   (reference/Sources.cmake).
//
// This library is the single definition of the semantics: the compiler's
// lowering is tested against it (see megatronGraphStep).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_REFERENCE_H
#define THDC_REFERENCE_REFERENCE_H

#include "reference/Alignment.h"
#include "reference/Attention.h"
#include "reference/Common.h"
#include "reference/CpSlice.h"
#include "reference/DynamicCp.h"
#include "reference/GraphCapture.h"
#include "reference/GraphStep.h"
#include "reference/LinearChunks.h"
#include "reference/PackStep.h"
#include "reference/Packing.h"
#include "reference/PaddingMask.h"
#include "reference/Positions.h"
#include "reference/Scheduling.h"
#include "reference/Status.h"
#include "reference/StatusBits.h"
#include "reference/TailPadding.h"

#endif // THDC_REFERENCE_REFERENCE_H
