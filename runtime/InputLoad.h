//===- InputLoad.h - the microbatch load contract ---------------*- C++ -*-===//
//
// The contract a microbatch's tensors must keep to be loaded into a step's
// static input buffers, stated once, and the gather that loads them:
//
// - every data tensor the stage reads (tokens, labels, loss_mask,
//   position_ids) is [T] or [1, T] (micro-batch size 1, as sequence
//   packing has it), all with the same T rows, at most its buffer's;
// - the cu arrays (cu_seqlens, cu_seqlens_padded) are [E] or [1, E] with
//   the same E entries, at most their buffers';
// - num_seqs is left out (then E - 1, which needs E below the buffers'
//   entries), a value, or a tensor of at least one element (its first is
//   the count);
// - no floating-point value goes into an integer buffer.
//
// The buffers' own lengths bound every copy (they were made from the
// kernel's verified signature; no other count is trusted). T is stored as
// num_rows, by which the kernel empties a microbatch whose offsets claim
// more rows (rows_not_given), and the cu entries after the E given are
// copied from `unset` (-1s), so a num_seqs claiming more sequences reads a
// decreasing offset (not_monotonic) rather than an earlier microbatch's,
// and what an emptied microbatch counts as dropped depends on what was
// given alone.
//
// planLoad checks a load against the contract before anything is copied
// and lays out its gather (runtime/Gather.h): one segment per tensor that
// needs no conversion, the -1 entries, the num_rows and num_seqs stores.
// A tensor that needs a conversion (another type, device or layout) is left
// to the caller's own copy. A broken contract is a LoadError naming the
// argument and its fault; describeLoadError words it. The Python binding
// (python/InputGatherBindings.cpp) only reads the tensors and raises.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_RUNTIME_INPUTLOAD_H
#define THDC_RUNTIME_INPUTLOAD_H

#include "runtime/Gather.h"
#include "runtime/Status.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace thdc::runtime {

/// The arguments of a load, in order; the first kLoadTensors are tensors
/// with a buffer, the last is num_seqs.
inline constexpr size_t kLoadTensors = 6;
inline constexpr size_t kLoadNumSeqs = 6;
inline constexpr const char *kLoadArgumentNames[kLoadTensors + 1] = {
    "tokens",     "labels",           "loss_mask", "position_ids",
    "cu_seqlens", "cu_seqlens_padded", "num_seqs"};

/// An element type, as DLPack codes it: code 0 int, 1 uint, 2 float, 6
/// bool (others: floating-point kinds), bits, lanes.
struct ElementType {
  uint8_t code = 0;
  uint8_t bits = 0;
  uint16_t lanes = 0;
  bool operator==(const ElementType &o) const {
    return code == o.code && bits == o.bits && lanes == o.lanes;
  }
  bool operator!=(const ElementType &o) const { return !(*this == o); }
  uint64_t bytes() const { return uint64_t(bits) / 8 * lanes; }
};
inline constexpr ElementType kLoadInt32{0, 32, 1};

/// A static input buffer: where it is, its element type, and its element
/// count, which bounds what a load copies into it.
struct LoadBuffer {
  uint64_t address = 0;
  ElementType type{};
  int64_t elements = 0;
};

/// One tensor argument's buffer; `isData` for a data tensor (rows), else
/// a cu array (entries).
struct LoadTarget {
  size_t argument = 0;
  LoadBuffer buffer;
  bool isData = false;
};

/// The buffers of one stage's load.
struct InputLoadContract {
  /// In the order their segments are laid out.
  std::vector<LoadTarget> targets;
  /// num_seqs's buffer (one int32), num_rows's (one int32; address 0 when
  /// there are no data targets), and a buffer of -1s of the cu arrays'
  /// type and at least their entries.
  LoadBuffer numSeqs, numRows, unset;
  /// Every tensor left to the caller's copy (a per-tensor comparison).
  bool perTensor = false;

  /// An error naming the first rule the buffers break: 1 to kLoadTensors
  /// targets of distinct arguments, num_seqs and num_rows one int32 each,
  /// num_rows exactly when there are data targets, unset as said above.
  /// `typeError`, when given, says whether the rule is about a buffer's
  /// type (a TypeError in Python's terms) rather than a count.
  Status check(bool *typeError = nullptr) const;
};

/// A tensor argument as the contract sees it.
struct LoadTensor {
  /// False: None (not given).
  bool given = false;
  int64_t ndim = 0;
  /// The first dimension (0 for a scalar) and the element count.
  int64_t shape0 = 0, elements = 0;
  /// Floating-point or complex values.
  bool isFloat = false;
  /// Known through DLPack: type, address, device and layout below; else
  /// the caller copies it.
  bool direct = false;
  ElementType type{};
  uint64_t data = 0;
  bool onDevice = false, contiguous = false;
};

/// num_seqs: left out, a value, or a tensor.
struct LoadCount {
  enum class Kind { Absent, Value, Tensor } kind = Kind::Absent;
  int64_t value = 0;
  LoadTensor tensor;
};

/// What a broken contract is.
enum class LoadFault {
  None,
  /// The stage reads this argument; it was not given.
  Missing,
  /// Not [n] or [1, n].
  BadShape,
  /// More rows (data) or entries (cu arrays) than the buffer holds.
  OverCapacity,
  /// A data tensor's rows differ from the first data tensor's (`other`).
  RowsDiffer,
  /// The two cu arrays differ in entries.
  EntriesDiffer,
  /// num_seqs left out with cu arrays of every entry.
  NeedsNumSeqs,
  /// num_seqs an empty tensor.
  EmptyNumSeqs,
  /// Floating-point values into an integer buffer.
  Truncation,
};

/// A broken contract: the fault, the argument (an index into
/// kLoadArgumentNames) and the figures its message names.
struct LoadError {
  LoadFault fault = LoadFault::None;
  size_t argument = 0;
  /// OverCapacity: what was given and the buffer's count; RowsDiffer: the
  /// rows of `argument` and of `other`.
  int64_t given = 0, limit = 0;
  size_t other = 0;
  /// A TypeError in Python's terms (Missing, Truncation), else a
  /// ValueError.
  bool isTypeError() const {
    return fault == LoadFault::Missing || fault == LoadFault::Truncation;
  }
};

/// The gather of one load: one segment per target, a copy of -1s after
/// each cu array, the num_rows and num_seqs stores.
struct LoadPlan {
  std::array<GatherSegment, kLoadTensors + 4> segments{};
  size_t count = 0;
  /// The arguments left to the caller's copy, one bit per argument index.
  uint32_t rest = 0;
};

/// Checks a load of `tensors` (indexed by argument; those no target reads
/// are ignored) and `count` against `contract` (which must pass check()),
/// the cu arrays before the data tensors, and lays out its gather in
/// `plan`. Returns the first broken rule, or a LoadError of LoadFault::None.
LoadError planLoad(const InputLoadContract &contract,
                   const std::array<LoadTensor, kLoadTensors> &tensors,
                   const LoadCount &count, LoadPlan &plan);

/// How a message spells what only the caller knows: the argument's shape
/// as the framework prints it, its element type and the buffer's, and the
/// stage's name.
struct LoadSpelling {
  std::string shape, type, bufferType, stage;
};

/// The message of `error`, naming the argument, what it got and the rule.
std::string describeLoadError(const LoadError &error,
                              const LoadSpelling &spelling);

} // namespace thdc::runtime

#endif // THDC_RUNTIME_INPUTLOAD_H
