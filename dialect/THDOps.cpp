//===- THDOps.cpp - thd dialect operations: syntax, definitions -----------===//
//
// The custom syntax of the ops' assembly formats, fillConstant, and the
// ODS-generated definitions of the ops and of StepOpInterface. Their
// verifiers, StepOpInterface methods and folders are in dialect/ops/, one
// file per family of steps.
//
//===----------------------------------------------------------------------===//

#include "dialect/THDOps.h"
#include "dialect/ParamExpr.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::thd;

//===----------------------------------------------------------------------===//
// Custom syntax: integers or parameter expressions, fill values
//===----------------------------------------------------------------------===//

/// `8` is an i64 literal; `"C*cp"` an expression over the pipeline parameters.
static ParseResult parseIntOrParam(OpAsmParser &parser, Attribute &attr) {
  std::string text;
  SMLoc loc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalString(&text))) {
    attr = ExprAttr::getChecked([&] { return parser.emitError(loc); },
                                parser.getContext(), StringRef(text));
    return success(attr != nullptr);
  }
  int64_t value = 0;
  OptionalParseResult parsed = parser.parseOptionalInteger(value);
  if (!parsed.has_value())
    return parser.emitError(loc, "expected an integer or a quoted parameter "
                                 "expression such as \"C*cp\"");
  if (failed(*parsed))
    return failure();
  attr = parser.getBuilder().getI64IntegerAttr(value);
  return success();
}

static void printIntOrParam(OpAsmPrinter &printer, Operation *,
                            Attribute attr) {
  if (auto expr = dyn_cast<ExprAttr>(attr))
    printer << '"' << expr.getText() << '"';
  else
    printer << cast<IntegerAttr>(attr).getInt();
}

/// `true`/`false`, an integer (stored as i64) or a float (stored as f64); the
/// verifier checks that it fits the data's element type.
static ParseResult parseFill(OpAsmParser &parser, TypedAttr &attr) {
  Builder &builder = parser.getBuilder();
  for (bool value : {true, false})
    if (succeeded(parser.parseOptionalKeyword(value ? "true" : "false"))) {
      attr = builder.getBoolAttr(value);
      return success();
    }
  // The literal is followed by the op's `: types`, so it is read without a
  // type suffix: sign, then an integer or a float.
  bool negative = succeeded(parser.parseOptionalMinus());
  int64_t integer = 0;
  OptionalParseResult parsed = parser.parseOptionalInteger(integer);
  if (parsed.has_value()) {
    if (failed(*parsed))
      return failure();
    attr = builder.getI64IntegerAttr(negative ? -integer : integer);
    return success();
  }
  double value = 0;
  if (parser.parseFloat(value))
    return failure();
  attr = builder.getF64FloatAttr(negative ? -value : value);
  return success();
}

static void printFill(OpAsmPrinter &printer, Operation *, TypedAttr attr) {
  printer.printAttributeWithoutType(attr);
}

#include "dialect/THDInterfaces.cpp.inc"

TypedAttr mlir::thd::fillConstant(TypedAttr fill, Type elementType) {
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    double value = 0;
    if (auto f = dyn_cast_or_null<FloatAttr>(fill))
      value = f.getValueAsDouble();
    else if (auto i = dyn_cast_or_null<IntegerAttr>(fill))
      value = double(i.getInt());
    return FloatAttr::get(floatType, value);
  }
  int64_t value = 0;
  if (auto boolean = dyn_cast_or_null<BoolAttr>(fill))
    value = boolean.getValue();
  else if (auto i = dyn_cast_or_null<IntegerAttr>(fill))
    value = i.getInt();
  return IntegerAttr::get(elementType, value);
}

#define GET_OP_CLASSES
#include "dialect/THDOps.cpp.inc"
