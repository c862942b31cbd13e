//===- Positions.h - S8 position ids, RoPE positions ------------*- C++ -*-===//
//
// Section S8 of docs/semantics.md: position_ids, the RoPE table rows and
// Mamba's seq_idx. Defined in reference/Positions.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_POSITIONS_H
#define THDC_REFERENCE_POSITIONS_H

#include "reference/Status.h"

#include <cstdint>
#include <vector>

namespace thdc {
namespace reference {

//===----------------------------------------------------------------------===//
// S8. Position ids, RoPE positions, seq_idx
//===----------------------------------------------------------------------===//

/// S8: model-input position_ids of the packed buffer: 0..p_i-1 per sequence
/// (as the dataset writes them), then S6-sanitised with the S5 mask, so
/// padding rows are 0. Errors: paddingMask's, cup not starting at 0 or
/// decreasing. Golden: cu [0,3,5,9], cup [0,4,8,12] ->
/// [0,1,2,0,0,1,0,0,0,1,2,3].
Result<std::vector<int64_t>>
positionIds(const std::vector<int32_t> &cuSeqlens,
            const std::vector<int32_t> &cuSeqlensPadded);

/// S8: RoPE table row of each of the `localLength` local rows of CP rank
/// `rank`, before the optional absolute shift: with local lengths
/// ll = diff(cuPadded)/cp and lcu = cumsum0(ll), row t belongs to the
/// sequence s found by searchsorted (clamped to the last entry, so tail rows
/// continue the last sequence), k = t - lcu[s], h = ll[s]/2, and
/// pos = k (cp == 1), r*h + k (k < h), or ll[s]*cp - (r+1)*h + (k-h).
/// Errors: fewer than 2 entries, decreasing cu, cp < 1, rank outside
/// [0, cp), negative localLength. Golden: cu [0,4,8,12,16,16,16], cp=2,
/// 8 rows -> r0 [0,3,0,3,0,3,0,3], r1 [1,2,1,2,1,2,1,2].
Result<std::vector<int64_t>>
ropePositions(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength);

/// S8: the RoPE table row actually read: ropePositions plus cu[s] when
/// freqRows > maxSeqlen (the "absolute" table heuristic), clamped to
/// [0, freqRows-1]. Errors: ropePositions', freqRows < 1.
Result<std::vector<int64_t>>
ropeTableRows(const std::vector<int32_t> &cuSeqlensPadded, int64_t cp,
              int64_t rank, int64_t localLength, int64_t maxSeqlen,
              int64_t freqRows);

/// S8 (Mamba seq_idx): with c = cu ++ [totalTokens], row-wise sequence index
/// repeat(i, max(c[i+1]-c[i], 0)). Errors: empty cu, totalTokens outside
/// [0, int32 max], a result whose length differs from totalTokens. Golden: cu
/// [0,5,7,11], total 16 -> [0]*5 + [1]*2 + [2]*4 + [3]*5.
Result<std::vector<int32_t>> seqIdx(const std::vector<int32_t> &cuSeqlens,
                                    int64_t totalTokens);

} // namespace reference
} // namespace thdc

#endif // THDC_REFERENCE_POSITIONS_H
