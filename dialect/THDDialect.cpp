//===- THDDialect.cpp - thd dialect, attributes, parameters ---------------===//

#include "dialect/THDDialect.h"
#include "dialect/ParamExpr.h"
#include "dialect/THDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::thd;

#include "dialect/THDDialect.cpp.inc"
#include "dialect/THDEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialect/THDAttrs.cpp.inc"

void THDDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/THDOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/THDAttrs.cpp.inc"
      >();
}

LogicalResult ExprAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringRef text) {
  std::string error;
  if (!thdc::isValidParamExprSyntax(text, error))
    return emitError() << error;
  return success();
}

//===----------------------------------------------------------------------===//
// Pipeline parameters
//===----------------------------------------------------------------------===//

static DictionaryAttr findParamsDecl(Operation *op) {
  for (Operation *cur = op; cur; cur = cur->getParentOp())
    if (auto dict =
            cur->getAttrOfType<DictionaryAttr>(THDDialect::kParamsAttrName))
      return dict;
  return {};
}

llvm::StringMap<int64_t> mlir::thd::getPipelineParams(Operation *op) {
  llvm::StringMap<int64_t> params;
  DictionaryAttr decl = findParamsDecl(op);
  if (!decl)
    return params;
  for (NamedAttribute entry : decl)
    if (auto value = dyn_cast<IntegerAttr>(entry.getValue()))
      params[entry.getName().getValue()] = value.getInt();
  return params;
}

static InFlightDiagnostic emitUndeclared(Operation *op, StringRef name,
                                         DictionaryAttr decl) {
  std::string declared;
  if (decl)
    for (NamedAttribute entry : decl)
      declared += (declared.empty() ? "" : ", ") + entry.getName().str();
  return op->emitError() << "parameter '" << name
                         << "' set with --param is not declared by this "
                            "pipeline"
                         << (declared.empty()
                                 ? std::string(" (it declares none)")
                                 : " (it declares: " + declared + ")");
}

LogicalResult
mlir::thd::applyParamOverrides(Operation *root,
                               const llvm::StringMap<int64_t> &overrides) {
  if (overrides.empty())
    return success();
  // Sorted, so that the first undeclared name reported does not depend on
  // the map's hashing.
  SmallVector<StringRef> names;
  for (const auto &override : overrides)
    names.push_back(override.getKey());
  llvm::sort(names);

  SmallVector<Operation *> declaring;
  root->walk([&](Operation *op) {
    if (op->hasAttr(THDDialect::kParamsAttrName))
      declaring.push_back(op);
  });
  if (declaring.empty())
    return emitUndeclared(root, names.front(), {});

  Builder builder(root->getContext());
  for (Operation *op : declaring) {
    auto decl = op->getAttrOfType<DictionaryAttr>(THDDialect::kParamsAttrName);
    if (!decl)
      return op->emitError() << "'" << THDDialect::kParamsAttrName
                             << "' must be a dictionary of i64 defaults";
    for (StringRef name : names)
      if (!decl.contains(name))
        return emitUndeclared(op, name, decl);
    SmallVector<NamedAttribute> values;
    for (NamedAttribute entry : decl) {
      auto it = overrides.find(entry.getName().getValue());
      values.push_back(it == overrides.end()
                           ? entry
                           : builder.getNamedAttr(
                                 entry.getName(),
                                 builder.getI64IntegerAttr(it->getValue())));
    }
    op->setAttr(THDDialect::kParamsAttrName, builder.getDictionaryAttr(values));
  }
  return success();
}

/// The value of `expr` under `params`; nullopt with `error` set when it does
/// not evaluate.
static std::optional<int64_t>
evaluateParams(ExprAttr expr, const llvm::StringMap<int64_t> &params,
               std::string &error) {
  return thdc::evaluateParamExpr(
      expr.getText(),
      [&](StringRef name) -> std::optional<int64_t> {
        auto it = params.find(name);
        if (it == params.end())
          return std::nullopt;
        return it->getValue();
      },
      error);
}

std::optional<int64_t> mlir::thd::tryResolveIntOrParam(Operation *op,
                                                       Attribute attr) {
  if (auto integer = dyn_cast<IntegerAttr>(attr))
    return integer.getInt();
  auto expr = dyn_cast<ExprAttr>(attr);
  if (!expr)
    return std::nullopt;
  std::string error;
  return evaluateParams(expr, getPipelineParams(op), error);
}

FailureOr<int64_t> mlir::thd::resolveIntOrParam(Operation *op, Attribute attr,
                                                StringRef attrName) {
  if (auto integer = dyn_cast<IntegerAttr>(attr))
    return integer.getInt();
  auto expr = dyn_cast<ExprAttr>(attr);
  if (!expr)
    return op->emitOpError() << "'" << attrName
                             << "' must be an integer or a parameter "
                                "expression, got "
                             << attr;
  llvm::StringMap<int64_t> params = getPipelineParams(op);
  std::string error;
  std::optional<int64_t> value = evaluateParams(expr, params, error);
  if (!value) {
    InFlightDiagnostic diag = op->emitOpError() << "cannot evaluate '"
                                                << attrName << "': " << error;
    if (params.empty())
      diag << " (no enclosing op declares '" << THDDialect::kParamsAttrName
           << "')";
    return diag;
  }
  return *value;
}

//===----------------------------------------------------------------------===//
// Discardable attributes: thd.params, thd.capacity, thd.name
//===----------------------------------------------------------------------===//

LogicalResult THDDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() == kBlockAttrName || attr.getName() == kGridAttrName) {
    auto dims = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!dims || dims.size() != 3 ||
        llvm::any_of(dims.asArrayRef(), [](int64_t d) { return d < 1; }))
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' must be three positive sizes [x, y, z]";
    return success();
  }
  if (attr.getName() != kParamsAttrName)
    return op->emitError() << "unknown thd attribute '"
                           << attr.getName().getValue() << "' on an operation";
  auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
  if (!dict)
    return op->emitError() << "'" << kParamsAttrName
                           << "' must be a dictionary of i64 defaults";
  for (NamedAttribute entry : dict) {
    StringRef name = entry.getName().getValue();
    auto value = dyn_cast<IntegerAttr>(entry.getValue());
    if (!value || !value.getType().isSignlessInteger(64))
      return op->emitError()
             << "parameter '" << name << "' must have an i64 default, got "
             << entry.getValue();
    if (name.empty() || llvm::isDigit(name.front()) ||
        !llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; }))
      return op->emitError()
             << "parameter name '" << name << "' is not an identifier";
  }
  return success();
}

static LogicalResult verifyValueAttr(Operation *op, Type type,
                                     NamedAttribute attr, StringRef where) {
  StringRef name = attr.getName().getValue();
  if (name == THDDialect::kNameAttrName) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitOpError() << "'" << name << "' of " << where
                               << " must be a non-empty string";
    return success();
  }
  if (name == THDDialect::kCapacityAttrName) {
    // Tensors in pipelines, memrefs once lowered to buffers.
    auto tensor = dyn_cast_or_null<ShapedType>(type);
    if (!tensor || !tensor.hasRank() || tensor.getRank() != 1)
      return op->emitOpError() << "'" << name << "' of " << where
                               << " needs a 1-D tensor, got " << type;
    FailureOr<int64_t> capacity = resolveIntOrParam(op, attr.getValue(), name);
    if (failed(capacity))
      return failure();
    if (*capacity < 0)
      return op->emitOpError() << "'" << name << "' of " << where
                               << " must be non-negative, got " << *capacity;
    if (!tensor.isDynamicDim(0) && tensor.getDimSize(0) != *capacity)
      return op->emitOpError()
             << where << " has static length " << tensor.getDimSize(0)
             << " but '" << name << "' is " << *capacity;
    return success();
  }
  return op->emitOpError() << "unknown thd attribute '" << name << "' on "
                           << where;
}

LogicalResult THDDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  // A function's argument types come from its type: its entry block may not
  // match them yet (the verifier reports that after the attributes).
  Type type;
  if (auto func = dyn_cast<FunctionOpInterface>(op)) {
    if (argIndex < func.getArgumentTypes().size())
      type = func.getArgumentTypes()[argIndex];
  } else if (Region &region = op->getRegion(regionIndex);
             !region.empty() && argIndex < region.front().getNumArguments()) {
    type = region.front().getArgument(argIndex).getType();
  }
  return verifyValueAttr(op, type, attr,
                         "argument #" + std::to_string(argIndex));
}

LogicalResult THDDialect::verifyRegionResultAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned resultIndex,
                                                      NamedAttribute attr) {
  (void)regionIndex;
  Type type;
  if (auto func = dyn_cast<FunctionOpInterface>(op))
    if (resultIndex < func.getResultTypes().size())
      type = func.getResultTypes()[resultIndex];
  return verifyValueAttr(op, type, attr,
                         "result #" + std::to_string(resultIndex));
}
