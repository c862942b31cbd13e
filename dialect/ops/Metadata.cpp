//===- Metadata.cpp - steps that compute scalars and tail metadata --------===//
//
// The verifiers and StepOpInterface methods of the steps computed once per
// kernel: the longest sequence (S4, S13), the fault bits and checked count
// of a microbatch, what an invalid microbatch loses, the tail metadata of a
// padded microbatch (S10) and the chunk metadata of linear attention (S15).
// Sections are those of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "dialect/ops/Common.h"

#include "reference/LinearChunks.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::thd;

//===----------------------------------------------------------------------===//
// Op verifiers
//===----------------------------------------------------------------------===//

LogicalResult MaxSeqlenOp::verify() {
  std::optional<int64_t> n = staticLength(getOffsets());
  if (n && *n < 1)
    return emitOpError() << "cumulative-offset arrays need at least one "
                            "entry, got 0";
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

/// S15's NT (reference::linearChunkCapacity) once the parameters resolve
/// and the offsets are static; std::nullopt before.
static FailureOr<std::optional<int64_t>> chunkCapacity(LinearChunksOp op) {
  FailureOr<std::optional<int64_t>> chunkSize =
      resolveAtLeast(op, op.getChunkSize(), "chunk_size", 1);
  FailureOr<std::optional<int64_t>> rows =
      resolveAtLeast(op, op.getRows(), "rows", 0);
  if (failed(chunkSize) || failed(rows))
    return failure();
  if (!llvm::isPowerOf2_64(uint64_t(**chunkSize)))
    return op.emitOpError() << "'chunk_size' must be a power of two, got "
                            << **chunkSize;
  std::optional<int64_t> entries = staticLength(op.getCuSeqlensPadded());
  if (entries && *entries < 2)
    return op.emitOpError() << "needs at least 2 cu_seqlens_padded entries "
                               "(one sequence), got "
                            << *entries;
  if (!entries)
    return std::optional<int64_t>();
  int64_t capacity = thdc::reference::linearChunkCapacity(
      **rows, *entries - 1, **chunkSize);
  // Two i32 entries a chunk, addressed by i32 offsets.
  if (2 * capacity > kMaxStaticLength)
    return op.emitOpError() << "has ceil(rows / chunk_size) + N = " << capacity
                            << " chunks, more than i32 offsets address as "
                               "two entries each ("
                            << kMaxStaticLength << ")";
  return std::optional<int64_t>(capacity);
}

LogicalResult LinearChunksOp::verify() {
  FailureOr<std::optional<int64_t>> capacity = chunkCapacity(*this);
  if (failed(capacity))
    return failure();
  std::optional<int64_t> entries = staticLength(getCuSeqlensPadded());
  std::optional<int64_t> offsets = staticLength(getChunkOffsets());
  if (entries && offsets && *offsets != *entries)
    return emitOpError() << "chunk_offsets has " << *offsets
                         << " entries; expected the " << *entries
                         << " of cu_seqlens_padded";
  std::optional<int64_t> indices = staticLength(getChunkIndices());
  if (*capacity && indices && *indices != 2 * **capacity)
    return emitOpError() << "chunk_indices has " << *indices
                         << " entries; expected 2 * (ceil(rows / chunk_size) "
                            "+ N) = "
                         << 2 * **capacity;
  return success();
}

//===----------------------------------------------------------------------===//
// StepOpInterface: static result lengths and result kinds
//
// Called by thd-force-static-shapes once the operands are static and the
// parameters bound (integer attributes).
//===----------------------------------------------------------------------===//

Lengths MaxSeqlenOp::inferStaticLengths() { return oneLength(1); }
ResultKind MaxSeqlenOp::getResultKind(unsigned) { return ResultKind::Scalar; }

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

Lengths ValidateOp::inferStaticLengths() {
  return SmallVector<int64_t>{1, 1};
}
ResultKind ValidateOp::getResultKind(unsigned) { return ResultKind::Scalar; }

Lengths DroppedOp::inferStaticLengths() { return SmallVector<int64_t>{1, 1}; }
ResultKind DroppedOp::getResultKind(unsigned) { return ResultKind::Scalar; }

Lengths LinearChunksOp::inferStaticLengths() {
  // The verifier checks the capacity only once cu_seqlens_padded is static,
  // which it may first be here: a capacity past i32 fails now, with
  // chunkCapacity's diagnostic.
  FailureOr<std::optional<int64_t>> capacity = chunkCapacity(*this);
  if (failed(capacity))
    return failure();
  if (!*capacity)
    return emitOpError() << "cannot be made static: cu_seqlens_padded has no "
                            "static length";
  int64_t entries = staticLengthOf(getCuSeqlensPadded());
  return SmallVector<int64_t>{2 * **capacity, entries, 1};
}
ResultKind LinearChunksOp::getResultKind(unsigned index) {
  // chunk_indices and chunk_offsets, then chunk_count.
  return index < 2 ? ResultKind::Entries : ResultKind::Scalar;
}
