//===- Version.cpp - `--version` of thdc's tools --------------------------===//

#include "tools/Version.h"
#include "compiler/Jit.h"
#include "runtime/Manifest.h"
#include "tools/VersionInfo.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"

#include <string>

llvm::StringRef thdc::versionString() { return THDC_VERSION_STRING; }

llvm::StringRef thdc::gitRevision() { return THDC_GIT_REVISION; }

void thdc::printVersion(llvm::raw_ostream &os, llvm::StringRef tool) {
  os << "thdc " << versionString() << "\n"
     << "  tool: " << tool << "\n"
     << "  git revision: " << gitRevision() << "\n"
     << "  bundle format: " << runtime::kBundleFormatVersion << "\n"
     << "  compiler build id: " << compilerBuildId() << "\n"
     << "  LLVM/MLIR: " << LLVM_VERSION_STRING << "\n";
}

void thdc::setVersionPrinter(llvm::StringRef tool) {
  static std::string toolName;
  toolName = tool.str();
  llvm::cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { printVersion(os, toolName); });
}
