"""bench/megatron_gpt.py, the six-mode comparison of megatron-core's GPTModel,
on the CPU: what runs without TransformerEngine or a GPU.
The batch dicts megatron-core's packing loader yields (shapes, dtypes, every
real token once), the mode registry, the command line, the end table, and,
where thdc has its JIT, the dicts through GraphStep's host code (compact
convention, exact rows, a ladder's rungs). The training itself needs
megatron-core, TransformerEngine and a GPU: those tests skip naming what is
missing."""
import os
import sys

import numpy as np
import pytest

import thdc
from conftest import SOURCE_DIR

BENCH_DIR = os.path.join(SOURCE_DIR, "bench")
if BENCH_DIR not in sys.path:  # the scripts import their neighbours by name
    sys.path.insert(0, BENCH_DIR)
import megatron_gpt  # noqa: E402  (nothing of megatron-core at module level)
import megatron_gpt_batches  # noqa: E402


@pytest.fixture(scope="module")
def batches():
    pytest.importorskip("torch", minversion="2.10")  # thdc.megatron needs it
    return megatron_gpt_batches


def tiny_args(batches, *extra):
    return batches.parse_args(["--preset", "tiny", "--C", "256", "--N", "16", *extra])


def test_arguments(batches):
    args = batches.parse_args([])
    assert args.modes == tuple(batches.MODES) and args.C == 8192 and args.N == 64
    args = batches.parse_args(["--modes", "thdc-exact,megatron-eager", "--preset", "1.3b",
                               "--C", "16384", "--steps", "7", "--warmup", "2", "--json", "x"])
    assert args.modes == ("thdc-exact", "megatron-eager") and args.preset == "1.3b"
    assert (args.C, args.steps, args.warmup, args.json) == (16384, 7, 2, "x")
    for bad in (["--modes", "eager"], ["--preset", "7b"], ["--steps", "0"]):
        with pytest.raises(SystemExit):
            batches.parse_args(bad)


def test_presets_sizes(batches):
    millions = {name: batches.parameter_count(p) / 1e6 for name, p in batches.PRESETS.items()}
    assert 110 < millions["125m"] < 150
    assert 330 < millions["370m"] < 410
    assert 1200 < millions["1.3b"] < 1450


def test_mode_registry(batches):
    assert list(batches.MODES) == ["megatron-eager", "megatron-graphs", "thdc-graphs",
                                   "thdc-ladder", "thdc-exact", "thdc-full-iteration"]
    assert set(megatron_gpt.RUNNERS) == set(batches.MODES)
    for name, mode in batches.MODES.items():
        assert mode.name == name and mode.padded in ("T", "C", "rung")
        assert mode.thdc == name.startswith("thdc")
        assert bool(megatron_gpt.RUNNERS[name].graphs) == (mode.graphs != "none")
    runner = megatron_gpt.RUNNERS["thdc-full-iteration"]
    assert runner.graphs == "full_iteration" and runner.device == "pinned"
    figures = {"ms_per_iter": 10.0, "tokens_per_s": 1e6, "syncs_per_iter": 0.0,
               "max_memory_bytes": 2**30, "padded_rows_per_iter": 12, "capture_s": None,
               "tokens_trained_once": True, "first_losses": [10.4, 10.3]}
    text = megatron_gpt.table({"thdc-exact": figures})
    assert "thdc-exact" in text and "10.4000" in text


def test_count_syncs_names_each_site(monkeypatch):
    """The count is of PyTorch's synchronisation warnings only, each named
    by the line that made the call; nothing is counted when disabled."""
    import contextlib
    import warnings

    monkeypatch.setattr(megatron_gpt, "sync_debug", lambda mode: contextlib.nullcontext())

    def synchronising_call():
        warnings.warn("called a synchronizing CUDA operation\nmore", UserWarning)

    with megatron_gpt.count_syncs(True) as counted:
        synchronising_call()
        warnings.warn("something else", UserWarning)
        synchronising_call()
    assert counted[0] == 2 and len(counted[1]) == 2
    line = synchronising_call.__code__.co_firstlineno + 1
    assert counted[1][0] == f"{__file__}:{line}: called a synchronizing CUDA operation"
    with pytest.warns(UserWarning, match="synchronizing"):  # left to the caller
        with megatron_gpt.count_syncs(False) as counted:
            synchronising_call()
    assert counted == [None, []]


def test_send(batches):
    """The loader's copies: every tensor moved (a new dict, the host's left
    as they were), the ints and the plan's facts kept; nothing moved for a
    loader that copies them itself ("pinned") or none."""
    import torch

    args = tiny_args(batches)
    gb, plan = batches.global_batch(args, batches.PRESETS["tiny"], 0)
    host = batches.make_microbatches(gb, plan)
    assert batches.send(host, "pinned") is host and batches.send(host, None) is host
    sent = batches.send(host, "meta")  # a device other than the host's
    assert len(sent) == len(host)
    for a, b in zip(host, sent):
        assert set(a.batch) == set(b.batch) and b.batch is not a.batch
        assert (a.rows, a.real_tokens, a.num_seqs, a.rung) == (b.rows, b.real_tokens,
                                                              b.num_seqs, b.rung)
        assert b.batch["max_seqlen"] == a.batch["max_seqlen"] == a.max_seqlen
        for key, value in a.batch.items():
            if isinstance(value, torch.Tensor):
                assert value.device.type == "cpu" and b.batch[key].device.type == "meta"
                assert b.batch[key].shape == value.shape and b.batch[key].dtype == value.dtype


@pytest.mark.parametrize("align", [1, 4])
def test_batch_dicts(batches, align):
    """The keys, dtypes and shapes data_schedule.py asserts; cu arrays 1-D
    int32 with valid and padded offsets; every real token of the global
    batch in exactly one microbatch, with its label, once in the loss."""
    import torch

    args = tiny_args(batches)
    preset = batches.PRESETS["tiny"]
    for step in range(3):
        gb, plan = batches.global_batch(args, preset, step)
        microbatches = batches.make_microbatches(gb, plan, align)
        assert len(microbatches) == plan.num_microbatches >= 1
        seen = []
        for m, mb in enumerate(microbatches):
            b = mb.batch
            assert set(b) == {"tokens", "labels", "loss_mask", "position_ids", "cu_seqlens",
                              "cu_seqlens_padded", "max_seqlen"}
            for key in ("tokens", "labels", "position_ids"):
                assert b[key].dtype == torch.int64 and b[key].shape == (mb.rows,)
            assert b["loss_mask"].dtype == torch.float32 and b["loss_mask"].shape == (mb.rows,)
            for key in ("cu_seqlens", "cu_seqlens_padded"):
                assert b[key].dtype == torch.int32 and b[key].dim() == 1
                assert b[key].shape == (mb.num_seqs + 1,)
            assert isinstance(b["max_seqlen"], int)
            cu, cup = b["cu_seqlens"].numpy(), b["cu_seqlens_padded"].numpy()
            assert cup[-1] == mb.rows and mb.rows <= args.C * (1 if align == 1 else 2)
            lengths, widths = np.diff(cu), np.diff(cup)
            assert (widths % align == 0).all() and (widths >= lengths).all()
            assert b["max_seqlen"] == widths.max()
            assert int(b["loss_mask"].sum()) == mb.real_tokens == lengths.sum()
            for i, doc in enumerate(plan.documents(m)):
                rows = slice(int(cup[i]), int(cup[i]) + int(lengths[i]))
                assert b["loss_mask"][rows].eq(1).all()
                assert b["loss_mask"][int(cup[i]) + int(lengths[i]):int(cup[i + 1])].eq(0).all()
                start = int(gb.offsets[doc])
                np.testing.assert_array_equal(b["tokens"][rows].numpy(),
                                              gb.tokens[start:start + lengths[i]])
                np.testing.assert_array_equal(b["labels"][rows].numpy(),
                                              gb.labels[start:start + lengths[i]])
                np.testing.assert_array_equal(b["position_ids"][rows].numpy(),
                                              np.arange(lengths[i]))
                seen.append(int(doc))
        assert sorted(seen) == list(range(len(gb.lengths)))  # every document once
        assert sum(mb.real_tokens for mb in microbatches) == gb.num_tokens


def test_ladder_rungs_hold_their_microbatches(batches):
    args = tiny_args(batches)
    preset = batches.PRESETS["tiny"]
    capacities, sequences, _ = batches.advise_ladder(args, preset)
    assert capacities[-1] == args.C and sequences[-1] == args.N
    for step in range(20, 24):
        gb, plan = batches.global_batch(args, preset, step, (capacities, sequences))
        for mb in batches.make_microbatches(gb, plan):
            assert mb.rows <= capacities[mb.rung] and mb.num_seqs <= sequences[mb.rung] - 1


def test_iteration_ladder_and_its_shapes(batches, thdc_megatron):
    """thdc-full-iteration's ladder: --iteration-rungs rungs below C; the
    plans' rungs fit it, and the iteration shapes (the graphs) over the
    stream are what thdc.megatron.shapes_of counts: fewer with fewer rungs."""
    preset = batches.PRESETS["tiny"]
    counts = {}
    for rungs in (1, 3):
        args = tiny_args(batches, "--iteration-rungs", str(rungs))
        capacities, sequences = batches.iteration_ladder(args, preset)
        assert capacities[-1] == args.C and sequences[-1] == args.N
        assert len(capacities) <= rungs + 2  # advise may keep C twice (two N)
        step = thdc_megatron.GraphStep(args.C, args.N, 1, 0, device="cpu",
                                       convention="compact", capacities=list(capacities),
                                       sequence_capacities=list(sequences))
        lists = []
        for it in range(30):
            gb, plan = batches.global_batch(args, preset, it, (capacities, sequences))
            lists.append([int(r) for r in plan.rungs])
            assert plan.num_microbatches <= batches.max_microbatches(args, preset)
        counts[rungs] = thdc_megatron.shapes_of(lists, step)
        assert sum(counts[rungs].values()) == 30
    assert len(counts[1]) <= len(counts[3])
    with pytest.raises(SystemExit):
        tiny_args(batches, "--iteration-rungs", "0")
    # by default thdc-ladder's ladder
    args = tiny_args(batches)
    assert batches.iteration_ladder(args, preset) == batches.advise_ladder(args, preset)[:2]


def test_iteration_shapes_hold_every_iteration_of_the_run(batches, thdc_megatron):
    """--iteration-shapes planned: at most --max-graphs shapes, chosen from
    the run's plans, one of which holds each iteration of the run (same
    microbatch count, each rung in load order at least the plan's); "met"
    plans nothing."""
    preset = batches.PRESETS["tiny"]
    for graphs in (2, 6, 40):
        args = tiny_args(batches, "--steps", "30", "--max-graphs", str(graphs))
        ladder = batches.iteration_ladder(args, preset)
        shapes = batches.iteration_shapes(args, preset, ladder)
        assert 0 < len(shapes) <= graphs
        met = set()
        for it in range(30):
            own = sorted((int(r) for r in batches.global_batch(args, preset, it, ladder)[1].rungs),
                         reverse=True)
            met.add(tuple(own))
            held = [s for s in shapes
                    if len(s) == len(own) and all(b >= a for a, b in zip(own, s))]
            counts = {len(s) for s in shapes}
            assert held or len(own) not in counts
        if graphs >= len(met):
            assert sorted(shapes) == sorted(met)
    assert batches.iteration_shapes(tiny_args(batches, "--iteration-shapes", "met"), preset,
                                    ladder) is None


def test_print_bundles(batches, capsys):
    assert megatron_gpt.main(["--preset", "tiny", "--C", "256", "--N", "16",
                              "--print-bundles"]) is None
    lines = capsys.readouterr().out.splitlines()
    assert "256,1,16" in lines


@pytest.fixture(scope="module")
def thdc_megatron(batches):
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    import importlib
    return importlib.import_module("thdc.megatron")


def test_batch_dicts_load_into_graph_step(batches, thdc_megatron):
    """The thdc modes' path on GraphStep's host code: the loader's dict loads
    as it is (max_seqlen an int), the step pads to C in the compact
    convention, exact_rows gives back the T rows; a ladder's rung pads to B.
    Every real token is in the loss once."""
    args = tiny_args(batches)
    preset = batches.PRESETS["tiny"]
    capacities, sequences, _ = batches.advise_ladder(args, preset)
    step = thdc_megatron.GraphStep(args.C, args.N, 1, 0, device="cpu", convention="compact")
    ladder = thdc_megatron.GraphStep(args.C, args.N, 1, 0, device="cpu", convention="compact",
                                     capacities=list(capacities),
                                     sequence_capacities=list(sequences))
    gb, plan = batches.global_batch(args, preset, 3, (capacities, sequences))
    total = 0
    for mb in batches.make_microbatches(gb, plan):
        slot = step.slot(0)
        slot.load_inputs(**mb.batch)
        batch, params = slot.run()
        assert batch["tokens"].shape == (1, args.C)
        assert params.cu_seqlens_q_padded.shape == (args.N + 1,)
        assert int(batch["loss_mask"].sum()) == mb.real_tokens
        exact, exact_params = slot.exact_rows(mb.rows, mb.num_seqs, mb.max_seqlen)
        assert exact["tokens"].shape == (1, mb.rows)
        assert exact_params.cu_seqlens_q_padded.shape == (mb.num_seqs + 1,)
        assert exact_params.max_seqlen_q == mb.max_seqlen
        assert int(exact["loss_mask"].sum()) == mb.real_tokens
        rung_slot = ladder.slot(0)
        rung_slot.load_inputs(**mb.batch)
        rb, rp = rung_slot.rung(mb.rung).run()
        assert rb["tokens"].shape == (1, capacities[mb.rung])
        assert rp.max_seqlen_q == capacities[mb.rung]
        assert int(rb["loss_mask"].sum()) == mb.real_tokens
        assert int(slot.status) == 0 and int(rung_slot.status) == 0
        total += mb.real_tokens
    assert total == gb.num_tokens


def test_megatron_core_setup_imports(batches):
    """Where megatron-core is importable: the symbols the benchmark calls exist
    (nothing runs: the model needs TransformerEngine and a GPU)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed")
    schedule = pytest.importorskip(
        "megatron.core.datasets.data_schedule",
        reason="the installed megatron-core has no datasets.data_schedule (a release before "
               "the packing path; the benchmark needs dev)")
    if not hasattr(schedule, "get_batch_on_this_rank_for_sequence_packing"):
        pytest.skip("the installed megatron-core has no "
                    "get_batch_on_this_rank_for_sequence_packing (the benchmark needs dev)")
    from megatron.core.pipeline_parallel import get_forward_backward_func  # noqa: F401
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer  # noqa: F401
    from megatron.core.distributed import DistributedDataParallelConfig  # noqa: F401
    pytest.importorskip("transformer_engine", reason="TransformerEngine is not installed")
    from megatron.core.transformer.cuda_graphs import TECudaGraphHelper  # noqa: F401
