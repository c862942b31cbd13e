//===- CodegenPasses.h - lowering passes of thdc ----------------*- C++ -*-===//

#ifndef THDC_CODEGEN_CODEGENPASSES_H
#define THDC_CODEGEN_CODEGENPASSES_H

#include "dialect/THDOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::thd {

#define GEN_PASS_DECL
#include "codegen/CodegenPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "codegen/CodegenPasses.h.inc"

} // namespace mlir::thd

#endif // THDC_CODEGEN_CODEGENPASSES_H
