//===- CommandLine.cpp - what `--help` of thdc's tools shows --------------===//

#include "tools/CommandLine.h"
#include "compiler/Pipelines.h"

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
  // `--mlir-print-ir-before=PASS` names passes from the registry.
  registerCompilerPasses();
  mlir::registerPassManagerCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
}

thdc::OptionScope::OptionScope(std::initializer_list<cl::Option *> options)
    : options(options) {}

thdc::OptionScope::~OptionScope() {
  for (cl::Option *option : options)
    option->removeArgument();
}

thdc::CompilerCommandLineOptions::CompilerCommandLineOptions() {
  mlir::applyDefaultTimingManagerCLOptions(timing);
  rootScope = timing.getRootScope();
  setPassManagerRunner([this](mlir::PassManager &pm, llvm::StringRef stage,
                              llvm::function_ref<mlir::LogicalResult()> run)
                           -> mlir::LogicalResult {
    if (mlir::failed(mlir::applyPassManagerCLOptions(pm)))
      return mlir::failure();
    if (!timing.isEnabled())
      return run();
    // Timers are keyed by pass address, which a later pass manager may
    // reuse: each run gets a scope of its own.
    mlir::TimingScope stageScope = rootScope.nest(
        reinterpret_cast<const void *>(++stages), [&] { return stage.str(); });
    pm.enableTiming(stageScope);
    return run();
  });
}

thdc::CompilerCommandLineOptions::~CompilerCommandLineOptions() {
  setPassManagerRunner(nullptr);
}
