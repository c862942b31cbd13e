//===- ParamOptions.h - the `--param NAME=VALUE` option of every tool -*- C++
//-*-===//

#ifndef THDC_TOOLS_PARAMOPTIONS_H
#define THDC_TOOLS_PARAMOPTIONS_H

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"

namespace thdc {

/// Registers `--param NAME=VALUE` (repeatable) with LLVM's command line, in
/// the tool's `category`. Call before the command line is parsed.
void registerParamOption(llvm::cl::OptionCategory &category);

/// The parsed `--param` values. Malformed values are reported on stderr and
/// end the process with exit code 1.
llvm::StringMap<int64_t> parsedParamOverrides();

/// Makes every context created from `registry` apply the parsed `--param`
/// values to the `thd` dialect when it loads. Malformed values are reported
/// on stderr and end the process with exit code 1.
void addParamOverrides(mlir::DialectRegistry &registry);

} // namespace thdc

#endif // THDC_TOOLS_PARAMOPTIONS_H
