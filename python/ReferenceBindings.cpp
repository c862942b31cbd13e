//===- ReferenceBindings.cpp - the reference semantics, for tests ---------===//
//
// thdc._thdc.reference: the reference steps (reference/Reference.h) on NumPy
// arrays, which the tests compare the kernels against; and describe_status.
//
//===----------------------------------------------------------------------===//

#include "python/Arguments.h"
#include "python/Bindings.h"
#include "reference/Reference.h"
#include "reference/StatusBits.h"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <limits>

using namespace thdc;
using namespace thdc::python;

namespace {

/// A reference step's outputs (the graph step's or the pack step's) as a
/// dict of NumPy arrays by output name.
/// The metadata outputs of a reference step (of a GraphStepOutput or a
/// GraphStepMetadata) into `result`, by output name.
template <typename Out> void metadataOutputs(nb::dict &result, const Out &out) {
  result["cu_seqlens_padded"] = toNumpy(out.cuSeqlensPadded);
  result["cu_seqlens"] = toNumpy(out.cuSeqlens);
  result["max_seqlen"] = out.maxSeqlen;
  result["status"] = out.status;
}

nb::dict stepOutputs(const reference::GraphStepOutput &out) {
  nb::dict result;
  result["tokens"] = toNumpy(out.tokens);
  result["labels"] = toNumpy(out.labels);
  result["position_ids"] = toNumpy(out.positionIds);
  result["loss_mask"] = toNumpy(out.lossMask);
  result["padding_mask"] = toNumpy(out.paddingMask);
  metadataOutputs(result, out);
  return result;
}

/// The sizes C, cp and N of a reference step: each within int32 and C*cp
/// too (checked before any product or allocation: the steps abort, or
/// allocate C*cp rows, on sizes that wrap).
struct StepSizes {
  int64_t C, cp, N;
};
StepSizes stepSizes(const char *function, IntArg C, IntArg cp, IntArg N) {
  StepSizes sizes{integerArgument(C.object, "C"),
                  integerArgument(cp.object, "cp"),
                  integerArgument(N.object, "N")};
  if (sizes.C >= 1 && sizes.cp >= 1 && sizes.C * sizes.cp > kInt32Range.max)
    throw nb::value_error(
        (std::string(function) + ": C*cp = " + std::to_string(sizes.C) + "*" +
         std::to_string(sizes.cp) + " = " + std::to_string(sizes.C * sizes.cp) +
         " is outside the int32 range")
            .c_str());
  return sizes;
}

/// The metadata of a graph step's input: the cu arrays, num_seqs, cp_rank
/// and rows_given (None: not checked).
void metadataInput(reference::GraphStepInput &input, ArrayArg cuSeqlens,
                   ArrayArg cuSeqlensPadded, IntArg numSeqs, IntArg cpRank,
                   nb::handle rowsGiven) {
  input.cuSeqlens = hostVector<int32_t>(cuSeqlens, "cu_seqlens");
  input.cuSeqlensPadded =
      hostVector<int32_t>(cuSeqlensPadded, "cu_seqlens_padded");
  input.numSeqs = int32_t(integerArgument(numSeqs.object, "num_seqs"));
  input.cpRank = int32_t(integerArgument(cpRank.object, "cp_rank"));
  if (!rowsGiven.is_none())
    input.rowsGiven = integerArgument(rowsGiven, "rows_given", kInt64Range);
}

/// dummy_length, None or >= 1 and a multiple of 2*cp when cp > 1 (the
/// step's precondition), as a ValueError of `function` otherwise.
std::optional<int64_t> dummyLengthArgument(const char *function,
                                           nb::handle dummyLengthArg,
                                           int64_t cp) {
  const std::optional<int64_t> dummyLength =
      optionalIntegerArgument(dummyLengthArg, "dummy_length");
  const int64_t granule = cp > 1 ? 2 * cp : 1;
  if (dummyLength && (*dummyLength < 1 || *dummyLength % granule))
    throw nb::value_error((std::string(function) +
                           ": dummy_length = " + std::to_string(*dummyLength) +
                           " must be >= 1 and a multiple of " +
                           std::to_string(granule))
                              .c_str());
  return dummyLength;
}

nb::dict referenceGraphStep(ArrayArg tokens, ArrayArg labels,
                            ArrayArg positionIds, ArrayArg lossMask,
                            ArrayArg cuSeqlens, ArrayArg cuSeqlensPadded,
                            IntArg numSeqs, IntArg cpRank, IntArg C_,
                            IntArg cp_, IntArg N_, nb::handle rowsGiven,
                            nb::handle dummyLengthArg) {
  const auto [C, cp, N] = stepSizes("graph_step", C_, cp_, N_);
  reference::GraphStepInput input;
  input.tokens = hostVector<int64_t>(tokens, "tokens");
  input.labels = hostVector<int64_t>(labels, "labels");
  input.positionIds = hostVector<int64_t>(positionIds, "position_ids");
  input.lossMask = hostVector<float>(lossMask, "loss_mask");
  metadataInput(input, cuSeqlens, cuSeqlensPadded, numSeqs, cpRank, rowsGiven);
  // megatronGraphStep aborts on broken preconditions: the reference states
  // them once, and they become a ValueError here.
  if (Status problem = reference::checkGraphStepPreconditions(input, C, cp, N);
      !problem)
    throw nb::value_error(("graph_step: " + problem.message()).c_str());
  const std::optional<int64_t> dummyLength =
      dummyLengthArgument("graph_step", dummyLengthArg, cp);
  reference::GraphStepOutput out;
  {
    nb::gil_scoped_release release;
    out = reference::megatronGraphStep(input, C, cp, N, dummyLength);
  }
  return stepOutputs(out);
}

nb::dict referenceGraphStepOffsets(ArrayArg cuSeqlens, ArrayArg cuSeqlensPadded,
                                   IntArg numSeqs, IntArg cpRank, IntArg C_,
                                   IntArg cp_, IntArg N_, nb::handle rowsGiven,
                                   nb::handle dummyLengthArg,
                                   const std::string &cpMode) {
  auto [C, cp, N] = stepSizes("graph_step_offsets", C_, cp_, N_);
  if (cpMode != "zigzag" && cpMode != "contiguous")
    throw nb::value_error(("graph_step_offsets: cp_mode must be 'zigzag' or "
                           "'contiguous'; got '" +
                           cpMode + "'")
                              .c_str());
  reference::GraphStepInput input;
  metadataInput(input, cuSeqlens, cuSeqlensPadded, numSeqs, cpRank, rowsGiven);
  // Contiguous CP (docs/semantics.md S7) pads the whole buffer as one rank
  // would, then cuts it: its metadata is the cp = 1 step's over C*cp rows,
  // whose checks are contiguous CP's (no offset need be a multiple of 2*cp).
  if (cpMode == "contiguous" && cp > 1) {
    if (input.cpRank >= 0 && input.cpRank < cp)
      input.cpRank = 0;
    C *= cp;
    cp = 1;
  }
  if (Status problem =
          reference::checkGraphStepMetadataPreconditions(input, C, cp, N);
      !problem)
    throw nb::value_error(("graph_step_offsets: " + problem.message()).c_str());
  const std::optional<int64_t> dummyLength =
      dummyLengthArgument("graph_step_offsets", dummyLengthArg, cp);
  const reference::GraphStepMetadata out =
      reference::graphStepMetadata(input, C, cp, N, dummyLength);
  nb::dict result;
  metadataOutputs(result, out);
  return result;
}

nb::object referenceSeqIdx(ArrayArg cuSeqlensArg, IntArg totalTokensArg) {
  std::vector<int32_t> cuSeqlens =
      hostVector<int32_t>(cuSeqlensArg, "cu_seqlens");
  const int64_t totalTokens =
      integerArgument(totalTokensArg.object, "total_tokens");
  // seqIdx writes a row per token it covers and checks the count after:
  // count first, so that offsets spanning billions of rows are refused
  // before they are allocated.
  int64_t covered = 0, previous = cuSeqlens.empty() ? 0 : cuSeqlens[0];
  for (size_t i = 1; i <= cuSeqlens.size() && !cuSeqlens.empty(); ++i) {
    int64_t bound = i < cuSeqlens.size() ? cuSeqlens[i] : totalTokens;
    covered += std::max<int64_t>(0, bound - previous);
    previous = bound;
  }
  if (!cuSeqlens.empty() && covered != totalTokens)
    throw nb::value_error(("seq_idx: cu_seqlens with total_tokens = " +
                           std::to_string(totalTokens) + " covers " +
                           std::to_string(covered) + " rows instead of " +
                           std::to_string(totalTokens))
                              .c_str());
  Result<std::vector<int32_t>> result =
      reference::seqIdx(cuSeqlens, totalTokens);
  if (!result)
    throw nb::value_error(result.status().message().c_str());
  return toNumpy(*result);
}

nb::dict referenceLinearChunks(ArrayArg cuArg, IntArg chunkSizeArg,
                               IntArg capacityArg) {
  std::vector<int32_t> cu = hostVector<int32_t>(cuArg, "cu_seqlens");
  const int64_t chunkSize = integerArgument(chunkSizeArg.object, "chunk_size");
  const int64_t capacity = integerArgument(capacityArg.object, "capacity");
  Result<reference::LinearChunks> out =
      reference::linearChunks(cu, chunkSize, capacity);
  if (!out)
    throw nb::value_error(out.status().message().c_str());
  nb::dict result;
  nb::object indices = toNumpy(out->chunkIndices);
  result["chunk_indices"] = indices.attr("reshape")(capacity, 2);
  result["chunk_offsets"] = toNumpy(out->chunkOffsets);
  result["chunk_count"] = out->chunkCount;
  return result;
}

int64_t referenceLinearChunkCapacity(IntArg rowsArg, IntArg nArg,
                                     IntArg chunkSizeArg) {
  const int64_t rows = integerArgument(rowsArg.object, "rows");
  const int64_t n = integerArgument(nArg.object, "N");
  const int64_t chunkSize = integerArgument(chunkSizeArg.object, "chunk_size");
  if (rows < 0 || rows > std::numeric_limits<int32_t>::max() || n < 1 ||
      n > std::numeric_limits<int32_t>::max() || chunkSize < 1)
    throw nb::value_error(("linear_chunk_capacity: rows in [0, int32 max], N "
                           "in [1, int32 max] and chunk_size >= 1 required; "
                           "got rows=" + std::to_string(rows) + ", N=" +
                           std::to_string(n) + ", chunk_size=" +
                           std::to_string(chunkSize))
                              .c_str());
  return reference::linearChunkCapacity(rows, n, chunkSize);
}

nb::dict referencePackMicrobatch(ArrayArg tokenPool, ArrayArg labelPool,
                                 ArrayArg lossMaskPool, ArrayArg sampleOffsets,
                                 ArrayArg sampleLengths, ArrayArg sampleIds,
                                 IntArg numSeqs, IntArg cpRank, IntArg C_,
                                 IntArg cp_, IntArg N_) {
  const auto [C, cp, N] = stepSizes("pack_microbatch", C_, cp_, N_);
  reference::PackStepInput input;
  input.tokenPool = hostVector<int64_t>(tokenPool, "token_pool");
  input.labelPool = hostVector<int64_t>(labelPool, "label_pool");
  input.lossMaskPool = hostVector<float>(lossMaskPool, "loss_mask_pool");
  input.sampleOffsets = hostVector<int32_t>(sampleOffsets, "sample_offsets");
  input.sampleLengths = hostVector<int32_t>(sampleLengths, "sample_lengths");
  input.sampleIds = hostVector<int32_t>(sampleIds, "sample_ids");
  input.numSeqs = int32_t(integerArgument(numSeqs.object, "num_seqs"));
  input.cpRank = int32_t(integerArgument(cpRank.object, "cp_rank"));
  // Structured bindings are captured by copy, by name (C++17 does not
  // capture them implicitly).
  Result<reference::PackStepOutput> out = [&input, C = C, cp = cp, N = N] {
    nb::gil_scoped_release release;
    return reference::packMicrobatchStep(input, C, cp, N);
  }();
  if (!out)
    throw nb::value_error(
        ("pack_microbatch: " + out.status().message()).c_str());
  return stepOutputs(*out);
}

} // namespace

void thdc::python::populateReferenceBindings(nb::module_ &m) {
  m.def(
      "describe_status",
      [](IntArg status) {
        return thdc::reference::describeStatus(
            int32_t(integerArgument(status.object, "status")));
      },
      nb::arg("status"),
      "The names of a thd.validate status word's bits, joined by '|' "
      "(\"ok\" for 0), as reference/StatusBits.h defines them.");
  {
    nb::dict bits;
    for (const thdc::reference::StatusBitName &entry :
         thdc::reference::kStatusBitNames)
      bits[entry.name] = int32_t(entry.bit);
    m.attr("STATUS_BITS") = bits;
  }

  nb::module_ reference = m.def_submodule(
      "reference", "The reference semantics (plain C++), for tests");
  reference.def(
      "graph_step", &referenceGraphStep, nb::arg("tokens"), nb::arg("labels"),
      nb::arg("position_ids"), nb::arg("loss_mask"), nb::arg("cu_seqlens"),
      nb::arg("cu_seqlens_padded"), nb::arg("num_seqs"), nb::arg("cp_rank"),
      nb::arg("C"), nb::arg("cp"), nb::arg("N"), nb::kw_only(),
      nb::arg("rows_given").none() = nb::none(),
      nb::arg("dummy_length").none() = nb::none(),
      "One microbatch of the graph-mode step (megatron_graph_step.mlir's "
      "semantics) for CP rank cp_rank; rows_given: the rows of the data "
      "buffers the caller copied (the rows_not_given check), or None; "
      "dummy_length: the tail in dummy sequences of that many rows over the "
      "spare entries (policy split_dummy_sequences), or None for one.");
  reference.def(
      "graph_step_offsets", &referenceGraphStepOffsets, nb::arg("cu_seqlens"),
      nb::arg("cu_seqlens_padded"), nb::arg("num_seqs"), nb::arg("cp_rank"),
      nb::arg("C"), nb::arg("cp"), nb::arg("N"), nb::kw_only(),
      nb::arg("rows_given").none() = nb::none(),
      nb::arg("dummy_length").none() = nb::none(),
      nb::arg("cp_mode") = "zigzag",
      "graph_step's cu_seqlens_padded, cu_seqlens, max_seqlen and status "
      "for the same arguments without the data rows: the metadata alone, in "
      "work linear in N whatever C*cp. cp_mode: the step's CP layout, "
      "'zigzag' or 'contiguous' (whose metadata is the cp = 1 step's over "
      "C*cp rows).");
  reference.def("seq_idx", &referenceSeqIdx, nb::arg("cu_seqlens"),
                nb::arg("total_tokens"));
  reference.def("linear_chunks", &referenceLinearChunks,
                nb::arg("cu_seqlens"), nb::arg("chunk_size"),
                nb::arg("capacity"),
                "S15: the chunk metadata of flash-linear-attention's varlen "
                "chunked kernels for cu_seqlens (N+1 entries) and chunk size "
                "BT at `capacity` rows: chunk_indices int32 [capacity, 2], "
                "chunk_offsets int32 [N+1], chunk_count.");
  reference.def("linear_chunk_capacity", &referenceLinearChunkCapacity,
                nb::arg("rows"), nb::arg("N"), nb::arg("chunk_size"),
                "S15: ceil(rows/BT) + N, the static row count of "
                "chunk_indices.");
  reference.def(
      "pack_microbatch", &referencePackMicrobatch, nb::arg("token_pool"),
      nb::arg("label_pool"), nb::arg("loss_mask_pool"),
      nb::arg("sample_offsets"), nb::arg("sample_lengths"),
      nb::arg("sample_ids"), nb::arg("num_seqs"), nb::arg("cp_rank"),
      nb::arg("C"), nb::arg("cp"), nb::arg("N"),
      "One microbatch of examples/pack_microbatch.mlir for CP rank cp_rank "
      "(reference::packMicrobatchStep): a dict of NumPy arrays by output "
      "name, max_seqlen and status as ints. ValueError for shapes the "
      "pipeline cannot have and data the reference steps refuse.");
}
