//===- ParamExpr.h - integer expressions over parameters --------*- C++ -*-===//
//
// A pipeline declares parameters (for example C, cp, N) with defaults; its
// configuration attributes may be expressions over them, such as "C*cp" or
// "N+1". This file parses and evaluates those expressions. It has no MLIR
// dependency so that drivers can evaluate `--param` values too.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_DIALECT_PARAMEXPR_H
#define THDC_DIALECT_PARAMEXPR_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace thdc {

/// Looks a parameter up by name; std::nullopt when it is not declared.
using ParamLookup = llvm::function_ref<std::optional<int64_t>(llvm::StringRef)>;

/// Evaluates `text` (integer literals, identifiers, + - * /, parentheses).
/// Division must be exact. On failure returns std::nullopt and sets `error`
/// to a message naming the problem (syntax, undeclared name, overflow...).
std::optional<int64_t>
evaluateParamExpr(llvm::StringRef text, ParamLookup lookup, std::string &error);

/// Checks only the syntax of `text`; names are not looked up.
bool isValidParamExprSyntax(llvm::StringRef text, std::string &error);

/// Parses "NAME=VALUE" as given to `--param` or to `thd-set-params`; the
/// value may be an integer expression over literals only, and must not be
/// negative. Returns false and sets `error` otherwise.
bool parseParamAssignment(llvm::StringRef assignment, std::string &name,
                          int64_t &value, std::string &error);

} // namespace thdc

#endif // THDC_DIALECT_PARAMEXPR_H
