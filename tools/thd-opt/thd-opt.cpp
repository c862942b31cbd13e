//===- thd-opt.cpp - opt driver for the thd dialect -----------------------===//

#include "codegen/CodegenPasses.h"
#include "dialect/THDOps.h"
#include "passes/Passes.h"
#include "tools/CommandLine.h"
#include "tools/ParamOptions.h"
#include "tools/Version.h"

#include "mlir/Debug/Counter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

static cl::OptionCategory thdOptCategory("thd-opt options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<input file>"),
                                          cl::init("-"),
                                          cl::cat(thdOptCategory));
static cl::opt<std::string> outputFilename("o", cl::desc("Output filename"),
                                           cl::value_desc("filename"),
                                           cl::init("-"),
                                           cl::cat(thdOptCategory));

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::thd::registerTHDPasses();
  mlir::thd::registerTHDCodegenPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::thd::THDDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();

  // mlir::registerAndParseCLIOptions, with `--help` limited to what applies.
  thdc::registerParamOption(thdOptCategory);
  thdc::registerToolOptions(thdOptCategory, [&] {
    mlir::MlirOptMainConfig::registerCLOptions(registry);
    thdc::registerMlirCommandLineOptions();
    mlir::tracing::DebugCounter::registerCLOptions();
  });
  thdc::setVersionPrinter("thd-opt");
  std::string helpHeader = "thd-opt: the thdc optimizer driver\nDialects: ";
  llvm::raw_string_ostream(helpHeader)
      << llvm::join(registry.getDialectNames(), ", ");
  cl::ParseCommandLineOptions(argc, argv, helpHeader);

  thdc::addParamOverrides(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}
