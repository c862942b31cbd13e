//===- THDOps.h - thd dialect operations ------------------------*- C++ -*-===//

#ifndef THDC_DIALECT_THDOPS_H
#define THDC_DIALECT_THDOPS_H

#include "dialect/THDDialect.h"
#include "dialect/THDInterfaces.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/THDOps.h.inc"

namespace mlir::thd {
/// The constant a step's `fill` (or `pad`) attribute denotes for elements of
/// `elementType`: the attribute's value converted to that type, zero when it
/// is absent. The one definition the lowering and the reference interpreter
/// share.
TypedAttr fillConstant(TypedAttr fill, Type elementType);
} // namespace mlir::thd

#endif // THDC_DIALECT_THDOPS_H
