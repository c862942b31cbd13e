//===- GpuOptions.cpp - the GPU back end's options ------------------------===//

#include "compiler/GpuOptions.h"

#include "llvm/ADT/StringExtras.h"

#include <string>

using namespace thdc;

namespace {
std::string text(const std::string &value) { return value; }
std::string text(int64_t value) { return std::to_string(value); }

llvm::Error parse(llvm::StringRef flag, llvm::StringRef value,
                  std::string &field) {
  field = value.str();
  return llvm::Error::success();
}
llvm::Error parse(llvm::StringRef flag, llvm::StringRef value, int64_t &field) {
  if (value.getAsInteger(10, field))
    return llvm::createStringError("%s must be an integer; got '%s'",
                                   flag.str().c_str(), value.str().c_str());
  return llvm::Error::success();
}

/// `flag` with '_' as '-': Python's spelling of the flag.
std::string flagName(llvm::StringRef flag) {
  std::string name = flag.str();
  for (char &c : name)
    if (c == '_')
      c = '-';
  return name;
}
} // namespace

llvm::ArrayRef<GpuOptionInfo> thdc::gpuOptionInfos() {
  static const GpuOptionInfo infos[] = {
#define THDC_GPU_TARGET_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP)               \
  {FLAG, HELP, true},
#define THDC_GPU_LAUNCH_OPTION(FIELD, FLAG, HELP) {FLAG, HELP, false},
#include "compiler/GpuOptions.def"
  };
  return infos;
}

std::optional<std::string> thdc::gpuOptionsError(const GpuOptions &options) {
#define THDC_GPU_LAUNCH_OPTION(FIELD, FLAG, HELP)                              \
  if (options.FIELD < 0)                                                       \
    return std::string(FLAG) + " must be at least 0, got " +                   \
           std::to_string(options.FIELD);
#include "compiler/GpuOptions.def"
  return std::nullopt;
}

std::string thdc::gpuOptionsKey(const GpuOptions &options) {
  std::string key;
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP)                      \
  key += std::string(FLAG) + "=" + text(options.FIELD) + "\n";
#include "compiler/GpuOptions.def"
  return key;
}

llvm::Error thdc::setGpuOption(GpuOptions &options, llvm::StringRef flag,
                               llvm::StringRef value) {
  const std::string name = flagName(flag);
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP)                      \
  if (name == FLAG)                                                            \
    return parse(FLAG, value, options.FIELD);
#include "compiler/GpuOptions.def"
  std::string known;
  for (const GpuOptionInfo &info : gpuOptionInfos())
    known += (known.empty() ? "" : ", ") + info.flag.str();
  return llvm::createStringError("no GPU option '%s' (the options: %s)",
                                 flag.str().c_str(), known.c_str());
}

std::optional<std::string> thdc::gpuOptionValue(const GpuOptions &options,
                                                llvm::StringRef flag) {
  const std::string name = flagName(flag);
#define THDC_GPU_OPTION(TYPE, FIELD, FLAG, DEFAULT, HELP)                      \
  if (name == FLAG)                                                            \
    return text(options.FIELD);
#include "compiler/GpuOptions.def"
  return std::nullopt;
}
