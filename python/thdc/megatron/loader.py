"""thdc.megatron's microbatch loader: StepSlot.load_inputs's copies into a
slot's static inputs. The contract it keeps is the runtime's
(runtime/InputLoad.h), stated there once; here are the conversions it
leaves to PyTorch."""
from __future__ import annotations

from .. import stages
from .._checks import _import_torch
from .._thdc import InputGather

torch = _import_torch("thdc.megatron")

# The load's arguments as the runtime names them (runtime/InputLoad.h): the
# tensors, then num_seqs; the cu arrays are the tensors that are not data keys.
_LOAD_ARGUMENTS = InputGather.ARGUMENTS[:-1]
_CU_ARGUMENTS = tuple(n for n in _LOAD_ARGUMENTS if n not in {f.name for f in stages.DATA})


class InputLoader:
    """What StepSlot.load_inputs does, for static input buffers `inputs`
    (a namespace of 1-D tensors: the stage's data keys, cu_seqlens,
    cu_seqlens_padded, num_seqs and, with data keys, num_rows) on one
    device or the CPU, through `gather` (a thdc._thdc.Gather of the
    buffers' device, or its host form for CPU buffers).

    The contract of one load is the runtime's (runtime/InputLoad.h),
    stated there once: every data tensor the stage reads is [T] or [1, T] (micro-batch
    size 1, as sequence packing has it) with the same T rows, at most its
    buffer's; the cu arrays are [E] or [1, E] with the same E entries, at
    most their buffers'; T goes to the kernel as num_rows, so that a
    microbatch whose offsets claim more rows than the caller gave is
    flagged (rows_not_given) and emptied rather than reading rows an
    earlier microbatch left in the buffers; the cu entries after the E given
    are set to -1, so that a num_seqs claiming more sequences than the arrays
    give is flagged (not_monotonic) and its dropped counts depend on what
    was given alone. Every check runs before anything is
    copied. One call into the module checks the load and gathers, in one
    launch, every tensor of its buffer's dtype, contiguous and on the
    buffers' device, and the stores; what is left here is the conversions:
    each other tensor is copied by one Tensor.copy_ (which converts dtypes
    and moves between devices), and integers are never narrowed silently
    (an int64 array copied into an int32 buffer saturates, so an offset past
    the int32 range is flagged, not wrapped). per_tensor: every tensor by
    its own copy_ (the stores still in one gather), for comparisons."""

    def __init__(self, inputs, data_keys, stage: str, gather, per_tensor: bool = False):
        self.inputs, self.data_keys, self.stage = inputs, tuple(data_keys), stage
        cu = _CU_ARGUMENTS
        num_rows = getattr(inputs, "num_rows", None) if self.data_keys else None
        if self.data_keys and num_rows is None:
            raise ValueError("a stage that reads data keys needs a num_rows input: the "
                             "kernel bounds the rows it reads by the rows given")
        targets = tuple((_LOAD_ARGUMENTS.index(n), getattr(inputs, n), n not in cu)
                        for n in self.data_keys + cu)
        # -1s copied after the given cu entries (the module's contract).
        self.unset = torch.full_like(inputs.cu_seqlens, -1)
        self.fast = InputGather(gather, targets, inputs.num_seqs, num_rows,
                                           self.unset, stage=stage, per_tensor=per_tensor)
        # The buffer of each argument index (num_seqs last), for the copies.
        self.buffers = [getattr(inputs, n, None) for n in _LOAD_ARGUMENTS] + [inputs.num_seqs]

    def load(self, tokens=None, labels=None, loss_mask=None, position_ids=None,
             cu_seqlens=None, cu_seqlens_padded=None, num_seqs=None, max_seqlen=None,
             local_cp_size=None, **unknown) -> None:
        if unknown:
            _refuse_unknown("load_inputs", unknown)
        if local_cp_size is not None:
            _refuse_local_cp_size(local_cp_size)
        given = (tokens, labels, loss_mask, position_ids, cu_seqlens, cu_seqlens_padded,
                 num_seqs)  # InputGather.ARGUMENTS' order (test_step_schema checks it)
        rest = self.fast(*given)
        if rest is not None:
            self.convert(rest, given)

    def convert(self, rest, given) -> None:
        """Copies the arguments `rest` (indices into `given`, checked by the
        module) into their buffers with Tensor.copy_, saturating integers:
        num_seqs's first element, every other tensor whole."""
        for index in rest:
            buffer, value = self.buffers[index], given[index].reshape(-1)
            if index == len(_LOAD_ARGUMENTS):
                value = value[:1]
            buffer[:value.numel()].copy_(_saturated(value, buffer.dtype), non_blocking=True)


# The other keys of the batch dict the reference framework's sequence-packing
# loader yields (docs/megatron.md, "Loading a microbatch"): max_seqlen is
# taken and not read (the step's own is the static C*cp, which bounds every
# microbatch it holds; reading a tensor would synchronise), local_cp_size
# (dynamic CP) is refused here: a step of several CP sizes picks its
# variant from it before loading (SlotRung.__call__).
_BATCH_KEYS = ("max_seqlen", "local_cp_size")
_LOAD_NAMES = InputGather.ARGUMENTS + _BATCH_KEYS


# A packed microbatch's figures from the host's plan, in the batch dict of
# megatron-core's scheduler when thdc.megatron.run has it leave them
# (trainer.leave_plan_figures): its packed rows (all CP ranks), its sequences
# and its longest padded sequence, host ints. With them the batch function
# picks a rung of a capacity ladder, or cuts exact rows, without reading the
# device; load_inputs leaves them alone.
PLAN_KEYS = ("thdc_plan_rows", "thdc_plan_num_seqs", "thdc_plan_max_seqlen")


def plan_figures(batch: dict):
    """(rows, sequences, longest) from a batch dict, or None where it has no
    plan figures (an iterator the scheduler did not make)."""
    if not all(key in batch for key in PLAN_KEYS):
        return None
    return tuple(int(batch[key]) for key in PLAN_KEYS)


def packing_batch_inputs(batch: dict) -> dict:
    """load_inputs' arguments from a batch dict of the reference framework's
    sequence-packing loader: the keys the load takes (others are left alone,
    as the reference framework leaves them), and num_seqs where the batch
    has none. That loader's cu arrays hold exactly the microbatch's
    num_seqs + 1 offsets (_pack_sequences, megatron/core/datasets/
    data_schedule_utils.py:232-269 on dev), so N sequences fill all N+1
    entries, which the load could not tell from arrays padded to its
    capacity. Reads shapes only."""
    given = {k: batch[k] for k in _LOAD_NAMES if k in batch}
    cu = given.get("cu_seqlens")
    if "num_seqs" not in given and cu is not None:
        given["num_seqs"] = (int(cu.shape[-1]) if hasattr(cu, "shape") else len(cu)) - 1
    return given


def _refuse_local_cp_size(value) -> None:
    raise ValueError(f"load_inputs(local_cp_size={value!r}): a microbatch of dynamic context "
                     f"parallelism; this step's CP size is fixed when it is made "
                     f"(GraphStep(cp=...)), so pass local_cp_size=None, or make the step with "
                     f"GraphStep(cp_sizes=...) and call it (or its variant(size)) instead")


def _refuse_unknown(what: str, unknown: dict, extra=()) -> None:
    """TypeError naming the keyword arguments `what` does not take, the ones
    it does, and the closest to each unknown one."""
    import difflib

    names = _LOAD_NAMES + tuple(extra)
    hints = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, names, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise TypeError(f"{what}() got unexpected keyword argument{'s' * (len(hints) > 1)} "
                    f"{', '.join(hints)}; it takes {', '.join(names)}")


def _saturated(value: "torch.Tensor", dtype: "torch.dtype") -> "torch.Tensor":
    """`value`, clamped into `dtype`'s range when it is a wider integer type,
    so that copy_ saturates instead of wrapping: an offset past the int32
    range then fails the step's checks instead of becoming a small valid
    one. On the value's device; no synchronisation."""
    if (value.dtype.is_floating_point or value.dtype is torch.bool or dtype.is_floating_point
            or dtype is torch.bool):
        return value
    wide, narrow = torch.iinfo(value.dtype), torch.iinfo(dtype)
    if wide.min >= narrow.min and wide.max <= narrow.max:
        return value
    return value.clamp(max(wide.min, narrow.min), min(wide.max, narrow.max))
