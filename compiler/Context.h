//===- Context.h - the MLIR context thdc compiles in ------------*- C++ -*-===//
//
// What a context needs to compile a pipeline: the thd dialect and every
// dialect the lowering produces, their conversions to the LLVM dialect and
// their translations to LLVM IR, and the NVVM target. Every context the
// compiler, the JIT and the tools compile in comes from
// createCompilerContext; thd-opt, whose MlirOptMain builds its own context,
// takes the same registry (registerCompilerDialects).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_COMPILER_CONTEXT_H
#define THDC_COMPILER_CONTEXT_H

#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace thdc {

/// Registers every dialect, interface and translation the compiler uses.
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// A context set up for thdc: the dialects of registerCompilerDialects, and
/// diagnostics without the operation printed beside them (a pipeline's
/// diagnostics name its source locations). `threading` DISABLED for a
/// compile that must not start threads (the JIT runs it under the fatal
/// error guard, compiler/FatalErrorGuard.h).
std::unique_ptr<mlir::MLIRContext> createCompilerContext(
    mlir::MLIRContext::Threading threading =
        mlir::MLIRContext::Threading::ENABLED);

} // namespace thdc

#endif // THDC_COMPILER_CONTEXT_H
