//===- HostCompile.h - compile a pipeline for the host, in a test -*- C++
//-*-===//
//
// What the differential tests share: the source text of an example, one MLIR
// context per test process, a compile for the host CPU with diagnostics in
// the error, the check that a signature is the example's interface, and the
// exact comparison of outputs with a message naming the first difference.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TEST_UNIT_DIFFERENTIALHARNESS_H
#define THDC_TEST_UNIT_DIFFERENTIALHARNESS_H

#include "compiler/Context.h"
#include "compiler/Targets.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace thdc::testing {

/// The text of `relative` under the source tree; empty with `error` set if
/// it cannot be read.
inline std::string readSourceFile(const std::string &relative,
                                  std::string &error) {
  const std::string path = std::string(THDC_SOURCE_DIR) + "/" + relative;
  std::ifstream file(path);
  if (!file) {
    error = "cannot read " + path;
    return "";
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

/// The MLIR context shared by every compilation of a test process.
inline mlir::MLIRContext &compilerContext() {
  static mlir::MLIRContext *context =
      thdc::createCompilerContext().release();
  return *context;
}

/// `text` (named `name` in diagnostics) loaded with `params`
/// (thdc::loadPipeline) in the shared context; null with `error` set,
/// diagnostics included, on failure.
inline mlir::OwningOpRef<mlir::ModuleOp>
loadForHost(const std::string &text, const std::string &name,
            const llvm::StringMap<int64_t> &params, std::string &error) {
  mlir::MLIRContext &context = compilerContext();
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context,
                                           diagnosticStream);
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, name),
                               llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      thdc::loadPipeline(context, sourceMgr, params);
  if (!module)
    error = "loadPipeline failed:\n" + diagnostics;
  return module;
}

/// A loaded `module` compiled for the host CPU; null with `error` set,
/// diagnostics included, on failure.
inline std::unique_ptr<thdc::HostPipeline> compileLoaded(mlir::ModuleOp module,
                                                         std::string &error) {
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(
      module.getContext(), [&](mlir::Diagnostic &diagnostic) {
        llvm::raw_string_ostream(diagnostics)
            << diagnostic.getLocation() << ": " << diagnostic << "\n";
        return mlir::success();
      });
  mlir::FailureOr<std::unique_ptr<thdc::HostPipeline>> pipeline =
      thdc::HostPipeline::compile(module);
  if (mlir::failed(pipeline)) {
    error = "HostPipeline::compile failed:\n" + diagnostics;
    return nullptr;
  }
  return std::move(*pipeline);
}

/// `text` (named `name` in diagnostics) compiled for the host CPU with
/// `params`; null with `error` set, diagnostics included, on failure.
inline std::unique_ptr<thdc::HostPipeline>
compileForHost(const std::string &text, const std::string &name,
               const llvm::StringMap<int64_t> &params, std::string &error) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      loadForHost(text, name, params, error);
  if (!module)
    return nullptr;
  return compileLoaded(*module, error);
}

/// One buffer of an example's interface.
struct ExpectedBuffer {
  const char *name;
  bool isOutput;
  const char *type;
  int64_t elements;
};

/// For each buffer of `signature`, its index in `expected` (matched by name
/// and direction, then checked for element type and length). False with
/// `error` set when the signature is not exactly `expected`.
inline bool matchSignature(const thdc::PipelineSignature &signature,
                           llvm::ArrayRef<ExpectedBuffer> expected,
                           std::vector<size_t> &order, std::string &error) {
  order.clear();
  for (const thdc::runtime::BufferDesc &buffer : signature.buffers) {
    const ExpectedBuffer *match = nullptr;
    for (const ExpectedBuffer &candidate : expected)
      if (buffer.name == candidate.name &&
          buffer.isOutput == candidate.isOutput)
        match = &candidate;
    if (!match || buffer.type != match->type ||
        buffer.elements != match->elements) {
      error = "unexpected buffer " + buffer.name + " (" +
              (buffer.isOutput ? "output" : "input") + ", " +
              buffer.type + "[" + std::to_string(buffer.elements) +
              "]) in the signature";
      return false;
    }
    order.push_back(size_t(match - expected.data()));
  }
  if (order.size() != expected.size()) {
    error = "the signature has " + std::to_string(order.size()) +
            " buffers, expected " + std::to_string(expected.size());
    return false;
  }
  return true;
}

/// "[1, 2, 3]"; bytes print as numbers.
template <typename T> std::string join(const std::vector<T> &values) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    os << (i ? ", " : "") << +values[i];
  return os.str() + "]";
}

/// Exact, bitwise for floats (so 0.0 vs -0.0 and NaN count as different).
template <typename T> bool sameValue(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Unless `mismatch` already names one, names the first element where
/// `actual` differs from `expected` (with both arrays when they are short).
template <typename T>
void findMismatch(const char *name, const std::vector<T> &actual,
                  const std::vector<T> &expected, std::string &mismatch) {
  if (!mismatch.empty())
    return;
  if (actual.size() != expected.size()) {
    mismatch = std::string(name) + " has " + std::to_string(actual.size()) +
               " elements, the reference " + std::to_string(expected.size());
    return;
  }
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (!sameValue(actual[i], expected[i])) {
      std::ostringstream os;
      os.precision(9);
      os << name << "[" << i << "] = " << +actual[i] << ", reference "
         << +expected[i];
      if (actual.size() <= 64)
        os << " (" << name << " = " << join(actual) << ", reference "
           << join(expected) << ")";
      mismatch = os.str();
      return;
    }
}

} // namespace thdc::testing

#endif // THDC_TEST_UNIT_DIFFERENTIALHARNESS_H
