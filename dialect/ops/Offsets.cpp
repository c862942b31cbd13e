//===- Offsets.cpp - steps that compute offset and length arrays ----------===//
//
// The verifiers and StepOpInterface methods of the steps whose results are
// offset or length arrays: aligned lengths (S1), the chosen samples' lengths
// (S3/S4), their cumulative offsets (S4) and a cu array padded to a static
// number of entries (S10). Sections are those of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "dialect/ops/Common.h"

#include "reference/Alignment.h"

using namespace mlir;
using namespace mlir::thd;

//===----------------------------------------------------------------------===//
// Op verifiers
//===----------------------------------------------------------------------===//

/// S1's granularity of `op` through the reference (reference::padGranularity,
/// the one definition): its parameters must resolve.
static thdc::Result<int64_t> granularityOf(AlignLengthsOp op) {
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
  thdc::Result<int64_t> granularity = granularityOf(*this);
  if (!granularity)
    return emitOpError() << granularity.status().message();
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

//===----------------------------------------------------------------------===//
// StepOpInterface: static result lengths and result kinds
//
// Called by thd-force-static-shapes once the operands are static and the
// parameters bound (integer attributes).
//===----------------------------------------------------------------------===//

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

Lengths PadCuSeqlensOp::inferStaticLengths() {
  return oneLength(boundValue(getEntries()));
}
ResultKind PadCuSeqlensOp::getResultKind(unsigned) {
  return ResultKind::Entries;
}
