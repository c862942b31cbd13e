//===- PipelineFuzzer.cpp - parser, verifiers, static shapes and fusion ---===//
//
// Arbitrary text as a pipeline: parsed with every dialect the compiler
// registers, verified, made static, checked for capturability and fused
// (thdc::loadPipeline). Every outcome is a module or diagnostics, never a
// crash (nor a hang: run with -timeout).
//
// Inputs are text, as the tools read them. The mutator is libFuzzer's byte
// mutation plus, one time in three, a structural one on the same text:
// rewireSsaUse (SsaRewire.h) makes a use name another definition (the op's
// own result, a later value, any value), and one time in sixteen
// nestDeeply (Nesting.h) inserts brackets thousands deep, which overflowed
// the parser's stack before the screen's depth bound. That reaches graphs the seeds and
// byte mutations never make, such as `%p = thd.pad_tail %p ...`: the parser
// accepts a use before its definition, and only the dominance check, which
// runs after every op's verifier, rejects the cycle, so the verifiers see it.
// Text rather than a structured (parsed) input, because most mutated inputs
// no longer parse, and the rewiring should apply to them too. Seeds: the
// examples and test pipelines (gen-pipeline-inputs.py, at build time) and
// corpus/pipeline; dictionary: pipeline.dict plus the dialect's words.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"
#include "PipelineMutator.h"

#include "compiler/Compiler.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  return thdc::fuzz::mutatePipelineText(data, size, maxSize, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  thdc::fuzz::FuzzContext fuzzContext;
  mlir::MLIRContext &context = fuzzContext.context();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.mlir"),
      llvm::SMLoc());
  (void)thdc::loadPipeline(context, sourceMgr, {});
  return 0;
}
