//===- GatherTest.cpp - the runtime's one-launch gather -------------------===//
//
// The gather kernel's PTX assembles with ptxas (skipped where there is none),
// the host form copies and stores what the segments say, bad segments are
// refused with the segment named, and on a GPU (skipped without one) the
// kernel matches the host form on odd sizes, unaligned addresses, empty
// segments and more segments than one launch takes.
//
//===----------------------------------------------------------------------===//

#include "runtime/Gather.h"
#include "runtime/CudaDriver.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace thdc::runtime;

namespace {

uint64_t address(const void *pointer) {
  return reinterpret_cast<uint64_t>(pointer);
}

TEST(Gather, PtxAssemblesForTheOldestAndTheH200Chip) {
  std::string ptxas = THDC_TEST_PTXAS;
  if (ptxas.empty() || access(ptxas.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no ptxas (looked for it next to the CUDA toolkit)";
  std::string path = ::testing::TempDir() + "thdc_gather.ptx";
  std::ofstream(path) << gatherPtx();
  for (const char *chip : {"sm_75", "sm_90"}) {
    std::string command =
        ptxas + " -arch=" + chip + " " + path + " -o /dev/null 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
  }
  std::remove(path.c_str());
}

TEST(Gather, HostFormCopiesPrefixesAndStoresScalars) {
  std::vector<unsigned char> source(1000), destination(1000, 0xEE);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = static_cast<unsigned char>(i * 7 + 1);
  std::vector<GatherSegment> segments = {
      {address(source.data() + 3), address(destination.data() + 1), 333, 0},
      {address(source.data()), address(destination.data() + 400), 0, 0},
      {0, address(destination.data() + 500), 4, uint64_t(int64_t(-3))},
      {0, address(destination.data() + 510), 2, 0x1234},
  };
  ASSERT_TRUE(gatherOnHost(segments.data(), segments.size()));
  std::vector<unsigned char> expected(1000, 0xEE);
  std::copy(source.begin() + 3, source.begin() + 336, expected.begin() + 1);
  int32_t minusThree = -3;
  std::memcpy(expected.data() + 500, &minusThree, 4);
  expected[510] = 0x34;
  expected[511] = 0x12;
  EXPECT_EQ(destination, expected);
}

TEST(Gather, BadSegmentsAreNamed) {
  unsigned char byte = 0;
  GatherSegment wide{0, address(&byte), 9, 0};
  Status status = gatherOnHost(&wide, 1);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            "gather segment 0: a store writes at most 8 bytes; got 9");
  GatherSegment segments[] = {{address(&byte), address(&byte), 0, 0},
                              {address(&byte), 0, 1, 0}};
  status = gatherOnHost(segments, 2);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            "gather segment 1: 1 bytes to a null destination");
  // The launch checks before it needs a driver.
  status = launchGather(segments, 2, nullptr, -1);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.message(),
            "gather segment 1: 1 bytes to a null destination");
}

TEST(Gather, DeviceKernelMatchesTheHostForm) {
  Result<const CudaDriver *> driver = CudaDriver::get();
  if (!driver)
    GTEST_SKIP() << driver.status().message();
  const CudaDriver &cu = **driver;
  ScopedDevice scope;
  ASSERT_TRUE(scope.enter(cu, -1));
  constexpr size_t kBytes = 1 << 20;
  std::mt19937_64 random(7);
  std::vector<unsigned char> source(kBytes), initial(kBytes);
  for (auto &b : source)
    b = static_cast<unsigned char>(random());
  for (auto &b : initial)
    b = static_cast<unsigned char>(random());
  CUdeviceptr deviceSource = 0, deviceDestination = 0;
  ASSERT_EQ(cu.cuMemAlloc(&deviceSource, kBytes), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemAlloc(&deviceDestination, kBytes), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cu.cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyHtoDAsync(deviceSource, source.data(), kBytes, stream),
            CUDA_SUCCESS);
  ASSERT_EQ(
      cu.cuMemcpyHtoDAsync(deviceDestination, initial.data(), kBytes, stream),
      CUDA_SUCCESS);
  // 40 segments (three launches) in disjoint 24 KB windows: every
  // alignment of source and destination, odd and empty lengths, stores.
  std::vector<GatherSegment> onDevice, onHost;
  std::vector<unsigned char> expected = initial;
  for (uint64_t i = 0; i < 40; ++i) {
    uint64_t window = i * 24576;
    uint64_t from = window + random() % 32, to = window + 12288 + random() % 32;
    uint64_t bytes = i % 7 == 3 ? 0 : random() % 12000;
    if (i % 5 == 0)
      bytes = 16 * (random() % 700);
    GatherSegment segment{deviceSource + from, deviceDestination + to, bytes,
                          0};
    GatherSegment hostSegment{address(source.data() + from),
                              address(expected.data() + to), bytes, 0};
    if (i % 9 == 4) {
      uint64_t value = random();
      segment = {0, deviceDestination + to, 1 + i % 8, value};
      hostSegment = {0, address(expected.data() + to), 1 + i % 8, value};
    }
    onDevice.push_back(segment);
    onHost.push_back(hostSegment);
  }
  ASSERT_TRUE(prepareGather(-1));
  Status launched = launchGather(onDevice.data(), onDevice.size(), stream, -1);
  ASSERT_TRUE(launched) << launched.message();
  ASSERT_TRUE(gatherOnHost(onHost.data(), onHost.size()));
  std::vector<unsigned char> got(kBytes);
  ASSERT_EQ(cu.cuMemcpyDtoHAsync(got.data(), deviceDestination, kBytes, stream),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(got, expected);
  cu.cuStreamDestroy(stream);
  cu.cuMemFree(deviceSource);
  cu.cuMemFree(deviceDestination);
}

} // namespace
