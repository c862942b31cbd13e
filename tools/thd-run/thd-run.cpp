//===- thd-run.cpp - run a pipeline on JSON data --------------------------===//
//
//   thd-run PIPELINE.mlir --input IN.json [--output OUT.json]
//           [--param NAME=VALUE ...] [--backend cpu|cuda|reference]
//
// Compiles the pipeline in-process (static shapes, one fused kernel) and runs
// it once. IN.json maps every argument name to a flat array; the results are
// written under their names (booleans as 0/1), to OUT.json or stdout.
// `--backend reference` runs the pipeline through the reference interpreter
// instead of compiled code, so that the backends' outputs can be diffed.
//
// Exit status: 0 when the pipeline ran and its `status` output (if it has
// one) is 0; kExitInvalidMicrobatch (3) when it ran but the status is not 0
// (the fault bits are named on stderr and the outputs, the empty
// microbatch, are still written); 1 for any error (no outputs).
//
//===----------------------------------------------------------------------===//

#include "compiler/Context.h"
#include "compiler/InputFile.h"
#include "compiler/Jit.h"
#include "compiler/Targets.h"
#include "interpreter/Interpreter.h"
#include "reference/StatusBits.h"
#include "runtime/CudaDriver.h"
#include "tools/CommandLine.h"
#include "tools/ParamOptions.h"
#include "tools/ToolMains.h"
#include "tools/Version.h"
#include "tools/thd-run/HostBuffers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace cl = llvm::cl;
using namespace thdc;

namespace {
/// thd-run's options, registered while thdRunMain runs (see
/// tools/ToolMains.h).
struct ThdRunOptions {
  explicit ThdRunOptions(cl::OptionCategory &category) : category(category) {}
  cl::OptionCategory &category;
  cl::opt<std::string> pipelineFile{cl::Positional, cl::desc("<pipeline.mlir>"),
                                    cl::Required, cl::cat(category)};
  cl::opt<std::string> inputFile{"input", cl::desc("JSON inputs"),
                                 cl::value_desc("file"), cl::Required,
                                 cl::cat(category)};
  cl::opt<std::string> outputFile{
      "output", cl::desc("JSON outputs (default: stdout)"),
      cl::value_desc("file"), cl::init("-"), cl::cat(category)};
  cl::opt<std::string> backend{
      "backend",
      cl::desc("Where to run: cpu, cuda or reference (the interpreter)"),
      cl::init("cpu"), cl::cat(category)};
  OptionScope scope{{&pipelineFile, &inputFile, &outputFile, &backend}};
};

/// The options of the running thdRunMain, for the helpers below.
const ThdRunOptions *tool = nullptr;
} // namespace

static int fail(const llvm::Twine &message) {
  llvm::errs() << "error: " << message << "\n";
  return 1;
}

/// Reads the JSON inputs for `specs`; reports errors naming the argument.
static Result<std::vector<runtime::HostBuffer>>
readInputFile(llvm::ArrayRef<runtime::BufferDesc> specs) {
  auto inputText = readInputFile(tool->inputFile, kMaxJsonInputBytes);
  if (!inputText)
    return Status::error(llvm::toString(inputText.takeError()));
  Result<std::vector<runtime::HostBuffer>> inputs =
      runtime::readInputs((*inputText)->getBuffer(), specs);
  if (!inputs)
    return Status::error(tool->inputFile + ": " + inputs.status().message());
  return inputs;
}

/// A pipeline's buffers as thd-run exchanges them: the inputs read from
/// --input and the outputs zero-filled, each in the buffers' order.
struct ExchangedBuffers {
  std::vector<runtime::HostBuffer> inputs, outputs;
};

/// Reads the inputs among `buffers` and allocates the outputs; fails naming a
/// buffer whose element type thd-run cannot exchange, or the input error.
static Result<ExchangedBuffers>
exchangeBuffers(llvm::ArrayRef<runtime::BufferDesc> buffers) {
  std::vector<runtime::BufferDesc> inputSpecs, outputSpecs;
  for (const runtime::BufferDesc &buffer : buffers) {
    if (!runtime::parseElementType(buffer.type))
      return Status::error("buffer '" + buffer.name +
                           "' has the element type " + buffer.type +
                           ", which thd-run cannot exchange");
    (buffer.isOutput ? outputSpecs : inputSpecs).push_back(buffer);
  }
  // The inputs first: a bad input file fails before outputs are allocated.
  Result<std::vector<runtime::HostBuffer>> inputs = readInputFile(inputSpecs);
  if (!inputs)
    return inputs.status();
  ExchangedBuffers exchanged;
  exchanged.inputs = std::move(*inputs);
  for (const runtime::BufferDesc &spec : outputSpecs)
    exchanged.outputs.emplace_back(spec);
  return exchanged;
}

/// The exit status of a run whose `status` output is not 0.
constexpr int kExitInvalidMicrobatch = 3;

/// A nonzero `status` output (thd.validate's fault bits) is named on stderr;
/// the outputs are still written (they hold the empty microbatch). Returns
/// whether there was one.
static bool reportStatus(llvm::ArrayRef<runtime::HostBuffer> outputs) {
  bool invalid = false;
  for (const runtime::HostBuffer &buffer : outputs) {
    const runtime::BufferDesc &desc = buffer.desc();
    if (desc.name != "status" || desc.type != "i32" || desc.elements != 1)
      continue;
    if (int32_t status = *buffer.as<int32_t>()) {
      llvm::errs() << "thd-run: status " << status << " = "
                   << reference::describeStatus(status) << "\n";
      invalid = true;
    }
  }
  return invalid;
}

static int writeOutputFile(llvm::ArrayRef<runtime::HostBuffer> outputs) {
  const bool invalid = reportStatus(outputs);
  std::string error;
  auto output = mlir::openOutputFile(tool->outputFile, &error);
  if (!output)
    return fail(error);
  output->os() << runtime::writeOutputs(outputs, /*pretty=*/true) << "\n";
  output->keep();
  return invalid ? kExitInvalidMicrobatch : 0;
}

/// --backend cuda: compiled by the JIT for the GPU found, run through the
/// runtime on a stream of its own.
static int runOnGpu(const llvm::StringMap<int64_t> &overrides) {
  if (auto driver = runtime::CudaDriver::get(); !driver)
    return fail("--backend cuda: " + driver.status().message());
  auto text = readInputFile(tool->pipelineFile, kMaxSourceBytes);
  if (!text)
    return fail(llvm::toString(text.takeError()));
  std::map<std::string, int64_t> params;
  for (const auto &param : overrides)
    params[param.getKey().str()] = param.getValue();
  JitOptions options;
  options.backend = runtime::Backend::Cuda;
  Jit jit(options);
  auto pipeline =
      jit.compile((*text)->getBuffer().str(), params, nullptr, tool->pipelineFile);
  if (!pipeline)
    return fail(pipeline.status().message());
  const runtime::Manifest &manifest = (*pipeline)->manifest();
  Result<ExchangedBuffers> exchanged = exchangeBuffers(manifest.buffers);
  if (!exchanged)
    return fail(exchanged.status().message());
  auto &[inputs, outputs] = *exchanged;

  auto buffers = runtime::Buffers::allocate(**pipeline);
  auto stream = runtime::createStream(runtime::Backend::Cuda);
  if (!buffers || !stream)
    return fail((!buffers ? buffers.status() : stream.status()).message());
  Status status;
  size_t index = 0;
  for (runtime::HostBuffer &buffer : inputs)
    if (status)
      status = buffers->upload(index++, buffer.data(), *stream);
  if (status)
    status = (*pipeline)->launch(buffers->pointers(), *stream);
  for (runtime::HostBuffer &buffer : outputs)
    if (status)
      status = buffers->download(index++, buffer.data(), *stream);
  if (status)
    status = runtime::synchronizeStream(runtime::Backend::Cuda, *stream);
  runtime::destroyStream(runtime::Backend::Cuda, *stream);
  if (!status)
    return fail(status.message());
  return writeOutputFile(outputs);
}

/// --backend reference: the fused pipeline evaluated op by op by the
/// reference interpreter; same buffers, same JSON.
static int runOnInterpreter(mlir::ModuleOp module) {
  mlir::FailureOr<PipelineSignature> signature = describePipeline(module);
  if (mlir::failed(signature))
    return 1;
  auto function = module.lookupSymbol<mlir::func::FuncOp>(signature->entry);
  if (!function)
    return fail("no function named '" + signature->entry + "'");
  Result<ExchangedBuffers> exchanged = exchangeBuffers(signature->buffers);
  if (!exchanged)
    return fail(exchanged.status().message());
  auto &[inputs, outputs] = *exchanged;
  std::vector<interpreter::Buffer> arguments;
  for (auto [argument, input] : llvm::zip(function.getArguments(), inputs)) {
    interpreter::Buffer buffer(mlir::getElementTypeOrSelf(argument.getType()),
                               input.desc().elements);
    if (buffer.byteSize() != input.bytes())
      return fail("input '" + input.desc().name + "' has " +
                  std::to_string(input.bytes()) + " bytes, the pipeline's " +
                  std::to_string(buffer.byteSize()));
    std::memcpy(buffer.data(), input.data(), input.bytes());
    arguments.push_back(std::move(buffer));
  }
  mlir::FailureOr<std::vector<interpreter::Buffer>> results =
      interpreter::run(function, arguments);
  if (mlir::failed(results))
    return 1;
  for (auto [output, result] : llvm::zip(outputs, *results)) {
    if (output.bytes() != result.byteSize())
      return fail("result '" + output.desc().name + "' has " +
                  std::to_string(result.byteSize()) + " bytes, expected " +
                  std::to_string(output.bytes()));
    std::memcpy(output.data(), result.data(), output.bytes());
  }
  return writeOutputFile(outputs);
}

int thdc::tools::thdRunMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  static cl::OptionCategory category("thd-run options");
  ThdRunOptions toolOptions(category);
  tool = &toolOptions;
  llvm::scope_exit forget([] { tool = nullptr; });
  registerParamOption(toolOptions.category);
  registerToolOptions(toolOptions.category, registerMlirCommandLineOptions);
  setVersionPrinter("thd-run");
  cl::ParseCommandLineOptions(
      argc, argv,
      "thd-run: run a THD pipeline\n\n"
      "Exit status: 0 when it ran and its status output is 0; 3 when it ran\n"
      "but the status is not 0 (the bits named on stderr, the outputs still\n"
      "written); 1 on any error.\n");
  CompilerCommandLineOptions mlirOptions;
  const std::string &backend = toolOptions.backend;
  if (backend != "cpu" && backend != "cuda" && backend != "reference")
    return fail("unknown backend '" + backend +
                "' (use cpu, cuda or reference)");
  llvm::Expected<llvm::StringMap<int64_t>> params = parsedParamOverrides();
  if (!params)
    return fail(llvm::toString(params.takeError()));
  if (backend == "cuda")
    return runOnGpu(*params);

  std::unique_ptr<mlir::MLIRContext> contextOwner = createCompilerContext();
  mlir::MLIRContext &context = *contextOwner;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  auto pipelineText = readInputFile(tool->pipelineFile, kMaxSourceBytes);
  if (!pipelineText)
    return fail(llvm::toString(pipelineText.takeError()));
  sourceMgr.AddNewSourceBuffer(std::move(*pipelineText), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      loadPipeline(context, sourceMgr, *params);
  if (!module)
    return 1;
  if (backend == "reference")
    return runOnInterpreter(*module);
  auto compiled = HostPipeline::compile(*module);
  if (mlir::failed(compiled))
    return 1;
  const PipelineSignature &signature = (*compiled)->signature();

  Result<ExchangedBuffers> exchanged = exchangeBuffers(signature.buffers);
  if (!exchanged)
    return fail(exchanged.status().message());
  auto &[inputs, outputs] = *exchanged;

  std::vector<void *> pointers;
  for (runtime::HostBuffer &buffer : inputs)
    pointers.push_back(buffer.data());
  for (runtime::HostBuffer &buffer : outputs)
    pointers.push_back(buffer.data());
  std::string error;
  if (!(*compiled)->run(pointers, error))
    return fail("running " + signature.entry + " failed: " + error);

  return writeOutputFile(outputs);
}
