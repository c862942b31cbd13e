//===- CommandLine.h - what `--help` of thdc's tools shows ------*- C++ -*-===//
//
// The tools link libLLVM, whose back ends register hundreds of options
// (`--x86-...`, `--amdgpu-...`) that mean nothing to a thdc user. `--help`
// shows the tool's own category and the MLIR options it registers, nothing
// else.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TOOLS_COMMANDLINE_H
#define THDC_TOOLS_COMMANDLINE_H

#include "mlir/Support/Timing.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"

#include <initializer_list>

namespace thdc {

/// The category of the MLIR options (pass manager, context, printing,
/// timing, and thd-opt's passes) shown by `--help`.
llvm::cl::OptionCategory &mlirOptionCategory();

/// Calls `registerMlirOptions`, files every option it registers under
/// mlirOptionCategory(), and hides every option that is in neither that
/// category nor `toolCategory` (LLVM's generic options, `--help` and
/// `--version`, stay). Call before the command line is parsed.
void registerToolOptions(llvm::cl::OptionCategory &toolCategory,
                         llvm::function_ref<void()> registerMlirOptions);

/// MLIR's pass-manager, context, printing and timing options, and the
/// compiler's passes (which `--mlir-print-ir-before=PASS` names).
void registerMlirCommandLineOptions();

/// While it lives, every pass manager of the compiler (compiler/Pipelines.h)
/// applies MLIR's pass-manager options (`--mlir-print-ir-after-all`,
/// `--mlir-print-ir-before=PASS`, `--mlir-pass-statistics`, ...) and times
/// its passes under `--mlir-timing`, in one report printed when it is
/// destroyed (one entry per stage of the compilation). Create it after the
/// command line is parsed, with the options registered by
/// registerMlirCommandLineOptions.
/// Keeps a tool's options registered while it lives and removes them when it
/// ends: declared after them (destroyed first), in the struct that holds a
/// tool's options inside its main function (tools/ToolMains.h). Options at
/// namespace scope would be registered in every binary linking the tool,
/// where two tools' `-o` or positional inputs clash.
class OptionScope {
public:
  explicit OptionScope(std::initializer_list<llvm::cl::Option *> options);
  ~OptionScope();
  OptionScope(const OptionScope &) = delete;
  OptionScope &operator=(const OptionScope &) = delete;

private:
  llvm::SmallVector<llvm::cl::Option *, 16> options;
};

class CompilerCommandLineOptions {
public:
  CompilerCommandLineOptions();
  ~CompilerCommandLineOptions();
  CompilerCommandLineOptions(const CompilerCommandLineOptions &) = delete;
  CompilerCommandLineOptions &
  operator=(const CompilerCommandLineOptions &) = delete;

private:
  mlir::DefaultTimingManager timing;
  mlir::TimingScope rootScope;
  uintptr_t stages = 0;
};

} // namespace thdc

#endif // THDC_TOOLS_COMMANDLINE_H
