//===- thdc.cpp - compile a pipeline into a bundle ------------------------===//
//
//   thdc PIPELINE.mlir -o OUT [--param NAME=VALUE ...] [--chip sm_90|sm_80]
//   thdc PIPELINE.mlir --emit=ptx|gpu-mlir|host-mlir
//
// Forces static shapes, fuses the pipeline into one kernel and writes the
// bundle (see compiler/Bundle.h) into the folder OUT.
//
//===----------------------------------------------------------------------===//

#include "compiler/Bundle.h"
#include "compiler/Context.h"
#include "compiler/GpuOptions.h"
#include "compiler/InputFile.h"
#include "compiler/Targets.h"
#include "tools/CommandLine.h"
#include "tools/ParamOptions.h"
#include "tools/ToolMains.h"
#include "tools/Version.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {
enum class Emit { Bundle, Ptx, GpuMlir, HostMlir };

/// thdc's options, registered while thdcMain runs (tools/ToolMains.h).
struct ThdcOptions {
  explicit ThdcOptions(cl::OptionCategory &category) : category(category) {}
  cl::OptionCategory &category;
  cl::opt<std::string> inputFile{cl::Positional, cl::desc("<pipeline.mlir>"),
                                 cl::Required, cl::cat(category)};
  cl::opt<std::string> outputDir{"o", cl::desc("Bundle folder to write"),
                                 cl::value_desc("folder"), cl::cat(category)};
  cl::opt<Emit> emit{
      "emit", cl::desc("What to produce"), cl::init(Emit::Bundle),
      cl::values(
          clEnumValN(Emit::Bundle, "bundle", "the bundle folder given by -o"),
          clEnumValN(Emit::Ptx, "ptx", "the kernel's PTX, on stdout"),
          clEnumValN(Emit::GpuMlir, "gpu-mlir",
                     "the kernel in the NVVM dialect before PTX (what "
                     "thd-opt --thd-to-ptx prints), on stdout"),
          clEnumValN(Emit::HostMlir, "host-mlir",
                     "the host code in the LLVM dialect (what thd-opt "
                     "--thd-to-host prints), on stdout")),
      cl::cat(category)};
  cl::opt<bool> emitPtx{"emit-ptx", cl::desc("Same as --emit=ptx"),
                        cl::cat(category)};
  /// The GPU back end's options, one flag each (compiler/GpuOptions.def).
  struct GpuFlags {
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP)                      \
  cl::opt<TYPE> FIELD{FLAG, cl::desc(HELP), cl::init(DEFAULT),                 \
                      cl::cat(category)};
    explicit GpuFlags(cl::OptionCategory &category) : category(category) {}
    cl::OptionCategory &category;
#include "compiler/GpuOptions.def"
    thdc::OptionScope scope{{
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP) &FIELD,
#include "compiler/GpuOptions.def"
    }};

    thdc::GpuOptions options() const {
      thdc::GpuOptions options;
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP) options.FIELD = FIELD;
#include "compiler/GpuOptions.def"
      return options;
    }
  } gpu{category};
  cl::opt<bool> noHost{"no-host",
                       cl::desc("Do not build the host shared object"),
                       cl::cat(category)};
  cl::opt<bool> noCubin{
      "no-cubin",
      cl::desc("Do not assemble the kernel for --chip with ptxas (the "
               "bundle then carries only the PTX)"),
      cl::cat(category)};
  thdc::OptionScope scope{
      {&inputFile, &outputDir, &emit, &emitPtx, &noHost, &noCubin}};
};
} // namespace

int thdc::tools::thdcMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  static cl::OptionCategory thdcCategory("thdc options");
  ThdcOptions options(thdcCategory);
  auto &[category, inputFile, outputDir, emit, emitPtx, gpuFlags, noHost,
         noCubin, scope] = options;
  thdc::registerParamOption(thdcCategory);
  thdc::registerToolOptions(thdcCategory, thdc::registerMlirCommandLineOptions);
  thdc::setVersionPrinter("thdc");
  cl::ParseCommandLineOptions(argc, argv, "thdc: compile a THD pipeline\n");
  thdc::CompilerCommandLineOptions mlirOptions;
  thdc::GpuOptions gpu = gpuFlags.options();
  gpu.assembleCubin = !noCubin;
  if (std::optional<std::string> error = thdc::gpuOptionsError(gpu)) {
    llvm::errs() << "error: --" << *error << "\n";
    return 1;
  }
  // The input first: a missing file is the first thing to hear about.
  auto file = thdc::readInputFile(inputFile, thdc::kMaxSourceBytes);
  if (!file) {
    llvm::errs() << "error: " << llvm::toString(file.takeError()) << "\n";
    return 1;
  }
  Emit what = emitPtx ? Emit::Ptx : emit.getValue();
  if (what == Emit::Bundle && outputDir.empty()) {
    llvm::errs() << "error: give -o FOLDER for the bundle, or --emit-ptx\n";
    return 1;
  }
  llvm::Expected<llvm::StringMap<int64_t>> params =
      thdc::parsedParamOverrides();
  if (!params) {
    llvm::errs() << "error: " << llvm::toString(params.takeError()) << "\n";
    return 1;
  }

  std::unique_ptr<mlir::MLIRContext> contextOwner =
      thdc::createCompilerContext();
  mlir::MLIRContext &context = *contextOwner;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());

  mlir::OwningOpRef<mlir::ModuleOp> module =
      thdc::loadPipeline(context, sourceMgr, *params);
  if (!module)
    return 1;
  switch (what) {
  case Emit::Ptx: {
    int64_t grid[3], block[3];
    mlir::FailureOr<std::string> ptx =
        thdc::compileToPtx(*module, gpu, grid, block);
    if (mlir::failed(ptx))
      return 1;
    llvm::outs() << *ptx;
    return 0;
  }
  case Emit::GpuMlir: {
    auto lowered = thdc::lowerToNVVM(*module, gpu);
    if (mlir::failed(lowered))
      return 1;
    llvm::outs() << **lowered << "\n";
    return 0;
  }
  case Emit::HostMlir:
    if (mlir::failed(thdc::runHostPipeline(*module)))
      return 1;
    llvm::outs() << *module << "\n";
    return 0;
  case Emit::Bundle:
    break;
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
    llvm::errs() << "error: cannot create " << outputDir << ": " << ec.message()
                 << "\n";
    return 1;
  }
  return mlir::failed(thdc::writeBundle(*module, gpu, !noHost, outputDir)) ? 1
                                                                           : 0;
}
