//===- THDOps.cpp - thd dialect operations: syntax and verifiers ----------===//

#include "dialect/THDOps.h"
#include "dialect/ParamExpr.h"
#include "reference/Reference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::thd;

//===----------------------------------------------------------------------===//
// Custom syntax: integers or parameter expressions, fill values
//===----------------------------------------------------------------------===//

/// `8` is an i64 literal; `"C*cp"` an expression over the pipeline parameters.
static ParseResult parseIntOrParam(OpAsmParser &parser, Attribute &attr) {
  std::string text;
  SMLoc loc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalString(&text))) {
    attr = ExprAttr::getChecked([&] { return parser.emitError(loc); },
                                parser.getContext(), StringRef(text));
    return success(attr != nullptr);
  }
  int64_t value = 0;
  OptionalParseResult parsed = parser.parseOptionalInteger(value);
  if (!parsed.has_value())
    return parser.emitError(loc, "expected an integer or a quoted parameter "
                                 "expression such as \"C*cp\"");
  if (failed(*parsed))
    return failure();
  attr = parser.getBuilder().getI64IntegerAttr(value);
  return success();
}

static void printIntOrParam(OpAsmPrinter &printer, Operation *,
                            Attribute attr) {
  if (auto expr = dyn_cast<ExprAttr>(attr))
    printer << '"' << expr.getText() << '"';
  else
    printer << cast<IntegerAttr>(attr).getInt();
}

/// `true`/`false`, an integer (stored as i64) or a float (stored as f64); the
/// verifier checks that it fits the data's element type.
static ParseResult parseFill(OpAsmParser &parser, TypedAttr &attr) {
  Builder &builder = parser.getBuilder();
  for (bool value : {true, false})
    if (succeeded(parser.parseOptionalKeyword(value ? "true" : "false"))) {
      attr = builder.getBoolAttr(value);
      return success();
    }
  // The literal is followed by the op's `: types`, so it is read without a
  // type suffix: sign, then an integer or a float.
  bool negative = succeeded(parser.parseOptionalMinus());
  int64_t integer = 0;
  OptionalParseResult parsed = parser.parseOptionalInteger(integer);
  if (parsed.has_value()) {
    if (failed(*parsed))
      return failure();
    attr = builder.getI64IntegerAttr(negative ? -integer : integer);
    return success();
  }
  double value = 0;
  if (parser.parseFloat(value))
    return failure();
  attr = builder.getF64FloatAttr(negative ? -value : value);
  return success();
}

static void printFill(OpAsmPrinter &printer, Operation *, TypedAttr attr) {
  printer.printAttributeWithoutType(attr);
}

//===----------------------------------------------------------------------===//
// Verifier helpers
//===----------------------------------------------------------------------===//

namespace {
/// The static length of a 1-D tensor value, std::nullopt when dynamic.
std::optional<int64_t> staticLength(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  if (tensor.isDynamicDim(0))
    return std::nullopt;
  return tensor.getDimSize(0);
}
std::optional<int64_t> staticLength(Value value) {
  return staticLength(value.getType());
}

/// Resolves `attr` (when present) and checks `value >= minimum`.
FailureOr<std::optional<int64_t>>
resolveAtLeast(Operation *op, Attribute attr, StringRef name, int64_t minimum) {
  if (!attr)
    return std::optional<int64_t>();
  FailureOr<int64_t> value = resolveIntOrParam(op, attr, name);
  if (failed(value))
    return failure();
  if (*value < minimum)
    return op->emitOpError() << "'" << name << "' must be at least " << minimum
                             << ", got " << *value;
  // Lengths, offsets and counts are 32-bit on the device; bounding every
  // configuration value there also keeps the verifiers' arithmetic (cp * 2,
  // max_seqs + 1, target * cp) far from overflowing.
  if (*value > INT32_MAX)
    return op->emitOpError() << "'" << name << "' must be at most "
                             << INT32_MAX << ", got " << *value;
  return std::optional<int64_t>(*value);
}

/// cu_seqlens and cu_seqlens_padded describe the same sequences: equal length.
LogicalResult verifyCuPair(Operation *op, Value cu, Value cuPadded) {
  std::optional<int64_t> a = staticLength(cu), b = staticLength(cuPadded);
  if (a && b && *a != *b)
    return op->emitOpError() << "cu_seqlens has " << *a
                             << " entries but cu_seqlens_padded has " << *b;
  for (std::optional<int64_t> n : {a, b})
    if (n && *n < 1)
      return op->emitOpError()
             << "cumulative-offset arrays need at least one entry, got " << *n;
  return success();
}

/// A result whose length is a runtime value may be static only at `capacity`.
LogicalResult verifyCapacity(Operation *op, Value result, Attribute attr) {
  FailureOr<std::optional<int64_t>> capacity =
      resolveAtLeast(op, attr, "capacity", 0);
  if (failed(capacity))
    return failure();
  std::optional<int64_t> length = staticLength(result);
  if (*capacity && length && *length != **capacity)
    return op->emitOpError() << "result has static length " << *length
                             << " but 'capacity' is " << **capacity;
  return success();
}

/// A fill value must be representable in the data's element type.
LogicalResult verifyFill(Operation *op, TypedAttr fill, Type elementType,
                         StringRef name) {
  if (!fill)
    return success();
  bool fits;
  if (auto boolean = dyn_cast<BoolAttr>(fill)) {
    fits = elementType.isInteger(1);
  } else if (auto integer = dyn_cast<IntegerAttr>(fill)) {
    unsigned width =
        elementType.isIntOrIndex() ? elementType.getIntOrFloatBitWidth() : 0;
    // Integers fill integer data of any width that holds them, and floats.
    fits = isa<FloatType>(elementType) ||
           (width > 1 && llvm::isIntN(width, integer.getInt()));
  } else {
    fits = isa<FloatType>(elementType);
  }
  if (!fits)
    return op->emitOpError()
           << "'" << name << "' value " << fill
           << " does not fit the element type " << elementType;
  return success();
}

LogicalResult verifySameElementType(Operation *op, Type input, Type result) {
  Type a = cast<ShapedType>(input).getElementType();
  Type b = cast<ShapedType>(result).getElementType();
  if (a != b)
    return op->emitOpError() << "result element type " << b
                             << " differs from the input element type " << a;
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// Op verifiers
//===----------------------------------------------------------------------===//

/// S1's granularity of `op` through the reference (reference::padGranularity,
/// the one definition): its parameters must resolve.
static thdc::reference::Expected<int64_t> granularityOf(AlignLengthsOp op) {
  auto value = [&](Attribute attr, StringRef name) -> int64_t {
    return attr ? *resolveIntOrParam(op, attr, name) : 1;
  };
  return thdc::reference::padGranularity(
      value(op.getCp(), "cp"), value(op.getTp(), "tp"),
      op.getSequenceParallel(), value(op.getDpAttr(), "dp"),
      bool(op.getDpAttr()), value(op.getMultipleAttr(), "multiple"));
}

LogicalResult AlignLengthsOp::verify() {
  FailureOr<std::optional<int64_t>> cp = resolveAtLeast(*this, getCp(), "cp", 1);
  FailureOr<std::optional<int64_t>> tp = resolveAtLeast(*this, getTp(), "tp", 1);
  FailureOr<std::optional<int64_t>> dp =
      resolveAtLeast(*this, getDpAttr(), "dp", 1);
  FailureOr<std::optional<int64_t>> multiple =
      resolveAtLeast(*this, getMultipleAttr(), "multiple", 1);
  if (failed(cp) || failed(tp) || failed(dp) || failed(multiple))
    return failure();
  thdc::reference::Expected<int64_t> granularity = granularityOf(*this);
  if (!granularity)
    return emitOpError() << granularity.error();
  // Padded lengths and their offsets are 32-bit.
  if (*granularity > INT32_MAX)
    return emitOpError() << "alignment granularity " << *granularity
                         << " does not fit i32";
  return success();
}

int64_t AlignLengthsOp::getGranularity() { return *granularityOf(*this); }

LogicalResult GatherOp::verify() {
  std::optional<int64_t> ids = staticLength(getIds());
  std::optional<int64_t> out = staticLength(getResult());
  if (ids && out && *ids != *out)
    return emitOpError() << "result has " << *out << " entries but there are "
                         << *ids << " ids";
  std::optional<int64_t> values = staticLength(getValues());
  if (values && *values < 1)
    return emitOpError() << "gathers from an empty array";
  return success();
}

LogicalResult CuSeqlensOp::verify() {
  std::optional<int64_t> in = staticLength(getLengths());
  std::optional<int64_t> out = staticLength(getOffsets());
  if (in && out && *out != *in + 1)
    return emitOpError() << "result has " << *out
                         << " entries; expected one more than the " << *in
                         << " lengths";
  return success();
}

LogicalResult PackOp::verify() {
  if (failed(verifyCuPair(*this, getCuSeqlens(), getCuSeqlensPadded())) ||
      failed(verifySameElementType(*this, getPool().getType(),
                                   getPacked().getType())) ||
      failed(verifyFill(*this, getPad(), getPool().getType().getElementType(),
                        "pad")))
    return failure();
  return verifyCapacity(*this, getPacked(), getCapacityAttr());
}

LogicalResult MaxSeqlenOp::verify() {
  std::optional<int64_t> n = staticLength(getOffsets());
  if (n && *n < 1)
    return emitOpError() << "cumulative-offset arrays need at least one "
                            "entry, got 0";
  return success();
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

/// Exactly one of `target` and `alignment`, as the reference asserts.
static LogicalResult verifyTargetOrAlignment(Operation *op, Attribute target,
                                             Attribute alignment) {
  if (target && alignment)
    return op->emitOpError()
           << "expects exactly one of 'target' and 'alignment', got both";
  if (!target && !alignment)
    return op->emitOpError()
           << "expects exactly one of 'target' and 'alignment', got neither";
  return success();
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

LogicalResult PadTailMetadataOp::verify() {
  if (failed(verifyCuPair(*this, getCuSeqlens(), getCuSeqlensPadded())) ||
      failed(
          verifyTargetOrAlignment(*this, getTargetAttr(), getAlignmentAttr())))
    return failure();
  FailureOr<std::optional<int64_t>> cp =
      resolveAtLeast(*this, getCp(), "cp", 1);
  FailureOr<std::optional<int64_t>> target =
      resolveAtLeast(*this, getTargetAttr(), "target", 1);
  FailureOr<std::optional<int64_t>> alignment =
      resolveAtLeast(*this, getAlignmentAttr(), "alignment", 1);
  TailPolicy policy = getPolicy();
  const bool split = policy == TailPolicy::split_dummy_sequences;
  int64_t minSeqs =
      policy == TailPolicy::append_dummy_sequence || split ? 2 : 1;
  FailureOr<std::optional<int64_t>> maxSeqs =
      resolveAtLeast(*this, getMaxSeqsAttr(), "max_seqs", 1);
  FailureOr<std::optional<int64_t>> dummyLength =
      resolveAtLeast(*this, getDummyLengthAttr(), "dummy_length", 1);
  if (failed(cp) || failed(target) || failed(alignment) || failed(maxSeqs) ||
      failed(dummyLength))
    return failure();
  if (*maxSeqs && **maxSeqs < minSeqs)
    return emitOpError() << "'max_seqs' must be at least 2 with policy "
                         << stringifyTailPolicy(policy)
                         << " (one entry is reserved for the dummy sequence), "
                            "got "
                         << **maxSeqs;
  if (split && (!getMaxSeqsAttr() || !getDummyLengthAttr()))
    return emitOpError() << "policy split_dummy_sequences needs 'max_seqs' "
                            "(the dummies go in its spare entries) and "
                            "'dummy_length'";
  if (!split && getDummyLengthAttr())
    return emitOpError() << "'dummy_length' goes with policy "
                            "split_dummy_sequences, not "
                         << stringifyTailPolicy(policy);

  // Zigzag CP needs every offset, the tail's end included, divisible by 2*cp.
  int64_t ranks = **cp;
  bool tailIsSequence = policy != TailPolicy::none;
  if (getMode() == CpMode::zigzag && ranks > 1 && tailIsSequence) {
    if (*target && (**target * ranks) % (2 * ranks) != 0)
      return emitOpError() << "global target target*cp = " << **target * ranks
                           << " is not divisible by 2*cp = " << 2 * ranks
                           << " under zigzag CP with policy "
                           << stringifyTailPolicy(policy);
    if (split && *dummyLength && **dummyLength % (2 * ranks) != 0)
      return emitOpError() << "dummy_length " << **dummyLength
                           << " is not divisible by 2*cp = " << 2 * ranks
                           << " under zigzag CP";
    if (*alignment && **alignment % 2 != 0)
      return emitOpError() << "alignment " << **alignment
                           << " is odd: under zigzag CP with cp = " << ranks
                           << " the padded tail would not be divisible by "
                              "2*cp = "
                           << 2 * ranks;
  }

  std::optional<int64_t> entries = staticLength(getCuSeqlens());
  for (Value out : {getCuSeqlensOut(), getCuSeqlensPaddedOut()}) {
    std::optional<int64_t> outEntries = staticLength(out);
    if (*maxSeqs && outEntries && *outEntries != **maxSeqs + 1)
      return emitOpError() << "results must have max_seqs + 1 = "
                           << **maxSeqs + 1 << " entries, got " << *outEntries;
  }
  if (*maxSeqs && entries && *entries > **maxSeqs + 1)
    return emitOpError() << "cu_seqlens has " << *entries
                         << " entries, more than max_seqs + 1 = "
                         << **maxSeqs + 1;
  if (!*maxSeqs && entries) {
    // Without static padding the arrays keep their length, plus the dummy.
    int64_t extra = policy == TailPolicy::append_dummy_sequence ? 1 : 0;
    for (Value out : {getCuSeqlensOut(), getCuSeqlensPaddedOut()}) {
      std::optional<int64_t> outEntries = staticLength(out);
      if (outEntries &&
          (*outEntries < *entries || *outEntries > *entries + extra))
        return emitOpError()
               << "result has " << *outEntries << " entries; expected "
               << (extra ? "between " : "") << *entries
               << (extra ? " and " + std::to_string(*entries + 1)
                         : std::string())
               << " without 'max_seqs'";
    }
  }
  return success();
}

LogicalResult PadCuSeqlensOp::verify() {
  FailureOr<std::optional<int64_t>> entries =
      resolveAtLeast(*this, getEntries(), "entries", 1);
  if (failed(entries))
    return failure();
  std::optional<int64_t> in = staticLength(getOffsets());
  std::optional<int64_t> out = staticLength(getPadded());
  if (in && *in > **entries)
    return emitOpError() << "input has " << *in << " entries, more than the "
                         << **entries
                         << " requested; num_seqs exceeds the capacity";
  if (out && *out != **entries)
    return emitOpError() << "result has " << *out
                         << " entries but 'entries' is " << **entries;
  return success();
}

LogicalResult DroppedOp::verify() {
  std::optional<int64_t> entries = staticLength(getCuSeqlens());
  if (entries && *entries < 1)
    return emitOpError() << "cumulative-offset arrays need at least one "
                            "entry, got 0";
  return success();
}

LogicalResult ValidateOp::verify() {
  if (failed(verifyCuPair(*this, getCuSeqlens(), getCuSeqlensPadded())))
    return failure();
  FailureOr<std::optional<int64_t>> cp = resolveAtLeast(*this, getCp(), "cp", 1);
  if (failed(cp))
    return failure();
  FailureOr<std::optional<int64_t>> maxTokens =
      resolveAtLeast(*this, getMaxTokens(), "max_tokens", 0);
  if (failed(maxTokens))
    return failure();
  // Contiguous CP checks no offset: it cuts the buffer padded to max_tokens
  // rows into cp equal ranges, so that total is what must divide.
  if (getMode() == CpMode::contiguous && *cp && *maxTokens &&
      **maxTokens % **cp != 0)
    return emitOpError() << "'max_tokens' is " << **maxTokens
                         << ", not a multiple of cp = " << **cp
                         << ": contiguous CP gives every rank max_tokens / cp "
                            "rows of the padded buffer";
  FailureOr<std::optional<int64_t>> maxSeqs =
      resolveAtLeast(*this, getMaxSeqs(), "max_seqs", 0);
  if (failed(maxSeqs))
    return failure();
  if (getTailSlot() && *maxSeqs && **maxSeqs == 0)
    return emitOpError("'max_seqs' is 0 with 'tail_slot': a microbatch with "
                       "a tail keeps one of the max_seqs slots for its dummy "
                       "sequence, so there must be one");
  std::optional<int64_t> entries = staticLength(getCuSeqlens());
  if (entries && *maxSeqs && **maxSeqs >= *entries)
    return emitOpError() << "'max_seqs' is " << **maxSeqs
                         << " but the cu arrays hold only " << *entries
                         << " entries (at most " << *entries - 1
                         << " sequences)";
  bool samples = getSampleOffsets() && getSampleLengths() && getSampleIds();
  if (!samples && (getSampleOffsets() || getSampleLengths() || getSampleIds()))
    return emitOpError("'samples' takes the sample offsets, the sample "
                       "lengths and the chosen sample ids, all three");
  if (samples != bool(getPoolRowsAttr()))
    return emitOpError("'samples' and 'pool_rows' go together: the pool's "
                       "rows bound the chosen samples' rows");
  if (samples) {
    if (failed(resolveAtLeast(*this, getPoolRowsAttr(), "pool_rows", 1)))
      return failure();
    std::optional<int64_t> offsets = staticLength(getSampleOffsets());
    std::optional<int64_t> lengths = staticLength(getSampleLengths());
    if (offsets && lengths && *offsets != *lengths)
      return emitOpError() << "has " << *offsets << " sample offsets but "
                           << *lengths << " sample lengths";
  }
  return success();
}

LogicalResult FusedOp::verify() {
  // Runs before the region's terminator trait is checked: the body may end
  // in anything (or be empty) here.
  Block &body = getBody().front();
  auto yield = body.empty() ? YieldOp() : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError() << "must end its body with 'thd.yield', got "
                         << (body.empty() ? std::string("an empty body")
                                          : "'" +
                                                body.back()
                                                    .getName()
                                                    .getStringRef()
                                                    .str() +
                                                "'");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values of types " << yield.getValues().getTypes()
                         << " but has results of types " << getResultTypes();
  for (Operation &op : getBody().front().without_terminator()) {
    bool isConstant = op.hasTrait<OpTrait::ConstantLike>();
    if ((!isa<THDDialect>(op.getDialect()) && !isConstant) || isa<FusedOp>(op))
      return op.emitOpError() << "cannot run inside a fused kernel: only "
                                 "thd steps and constants can";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// StepOpInterface: static result lengths and result kinds
//
// Called by thd-force-static-shapes once the operands are static and the
// parameters bound (integer attributes).
//===----------------------------------------------------------------------===//

namespace {
int64_t boundValue(Attribute attr) { return cast<IntegerAttr>(attr).getInt(); }

int64_t staticLengthOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getDimSize(0);
}

using Lengths = FailureOr<SmallVector<int64_t>>;

Lengths oneLength(int64_t length) { return SmallVector<int64_t>{length}; }

/// The length of a per-token result bounded by an optional 'capacity'.
Lengths capacityLength(Operation *op, Attribute capacity) {
  if (!capacity)
    return op->emitOpError()
           << "cannot be made static: its result has "
              "cu_seqlens_padded[num_seqs] rows, a value known only on the "
              "device; bound it with a 'capacity' (for example capacity "
              "\"C*cp\")";
  return oneLength(boundValue(capacity));
}
} // namespace

Lengths AlignLengthsOp::inferStaticLengths() {
  return oneLength(staticLengthOf(getValidLens()));
}
ResultKind AlignLengthsOp::getResultKind(unsigned) {
  return ResultKind::Entries;
}

Lengths GatherOp::inferStaticLengths() {
  return oneLength(staticLengthOf(getIds()));
}
ResultKind GatherOp::getResultKind(unsigned) { return ResultKind::Entries; }

Lengths CuSeqlensOp::inferStaticLengths() {
  return oneLength(staticLengthOf(getLengths()) + 1);
}
ResultKind CuSeqlensOp::getResultKind(unsigned) { return ResultKind::Entries; }

Lengths PackOp::inferStaticLengths() {
  return capacityLength(*this, getCapacityAttr());
}
ResultKind PackOp::getResultKind(unsigned) { return ResultKind::Rows; }

Lengths MaxSeqlenOp::inferStaticLengths() { return oneLength(1); }
ResultKind MaxSeqlenOp::getResultKind(unsigned) { return ResultKind::Scalar; }

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

Lengths PadTailMetadataOp::inferStaticLengths() {
  if (!getMaxSeqsAttr())
    return emitOpError()
           << "cannot be made static: without 'max_seqs' the number of "
              "entries depends on the data (a dummy sequence may be "
              "appended); set max_seqs (graph mode uses N)";
  int64_t maxSeqs = boundValue(getMaxSeqsAttr());
  if (maxSeqs < 0 || maxSeqs >= kMaxStaticLength)
    return emitOpError()
           << "cannot be made static: its cu_seqlens outputs would have "
           << maxSeqs << " + 1 entries (max_seqs + 1); thdc needs 1 to "
           << kMaxStaticLength;
  int64_t entries = maxSeqs + 1;
  return SmallVector<int64_t>{entries, entries, 1, 1};
}
ResultKind PadTailMetadataOp::getResultKind(unsigned index) {
  // cu_seqlens_out, cu_seqlens_padded_out, then max_seqlen_out, num_seqs_out.
  return index < 2 ? ResultKind::Entries : ResultKind::Scalar;
}

Lengths PadCuSeqlensOp::inferStaticLengths() {
  return oneLength(boundValue(getEntries()));
}
ResultKind PadCuSeqlensOp::getResultKind(unsigned) {
  return ResultKind::Entries;
}

Lengths ValidateOp::inferStaticLengths() {
  return SmallVector<int64_t>{1, 1};
}
ResultKind ValidateOp::getResultKind(unsigned) { return ResultKind::Scalar; }

Lengths DroppedOp::inferStaticLengths() { return SmallVector<int64_t>{1, 1}; }
ResultKind DroppedOp::getResultKind(unsigned) { return ResultKind::Scalar; }

ValueRange FusedOp::getYieldedValues() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues();
}

Lengths FusedOp::inferStaticLengths() {
  SmallVector<int64_t> lengths;
  for (Value value : getYieldedValues())
    lengths.push_back(staticLengthOf(value));
  return lengths;
}
ResultKind FusedOp::getResultKind(unsigned index) {
  Value yielded = getYieldedValues()[index];
  if (auto step = yielded.getDefiningOp<StepOpInterface>())
    return step.getResultKind(cast<OpResult>(yielded).getResultNumber());
  return ResultKind::Rows; // a kernel input passed through
}

#include "dialect/THDInterfaces.cpp.inc"

TypedAttr mlir::thd::fillConstant(TypedAttr fill, Type elementType) {
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    double value = 0;
    if (auto f = dyn_cast_or_null<FloatAttr>(fill))
      value = f.getValueAsDouble();
    else if (auto i = dyn_cast_or_null<IntegerAttr>(fill))
      value = double(i.getInt());
    return FloatAttr::get(floatType, value);
  }
  int64_t value = 0;
  if (auto boolean = dyn_cast_or_null<BoolAttr>(fill))
    value = boolean.getValue();
  else if (auto i = dyn_cast_or_null<IntegerAttr>(fill))
    value = i.getInt();
  return IntegerAttr::get(elementType, value);
}

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

#define GET_OP_CLASSES
#include "dialect/THDOps.cpp.inc"
