"""GraphStep(..., linear_attention_chunk=BT) on the CPU: every slot, rung
of a capacity ladder and CP size of dynamic CP computes S15's chunk
metadata over its own padded offsets (thdc.reference.linear_chunks), on
random, emptied and split-dummy microbatches, and the other outputs are
the step's without the option; thdc.attention's argument functions for
flash-linear-attention's GDN and KDA kernels, and their refusals. The
kernels themselves run on the GPU (bench/linear_attention.py). Skipped
without PyTorch >= 2.10."""
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
import thdc.stages  # noqa: E402
from microbatches import invalidate, random_microbatch, step_inputs  # noqa: E402

from conftest import megatron_or_skip  # noqa: E402

megatron_or_skip()
import thdc.attention  # noqa: E402
import thdc.megatron  # noqa: E402


@pytest.fixture(scope="module")
def make_step(cache_dir):
    def make(C, N, cp=1, rank=0, **kwargs):
        return thdc.megatron.GraphStep(C, N, cp, rank, device="cpu", cache_dir=cache_dir,
                                       **kwargs)

    return make


def check_chunks(view, C, cp, N, BT, label):
    """The view's chunk metadata is S15's over its own padded offsets, at its
    own (C, N) and CP size."""
    chunks = view.linear_chunks
    NT = thdc.stages.linear_chunk_capacity(C, cp, N, BT)
    cup = view.outputs.cu_seqlens_padded.numpy()
    expected = thdc.reference.linear_chunks(cup, BT, NT)
    assert chunks.chunk_size == BT
    assert tuple(chunks.indices.shape) == (NT, 2), label
    assert np.array_equal(chunks.indices.numpy(), expected["chunk_indices"]), label
    assert np.array_equal(chunks.offsets.numpy(), expected["chunk_offsets"]), label
    assert int(chunks.count[0]) == expected["chunk_count"], label
    # views of the step's buffer: the next run rewrites them in place
    assert chunks.indices.data_ptr() == view.outputs.linear_chunk_indices.data_ptr()


@pytest.mark.parametrize("cp_mode", thdc.stages.CP_MODES)
@pytest.mark.parametrize("cp,BT,dummy", [(1, 64, None), (2, 16, None), (4, 32, 8),
                                          (8, 64, None)])
def test_every_slot_gets_its_chunks(make_step, cp_mode, cp, BT, dummy):
    if dummy is not None and cp_mode == "zigzag" and dummy % (2 * cp):
        pytest.skip("zigzag dummies are multiples of 2*cp")
    C, N = 64, 9
    options = dict(cp_mode=cp_mode, dummy_length=dummy, slots=2)
    step = make_step(C, N, cp, cp - 1, linear_attention_chunk=BT, **options)
    plain = make_step(C, N, cp, cp - 1, **options)
    rng = np.random.default_rng(cp * BT + len(cp_mode))
    statuses = set()
    for trial in range(24):
        mb = random_microbatch(rng, C, cp, N)
        if trial % 3 == 2:
            mb = invalidate(rng, mb, N)
        slot, other = step.slot(trial), plain.slot(trial)
        slot(**step_inputs(mb, C, cp, device="cpu"))
        other(**step_inputs(mb, C, cp, device="cpu"))
        statuses.add(int(slot.status[0]) != 0)
        for key, value in other.outputs._asdict().items():
            assert torch.equal(getattr(slot.outputs, key), value), f"{key}, trial {trial}"
        check_chunks(slot, C, cp, N, BT, f"trial {trial}")
    assert statuses == {False, True}


def test_every_rung_and_cp_size_gets_its_chunks(make_step):
    """A ladder under dynamic CP: each (CP size, rung) variant computes the
    chunks of its own rows and sequence capacity."""
    sizes, capacities, sequences, BT = (1, 2, 4), [16, 32, 64], [3, 5, 9], 16
    step = make_step(64, 9, 4, 3, capacities=capacities, sequence_capacities=sequences,
                     cp_sizes=sizes, linear_attention_chunk=BT)
    rng = np.random.default_rng(11)
    for size in sizes:
        for r, (B, N_r) in enumerate(zip(capacities, sequences)):
            view = step.slot(0).variant(size, r)
            for trial in range(6):
                mb = random_microbatch(rng, B, size, N_r)
                view.load_inputs(**step_inputs(mb, B, size, device="cpu"))
                view.run()
                check_chunks(view, B, size, N_r, BT, f"size {size}, rung {r}, trial {trial}")
    assert step.linear_chunks is step.slot(0).linear_chunks


def test_without_the_option_there_are_no_chunks(make_step):
    step = make_step(64, 9)
    assert step.linear_chunks is None
    assert "linear_chunk_indices" not in step.outputs._fields
    with pytest.raises(ValueError, match="linear_attention_chunk=BT"):
        thdc.attention.fla_gdn_args(step)


@pytest.mark.parametrize("bad", [0, 48, -64, 100])
def test_a_chunk_size_that_is_not_a_power_of_two_is_refused_by_name(make_step, bad):
    with pytest.raises(ValueError, match=f"linear_attention_chunk must be a power of two.*{bad}"):
        make_step(64, 9, linear_attention_chunk=bad)


def test_fla_arguments(make_step):
    step = make_step(64, 9, 2, 1, linear_attention_chunk=64)
    step(**step_inputs(random_microbatch(np.random.default_rng(3), 64, 2, 9), 64, 2,
                       device="cpu"))
    gdn = thdc.attention.fla_gdn_args(step)
    assert set(gdn) == {"cu_seqlens", "chunk_indices", "chunk_size"}
    assert gdn["cu_seqlens"] is step.outputs.cu_seqlens_padded
    assert gdn["chunk_indices"] is step.linear_chunks.indices and gdn["chunk_size"] == 64
    kda = thdc.attention.fla_kda_args(step)
    assert kda["cu_seqlens"] is step.outputs.cu_seqlens_padded
    assert (kda["use_graph"], kda["max_num_seqs"], kda["chunk_size"]) == (True, 9, 64)


def test_fla_arguments_refuse_another_chunk_size(make_step):
    """GDN takes chunks of 16, 32 or 64 rows, KDA of 32 or 64 (fla 0.6.0):
    a step made for another BT is refused, naming both."""
    step = make_step(64, 9, linear_attention_chunk=16)
    assert thdc.attention.fla_gdn_args(step)["chunk_size"] == 16
    with pytest.raises(ValueError, match=r"fla_kda takes chunks of \(32, 64\) rows; the "
                                         r"step's linear_attention_chunk is 16"):
        thdc.attention.fla_kda_args(step)
    step = make_step(64, 9, linear_attention_chunk=128)
    with pytest.raises(ValueError, match=r"fla_gdn takes chunks of \(16, 32, 64\) rows.* 128"):
        thdc.attention.fla_gdn_args(step)


def test_fla_gdn_refuses_fla_s_identity_cache(make_step, monkeypatch):
    """With fla's tensor cache on, fla would keep the first microbatch's chunk
    offsets for the step's one static cu_seqlens tensor: refused."""
    step = make_step(64, 9, linear_attention_chunk=64)
    utils = types.ModuleType("fla.utils")
    utils.FLA_DISABLE_TENSOR_CACHE = False
    monkeypatch.setitem(sys.modules, "fla.utils", utils)
    with pytest.raises(RuntimeError, match="FLA_DISABLE_TENSOR_CACHE=1"):
        thdc.attention.fla_gdn_args(step)
    utils.FLA_DISABLE_TENSOR_CACHE = True
    assert thdc.attention.fla_gdn_args(step)["chunk_size"] == 64


def test_a_source_that_is_not_a_step_is_refused():
    with pytest.raises(TypeError, match="GraphStep, StepSlot or SlotRung"):
        thdc.attention.fla_gdn_args(object())


class GatedDeltaNetStandIn(torch.nn.Module):
    """The calls of megatron-core dev's GatedDeltaNet that the wiring meets
    (gdn.py on d48bd6be): the kernel an instance attribute
    (`_setup_variant_attrs`, gdn.py:62-65), cu_seqlens resolved from
    PackedSeqParams by `_resolve_cu_seqlens` (common.py:480-504, which
    reads the last offset back to the host), then the kernel called with
    cu_seqlens as a keyword (gdn.py:373-380)."""

    def __init__(self, linear_cp_mode=None):
        super().__init__()
        self.config = types.SimpleNamespace(linear_cp_mode=linear_cp_mode)
        self.calls = []

        def chunk_gated_delta_rule(q, cu_seqlens=None, cp_context=None, **kwargs):
            self.calls.append(dict(kwargs, cu_seqlens=cu_seqlens))
            return q, None

        self.gated_delta_rule = chunk_gated_delta_rule
        self.resolved_on_host = 0

    def _resolve_cu_seqlens(self, cu_seqlens_padded, cu_seqlens_actual, total_seq_len, name,
                            cp_size=1):
        self.resolved_on_host += 1
        cu = cu_seqlens_padded if cu_seqlens_padded is not None else cu_seqlens_actual
        assert cu[-1].item() == total_seq_len
        return cu

    def forward(self, q, packed_seq_params):
        cu = self._resolve_cu_seqlens(packed_seq_params.cu_seqlens_q_padded,
                                      packed_seq_params.cu_seqlens_q,
                                      packed_seq_params.max_seqlen_q, "cu_seqlens_q")
        return self.gated_delta_rule(q, initial_state=None, output_final_state=False,
                                     use_qk_l2norm_in_kernel=False, cu_seqlens=cu,
                                     cp_context=None)


def test_use_step_chunks_hands_each_view_its_chunks(make_step):
    """Every slot and rung: the layer's kernel gets that view's chunk indices
    and BT, and cu_seqlens is resolved without the host; other offsets go
    to the layer's own code; restore_step_chunks undoes it."""
    step = make_step(64, 9, 2, 0, slots=2, capacities=[32, 64], sequence_capacities=[5, 9],
                     linear_attention_chunk=32)
    model = torch.nn.Sequential(GatedDeltaNetStandIn(), torch.nn.Linear(1, 1),
                                GatedDeltaNetStandIn("headwise"))
    assert thdc.megatron.use_step_chunks(model, step) == 2
    layer = model[0]
    q = torch.zeros(1)
    for slot in step.slots:
        for r in range(2):
            view = slot.rung(r)
            layer(q, view.packed_seq_params)
            call = layer.calls[-1]
            assert call["cu_seqlens"] is view.outputs.cu_seqlens_padded
            assert call["chunk_indices"] is view.linear_chunks.indices
            assert call["chunk_size"] == 32
    assert layer.resolved_on_host == 0
    foreign = types.SimpleNamespace(cu_seqlens_q_padded=torch.tensor([0, 3, 8], dtype=torch.int32),
                                    cu_seqlens_q=None, max_seqlen_q=8)
    layer(q, foreign)
    assert layer.resolved_on_host == 1 and "chunk_indices" not in layer.calls[-1]
    assert thdc.megatron.restore_step_chunks(model) == 2
    layer(q, step.packed_seq_params)
    assert layer.resolved_on_host == 2 and "chunk_indices" not in layer.calls[-1]


def test_use_step_chunks_refusals(make_step):
    step = make_step(64, 9, linear_attention_chunk=64)
    with pytest.raises(ValueError, match="no Gated DeltaNet layer"):
        thdc.megatron.use_step_chunks(torch.nn.Linear(1, 1), step)
    with pytest.raises(ValueError, match="chunkwise"):
        thdc.megatron.use_step_chunks(GatedDeltaNetStandIn("chunkwise"), step)
    fallback = GatedDeltaNetStandIn()

    def torch_chunk_gated_delta_rule(*args, **kwargs):
        return None

    fallback.gated_delta_rule = torch_chunk_gated_delta_rule
    with pytest.raises(ValueError, match="PyTorch fallback"):
        thdc.megatron.use_step_chunks(fallback, step)
    with pytest.raises(ValueError, match="linear_attention_chunk=BT"):
        thdc.megatron.use_step_chunks(GatedDeltaNetStandIn(), make_step(64, 9))
    with pytest.raises(TypeError, match="GraphStep"):
        thdc.megatron.use_step_chunks(GatedDeltaNetStandIn(), object())


def test_megatron_core_gated_delta_net_has_the_calls_the_wiring_meets():
    """Where megatron-core's GatedDeltaNet is installed: the layer still
    resolves cu_seqlens through _resolve_cu_seqlens and calls its
    gated_delta_rule with cu_seqlens= (the stand-in's shape)."""
    import inspect
    gdn = pytest.importorskip("megatron.core.ssm.gated_delta_net.gdn",
                              reason="megatron-core without Gated DeltaNet")
    source = inspect.getsource(gdn.GatedDeltaNet)
    assert "self._resolve_cu_seqlens(" in source
    assert "self.gated_delta_rule(" in source and "cu_seqlens=cu_seqlens_q" in source
    assert callable(getattr(gdn.GatedDeltaNet, "_resolve_cu_seqlens", None))
