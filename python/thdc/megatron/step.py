"""GraphStep: the THD step of one microbatch for one CP rank, on static
buffers: its kernels (one per rung of the capacity ladder and CP size) and
its slots (StepSlot, one buffer set per microbatch in flight)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from .. import _kernel, planner, stages
from .._checks import _check_int, _import_torch
from .._kernel import log
from ._buffers import _check_memory, _step_bytes
from ._delegate import Delegated, DelegatedValue
from .options import StepOptions
from .slot import StepSlot

if TYPE_CHECKING:
    import torch
else:
    torch = _import_torch("thdc.megatron")


class GraphStep:
    """The THD step of one microbatch for one CP rank, on static buffers.

    C: rows per CP rank (the graph's static sequence length); N: sequence
    capacity including the dummy (cu arrays have N+1 entries: at most N-1
    real sequences and the dummy over the tail, or N that fill all C*cp
    rows); cp, cp_rank: the context-parallel size and this rank.
    stage: "first", "middle", "last" or "first_last" (the module's
    documentation). cp_mode: "zigzag" (TransformerEngine's load-balanced
    layout) or "contiguous". seq_idx: compute `seq_idx` ([C*cp], every
    rank's rows). rope_table_rows: the rows of the model's RoPE frequency
    table, to compute each local row's table row (`rope_rows`, [C]).
    cp_order_index: compute the index that puts every rank's gathered rows
    back into sequence order (`restore_cp_order`). slots: buffer sets for
    microbatches in flight. tp, tp_rank, sequence_parallel: the tensor
    parallel group (only the padding mask's shard depends on them).
    bundle: a bundle of the pipeline `thdc.stages.pipeline(...)` writes for
    these options, compiled for these parameters (needed where thdc has no
    JIT); else the pipeline is compiled through the JIT. device: the CUDA
    device (default: the current one), or "cpu" for the pipeline's host code
    on CPU tensors (the bundle's, or the JIT's for the host), which gives the
    same outputs but has no streams or graphs. convention: "graph" or
    "compact". capacities, sequence_capacities: a capacity ladder
    (docs/capacity-ladder.md), rows per CP rank B_1 <= ... <= C and their
    N_1 <= ... <= N (default N for every rung; rungs of equal rows hold
    more sequences): one kernel per rung (`step.kernels`; `bundle` then one
    path per rung), and `slot.rung(r)` the slot at rung r, padded to its B
    rows with N_r + 1 offsets; `step.rung_index(rows, seqs)` the smallest
    rung that holds a microbatch. dummy_length: cover the tail with dummy
    sequences of that many rows over the spare cu entries instead of one
    (a multiple of 2*cp under zigzag CP): attention over a tail of d rows
    costs about d*dummy_length instead of d^2 (docs/capacity-ladder.md).
    linear_attention_chunk: BT, a power of two: each run also computes the
    chunk metadata of linear attention's varlen chunked kernels (Gated
    DeltaNet, Kimi Delta Attention: docs/semantics.md S15) over the padded
    offsets, `slot.linear_chunks`; thdc.attention.fla_gdn_args and
    fla_kda_args give them to flash-linear-attention.
    multiple: a low-precision recipe's token multiple m (an int, or a name
    of thdc.planner.LOW_PRECISION_MULTIPLES: "fp8", "mxfp8", "hybridep",
    ...): every rank feeds its GEMMs exactly C rows (C/tp under sequence
    parallelism), so C and every rung must be a multiple of m (m*tp with
    sequence parallelism); ValueError otherwise. Nothing else changes:
    sequences are not rounded to m (docs/megatron.md).
    cp_sizes, cp_groups: dynamic CP (docs/megatron.md, "Dynamic context
    parallelism"): the CP sizes a microbatch can have, increasing, the last
    cp (cp is then the DP x CP rank count and cp_rank the rank's index in
    it); one kernel per size and rung, `slot.variant(size, rung)` the slot
    at one, and `step(**batch, local_cp_size=size)` picks it. cp_groups maps
    a size to the sub-group's process group for PackedSeqParams.cp_group (a
    dict, or a callable taking group_size=).

    The step's own inputs, outputs, batch, packed_seq_params, run(),
    load_inputs(), ... are those of its first slot (StepSlot documents them).
    """

    # What the step gives of its first slot (Delegated): bound once, when
    # made, so nothing is looked up per call on the launch path.
    inputs = DelegatedValue[Any]("_first", doc="The first slot's static inputs (a namespace "
                                               "of tensors).")
    buffer = DelegatedValue["torch.Tensor"]("_first", doc="The first slot's one output buffer "
                                                          "(header, then outputs).")
    outputs = DelegatedValue("_first", StepSlot.outputs)
    batch = DelegatedValue("_first", StepSlot.batch)
    packed_seq_params = DelegatedValue("_first", StepSlot.packed_seq_params)
    status = DelegatedValue("_first", StepSlot.status)
    seq_idx = DelegatedValue("_first", StepSlot.seq_idx)
    rope_rows = DelegatedValue("_first", StepSlot.rope_rows)
    cp_order_index = DelegatedValue("_first", StepSlot.cp_order_index)
    linear_chunks = DelegatedValue("_first", StepSlot.linear_chunks)
    padding_mask_full = DelegatedValue("_first", StepSlot.padding_mask_full)
    padding_mask_shard = DelegatedValue("_first", StepSlot.padding_mask_shard)
    run = Delegated("_first", StepSlot.run)
    load_inputs = Delegated("_first", StepSlot.load_inputs)
    accumulate_status = Delegated("_first", StepSlot.accumulate_status)
    accumulate_dropped = Delegated("_first", StepSlot.accumulate_dropped)
    describe_status = Delegated("_first", StepSlot.describe_status)
    check_async = Delegated("_first", StepSlot.check_async)
    restore_cp_order = Delegated("_first", StepSlot.restore_cp_order)
    broadcast = Delegated("_first", StepSlot.broadcast)
    exact_rows = Delegated("_first", StepSlot.exact_rows)
    rung = Delegated("_first", StepSlot.rung)
    ran_last = Delegated("_first", StepSlot.ran_last)

    def __init__(
        self,
        C: int,
        N: int,
        cp: int = 1,
        cp_rank: int = 0,
        *,
        stage: str = "first_last",
        cp_mode: str = "zigzag",
        seq_idx: bool = True,
        rope_table_rows: Optional[int] = None,
        cp_order_index: bool = False,
        slots: int = 1,
        tp: int = 1,
        tp_rank: int = 0,
        sequence_parallel: bool = False,
        bundle=None,
        device=None,
        convention: str = "graph",
        cache_dir: str = "",
        capacities=None,
        sequence_capacities=None,
        dummy_length: Optional[int] = None,
        linear_attention_chunk: Optional[int] = None,
        multiple=None,
        cp_sizes=None,
        cp_groups=None,
    ):
        config = StepOptions(C, N, cp, cp_rank, stage=stage, cp_mode=cp_mode, seq_idx=seq_idx,
                             rope_table_rows=rope_table_rows, cp_order_index=cp_order_index,
                             slots=slots, tp=tp, tp_rank=tp_rank,
                             sequence_parallel=sequence_parallel, bundle=bundle, device=device,
                             convention=convention, cache_dir=cache_dir,
                             capacities=capacities, sequence_capacities=sequence_capacities,
                             dummy_length=dummy_length,
                             linear_attention_chunk=linear_attention_chunk, multiple=multiple,
                             cp_sizes=cp_sizes, cp_groups=cp_groups)
        self.config = config
        self.device, self.on_host = config.device, config.device.type == "cpu"
        C, N, cp, stage = config.C, config.N, config.cp, config.stage
        seq_idx, cp_order_index = config.seq_idx, config.cp_order_index
        rope_table_rows, bundle, cache_dir = config.rope_table_rows, config.bundle, config.cache_dir
        slots = config.slots
        self.C, self.N, self.cp, self.cp_rank = C, N, cp, config.cp_rank
        self.tp, self.tp_rank = config.tp, config.tp_rank
        self.sequence_parallel = config.sequence_parallel
        self.stage, self.cp_mode, self.convention = stage, config.cp_mode, config.convention
        self.rope_table_rows = rope_table_rows
        self.options = config.pipeline_options
        self.data_keys = stages.data_keys(stage)

        self.capacities, self.sequence_capacities = (config.capacities,
                                                     config.sequence_capacities)
        rungs = config.rungs
        bundles = bundle if isinstance(bundle, tuple) else (bundle,) * len(rungs)
        # One kernel per CP size and rung, the top rung's last: the same
        # pipeline compiled for each rung's (C, N) (docs/capacity-ladder.md
        # says why) and each size of dynamic CP (docs/megatron.md, "Dynamic
        # context parallelism").
        self.cp_sizes, self.dynamic_cp = config.sizes, config.dynamic_cp
        self.variant_kernels, self.variant_specs = {}, {}
        for size in self.cp_sizes:
            for r, ((B, N_rung), rung_bundle) in enumerate(zip(rungs, bundles)):
                kernel, spec = self._load_rung(B, N_rung, rung_bundle, size)
                self.variant_kernels[size, r] = kernel
                self.variant_specs[size, r] = spec
        self.kernels = tuple(self.variant_kernels[cp, r] for r in range(len(rungs)))
        self.specs = [self.variant_specs[cp, r] for r in range(len(rungs))]
        self.kernel, self.spec = self.kernels[-1], self.specs[-1]
        _check_memory(self, slots)
        self.slots = [StepSlot(self, i) for i in range(slots)]
        log.info("GraphStep(C=%d, N=%d, cp=%d, stage=%r): %d kernel(s) (%d rung(s) x %d "
                      "CP size(s)), %d slot(s), %.1f MiB of buffers", C, N, cp, stage,
                      len(self.variant_kernels), len(rungs), len(self.cp_sizes), slots,
                      _step_bytes(self, slots)[1] / 2**20)
        # The step itself is its first slot: with one slot GraphStep is the
        # whole API, and step.slot(0) holds the same buffers.
        self._first = self.slots[0]
        Delegated.bind(self)
        if not self.on_host:
            torch.cuda.synchronize(self.device)

    def _rope_table_param(self, C: int, cp: int) -> int:
        """The table rows R a rung is compiled with, so that a microbatch gets
        the same RoPE rows at whichever rung it lands. thd.rope_positions
        shifts positions by the sequence's start when R exceeds the rung's
        max_seqlen C*cp (S8's absolute table), so one table serving every
        rung would switch the lower rungs to that rule. The top rung's rule
        holds for all: a table longer than the top rung's C*cp is absolute
        at every rung as it is; else each rung gets min(R, C*cp) rows, the
        relative rule, and the same clamp (a rung's positions are below its
        C*cp)."""
        rows = self.rope_table_rows
        top = self.config.rungs[-1][0] * cp
        return rows if rows > top else min(rows, C * cp)

    def _load_rung(self, C: int, N: int, bundle, cp: int):
        """The kernel of one rung at one CP size (its bundle's, or compiled)
        and its checked signature."""
        stage, cache_dir = self.stage, self.config.cache_dir
        params = {"C": C, "cp": cp, "N": N}
        if self.rope_table_rows is not None:
            params["R"] = self._rope_table_param(C, cp)
        if bundle is not None and self.on_host:
            kernel = _kernel.load(bundle, backend="host", cache_dir=cache_dir)
        elif bundle is not None:
            kernel = _kernel.load(bundle, backend="cuda", cache_dir=cache_dir,
                               device=self.device.index)
        elif self.on_host:
            kernel = _kernel.compile(stages.pipeline(stage, **self.options), params,
                                  backend="host", cache_dir=cache_dir)
        else:
            with torch.cuda.device(self.device):
                kernel = _kernel.compile(stages.pipeline(stage, **self.options), params,
                                      backend="cuda", cache_dir=cache_dir)
        compiled = {k: kernel.params.get(k) for k in params}
        if compiled != params:
            raise ValueError(f"the bundle was compiled for {compiled}, not {params}")
        spec = _kernel.signature(kernel)
        expected_inputs = stages.inputs(stage, **self.options)
        expected_outputs = stages.outputs(stage, **self.options)
        got_inputs = [a.name for a in spec if a.direction == "input"]
        got_outputs = [a.name for a in spec if a.direction == "output"]
        if got_inputs != expected_inputs or got_outputs != expected_outputs:
            raise ValueError(
                f"the kernel is not the step for stage={stage!r} and options {self.options}: it "
                f"takes {got_inputs} and computes {got_outputs}; the step needs {expected_inputs} "
                f"-> {expected_outputs} (compile thdc.stages.pipeline() for these options)")
        if not self.on_host:
            kernel.prepare(self.device.index)
        return kernel, spec

    def rung_index(self, num_rows: int, num_seqs: int, cp_size: Optional[int] = None) -> int:
        """The smallest rung that holds a microbatch of num_rows packed rows
        (all CP ranks of its sub-group: cu_seqlens_padded[num_seqs]) and
        num_seqs sequences at CP size cp_size (default: cp), from host
        figures (the plan's): the planner's rule (thdc.planner.rung_index,
        planner/Planner.h rungIndex), so thdc.planner.ladder_plan gives
        every pack the same rung; ValueError when none does."""
        num_rows = _check_int(num_rows, "num_rows")
        num_seqs = _check_int(num_seqs, "num_seqs")
        if num_rows < 0 or num_seqs < 0:
            raise ValueError(f"num_rows and num_seqs must be >= 0; got {num_rows}, {num_seqs}")
        cp = self.check_cp_size(cp_size)
        return planner.rung_index(self.capacities, self.sequence_capacities, num_rows,
                                  num_seqs, cp)

    def check_cp_size(self, cp_size) -> int:
        """A CP size of the step (default: cp), checked."""
        if cp_size is None:
            return self.cp
        if isinstance(cp_size, torch.Tensor):
            if cp_size.device.type != "cpu":
                raise ValueError(
                    f"local_cp_size is a tensor on {cp_size.device}: reading it would "
                    f"synchronise the host with the device (megatron-core's loader puts it "
                    f"there, data_schedule_utils.py:519 on dev, and reads it back, "
                    f"data_schedule.py:631); pass the plan's CP size as an int "
                    f"(thdc.planner.DynamicCpPlan.cp_sizes)")
            if cp_size.numel() != 1:
                raise ValueError(f"local_cp_size must hold one value; got shape "
                                 f"{tuple(cp_size.shape)}")
            if cp_size.dtype.is_floating_point or cp_size.dtype.is_complex \
                    or cp_size.dtype == torch.bool:
                raise TypeError(f"local_cp_size must be an integer tensor; got "
                                f"{cp_size.dtype}")
            cp_size = int(cp_size.reshape(-1)[0])
        size = _check_int(cp_size, "local_cp_size")
        if size not in self.cp_sizes:
            raise ValueError(f"local_cp_size={size}: the step runs CP sizes "
                             f"{list(self.cp_sizes)}" + (
                                 "" if self.dynamic_cp else
                                 " (GraphStep(cp_sizes=...) gives a step of several, for "
                                 "dynamic context parallelism)"))
        return size

    def slot(self, microbatch: int) -> "StepSlot":
        """The buffer set of microbatch `microbatch` (slot microbatch mod K)."""
        microbatch = _check_int(microbatch, "microbatch")
        if microbatch < 0:
            raise ValueError(f"microbatch must be >= 0; got {microbatch}")
        return self.slots[microbatch % len(self.slots)]

    def __call__(self, *args, **kwargs):
        """The first slot's load_inputs, then run."""
        return self._first(*args, **kwargs)
