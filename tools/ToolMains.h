//===- ToolMains.h - thdc's tools as functions ------------------*- C++ -*-===//
//
// The mains of thdc, thd-opt and thd-run, as functions: each executable's
// main calls one, and a binary may link all three (the Python package's
// console entry points, test/tools/tool-mains.test). Each takes a process's
// command line and returns its exit code; its options are registered while
// it runs only (thdc::OptionScope), so the three never clash. Call one of
// them once per process: they set up LLVM's signal handlers and its
// command-line parser for the process.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TOOLS_TOOLMAINS_H
#define THDC_TOOLS_TOOLMAINS_H

namespace thdc::tools {

/// `thdc`: compiles a pipeline into a bundle (tools/thdc/thdc.cpp).
int thdcMain(int argc, char **argv);

/// `thd-opt`: the optimizer driver (tools/thd-opt/thd-opt.cpp).
int thdOptMain(int argc, char **argv);

/// `thd-run`: runs a pipeline on JSON data (tools/thd-run/thd-run.cpp).
int thdRunMain(int argc, char **argv);

} // namespace thdc::tools

#endif // THDC_TOOLS_TOOLMAINS_H
