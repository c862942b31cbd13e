//===- OptFuzzer.cpp - what thd-opt does with an input file ---------------===//
//
// Arbitrary bytes as thd-opt's input file: read through the tools' bounded
// reader (compiler/InputFile.h, from a memory file as a path, as the tool
// opens its argument), screened (compiler/SourceScreen.h), parsed with
// thd-opt's registry and verified, as MlirOptMain does, then, where that
// holds, lowered by the host pipeline thd-opt runs as --thd-to-host after
// static shapes and fusion. thd-opt parsed without the screen, and a
// mutation fuzzer reached MLIR's dense-array crash through it in seconds;
// this target keeps that path under the fuzzer. Every outcome is a module
// or diagnostics, never a crash or a hang (run with -timeout). The mutator
// is the pipeline fuzzer's (SSA rewiring, deep nesting) over the same seeds.
//
// The thd lowerings (to loops, and to a GPU kernel on a copy) run with the
// pass manager's verifier off and are checked here: either may refuse the
// fused pipeline (a step it cannot lower: diagnostics and failure, an
// outcome like any other), but where one succeeds the IR must verify. IR
// that does not was built invalid by the lowering, a bug, and aborts: the
// lowering once placed a scalar after the loop that used it ("operand does
// not dominate this use"), which the pass manager's verifier turned into
// an ordinary error that this target passed by. The passes before them are
// not checked so: thd-force-static-shapes relies on the verifiers after it
// to refuse capacities the ops cannot take (cu_seqlens of N entries beside
// cu_seqlens_padded of N+1), which is how those are meant to be refused.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"
#include "PipelineMutator.h"

#include "codegen/CodegenPasses.h"
#include "compiler/InputFile.h"
#include "compiler/Pipelines.h"
#include "compiler/SourceScreen.h"
#include "passes/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace {
/// Runs `lowering` on `module` without the pass manager's verifier, and
/// aborts where it succeeds but leaves IR that does not verify. Returns
/// whether it succeeded.
bool lowerChecked(mlir::ModuleOp module, std::unique_ptr<mlir::Pass> lowering) {
  std::string name = lowering->getArgument().str();
  mlir::PassManager pm(module.getContext());
  pm.enableVerifier(false);
  pm.addPass(std::move(lowering));
  if (mlir::failed(pm.run(module)))
    return false;
  if (mlir::failed(mlir::verify(module))) {
    llvm::errs() << "thdc-fuzz-opt: " << name
                 << " succeeded but left IR that does not verify\n";
    std::abort();
  }
  return true;
}
} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  return thdc::fuzz::mutatePipelineText(data, size, maxSize, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The input as a file the tool opens by name.
  int fd = memfd_create("thd-opt-input", MFD_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t written = 0;
  while (written < size) {
    ssize_t n = write(fd, data + written, size - written);
    if (n <= 0)
      break;
    written += size_t(n);
  }
  auto buffer = thdc::readInputFile("/proc/self/fd/" + std::to_string(fd),
                                    thdc::kMaxSourceBytes);
  close(fd);
  if (!buffer) {
    llvm::consumeError(buffer.takeError());
    return 0;
  }
  thdc::fuzz::FuzzContext fuzzContext;
  mlir::MLIRContext &context = fuzzContext.context();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  if (mlir::failed(thdc::screenUpstreamCrashes(context, sourceMgr)))
    return 0;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module || mlir::failed(mlir::verify(*module)))
    return 0;
  mlir::PassManager pm(&context);
  pm.addPass(mlir::thd::createTHDForceStaticShapes());
  pm.addPass(mlir::thd::createTHDVerifyCapturable());
  pm.addPass(mlir::thd::createTHDFuse());
  if (mlir::failed(pm.run(*module)))
    return 0;
  mlir::OwningOpRef<mlir::ModuleOp> copy = (*module).clone();
  (void)lowerChecked(*copy, mlir::thd::createTHDLowerToGPU());
  if (!lowerChecked(*module, mlir::thd::createTHDLowerToLoops()))
    return 0;
  // The rest of the host pipeline (its own lowering finds nothing left).
  mlir::PassManager host(&context);
  thdc::buildHostPipeline(host);
  (void)host.run(*module);
  return 0;
}
