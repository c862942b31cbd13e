"""The loader and the JIT from Python against inputs that used to end, hang
or fool the process: a bundle compiled again into the folder it was loaded
from, pipeline text that MLIR's parser crashes on, and a value used as its
own operand. The inputs that used to kill the interpreter run in a child
process, so that a regression fails the test instead of the test runner."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import thdc
from conftest import thdc_command

ALIGN = """func.func @step(%lengths: tensor<4xi32> {{thd.name = "lengths"}}) -> (tensor<4xi32> {{thd.name = "aligned"}}) {{
  %a = thd.align_lengths %lengths cp {cp} tp 1 : tensor<4xi32>
  return %a : tensor<4xi32>
}}
"""


def write_bundle(tmp_path, cp, folder):
    source = tmp_path / f"align{cp}.mlir"
    source.write_text(ALIGN.format(cp=cp))
    subprocess.run([thdc_command(), str(source), "--no-cubin", "-o", str(folder)],
                   check=True)


def test_load_after_recompiling_into_the_same_folder_runs_the_new_code(tmp_path):
    bundle = tmp_path / "bundle"
    lengths = np.array([1, 2, 3, 5], np.int32)
    write_bundle(tmp_path, 2, bundle)
    first = thdc.load(bundle, backend="host")
    assert first(lengths).aligned.tolist() == [4, 4, 4, 8]
    # A notebook cell compiling again, then loading again: the old code used
    # to run, silently.
    write_bundle(tmp_path, 4, bundle)
    second = thdc.load(bundle, backend="host")
    assert second(lengths).aligned.tolist() == [8, 8, 8, 8]
    assert first(lengths).aligned.tolist() == [4, 4, 4, 8]


def run_child(code, timeout=120):
    """Runs `code` in a new interpreter with this one's path; returns it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout,
                          env=env)


CRASHERS = {
    # MLIR's parser allocates a placeholder per result number up to this.
    "result-number": ("func.func @f(%a: tensor<8xi64>) -> tensor<8xi64> {\n"
                      "  return %a#2147483647 : tensor<8xi64>\n}\n",
                      "is out of range"),
    # MLIR's parser dereferences the missing bit width of index.
    "dense-index-array": ("func.func @f() attributes {a = array<index:1,0,1>} {\n"
                          "  return\n}\n",
                          "a dense array of 'index' is not supported"),
    # MLIR's recursive parser ran out of stack on brackets nested 10,000
    # deep: a segmentation fault of the caller's process.
    "nested-brackets": ("func.func @f() attributes {a = " + "[" * 10000 + "0" + "]" * 10000
                        + "} {\n  return\n}\n", "brackets nested more than 128 deep"),
    "nested-types": ("func.func @f(%a: " + "tuple<" * 10000 + "i32" + ">" * 10000
                     + ") {\n  return\n}\n", "brackets nested more than 128 deep"),
    # FusedOp::verify cast its terminator unchecked: an abort, undefined
    # behaviour in release.
    "foreign-terminator": ("func.func @f(%t: tensor<8xi64>) -> tensor<8xi64> {\n"
                           "  %0 = thd.fused -> tensor<8xi64> {\n"
                           "    func.return %t : tensor<8xi64>\n  }\n"
                           "  return %0 : tensor<8xi64>\n}\n",
                           "must end its body with 'thd.yield'"),
    # The pad_tail verifier walked its producers without end.
    "self-operand": ("func.func @f() -> tensor<8xi64> {\n"
                     "  %p = thd.pad_tail %p target 8 : tensor<8xi64> -> tensor<8xi64>\n"
                     "  return %p : tensor<8xi64>\n}\n",
                     "does not dominate this use"),
}


@pytest.mark.parametrize("name", sorted(CRASHERS))
def test_text_that_ended_or_hung_the_process_raises(name, tmp_path):
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    text, message = CRASHERS[name]
    child = run_child(f"""
        import thdc
        try:
            thdc.compile({text!r}, backend="host", cache_dir={str(tmp_path)!r})
        except RuntimeError as error:
            print("RuntimeError:", error)
        else:
            print("compiled")
    """, timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]
    assert "RuntimeError:" in child.stdout and message in child.stdout, child.stdout


def test_a_pipeline_file_is_read_with_a_bound(tmp_path):
    """thdc.compile of a path reads a regular file of at most 16 MiB: a
    device (/dev/zero used to be read until the kernel's out-of-memory
    killer ended a process), a folder or a larger file raises ValueError
    naming it; a missing file FileNotFoundError."""
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    child = run_child("""
        import pathlib
        import thdc
        try:
            thdc.compile(pathlib.Path("/dev/zero"), backend="host")
        except ValueError as error:
            print("ValueError:", error)
    """, timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]
    assert "'/dev/zero' is not a regular file (a character device)" in child.stdout
    link = tmp_path / "zero.mlir"
    link.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="zero.mlir' is not a regular file"):
        thdc.compile(str(link), backend="host")
    big = tmp_path / "big.mlir"
    big.write_bytes(b" " * ((16 << 20) + 1))
    with pytest.raises(ValueError, match="larger than 16 MiB"):
        thdc.compile(str(big), backend="host")
    folder = tmp_path / "folder.mlir"
    folder.mkdir()
    with pytest.raises(ValueError, match="is not a regular file \\(a folder\\)"):
        thdc.compile(str(folder), backend="host")
    with pytest.raises(FileNotFoundError, match="cannot open"):
        thdc.compile(str(tmp_path / "missing.mlir"), backend="host")
