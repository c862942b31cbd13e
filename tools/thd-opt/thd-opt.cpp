//===- thd-opt.cpp - opt driver for the thd dialect -----------------------===//
//
// MlirOptMain with thdc's passes, dialects and pipelines, `--param`, a
// `--help` limited to what applies, and the input read with a bound and
// screened as thdc screens it (compiler/InputFile.h, SourceScreen.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Context.h"
#include "compiler/InputFile.h"
#include "compiler/Pipelines.h"
#include "compiler/SourceScreen.h"
#include "passes/Passes.h"
#include "tools/CommandLine.h"
#include "tools/ParamOptions.h"
#include "tools/ToolMains.h"
#include "tools/Version.h"

#include "mlir/Debug/Counter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {
/// thd-opt's options, registered while thdOptMain runs (tools/ToolMains.h).
struct ThdOptOptions {
  explicit ThdOptOptions(cl::OptionCategory &category) : category(category) {}
  cl::OptionCategory &category;
  cl::opt<std::string> inputFilename{cl::Positional, cl::desc("<input file>"),
                                     cl::init("-"), cl::cat(category)};
  cl::opt<std::string> outputFilename{"o", cl::desc("Output filename"),
                                      cl::value_desc("filename"), cl::init("-"),
                                      cl::cat(category)};
  thdc::OptionScope scope{{&inputFilename, &outputFilename}};
};
} // namespace

int thdc::tools::thdOptMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  static cl::OptionCategory thdOptCategory("thd-opt options");
  ThdOptOptions options(thdOptCategory);
  const std::string &inputFilename = options.inputFilename;
  const std::string &outputFilename = options.outputFilename;
  thdc::registerCompilerPasses();

  mlir::DialectRegistry registry;
  thdc::registerCompilerDialects(registry);

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

  llvm::Expected<llvm::StringMap<int64_t>> params =
      thdc::parsedParamOverrides();
  if (!params) {
    llvm::errs() << "error: " << llvm::toString(params.takeError()) << "\n";
    return 1;
  }
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  // `--param` is thd-set-params before the requested passes: the input is
  // verified as parsed (with its declared defaults), then again with the
  // values set, after that pass.
  mlir::MlirOptMainConfig requested = config;
  if (!params->empty())
    config.setPassPipelineSetupFn(
        [&requested, &params](mlir::PassManager &pm) -> mlir::LogicalResult {
          pm.addPass(mlir::thd::createSetParamsPass(*params));
          return requested.setupPassPipeline(pm);
        });
  // The input is read with a bound and screened for what MLIR's parser
  // crashes on, as thdc's is (compiler/InputFile.h, SourceScreen.h).
  auto read = thdc::readInputFile(inputFilename, thdc::kMaxSourceBytes);
  if (!read) {
    llvm::errs() << "error: " << llvm::toString(read.takeError()) << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MemoryBuffer> input = std::move(*read);
  {
    mlir::MLIRContext screenContext(mlir::MLIRContext::Threading::DISABLED);
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBuffer(input->getMemBufferRef(),
                                         /*RequiresNullTerminator=*/false),
        llvm::SMLoc());
    mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &screenContext);
    if (mlir::failed(thdc::screenUpstreamCrashes(screenContext, sourceMgr)))
      return 1;
  }
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
