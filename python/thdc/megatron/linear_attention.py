"""The step's linear-attention chunks where megatron-core's Gated DeltaNet
layer calls flash-linear-attention.

megatron-core dev's GatedDeltaNet (megatron/core/ssm/gated_delta_net/gdn.py
on d48bd6be) takes the THD metadata from PackedSeqParams alone: it resolves
cu_seqlens to the padded offsets (common.py:480-504, `_resolve_cu_seqlens`,
which reads the last offset back to the host and checks every length on
the host: two synchronisations) and calls `self.gated_delta_rule(...,
cu_seqlens=...)` (gdn.py:373-380), fla's chunk_gated_delta_rule, which then
derives the chunks on the host (fla/ops/utils/index.py:155-164). Nothing in
the layer carries precomputed chunks.

`use_step_chunks(model, step)` gives each such layer of `model` two
instance attributes in place of its class's methods: a `_resolve_cu_seqlens`
that returns a step's own padded offsets as they are (the step has checked
them on the device: they end at C*cp, and under zigzag CP every length is a
multiple of 2*cp) and defers to the layer's own for any other tensor, and a
`gated_delta_rule` that adds the step's `chunk_indices` and `chunk_size`
when `cu_seqlens` is one of the step's offsets (any slot, rung or CP size,
found by identity: the tensor PackedSeqParams carries is the one the layer
passes on) and calls the layer's kernel unchanged otherwise. The layer's
own code runs as before; `restore_step_chunks(model)` takes the attributes
away."""
from __future__ import annotations

from typing import Dict

from .step import GraphStep

# The attributes the wiring sets on a layer instance.
_WIRED = ("gated_delta_rule", "_resolve_cu_seqlens")


def _views(step: GraphStep) -> Dict[int, object]:
    """Every view of the step (slot x CP size x rung) by the identity of its
    padded offsets, the tensor its PackedSeqParams carries."""
    views = {}
    for slot in step.slots:
        for key in step.variant_kernels:
            view = slot.variant(*key)
            views[id(view.packed_seq_params.cu_seqlens_q_padded)] = view
    return views


def _is_gated_delta_net(module) -> bool:
    """Whether `module` is a layer of dev's Gated DeltaNet shape: it calls its
    `gated_delta_rule` with cu_seqlens resolved by `_resolve_cu_seqlens`."""
    return callable(getattr(type(module), "_resolve_cu_seqlens", None)) and \
        callable(getattr(module, "gated_delta_rule", None))


def use_step_chunks(model, step: GraphStep) -> int:
    """Wires every Gated DeltaNet layer of `model` (a torch.nn.Module, or a
    list of them: megatron-core's model chunks) to `step`'s chunk metadata;
    returns how many layers. ValueError when the step computes no chunks
    (GraphStep(..., linear_attention_chunk=BT)), when a layer runs a kernel
    that takes no chunks (deterministic mode's torch fallback), when a layer
    shards sequences across CP ranks (linear_cp_mode="chunkwise": fla builds
    that metadata itself), or when there is no such layer."""
    # Imported here: importing thdc.megatron without PyTorch must name
    # thdc.megatron (step.py's check), not thdc.attention.
    from .. import attention

    if not isinstance(step, GraphStep):
        raise TypeError(f"use_step_chunks takes a thdc.megatron.GraphStep; got "
                        f"{type(step).__name__}")
    args = attention.fla_gdn_args(step)  # refuses a step without chunks, or fla's cache
    views = _views(step)
    models = model if isinstance(model, (list, tuple)) else [model]
    layers = [m for chunk in models for m in chunk.modules() if _is_gated_delta_net(m)]
    if not layers:
        raise ValueError("use_step_chunks: the model has no Gated DeltaNet layer "
                         "(megatron.core.ssm.gated_delta_net's GatedDeltaNet)")
    for layer in layers:
        config = getattr(layer, "config", None)
        if getattr(config, "linear_cp_mode", None) == "chunkwise":
            raise ValueError(
                "use_step_chunks: a layer has linear_cp_mode='chunkwise', which shards each "
                "sequence across the CP ranks (fla's CP context builds that metadata, "
                "gdn.py:208-232 on dev); the step's chunks are the whole sequences', for "
                "'headwise' CP or none")
        kernel = layer.__dict__.get("_thdc_kernel", layer.gated_delta_rule)
        if getattr(kernel, "__name__", "") == "torch_chunk_gated_delta_rule":
            raise ValueError("use_step_chunks: the layer runs megatron-core's PyTorch "
                             "fallback (deterministic_mode), which takes no chunks")
        _wire(layer, kernel, views, args["chunk_size"])
    return len(layers)


def _wire(layer, kernel, views, chunk_size: int) -> None:
    resolve = type(layer)._resolve_cu_seqlens.__get__(layer)

    def resolve_cu_seqlens(cu_seqlens_padded, cu_seqlens_actual, total_seq_len, name,
                           cp_size: int = 1):
        if cu_seqlens_padded is not None and id(cu_seqlens_padded) in views:
            return cu_seqlens_padded
        return resolve(cu_seqlens_padded, cu_seqlens_actual, total_seq_len, name,
                       cp_size=cp_size)

    def gated_delta_rule(*args, cu_seqlens=None, **kwargs):
        view = views.get(id(cu_seqlens)) if cu_seqlens is not None else None
        if view is not None and kwargs.get("cp_context") is None:
            chunks = view.linear_chunks
            kwargs.update(chunk_indices=chunks.indices, chunk_size=chunk_size)
        return kernel(*args, cu_seqlens=cu_seqlens, **kwargs)

    layer.__dict__["_thdc_kernel"] = kernel
    layer._resolve_cu_seqlens = resolve_cu_seqlens
    layer.gated_delta_rule = gated_delta_rule


def restore_step_chunks(model) -> int:
    """Undoes use_step_chunks on every layer of `model`; returns how many."""
    models = model if isinstance(model, (list, tuple)) else [model]
    count = 0
    for chunk in models:
        for module in chunk.modules():
            kernel = module.__dict__.pop("_thdc_kernel", None)
            if kernel is None:
                continue
            module.__dict__.pop("_resolve_cu_seqlens", None)
            module.gated_delta_rule = kernel
            count += 1
    return count
