//===- Version.h - `--version` of thdc's tools ------------------*- C++ -*-===//
//
// One version printer for thdc, thd-opt and thd-run: the release, the git
// revision the tools were built from and the bundle format they write.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TOOLS_VERSION_H
#define THDC_TOOLS_VERSION_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

namespace thdc {

/// The release (THDC_VERSION in the top-level CMakeLists.txt).
llvm::StringRef versionString();

/// The git revision of the sources; "unknown" outside a git checkout.
llvm::StringRef gitRevision();

/// Prints `thdc <version>`, then the tool, the git revision and the bundle
/// format version, one per line.
void printVersion(llvm::raw_ostream &os, llvm::StringRef tool);

/// Makes `--version` call printVersion for `tool` instead of printing
/// LLVM's version. Call before the command line is parsed.
void setVersionPrinter(llvm::StringRef tool);

} // namespace thdc

#endif // THDC_TOOLS_VERSION_H
