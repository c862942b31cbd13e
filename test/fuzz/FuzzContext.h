//===- FuzzContext.h - the context of one fuzz input ------------*- C++ -*-===//
//
// The context the fuzz targets that compile text run each input in: the
// compiler's (createCompilerContext), with threading disabled, and every
// diagnostic dropped (most mutated inputs are errors, and their messages
// are not what the targets check).
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TEST_FUZZ_FUZZCONTEXT_H
#define THDC_TEST_FUZZ_FUZZCONTEXT_H

#include "compiler/Context.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace thdc::fuzz {

class FuzzContext {
public:
  FuzzContext()
      : owner(createCompilerContext(mlir::MLIRContext::Threading::DISABLED)),
        ignore(owner.get(),
               [](mlir::Diagnostic &) { return mlir::success(); }) {}

  mlir::MLIRContext &context() { return *owner; }

private:
  std::unique_ptr<mlir::MLIRContext> owner;
  mlir::ScopedDiagnosticHandler ignore;
};

} // namespace thdc::fuzz

#endif // THDC_TEST_FUZZ_FUZZCONTEXT_H
