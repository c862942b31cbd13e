//===- InputLoad.cpp - the microbatch load contract -----------------------===//

#include "runtime/InputLoad.h"

#include <string>

namespace thdc::runtime {

namespace {

bool holdsFloats(ElementType type) { return type.code == 2 || type.code == 6; }

std::string name(size_t argument) {
  return argument <= kLoadNumSeqs ? kLoadArgumentNames[argument] : "?";
}

} // namespace

Status InputLoadContract::check(bool *typeError) const {
  auto fail = [&](bool isType, std::string message) {
    if (typeError)
      *typeError = isType;
    return Status::error(std::move(message));
  };
  if (numSeqs.type != kLoadInt32 || numSeqs.elements != 1)
    return fail(true, "num_seqs must be one int32 element");
  if (numRows.address && (numRows.type != kLoadInt32 || numRows.elements != 1))
    return fail(true, "num_rows must be one int32 element");
  if (targets.empty() || targets.size() > kLoadTensors)
    return fail(false, "targets holds 1 to " + std::to_string(kLoadTensors) +
                           " buffers; got " + std::to_string(targets.size()));
  uint32_t seen = 0;
  bool data = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    const LoadTarget &target = targets[i];
    const std::string what = "targets[" + std::to_string(i) + "]";
    if (target.argument >= kLoadTensors)
      return fail(false, what + "[0] must be an argument index in [0, " +
                             std::to_string(kLoadTensors) + "); got " +
                             std::to_string(target.argument));
    if (seen & (1u << target.argument))
      return fail(false, what + ": " + name(target.argument) +
                             " has another target already");
    seen |= 1u << target.argument;
    if (target.buffer.elements < 0 || target.buffer.type.bytes() == 0)
      return fail(true, what + "[1] has no elements of a known size");
    data |= target.isData;
  }
  if (data != (numRows.address != 0))
    return fail(false, "num_rows goes with the data targets: the kernel "
                       "bounds the rows it reads by it");
  for (const LoadTarget &target : targets)
    if (!target.isData && (unset.type != target.buffer.type ||
                           unset.elements < target.buffer.elements))
      return fail(true, "unset must be a buffer of -1s of the cu arrays' "
                        "dtype and at least their entries");
  return Status();
}

LoadError planLoad(const InputLoadContract &contract,
                   const std::array<LoadTensor, kLoadTensors> &tensors,
                   const LoadCount &count, LoadPlan &plan) {
  auto fault = [](LoadFault kind, size_t argument, int64_t given = 0,
                  int64_t limit = 0, size_t other = 0) {
    return LoadError{kind, argument, given, limit, other};
  };
  // Presence first, the cu arrays before the data tensors.
  for (bool data : {false, true})
    for (const LoadTarget &target : contract.targets)
      if (target.isData == data && !tensors[target.argument].given)
        return fault(LoadFault::Missing, target.argument);

  int64_t rows = -1, entries = -1, capacityEntries = 0;
  size_t firstData = 0;
  for (const LoadTarget &target : contract.targets) {
    const LoadTensor &t = tensors[target.argument];
    if (!(t.ndim == 1 || (t.ndim == 2 && t.shape0 == 1)))
      return fault(LoadFault::BadShape, target.argument);
    const int64_t capacity = target.buffer.elements;
    if (t.elements > capacity)
      return fault(LoadFault::OverCapacity, target.argument, t.elements,
                   capacity);
    if (target.isData) {
      if (rows >= 0 && t.elements != rows)
        return fault(LoadFault::RowsDiffer, target.argument, t.elements, rows,
                     firstData);
      if (rows < 0)
        firstData = target.argument;
      rows = t.elements;
    } else {
      if (entries >= 0 && t.elements != entries)
        return fault(LoadFault::EntriesDiffer, target.argument);
      entries = t.elements;
      capacityEntries = capacity;
    }
    if (t.elements && t.isFloat && !holdsFloats(target.buffer.type))
      return fault(LoadFault::Truncation, target.argument);
  }

  int64_t numSeqs = count.value;
  switch (count.kind) {
  case LoadCount::Kind::Absent:
    if (entries == capacityEntries)
      return fault(LoadFault::NeedsNumSeqs, kLoadNumSeqs);
    numSeqs = entries - 1;
    break;
  case LoadCount::Kind::Tensor:
    if (!count.tensor.elements)
      return fault(LoadFault::EmptyNumSeqs, kLoadNumSeqs);
    if (count.tensor.isFloat)
      return fault(LoadFault::Truncation, kLoadNumSeqs);
    break;
  case LoadCount::Kind::Value:
    break;
  }

  // Every rule kept: the gather, and what is left to copy.
  plan.count = 0;
  plan.rest = 0;
  for (const LoadTarget &target : contract.targets) {
    const LoadTensor &t = tensors[target.argument];
    if (!t.elements)
      continue;
    if (contract.perTensor || !t.direct || !t.data ||
        t.type != target.buffer.type || !t.onDevice || !t.contiguous) {
      plan.rest |= 1u << target.argument;
      continue;
    }
    plan.segments[plan.count++] = {t.data, target.buffer.address,
                                   uint64_t(t.elements) *
                                       target.buffer.type.bytes(),
                                   0};
  }
  if (entries >= 0 && entries < capacityEntries)
    for (const LoadTarget &target : contract.targets)
      if (!target.isData) {
        const uint64_t bytes = target.buffer.type.bytes();
        plan.segments[plan.count++] = {
            contract.unset.address,
            target.buffer.address + uint64_t(entries) * bytes,
            uint64_t(capacityEntries - entries) * bytes, 0};
      }
  if (rows >= 0)
    plan.segments[plan.count++] = {0, contract.numRows.address, 4,
                                   uint64_t(rows)};
  if (count.kind != LoadCount::Kind::Tensor) {
    // The value's low four bytes are stored; sign-extended here as the
    // count is.
    plan.segments[plan.count++] = {0, contract.numSeqs.address, 4,
                                   uint64_t(numSeqs)};
  } else {
    const LoadTensor &t = count.tensor;
    if (contract.perTensor || !t.direct || !t.data ||
        t.type != contract.numSeqs.type || !t.onDevice)
      plan.rest |= 1u << kLoadNumSeqs;
    else
      plan.segments[plan.count++] = {t.data, contract.numSeqs.address, 4, 0};
  }
  return LoadError();
}

std::string describeLoadError(const LoadError &error,
                              const LoadSpelling &spelling) {
  const std::string arg = name(error.argument);
  const bool data = error.argument < 4;
  switch (error.fault) {
  case LoadFault::None:
    return "";
  case LoadFault::Missing:
    return "stage '" + spelling.stage + "' reads " + arg +
           "; it was not given";
  case LoadFault::BadShape:
    return arg + " has the shape " + spelling.shape +
           (data ? "; a packed microbatch's tensors are [T] or [1, T] "
                   "(micro-batch size 1, as sequence packing has it)"
                 : "; cu arrays are [E] or [1, E]");
  case LoadFault::OverCapacity:
    return arg + " has " + std::to_string(error.given) +
           (data ? " rows; the step holds C*cp = "
                 : " entries; the step holds N+1 = ") +
           std::to_string(error.limit);
  case LoadFault::RowsDiffer:
    return arg + " has " + std::to_string(error.given) + " rows but " +
           name(error.other) + " has " + std::to_string(error.limit) +
           "; every data tensor of a microbatch has the same rows";
  case LoadFault::EntriesDiffer:
    return "cu_seqlens and cu_seqlens_padded differ in length";
  case LoadFault::NeedsNumSeqs:
    return "cu arrays of N+1 entries need num_seqs";
  case LoadFault::EmptyNumSeqs:
    return "num_seqs is an empty tensor; give the count as its first "
           "element, or as an int";
  case LoadFault::Truncation:
    return arg + " is " + spelling.type + ", but the step's " + arg +
           " holds " + spelling.bufferType +
           ": a floating-point value would be truncated (NaN to an "
           "arbitrary integer); pass integers";
  }
  return "";
}

} // namespace thdc::runtime
