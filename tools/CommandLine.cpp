//===- CommandLine.cpp - what `--help` of thdc's tools shows --------------===//

#include "tools/CommandLine.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/DenseSet.h"

namespace cl = llvm::cl;

cl::OptionCategory &thdc::mlirOptionCategory() {
  static cl::OptionCategory category("MLIR options");
  return category;
}

void thdc::registerToolOptions(cl::OptionCategory &toolCategory,
                               llvm::function_ref<void()> registerMlirOptions) {
  // LLVM's own options are registered when the libraries load; the MLIR
  // options are the ones that appear while `registerMlirOptions` runs.
  llvm::DenseSet<cl::Option *> before;
  for (auto &entry : cl::getRegisteredOptions())
    before.insert(entry.second);
  registerMlirOptions();
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.second;
    if (!before.contains(option) &&
        !llvm::is_contained(option->Categories, &mlirOptionCategory()))
      option->addCategory(mlirOptionCategory());
  }
  cl::HideUnrelatedOptions({&toolCategory, &mlirOptionCategory()});
}

void thdc::registerMlirCommandLineOptions() {
  mlir::registerPassManagerCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
}
