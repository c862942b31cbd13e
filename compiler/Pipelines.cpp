//===- Pipelines.cpp - thdc's pass pipelines ------------------------------===//

#include "compiler/Pipelines.h"
#include "codegen/CodegenPasses.h"
#include "compiler/Chips.h"
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
/// GpuOptions as `thd-opt --thd-to-ptx` spells them: every option of
/// compiler/GpuOptions.def.
struct PtxPipelineOptions : public PassPipelineOptions<PtxPipelineOptions> {
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP)                      \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(HELP),                        \
                     llvm::cl::init(DEFAULT)};
#include "compiler/GpuOptions.def"

  thdc::GpuOptions gpuOptions() const {
    thdc::GpuOptions options;
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP) options.FIELD = FIELD;
#include "compiler/GpuOptions.def"
    return options;
  }
};
} // namespace

void thdc::buildPtxPipeline(OpPassManager &pm, const GpuOptions &options) {
  // Each launch option of compiler/GpuOptions.def is the lowering pass's
  // option of the same name: one the pass does not declare fails the build.
  thd::THDLowerToGPUOptions lowering;
#define THDC_GPU_LAUNCH_OPTION(FIELD, FLAG, HELP)                              \
  lowering.FIELD = options.FIELD;
#include "compiler/GpuOptions.def"
  if (options.smCount == 0)
    lowering.smCount = defaultSmCount(options.chip);
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
        buildPtxPipeline(pm, options.gpuOptions());
      });
  PassPipelineRegistration<>(
      "thd-to-host",
      "Lower a fused static pipeline to the LLVM dialect for the host CPU, "
      "as thdc does before adding the packed entry",
      buildHostPipeline);
}
