//===- StepLowering.h - the element code of every step ----------*- C++ -*-===//
//
// One pair of functions per thd step, defined in the file of its family:
//   Offsets.cpp   align_lengths, gather, cu_seqlens, pad_cu_seqlens
//   Rows.cpp      padding_mask, position_ids, pack, sanitize, cp_slice,
//                 cp_unslice, pad_tail, seq_idx, rope_positions
//   Metadata.cpp  max_seqlen, validate, dropped, pad_tail_metadata,
//                 linear_chunks
// `lowerElement` computes element `at` of `result` (null `at` for a scalar);
// `lowerRowCount` the number of meaningful rows of a per-token result.
// Register.cpp attaches them to every op of the dialect, so a step that is
// missing here does not compile and one declared but not defined does not
// link.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_CODEGEN_LOWERING_STEPLOWERING_H
#define THDC_CODEGEN_LOWERING_STEPLOWERING_H

#include "codegen/ElementEmitter.h"

namespace mlir::thd {

#define THD_STEP_LOWERING(Op)                                                  \
  Value lowerElement(Op op, ElementEmitter &e, OpResult result, Value at);     \
  Value lowerRowCount(Op op, ElementEmitter &e, OpResult result);

// Offsets.cpp
THD_STEP_LOWERING(AlignLengthsOp)
THD_STEP_LOWERING(GatherOp)
THD_STEP_LOWERING(CuSeqlensOp)
THD_STEP_LOWERING(PadCuSeqlensOp)
// Rows.cpp
THD_STEP_LOWERING(PaddingMaskOp)
THD_STEP_LOWERING(PositionIdsOp)
THD_STEP_LOWERING(PackOp)
THD_STEP_LOWERING(SanitizeOp)
THD_STEP_LOWERING(CpSliceOp)
THD_STEP_LOWERING(CpUnsliceOp)
THD_STEP_LOWERING(PadTailOp)
THD_STEP_LOWERING(SeqIdxOp)
THD_STEP_LOWERING(RopePositionsOp)
// Metadata.cpp
THD_STEP_LOWERING(MaxSeqlenOp)
THD_STEP_LOWERING(ValidateOp)
THD_STEP_LOWERING(DroppedOp)
THD_STEP_LOWERING(PadTailMetadataOp)
THD_STEP_LOWERING(LinearChunksOp)

#undef THD_STEP_LOWERING

/// For steps whose results are not per-token: asking for their row count is
/// a bug in the caller, reported on the op.
Value noRowCount(Operation *op, ElementEmitter &e);

} // namespace mlir::thd

#endif // THDC_CODEGEN_LOWERING_STEPLOWERING_H
