//===- Alignment.h - S1 per-sequence alignment ------------------*- C++ -*-===//
//
// Section S1 of docs/semantics.md: the alignment granularity, the
// low-precision multiples and the aligned lengths and samples. Defined in
// reference/Alignment.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_ALIGNMENT_H
#define THDC_REFERENCE_ALIGNMENT_H

#include "reference/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S1. Per-sequence alignment
//===----------------------------------------------------------------------===//

/// S1: the token multiples that low-precision recipes need of the rows a
/// rank feeds its GEMMs, megatron-core's numbers (get_fp8_align_size: 32
/// for "mxfp8", 16 for every other FP8 recipe, "fp8", "delayed",
/// "tensorwise", "blockwise", "custom"; "hybridep" 64), in a fixed order.
/// The single table of these values: the Python planner exposes it as
/// thdc.planner.LOW_PRECISION_MULTIPLES.
struct LowPrecisionMultiple {
  /// The recipe's name.
  const char *recipe;
  /// The multiple m its token counts need.
  int64_t multiple;
};
const std::vector<LowPrecisionMultiple> &lowPrecisionMultiples();

/// S1: the multiple m of the recipe named `recipe`; an error naming the
/// known recipes otherwise.
Result<int64_t> lowPrecisionMultiple(const std::string &recipe);

/// S1, graph mode: the rows per CP rank a static capacity must be a
/// multiple of for a recipe of multiple m: m * tp under sequence
/// parallelism (each TP rank feeds C/tp of the C rows to its GEMMs), else
/// m. Errors: tp or m below 1, a product outside int32.
Result<int64_t> capacityRowMultiple(int64_t tp, bool sequenceParallel,
                                    int64_t multiple);

/// S1, graph mode: the condition a low-precision recipe puts on C, the
/// static rows of every CP rank (every rank feeds its GEMMs exactly C rows,
/// C/tp under sequence parallelism): C % capacityRowMultiple(...) == 0.
/// Returns that row multiple, or an error naming C, m, tp and the nearest
/// capacities that hold. Per-sequence rounding (padGranularity with a
/// multiple) is only for consumers of a variable packed length.
Result<int64_t> checkCapacityAlignment(int64_t rowsPerRank, int64_t tp,
                                       bool sequenceParallel, int64_t multiple);

/// S1: alignment granularity G = tpPad * lcm(cpPad, share * m), with
/// cpPad = 2*cp if cp > 1 else 1 (dynamic CP: 2*cp*dp always), share =
/// cpPad / 2 when cpPad > 1 else 1 (the ranks a sequence is divided among),
/// tpPad = tp under sequence parallelism else 1, and m = `multiple`: every
/// rank's share of every padded sequence is then a multiple of m (m = 1
/// gives cpPad * tpPad). Errors: cp, tp, dp or multiple below 1, and a G
/// outside int64 (checked, never wrapped). Golden: cp=2, tp=2, sp -> 8;
/// cp=2, tp=1 -> 4; cp=1, m=16 -> 16; cp=2, m=16 -> 32; cp=2, tp=2, sp,
/// m=16 -> 64; cp=1, tp=4, sp, m=128 -> 512.
Result<int64_t> padGranularity(int64_t cp, int64_t tp, bool sequenceParallel,
                               int64_t dp = 1, bool dynamicCp = false,
                               int64_t multiple = 1);

/// S1: padded (physical) lengths p[i] = ceil(v[i] / G) * G of the valid
/// lengths v. Errors: granularity <= 0, a negative length, a result outside
/// int32. Golden: G=4, v=[3,2,4] -> [4,4,4].
Result<std::vector<int32_t>>
alignLengths(const std::vector<int32_t> &validLengths, int64_t granularity);

/// S1: one aligned varlen-dataset sample (tensors of length p).
struct VarlenSample {
  /// ids[0:p] (padded with padId).
  std::vector<int64_t> tokens;
  /// targets[1:p+1] (padded with padId).
  std::vector<int64_t> labels;
  /// 0..p-1; padding rows keep counting.
  std::vector<int64_t> positionIds;
  /// 1 for rows k < v whose label is not ignoreIndex, else 0.
  std::vector<float> lossMask;
  /// v = len(ids) - 1 (number of next-token predictions).
  int32_t validLength = 0;
  /// p = round_up(v, G).
  int32_t paddedLength = 0;
};

/// S1 (varlen dataset): turns one truncated conversation `ids` (already
/// ending with EOD, at least 2 ids) and its `targets` (ids with prompt tokens
/// replaced by ignoreIndex, same length) into an aligned sample with
/// v = len(ids) - 1 and p = round_up(v, granularity); ids and targets are
/// right-padded with padId before the next-token shift.
Result<VarlenSample> alignVarlenSample(const std::vector<int64_t> &ids,
                                       const std::vector<int64_t> &targets,
                                       int64_t granularity, int64_t padId,
                                       int64_t ignoreIndex);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_ALIGNMENT_H
