//===- PtxCompiler.cpp - PTX to cubin in-process, with nvJitLink ----------===//

#include "runtime/PtxCompiler.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

using namespace thdc::runtime;

namespace {
// nvJitLink's C API (nvJitLink.h), declared here so that nothing of it is
// needed to build: every entry returns 0 on success.
using Handle = void *;
constexpr int kInputPtx = 2; // NVJITLINK_INPUT_PTX
struct NvJitLink {
  int (*create)(Handle *, unsigned, const char **) = nullptr;
  int (*destroy)(Handle *) = nullptr;
  int (*addData)(Handle, int, const void *, size_t, const char *) = nullptr;
  int (*complete)(Handle) = nullptr;
  int (*cubinSize)(Handle, size_t *) = nullptr;
  int (*cubin)(Handle, void *) = nullptr;
  int (*errorLogSize)(Handle, size_t *) = nullptr;
  int (*errorLog)(Handle, char *) = nullptr;
  int (*version)(unsigned *, unsigned *) = nullptr;
  std::string error; ///< why it is not loaded; empty when it is
  std::string versionText;
};

std::vector<std::string> candidates() {
  if (const char *chosen = std::getenv("THDC_NVJITLINK"))
    return {chosen};
  std::vector<std::string> names;
  for (const char *soname : {"libnvJitLink.so.13", "libnvJitLink.so.12"}) {
    names.push_back(soname);
    for (const char *variable : {"CUDA_HOME", "CUDA_PATH"})
      if (const char *root = std::getenv(variable); root && *root)
        names.push_back(std::string(root) + "/lib64/" + soname);
    names.push_back(std::string("/usr/local/cuda/lib64/") + soname);
  }
  return names;
}

const NvJitLink &library() {
  static NvJitLink lib;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names = candidates();
    if (names.size() == 1 && names[0].empty()) {
      lib.error = "THDC_NVJITLINK is empty";
      return;
    }
    void *handle = nullptr;
    std::string tried;
    for (const std::string &name : names) {
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle)
        break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (!handle) {
      lib.error = "nvJitLink not found (tried " + tried + ")";
      return;
    }
    bool complete = true;
    auto bind = [&](auto &slot, const char *name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(
          dlsym(handle, name));
      complete = complete && slot;
    };
    bind(lib.create, "nvJitLinkCreate");
    bind(lib.destroy, "nvJitLinkDestroy");
    bind(lib.addData, "nvJitLinkAddData");
    bind(lib.complete, "nvJitLinkComplete");
    bind(lib.cubinSize, "nvJitLinkGetLinkedCubinSize");
    bind(lib.cubin, "nvJitLinkGetLinkedCubin");
    bind(lib.errorLogSize, "nvJitLinkGetErrorLogSize");
    bind(lib.errorLog, "nvJitLinkGetErrorLog");
    bind(lib.version, "nvJitLinkVersion");
    if (!complete) {
      lib.error = "the nvJitLink library lacks a function thdc uses";
      return;
    }
    unsigned major = 0, minor = 0;
    if (lib.version(&major, &minor) == 0)
      lib.versionText = fmt::format("{}.{}", major, minor);
  });
  return lib;
}
} // namespace

PtxCompilerChoice thdc::runtime::ptxCompilerChoice() {
  const char *value = std::getenv("THDC_PTX_COMPILER");
  if (!value || !*value || std::strcmp(value, "driver") == 0)
    return PtxCompilerChoice::Driver;
  if (std::strcmp(value, "nvjitlink") == 0)
    return PtxCompilerChoice::NvJitLink;
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "thdc: THDC_PTX_COMPILER='%s' is neither 'driver' nor "
                 "'nvjitlink'; using 'driver'\n",
                 value);
  });
  return PtxCompilerChoice::Driver;
}

int thdc::runtime::ptxOptLevel() {
  const char *value = std::getenv("THDC_PTX_OPT_LEVEL");
  if (!value || !*value)
    return 3;
  if (value[0] >= '0' && value[0] <= '3' && value[1] == '\0')
    return value[0] - '0';
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "thdc: THDC_PTX_OPT_LEVEL='%s' is not 0, 1, 2 or 3; using 3\n",
                 value);
  });
  return 3;
}

Status thdc::runtime::compilePtxAvailable() {
  const NvJitLink &lib = library();
  return lib.error.empty() ? Status() : Status::error(lib.error);
}

std::string thdc::runtime::ptxCompilerVersion() {
  return compilePtxAvailable() ? library().versionText : std::string();
}

Result<std::string> thdc::runtime::compilePtxInProcess(std::string_view ptx,
                                                       const std::string &chip,
                                                       int optLevel) {
  const NvJitLink &lib = library();
  if (!lib.error.empty())
    return Status::error(lib.error);
  std::string arch = "-arch=" + chip;
  std::string level = optLevel >= 3 ? "-O3" : "-O0";
  const char *options[] = {arch.c_str(), level.c_str()};
  Handle handle = nullptr;
  int r = lib.create(&handle, 2, options);
  if (r != 0)
    return Status::error(
        fmt::format("nvJitLink cannot compile for {} (error {})", chip, r));
  // nvJitLink reads PTX up to its terminating NUL.
  std::string text(ptx);
  r = lib.addData(handle, kInputPtx, text.c_str(), text.size() + 1,
                  "kernel.ptx");
  if (r == 0)
    r = lib.complete(handle);
  std::string cubin;
  size_t size = 0;
  if (r == 0)
    r = lib.cubinSize(handle, &size);
  if (r == 0) {
    cubin.resize(size);
    r = lib.cubin(handle, cubin.data());
  }
  if (r != 0) {
    std::string log;
    size_t logSize = 0;
    if (lib.errorLogSize(handle, &logSize) == 0 && logSize > 1) {
      log.resize(logSize);
      if (lib.errorLog(handle, log.data()) == 0)
        log.resize(std::strlen(log.c_str()));
      else
        log.clear();
    }
    lib.destroy(&handle);
    return Status::error(fmt::format(
        "nvJitLink failed to compile the kernel for {} (error {}){}{}", chip, r,
        log.empty() ? "" : ": ", log));
  }
  lib.destroy(&handle);
  return cubin;
}

namespace {
/// The warm-up thread, joined at exit so that it never runs into the
/// library's teardown.
struct WarmUp {
  std::thread thread;
  ~WarmUp() {
    if (thread.joinable())
      thread.join();
  }
};
} // namespace

void thdc::runtime::warmUpPtxCompiler(const std::string &chip) {
  if (ptxCompilerChoice() == PtxCompilerChoice::Driver)
    return;
  static WarmUp warmUp;
  static std::once_flag once;
  std::call_once(once, [&] {
    int level = ptxOptLevel();
    warmUp.thread = std::thread([chip, level] {
      static const char kTiny[] =
          ".version 8.0\n.target sm_75\n.address_size 64\n"
          ".visible .entry thdc_warm_up(.param .u64 p)\n{\n"
          ".reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\n"
          "cvta.to.global.u64 %rd1, %rd1;\nst.global.u64 [%rd1], 0;\n"
          "ret;\n}\n";
      if (compilePtxAvailable())
        (void)compilePtxInProcess(kTiny, chip, level);
    });
  });
}
