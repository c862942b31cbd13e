//===- Compiler.cpp - load a pipeline for the compiler --------------------===//

#include "compiler/Compiler.h"
#include "compiler/Pipelines.h"
#include "compiler/SourceScreen.h"
#include "dialect/THDOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

OwningOpRef<ModuleOp>
thdc::loadPipeline(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                   const llvm::StringMap<int64_t> &params) {
  if (failed(screenUpstreamCrashes(context, sourceMgr)))
    return {};
  // The parameters are written into the IR before it is verified, so that
  // it is verified with the values it is compiled for and nothing of this
  // compile stays in the context.
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(
      sourceMgr, ParserConfig(&context, /*verifyAfterParse=*/false));
  if (!module || failed(thd::applyParamOverrides(*module, params)) ||
      failed(verify(*module)))
    return {};
  auto functions = llvm::to_vector(module->getOps<func::FuncOp>());
  if (llvm::count_if(functions,
                     [](func::FuncOp f) { return !f.isExternal(); }) != 1) {
    module->emitError() << "expected exactly one pipeline function, found "
                        << functions.size();
    return {};
  }
  PassManager pm(&context);
  pm.addPass(thd::createTHDForceStaticShapes());
  pm.addPass(thd::createTHDVerifyCapturable());
  pm.addPass(thd::createTHDFuse());
  if (failed(runPassManager(pm, *module, "load pipeline")))
    return {};
  return module;
}

static std::string elementTypeName(Type type) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << type;
  return name;
}

FailureOr<thdc::PipelineSignature> thdc::describePipeline(ModuleOp module) {
  auto functions = llvm::to_vector(module.getOps<func::FuncOp>());
  if (functions.size() != 1)
    return module.emitError("expected exactly one pipeline function");
  func::FuncOp func = functions.front();
  PipelineSignature signature;
  signature.entry = func.getName().str();
  auto add = [&](Type type, DictionaryAttr attrs, bool isOutput,
                 unsigned index) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || tensor.getRank() != 1)
      return func.emitError()
             << "buffer #" << index << " is not a static 1-D tensor: " << type;
    runtime::BufferDesc info;
    auto name = attrs ? attrs.getAs<StringAttr>(thd::THDDialect::kNameAttrName)
                      : StringAttr();
    info.name = name ? name.getValue().str()
                     : (isOutput ? "result" : "arg") + std::to_string(index);
    info.type = elementTypeName(tensor.getElementType());
    info.elements = tensor.getDimSize(0);
    info.isOutput = isOutput;
    signature.buffers.push_back(info);
    return success();
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (failed(
            add(func.getArgumentTypes()[i], func.getArgAttrDict(i), false, i)))
      return failure();
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (failed(
            add(func.getResultTypes()[i], func.getResultAttrDict(i), true, i)))
      return failure();
  for (const auto &param : thd::getPipelineParams(module))
    signature.params[param.getKey()] = param.getValue();
  return signature;
}
