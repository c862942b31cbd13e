//===- Rows.cpp - steps that compute per-token buffers --------------------===//
//
// The verifiers, StepOpInterface methods and folders of the steps whose
// results are per-token buffers: packing from a pool (S4), the padding mask
// (S5), sanitised rows (S6), a rank's CP slice and every rank's gathered
// rows back in sequence order (S7), position ids, RoPE positions and the
// sequence index of a row (S8), and tail padding (S10). Sections are those
// of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "dialect/ops/Common.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::thd;

//===----------------------------------------------------------------------===//
// Op verifiers
//===----------------------------------------------------------------------===//

LogicalResult PackOp::verify() {
  if (failed(verifyCuPair(*this, getCuSeqlens(), getCuSeqlensPadded())) ||
      failed(verifySameElementType(*this, getPool().getType(),
                                   getPacked().getType())) ||
      failed(verifyFill(*this, getPad(), getPool().getType().getElementType(),
                        "pad")))
    return failure();
  return verifyCapacity(*this, getPacked(), getCapacityAttr());
}

LogicalResult PaddingMaskOp::verify() {
  if (failed(verifyCuPair(*this, getCuSeqlens(), getCuSeqlensPadded())))
    return failure();
  return verifyCapacity(*this, getMask(), getCapacityAttr());
}

LogicalResult SanitizeOp::verify() {
  std::optional<int64_t> rows = staticLength(getInput());
  std::optional<int64_t> maskRows = staticLength(getMask());
  if (rows && maskRows && *rows != *maskRows)
    return emitOpError() << "input has " << *rows << " rows but the mask has "
                         << *maskRows;
  return verifyFill(*this, getFillAttr(), getInput().getType().getElementType(),
                    "fill");
}

LogicalResult CpSliceOp::verify() {
  FailureOr<std::optional<int64_t>> cp =
      resolveAtLeast(*this, getCp(), "cp", 1);
  if (failed(cp) || failed(verifySameElementType(*this, getInput().getType(),
                                                 getResult().getType())))
    return failure();
  std::optional<int64_t> rows = staticLength(getInput());
  std::optional<int64_t> out = staticLength(getResult());
  int64_t ranks = **cp;
  if (rows && ranks > 1) {
    int64_t multiple = getMode() == CpMode::zigzag ? 2 * ranks : ranks;
    if (*rows % multiple != 0)
      return emitOpError() << "input length " << *rows
                           << " is not divisible by "
                           << (getMode() == CpMode::zigzag ? "2*cp = "
                                                           : "cp = ")
                           << multiple << " (" << stringifyCpMode(getMode())
                           << " partitioning)";
  }
  if (rows && out && *out * ranks != *rows)
    return emitOpError() << "result has " << *out << " rows; expected " << *rows
                         << " / cp = " << *rows / ranks;
  return success();
}

LogicalResult CpUnsliceOp::verify() {
  FailureOr<std::optional<int64_t>> cp =
      resolveAtLeast(*this, getCp(), "cp", 1);
  FailureOr<std::optional<int64_t>> rowsPerRank =
      resolveAtLeast(*this, getRowsPerRank(), "rows_per_rank", 1);
  if (failed(cp) || failed(rowsPerRank) ||
      failed(verifySameElementType(*this, getInput().getType(),
                                   getResult().getType())))
    return failure();
  std::optional<int64_t> entries = staticLength(getCuSeqlensPadded());
  if (entries && *entries < 1)
    return emitOpError() << "cumulative-offset arrays need at least one "
                            "entry, got 0";
  // Rows are addressed by i32 offsets; both factors are at most INT32_MAX,
  // so the product does not overflow.
  int64_t rows = **cp * **rowsPerRank;
  if (rows > INT32_MAX)
    return emitOpError() << "gathers cp * rows_per_rank = " << **cp << " * "
                         << **rowsPerRank << " = " << rows
                         << " rows, more than i32 offsets address ("
                         << INT32_MAX << ")";
  for (auto [value, what] : {std::make_pair(getInput(), "input"),
                             std::make_pair(getResult(), "result")}) {
    std::optional<int64_t> length = staticLength(value);
    if (length && *length != rows)
      return emitOpError() << what << " has " << *length
                           << " rows; expected cp * rows_per_rank = " << **cp
                           << " * " << **rowsPerRank << " = " << rows;
  }
  return success();
}

LogicalResult PositionIdsOp::verify() {
  if (failed(verifyCuPair(*this, getCuSeqlens(), getCuSeqlensPadded())))
    return failure();
  return verifyCapacity(*this, getPositionIds(), getCapacityAttr());
}

/// The result of a `length`-row op has exactly `length` rows when static.
static LogicalResult verifyLength(Operation *op, Attribute attr, Value result) {
  FailureOr<std::optional<int64_t>> length =
      resolveAtLeast(op, attr, "length", 0);
  if (failed(length))
    return failure();
  std::optional<int64_t> rows = staticLength(result);
  if (rows && *rows != **length)
    return op->emitOpError()
           << "result has " << *rows << " rows but 'length' is " << **length;
  return success();
}

/// A static cu array has at least `minimum` entries.
static LogicalResult verifyOffsetEntries(Operation *op, Value offsets,
                                         int64_t minimum, StringRef why) {
  std::optional<int64_t> n = staticLength(offsets);
  if (n && *n < minimum)
    return op->emitOpError() << "needs at least " << minimum
                             << " cu_seqlens_padded entries (" << why
                             << "), got " << *n;
  return success();
}

LogicalResult RopePositionsOp::verify() {
  if (failed(resolveAtLeast(*this, getCp(), "cp", 1)) ||
      failed(resolveAtLeast(*this, getTableRows(), "table_rows", 1)) ||
      failed(verifyOffsetEntries(*this, getCuSeqlensPadded(), 2,
                                 "rows continue the last sequence")))
    return failure();
  return verifyLength(*this, getLength(), getPositions());
}

LogicalResult SeqIdxOp::verify() {
  if (failed(verifyOffsetEntries(*this, getCuSeqlensPadded(), 1,
                                 "the tail starts at the last one")))
    return failure();
  return verifyLength(*this, getLength(), getSeqIdx());
}

/// The CP slice (cp > 1) that `value` comes from, through steps that keep
/// its rows where they are (sanitize, pad_tail), if any. Op verifiers run
/// before dominance is checked, so the chain may be a cycle (a value used as
/// its own operand): each op is visited once.
static CpSliceOp sliceOf(Value value) {
  Operation *def = value.getDefiningOp();
  llvm::SmallPtrSet<Operation *, 8> visited;
  while (def && visited.insert(def).second) {
    if (auto slice = dyn_cast<CpSliceOp>(def)) {
      // A cp that does not resolve is the slice's own error.
      std::optional<int64_t> cp = tryResolveIntOrParam(slice, slice.getCp());
      return cp && *cp == 1 ? nullptr : slice;
    }
    if (auto sanitize = dyn_cast<SanitizeOp>(def))
      def = sanitize.getInput().getDefiningOp();
    else if (auto pad = dyn_cast<PadTailOp>(def))
      def = pad.getInput().getDefiningOp();
    else
      return nullptr;
  }
  return nullptr;
}

/// The extend_last tail padding of the offsets a slice used, if any: after
/// it the last sequence is longer, so its chunks are other rows.
static PadTailMetadataOp extendedFrom(CpSliceOp slice) {
  for (Operation *user : slice.getCuSeqlensPadded().getUsers())
    if (auto metadata = dyn_cast<PadTailMetadataOp>(user))
      if (metadata.getPolicy() == TailPolicy::extend_last &&
          metadata.getCuSeqlensPadded() == slice.getCuSeqlensPadded())
        return metadata;
  return nullptr;
}

LogicalResult PadTailOp::verify() {
  if (failed(verifyTargetOrAlignment(*this, getTargetAttr(),
                                     getAlignmentAttr())) ||
      failed(verifySameElementType(*this, getInput().getType(),
                                   getResult().getType())))
    return failure();
  // Padding each rank's slice is right only when the slice already gives
  // the rank the rows its padded cu arrays describe (S7, S10):
  // - contiguous CP gives rank r the rows [r*T/cp, (r+1)*T/cp) of the buffer
  //   it slices; sliced before the tail is padded, those are rows of the
  //   unpadded buffer, while the padded metadata describes rank r as rows
  //   [r*Lt, (r+1)*Lt) of the padded one;
  // - zigzag CP by offsets whose last sequence extend_last then lengthens
  //   gives the rank that sequence's chunks of its old length.
  if (CpSliceOp slice = sliceOf(getInput())) {
    if (slice.getMode() == CpMode::contiguous) {
      InFlightDiagnostic diag =
          emitOpError()
          << "pads the tail of a contiguous CP slice; each rank would hold "
             "rows of the unpadded buffer that the padded cu_seqlens do not "
             "describe. Pad the packed buffer first (thd.pad_tail to the "
             "global target, e.g. \"C*cp\") and slice it contiguously after";
      diag.attachNote(slice.getLoc()) << "sliced contiguously here";
      return diag;
    }
    if (PadTailMetadataOp metadata = extendedFrom(slice)) {
      InFlightDiagnostic diag =
          emitOpError()
          << "pads the tail of a CP slice taken with offsets that "
             "extend_last then lengthens; each rank would hold chunks of "
             "the last sequence at its old length, which the extended "
             "cu_seqlens_padded do not describe. Pad the packed buffer "
             "first and slice it with the offsets thd.pad_tail_metadata "
             "returns";
      diag.attachNote(slice.getLoc()) << "sliced here";
      diag.attachNote(metadata.getLoc()) << "the last sequence extended here";
      return diag;
    }
  }
  FailureOr<std::optional<int64_t>> target =
      resolveAtLeast(*this, getTargetAttr(), "target", 0);
  FailureOr<std::optional<int64_t>> alignment =
      resolveAtLeast(*this, getAlignmentAttr(), "alignment", 1);
  if (failed(target) || failed(alignment))
    return failure();
  auto inputType = cast<RankedTensorType>(getInput().getType());
  if (failed(
          verifyFill(*this, getFillAttr(), inputType.getElementType(), "fill")))
    return failure();
  std::optional<int64_t> rows = staticLength(getInput());
  std::optional<int64_t> out = staticLength(getResult());
  int64_t expected = -1;
  if (*target) {
    if (rows && *rows > **target)
      return emitOpError() << "input has " << *rows
                           << " rows, more than the target " << **target
                           << "; refusing to silently truncate";
    expected = **target;
  } else if (rows) {
    expected = llvm::divideCeil(*rows, **alignment) * **alignment;
  }
  if (out && expected >= 0 && *out != expected)
    return emitOpError() << "result has " << *out << " rows; expected "
                         << expected;
  if (out && expected < 0 && **alignment && *out % **alignment != 0)
    return emitOpError() << "result has " << *out
                         << " rows, not a multiple of the alignment "
                         << **alignment;
  return success();
}

//===----------------------------------------------------------------------===//
// StepOpInterface: static result lengths and result kinds
//
// Called by thd-force-static-shapes once the operands are static and the
// parameters bound (integer attributes).
//===----------------------------------------------------------------------===//

Lengths PackOp::inferStaticLengths() {
  return capacityLength(*this, getCapacityAttr());
}
ResultKind PackOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths PaddingMaskOp::inferStaticLengths() {
  return capacityLength(*this, getCapacityAttr());
}
ResultKind PaddingMaskOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths SanitizeOp::inferStaticLengths() {
  int64_t rows = staticLengthOf(getInput()),
          maskRows = staticLengthOf(getMask());
  if (rows != maskRows)
    return emitOpError() << "cannot be made static: the input's capacity is "
                         << rows << " rows but the mask's is " << maskRows;
  return oneLength(rows);
}
ResultKind SanitizeOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths CpSliceOp::inferStaticLengths() {
  int64_t rows = staticLengthOf(getInput()), cp = boundValue(getCp());
  int64_t multiple =
      cp == 1 ? 1 : (getMode() == CpMode::zigzag ? 2 * cp : cp);
  if (rows % multiple != 0)
    return emitOpError() << "cannot be made static: the input's capacity "
                         << rows << " is not divisible by " << multiple
                         << ", so the rank's share has no whole number of "
                            "rows";
  return oneLength(rows / cp);
}
ResultKind CpSliceOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths CpUnsliceOp::inferStaticLengths() {
  int64_t rows = boundValue(getCp()) * boundValue(getRowsPerRank());
  if (staticLengthOf(getInput()) != rows)
    return emitOpError() << "cannot be made static: the input's capacity is "
                         << staticLengthOf(getInput())
                         << " rows but cp * rows_per_rank is " << rows;
  return oneLength(rows);
}
ResultKind CpUnsliceOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths PositionIdsOp::inferStaticLengths() {
  return capacityLength(*this, getCapacityAttr());
}
ResultKind PositionIdsOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths RopePositionsOp::inferStaticLengths() {
  return oneLength(boundValue(getLength()));
}
ResultKind RopePositionsOp::getResultKind(unsigned) {
  return ResultKind::Rows;
}

Lengths SeqIdxOp::inferStaticLengths() {
  return oneLength(boundValue(getLength()));
}
ResultKind SeqIdxOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths PadTailOp::inferStaticLengths() {
  if (!getTargetAttr())
    return emitOpError()
           << "cannot be made static: with 'alignment' its length "
              "round_up(rows, alignment) depends on the data; pad to a "
              "'target' instead (graph mode pads to C)";
  int64_t target = boundValue(getTargetAttr());
  int64_t rows = staticLengthOf(getInput());
  if (rows > target)
    return emitOpError() << "cannot be made static: the input's capacity "
                         << rows << " exceeds the target " << target
                         << ", so a full input would be truncated";
  return oneLength(target);
}
ResultKind PadTailOp::getResultKind(unsigned) { return ResultKind::Rows; }

//===----------------------------------------------------------------------===//
// Folders: the identities the op descriptions state
//===----------------------------------------------------------------------===//

OpFoldResult CpSliceOp::fold(FoldAdaptor) {
  auto cp = dyn_cast<IntegerAttr>(getCp());
  if (cp && cp.getInt() == 1 && getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult CpUnsliceOp::fold(FoldAdaptor) {
  auto cp = dyn_cast<IntegerAttr>(getCp());
  if (cp && cp.getInt() == 1 && getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult PadTailOp::fold(FoldAdaptor) {
  auto target = dyn_cast_or_null<IntegerAttr>(getTargetAttr());
  auto type = dyn_cast<RankedTensorType>(getInput().getType());
  if (!target || !type || !type.hasStaticShape() || getType() != type ||
      type.getDimSize(0) != target.getInt())
    return {};
  // Only an input whose every row is meaningful is its own padding.
  Value input = getInput();
  auto padded = input.getDefiningOp<PadTailOp>();
  if (isa<BlockArgument>(input) || (padded && padded.getTargetAttr()))
    return input;
  return {};
}
