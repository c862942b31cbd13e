//===- ParamOptions.h - the `--param NAME=VALUE` option ---------*- C++ -*-===//

#ifndef THDC_TOOLS_PARAMOPTIONS_H
#define THDC_TOOLS_PARAMOPTIONS_H

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace thdc {

/// Registers `--param NAME=VALUE` (repeatable) with LLVM's command line, in
/// the tool's `category`. Call before the command line is parsed.
void registerParamOption(llvm::cl::OptionCategory &category);

/// The parsed `--param` values, or an error naming the option and the text
/// of the first malformed one (not NAME=VALUE, not an integer expression,
/// overflowing, or negative).
llvm::Expected<llvm::StringMap<int64_t>> parsedParamOverrides();

/// Makes every context created from `registry` apply `overrides` to the
/// `thd` dialect when it loads. One set of overrides per process.
void addParamOverrides(mlir::DialectRegistry &registry,
                       llvm::StringMap<int64_t> overrides);

} // namespace thdc

#endif // THDC_TOOLS_PARAMOPTIONS_H
