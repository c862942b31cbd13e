"""thdc from Python on NumPy arrays, through the CPU path (the bundle's host
code): golden vectors and random microbatches against the reference
semantics, every kind of bad call, loading bundles written by `thdc`, and
the package's megatron_step pipeline with seq_idx."""
import ctypes
import subprocess
import sys

import numpy as np
import pytest

import thdc
from conftest import EXAMPLE, thdc_command
from microbatches import INPUTS, mismatches, random_microbatch, reference

SHAPES = [(8, 2, 6), (64, 1, 9), (96, 4, 17), (256, 2, 33)]


def call(kernel, mb, **kwargs):
    return kernel(*(mb[name] for name in INPUTS), **kwargs)


def golden():
    """The running example of the semantics: three sequences, cp = 2."""
    tokens = np.array([11, 12, 13, 0, 21, 22, 0, 0, 31, 32, 33, 34, 0, 0, 0, 0], np.int64)
    return {
        "tokens": tokens,
        "labels": tokens + 100,
        "position_ids": np.array([0, 1, 2, 0, 0, 1, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0], np.int64),
        "loss_mask": np.ones(16, np.float32),
        "cu_seqlens": np.array([0, 3, 5, 9, 0, 0, 0], np.int32),
        "cu_seqlens_padded": np.array([0, 4, 8, 12, 0, 0, 0], np.int32),
        "num_seqs": np.array([3], np.int32),
        "cp_rank": np.array([0], np.int32),
    }


def test_golden_rank0(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    assert kernel.backend == "host"
    out = call(kernel, golden())
    assert out.tokens.tolist() == [11, 0, 21, 0, 31, 34, 0, 0]
    assert out.padding_mask.tolist() == [False, True, False, True, False, False, True, True]
    assert out.cu_seqlens_padded.tolist() == [0, 4, 8, 12, 16, 16, 16]
    assert out.max_seqlen.tolist() == [16]
    assert out.status.tolist() == [0]


def test_golden_rank1_by_name(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    mb = golden()
    mb["cp_rank"] = np.array([1], np.int32)
    out = kernel(**mb)
    assert out.tokens.tolist() == [12, 13, 22, 0, 32, 33, 0, 0]
    assert mismatches(out._asdict(), reference(mb, 8, 2, 6)) == []


@pytest.mark.parametrize("C,cp,N", SHAPES)
def test_random_microbatches_match_reference(compile_host, C, cp, N):
    kernel = compile_host(EXAMPLE, C=C, cp=cp, N=N)
    rng = np.random.default_rng(C * 1000 + cp * 10 + N)
    outputs = None
    for trial in range(60):
        mb = random_microbatch(rng, C, cp, N)
        # Alternate between allocated outputs and reused static outputs.
        if trial % 2 == 0 or outputs is None:
            outputs = call(kernel, mb)
        else:
            for array in outputs:
                array.fill(0x5A)
            call(kernel, mb, out=outputs)
        bad = mismatches(outputs._asdict(), reference(mb, C, cp, N))
        assert bad == [], f"trial {trial}: {bad} differ; num_seqs={mb['num_seqs']}"


def test_bad_metadata_sets_status(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    mb = golden()
    mb["cu_seqlens_padded"] = np.array([0, 4, 2, 12, 0, 0, 0], np.int32)  # decreasing
    out = call(kernel, mb)
    expected = reference(mb, 8, 2, 6)
    assert expected["status"] != 0
    assert out.status.tolist() == [expected["status"]]
    assert mismatches(out._asdict(), expected) == []


def test_outputs_given_as_dict_and_sequence(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
    as_list = [np.full(a.shape, 7, dtype=a.dtype) for a in spec]
    result = call(kernel, golden(), out=as_list)
    assert all(r is given for r, given in zip(result, as_list))
    as_dict = {a.name: np.zeros(a.shape, dtype=a.dtype) for a in spec}
    result = call(kernel, golden(), out=as_dict)
    assert result.tokens is as_dict["tokens"]
    assert np.array_equal(as_dict["tokens"], as_list[0])


def test_leading_unit_dimensions_are_accepted(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    mb = golden()
    mb["tokens"] = mb["tokens"].reshape(1, 16)
    assert call(kernel, mb).tokens.tolist() == [11, 0, 21, 0, 31, 34, 0, 0]


def test_signature(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    spec = thdc.signature(kernel)
    assert [a.name for a in spec if a.direction == "input"] == list(INPUTS)
    assert spec[0] == thdc.Arg("tokens", "int64", (16,), "input")
    assert spec[4] == thdc.Arg("cu_seqlens", "int32", (7,), "input")
    assert [a for a in spec if a.name == "padding_mask"][0].dtype == "bool"
    assert len(spec) == 17
    assert kernel.params == {"C": 8, "cp": 2, "N": 6}


BAD_CALLS = [
    ("wrong dtype", lambda mb: mb.update(tokens=mb["tokens"].astype(np.int32)),
     TypeError, "input 'tokens' must have dtype int64; got int32"),
    ("float for int", lambda mb: mb.update(cu_seqlens=mb["cu_seqlens"].astype(np.float32)),
     TypeError, "input 'cu_seqlens' must have dtype int32; got float32"),
    ("wrong length", lambda mb: mb.update(labels=mb["labels"][:15]),
     ValueError, "input 'labels' must have shape (16,)"),
    ("two long axes", lambda mb: mb.update(tokens=mb["tokens"].reshape(4, 4)),
     ValueError, "got (4, 4)"),
    ("non-contiguous", lambda mb: mb.update(tokens=np.repeat(mb["tokens"], 2)[::2]),
     ValueError, "input 'tokens' must be contiguous"),
    ("not an array", lambda mb: mb.update(num_seqs=[3]),
     TypeError, "input 'num_seqs' must be an array"),
    ("None", lambda mb: mb.update(cp_rank=None),
     TypeError, "input 'cp_rank' must be an array"),
]


@pytest.mark.parametrize("what,mutate,error,message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_inputs_raise(compile_host, what, mutate, error, message):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    mb = golden()
    mutate(mb)
    with pytest.raises(error) as raised:
        call(kernel, mb)
    assert message in str(raised.value)


def test_bad_argument_lists_raise(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    mb = golden()
    args = [mb[name] for name in INPUTS]
    with pytest.raises(TypeError, match="missing input 'cp_rank'"):
        kernel(*args[:-1])
    with pytest.raises(TypeError, match="takes 8 inputs; got 9"):
        kernel(*args, args[0])
    with pytest.raises(TypeError, match="unexpected argument 'token'"):
        kernel(*args[1:], token=args[0])
    with pytest.raises(TypeError, match="both by position and by name"):
        kernel(*args, tokens=args[0])
    with pytest.raises(TypeError, match="out= must be a dict by name or a sequence of 9"):
        kernel(*args, out=[np.zeros(8, np.int64)])
    with pytest.raises(TypeError, match="out= is missing output 'labels'"):
        kernel(*args, out={"tokens": np.zeros(8, np.int64)})
    spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
    outs = {a.name: np.zeros(a.shape, dtype=a.dtype) for a in spec}
    outs["extra"] = np.zeros(1)
    with pytest.raises(TypeError, match="unknown output"):
        kernel(*args, out=outs)


def test_bad_outputs_raise(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
    outs = [np.zeros(a.shape, dtype=a.dtype) for a in spec]
    outs[4] = np.zeros(8, np.uint8)  # padding_mask must be bool
    with pytest.raises(TypeError, match="output 'padding_mask' must have dtype bool; got uint8"):
        call(kernel, golden(), out=outs)
    outs[4] = np.zeros(8, bool)
    outs[0].flags.writeable = False
    with pytest.raises(TypeError, match="output 'tokens' must be an array .* writable"):
        call(kernel, golden(), out=outs)


def test_bad_stream_and_backend(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    with pytest.raises(ValueError, match="backend must be"):
        thdc.compile(EXAMPLE, {"C": 8}, backend="tpu")
    # On the host the stream is ignored, but a malformed one is still refused
    # only where it is used: a host kernel runs synchronously.
    assert call(kernel, golden(), stream=0).status.tolist() == [0]


def test_compile_errors_are_exceptions(cache_dir):
    if not thdc.has_jit:
        pytest.skip("no JIT")
    with pytest.raises(RuntimeError, match="unknown parameter|not declared|no parameter"):
        thdc.compile(EXAMPLE, {"Q": 3}, backend="host", cache_dir=cache_dir)
    with pytest.raises(RuntimeError, match="pipeline.mlir"):
        thdc.compile("func.func @f( {", {}, backend="host", cache_dir=cache_dir)
    with pytest.raises(FileNotFoundError):
        thdc.compile("/nonexistent/pipeline.mlir", {}, backend="host")


def test_a_missing_bundle_is_a_missing_file(tmp_path):
    """thdc.load of a path that is not there, or of a folder without a
    manifest, raises FileNotFoundError (an OSError naming the path), as
    thdc.compile does for a missing source."""
    with pytest.raises(FileNotFoundError, match="no bundle here") as raised:
        thdc.load(str(tmp_path / "missing"))
    assert raised.value.filename == str(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="has no manifest.json") as raised:
        thdc.load(tmp_path)
    assert raised.value.filename == str(tmp_path / "manifest.json")


def test_unknown_chip_is_an_exception(cache_dir):
    if not thdc.has_jit:
        pytest.skip("no JIT")
    with pytest.raises(RuntimeError, match="unsupported GPU architecture 'sm_130'"):
        thdc.compile(EXAMPLE, {"C": 8}, backend="host", cache_dir=cache_dir, chip="sm_130")


def test_shared_writable_cache_is_not_used(tmp_path):
    if not thdc.has_jit:
        pytest.skip("no JIT")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    kernel = thdc.compile(EXAMPLE, {"C": 24, "cp": 2, "N": 6}, backend="host",
                          cache_dir=str(shared))
    assert "writable by other users" in kernel.compile_info["cache_note"]
    assert list(shared.iterdir()) == []


def test_jit_memory_cache(compile_host):
    first = compile_host(EXAMPLE, C=16, cp=2, N=6)
    second = compile_host(EXAMPLE, C=16, cp=2, N=6)
    assert first.compile_info["source"] in ("compiled", "disk-cache")
    assert second.compile_info["source"] == "memory-cache"
    assert second.compile_info["key"] == first.compile_info["key"]


def test_load_bundle_written_by_thdc(tmp_path, compile_host):
    thdc_tool = thdc_command()
    bundle = tmp_path / "step.bundle"
    subprocess.run([thdc_tool, EXAMPLE, "--param", "C=64", "--param", "cp=1",
                    "--param", "N=9", "-o", str(bundle)], check=True)
    kernel = thdc.load(bundle, backend="host")
    assert kernel.compile_info["source"] == "bundle"
    rng = np.random.default_rng(7)
    for _ in range(20):
        mb = random_microbatch(rng, 64, 1, 9)
        assert mismatches(call(kernel, mb)._asdict(), reference(mb, 64, 1, 9)) == []
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        thdc.load(tmp_path / "missing", backend="host")


@pytest.fixture
def fake_torch(monkeypatch):
    """A stand-in for an imported torch with a GPU, whose current stream
    captures while `capturing` is set; the GPU suite runs the real one."""
    class Cuda:
        capturing = False

        @staticmethod
        def is_available():
            return True

        @classmethod
        def is_current_stream_capturing(cls):
            return cls.capturing

    class Torch:
        cuda = Cuda

    monkeypatch.setitem(sys.modules, "torch", Torch)
    return Cuda


def test_load_is_refused_while_torch_captures(tmp_path, fake_torch):
    """Inside a PyTorch graph capture a module load would make the capture
    fail when it ends: thdc.load refuses first, without touching the bundle."""
    fake_torch.capturing = True
    with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):
        thdc.load(tmp_path / "missing", backend="cuda")
    with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):
        thdc.load(tmp_path / "missing")
    # The host code loads no module; outside a capture the load goes ahead
    # (and here finds no bundle).
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        thdc.load(tmp_path / "missing", backend="host")
    fake_torch.capturing = False
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        thdc.load(tmp_path / "missing")


def test_compile_inside_a_torch_capture_only_hits_memory(cache_dir, fake_torch):
    """Inside a capture thdc.compile returns a memory-cache hit (nothing is
    loaded) and refuses anything else (a compile or a disk-cache load)."""
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    params = {"C": 48, "cp": 1, "N": 7}
    first = thdc.compile(EXAMPLE, params, cache_dir=cache_dir)
    fake_torch.capturing = True
    again = thdc.compile(EXAMPLE, params, cache_dir=cache_dir)
    assert again.compile_info["source"] == "memory-cache"
    assert again.compile_info["key"] == first.compile_info["key"]
    if again.backend == "host":  # NumPy arrays; a GPU kernel's results are checked elsewhere
        rng = np.random.default_rng(12)
        mb = random_microbatch(rng, 48, 1, 7)
        assert mismatches(call(again, mb)._asdict(), reference(mb, 48, 1, 7)) == []
    with pytest.raises(RuntimeError, match="not in the memory cache.*inside a CUDA graph capture"):
        thdc.compile(EXAMPLE, dict(params, C=56), cache_dir=cache_dir)
    # The host backend loads no GPU module: not refused.
    assert thdc.compile(EXAMPLE, dict(params, C=56), backend="host",
                        cache_dir=cache_dir).backend == "host"


def test_megatron_step_pipeline_with_seq_idx(compile_host):
    """The drop-in's pipeline: the example's outputs plus seq_idx, equal to the
    reference's seqIdx over the padded cu array with C tokens (cp = 1)."""
    C, N = 64, 9
    kernel = compile_host(thdc.pipeline_path("megatron_step"), C=C, cp=1, N=N)
    rng = np.random.default_rng(11)
    for _ in range(40):
        mb = random_microbatch(rng, C, 1, N)
        rows = int(rng.integers(0, C + 1))  # the rows given, maybe fewer than claimed
        out = kernel(**{name: mb[name] for name in INPUTS}, num_rows=np.array([rows], np.int32))
        expected = reference(mb, C, 1, N, rows_given=rows)
        assert mismatches(out._asdict(), expected) == []
        seq_idx = thdc.reference.seq_idx(expected["cu_seqlens_padded"], C)
        assert np.array_equal(out.seq_idx, seq_idx)


def test_reference_binding_rejects_bad_shapes():
    mb = golden()
    with pytest.raises(ValueError, match="C\\*cp rows"):
        thdc.reference.graph_step(mb["tokens"][:8], mb["labels"], mb["position_ids"],
                                  mb["loss_mask"], mb["cu_seqlens"],
                                  mb["cu_seqlens_padded"], 3, 0, 8, 2, 6)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class FakeDeviceArray:
    """A DLPack producer that claims its int64 data lives on cuda:1: what a
    CPU-only test can hand thdc to see the device check refuse it."""

    def __init__(self, length, device_type=2, device_id=1):
        self._storage = np.zeros(length, np.int64)
        self._shape = (ctypes.c_int64 * 1)(length)
        self._managed = _DLManagedTensor()
        tensor = self._managed.dl_tensor
        tensor.data = self._storage.ctypes.data
        tensor.device = _DLDevice(device_type, device_id)
        tensor.ndim = 1
        tensor.dtype = _DLDataType(0, 64, 1)
        tensor.shape = self._shape
        self._device = (device_type, device_id)

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(self._managed), b"dltensor", None)


def test_array_on_another_device_is_refused(compile_host):
    kernel = compile_host(EXAMPLE, C=8, cp=2, N=6)
    mb = golden()
    mb["labels"] = FakeDeviceArray(16)
    with pytest.raises(ValueError, match="input 'labels' is on cuda:1, but this kernel runs on the host CPU"):
        call(kernel, mb)


def test_describe_status_names_the_bits():
    # The names come from reference/StatusBits.h, the one definition.
    assert thdc.describe_status(0) == "ok"
    assert thdc.describe_status(8 | 16) == "not_monotonic|valid_exceeds_padded"
    assert thdc.describe_status(64 | 2048) == "sample_out_of_range|unknown bits 0x800"
    every = "|".join(thdc.describe_status(1 << b) for b in range(7))
    assert every.split("|") == ["num_seqs_out_of_range", "total_exceeds_capacity",
                                "not_divisible", "not_monotonic", "valid_exceeds_padded",
                                "cp_rank_out_of_range", "sample_out_of_range"]
