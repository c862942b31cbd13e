"""thdc.megatron.StepOptions: GraphStep's options as one object, checked
once when made, and what GraphStep keeps of it. Skipped without PyTorch."""
import dataclasses

import pytest

torch = pytest.importorskip("torch")

import thdc.megatron  # noqa: E402
from thdc.megatron import StepOptions  # noqa: E402


def test_values_are_checked_and_normalised_when_made():
    options = StepOptions(64, 8, 2, 1, device="cpu", rope_table_rows=4096)
    assert (options.C, options.N, options.cp, options.cp_rank) == (64, 8, 2, 1)
    assert options.device == torch.device("cpu")
    assert options.pipeline_options == dict(cp_mode="zigzag", seq_idx=True, rope=True,
                                            cp_order_index=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.C = 128


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(C=64.0, N=8), TypeError, "C must be an int; got float"),
    (dict(C=64, N=8, cp=2, cp_rank=2), ValueError, r"cp_rank must be in \[0, 2\); got 2"),
    (dict(C=63, N=8, cp=2), ValueError, "even"),
    (dict(C=64, N=8, seq_idx=1), TypeError, "seq_idx must be a bool; got int"),
    (dict(C=64, N=8, tp=3, sequence_parallel=True), ValueError, "C must be a multiple of tp"),
    (dict(C=64, N=8, slots=0), ValueError, "slots must be >= 1; got 0"),
    # Refused here, before any text reaches the compiler (a RuntimeError there).
    (dict(C=64, N=8, linear_attention_chunk=2**31), ValueError,
     r"linear_attention_chunk must be a power of two from 1 to 2\^30.*2147483648"),
    (dict(C=64, N=8, linear_attention_chunk=48), ValueError, "power of two"),
    (dict(C=64, N=8, convention="loose"), ValueError, "convention must be one of"),
    (dict(C=64, N=8, device="tpu"), ValueError, "device must be 'cpu' or a CUDA device"),
    (dict(C=64, N=8, device=1.5), TypeError, "device must be a torch.device"),
    # A low-precision recipe's condition is on C (every rank feeds its GEMMs
    # C rows, C/tp under sequence parallelism), per rung.
    (dict(C=96, N=8, multiple="hybridep"), ValueError,
     r"^multiple='hybridep': C = 96 is not a multiple of m = 64.*64 or 128$"),
    (dict(C=64, N=8, tp=4, sequence_parallel=True, multiple="mxfp8"), ValueError,
     r"^multiple='mxfp8': C = 64 is not a multiple of m \* tp = 32 \* 4 = 128"),
    (dict(C=128, N=8, capacities=(48, 128), multiple=32), ValueError,
     r"^multiple=32: rung \(C=48\): C = 48 is not a multiple of m = 32"),
    (dict(C=64, N=8, multiple="fp4"), ValueError, "unknown low-precision recipe 'fp4'"),
    (dict(C=64, N=8, multiple=16.0), TypeError, "multiple must be an int, a recipe name"),
])
def test_a_bad_option_is_refused_by_the_object_and_by_graph_step(kwargs, error, message):
    with pytest.raises(error, match=message):
        StepOptions(**kwargs)
    with pytest.raises(error, match=message):
        thdc.megatron.GraphStep(**kwargs)


def test_a_numpy_chunk_size_is_an_int():
    import numpy as np

    options = StepOptions(64, 8, device="cpu", linear_attention_chunk=np.int64(64))
    assert options.linear_attention_chunk == 64 and type(options.linear_attention_chunk) is int


def test_a_recipe_that_holds_changes_nothing_else():
    """multiple= checks C; the pipeline and its outputs are the step's own."""
    step = thdc.megatron.GraphStep(C=256, N=8, cp=2, tp=4, sequence_parallel=True,
                                   multiple="mxfp8", device="cpu")
    plain = thdc.megatron.GraphStep(C=256, N=8, cp=2, tp=4, sequence_parallel=True,
                                    device="cpu")
    assert step.config.multiple == "mxfp8"
    assert step.kernel.params == plain.kernel.params


def test_graph_step_keeps_its_options():
    step = thdc.megatron.GraphStep(C=64, N=8, cp=2, cp_rank=1, device="cpu")
    assert step.config == StepOptions(64, 8, 2, 1, device="cpu")
    assert (step.C, step.cp_rank, step.on_host) == (64, 1, True)
