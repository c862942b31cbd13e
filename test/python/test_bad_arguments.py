"""Bad arguments at the entry points of the Python package, on the CPU: each
is refused with an exception of the right type that names the argument,
never a crash, a silent coercion (True as 1, 8.7 as 8) or a wrapped size.
Calls that once killed the interpreter run in a child process, so that a
crash fails one test instead of the whole run."""
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import thdc
import thdc.planner as planner
import thdc.stages
from conftest import EXAMPLE
from microbatches import INPUTS, mismatches, reference
from test_numpy import golden

C, CP, N = 8, 2, 6


def run_isolated(code, memory_gib=8):
    """Runs `code` in a fresh interpreter (with thdc importable, and at most
    `memory_gib` of address space, so that a wrapped size fails fast instead
    of exhausting the machine); returns its stdout. A crash or a nonzero
    exit fails the test with the child's output."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(thdc.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, os.path.dirname(__file__), env.get("PYTHONPATH")) if p)
    limit = f"""\
        import resource
        limit = {memory_gib} << 30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        """
    if "asan" in env.get("LD_PRELOAD", ""):
        # Under AddressSanitizer (scripts/sanitize.sh) the address space
        # holds its shadow memory, terabytes reserved: its allocator bounds
        # each allocation instead, failing it as the limit would.
        limit = ""
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":allocator_may_return_null=1"
                               f":max_allocation_size_mb={memory_gib << 10}")
    prelude = textwrap.dedent(limit) + textwrap.dedent("""\
        import numpy as np
        import thdc
        import thdc.planner as planner

        def expect(error, call):
            try:
                call()
            except error as raised:
                print(type(raised).__name__ + ": " + str(raised))
            else:
                print("no exception")
        """)
    result = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, (
        f"the child exited with {result.returncode}\n"
        f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}")
    return result.stdout


@pytest.fixture
def kernel(compile_host):
    return compile_host(EXAMPLE, C=C, cp=CP, N=N)


def kernel_code(cache_dir):
    """Child-process code compiling the test kernel (a disk-cache hit)."""
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    return textwrap.dedent(f"""\
        from test_numpy import golden
        from microbatches import INPUTS, mismatches, reference
        kernel = thdc.compile({EXAMPLE!r}, {{"C": {C}, "cp": {CP}, "N": {N}}},
                              backend="host", cache_dir={cache_dir!r})
        mb = golden()
        args = [mb[name] for name in INPUTS]
        spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
        """)


#
# out= and the objects a call holds
#

def test_lazy_out_sequence_keeps_its_items_alive(cache_dir):
    """A sequence whose __getitem__ makes a new array per access: the call
    holds each item until it returns, and writes into exactly those."""
    out = run_isolated(kernel_code(cache_dir) + textwrap.dedent("""\
        class Lazy:
            made = []
            def __len__(self):
                return len(spec)
            def __getitem__(self, i):
                if i >= len(spec):
                    raise IndexError(i)
                array = np.full(spec[i].shape, 0x5A, dtype=spec[i].dtype)
                Lazy.made.append(id(array))
                return array
        for _ in range(20):
            Lazy.made = []
            result = kernel(*args, out=Lazy())
            assert [id(r) for r in result] == Lazy.made
            assert mismatches(result._asdict(), reference(mb, 8, 2, 6)) == []
        print("ok")
        """))
    assert out.strip() == "ok"


def test_out_sequence_whose_getitem_raises(cache_dir):
    out = run_isolated(kernel_code(cache_dir) + textwrap.dedent("""\
        class Broken:
            def __len__(self):
                return len(spec)
            def __getitem__(self, i):
                if i == 3:
                    raise KeyError("no output here")
                return np.zeros(spec[i].shape, dtype=spec[i].dtype)
        expect(KeyError, lambda: kernel(*args, out=Broken()))
        """))
    assert out.strip() == "KeyError: 'no output here'"


def test_two_dimensional_array_as_out_is_refused(cache_dir):
    """An array is a sequence of rows made on each access: as out= it is
    refused as a whole, with its real shape and dtype."""
    out = run_isolated(kernel_code(cache_dir) + textwrap.dedent("""\
        expect(TypeError, lambda: kernel(*args, out=np.zeros((9, 8), np.int64)))
        expect(TypeError, lambda: kernel(*args, out=np.zeros((9, 8), np.float32)))
        """))
    lines = out.strip().splitlines()
    assert lines[0].startswith("TypeError: megatron_graph_step(): out= must be a dict by name "
                               "or a sequence of 9 arrays, one per output; got a single "
                               "numpy.ndarray of shape (9, 8) and dtype int64")
    assert "of shape (9, 8) and dtype float32" in lines[1]


def test_out_arrays_of_another_rank_or_shape(kernel):
    spec = [a for a in thdc.signature(kernel) if a.direction == "output"]
    args = [golden()[name] for name in INPUTS]
    outs = [np.zeros(a.shape, dtype=a.dtype) for a in spec]
    outs[0] = np.zeros((2, 8), np.int64)
    with pytest.raises(ValueError, match=r"output 'tokens' must have shape \(8,\) .*got \(2, 8\)"):
        kernel(*args, out=outs)
    outs[0] = np.zeros((8, 1), np.int64)  # a trailing unit axis is not a [1, T] row
    with pytest.raises(ValueError, match=r"output 'tokens' must have shape \(8,\) .*got \(8, 1\)"):
        kernel(*args, out=outs)
    outs[0] = np.zeros((1, 1, 8), np.int64)  # leading unit axes are
    result = kernel(*args, out=outs)
    assert result.tokens is outs[0]
    assert result.tokens.reshape(-1).tolist() == [11, 0, 21, 0, 31, 34, 0, 0]


def test_inputs_with_a_trailing_unit_axis_are_refused(kernel):
    mb = golden()
    mb["tokens"] = mb["tokens"].reshape(16, 1)
    with pytest.raises(ValueError, match=r"input 'tokens' must have shape \(16,\) .*got \(16, 1\)"):
        kernel(**mb)


def test_keyword_that_is_not_utf8_is_an_exception(cache_dir):
    out = run_isolated(kernel_code(cache_dir) + textwrap.dedent("""\
        expect(UnicodeEncodeError, lambda: kernel(*args, **{"\\ud800": args[0]}))
        """))
    assert out.startswith("UnicodeEncodeError")


#
# Sizes that wrapped (each once ended the process)
#

def test_microbatch_inputs_with_a_huge_N():
    out = run_isolated("""\
        plan = planner.plan([4] * 8, 4, 1)  # 8 microbatches: 8 * (N-1) wraps to 0
        assert plan.num_microbatches == 8
        expect(ValueError, lambda: planner.microbatch_inputs(plan, 0, 2**61 + 1))
        expect(ValueError, lambda: planner.microbatch_inputs(plan, 0, 2**31 - 1))
        expect(ValueError, lambda: planner.microbatch_inputs(plan, 2**40, 4))
        """)
    lines = out.strip().splitlines()
    assert lines[0] == "ValueError: N = 2305843009213693953 is outside the int32 range"
    assert lines[1].startswith("ValueError: microbatch_inputs: N = 2147483647 gives sample_ids "
                               "8 x 2147483646")
    assert lines[2] == "ValueError: rank = 1099511627776 is outside the int32 range"


def test_reference_steps_with_C_times_cp_wrapping():
    """C = 2**61 + 4, cp = 8: C*cp wraps to 32 in int64."""
    out = run_isolated("""\
        C, cp, N = 2**61 + 4, 8, 6
        rows = (C * cp) % 2**64  # 32, what a wrapped product would expect
        data = np.zeros(rows, np.int64)
        cu = np.zeros(N + 1, np.int32)
        expect(ValueError, lambda: thdc.reference.graph_step(
            data, data, data, np.zeros(rows, np.float32), cu, cu, 0, 0, C, cp, N))
        expect(ValueError, lambda: thdc.reference.pack_microbatch(
            data, data, np.zeros(rows, np.float32), np.zeros(2, np.int32),
            np.zeros(2, np.int32), np.zeros(N - 1, np.int32), 0, 0, C, cp, N))
        expect(ValueError, lambda: thdc.reference.graph_step(
            data, data, data, np.zeros(rows, np.float32), cu, cu, 0, 0,
            2**30, 4, N))
        """)
    lines = out.strip().splitlines()
    assert lines[0] == "ValueError: C = 2305843009213693956 is outside the int32 range"
    assert lines[1] == "ValueError: C = 2305843009213693956 is outside the int32 range"
    assert lines[2] == ("ValueError: graph_step: C*cp = 1073741824*4 = 4294967296 is outside "
                        "the int32 range")


def test_seq_idx_with_offsets_spanning_billions_of_rows():
    out = run_isolated("""\
        expect(ValueError, lambda: thdc.reference.seq_idx(np.array([0], np.int32), 2**40))
        expect(ValueError, lambda: thdc.reference.seq_idx(
            np.array([0, 2**31 - 1, 0, 2**31 - 1], np.int32), 2**31 - 1))
        print(thdc.reference.seq_idx(np.array([0, 2, 3], np.int32), 5).tolist())
        """, memory_gib=4)
    lines = out.strip().splitlines()
    assert lines[0] == "ValueError: total_tokens = 1099511627776 is outside the int32 range"
    assert lines[1] == ("ValueError: seq_idx: cu_seqlens with total_tokens = 2147483647 covers "
                        "4294967294 rows instead of 2147483647")
    assert lines[2] == "[0, 0, 1, 2, 2]"


def test_granularity_that_would_wrap():
    with pytest.raises(ValueError, match="alignment granularity G = 9223372028264841218 for "
                                         "cp = 2147483647, tp = 1, dp = 2147483647, multiple = 1 "
                                         "is outside the int32 range"):
        planner.pad_granularity(2**31 - 1, dp=2**31 - 1, dynamic_cp=True)
    with pytest.raises(ValueError, match="align_lengths: the alignment granularity"):
        planner.align_lengths([3], 2**20, tp=2**20, sequence_parallel=True)
    with pytest.raises(ValueError, match="needs cp, tp, dp and the multiple >= 1"):
        planner.pad_granularity(0)
    assert planner.pad_granularity(2**29) == 2**30
    # With a multiple every factor can be int32 max: the product overflows
    # int64 in the reference, an error rather than a wrapped G.
    with pytest.raises(ValueError, match="^pad_granularity: the alignment granularity for "
                                         "cp = 2147483647, tp = 2147483647 .* overflows int64$"):
        planner.pad_granularity(2**31 - 1, tp=2**31 - 1, sequence_parallel=True,
                                dp=2**31 - 1, dynamic_cp=True, multiple=2**31 - 1)
    with pytest.raises(ValueError, match="multiple = 4294967296 is outside the int32 range"):
        planner.pad_granularity(2, multiple=2**32)


def test_planner_sizes_outside_int32():
    with pytest.raises(ValueError, match="^C = 4611686018427387904 is outside the int32 range$"):
        planner.plan([3], 2**62, 2)
    with pytest.raises(ValueError, match="^vpp_group = -4294967296 is outside the int32 range$"):
        planner.plan([3], 4, 2, vpp_group=-2**32)
    with pytest.raises(ValueError, match="^global_batch_size = 9223372036854775808 is outside"):
        planner.max_microbatches(2**63, 2048, 4096, 2)
    with pytest.raises(ValueError, match=r"padded_lengths\[1\] = 18446744073709551615 is outside"):
        planner.plan(np.array([3, 2**64 - 1], np.uint64), 4, 2)
    assert planner.graph_capture_count(2**40, 8) == 2**40


#
# Wrong types, coerced before (one case per kind of argument)
#

def compile_with(params):
    return lambda kernel: thdc.compile(EXAMPLE, params, backend="host", cache_dir="-")


def call_with(**kwargs):
    return lambda kernel: kernel(*(golden()[name] for name in INPUTS), **kwargs)


def graph_step_with(**changes):
    def call(kernel):
        mb = golden()
        arguments = dict(tokens=mb["tokens"], labels=mb["labels"],
                         position_ids=mb["position_ids"], loss_mask=mb["loss_mask"],
                         cu_seqlens=mb["cu_seqlens"], cu_seqlens_padded=mb["cu_seqlens_padded"],
                         num_seqs=3, cp_rank=0, C=C, cp=CP, N=N)
        arguments.update(changes)
        return thdc.reference.graph_step(**arguments)
    return call


def pool_with(**changes):
    def call(kernel):
        arguments = dict(token_pool=np.zeros(16, np.int64), label_pool=np.zeros(16, np.int64),
                         loss_mask_pool=np.zeros(16, np.float32),
                         sample_offsets=np.zeros(2, np.int32),
                         sample_lengths=np.ones(2, np.int32), sample_ids=np.zeros(N - 1, np.int32),
                         num_seqs=1, cp_rank=0, C=C, cp=CP, N=N)
        arguments.update(changes)
        return thdc.reference.pack_microbatch(**arguments)
    return call


BAD_TYPES = [
    ("params float", compile_with({"C": 8.7, "cp": 2, "N": 6}),
     "params['C'] must be an int; got float"),
    ("params bool", compile_with({"C": 8, "cp": True, "N": 6}),
     "params['cp'] must be an int; got bool"),
    ("params str value", compile_with({"C": 8, "cp": "2", "N": 6}),
     "params['cp'] must be an int; got str"),
    ("params key not str", compile_with({"C": 8, 2: 2, "N": 6}),
     "params keys must be parameter names (str); got 2"),
    ("params not a mapping", compile_with([("C", 8)]),
     "params must be a mapping of parameter names to ints; got list"),
    ("pipeline bytes", lambda k: thdc.compile(EXAMPLE.encode(), {}),
     "pipeline must be a str or an os.PathLike path; got bytes"),
    ("compile backend None", lambda k: thdc.compile(EXAMPLE, {}, backend=None),
     "backend must be a str; got NoneType"),
    ("load device bool", lambda k: thdc.load("missing.bundle", backend="host", device=True),
     "device must be an int; got bool"),
    ("load bundle int", lambda k: thdc.load(3, backend="host"),
     "bundle must be a str or an os.PathLike path; got int"),
    ("call device float", call_with(device=1.5), "device must be an int; got float"),
    ("call device bool", call_with(device=True), "device must be an int; got bool"),
    ("call stream bool", call_with(stream=True),
     "stream must be an int handle, a torch.cuda.Stream, a cupy Stream or an object with "
     "__cuda_stream__; got bool"),
    ("call stream str", call_with(stream="0"),
     "stream must be an int handle, a torch.cuda.Stream, a cupy Stream or an object with "
     "__cuda_stream__; got str"),
    ("call out key not str", lambda k: k(*(golden()[n] for n in INPUTS), out={
        i: np.zeros(a.shape, a.dtype) for i, a in enumerate(
            a for a in thdc.signature(k) if a.direction == "output")}),
     "out= keys must be output names (str); got a key of type int"),
    ("prepare device bool", lambda k: k.prepare(True), "device must be an int; got bool"),
    ("signature of a non-kernel", lambda k: thdc.signature("kernel"),
     "kernel must be a thdc.Kernel; got str"),
    ("describe_status bool", lambda k: thdc.describe_status(True),
     "status must be an int; got bool"),
    ("plan C bool", lambda k: planner.plan([3, 2], True, 2), "C must be an int; got bool"),
    ("plan cp numpy bool", lambda k: planner.plan([3, 2], 4, np.True_),
     "cp must be an int; got numpy.bool"),
    ("plan lengths bool", lambda k: planner.plan([3, True], 4, 2),
     "padded_lengths[1] must be an int; got bool"),
    ("plan lengths float array", lambda k: planner.plan(np.array([3.0, 2.5]), 4, 2),
     "padded_lengths must be an array of integers; got dtype float64"),
    ("plan lengths bool array", lambda k: planner.plan(np.array([True, False]), 4, 2),
     "padded_lengths must be an array of integers; got dtype bool"),
    ("plan lengths str", lambda k: planner.plan("32", 4, 2),
     "padded_lengths must be a sequence of ints or a 1-D integer array; got str"),
    ("plan max_packed_sequences float", lambda k: planner.plan([3], 4, 2, max_packed_sequences=4.0),
     "max_packed_sequences must be an int; got float"),
    ("microbatch_inputs rank bool", lambda k: planner.microbatch_inputs(
        planner.plan([3, 2], 4, 2), True, 4), "rank must be an int; got bool"),
    ("align_lengths cp bool", lambda k: planner.align_lengths([3], True),
     "cp must be an int; got bool"),
    ("align_lengths multiple bool", lambda k: planner.align_lengths([3], 2, multiple=True),
     "align_lengths: multiple must be an int or a low-precision recipe name; got bool"),
    ("pad_granularity multiple float", lambda k: planner.pad_granularity(2, multiple=16.0),
     "pad_granularity: multiple must be an int or a low-precision recipe name; got float"),
    ("max_microbatches bool", lambda k: planner.max_microbatches(64, 2048, 4096, 2, dp=True),
     "dp must be an int; got bool"),
    ("graph_capture_count bool", lambda k: planner.graph_capture_count(True, 8),
     "num_microbatches must be an int; got bool"),
    ("graph_step float tokens", graph_step_with(tokens=golden()["tokens"].astype(np.float64)),
     "tokens must have dtype int64; got float64"),
    ("graph_step int64 cu", graph_step_with(cu_seqlens=golden()["cu_seqlens"].astype(np.int64)),
     "cu_seqlens must have dtype int32; got int64"),
    ("graph_step list", graph_step_with(loss_mask=[1.0] * 16),
     "loss_mask must be a 1-D float32 array (NumPy, or any array with DLPack on the CPU); "
     "got list"),
    ("graph_step num_seqs bool", graph_step_with(num_seqs=True),
     "num_seqs must be an int; got bool"),
    ("graph_step N float", graph_step_with(N=6.0), "N must be an int; got float"),
    ("pack_microbatch float pool", pool_with(token_pool=np.zeros(16, np.float32)),
     "token_pool must have dtype int64; got float32"),
    ("pack_microbatch cp_rank bool", pool_with(cp_rank=False),
     "cp_rank must be an int; got bool"),
    ("seq_idx float cu", lambda k: thdc.reference.seq_idx(np.array([0.0, 2.0]), 2),
     "cu_seqlens must have dtype int32; got float64"),
    ("seq_idx total bool", lambda k: thdc.reference.seq_idx(np.array([0, 1], np.int32), True),
     "total_tokens must be an int; got bool"),
]


@pytest.mark.parametrize("what,call,message", BAD_TYPES, ids=[c[0] for c in BAD_TYPES])
def test_wrong_types_raise_type_error(kernel, what, call, message):
    with pytest.raises(TypeError) as raised:
        call(kernel)
    assert message in str(raised.value)


def test_numpy_integers_are_ints(kernel):
    """What the checks accept: NumPy integers wherever an int is expected."""
    mb = golden()
    assert kernel(**mb, device=np.int64(-1), stream=np.uint64(0)).status.tolist() == [0]
    plan = planner.plan(np.array([3, 2], np.uint8), np.int32(4), np.int64(2))
    assert planner.microbatch_inputs(plan, np.int16(1), np.int64(4))[1].tolist() == [2]
    assert planner.plan((3, 2), 4, 2).packs == [[0, 1]]
    expected = reference(mb, C, CP, N)
    again = thdc.reference.graph_step(
        mb["tokens"][::-1][::-1], mb["labels"], mb["position_ids"], mb["loss_mask"],
        mb["cu_seqlens"], mb["cu_seqlens_padded"], np.int32(3), np.int64(0), C, CP, N)
    assert all(np.array_equal(again[k], expected[k]) for k in expected)
    strided = np.repeat(mb["cu_seqlens"], 2)[::2]  # a strided view is copied
    assert thdc.reference.seq_idx(strided[:4], 9).tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]


@pytest.fixture
def stand_in_torch(monkeypatch):
    """A stand-in torch module with the names thdc.megatron and thdc.torch
    touch before they check their arguments (PyTorch is absent here)."""
    class Tensor:
        pass

    class Library:
        @staticmethod
        def custom_op(name, mutates_args):
            def wrap(function):
                function.register_fake = lambda fake: fake
                return function
            return wrap

    fake = types.SimpleNamespace(__version__="2.10.0", Tensor=Tensor,
                                 device=type("device", (), {}), library=Library)
    monkeypatch.setitem(sys.modules, "torch", fake)
    # megatron-core needs the real PyTorch: hidden, also where it is installed
    # and was imported by an earlier test, so that thdc.megatron takes its
    # own PackedSeqParams (its import fails on the None entries).
    for name in ["megatron", "megatron.core", "megatron.core.packed_seq_params"] + [
            n for n in sys.modules if n.startswith("megatron.")]:
        monkeypatch.setitem(sys.modules, name, None)
    # The modules imported with the stand-in must not outlive the test: the
    # package's attributes and sys.modules get their earlier values back
    # (the real PyTorch's, where it is installed).
    # thdc.megatron is a package: its submodules go with it.
    imported = lambda: [n for n in sys.modules
                        if n in ("thdc.megatron", "thdc.torch") or n.startswith("thdc.megatron.")]
    for name in imported():
        monkeypatch.delitem(sys.modules, name)
    for name in ("megatron", "torch"):
        monkeypatch.delattr(thdc, name, raising=False)
    yield fake
    for name in imported():
        sys.modules.pop(name, None)
    for name in ("megatron", "torch"):
        if hasattr(thdc, name):
            delattr(thdc, name)


GRAPH_STEP_ARGUMENTS = [
    ("C float", dict(C=4096.5, N=64), "C must be an int; got float"),
    ("N str", dict(C=4096, N="64"), "N must be an int; got str"),
    ("cp bool", dict(C=4096, N=64, cp=True), "cp must be an int; got bool"),
    ("cp_rank float", dict(C=4096, N=64, cp=2, cp_rank=1.0), "cp_rank must be an int; got float"),
    ("device bool", dict(C=4096, N=64, device=True),
     "device must be a torch.device, a str such as 'cuda:0' or an int ordinal; got bool"),
    ("device float", dict(C=4096, N=64, device=0.0),
     "device must be a torch.device, a str such as 'cuda:0' or an int ordinal; got float"),
    ("bundle bytes", dict(C=4096, N=64, bundle=b"step.bundle"),
     "bundle must be a str or an os.PathLike path; got bytes"),
    ("slots float", dict(C=4096, N=64, slots=4.0), "slots must be an int; got float"),
    ("tp str", dict(C=4096, N=64, tp="2"), "tp must be an int; got str"),
    ("seq_idx int", dict(C=4096, N=64, seq_idx=1), "seq_idx must be a bool; got int"),
    ("sequence_parallel str", dict(C=4096, N=64, sequence_parallel="yes"),
     "sequence_parallel must be a bool; got str"),
    ("rope_table_rows float", dict(C=4096, N=64, rope_table_rows=4096.0),
     "rope_table_rows must be an int; got float"),
    ("stage int", dict(C=4096, N=64, stage=1), "stage must be a str; got int"),
]

GRAPH_STEP_VALUES = [
    ("stage", dict(stage="second"), "stage must be one of"),
    ("cp_mode", dict(cp=2, cp_mode="ring"), "cp_mode must be one of"),
    ("rope contiguous", dict(cp=2, cp_mode="contiguous", rope_table_rows=64),
     "follow zigzag CP"),
    ("convention", dict(convention="padded"), "convention must be one of"),
    ("slots", dict(slots=0), "slots must be >= 1"),
    ("tp rank", dict(tp=2, tp_rank=2), "tp_rank in [0, tp)"),
    ("sequence parallel", dict(C=4098, tp=4, sequence_parallel=True), "multiple of tp"),
    ("rope rows", dict(rope_table_rows=0), "rope_table_rows must be >= 1"),
    ("cp rank", dict(cp=2, cp_rank=2), "cp_rank must be in [0, 2)"),
    ("C", dict(C=0), "must be >= 1"),
]


@pytest.mark.parametrize("what,arguments,message", GRAPH_STEP_VALUES,
                         ids=[c[0] for c in GRAPH_STEP_VALUES])
def test_megatron_graph_step_values(stand_in_torch, what, arguments, message):
    import thdc.megatron

    with pytest.raises(ValueError) as raised:
        thdc.megatron.GraphStep(**{"C": 4096, "N": 64, "bundle": "/unused", **arguments})
    assert message in str(raised.value)


def test_megatron_packed_seq_params_of_any_release(stand_in_torch):
    """PackedSeqParams is built with the fields the class declares: an older
    release's dataclass gets only its own; a plain class through its
    signature; pad_between_seqs=True on a class without it is refused."""
    import dataclasses

    import thdc.megatron

    @dataclasses.dataclass
    class Old:
        qkv_format: str = None
        cu_seqlens_q: object = None
        max_seqlen_q: int = None

    made = thdc.megatron.make_packed_seq_params(Old, qkv_format="thd", cu_seqlens_q=1,
                                                seq_idx=2, pad_between_seqs=False)
    assert made == Old(qkv_format="thd", cu_seqlens_q=1)
    with pytest.raises(ValueError, match="cannot describe the 'compact' convention"):
        thdc.megatron.make_packed_seq_params(Old, pad_between_seqs=True)
    # A release without cp_partition_mode (0.19.2) reads no CP layout: the
    # field is left out, whichever layout.
    for mode in ("zigzag", "contiguous"):
        assert thdc.megatron.make_packed_seq_params(Old, cp_partition_mode=mode) == Old()

    class Plain:
        def __init__(self, qkv_format=None, *, seq_idx=None):
            self.qkv_format, self.seq_idx = qkv_format, seq_idx

    assert thdc.megatron.packed_seq_params_fields(Plain) == ("qkv_format", "seq_idx")
    plain = thdc.megatron.make_packed_seq_params(Plain, qkv_format="thd", seq_idx=3,
                                                 cu_seqlens_q=4)
    assert (plain.qkv_format, plain.seq_idx) == ("thd", 3)
    # With megatron-core hidden (stand_in_torch): the fallback class has
    # every field.
    assert not thdc.megatron.USING_MEGATRON_CORE
    assert {"seq_idx", "pad_between_seqs"} <= set(thdc.megatron.packed_seq_params_fields())


@pytest.mark.parametrize("what,arguments,message", GRAPH_STEP_ARGUMENTS,
                         ids=[c[0] for c in GRAPH_STEP_ARGUMENTS])
def test_megatron_graph_step_arguments(stand_in_torch, what, arguments, message):
    import thdc.megatron

    with pytest.raises(TypeError) as raised:
        thdc.megatron.GraphStep(**arguments)
    assert message in str(raised.value)


def test_torch_op_arguments(stand_in_torch, kernel):
    import thdc.torch

    with pytest.raises(TypeError, match="kernel must be a thdc.Kernel; got str"):
        thdc.torch.register("megatron_graph_step")
    with pytest.raises(TypeError, match="name must be a str; got int"):
        thdc.torch.register(kernel, 7)
    with pytest.raises(TypeError, match="out must be a bool; got int"):
        thdc.torch.op(kernel, out=1)


@pytest.mark.parametrize("module", ["thdc.torch", "thdc.megatron"])
@pytest.mark.parametrize("version", ["2.9.1", "2.4.0+cu121", "1.13.1", None])
def test_torch_older_than_required_is_refused(stand_in_torch, module, version):
    """thdc.torch and thdc.megatron refuse a PyTorch older than 2.10 (whose
    tensors give no current stream) at import, naming both versions."""
    import importlib

    if version is None:
        del stand_in_torch.__version__
    else:
        stand_in_torch.__version__ = version
    with pytest.raises(ImportError) as raised:
        importlib.import_module(module)
    message = str(raised.value)
    assert f"{module} needs PyTorch >= 2.10" in message
    assert (f"torch {version} is installed" if version else
            "cannot read the installed torch's version (None)") in message
    assert module not in sys.modules


@pytest.mark.parametrize("module", ["thdc.torch", "thdc.megatron"])
@pytest.mark.parametrize("version", ["2.10.0", "2.10.0a0+git1234567", "2.11.0+cu130", "3.0.0"])
def test_torch_from_the_required_version_is_accepted(stand_in_torch, module, version):
    import importlib

    stand_in_torch.__version__ = version
    assert importlib.import_module(module).__name__ == module


@pytest.mark.parametrize("module", ["thdc.megatron", "thdc.torch"])
def test_the_torch_modules_without_torch_say_what_to_install(module):
    """Without PyTorch, importing thdc.megatron or thdc.torch raised a bare
    ModuleNotFoundError ("No module named 'torch'")."""
    code = (f"import sys; sys.modules['torch'] = None\n"
            f"try:\n    import {module}\n"
            f"except ModuleNotFoundError as error:\n"
            f"    print(type(error).__name__, error.name, '|', error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ModuleNotFoundError torch |"), done.stdout
    assert f"{module} needs PyTorch >= 2.10, which is not installed: pip install " \
           "'thdc[torch]'" in done.stdout


def test_a_cuda_backend_without_a_gpu_is_an_error(cache_dir):
    """thdc.compile(backend="cuda") on a host without a GPU used to return
    host code silently."""
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    if thdc.cuda_available():
        pytest.skip("this host has a GPU")
    with pytest.raises(RuntimeError, match="backend 'cuda' was asked for, but there is no GPU"):
        thdc.compile(EXAMPLE, {}, backend="cuda", cache_dir=cache_dir)
