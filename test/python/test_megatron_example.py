"""examples/megatron/simple_train_loop.py on the CPU: its command line, the
batch dicts it packs (every document once, each microbatch within C rows and
N - 1 documents, labels the next tokens of the same document), and its
forward_step on GraphStep's host code with a stand-in model: the model gets
thdc's 7-tuple in megatron-core's argument order at the static shapes, and
the loss is the microbatch's own. The model itself needs megatron-core,
TransformerEngine and a GPU."""
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import load_example, megatron_or_skip

thdc_megatron = megatron_or_skip()
import torch  # noqa: E402  (megatron_or_skip has skipped the module without it)

from microbatches import LocalGroup  # noqa: E402

example = load_example("megatron", "simple_train_loop")


def test_arguments():
    args = example.parse_args([])
    assert (args.iterations, args.documents, args.C, args.N) == (20, 16, 4096, 16)
    args = example.parse_args(["--C", "512", "--N", "4", "--documents", "9", "--iterations", "2"])
    assert (args.C, args.N, args.documents, args.iterations) == (512, 4, 9, 2)
    for bad in (["--C", "8"], ["--N", "1"], ["--documents", "0"], ["--iterations", "0"]):
        with pytest.raises(SystemExit):
            example.parse_args(bad)


@pytest.mark.parametrize("C,N,documents", [(256, 4, 30), (4096, 16, 16), (64, 2, 5)])
def test_global_batch_packs_every_document_once(C, N, documents):
    """The dicts megatron-core's scheduler yields: int64 data, float32 loss
    mask, int32 cu arrays (equal at cp = 1), max_seqlen a host int; every
    document in one microbatch, none over C rows or N - 1 documents; labels
    the next token of the same document, positions restarting at each."""
    vocab = 1000
    microbatches = example.global_batch(np.random.default_rng(7), documents, C, N, vocab,
                                        device="cpu")
    again = example.global_batch(np.random.default_rng(7), documents, C, N, vocab, device="cpu")
    seen = 0
    for batch, same in zip(microbatches, again, strict=True):
        assert set(batch) == {"tokens", "labels", "loss_mask", "position_ids", "cu_seqlens",
                              "cu_seqlens_padded", "max_seqlen"}
        cu = batch["cu_seqlens"]
        rows = int(cu[-1])
        assert cu.dtype == torch.int32 and torch.equal(cu, batch["cu_seqlens_padded"])
        assert 1 <= len(cu) - 1 <= N - 1 and rows <= C
        for key in ("tokens", "labels", "position_ids"):
            assert batch[key].dtype == torch.int64 and batch[key].shape == (rows,)
            assert torch.equal(batch[key], same[key])  # the same seed, the same batch
        assert batch["loss_mask"].dtype == torch.float32 and bool(batch["loss_mask"].eq(1).all())
        lengths = torch.diff(cu).tolist()
        assert min(lengths) >= 16 and batch["max_seqlen"] == max(lengths)
        assert type(batch["max_seqlen"]) is int
        tokens, labels = batch["tokens"].numpy(), batch["labels"].numpy()
        assert tokens.min() >= 0 and tokens.max() < vocab
        for start, length in zip(cu[:-1].tolist(), lengths):
            doc = slice(start, start + length)
            np.testing.assert_array_equal(batch["position_ids"][doc].numpy(), np.arange(length))
            np.testing.assert_array_equal(labels[doc][:-1], tokens[doc][1:])
            stride = (tokens[start + 1] - tokens[start]) % vocab
            assert (labels[start + length - 1] - tokens[start + length - 1]) % vocab == stride
        seen += len(lengths)
    assert seen == documents


@pytest.fixture
def one_rank_on_the_cpu(monkeypatch):
    """thdc's function as one process on the CPU has it: TP = PP = CP = 1
    (the groups megatron-core's parallel_state would give), GraphStep's host
    code; the module's steps dropped after."""
    from thdc.megatron import sequence_packing

    groups = (LocalGroup(0, 1), LocalGroup(0, 1), LocalGroup(0, 1))
    monkeypatch.setattr(sequence_packing, "_groups", lambda pg_collection: groups)
    thdc_megatron.SEQUENCE_PACKING.configure(device="cpu")
    yield
    thdc_megatron.SEQUENCE_PACKING.configure()


def test_forward_step_gives_the_model_the_static_batch(one_rank_on_the_cpu):
    """forward_step with the example's config fields: the model gets
    tokens, position_ids, no attention mask, labels, loss mask, the padding
    mask, all [1, C], and PackedSeqParams of N + 1 offsets; the microbatch's
    rows first, unchanged, the rest padding. The loss function sums the
    model's per-token loss over the microbatch's tokens and counts them."""
    args = example.parse_args(["--C", "256", "--N", "4", "--documents", "12"])
    config = SimpleNamespace(**example.thd_fields(args))
    microbatches = example.global_batch(np.random.default_rng(3), args.documents, args.C,
                                        args.N, args.vocab, device="cpu")
    assert len(microbatches) > 1
    calls = []

    def model(tokens, position_ids, attention_mask, **kwargs):
        calls.append(dict(kwargs, tokens=tokens.clone(), position_ids=position_ids.clone(),
                          attention_mask=attention_mask))
        return kwargs["labels"].float() + 0.5  # a per-token loss the test can sum

    iterator = iter(microbatches)
    for batch in microbatches:
        output, loss_func = example.forward_step(config, iterator, model)
        call = calls[-1]
        rows = int(batch["cu_seqlens"][-1])
        assert call["attention_mask"] is None
        for key in ("tokens", "position_ids", "labels", "loss_mask", "padding_mask"):
            assert call[key].shape == (1, args.C), key
        for key in ("tokens", "position_ids", "labels"):
            assert torch.equal(call[key][0, :rows], batch[key]), key
        assert bool(call["loss_mask"][0, :rows].eq(1).all())
        assert not bool(call["loss_mask"][0, rows:].any())
        assert int(call["padding_mask"].sum()) == args.C - rows
        params = call["packed_seq_params"]
        assert params.qkv_format == "thd" and params.max_seqlen_q == args.C
        assert params.cu_seqlens_q_padded.shape == (args.N + 1,)
        assert int(params.cu_seqlens_q_padded[-1]) == args.C
        assert int(thdc_megatron.SEQUENCE_PACKING.last.status) == 0  # nothing emptied
        loss, tokens, report = loss_func(output)
        expected = float((batch["labels"].double() + 0.5).sum())
        assert int(tokens) == rows and float(loss) == pytest.approx(expected, rel=1e-6)
        assert report["lm loss"].tolist() == pytest.approx([float(loss), rows], rel=1e-6)
    with pytest.raises(StopIteration):
        next(iterator)


def test_megatron_core_has_what_the_example_calls():
    """Where megatron-core imports: the names the example imports exist and
    its THD fields make a TransformerConfig; with TransformerEngine, its
    layer spec too (the model needs a GPU to run)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed")
    from megatron.core.distributed import (DistributedDataParallel,  # noqa: F401
                                           DistributedDataParallelConfig, finalize_model_grads)
    from megatron.core.models.gpt import GPTModel  # noqa: F401
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer  # noqa: F401
    from megatron.core.pipeline_parallel import get_forward_backward_func  # noqa: F401
    from megatron.core.transformer.transformer_config import TransformerConfig

    import dataclasses

    import megatron.core

    fields = example.thd_fields(example.parse_args([]))
    missing = sorted(set(fields) - {f.name for f in dataclasses.fields(TransformerConfig)})
    if missing:  # PyPI's releases up to 0.19.2 (README.md's set-up: the example needs dev)
        pytest.skip(f"the installed megatron-core {megatron.core.__version__} has no "
                    f"TransformerConfig field {', '.join(missing)}: the example needs dev")
    config = TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, **fields)
    assert thdc_megatron.step_options(config, tp=1, cp=1)["C"] == 4096
    pytest.importorskip("transformer_engine", reason="TransformerEngine is not installed")
    from megatron.core.models.gpt.gpt_layer_specs import (  # noqa: F401
        get_gpt_layer_with_transformer_engine_spec)
