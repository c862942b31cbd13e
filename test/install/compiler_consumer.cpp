//===- compiler_consumer.cpp - thdc's compiler from an installed thdc -----===//
//
//   thdc-compiler-consumer PIPELINE.mlir
//
// Compiles a pipeline with the installed compiler libraries and prints its
// signature and the PTX kernel's entry line.
//
//===----------------------------------------------------------------------===//

#include "compiler/Context.h"
#include "compiler/Targets.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: thdc-compiler-consumer PIPELINE.mlir\n";
    return 2;
  }
  std::unique_ptr<mlir::MLIRContext> contextOwner =
      thdc::createCompilerContext();
  mlir::MLIRContext &context = *contextOwner;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  auto file = llvm::MemoryBuffer::getFile(argv[1]);
  if (!file) {
    llvm::errs() << "error: cannot read " << argv[1] << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  auto module = thdc::loadPipeline(context, sourceMgr, {});
  if (!module)
    return 1;
  auto signature = thdc::describePipeline(*module);
  int64_t grid[3], block[3];
  auto ptx = thdc::compileToPtx(*module, thdc::GpuOptions(), grid, block);
  if (mlir::failed(signature) || mlir::failed(ptx))
    return 1;
  llvm::outs() << "entry " << signature->entry << ", "
               << signature->buffers.size() << " buffers, block " << block[0]
               << "\n";
  llvm::StringRef text(*ptx);
  size_t entry = text.find(".visible .entry");
  llvm::outs() << text.substr(entry, text.find('(', entry) - entry) << "\n";
  return 0;
}
