//===- PtxCompilerTest.cpp - nvJitLink in-process, and its fallback -------===//

#include "runtime/PtxCompiler.h"
#include "compiler/Bundle.h"
#include "compiler/Context.h"
#include "compiler/Jit.h"
#include "runtime/Cache.h"
#include "runtime/Manifest.h"
#include "test/unit/JitTestSupport.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace thdc;
using namespace thdc::runtime;

namespace {
constexpr char kTinyPtx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry tiny(.param .u64 p)\n{\n.reg .b64 %rd<2>;\n"
    "ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd1, %rd1;\n"
    "st.global.u64 [%rd1], 7;\nret;\n}\n";

/// Runs `body` in a new process (re-executed, so nvJitLink is not loaded
/// there yet; `body` may change its environment) and expects exit code 0.
#define EXPECT_IN_NEW_PROCESS(body)                                            \
  do {                                                                         \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                            \
    EXPECT_EXIT(std::exit(body()), ::testing::ExitedWithCode(0), "");          \
  } while (false)

/// Writes the GPU bundle of the example pipeline into a new folder; returns
/// its manifest (empty entry on failure).
Manifest writeExampleGpuBundle(const std::string &dir) {
  std::ifstream file(THDC_SOURCE_DIR "/examples/megatron_graph_step.mlir");
  std::stringstream text;
  text << file.rdbuf();
  auto context = createCompilerContext(mlir::MLIRContext::Threading::DISABLED);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text.str(), "step.mlir"),
      llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      loadPipeline(*context, sourceMgr, {});
  Manifest written;
  if (!module)
    return written;
  GpuOptions gpu;
  gpu.cubinInProcess = true;
  if (mlir::failed(
          writeBundle(*module, gpu, /*withHost=*/false, dir, &written)))
    return Manifest();
  return written;
}
} // namespace

TEST(PtxCompiler, CompilesPtxToACubinInProcess) {
  if (Status available = compilePtxAvailable(); !available)
    GTEST_SKIP() << available.message();
  Result<std::string> cubin = compilePtxInProcess(kTinyPtx, "sm_90", 3);
  ASSERT_TRUE(cubin) << cubin.status().message();
  EXPECT_EQ(cubin->substr(0, 4), "\x7f"
                                 "ELF");
  EXPECT_FALSE(ptxCompilerVersion().empty());
  Result<std::string> broken =
      compilePtxInProcess(".version 8.0\n.target sm_90\nnot ptx", "sm_90", 3);
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.status().message().find("nvJitLink failed to compile"),
            std::string::npos)
      << broken.status().message();
}

TEST(PtxCompiler, MissingLibraryIsAnErrorNotACrash) {
  EXPECT_IN_NEW_PROCESS([] {
    setenv("THDC_NVJITLINK", "/nonexistent/libnvJitLink.so.13", 1);
    Result<std::string> cubin = compilePtxInProcess(kTinyPtx, "sm_90", 3);
    if (cubin || compilePtxAvailable())
      return 1;
    return cubin.status().message().find("nvJitLink not found (tried "
                                         "/nonexistent/libnvJitLink.so.13)") ==
                   0
               ? 0
               : 2;
  });
}

TEST(PtxCompiler, GpuBundleCarriesTheInProcessCubin) {
  if (!compilePtxAvailable())
    GTEST_SKIP() << "no nvJitLink";
  std::string dir = thdc::testing::freshFolder("ptx-compiler");
  Manifest written = writeExampleGpuBundle(dir);
  ASSERT_FALSE(written.entry.empty());
  ASSERT_EQ(written.cubinFile, written.entry + kCubinFileSuffix);
  Result<std::string> cubin = readWholeFile(joinPath(dir, written.cubinFile));
  ASSERT_TRUE(cubin);
  EXPECT_EQ(cubin->substr(0, 4), "\x7f"
                                 "ELF");
  EXPECT_EQ(written.fileHashes.count(written.cubinFile), 1u);
  Result<Manifest> read = readManifest(dir, /*requireHash=*/true);
  ASSERT_TRUE(read) << read.status().message();
  EXPECT_EQ(read->cubinFile, written.cubinFile);
}

TEST(PtxCompiler, WithoutNvJitLinkTheBundleHasThePtxAlone) {
  std::string dir = thdc::testing::freshFolder("ptx-compiler-fallback");
  EXPECT_IN_NEW_PROCESS([&] {
    setenv("THDC_NVJITLINK", "", 1);
    Manifest written = writeExampleGpuBundle(dir);
    if (written.entry.empty())
      return 1;
    if (!written.cubinFile.empty())
      return 2;
    return readWholeFile(joinPath(dir, written.ptxFile)) ? 0 : 3;
  });
}

TEST(PtxCompiler, OptLevelAndCompilerAreInTheJitKey) {
  JitOptions options;
  auto key = [&] { return jitCacheKey("build", "sm_90", options, "text", {}); };
  unsetenv("THDC_PTX_OPT_LEVEL");
  unsetenv("THDC_PTX_COMPILER");
  std::string base = key();
  EXPECT_EQ(ptxOptLevel(), 3);
  setenv("THDC_PTX_OPT_LEVEL", "0", 1);
  EXPECT_EQ(ptxOptLevel(), 0);
  std::string levelZero = key();
  unsetenv("THDC_PTX_OPT_LEVEL");
  EXPECT_EQ(ptxCompilerChoice(), PtxCompilerChoice::Driver);
  setenv("THDC_PTX_COMPILER", "nvjitlink", 1);
  EXPECT_EQ(ptxCompilerChoice(), PtxCompilerChoice::NvJitLink);
  std::string inProcess = key();
  setenv("THDC_PTX_COMPILER", "driver", 1);
  EXPECT_EQ(key(), base);
  unsetenv("THDC_PTX_COMPILER");
  EXPECT_NE(base, levelZero);
  EXPECT_NE(base, inProcess);
  EXPECT_NE(levelZero, inProcess);
  EXPECT_EQ(base, key());
}
