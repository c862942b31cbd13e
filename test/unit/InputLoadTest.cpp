//===- InputLoadTest.cpp - the microbatch load contract -------------------===//
//
// runtime/InputLoad.h's rules one by one on host buffers, and the loads it
// plans run through the host gather: the rows and entries land in the
// buffers, the -1 entries after the given ones, num_rows and num_seqs
// stored, what needs a conversion left to the caller.
//
//===----------------------------------------------------------------------===//

#include "runtime/InputLoad.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace thdc::runtime;

namespace {

constexpr ElementType kInt64{0, 64, 1};
constexpr ElementType kFloat32{2, 32, 1};

uint64_t address(const void *p) { return uint64_t(uintptr_t(p)); }

/// A stage's static buffers: tokens (int64) and loss_mask (float32) of C
/// rows, the two cu arrays of E entries, and the scalars.
struct Buffers {
  explicit Buffers(int64_t rows = 8, int64_t entries = 4)
      : tokens(rows, 7), lossMask(rows, 7.f), cu(entries, 7),
        cuPadded(entries, 7), unset(entries, -1) {}
  std::vector<int64_t> tokens;
  std::vector<float> lossMask;
  std::vector<int32_t> cu, cuPadded, unset;
  int32_t numSeqs = 7, numRows = 7;

  InputLoadContract contract() {
    InputLoadContract c;
    c.targets = {
        {4, {address(cu.data()), kLoadInt32, int64_t(cu.size())}, false},
        {5,
         {address(cuPadded.data()), kLoadInt32, int64_t(cuPadded.size())},
         false},
        {0, {address(tokens.data()), kInt64, int64_t(tokens.size())}, true},
        {2,
         {address(lossMask.data()), kFloat32, int64_t(lossMask.size())},
         true}};
    c.numSeqs = {address(&numSeqs), kLoadInt32, 1};
    c.numRows = {address(&numRows), kLoadInt32, 1};
    c.unset = {address(unset.data()), kLoadInt32, int64_t(unset.size())};
    return c;
  }
};

template <typename T>
LoadTensor tensor(const std::vector<T> &values, ElementType type,
                  int64_t ndim = 1) {
  LoadTensor t;
  t.given = true;
  t.ndim = ndim;
  t.shape0 = ndim == 2 ? 1 : int64_t(values.size());
  t.elements = int64_t(values.size());
  t.isFloat = type.code == 2;
  t.direct = true;
  t.type = type;
  t.data = address(values.data());
  t.onDevice = t.contiguous = true;
  return t;
}

struct Load {
  std::vector<int64_t> tokens{1, 2, 3, 4, 5};
  std::vector<float> lossMask{1, 1, 0, 1, 1};
  std::vector<int32_t> cu{0, 2, 5}, cuPadded{0, 2, 5};
  std::array<LoadTensor, kLoadTensors> tensors() const {
    std::array<LoadTensor, kLoadTensors> t;
    t[0] = tensor(tokens, kInt64, 2);
    t[2] = tensor(lossMask, kFloat32, 2);
    t[4] = tensor(cu, kLoadInt32);
    t[5] = tensor(cuPadded, kLoadInt32);
    return t;
  }
};

} // namespace

TEST(InputLoad, LoadsEveryTensorTheMinusOnesAndTheCounts) {
  Buffers buffers;
  InputLoadContract contract = buffers.contract();
  ASSERT_TRUE(contract.check());
  Load load;
  LoadPlan plan;
  LoadError error = planLoad(contract, load.tensors(), LoadCount{}, plan);
  ASSERT_EQ(error.fault, LoadFault::None);
  EXPECT_EQ(plan.rest, 0u);
  // Four tensors, two -1 tails, num_rows, num_seqs.
  EXPECT_EQ(plan.count, 8u);
  ASSERT_TRUE(gatherOnHost(plan.segments.data(), plan.count));
  EXPECT_EQ(buffers.tokens, (std::vector<int64_t>{1, 2, 3, 4, 5, 7, 7, 7}));
  EXPECT_EQ(buffers.lossMask,
            (std::vector<float>{1, 1, 0, 1, 1, 7, 7, 7}));
  EXPECT_EQ(buffers.cu, (std::vector<int32_t>{0, 2, 5, -1}));
  EXPECT_EQ(buffers.cuPadded, (std::vector<int32_t>{0, 2, 5, -1}));
  EXPECT_EQ(buffers.numRows, 5);
  EXPECT_EQ(buffers.numSeqs, 2); // E - 1
}

TEST(InputLoad, CountAsAValueOrATensor) {
  Buffers buffers;
  InputLoadContract contract = buffers.contract();
  Load load;
  load.cu = {0, 2, 5, 5};
  load.cuPadded = {0, 2, 5, 5};
  LoadPlan plan;
  // Every entry given: the count must be.
  EXPECT_EQ(planLoad(contract, load.tensors(), LoadCount{}, plan).fault,
            LoadFault::NeedsNumSeqs);
  LoadCount value;
  value.kind = LoadCount::Kind::Value;
  value.value = -3;
  ASSERT_EQ(planLoad(contract, load.tensors(), value, plan).fault,
            LoadFault::None);
  ASSERT_TRUE(gatherOnHost(plan.segments.data(), plan.count));
  EXPECT_EQ(buffers.numSeqs, -3); // stored as given: the kernel flags it
  std::vector<int32_t> count{2};
  LoadCount fromTensor;
  fromTensor.kind = LoadCount::Kind::Tensor;
  fromTensor.tensor = tensor(count, kLoadInt32);
  ASSERT_EQ(planLoad(contract, load.tensors(), fromTensor, plan).fault,
            LoadFault::None);
  ASSERT_TRUE(gatherOnHost(plan.segments.data(), plan.count));
  EXPECT_EQ(buffers.numSeqs, 2);
  std::vector<int32_t> none;
  fromTensor.tensor = tensor(none, kLoadInt32);
  EXPECT_EQ(planLoad(contract, load.tensors(), fromTensor, plan).fault,
            LoadFault::EmptyNumSeqs);
  std::vector<float> real{2.5f};
  fromTensor.tensor = tensor(real, kFloat32);
  EXPECT_EQ(planLoad(contract, load.tensors(), fromTensor, plan).fault,
            LoadFault::Truncation);
}

TEST(InputLoad, EachBrokenRuleNamesItsArgument) {
  Buffers buffers;
  InputLoadContract contract = buffers.contract();
  LoadPlan plan;
  auto refused = [&](Load load, auto change) {
    auto tensors = load.tensors();
    change(tensors);
    return planLoad(contract, tensors, LoadCount{}, plan);
  };
  // The cu arrays' presence is checked before the data tensors'.
  LoadError missing = refused(Load{}, [](auto &t) {
    t[0].given = false;
    t[5].given = false;
  });
  EXPECT_EQ(missing.fault, LoadFault::Missing);
  EXPECT_EQ(missing.argument, 5u);
  EXPECT_TRUE(missing.isTypeError());
  EXPECT_EQ(describeLoadError(missing, {"", "", "", "first"}),
            "stage 'first' reads cu_seqlens_padded; it was not given");

  LoadError shape = refused(Load{}, [](auto &t) { t[2].shape0 = 2; });
  EXPECT_EQ(shape.fault, LoadFault::BadShape);
  EXPECT_EQ(describeLoadError(shape, {"(2, 3)", "", "", ""}),
            "loss_mask has the shape (2, 3); a packed microbatch's tensors "
            "are [T] or [1, T] (micro-batch size 1, as sequence packing has "
            "it)");

  Load long_;
  long_.tokens.assign(9, 1);
  long_.lossMask.assign(9, 1);
  LoadError rows = refused(long_, [](auto &) {});
  EXPECT_EQ(rows.fault, LoadFault::OverCapacity);
  EXPECT_EQ(describeLoadError(rows, {}),
            "tokens has 9 rows; the step holds C*cp = 8");

  Load uneven;
  uneven.lossMask.push_back(1);
  LoadError differ = refused(uneven, [](auto &) {});
  EXPECT_EQ(differ.fault, LoadFault::RowsDiffer);
  EXPECT_EQ(describeLoadError(differ, {}),
            "loss_mask has 6 rows but tokens has 5; every data tensor of a "
            "microbatch has the same rows");

  Load entries;
  entries.cu = {0, 2, 5, 5, 5};
  entries.cuPadded = {0, 2, 5, 5, 5};
  EXPECT_EQ(describeLoadError(refused(entries, [](auto &) {}), {}),
            "cu_seqlens has 5 entries; the step holds N+1 = 4");
  Load unequal;
  unequal.cuPadded = {0, 2};
  EXPECT_EQ(refused(unequal, [](auto &) {}).fault, LoadFault::EntriesDiffer);

  Load real;
  LoadError truncated = refused(real, [](auto &t) {
    t[0].isFloat = true; // float tokens into the int64 buffer
  });
  EXPECT_EQ(truncated.fault, LoadFault::Truncation);
  EXPECT_EQ(describeLoadError(truncated,
                              {"", "torch.float32", "torch.int64", ""}),
            "tokens is torch.float32, but the step's tokens holds "
            "torch.int64: a floating-point value would be truncated (NaN to "
            "an arbitrary integer); pass integers");
  // A float loss mask goes into its float buffer.
  EXPECT_EQ(refused(Load{}, [](auto &) {}).fault, LoadFault::None);
}

TEST(InputLoad, WhatNeedsAConversionIsLeftToTheCaller) {
  Buffers buffers;
  InputLoadContract contract = buffers.contract();
  Load load;
  auto tensors = load.tensors();
  tensors[0].type = kLoadInt32; // another dtype
  tensors[4].onDevice = false;  // another device
  tensors[2].direct = false;    // a subclass
  LoadPlan plan;
  ASSERT_EQ(planLoad(contract, tensors, LoadCount{}, plan).fault,
            LoadFault::None);
  EXPECT_EQ(plan.rest, (1u << 0) | (1u << 2) | (1u << 4));
  contract.perTensor = true;
  ASSERT_EQ(planLoad(contract, load.tensors(), LoadCount{}, plan).fault,
            LoadFault::None);
  EXPECT_EQ(plan.rest, (1u << 0) | (1u << 2) | (1u << 4) | (1u << 5));
  // Empty tensors are not copied, nor left to copy.
  Load empty;
  empty.tokens.clear();
  empty.lossMask.clear();
  contract.perTensor = false;
  ASSERT_EQ(planLoad(contract, empty.tensors(), LoadCount{}, plan).fault,
            LoadFault::None);
  ASSERT_TRUE(gatherOnHost(plan.segments.data(), plan.count));
  EXPECT_EQ(buffers.numRows, 0);
}

TEST(InputLoad, TheBuffersThemselvesAreChecked) {
  Buffers buffers;
  bool typeError = false;
  InputLoadContract contract = buffers.contract();
  contract.numRows = {};
  EXPECT_EQ(contract.check(&typeError).message(),
            "num_rows goes with the data targets: the kernel bounds the rows "
            "it reads by it");
  EXPECT_FALSE(typeError);
  contract = buffers.contract();
  contract.unset.elements = 3;
  EXPECT_FALSE(contract.check(&typeError));
  EXPECT_TRUE(typeError);
  contract = buffers.contract();
  contract.targets.push_back(contract.targets[0]);
  EXPECT_EQ(contract.check().message(),
            "targets[4]: cu_seqlens has another target already");
  contract = buffers.contract();
  contract.targets[1].argument = 6;
  EXPECT_EQ(contract.check().message(),
            "targets[1][0] must be an argument index in [0, 6); got 6");
  contract.targets.clear();
  EXPECT_EQ(contract.check().message(), "targets holds 1 to 6 buffers; got 0");
  contract = buffers.contract();
  contract.numSeqs.type = kInt64;
  EXPECT_EQ(contract.check().message(), "num_seqs must be one int32 element");
}
