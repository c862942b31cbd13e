"""The package's commands (thdc/_tools.py: the entry points `thdc`, `thd-opt`
and `thd-run` of an installed package), each run in its own process as the
entry point runs it, against the executables' behaviour and the reference."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import thdc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "megatron_graph_step.mlir")
GOLDEN = os.path.join(ROOT, "test", "tools", "Inputs", "golden_rank0.json")

pytestmark = pytest.mark.skipif(not thdc.has_jit, reason="this build of thdc has no compiler")


def command(tool, *args):
    """Runs the entry point of `tool` with args, as the installed command does."""
    function = tool.replace("-", "_")
    code = (f"import sys; sys.argv = {[tool, *args]!r}; "
            f"from thdc import _tools; _tools.{function}()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


@pytest.mark.parametrize("tool", ["thdc", "thd-opt", "thd-run"])
def test_version_names_the_tool(tool):
    result = command(tool, "--version")
    assert result.returncode == 0, result.stderr
    assert f"tool: {tool}" in result.stdout
    assert "LLVM/MLIR: 22." in result.stdout  # the release linked in (the wheel's too)


def test_thd_run_matches_the_reference(tmp_path):
    out = tmp_path / "out.json"
    result = command("thd-run", EXAMPLE, "--input", GOLDEN, "--output", str(out))
    assert result.returncode == 0, result.stderr
    got, given = json.loads(out.read_text()), json.loads(open(GOLDEN).read())
    want = thdc.reference.graph_step(
        np.array(given["tokens"], np.int64), np.array(given["labels"], np.int64),
        np.array(given["position_ids"], np.int64), np.array(given["loss_mask"], np.float32),
        np.array(given["cu_seqlens"], np.int32), np.array(given["cu_seqlens_padded"], np.int32),
        given["num_seqs"][0], given["cp_rank"][0], 8, 2, 6)
    for name in ("tokens", "labels", "position_ids", "cu_seqlens_padded"):
        np.testing.assert_array_equal(np.array(got[name]), want[name], err_msg=name)


def test_thd_run_exit_status_says_whether_the_microbatch_was_valid(tmp_path):
    """0 for a valid microbatch; 3 when the pipeline ran but its status
    is not 0 (the bits on stderr, the empty microbatch still written), so
    a script can tell a bad microbatch from a good one and from an error
    (1)."""
    given = json.loads(open(GOLDEN).read())
    given["cu_seqlens_padded"][1] += 1  # not divisible by 2*cp
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(given))
    out = tmp_path / "out.json"
    result = command("thd-run", EXAMPLE, "--input", str(bad), "--output", str(out))
    assert result.returncode == 3, result.stderr
    assert "thd-run: status 4 = not_divisible" in result.stderr
    assert json.loads(out.read_text())["status"] == [4]
    missing = command("thd-run", EXAMPLE, "--input", str(tmp_path / "none.json"))
    assert missing.returncode == 1


def test_thdc_names_a_missing_input_first(tmp_path):
    result = command("thdc", str(tmp_path / "missing.mlir"))
    assert result.returncode == 1
    assert "missing.mlir" in result.stderr and "-o FOLDER" not in result.stderr


def test_thdc_writes_a_bundle_that_loads(tmp_path):
    bundle = tmp_path / "bundle"
    result = command("thdc", EXAMPLE, "--no-cubin", "-o", str(bundle))
    assert result.returncode == 0, result.stderr
    kernel = thdc.load(str(bundle), backend="host")
    assert kernel.entry == "megatron_graph_step"


def test_thd_opt_runs_a_pass_pipeline():
    result = command("thd-opt", EXAMPLE,
                     "--pass-pipeline=builtin.module(thd-bind-params,thd-force-static-shapes)")
    assert result.returncode == 0, result.stderr
    assert "tensor<16xi64>" in result.stdout  # C * cp rows, static


def test_errors_are_the_tools_own():
    result = command("thdc", os.path.join(ROOT, "no-such-file.mlir"), "--emit-ptx")
    assert result.returncode != 0
    assert "no-such-file.mlir" in result.stderr
    with pytest.raises(ValueError, match="no tool 'thd-cc'"):
        thdc._thdc.tool_main("thd-cc", ["thd-cc"])


@pytest.mark.parametrize("tool,args", [("thdc", ["--emit-ptx"]), ("thd-opt", []),
                                       ("thd-run", ["--input", GOLDEN])])
def test_a_reader_that_has_gone_ends_the_command_quietly(tool, args):
    """`thdc ... | head -1`: the entry point ran with Python's SIGPIPE
    disposition (ignored), so LLVM reported the failed write as "LLVM
    ERROR: IO failure on output stream: Broken pipe". Now the command ends
    by SIGPIPE, as the executable does, and prints nothing. The pipe's
    reader is gone before the command writes, so the write always fails."""
    function = tool.replace("-", "_")
    code = (f"import sys; sys.argv = {[tool, EXAMPLE, *args]!r}; "
            f"from thdc import _tools; _tools.{function}()")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-c", code], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                              timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == -13, (done.returncode, done.stderr)  # SIGPIPE
    assert "LLVM ERROR" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr


def test_the_ptx_is_the_isa_the_readme_states(tmp_path):
    """README states the driver the kernels need from their PTX ISA: the
    compiler's PTX says the same."""
    import re

    readme = open(os.path.join(os.path.dirname(EXAMPLE), "..", "README.md")).read()
    stated = re.search(r"the kernels are PTX ISA (\d+\.\d+) for (sm_\d+)", readme)
    assert stated, "README no longer states the kernels' PTX ISA"
    result = command("thdc", EXAMPLE, "--emit=ptx", "--param", "C=64", "--param", "cp=2",
                     "--param", "N=9")
    assert result.returncode == 0, result.stderr
    assert f".version {stated.group(1)}" in result.stdout
    assert f".target {stated.group(2)}" in result.stdout
