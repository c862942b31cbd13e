//===- InputLoadFuzzer.cpp - the microbatch load contract -----------------===//
//
// Arbitrary stages, buffers and loads through runtime/InputLoad.h: a
// contract that check() accepts, then tensors of any shape, count, type,
// device and layout, and num_seqs left out, a value or a tensor. A load the
// contract refuses must name an argument of the load; one it accepts is run
// through the host gather into real host buffers (ASan sees any copy past
// them), and then every buffer holds what was given, the -1 entries after
// the given ones, num_rows the rows and num_seqs the count, and nothing
// else was written. A broken promise aborts.
//
//===----------------------------------------------------------------------===//

#include "runtime/InputLoad.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace thdc::runtime;

namespace {

constexpr ElementType kTypes[] = {
    {0, 64, 1}, {0, 32, 1}, {2, 32, 1}, {6, 8, 1}, {2, 16, 1}};

struct Bytes {
  const uint8_t *data;
  size_t size, at = 0;
  uint8_t next() { return at < size ? data[at++] : 0; }
};

uint64_t address(const void *p) { return uint64_t(uintptr_t(p)); }

/// memcmp that takes the empty vectors' null data.
bool differ(const uint8_t *a, const uint8_t *b, size_t bytes) {
  return bytes && std::memcmp(a, b, bytes);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Bytes in{data, size};
  const int64_t rows = in.next() % 40, entries = 2 + in.next() % 10;
  // Which arguments the stage reads: the cu arrays always, data keys by
  // the bits of one byte.
  const uint8_t keys = in.next();
  std::vector<std::vector<uint8_t>> storage; // every buffer, with a guard
  storage.reserve(16);
  auto buffer = [&](int64_t elements, ElementType type) {
    storage.emplace_back(size_t(elements) * type.bytes(), 0xAB);
    return LoadBuffer{address(storage.back().data()), type, elements};
  };
  InputLoadContract contract;
  std::vector<ElementType> dataTypes(4);
  for (size_t a = 0; a < 4; ++a)
    if (keys & (1u << a)) {
      dataTypes[a] = kTypes[in.next() % 4];
      contract.targets.push_back({a, buffer(rows, dataTypes[a]), true});
    }
  for (size_t a = 4; a < kLoadTensors; ++a)
    contract.targets.push_back({a, buffer(entries, kLoadInt32), false});
  contract.numSeqs = buffer(1, kLoadInt32);
  if (keys & 0xf)
    contract.numRows = buffer(1, kLoadInt32);
  contract.unset = buffer(entries, kLoadInt32);
  std::fill(storage.back().begin(), storage.back().end(), 0xff); // -1s
  contract.perTensor = keys & 0x80;
  if (!contract.check())
    std::abort(); // a well-formed stage's buffers are accepted
  const std::vector<std::vector<uint8_t>> before = storage;

  // The load: each tensor's shape, count, type and flags from the input.
  std::vector<std::vector<uint8_t>> sources(kLoadTensors + 1);
  std::array<LoadTensor, kLoadTensors> tensors;
  const int64_t givenRows = in.next() % 44, givenEntries = in.next() % 14;
  for (size_t a = 0; a < kLoadTensors; ++a) {
    const uint8_t flags = in.next();
    LoadTensor &t = tensors[a];
    t.given = !(flags & 1) || (flags & 2);
    t.ndim = 1 + (flags >> 2) % 3; // 1, 2 or 3
    t.elements = a < 4 ? givenRows : givenEntries;
    if (flags & 0x10) // a tensor of another length now and then
      t.elements = (t.elements + in.next() % 3) % 50;
    t.shape0 = t.ndim == 1 ? t.elements : (flags & 0x20 ? 2 : 1);
    t.type = a < 4 && dataTypes[a].bits ? dataTypes[a] : kLoadInt32;
    if (flags & 0x40)
      t.type = kTypes[in.next() % 5];
    t.isFloat = t.type.code == 2;
    t.direct = !(flags & 0x80) || (flags & 8);
    t.onDevice = t.contiguous = t.direct;
    sources[a].resize(size_t(t.elements) * t.type.bytes());
    for (uint8_t &byte : sources[a])
      byte = in.next();
    t.data = t.elements ? address(sources[a].data()) : 0;
  }
  LoadCount count;
  const uint8_t countKind = in.next() % 3;
  if (countKind == 1) {
    count.kind = LoadCount::Kind::Value;
    count.value = int64_t(int8_t(in.next()));
  } else if (countKind == 2) {
    count.kind = LoadCount::Kind::Tensor;
    LoadTensor &t = count.tensor;
    t.given = true;
    t.ndim = 1;
    t.elements = t.shape0 = in.next() % 3;
    t.type = in.next() & 1 ? kLoadInt32 : kTypes[2];
    t.isFloat = t.type.code == 2;
    t.direct = t.onDevice = t.contiguous = true;
    sources[kLoadTensors].assign(size_t(t.elements) * 4, 0);
    if (t.elements)
      sources[kLoadTensors][0] = 2; // the count 2, little-endian
    t.data = t.elements ? address(sources[kLoadTensors].data()) : 0;
  }

  LoadPlan plan;
  const LoadError error = planLoad(contract, tensors, count, plan);
  if (error.fault != LoadFault::None) {
    if (error.argument > kLoadNumSeqs ||
        describeLoadError(error, {"(?)", "t", "u", "s"}).empty())
      std::abort();
    return 0;
  }
  // Every segment writes inside one buffer and reads inside one source.
  for (size_t i = 0; i < plan.count; ++i) {
    const GatherSegment &s = plan.segments[i];
    bool inside = false;
    for (const auto &b : storage)
      inside |= s.destination >= address(b.data()) &&
                s.destination + s.bytes <= address(b.data()) + b.size();
    if (!inside)
      std::abort();
  }
  if (!gatherOnHost(plan.segments.data(), plan.count))
    std::abort();
  // What was copied is what was given, the cu tails are -1, the rest of
  // every buffer is as it was.
  auto int32At = [](uint64_t at) {
    int32_t value;
    std::memcpy(&value, reinterpret_cast<const void *>(uintptr_t(at)), 4);
    return value;
  };
  int64_t loadedRows = -1, loadedEntries = -1;
  for (size_t k = 0; k < contract.targets.size(); ++k) {
    const LoadTarget &target = contract.targets[k];
    const LoadTensor &t = tensors[target.argument];
    const std::vector<uint8_t> &got = storage[k], &was = before[k];
    if (t.elements > target.buffer.elements)
      std::abort(); // accepted past the buffer
    (target.isData ? loadedRows : loadedEntries) = t.elements;
    const bool copied = !(plan.rest & (1u << target.argument));
    const size_t bytes = size_t(t.elements) * target.buffer.type.bytes();
    if (copied && differ(got.data(), sources[target.argument].data(), bytes))
      std::abort();
    if (!copied && differ(got.data(), was.data(), bytes))
      std::abort();
    if (target.isData) {
      if (differ(got.data() + bytes, was.data() + bytes, got.size() - bytes))
        std::abort();
    } else {
      for (int64_t e = t.elements; e < target.buffer.elements; ++e)
        if (int32At(target.buffer.address + 4 * uint64_t(e)) != -1)
          std::abort();
    }
  }
  if (contract.numRows.address && int32At(contract.numRows.address) != loadedRows)
    std::abort();
  const int32_t numSeqs = int32At(contract.numSeqs.address);
  switch (count.kind) {
  case LoadCount::Kind::Absent:
    if (numSeqs != loadedEntries - 1)
      std::abort();
    break;
  case LoadCount::Kind::Value:
    if (numSeqs != int32_t(count.value))
      std::abort();
    break;
  case LoadCount::Kind::Tensor:
    if (numSeqs != ((plan.rest & (1u << kLoadNumSeqs)) ? int32At(address(before[contract.targets.size()].data())) : 2))
      std::abort();
    break;
  }
  return 0;
}
