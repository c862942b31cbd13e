//===- Targets.cpp - PTX, cubin and host code from a fused pipeline -------===//

#include "compiler/Targets.h"
#include "compiler/Chips.h"
#include "compiler/Pipelines.h"
#include "dialect/THDOps.h"
#include "runtime/Cache.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <functional>
#include <map>

using namespace mlir;

/// Buffer names are for the manifest; LLVM IR has no place for them.
static void dropBufferNames(Operation *root) {
  root->walk([](FunctionOpInterface func) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      func.removeArgAttr(i, thd::THDDialect::kNameAttrName);
  });
}

/// Adds the code's own statement of its buffers, entry, parameters and
/// buffer names (the globals kBufferTableSymbol and kNameTableSymbol of
/// runtime/Manifest.h) at the end
/// of `body`, in `addressSpace` (1 is the GPU's global memory); `grid` and
/// `block` are the kernel's launch geometry, null for host code.
static void addBufferTableGlobals(OpBuilder &b, Location loc, Block *body,
                                  const thdc::PipelineSignature &signature,
                                  const int64_t *grid, const int64_t *block,
                                  unsigned addressSpace) {
  unsigned gridDims[3] = {0, 0, 0}, blockDims[3] = {0, 0, 0};
  if (grid && block)
    for (int d = 0; d < 3; ++d) {
      gridDims[d] = unsigned(grid[d]);
      blockDims[d] = unsigned(block[d]);
    }
  std::vector<int64_t> table = thdc::runtime::encodeBufferTable(
      signature.buffers, gridDims, blockDims);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(body, body->end());
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    b.setInsertionPoint(&body->back());
  auto i64 = b.getI64Type();
  auto tensorType = RankedTensorType::get({int64_t(table.size())}, i64);
  LLVM::GlobalOp::create(
      b, loc, LLVM::LLVMArrayType::get(i64, table.size()),
      /*isConstant=*/true, LLVM::Linkage::External,
      thdc::runtime::kBufferTableSymbol,
      DenseElementsAttr::get(tensorType, ArrayRef<int64_t>(table)),
      /*alignment=*/8, addressSpace);
  std::map<std::string, int64_t> params;
  for (const auto &param : signature.params)
    params[param.getKey().str()] = param.getValue();
  std::string names = thdc::runtime::encodeNameTable(
                          signature.entry, params, signature.buffers) +
                      '\0';
  LLVM::GlobalOp::create(
      b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), names.size()),
      /*isConstant=*/true, LLVM::Linkage::External,
      thdc::runtime::kNameTableSymbol, b.getStringAttr(names),
      /*alignment=*/1, addressSpace);
}

FailureOr<OwningOpRef<ModuleOp>> thdc::lowerToNVVM(ModuleOp module,
                                                   const GpuOptions &options) {
  if (failed(checkGpuChip(module, options.chip)))
    return failure();
  OwningOpRef<ModuleOp> gpuModule(cast<ModuleOp>(module->clone()));
  PassManager pm(module.getContext());
  buildPtxPipeline(pm, options);
  if (failed(runPassManager(pm, *gpuModule, "lower to NVVM")))
    return failure();
  return gpuModule;
}

FailureOr<std::string> thdc::compileToPtx(ModuleOp module,
                                          const GpuOptions &options,
                                          int64_t grid[3], int64_t block[3]) {
  FailureOr<OwningOpRef<ModuleOp>> lowered = lowerToNVVM(module, options);
  if (failed(lowered))
    return failure();
  OwningOpRef<ModuleOp> gpuModule = std::move(*lowered);
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  // The kernel's geometry is read before the binary replaces the module.
  return [&]() -> FailureOr<std::string> {
    gpu::GPUModuleOp kernelModule;
    gpuModule->walk([&](gpu::GPUModuleOp op) { kernelModule = op; });
    if (!kernelModule)
      return module.emitError("the pipeline produced no GPU kernel");
    int kernelsFound = 0;
    kernelModule.walk([&](LLVM::LLVMFuncOp func) {
      if (auto b = func->getAttrOfType<DenseI64ArrayAttr>(
              thd::THDDialect::kBlockAttrName)) {
        auto g = func->getAttrOfType<DenseI64ArrayAttr>(
            thd::THDDialect::kGridAttrName);
        for (int d = 0; d < 3; ++d) {
          block[d] = b[d];
          grid[d] = g[d];
        }
        ++kernelsFound;
      }
    });
    if (kernelsFound != 1)
      return module.emitError()
             << "expected one kernel, found " << kernelsFound;
    FailureOr<PipelineSignature> signature = describePipeline(module);
    if (failed(signature))
      return failure();
    OpBuilder b(module.getContext());
    addBufferTableGlobals(b, kernelModule.getLoc(), kernelModule.getBody(),
                          *signature, grid, block, /*addressSpace=*/1);
    dropBufferNames(*gpuModule);
    PassManager toBinary(module.getContext());
    toBinary.addPass(createGpuModuleToBinaryPass(binary));
    if (failed(runPassManager(toBinary, *gpuModule, "serialize kernel")))
      return failure();
    std::string ptx;
    gpuModule->walk([&](gpu::BinaryOp binaryOp) {
      for (Attribute object : binaryOp.getObjects())
        if (auto obj = dyn_cast<gpu::ObjectAttr>(object))
          if (obj.getFormat() == gpu::CompilationTarget::Assembly)
            ptx = obj.getObject().getValue().str();
    });
    if (ptx.empty())
      return module.emitError("the GPU back end produced no PTX");
    return ptx;
  }();
}

LogicalResult thdc::runHostPipeline(ModuleOp module) {
  PassManager pm(module.getContext());
  buildHostPipeline(pm);
  return runPassManager(pm, module, "lower to host");
}

LogicalResult thdc::lowerToHostLLVM(ModuleOp module) {
  // The buffer lengths, before lowering erases them into bare pointers: the
  // host code exports them so that the runtime can check a manifest against
  // the code it describes.
  FailureOr<PipelineSignature> signature = describePipeline(module);
  if (failed(signature))
    return failure();
  if (failed(runHostPipeline(module)))
    return failure();
  dropBufferNames(module);

  // `<entry>_packed(void **buffers)`: one signature for every pipeline, so
  // that the runtime can call the host code without knowing its arity.
  SmallVector<LLVM::LLVMFuncOp> entries;
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal())
      entries.push_back(func);
  if (entries.size() != 1)
    return module.emitError()
           << "expected one host function, found " << entries.size();
  LLVM::LLVMFuncOp entry = entries.front();
  MLIRContext *context = module.getContext();
  Location loc = entry.getLoc();
  OpBuilder b(context);
  b.setInsertionPointToEnd(module.getBody());
  auto pointer = LLVM::LLVMPointerType::get(context);
  auto packed = LLVM::LLVMFuncOp::create(
      b, loc, (entry.getName() + thdc::runtime::kPackedSuffix).str(),
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(context), {pointer}));
  Block *body = packed.addEntryBlock(b);
  b.setInsertionPointToStart(body);
  SmallVector<Value> arguments;
  for (unsigned i = 0, e = entry.getNumArguments(); i < e; ++i) {
    Value slot =
        LLVM::GEPOp::create(b, loc, pointer, pointer, body->getArgument(0),
                            ArrayRef<LLVM::GEPArg>{int32_t(i)});
    arguments.push_back(LLVM::LoadOp::create(b, loc, pointer, slot));
  }
  LLVM::CallOp::create(b, loc, entry, arguments);
  LLVM::ReturnOp::create(b, loc, ValueRange{});

  addBufferTableGlobals(b, loc, module.getBody(), *signature,
                        /*grid=*/nullptr, /*block=*/nullptr,
                        /*addressSpace=*/0);
  return success();
}

LogicalResult thdc::emitHostSharedObject(ModuleOp module,
                                         llvm::StringRef path) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return module.emitError("cannot translate the host code to LLVM IR");
  std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(llvm::Triple(triple), error);
  if (!target)
    return module.emitError() << "no LLVM target for the host: " << error;
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      llvm::Triple(triple), "generic", "", targetOptions, llvm::Reloc::PIC_));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(llvm::Triple(triple));

  std::string objectPath = (path + ".o").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream object(objectPath, ec, llvm::sys::fs::OF_None);
    if (ec)
      return module.emitError()
             << "cannot write " << objectPath << ": " << ec.message();
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, object, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return module.emitError("the host target cannot emit object files");
    codegen.run(*llvmModule);
    object.close();
    // An unchecked stream error (a full disk) would end the process.
    if (object.has_error()) {
      std::string message = object.error().message();
      object.clear_error();
      llvm::sys::fs::remove(objectPath);
      return module.emitError()
             << "cannot write " << objectPath << ": " << message;
    }
  }
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return module.emitError(
        "no C compiler ('cc') on PATH to link the host shared object");
  std::string out = path.str();
  // -Bsymbolic: the packed entry calls the pipeline's function inside the
  // library, never a process symbol of the same name (a pipeline called
  // `step` used to call the C library's regex `step`).
  llvm::SmallVector<llvm::StringRef> args = {
      *cc, "-shared", "-Wl,-Bsymbolic", "-o", out, objectPath};
  std::string message;
  int rc =
      llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &message);
  llvm::sys::fs::remove(objectPath);
  if (rc != 0)
    return module.emitError()
           << "linking " << out << " failed: "
           << (message.empty() ? "cc exited with code " + std::to_string(rc)
                               : message);
  return success();
}

FailureOr<std::unique_ptr<thdc::HostPipeline>>
thdc::HostPipeline::compile(ModuleOp module) {
  FailureOr<PipelineSignature> signature = describePipeline(module);
  if (failed(signature))
    return failure();
  OwningOpRef<ModuleOp> host(cast<ModuleOp>(module->clone()));
  if (failed(lowerToHostLLVM(*host)))
    return failure();
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  // ExecutionEngineOptions holds a function_ref: the transformer it refers
  // to must outlive ExecutionEngine::create.
  std::function<llvm::Error(llvm::Module *)> transformer =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0,
                                /*targetMachine=*/nullptr);
  ExecutionEngineOptions options;
  options.transformer = transformer;
  auto engine = ExecutionEngine::create(*host, options);
  if (!engine) {
    std::string message = llvm::toString(engine.takeError());
    return module.emitError() << "JIT compilation failed: " << message;
  }
  std::unique_ptr<HostPipeline> pipeline(new HostPipeline());
  pipeline->sig = std::move(*signature);
  pipeline->engine = std::move(*engine);
  return pipeline;
}

thdc::HostPipeline::~HostPipeline() = default;

bool thdc::HostPipeline::run(llvm::ArrayRef<void *> buffers,
                             std::string &error) const {
  if (buffers.size() != sig.buffers.size()) {
    error = "expected " + std::to_string(sig.buffers.size()) +
            " buffers, got " + std::to_string(buffers.size());
    return false;
  }
  // The packed interface takes a pointer to each (pointer) argument.
  llvm::SmallVector<void *> pointers(buffers.begin(), buffers.end());
  llvm::SmallVector<void *> packed;
  for (void *&pointer : pointers)
    packed.push_back(&pointer);
  if (llvm::Error err = engine->invokePacked(sig.entry, packed)) {
    error = llvm::toString(std::move(err));
    return false;
  }
  return true;
}

/// CUDA's ptxas: $THDC_PTXAS when set (empty: none), else the first found in
/// $CUDA_PATH/bin, $CUDA_HOME/bin, /usr/local/cuda/bin and $PATH.
std::optional<std::string> thdc::findPtxas() {
  if (const char *chosen = std::getenv("THDC_PTXAS"))
    return *chosen ? std::optional<std::string>(chosen) : std::nullopt;
  llvm::SmallVector<std::string> folders;
  for (const char *variable : {"CUDA_PATH", "CUDA_HOME"})
    if (const char *root = std::getenv(variable); root && *root)
      folders.push_back(std::string(root) + "/bin");
  folders.push_back("/usr/local/cuda/bin");
  llvm::SmallVector<llvm::StringRef> paths(folders.begin(), folders.end());
  if (llvm::ErrorOr<std::string> found =
          llvm::sys::findProgramByName("ptxas", paths))
    return *found;
  if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  return std::nullopt;
}


/// `ptx` assembled for `chip` by `ptxas`; the error names the command and
/// what it printed.
FailureOr<std::string> thdc::assembleCubin(ModuleOp module,
                                           const std::string &ptxas,
                                           const std::string &ptx,
                                           llvm::StringRef chip) {
  llvm::SmallString<128> input, output, log;
  for (auto [path, suffix] :
       {std::pair{&input, "ptx"}, std::pair{&output, "cubin"},
        std::pair{&log, "log"}})
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("thdc-kernel", suffix, *path))
      return module.emitError()
             << "cannot create a temporary file: " << ec.message();
  llvm::scope_exit cleanup([&] {
    for (const auto &path : {input, output, log})
      llvm::sys::fs::remove(path);
  });
  if (Status status = runtime::writeFileAtomically(std::string(input), ptx);
      !status)
    return module.emitError() << status.message();
  std::string arch = ("-arch=" + chip).str();
  llvm::SmallVector<llvm::StringRef> argv = {ptxas, arch,   "-O3",
                                             "-o",  output, input};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  std::string error;
  int rc =
      llvm::sys::ExecuteAndWait(ptxas, argv, std::nullopt, redirects,
                                /*SecondsToWait=*/0, /*MemoryLimit=*/0, &error);
  if (rc != 0) {
    Result<std::string> printed = runtime::readWholeFile(std::string(log));
    return module.emitError()
           << "assembling the kernel for " << chip << " with " << ptxas
           << " failed ("
           << (error.empty() ? "exit code " + std::to_string(rc) : error) << ")"
           << (printed && !printed->empty() ? ":\n" + *printed : "")
           << "; pass --no-cubin to write the bundle with the PTX only";
  }
  Result<std::string> cubin = runtime::readWholeFile(std::string(output));
  if (!cubin)
    return module.emitError() << cubin.status().message();
  return *cubin;
}
