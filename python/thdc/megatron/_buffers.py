"""A slot's buffers: where each output lies in the slot's one output buffer,
the broadcast header ahead of them, the bytes a step's buffers take (and
the refusal before allocating more than there is), the sequence-parallel
shard of a [1, C] view."""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

from .._checks import _import_torch
from .._kernel import STATUS_BITS
from .options import STAGES

if TYPE_CHECKING:
    from .step import GraphStep

torch = _import_torch("thdc.megatron")

# Each output starts on this boundary inside the slot's one output buffer.
_ALIGNMENT = 256
# The header: the first _ALIGNMENT bytes of a slot's buffer, ahead of the
# outputs, name the layout of the rung and CP size that wrote them last, one
# int32 per field. Every run writes its own on the device after its outputs
# (a captured run too), and a broadcast sends it with them: each receiver
# compares it with its own, exact_rows and the sender with the view's, on
# the device (SlotRung.broadcast, SlotRung.exact_rows). "layout" is a
# fingerprint of the output layout and of the options that change what the
# outputs hold.
_HEADER_FIELDS = ("magic", "C", "N", "cp", "cp_rank", "stage", "rung", "layout")
_HEADER_MAGIC = 0x74686463  # "thdc"
# The status bit a receiver sets when the header is not its own.
_LAYOUT_MISMATCH = STATUS_BITS["layout_mismatch"]
# The status bit a view gets when another rung (or CP size) wrote the buffer.
_RUNG_NOT_RUN = STATUS_BITS["rung_not_run"]


def _element_size(arg) -> int:
    """The bytes of one element of a signature argument."""
    return torch.empty(0, dtype=getattr(torch, arg.dtype)).element_size()


def _output_layout(spec):
    """(arg, byte offset, element size) of every output in a slot's one
    buffer, and the bytes it needs: each output on an _ALIGNMENT boundary."""
    layout, offset = [], 0
    for a in spec:
        if a.direction == "output":
            size = _element_size(a)
            layout.append((a, offset, size))
            offset += -(-a.shape[0] * size // _ALIGNMENT) * _ALIGNMENT
    return layout, max(offset, _ALIGNMENT)


def _header_words(step: "GraphStep", C: int, N: int, cp: int, rung: int, layout) -> list:
    """The broadcast header of one rung and CP size (_HEADER_FIELDS)."""
    import zlib

    described = repr(([(a.name, a.dtype, a.shape[0], offset) for a, offset, _ in layout],
                      step.cp_mode, sorted(step.options.items())))
    fingerprint = zlib.crc32(described.encode())
    words = dict(magic=_HEADER_MAGIC, C=C, N=N, cp=cp, cp_rank=step.config.local_cp_rank(cp),
                 stage=STAGES.index(step.stage), rung=rung, layout=fingerprint)
    # As int32: the fingerprint's top bit is its sign.
    return [(words[f] + 2**31) % 2**32 - 2**31 for f in _HEADER_FIELDS]


# What every rank of a group agrees on before a step's first broadcast on
# it, one int64 per field (SlotRung.broadcast): what no microbatch changes,
# the slot buffer's size among it. The rung and the CP size that ran can
# change from one microbatch to the next; the header says which, checked on
# the device. "rungs" is a fingerprint of the ladder below the top rung and
# of the CP sizes, "options" of the CP layout and the pipeline's options.
_STEP_FIELDS = ("C", "N", "cp", "cp_rank", "stage", "rungs", "options", "size")


def _step_words(step: "GraphStep", nbytes: int) -> list:
    """_STEP_FIELDS of a step whose slots' buffers take nbytes."""
    import zlib

    crc = lambda value: zlib.crc32(repr(value).encode())
    return [step.C, step.N, step.cp, step.cp_rank, STAGES.index(step.stage),
            crc((list(step.config.rungs)[:-1], list(step.cp_sizes))),
            crc((step.cp_mode, sorted(step.options.items()))), nbytes]


def _step_differences(mine: list, sender: list, src: int) -> list:
    """What of a rank's _STEP_FIELDS differs from the sender's (rank src),
    in words."""
    said = []
    for field, a, b in zip(_STEP_FIELDS, mine, sender):
        if a == b:
            continue
        if field == "rungs":
            said.append("other rungs (capacities, sequence_capacities or cp_sizes)")
        elif field == "options":
            said.append("other options (cp_mode, seq_idx, rope_table_rows, cp_order_index, "
                        "dummy_length, ...)")
        elif field == "stage":
            show = lambda v: repr(STAGES[v]) if 0 <= v < len(STAGES) else str(v)
            said.append(f"stage = {show(a)} (rank {src}: {show(b)})")
        else:
            unit = " bytes" if field == "size" else ""
            said.append(f"{field} = {a}{unit} (rank {src}: {b})")
    return said


def _step_bytes(step: "GraphStep", slots: int) -> Tuple[int, int]:
    """The bytes one slot's buffers take (inputs, outputs with the header
    and, with tp > 1, the empty microbatch of every rung and CP size that a
    broadcast receiver keeps), and the whole step's."""
    inputs = sum(a.shape[0] * _element_size(a) for a in step.spec if a.direction == "input")
    layouts = [_output_layout(s)[1] for s in step.variant_specs.values()]
    per_slot = inputs + _ALIGNMENT + max(layouts) + (sum(layouts) if step.tp > 1 else 0)
    return per_slot, per_slot * slots


def _check_memory(step: "GraphStep", slots: int) -> None:
    """MemoryError before any buffer is allocated when the step's buffers
    need more than the device has free (on the CPU, the host's available
    memory): C, N, cp and slots name sizes the caller can lower."""
    per_slot, total = _step_bytes(step, slots)
    if step.on_host:
        import os

        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # no such figure here
            return
        where = "available on the host"
    else:
        free = torch.cuda.mem_get_info(step.device)[0]
        where = f"free on {step.device}"
    if total > free:
        gib = lambda n: f"{n / 2**30:.2f} GiB"
        raise MemoryError(
            f"GraphStep(C={step.C}, N={step.N}, cp={step.cp}, slots={slots}): its buffers "
            f"take {gib(total)} ({gib(per_slot)} a slot), more than the {gib(free)} {where}; "
            f"lower C, N or slots")


def _tp_shard(rows: torch.Tensor, tp: int, tp_rank: int) -> torch.Tensor:
    """The sequence-parallel shard of [1, R] rows: rows [tp_rank*R/tp,
    (tp_rank+1)*R/tp), the contiguous piece megatron-core's scatter to the
    sequence-parallel region gives TP rank tp_rank."""
    shard = rows.shape[1] // tp
    return rows[:, tp_rank * shard:(tp_rank + 1) * shard]
