"""The two ways a packed microbatch reaches the model.

The reference framework's eager preparation (bench/eager.py, its functions
imported as they are): the documents joined with torch.cat, the padding
mask and the sanitising, then the sizes read back to the host (`.item()`),
so the model sees exactly the T rows of the microbatch and shapes change
from one microbatch to the next.

thdc: the documents concatenated on the device (one gather per key, from
row indices planned on the host) into the static inputs of a
thdc.megatron.GraphStep slot; its kernel pads to C rows with a dummy
sequence, pads the cu arrays to N+1 entries and computes every row's RoPE
table row, without a host synchronisation. On the CPU the same GraphStep
runs the pipeline's host code (device="cpu").
"""
import importlib.util
import os
import sys

import torch

import thdc
import thdc.stages

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_eager_module():
    """bench/eager.py, the reference framework's step in PyTorch."""
    path = os.path.join(ROOT, "bench", "eager.py")
    spec = importlib.util.spec_from_file_location("thd_eager_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def upload(batch, plan, device):
    """The global batch's pools (and, for thdc, the plan's row indices and cu
    arrays) on the device: pinned host copies sent without waiting (the
    pinned blocks are kept until their copies are done)."""

    def send(array):
        tensor = torch.from_numpy(array)
        if device.type == "cuda":
            tensor = tensor.pin_memory()
        return tensor.to(device, non_blocking=True)

    return {"token_pool": send(batch.tokens), "label_pool": send(batch.labels),
            "loss_mask_pool": send(batch.loss_mask), "position_pool": send(batch.positions),
            "rows": send(plan.rows), "cu": send(plan.cu)}


def eager_microbatch(eager, pools, batch, plan, m):
    """Microbatch m the reference framework's eager way (cp = 1, no CUDA
    graph, so no padding to C): S1 + S4 (pack_samples), S5 (padding mask),
    S6 (sanitise), S7 (a no-op at cp = 1) and the metadata read back to the
    host. Returns the model's inputs on the T rows: tokens, positions,
    labels, loss_mask, cu_seqlens, max_seqlen (an int)."""
    packed = eager.pack_samples(pools, batch.offsets, batch.lengths, plan.documents(m), cp=1)
    cu, cup = packed.pop("cu_seqlens"), packed.pop("cu_seqlens_padded")
    max_seqlen = packed.pop("max_seqlen")
    mask = eager.build_thd_padding_mask(cu, cup)
    eager.sanitize_thd_padding_values(packed, mask)
    packed = eager.get_cp_slice_for_thd(packed, cup, 1, 0)
    _, _, max_seqlen = eager.broadcast_metadata_over_tp(cu, cup, max_seqlen, 1)
    return (packed["tokens"], packed["position_ids"], packed["labels"], packed["loss_mask"],
            cup, max_seqlen)


def load_microbatch(slot, pools, plan, m):
    """Microbatch m into a step slot's static inputs: its documents gathered
    from the pools (row indices from the plan; only host-known sizes), its
    cu arrays and sequence count."""
    rows = pools["rows"][int(plan.row_starts[m]):int(plan.row_starts[m + 1])]
    n = int(plan.num_seqs[m])
    cu = pools["cu"][m, :n + 1]
    slot.load_inputs(tokens=pools["token_pool"].index_select(0, rows),
                     labels=pools["label_pool"].index_select(0, rows),
                     loss_mask=pools["loss_mask_pool"].index_select(0, rows),
                     position_ids=pools["position_pool"].index_select(0, rows),
                     cu_seqlens=cu, cu_seqlens_padded=cu, num_seqs=n)


def step_bundle(bundle_dir, C, N, R):
    """The bundle for (C, N, R) in bundle_dir, or None without a folder
    (thdc's JIT compiles the pipeline)."""
    if bundle_dir is None:
        if not thdc.has_jit:
            raise SystemExit("this build of thdc has no JIT: pass --bundle-dir (bundles from "
                             "scripts/make-gpu-bundles.sh)")
        return None
    path = os.path.join(bundle_dir, thdc.stages.bundle_name(C, 1, N, R=R))
    if not os.path.isfile(os.path.join(path, "manifest.json")):
        raise SystemExit(f"no bundle {path}: compile python/thdc/stages.py --rope with "
                         f"C={C}, cp=1, N={N}, R={R} (scripts/make-gpu-bundles.sh)")
    return path


def make_step(device, C, N, R, slots=1, bundle_dir=None, ladder=None, dummy_length=None):
    """thdc.megatron.GraphStep with RoPE rows on `device` (a GPU, or the CPU:
    the pipeline's host code); ladder: (capacities, sequence_capacities) of
    a capacity ladder, each rung's bundle from bundle_dir; dummy_length:
    the tail in dummy sequences of that many rows (JIT only)."""
    import thdc.megatron

    if dummy_length is not None and bundle_dir is not None:
        raise SystemExit("--dummy-length compiles its own steps: leave out --bundle-dir")
    if ladder is None:
        bundle = step_bundle(bundle_dir, C, N, R)
        capacities = sequences = None
    else:
        capacities, sequences = ladder
        bundle = [step_bundle(bundle_dir, B, n, R) for B, n in zip(capacities, sequences)]
        bundle = None if bundle_dir is None else bundle
    return thdc.megatron.GraphStep(C, N, 1, 0, rope_table_rows=R, slots=slots, bundle=bundle,
                                   device="cpu" if device.type == "cpu" else device,
                                   capacities=capacities, sequence_capacities=sequences,
                                   dummy_length=dummy_length)
