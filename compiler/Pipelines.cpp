//===- Pipelines.cpp - thdc's pass pipelines ------------------------------===//

#include "compiler/Pipelines.h"
#include "compiler/Targets.h"
#include "codegen/CodegenPasses.h"
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

static thdc::PassManagerRunner &passManagerRunner() {
  static thdc::PassManagerRunner runner;
  return runner;
}

void thdc::setPassManagerRunner(PassManagerRunner runner) {
  passManagerRunner() = std::move(runner);
}

LogicalResult thdc::runPassManager(PassManager &pm, ModuleOp module,
                                   llvm::StringRef stage) {
  auto run = [&] { return pm.run(module); };
  if (const thdc::PassManagerRunner &runner = passManagerRunner())
    return runner(pm, stage, run);
  return run();
}

namespace {
/// GpuOptions as `thd-opt --thd-to-ptx` spells them.
struct PtxPipelineOptions : public PassPipelineOptions<PtxPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU architecture (sm_75 to sm_121f)"),
                           llvm::cl::init("sm_90")};
  Option<int64_t> blockSize{
      *this, "block-size",
      llvm::cl::desc("Threads per block (0: chosen from the output lengths)"),
      llvm::cl::init(0)};
  Option<int64_t> maxBlocks{
      *this, "max-blocks",
      llvm::cl::desc("At most this many blocks (0: one thread per element)"),
      llvm::cl::init(0)};
  Option<int64_t> rowsPerThread{
      *this, "rows-per-thread",
      llvm::cl::desc("Elements each GPU thread computes, a warp apart (0: "
                     "chosen from the output lengths and sm-count)"),
      llvm::cl::init(0)};
  Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("Consecutive elements a GPU thread stores with one "
                     "vector access, 1 or 2 (0: chosen from the output "
                     "lengths)"),
      llvm::cl::init(0)};
  Option<int64_t> smCount{
      *this, "sm-count",
      llvm::cl::desc("Multiprocessors of the target GPU (0: the chip's usual "
                     "data-centre part)"),
      llvm::cl::init(0)};
};
} // namespace

void thdc::buildPtxPipeline(OpPassManager &pm, const GpuOptions &options) {
  thd::THDLowerToGPUOptions lowering;
  lowering.blockSize = options.blockSize;
  lowering.maxBlocks = options.maxBlocks;
  lowering.rowsPerThread = options.rowsPerThread;
  lowering.vectorWidth = options.vectorWidth;
  lowering.smCount =
      options.smCount > 0 ? options.smCount : defaultSmCount(options.chip);
  pm.addPass(thd::createTHDLowerToGPU(lowering));
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  // An unknown chip is reported by checkGpuChip before this pipeline runs.
  target.features =
      "+ptx" + std::to_string(ptxVersionFor(options.chip).value_or(80));
  target.optLevel = options.llvmOptLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.useBarePtrCallConv = true;
  // Row and entry indices fit 32 bits (offsets are i32): 64-bit index
  // arithmetic would cost GPU integer pipes twice the instructions.
  toNVVM.indexBitwidth = 32;
  kernels.addPass(createConvertGpuOpsToNVVMOps(toNVVM));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

void thdc::buildHostPipeline(OpPassManager &pm) {
  pm.addPass(thd::createTHDLowerToLoops());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions func;
  func.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(func));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void thdc::registerCompilerPasses() {
  static bool registered = false;
  if (registered)
    return;
  registered = true;
  thd::registerTHDPasses();
  thd::registerTHDCodegenPasses();
  // The upstream passes of the two pipelines, and the usual tools to look
  // at what they produce.
  registerCanonicalizerPass();
  registerCSEPass();
  registerViewOpGraphPass();
  registerSCFToControlFlowPass();
  registerConvertGpuOpsToNVVMOps();
  registerGpuNVVMAttachTarget();
  registerGpuModuleToBinaryPass();
  registerArithToLLVMConversionPass();
  registerConvertIndexToLLVMPass();
  registerFinalizeMemRefToLLVMConversionPass();
  registerConvertFuncToLLVMPass();
  registerConvertControlFlowToLLVMPass();
  registerReconcileUnrealizedCastsPass();

  PassPipelineRegistration<PtxPipelineOptions>(
      "thd-to-ptx",
      "Lower a fused static pipeline to one GPU kernel in the NVVM dialect, "
      "as thdc does before serializing it to PTX "
      "(then: gpu-module-to-binary{format=isa})",
      [](OpPassManager &pm, const PtxPipelineOptions &options) {
        GpuOptions gpu;
        gpu.chip = options.chip;
        gpu.blockSize = options.blockSize;
        gpu.maxBlocks = options.maxBlocks;
        gpu.rowsPerThread = options.rowsPerThread;
        gpu.vectorWidth = options.vectorWidth;
        gpu.smCount = options.smCount;
        buildPtxPipeline(pm, gpu);
      });
  PassPipelineRegistration<>(
      "thd-to-host",
      "Lower a fused static pipeline to the LLVM dialect for the host CPU, "
      "as thdc does before adding the packed entry",
      buildHostPipeline);
}
