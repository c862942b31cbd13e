# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "THDC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "fuzz", "install", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.thdc_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%thdc_src", config.thdc_src_root))
config.substitutions.append(("%thdc_version", config.thdc_version))
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

config.substitutions.append(("%mlir_lib_dir", os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")))

tool_dirs = [config.thdc_tools_dir, config.llvm_tools_dir]
tools = ["thd-opt", "thd-golden-step", "thd-run", "thdc", "thdc-runtime-check", "thdc-embed",
         "thdc-interpreter-differential-tests", "thd-tools-all", "mlir-opt", "mlir-runner"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# CUDA's ptxas (no GPU needed) assembles generated PTX; tests that use it
# require the feature.
import shutil
ptxas = shutil.which("ptxas", path=os.pathsep.join(["/usr/local/cuda/bin", config.environment.get("PATH", "")]))
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# A CUDA driver with a GPU: tests that launch on it require `cuda-device`;
# elsewhere (CI) they are reported unsupported, and the host-code path runs.
def _has_cuda_device():
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except OSError:
        return False

if _has_cuda_device():
    config.available_features.add("cuda-device")
