//===- StatusBits.h - the fault bits of thd.validate -----------*- C++ -*-===//
//
// The one definition of the status word that `thd.validate` computes on the
// device and the reference computes on the host: 0 when a microbatch's
// metadata is valid, else the OR of one bit per fault. The lowering, the
// reference, the tools and the Python package use these names; nothing else
// spells the numbers. Plain C++17, no dependency.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_REFERENCE_STATUSBITS_H
#define THDC_REFERENCE_STATUSBITS_H

#include <cstdint>
#include <string>

namespace thdc::reference {

/// Bits of the status word; 0 = the microbatch is valid.
enum StatusBit : int32_t {
  /// numSeqs < 0 or above max_seqs; with thd.validate's tail_slot (the graph
  /// step: max_seqs N, max_tokens C*cp) numSeqs = N only when there is no
  /// tail, cu_seqlens_padded[N] = C*cp (numSeqsStatus).
  StatusNumSeqsOutOfRange = 1,
  /// cu_seqlens_padded[numSeqs] > C*cp (does not fit the budget).
  StatusTotalExceedsCapacity = 2,
  /// Zigzag CP, cp > 1 and a meaningful cu_seqlens_padded entry % (2*cp) !=
  /// 0 (contiguous CP checks no offset).
  StatusNotDivisibleBy2Cp = 4,
  /// cu_seqlens or cu_seqlens_padded does not start at 0 or decreases.
  StatusNotMonotonic = 8,
  /// Some valid length exceeds its padded length.
  StatusValidExceedsPadded = 16,
  /// cpRank outside [0, cp).
  StatusCpRankOutOfRange = 32,
  /// A chosen sample id outside the pool's samples, or a chosen sample's
  /// rows [offset, offset + length) outside the pool (pipelines that pack
  /// from a pool: thd.validate with samples(...)).
  StatusSampleOutOfRange = 64,
  /// cu_seqlens_padded[numSeqs] is above the rows the caller gave (or the
  /// count given is negative): the microbatch would read rows left in the
  /// static buffers by an earlier one (thd.validate with rows(...)).
  StatusRowsNotGiven = 128,
  /// The host figures of an exact-rows view (num_seqs, max_seqlen) disagree
  /// with the step's offsets: fewer sequences than its rows hold (they
  /// would merge into one), or a sequence longer than max_seqlen. Set by
  /// the drop-in's exact_rows, never by a kernel; the view is emptied.
  StatusFiguresDisagree = 256,
  /// The TP rank that sent a microbatch's outputs ran another layout (C, N,
  /// CP size or rank, stage, rung, or the outputs' layout) than the
  /// receiving rank expects. Set by the drop-in's broadcast on the
  /// receiver, never by a kernel; the receiver keeps an empty microbatch.
  StatusLayoutMismatch = 512,
  /// A rung (or CP size) of a slot was read as a layout while the slot's
  /// buffer held the outputs another one wrote last: the rungs share the
  /// buffer, each laying it out for its own sizes. Set by the drop-in's
  /// exact_rows and broadcast sender, never by a kernel; the view is emptied.
  StatusRungNotRun = 1024,
};

/// Every bit with the name `describeStatus` prints for it, in bit order.
struct StatusBitName {
  StatusBit bit;
  const char *name;
  const char *meaning;
};
inline constexpr StatusBitName kStatusBitNames[] = {
    {StatusNumSeqsOutOfRange, "num_seqs_out_of_range",
     "num_seqs is negative, above the capacity, or leaves no room for the "
     "dummy sequence over a tail"},
    {StatusTotalExceedsCapacity, "total_exceeds_capacity",
     "cu_seqlens_padded[num_seqs] exceeds the token capacity"},
    {StatusNotDivisibleBy2Cp, "not_divisible",
     "a padded offset is not a multiple of 2*cp (zigzag CP)"},
    {StatusNotMonotonic, "not_monotonic",
     "an offset array does not start at 0 or decreases"},
    {StatusValidExceedsPadded, "valid_exceeds_padded",
     "a valid length exceeds its padded length"},
    {StatusCpRankOutOfRange, "cp_rank_out_of_range",
     "cp_rank is outside [0, cp)"},
    {StatusSampleOutOfRange, "sample_out_of_range",
     "a chosen sample id or its rows lie outside the pool"},
    {StatusRowsNotGiven, "rows_not_given",
     "cu_seqlens_padded[num_seqs] claims more rows than the caller gave"},
    {StatusFiguresDisagree, "figures_disagree",
     "exact_rows's num_seqs or max_seqlen disagrees with the step's offsets"},
    {StatusLayoutMismatch, "layout_mismatch",
     "the TP rank that broadcast the outputs ran another layout than this "
     "rank's step"},
    {StatusRungNotRun, "rung_not_run",
     "the slot's buffer holds another rung's (or CP size's) outputs than the "
     "one read"},
};

/// "ok", or the names of the set bits joined by '|' (with "unknown bits 0x.."
/// for bits no fault has), e.g. "not_monotonic|valid_exceeds_padded".
inline std::string describeStatus(int32_t status) {
  if (status == 0)
    return "ok";
  std::string text;
  uint32_t rest = uint32_t(status);
  for (const StatusBitName &entry : kStatusBitNames) {
    if (!(rest & uint32_t(entry.bit)))
      continue;
    rest &= ~uint32_t(entry.bit);
    if (!text.empty())
      text += '|';
    text += entry.name;
  }
  if (rest) {
    static const char digits[] = "0123456789abcdef";
    std::string hex;
    for (int shift = 28; shift >= 0; shift -= 4)
      if (!hex.empty() || (rest >> shift) & 15 || shift == 0)
        hex += digits[(rest >> shift) & 15];
    if (!text.empty())
      text += '|';
    text += "unknown bits 0x" + hex;
  }
  return text;
}

} // namespace thdc::reference

#endif // THDC_REFERENCE_STATUSBITS_H
