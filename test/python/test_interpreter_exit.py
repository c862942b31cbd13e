"""A process that keeps thdc kernels until it exits ends without nanobind's
leak warnings: a kernel in a reference cycle through its allocator, and a
kernel registered with thdc.torch while PyTorch's operator registry keeps
the custom op's functions (and with them thdc.torch's globals) alive past
the interpreter's finalisation, and an input loader with its one-call path
in a cycle with a kernel. Each case runs in its own interpreter on the
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
    # thdc.megatron.InputLoader over CPU buffers with the host gather and
    # its one-call path (an InputGather), in a cycle with the kernel as a
    # step holds both. Needs PyTorch (the case is skipped without it).
    "input loader cycle": """
        import torch
        import thdc.megatron
        from types import SimpleNamespace
        keys = ("tokens", "labels", "position_ids", "loss_mask")
        inputs = SimpleNamespace(**{k: torch.zeros(8, dtype=torch.int64) for k in keys},
                                 cu_seqlens=torch.zeros(4, dtype=torch.int32),
                                 cu_seqlens_padded=torch.zeros(4, dtype=torch.int32),
                                 num_seqs=torch.zeros(1, dtype=torch.int32),
                                 num_rows=torch.zeros(1, dtype=torch.int32))
        loader = thdc.megatron.InputLoader(inputs, keys, "first_last", thdc._thdc.Gather(None))
        loader.kernel, loader.step = kernel, loader
        loader.load_inputs = loader.load
        given = {k: torch.ones(4, dtype=torch.int64) for k in keys}
        loader.load(**given, cu_seqlens=torch.arange(3, dtype=torch.int32),
                    cu_seqlens_padded=torch.arange(3, dtype=torch.int32))
        assert inputs.num_seqs.item() == 2
        del loader, inputs, kernel
    """,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_leak_warnings_at_exit(case, tmp_path, cache_dir):
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    if "import torch" in CASES[case]:
        pytest.importorskip("torch")
    script = (textwrap.dedent(COMPILE.format(example=EXAMPLE, cache_dir=cache_dir))
              + textwrap.dedent(CASES[case]) + 'print("ran")\n')
    path = tmp_path / "script.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran\n"
    assert "leaked" not in done.stderr, done.stderr
