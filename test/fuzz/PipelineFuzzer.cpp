//===- PipelineFuzzer.cpp - parser, verifiers, static shapes and fusion ---===//
//
// Arbitrary text as a pipeline: parsed with every dialect the compiler
// registers, verified, made static, checked for capturability and fused
// (thdc::loadPipeline). Every outcome is a module or diagnostics, never a
// crash.
//
//===----------------------------------------------------------------------===//

#include "codegen/Compiler.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    thdc::registerCompilerDialects(*r);
    return r;
  }();
  mlir::MLIRContext context(*registry);
  context.disableMultithreading();
  context.printOpOnDiagnostic(false);
  mlir::ScopedDiagnosticHandler ignore(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.mlir"),
      llvm::SMLoc());
  (void)thdc::loadPipeline(context, sourceMgr, {});
  return 0;
}
