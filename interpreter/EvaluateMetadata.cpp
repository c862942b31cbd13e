//===- EvaluateMetadata.cpp - steps that compute scalars and metadata -----===//
//
// The evaluate overloads of the steps computed once per kernel: the longest
// sequence (S4, S13), the tail metadata of a padded microbatch (S10), the
// fault bits and checked count of a microbatch, what an invalid microbatch
// loses, and the chunk metadata of linear attention (S15). Sections are
// those of docs/semantics.md.
//
//===----------------------------------------------------------------------===//

#include "interpreter/Evaluate.h"

#include "reference/Reference.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::thd;
namespace ref = thdc::reference;

namespace thdc::interpreter {

LogicalResult evaluate(MaxSeqlenOp op, Environment &env) {
  FailureOr<Buffer> result = resultBuffer(op, op.getMaxSeqlen());
  if (failed(result))
    return failure();
  const Buffer &offsets = env[op.getOffsets()];
  int64_t n = countOf(env, op.getNumSeqs(), offsets.size());
  result->set<int32_t>(0, ref::maxSeqlenFromCu(meaningful(offsets, n)));
  env.bind(op.getMaxSeqlen(), std::move(*result));
  return success();
}

LogicalResult evaluate(PadTailMetadataOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<Buffer> cuOut = resultBuffer(op, op.getCuSeqlensOut());
  FailureOr<Buffer> cupOut = resultBuffer(op, op.getCuSeqlensPaddedOut());
  FailureOr<Buffer> maxOut = resultBuffer(op, op.getMaxSeqlenOut());
  FailureOr<Buffer> countOut = resultBuffer(op, op.getNumSeqsOut());
  if (failed(cp) || failed(cuOut) || failed(cupOut) || failed(maxOut) ||
      failed(countOut))
    return failure();
  ref::TailPaddingConfig config;
  config.cp = *cp;
  config.mode = referenceMode(op.getMode());
  auto optionalValue = [&](Attribute attr, StringRef name,
                           std::optional<int64_t> &into) {
    if (!attr)
      return success();
    FailureOr<int64_t> value = intValue(op, attr, name);
    if (failed(value))
      return failure();
    into = *value;
    return success();
  };
  if (failed(optionalValue(op.getTargetAttr(), "target", config.target)) ||
      failed(optionalValue(op.getAlignmentAttr(), "alignment",
                           config.alignment)) ||
      failed(optionalValue(op.getMaxSeqsAttr(), "max_seqs", config.maxNumSeqs)))
    return failure();
  switch (op.getPolicy()) {
  case TailPolicy::append_dummy_sequence:
    config.policy = ref::TailPolicy::AppendDummySequence;
    break;
  case TailPolicy::extend_last:
    config.policy = ref::TailPolicy::ExtendLast;
    break;
  case TailPolicy::none:
    config.policy = ref::TailPolicy::None;
    break;
  case TailPolicy::split_dummy_sequences:
    config.policy = ref::TailPolicy::SplitDummySequences;
    if (failed(optionalValue(op.getDummyLengthAttr(), "dummy_length",
                             config.dummyLength)))
      return failure();
    break;
  }
  const Buffer &cuBuffer = env[op.getCuSeqlens()];
  const Buffer &cupBuffer = env[op.getCuSeqlensPadded()];
  int64_t n = countOf(env, op.getNumSeqs(), cuBuffer.size());
  if (failed(checkEntries(op, cupBuffer, n, "cu_seqlens_padded")))
    return failure();
  std::vector<int32_t> cu = meaningful(cuBuffer, n);
  std::vector<int32_t> cup = meaningful(cupBuffer, n);
  // extend_last with no sequence (an empty microbatch, or one thd.validate
  // rejected) leaves the tail uncovered, as the op defines; the reference
  // refuses it.
  if (config.policy == ref::TailPolicy::ExtendLast && n == 0)
    config.policy = ref::TailPolicy::None;
  int64_t globalLength = std::max<int64_t>(cup.back(), 0);
  Result<ref::TailPaddingResult> tail = ref::padTailMetadata(
      cu, cup, scalarOf(env[op.getMaxSeqlen()]), globalLength / *cp, config);
  if (!tail)
    return referenceError(op, tail.status().message());
  if (int64_t(tail->cuSeqlens.size()) > cuOut->size() ||
      int64_t(tail->cuSeqlensPadded.size()) > cupOut->size())
    return referenceError(op, "the result has " +
                                  std::to_string(tail->cuSeqlens.size()) +
                                  " entries, more than its static " +
                                  std::to_string(cuOut->size()));
  // Entries past the meaningful ones repeat the last one.
  cuOut->assign(tail->cuSeqlens, uint32_t(tail->cuSeqlens.back()));
  cupOut->assign(tail->cuSeqlensPadded, uint32_t(tail->cuSeqlensPadded.back()));
  maxOut->set<int32_t>(0, tail->maxSeqlen);
  countOut->set<int32_t>(0, int32_t(tail->numSeqs));
  env.bind(op.getCuSeqlensOut(), std::move(*cuOut));
  env.bind(op.getCuSeqlensPaddedOut(), std::move(*cupOut));
  env.bind(op.getMaxSeqlenOut(), std::move(*maxOut));
  env.bind(op.getNumSeqsOut(), std::move(*countOut));
  return success();
}

LogicalResult evaluate(ValidateOp op, Environment &env) {
  FailureOr<int64_t> cp = intValue(op, op.getCp(), "cp");
  FailureOr<int64_t> maxTokens = intValue(op, op.getMaxTokens(), "max_tokens");
  FailureOr<int64_t> maxSeqs = intValue(op, op.getMaxSeqs(), "max_seqs");
  FailureOr<Buffer> status = resultBuffer(op, op.getStatus());
  FailureOr<Buffer> checked = resultBuffer(op, op.getCheckedNumSeqs());
  if (failed(cp) || failed(maxTokens) || failed(maxSeqs) || failed(status) ||
      failed(checked))
    return failure();
  const Buffer &cuBuffer = env[op.getCuSeqlens()];
  const Buffer &cupBuffer = env[op.getCuSeqlensPadded()];
  int64_t last = cuBuffer.size() - 1;
  if (last < 0 || cupBuffer.size() != cuBuffer.size())
    return referenceError(op, "cu_seqlens has " +
                                  std::to_string(cuBuffer.size()) +
                                  " entries and cu_seqlens_padded " +
                                  std::to_string(cupBuffer.size()) +
                                  "; both need the same number, at least 1");
  std::vector<int32_t> cu = int32Values(cuBuffer), cup = int32Values(cupBuffer);
  int64_t raw = op.getNumSeqs() ? scalarOf(env[op.getNumSeqs()]) : last;
  int64_t rank = scalarOf(env[op.getCpRank()]);
  // Zigzag cuts every sequence into 2*cp chunks; contiguous CP cuts only
  // the buffer padded to max_tokens rows (checked by the verifier).
  int64_t multiple = *cp > 1 && op.getMode() == CpMode::zigzag ? 2 * *cp : 1;
  int32_t bits =
      ref::numSeqsStatus(cup, raw, *maxSeqs, *maxTokens, op.getTailSlot());
  if (rank < 0 || rank >= *cp)
    bits |= ref::StatusCpRankOutOfRange;
  // The other checks read the entries that num_seqs, clamped, makes
  // meaningful.
  size_t n = size_t(std::clamp<int64_t>(raw, 0, last));
  if (cu[0] != 0 || cup[0] != 0)
    bits |= ref::StatusNotMonotonic;
  if (cup[n] > *maxTokens)
    bits |= ref::StatusTotalExceedsCapacity;
  if (op.getRows())
    bits |= ref::rowsStatus(cup, int64_t(n), scalarOf(env[op.getRows()]));
  for (size_t i = 0; i <= n; ++i)
    if (multiple > 1 && cup[i] % multiple != 0)
      bits |= ref::StatusNotDivisibleBy2Cp;
  for (size_t i = 1; i <= n; ++i) {
    if (cu[i] < cu[i - 1] || cup[i] < cup[i - 1])
      bits |= ref::StatusNotMonotonic;
    if (int64_t(cu[i]) - cu[i - 1] > int64_t(cup[i]) - cup[i - 1])
      bits |= ref::StatusValidExceedsPadded;
  }
  if (op.getSampleIds()) {
    FailureOr<int64_t> poolRows =
        intValue(op, op.getPoolRowsAttr(), "pool_rows");
    if (failed(poolRows))
      return failure();
    bits |= ref::sampleStatus(int32Values(env[op.getSampleOffsets()]),
                              int32Values(env[op.getSampleLengths()]),
                              int32Values(env[op.getSampleIds()]), int64_t(n),
                              *poolRows);
  }
  status->set<int32_t>(0, bits);
  checked->set<int32_t>(0, bits == 0 ? int32_t(raw) : 0);
  env.bind(op.getStatus(), std::move(*status));
  env.bind(op.getCheckedNumSeqs(), std::move(*checked));
  return success();
}

LogicalResult evaluate(DroppedOp op, Environment &env) {
  FailureOr<Buffer> seqs = resultBuffer(op, op.getDroppedSeqs());
  FailureOr<Buffer> tokens = resultBuffer(op, op.getDroppedTokens());
  if (failed(seqs) || failed(tokens))
    return failure();
  Result<ref::DroppedCounts> dropped = ref::droppedCounts(
      scalarOf(env[op.getStatus()]), int32Values(env[op.getCuSeqlens()]),
      scalarOf(env[op.getNumSeqs()]));
  if (!dropped)
    return referenceError(op, dropped.status().message());
  seqs->set<int32_t>(0, dropped->sequences);
  tokens->set<int32_t>(0, dropped->tokens);
  env.bind(op.getDroppedSeqs(), std::move(*seqs));
  env.bind(op.getDroppedTokens(), std::move(*tokens));
  return success();
}

LogicalResult evaluate(LinearChunksOp op, Environment &env) {
  FailureOr<int64_t> chunkSize = intValue(op, op.getChunkSize(), "chunk_size");
  FailureOr<Buffer> indices = resultBuffer(op, op.getChunkIndices());
  FailureOr<Buffer> offsets = resultBuffer(op, op.getChunkOffsets());
  FailureOr<Buffer> count = resultBuffer(op, op.getChunkCount());
  if (failed(chunkSize) || failed(indices) || failed(offsets) || failed(count))
    return failure();
  // Every entry is meaningful; the reference refuses offsets that decrease
  // or hold more chunks than chunk_indices' rows.
  const Buffer &cu = env[op.getCuSeqlensPadded()];
  Result<ref::LinearChunks> chunks = ref::linearChunks(
      meaningful(cu, cu.size() - 1), *chunkSize, indices->size() / 2);
  if (!chunks)
    return referenceError(op, chunks.status().message());
  indices->assign(chunks->chunkIndices, 0);
  offsets->assign(chunks->chunkOffsets, 0);
  count->set<int32_t>(0, chunks->chunkCount);
  env.bind(op.getChunkIndices(), std::move(*indices));
  env.bind(op.getChunkOffsets(), std::move(*offsets));
  env.bind(op.getChunkCount(), std::move(*count));
  return success();
}

LogicalResult evaluateBlock(Block &block, Environment &env);

} // namespace thdc::interpreter
