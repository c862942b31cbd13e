//===- CompilerBindings.cpp - the JIT and the tools -----------------------===//
//
// thdc._thdc.compile and compile_cached (the JIT, compiler/Jit.h), the
// pipeline file reader, and the tools' mains for the installed package's
// commands; in a build without MLIR, only has_jit = False.
//
//===----------------------------------------------------------------------===//

#include "python/Arguments.h"
#include "python/Bindings.h"

#ifdef THDC_PYTHON_JIT
#include "compiler/GpuOptions.h"
#include "compiler/InputFile.h"
#include "compiler/Jit.h"
#include "tools/ToolMains.h"

#include "llvm/Support/raw_ostream.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

using namespace thdc;
using namespace thdc::python;
using namespace thdc::runtime;

namespace {
/// The GPU options of a compile call, from `options` (a dict by option
/// name as Python spells it: "chip", "block_size", ...; GPU_OPTIONS lists
/// them). The chip defaults to the device's own.
GpuOptions gpuOptionsArgument(nb::handle options) {
  GpuOptions gpu = JitOptions::deviceGpuOptions();
  if (options.is_none())
    return gpu;
  if (!PyDict_Check(options.ptr()))
    raiseArgument(PyExc_TypeError,
                  "gpu_options must be a dict; got " + typeName(options));
  for (auto [key, value] : nb::borrow<nb::dict>(options)) {
    if (!nb::isinstance<nb::str>(key))
      raiseArgument(PyExc_TypeError,
                    "gpu_options keys must be str; got " + typeName(key));
    std::string name = nb::borrow<nb::str>(key).c_str();
    const GpuOptionInfo *info = nullptr;
    std::string known;
    for (const GpuOptionInfo &candidate : gpuOptionInfos()) {
      std::string spelled = candidate.flag.str();
      std::replace(spelled.begin(), spelled.end(), '-', '_');
      known += (known.empty() ? "" : ", ") + spelled;
      if (spelled == name)
        info = &candidate;
    }
    if (!info)
      raiseArgument(PyExc_TypeError, "thdc.compile() got an unknown GPU "
                                     "option '" +
                                         name + "' (the options: " + known +
                                         ")");
    std::string text;
    if (info->isString) {
      if (!nb::isinstance<nb::str>(value))
        raiseArgument(PyExc_TypeError,
                      name + " must be a str; got " + typeName(value));
      text = nb::borrow<nb::str>(value).c_str();
    } else {
      text = std::to_string(integerArgument(value, name, kInt64Range));
    }
    if (llvm::Error error = setGpuOption(gpu, info->flag, text))
      raiseArgument(PyExc_ValueError, llvm::toString(std::move(error)));
  }
  if (std::optional<std::string> error = gpuOptionsError(gpu)) {
    std::replace(error->begin(), error->end(), '-', '_');
    raiseArgument(PyExc_ValueError, *error);
  }
  return gpu;
}

/// One JIT per (backend, cache folder, GPU options), shared by every
/// compile call.
Jit &jitFor(const std::string &backend, const std::string &cacheDir,
            const GpuOptions &gpu) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Jit>> jits;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Jit> &jit =
      jits[backend + "\n" + cacheDir + "\n" + gpuOptionsKey(gpu)];
  if (!jit) {
    JitOptions options;
    options.backend = parseBackend(backend);
    options.cacheDir = cacheDir;
    options.gpu = gpu;
    jit = std::make_unique<Jit>(options);
  }
  return *jit;
}

/// A kernel of the JIT's, with how the compile call was served.
nb::object jitKernel(std::shared_ptr<Executable> executable,
                     const CompileInfo &info) {
  static const char *sources[] = {"compiled", "memory-cache", "disk-cache"};
  CompileRecord record;
  record.source = sources[int(info.source)];
  record.micros = info.micros;
  record.compileMicros = info.compileMicros;
  record.loadMicros = info.loadMicros;
  record.key = info.key;
  record.cacheNote = info.cacheNote;
  return makeKernel(std::move(executable), std::move(record));
}

nb::object compileText(const std::string &text,
                       const std::map<std::string, int64_t> &params,
                       const std::string &backend, const std::string &cacheDir,
                       const std::string &sourceName, nb::handle gpuOptions) {
  CompileInfo info;
  Jit &jit = jitFor(backend, cacheDir, gpuOptionsArgument(gpuOptions));
  Result<std::shared_ptr<Executable>> compiled = [&] {
    nb::gil_scoped_release release;
    return jit.compile(text, params, &info, sourceName);
  }();
  if (!compiled)
    throw std::runtime_error(compiled.status().message());
  return jitKernel(*compiled, info);
}

/// compile()'s memory-cache hit, or None where compile() would compile or
/// load a module (which a CUDA graph capture cannot hold).
nb::object cachedText(const std::string &text,
                      const std::map<std::string, int64_t> &params,
                      const std::string &backend, const std::string &cacheDir,
                      nb::handle gpuOptions) {
  CompileInfo info;
  std::shared_ptr<Executable> hit =
      jitFor(backend, cacheDir, gpuOptionsArgument(gpuOptions))
          .cached(text, params, &info);
  return hit ? jitKernel(hit, info) : nb::none();
}
} // namespace
#endif

void thdc::python::populateCompilerBindings(nb::module_ &m) {
#ifdef THDC_PYTHON_JIT
  m.def("compile", &compileText, nb::arg("text"), nb::arg("params"),
        nb::arg("backend") = "auto", nb::arg("cache_dir") = "",
        nb::arg("source_name") = "pipeline.mlir",
        nb::arg("gpu_options").none() = nb::none(),
        "Compiles pipeline text with parameter values through the JIT; "
        "gpu_options: a dict of GPU_OPTIONS by name.");
  m.def("compile_cached", &cachedText, nb::arg("text"), nb::arg("params"),
        nb::arg("backend") = "auto", nb::arg("cache_dir") = "",
        nb::arg("gpu_options").none() = nb::none(),
        "compile()'s memory-cache hit, or None where compile() would "
        "compile or load a module.");
  m.def(
      "read_source",
      [](const std::string &path) {
        auto read = thdc::readInputFile(path, thdc::kMaxSourceBytes);
        if (!read) {
          std::string message;
          std::error_code code;
          llvm::handleAllErrors(read.takeError(),
                                [&](const llvm::ErrorInfoBase &error) {
                                  message = error.message();
                                  code = error.convertToErrorCode();
                                });
          // What open() would raise for the same path, else ValueError.
          PyObject *type = code == std::errc::no_such_file_or_directory
                               ? PyExc_FileNotFoundError
                           : code == std::errc::permission_denied ||
                                   code == std::errc::operation_not_permitted
                               ? PyExc_PermissionError
                               : PyExc_ValueError;
          PyErr_SetString(type, message.c_str());
          throw nb::python_error();
        }
        return std::string((*read)->getBuffer());
      },
      nb::arg("path"),
      "The text of the pipeline file `path`: a regular file (or a pipe) of "
      "at most 16 MiB; a device, a folder or anything larger raises "
      "ValueError naming it (compiler/InputFile.h).");
  m.attr("has_jit") = true;
  {
    // compiler/GpuOptions.def, as thdc.compile's keywords spell them.
    nb::dict options;
    for (const GpuOptionInfo &info : gpuOptionInfos()) {
      std::string name = info.flag.str();
      std::replace(name.begin(), name.end(), '-', '_');
      options[name.c_str()] = info.help.str();
    }
    m.attr("GPU_OPTIONS") = options;
  }
  // The commands of an installed package (thdc/_tools.py): one call per
  // process, as each tool's main is.
  m.def(
      "tool_main",
      [](const std::string &name, std::vector<std::string> args) -> int {
        int (*main)(int, char **) =
            name == "thdc"      ? thdc::tools::thdcMain
            : name == "thd-opt" ? thdc::tools::thdOptMain
            : name == "thd-run" ? thdc::tools::thdRunMain
                                : nullptr;
        if (!main)
          throw nb::value_error(
              ("tool_main: no tool '" + name + "' (thdc, thd-opt, thd-run)")
                  .c_str());
        std::vector<char *> argv;
        for (std::string &arg : args)
          argv.push_back(arg.data());
        argv.push_back(nullptr);
        // The tools never call into Python.
        nb::gil_scoped_release released;
        int code = main(static_cast<int>(args.size()), argv.data());
        // Written now, while the caller's SIGPIPE disposition holds (the
        // commands set the default, thdc/_tools.py), not at the process's
        // exit, where Python has put back its own.
        llvm::outs().flush();
        return code;
      },
      nb::arg("name"), nb::arg("argv"),
      "Runs the command `name` (thdc, thd-opt or thd-run) on argv (argv[0] "
      "first) and returns its exit code. Once per process.");
#else
  m.attr("has_jit") = false;
  m.attr("GPU_OPTIONS") = nb::dict();
#endif
}
