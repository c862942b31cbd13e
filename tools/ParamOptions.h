//===- ParamOptions.h - the --param NAME=VALUE option of tools -*- C++ -*-===//

#ifndef THDC_TOOLS_PARAMOPTIONS_H
#define THDC_TOOLS_PARAMOPTIONS_H

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringMap.h"

namespace thdc {

/// Registers `--param NAME=VALUE` (repeatable) with LLVM's command line.
/// Call before the command line is parsed. A malformed value is an error of
/// the command-line parser, which the tool reports like any bad option; the
/// library itself never ends the process.
void registerParamOption();

/// The parsed `--param` values (all well-formed: the command-line parser
/// rejected the others).
llvm::StringMap<int64_t> parsedParamOverrides();

/// Makes every context created from `registry` apply the parsed `--param`
/// values to the `thd` dialect when it loads.
void addParamOverrides(mlir::DialectRegistry &registry);

} // namespace thdc

#endif // THDC_TOOLS_PARAMOPTIONS_H
