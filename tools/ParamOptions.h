//===- ParamOptions.h - the `--param NAME=VALUE` option ---------*- C++ -*-===//

#ifndef THDC_TOOLS_PARAMOPTIONS_H
#define THDC_TOOLS_PARAMOPTIONS_H

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace thdc {

/// Registers `--param NAME=VALUE` (repeatable) with LLVM's command line, in
/// the tool's `category`. Call before the command line is parsed.
void registerParamOption(llvm::cl::OptionCategory &category);

/// The parsed `--param` values, or an error naming the option and the text
/// of the first malformed one (not NAME=VALUE, not an integer expression,
/// overflowing, or negative). The drivers write them into the pipeline's
/// `thd.params` (thdc::loadPipeline; thd-opt through `thd-set-params`).
llvm::Expected<llvm::StringMap<int64_t>> parsedParamOverrides();

} // namespace thdc

#endif // THDC_TOOLS_PARAMOPTIONS_H
