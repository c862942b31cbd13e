"""thdc's get_batch_on_this_rank_for_sequence_packing against the reference
framework's own function (megatron-core dev d48bd6be0a) on a GPU, both live.

Needs a GPU and a dev checkout (THDC_MEGATRON_DEV); with TransformerEngine
installed, dev's CP slicing runs TE's own partition index, else the
restatement of megatron_dev.py. For every case of the golden file (every
stage form, CP 1-4, zigzag and contiguous, C = 32) and for random packs at
the sizes a model trains with (C = 4096, N = 64, CP 1 and 2), the same batch
goes to both functions on the GPU and the 7-tuples must agree as
test_megatron_dev_cpu.py states it; dev's own outputs on the GPU must equal
what it gave on the CPU (the golden file), which checks the restated TE
index against TE's.
"""
import collections
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import megatron_dev  # noqa: E402

if megatron_dev.dev_path() is None:
    pytest.skip("THDC_MEGATRON_DEV names no megatron-core dev checkout", allow_module_level=True)

import make_megatron_dev_golden as golden  # noqa: E402
import test_megatron_dev_cpu as cpu  # noqa: E402
import thdc.megatron  # noqa: E402

REPORT = os.environ.get("THDC_DEV_REPORT")


@pytest.fixture(scope="module")
def dev():
    warnings.simplefilter("ignore")
    return megatron_dev.load()


@pytest.fixture(scope="module")
def te_index(dev):
    return megatron_dev.has_te_index()


def thdc_gpu(layout, batch, C, N, cache):
    from types import SimpleNamespace

    key = (C, N)
    if key not in cache:
        cache[key] = thdc.megatron.SequencePackingBatches(device="cuda", convention="compact")
    batches = cache[key]
    pg = SimpleNamespace(tp=megatron_dev.LocalGroup(0, 1),
                         cp=megatron_dev.LocalGroup(layout["cp_rank"], layout["cp"]),
                         pp=megatron_dev.LocalGroup(layout["pp_rank"], layout["pp"]))
    cfg = megatron_dev.config(C, N, cp_mode=layout["cp_mode"], cp=layout["cp"])
    try:
        result = batches(iter([golden.torch_batch(batch, "cuda")]), pg_collection=pg,
                         config=cfg, **layout["form"])
    except ValueError as error:
        return error, None
    return result, int(batches.last.outputs.status[0])


def dev_gpu(dev, te_index, layout, batch, C, N):
    cfg = megatron_dev.config(C, N, cp_mode=layout["cp_mode"], cp=layout["cp"])
    return megatron_dev.call(dev, golden.torch_batch(batch, "cuda"), cfg=cfg, cp=layout["cp"],
                             cp_rank=layout["cp_rank"], pp=layout["pp"],
                             pp_rank=layout["pp_rank"], form=layout["form"], device="cuda",
                             te_index=te_index)


def large_cases():
    rng = np.random.default_rng(7)
    out = []
    for cp, mode, ranks in ((1, "zigzag", (0,)), (2, "zigzag", (0, 1)),
                            (2, "contiguous", (0, 1))):
        for i in range(10):
            kind = ("random", "random", "random", "full", "exact")[i % 5]
            batch = golden.microbatch(rng, cp, mode, kind, C=4096, N=64)
            for rank in ranks:
                out.append((dict(cp=cp, cp_mode=mode, cp_rank=rank, pp=1, pp_rank=0, form={},
                                 kind=kind), batch))
    return out


def test_thdc_equals_dev_on_the_gpu(dev, te_index):
    cache = {}
    failures, checked, trained = [], 0, 0
    for (case, layout, batch), stored in zip(cpu.CASES, cpu.GOLDEN["cases"]):
        mine = dev_gpu(dev, te_index, layout, batch, golden.C, golden.N)
        flat = megatron_dev.flatten(mine)
        if ("error" in flat) != ("error" in stored["dev"]) or (
                "error" not in flat and flat != stored["dev"]):
            failures.append(f"case {case}: dev on the GPU differs from dev on the CPU")
        result, status = thdc_gpu(layout, batch, golden.C, golden.N, cache)
        problems = cpu.compare(layout, batch, flat, result, status)
        checked += 1
        trained += "error" not in flat
        if problems:
            failures.append(f"case {case} {layout}: " + "; ".join(problems))
    for layout, batch in large_cases():
        flat = megatron_dev.flatten(dev_gpu(dev, te_index, layout, batch, 4096, 64))
        result, status = thdc_gpu(layout, batch, 4096, 64, cache)
        problems = cpu.compare(layout, batch, flat, result, status)
        checked += 1
        trained += "error" not in flat
        if problems:
            failures.append(f"C=4096 {layout}: " + "; ".join(problems))
    line = (f"dev vs thdc on the GPU: {checked} cases, {trained} trained by dev, "
            f"{len(failures)} differ; TE's own index: {te_index}")
    print(line)
    if REPORT:
        with open(REPORT, "a") as f:
            f.write(line + "\n")
    kinds = collections.Counter(f.rsplit("}: ", 1)[-1].split(" (")[0] for f in failures)
    assert not failures, (f"{len(failures)} cases differ, by kind: {dict(kinds)}\n"
                          + "\n".join(failures[:10]))
