//===- thd-opt.cpp - opt driver for the thd dialect -----------------------===//

#include "dialect/THDOps.h"
#include "tools/ParamOptions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "codegen/CodegenPasses.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::thd::registerTHDPasses();
  mlir::thd::registerTHDCodegenPasses();
  thdc::registerParamOption();

  mlir::DialectRegistry registry;
  registry.insert<mlir::thd::THDDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  thdc::addParamOverrides(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "thdc optimizer driver\n", registry));
}
