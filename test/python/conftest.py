import importlib.util
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import thdc  # noqa: E402

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(SOURCE_DIR, "examples", "megatron_graph_step.mlir")


def load_example(folder, name):
    """examples/<folder>/<name>.py imported as the module
    <folder>_example_<name>, with the folder on sys.path for the example's
    own imports."""
    example_dir = os.path.join(SOURCE_DIR, "examples", folder)
    if example_dir not in sys.path:
        sys.path.insert(0, example_dir)
    spec = importlib.util.spec_from_file_location(f"{folder}_example_{name}",
                                                  os.path.join(example_dir, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_bin_dir():
    return os.environ.get("THDC_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))


def thdc_command():
    """The thdc command: the build's, else an installed package's entry point
    (a package with the compiler installs one); skips the test without."""
    path = os.path.join(build_bin_dir(), "thdc")
    if os.path.exists(path):
        return path
    installed = shutil.which("thdc")
    if installed and thdc.has_jit:
        return installed
    pytest.skip("no thdc command: neither built nor installed with the package")


def needs_megatron_dev(test):
    """`test`, skipped unless THDC_MEGATRON_DEV names a megatron-core dev
    checkout (megatron_dev.dev_path)."""
    import megatron_dev
    return pytest.mark.skipif(megatron_dev.dev_path() is None,
                              reason="THDC_MEGATRON_DEV names no megatron-core dev "
                                     "checkout")(test)


def megatron_or_skip():
    """thdc.megatron, imported; else the calling test module is skipped, with
    the reason: no PyTorch, a PyTorch below thdc.TORCH_MIN_VERSION (the
    package's ImportError says which), or a build of thdc without the JIT
    (GraphStep's host code needs it). Call it at a module's top."""
    pytest.importorskip("torch")
    try:
        import thdc.megatron
    except ImportError as error:
        pytest.skip(str(error), allow_module_level=True)
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT", allow_module_level=True)
    return thdc.megatron


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("thdc-cache"))


@pytest.fixture(scope="session")
def compile_host(cache_dir):
    """Compiles a pipeline for the host CPU through the JIT (cached)."""
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")

    def compile_(path, **params):
        return thdc.compile(path, params, backend="host", cache_dir=cache_dir)

    return compile_


# Exit status 5 (what pytest returns when nothing was collected) where tests
# were collected and every one of them skipped: ctest's SKIP_RETURN_CODE then
# reports the file as not run, never as passed (a file of GPU tests on a
# machine without one, a torch file without torch).
NOTHING_RAN = 5


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    stats = reporter.stats
    ran = any(stats.get(kind) for kind in ("passed", "failed", "error", "xfailed", "xpassed"))
    if not ran and stats.get("skipped"):
        session.exitstatus = NOTHING_RAN
