//===- Context.h - the MLIR context thdc compiles in ------------*- C++ -*-===//
//
// What a context needs to compile a pipeline: the thd dialect and every
// dialect the lowering produces, their conversions to the LLVM dialect and
// their translations to LLVM IR, and the NVVM target.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_CONTEXT_H
#define THDC_COMPILER_CONTEXT_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace thdc {

/// Registers every dialect, interface and translation the compiler uses.
void registerCompilerDialects(mlir::DialectRegistry &registry);

} // namespace thdc

#endif // THDC_COMPILER_CONTEXT_H
