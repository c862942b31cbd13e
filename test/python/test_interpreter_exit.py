"""A process that keeps thdc kernels until it exits ends without nanobind's
leak warnings: a kernel in a reference cycle through its allocator, and a
kernel registered with thdc.torch while PyTorch's operator registry keeps
the custom op's functions (and with them thdc.torch's globals) alive past
the interpreter's finalisation. Each case runs in its own interpreter on the
host backend."""
import os
import subprocess
import sys
import textwrap

import pytest

import thdc
from conftest import EXAMPLE

COMPILE = """
    import sys
    import thdc
    kernel = thdc.compile({example!r}, backend="host", cache_dir={cache_dir!r})
"""

CASES = {
    # The allocator refers back to its kernel: a cycle that only the garbage
    # collector can break, through the kernel's references.
    "allocator cycle": """
        class Allocator:
            def __call__(self, like, dtype, elements, device_type, device_id):
                import numpy
                return numpy.empty(elements, dtype=dtype)
        allocator = Allocator()
        allocator.kernel = kernel
        kernel._set_allocator(allocator)
        del allocator, kernel
    """,
    # thdc.torch's registry, the way thdc.torch.op fills it, with a stand-in
    # torch module (PyTorch need not be installed). PyTorch's operator
    # registry holds the op's Python functions, and with them the module's
    # globals, from C++ and never releases them (the extra reference taken
    # here does the same), while the module object itself goes first.
    "thdc.torch registry": """
        import ctypes, types
        class Library:
            @staticmethod
            def custom_op(name, mutates_args):
                def wrap(function):
                    function.register_fake = lambda fake: fake
                    ctypes.pythonapi.Py_IncRef(ctypes.py_object(function.__globals__))
                    return function
                return wrap
        sys.modules["torch"] = types.SimpleNamespace(
            __version__="2.10.0", Tensor=type("Tensor", (), {}),
            device=type("device", (), {}), library=Library)
        import thdc.torch
        thdc.torch.op(kernel)
        assert len(thdc.torch._KERNELS) == 1
        del kernel, sys.modules["thdc.torch"], thdc.torch
    """,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_leak_warnings_at_exit(case, tmp_path, cache_dir):
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    script = (textwrap.dedent(COMPILE.format(example=EXAMPLE, cache_dir=cache_dir))
              + textwrap.dedent(CASES[case]) + 'print("ran")\n')
    path = tmp_path / "script.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran\n"
    assert "leaked" not in done.stderr, done.stderr
