"""thdc.megatron.get_batch_on_this_rank_for_sequence_packing: the reference
framework's per-microbatch function of its sequence-packing path, with its
arguments and its 7-tuple, built on GraphStep.

The reference framework (megatron-core, `dev` d48bd6be,
megatron/core/datasets/data_schedule.py:564-874) reads one packed microbatch
on TP rank 0, builds the padding mask, sanitises, slices the rank's CP rows,
broadcasts sizes and tensors to the other TP ranks (each size followed by
`.item()`), pads the tail and the cu arrays and returns

    (tokens, labels, loss_mask, attention_mask=None, position_ids,
     packed_seq_params, padding_mask)

Here TP rank 0 loads the microbatch into a slot of a GraphStep (one launch),
runs the fused step (one launch) and, with tp > 1, broadcasts the slot's one
output buffer to the TP group (one collective, capturable with NCCL); no
rank waits for the host. What the step does is set by the same config fields
the reference framework reads (docs/megatron.md has the table); a field it
cannot honour is refused by name. Each call takes the next slot of a ring,
so the outputs of the microbatches still in flight under pipeline
parallelism stay intact (`slots_in_flight`).

Inside whole-iteration graphs (IterationGraphs) the data iterator is the
iteration's views (IterationViews), each microbatch loaded into its slot at
its rung already: a call runs the next one. So the user's forward_step,
which calls this function, is the same in every mode.
"""
from __future__ import annotations

import math
from typing import Optional

from .. import planner
from .._checks import _check_int, _import_torch
from ._views import IterationViews, megatron_batch
from .loader import _CU_ARGUMENTS, packing_batch_inputs, plan_figures
from .options import _holds
from .packed_seq_params import _megatron_core, packed_seq_params_fields
from .step import GraphStep

torch = _import_torch("thdc.megatron")

# The loader's batch dict goes to load_inputs through
# loader.packing_batch_inputs (the keys it takes, num_seqs where the batch has
# none). local_cp_size: under dynamic CP it picks the step's variant; without,
# one other than None is refused by load_inputs (the batch was planned for
# dynamic CP).


class ConfigError(ValueError):
    """A config the step cannot honour; the message names the field."""


def _field(config, name, default=None):
    return getattr(config, name, default)


def _recipe_name(value) -> Optional[str]:
    """--fp8-recipe's value as a name of LOW_PRECISION_MULTIPLES (an enum's
    value or a str)."""
    if value is None:
        return None
    value = getattr(value, "value", value)
    return str(value)


def step_options(config, *, tp: int, cp: int, dynamic_cp: bool = False) -> dict:
    """GraphStep's options from a megatron-core config (TransformerConfig or
    any object with its fields): C, N, cp_mode, sequence parallelism and the
    low-precision condition on C; the config's dynamic-CP switch must be
    dynamic_cp. ConfigError names the field it cannot honour."""
    if config is None:
        raise ConfigError("config is required: the step's static shapes come from "
                          "config.max_seqlen_per_dp_cp_rank and "
                          "config.thd_max_packed_sequences")
    # hybrid_context_parallel is the deprecated name of the same switch
    # (model_parallel_config.py:95-96, :497-508 on dev).
    stated = [name for name in ("dynamic_context_parallel", "hybrid_context_parallel")
              if _field(config, name) is not None]
    on = [name for name in stated if _field(config, name)]
    if stated and bool(on) != dynamic_cp:
        name = (on or stated)[0]
        raise ConfigError(
            f"config.{name}={bool(on)} but the call has dynamic_cp={dynamic_cp}: pass the "
            f"config's value, as the reference framework's training script does "
            f"(dynamic_cp=args.dynamic_context_parallel, pretrain_gpt.py)")
    C = _field(config, "max_seqlen_per_dp_cp_rank")
    if C is None:
        raise ConfigError("config.max_seqlen_per_dp_cp_rank is not set: it is C, the static "
                          "rows of every CP rank")
    N = _field(config, "thd_max_packed_sequences")
    if N is None:
        raise ConfigError("config.thd_max_packed_sequences is not set: it is N, the static "
                          "sequence capacity (the dummy sequence included); the reference "
                          "framework's graph mode requires it too")
    for name, value in (("max_seqlen_per_dp_cp_rank", C), ("thd_max_packed_sequences", N)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config.{name}={value!r}: an int is needed")
    alignment = _field(config, "pad_packed_seq_alignment")
    graphs = (_field(config, "cuda_graph_impl", "none") or "none") != "none"
    if alignment is None:
        raise ConfigError("config.pad_packed_seq_alignment is not set: without it the "
                          "reference framework pads nothing and shapes vary per microbatch; "
                          "the step pads every microbatch to max_seqlen_per_dp_cp_rank "
                          "(set it to 'max', as graph mode requires)")
    if alignment != "max" and alignment != C:
        # The reference framework's graph mode accepts only these two
        # (transformer_config.py:3640-3655 on dev); eager mode with another
        # value pads each rank to a multiple of it, a varying length.
        raise ConfigError(f"config.pad_packed_seq_alignment={alignment!r}: the step pads every "
                          f"microbatch to max_seqlen_per_dp_cp_rank = {C}, which is "
                          f"pad_packed_seq_alignment='max' (or {C}); "
                          + ("the reference framework's graph mode accepts only those"
                             if graphs else f"without CUDA graphs {alignment!r} pads each "
                             f"rank to a multiple of {alignment}, a length that varies per "
                             f"microbatch"))
    policy = _field(config, "thd_tail_padding_policy") or "append_dummy_seq"
    if policy != "append_dummy_seq":
        raise ConfigError(f"config.thd_tail_padding_policy={policy!r}: the drop-in covers the "
                          f"tail with a dummy sequence ('append_dummy_seq', the default)")
    cp_mode = _field(config, "cp_partition_mode", "zigzag") or "zigzag"
    if cp_mode not in ("zigzag", "contiguous"):
        raise ConfigError(f"config.cp_partition_mode={cp_mode!r}: 'zigzag' or 'contiguous'")
    sequence_parallel = bool(_field(config, "sequence_parallel", False)) and tp > 1
    for name, expected in (("tensor_model_parallel_size", tp), ("context_parallel_size", cp)):
        value = _field(config, name)
        if value is not None and value != expected:
            raise ConfigError(f"config.{name}={value} but the process group has {expected} "
                              f"ranks")
    # Low-precision recipes: a condition on C (docs/megatron.md).
    conditions = []
    if _field(config, "fp8") not in (None, False):  # a format ("e4m3", "hybrid"): on
        # megatron-core's default recipe is "delayed" (transformer_config.py:633).
        conditions.append(("fp8_recipe",
                           _recipe_name(_field(config, "fp8_recipe", None)) or "delayed"))
    if (_field(config, "moe_token_dispatcher_type") == "flex"
            and _field(config, "moe_flex_dispatcher_backend") == "hybridep"
            and not _field(config, "moe_hybridep_pad_variable_tokens", False)
            and not _field(config, "moe_hybridep_pad_uneven_dispatch_inputs", False)):
        conditions.append(("moe_flex_dispatcher_backend", "hybridep"))
    multiple = 1
    for name, recipe in conditions:
        try:
            rows = planner.check_capacity(C, tp, sequence_parallel, recipe)
        except ValueError as error:
            raise ConfigError(f"config.{name}={recipe!r}: "
                              + str(error).replace("check_capacity: ", "", 1)) from None
        multiple = math.lcm(multiple, rows // (tp if sequence_parallel else 1))
    return dict(C=C, N=N, cp_mode=cp_mode, sequence_parallel=sequence_parallel,
                multiple=None if multiple == 1 else multiple)


def stage_of(pp_rank: int, pp_size: int, vp_stage, vpp_size, mtp_on_this_rank: bool) -> str:
    """The GraphStep stage of a call: the reference framework's first/last
    rule (data_schedule.py:600-604 on dev), MTP layers reading every key.
    ConfigError for a vp_stage outside [0, vpp_size) (the rule would make it
    a middle stage)."""
    if vp_stage is not None:
        stages = vpp_size or 1
        if isinstance(vp_stage, bool) or not isinstance(vp_stage, int) \
                or not 0 <= vp_stage < stages:
            raise ConfigError(f"vp_stage={vp_stage!r} is not a virtual stage of "
                              f"vpp_size={vpp_size} (0 to {stages - 1})")
    first = pp_rank == 0 and (vp_stage is None or vp_stage == 0)
    last = pp_rank == pp_size - 1 and (vp_stage is None or vp_stage == (vpp_size or 1) - 1)
    if (first and last) or mtp_on_this_rank:
        return "first_last"
    return "first" if first else "last" if last else "middle"


def slots_in_flight(pp_size: int, pp_rank: int, vpp_size=None, group=None,
                    overlap_moe_expert_parallel_comm: bool = False) -> int:
    """The microbatches one stage can have in flight (forward done, backward
    not yet), so the slots a ring needs: the warm-up count of megatron-core's
    schedules plus the one in the steady 1F1B step
    (get_pp_rank_microbatches, megatron/core/pipeline_parallel/schedules.py:
    898-919 on dev): 1 without pipelining, pp - rank without interleaving,
    2*(pp - rank - 1) + (vpp - 1)*group + 1 with it (group: the microbatch
    group per virtual stage, default pp); one more with the overlapped MoE
    communication, interleaved or without pipelining, where the combined
    1F1B schedule runs microbatch i+1's forward with i's backward
    (schedules.py:745-746)."""
    for name, value in (("pipeline group size", pp_size), ("pipeline rank", pp_rank),
                        ("vpp_size", vpp_size),
                        ("config.microbatch_group_size_per_vp_stage", group)):
        if value is not None:
            _check_int(value, name)
    if pp_size < 1 or not 0 <= pp_rank < pp_size:
        raise ValueError(f"the pipeline group has size {pp_size} with this rank at {pp_rank}: "
                         f"a group has at least one rank, this one in [0, size)")
    if vpp_size is not None and vpp_size < 1:
        raise ValueError(f"vpp_size must be >= 1 (or None without virtual stages); got "
                         f"{vpp_size}")
    if vpp_size is not None and group is not None and group < 1:
        raise ValueError(f"config.microbatch_group_size_per_vp_stage must be >= 1 (or None: "
                         f"the pipeline size); got {group}")
    overlap = int(bool(overlap_moe_expert_parallel_comm))
    if pp_size <= 1:
        return 1 + overlap
    if vpp_size is None:
        return pp_size - pp_rank
    group = pp_size if group is None else group
    return 2 * (pp_size - pp_rank - 1) + (vpp_size - 1) * group + 1 + overlap


def _parallel_state(why: str):
    """megatron-core's parallel_state, or ConfigError: `why` it is needed,
    and the import's error."""
    try:
        from megatron.core import parallel_state
    except Exception as error:
        raise ConfigError(f"{why}; megatron.core.parallel_state cannot be imported "
                          f"({type(error).__name__}: {error})") from None
    return parallel_state


def _groups(pg_collection):
    if pg_collection is not None:
        return pg_collection.tp, pg_collection.pp, pg_collection.cp
    parallel_state = _parallel_state("pg_collection is None: pass a pg_collection with tp, "
                                     "pp and cp process groups")
    return (parallel_state.get_tensor_model_parallel_group(),
            parallel_state.get_pipeline_model_parallel_group(),
            parallel_state.get_context_parallel_group())


def _dp_cp_group(pg_collection):
    """The DP x CP group dynamic CP forms its sub-groups in (pg_collection.dp_cp
    or megatron-core's data-parallel group with context parallelism)."""
    group = getattr(pg_collection, "dp_cp", None) if pg_collection is not None else None
    if group is not None:
        return group
    why = "dynamic_cp=True: the DP x CP group comes from pg_collection.dp_cp or megatron-core"
    parallel_state = _parallel_state(why)
    try:
        return parallel_state.get_data_parallel_group(with_context_parallel=True)
    except Exception as error:  # its groups not initialised
        raise ConfigError(f"{why}, which gives none ({type(error).__name__}: {error})") from None


def _dynamic_groups():
    """megatron-core's dynamic CP sub-groups by size, the function the
    reference framework calls for them (data_schedule.py:627-634, :828 on
    dev)."""
    return _parallel_state(
        "dynamic_cp=True: the CP sub-groups come from parallel_state."
        "get_dynamic_data_context_parallel_groups, or configure(cp_groups=...) with a dict "
        "from CP size to process group or a callable taking group_size="
    ).get_dynamic_data_context_parallel_groups


def _variant(slot, size, where: str):
    """The slot's variant at a microbatch's local_cp_size (GraphStep checks
    it: a host int of the step's sizes; a tensor on a GPU is refused, as
    reading it would synchronise)."""
    if size is None:
        raise ValueError(f"{where}: local_cp_size is None; under dynamic CP every microbatch "
                         f"carries its CP size (thdc.planner.DynamicCpPlan.cp_sizes)")
    try:
        return slot.variant(size)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{where}: {error}") from None


def plan_rung(step: GraphStep, figures) -> tuple:
    """(rung, fits) of a microbatch from its plan figures (rows, sequences,
    longest; loader.plan_figures), on the host: the smallest rung that holds
    it by the planner's rule (thdc.planner.rung_index), else the top one,
    where `fits` says whether the step still holds it (N sequences that fill
    every row, its own limit) or empties it. No figures: the top rung."""
    top = len(step.capacities) - 1
    if figures is None:
        return top, True
    try:
        return step.rung_index(figures[0], figures[1]), True
    except ValueError:
        B, N = step.config.rungs[-1]
        return top, _holds(figures[0], figures[1], B * step.cp, N)


class SequencePackingBatches:
    """The state behind get_batch_on_this_rank_for_sequence_packing: one
    GraphStep per (stage, virtual stage, groups, options), each with a ring
    of slots; `last` is the slot of the last call (for accumulate_status and
    accumulate_dropped; `last.step` its step); `steps` the steps made, with
    their broadcast source, at most MAX_STEPS (a config that changes from
    call to call would otherwise keep a step, and its buffers, for each:
    the oldest is dropped, with a warning). The module keeps one,
    `thdc.megatron.SEQUENCE_PACKING`; make another for a second model."""

    #: Steps kept at once: a model's stage forms and virtual stages need a
    #: few; more means the config changes between calls.
    MAX_STEPS = 32

    def _evict_for_one_more(self) -> None:
        if len(self.steps) < self.MAX_STEPS:
            return
        import warnings

        oldest = next(iter(self.steps))
        del self.steps[oldest]
        self.calls.pop(oldest, None)
        warnings.warn(f"thdc.megatron: {self.MAX_STEPS} steps kept for as many configs; the "
                      f"oldest (stage {oldest[0]!r}, options {dict(oldest[-1])}) is dropped. "
                      f"A config whose fields change from call to call makes a step (and "
                      f"its buffers) for each: keep them fixed", RuntimeWarning, stacklevel=3)

    def __init__(self, **step_kwargs):
        self.configure(**step_kwargs)

    def configure(self, *, capacities=None, sequence_capacities=None, exact: bool = False,
                  **step_kwargs) -> None:
        """GraphStep's keyword arguments for the steps made from now on
        (device, cache_dir, convention, slots, seq_idx, rope_table_rows,
        cp_order_index, dummy_length, bundle; cp_groups, dynamic CP's
        sub-groups, default megatron-core's), those the config and the groups
        give aside (ConfigError); drops the steps made so far.

        capacities, sequence_capacities: a capacity ladder, its top rung the
        config's (C, N); each microbatch then runs at the smallest rung that
        holds it, from the plan's figures its batch dict carries
        (loader.PLAN_KEYS; without them, at the top rung), and the
        callables in `rung_listeners` are called with that rung before the
        batch is returned. exact: the microbatch cut to its own rows
        (StepSlot.exact_rows, from the same figures, which it then needs),
        for a model run without graphs. Both need one TP rank (the others
        would have to learn the rung) and a fixed CP size."""
        for name in ("stage", "cp_mode", "tp", "tp_rank", "sequence_parallel", "multiple",
                     "cp_sizes"):
            if name in step_kwargs:
                raise ConfigError(f"configure({name}=...): it comes from the config and the "
                                  f"process groups")
        if (capacities is None) != (sequence_capacities is None):
            raise ConfigError("configure: capacities and sequence_capacities go together (a "
                              "rung is rows and sequences)")
        if capacities is not None:
            try:
                planner.check_ladder(list(capacities), list(sequence_capacities))
            except (TypeError, ValueError) as error:
                raise ConfigError(f"configure(capacities=...): {error}") from None
            step_kwargs.update(capacities=[int(b) for b in capacities],
                               sequence_capacities=[int(n) for n in sequence_capacities])
        self.exact = bool(exact)
        self.step_kwargs = step_kwargs
        self.steps, self.calls, self.last = {}, {}, None
        # Called with the rung of each microbatch (thdc.megatron.trainer's
        # graph helper puts that rung's graphs on the layers).
        self.rung_listeners = getattr(self, "rung_listeners", [])

    def __call__(self, data_iterator, vpp_size: Optional[int] = None,
                 mtp_on_this_rank: bool = False, vp_stage: Optional[int] = None,
                 dynamic_cp: bool = False, pg_collection=None, config=None):
        if isinstance(data_iterator, IterationViews):
            # Inside IterationGraphs: the microbatch is loaded into its slot
            # at its rung already; run that view (the module's docstring).
            return data_iterator.run_next()
        import torch.distributed as dist

        tp_group, pp_group, cp_group = _groups(pg_collection)
        tp, tp_rank = tp_group.size(), tp_group.rank()
        cp, cp_rank = cp_group.size(), cp_group.rank()
        pp, pp_rank = pp_group.size(), pp_group.rank()
        if self._by_plan and (tp > 1 or dynamic_cp):
            raise ConfigError(
                f"configure({'exact=True' if self.exact else 'capacities=...'}) with "
                + (f"tp = {tp}: the rung of a microbatch is known on TP rank 0 alone (the "
                   f"others receive its rows by broadcast)" if tp > 1 else
                   "dynamic_cp=True: the step's CP size varies per microbatch"))
        stage = stage_of(pp_rank, pp, vp_stage, vpp_size, mtp_on_this_rank)
        # By value: the training script makes a new config for every call
        # (pretrain_gpt.py's get_batch), and one changed in place must not
        # keep an old step.
        options = step_options(config, tp=tp, cp=cp, dynamic_cp=bool(dynamic_cp))
        if dynamic_cp:
            # The step's static maximum is the whole DP x CP group; each size
            # its rank can be given, one variant (docs/megatron.md).
            dp_cp = _dp_cp_group(pg_collection)
            if dp_cp.size() % cp:
                raise ConfigError(f"dynamic_cp=True: the DP x CP group has {dp_cp.size()} "
                                  f"ranks, not a multiple of the CP group's {cp}")
            cp, cp_rank = dp_cp.size(), dp_cp.rank()
            # megatron-core's default is 1 (model_parallel_config.py:91 on dev).
            min_cp = _field(config, "min_dynamic_context_parallel_size", 1) or 1
            try:
                options["cp_sizes"] = planner.dynamic_cp_sizes(cp, min_cp, rank=cp_rank)
            except ValueError as error:
                raise ConfigError(f"config.min_dynamic_context_parallel_size over {cp} DP x CP "
                                  f"ranks: {error}") from None
        slots = self.step_kwargs.get("slots") or slots_in_flight(
            pp, pp_rank, vpp_size, _field(config, "microbatch_group_size_per_vp_stage"),
            _field(config, "overlap_moe_expert_parallel_comm", False))
        key = (stage, vp_stage, tp, tp_rank, cp, cp_rank, slots,
               tuple(sorted(options.items())))
        made = self.steps.get(key)
        if made is None:
            # The step and the global rank of the TP group's first rank (the
            # broadcast's source), looked up once.
            made = (self.make_step(options, stage, tp, tp_rank, cp, cp_rank, slots),
                    dist.get_process_group_ranks(tp_group)[0] if tp > 1 else None)
            self._evict_for_one_more()
            self.steps[key] = made
        step, src = made
        call = self.calls.get(key, 0)
        self.calls[key] = call + 1
        slot = step.slot(call)
        if tp_rank == 0:
            if data_iterator is None:
                raise ValueError("TP rank 0 reads the microbatch: its data_iterator must not "
                                 "be None")
            batch = next(data_iterator)
            needed = _CU_ARGUMENTS + ("max_seqlen",) + step.data_keys
            if dynamic_cp:
                needed += ("local_cp_size",)
            missing = [k for k in needed if k not in batch]
            if missing:
                raise KeyError(f"the batch lacks {', '.join(missing)} (a {stage!r} stage "
                               f"reads {', '.join(needed)})")
            given = packing_batch_inputs(batch)
            if dynamic_cp:
                slot = _variant(slot, given.pop("local_cp_size"), "the batch")
            slot.load_inputs(**given)
            if self._by_plan:
                out, params = self._run_by_plan(step, slot, batch)
                self.last = slot
                return megatron_batch(out, params)
            slot.run()
        elif dynamic_cp:
            # The other TP ranks replay the variant TP rank 0 ran, so they
            # need its size on the host: the reference framework broadcasts it
            # and reads it back (data_schedule.py:816, :827 on dev); here
            # every rank has the plan, and its iterator gives the size.
            if data_iterator is None:
                raise ValueError(
                    f"dynamic_cp=True on TP rank {tp_rank}: the microbatch's local_cp_size "
                    f"must be known on the host of every TP rank, to pick the step's variant "
                    f"without reading the device; pass an iterator of the plan's sizes (ints, "
                    f"or dicts with local_cp_size: thdc.planner.DynamicCpPlan.cp_sizes, the "
                    f"same on every TP rank of a DP x CP rank)")
            item = next(data_iterator)
            size = item.get("local_cp_size") if isinstance(item, dict) else item
            slot = _variant(slot, size, f"TP rank {tp_rank}'s item")
        elif data_iterator is not None:
            raise ValueError("only TP rank 0 reads the microbatch (the others receive it by "
                             "broadcast): data_iterator must be None on TP rank "
                             f"{tp_rank}")
        if tp > 1:
            slot.broadcast(tp_group, src=src)
        self.last = slot
        return megatron_batch(slot.batch, slot.packed_seq_params)

    @property
    def _by_plan(self) -> bool:
        """Whether a microbatch's plan figures choose what it runs."""
        return self.exact or "capacities" in self.step_kwargs

    def _run_by_plan(self, step, slot, batch):
        """The rung (or exact rows) the plan's figures choose, run; tells
        rung_listeners. (batch, PackedSeqParams)."""
        figures = plan_figures(batch)
        if figures is None and self.exact:
            raise ValueError(
                "exact rows need the plan's figures of the microbatch (its rows, sequences "
                "and longest sequence, loader.PLAN_KEYS), which the batch dict lacks: run "
                "the training script through thdc.megatron.run, which has megatron-core's "
                "scheduler leave them")
        rung, fits = plan_rung(step, figures)
        view = slot.rung(rung)
        out, params = view.run()
        if self.exact:
            rows, sequences, longest = figures if fits else (0, 0, 1)
            out, params = view.exact_rows(rows, sequences, max(longest, 1))
        for listener in self.rung_listeners:
            listener(rung)
        return out, params

    def make_step(self, options, stage, tp, tp_rank, cp, cp_rank, slots):
        """The GraphStep of these options (step_options'), stage, ranks and
        slots, with what configure() gave (the ladder, the convention, ...);
        ConfigError where the config's values cannot make one."""
        kwargs = dict(self.step_kwargs, slots=slots)
        if kwargs.get("convention") is None:
            # The installed release's own: "compact" (valid offsets in
            # cu_seqlens_q/kv, pad_between_seqs=True) where PackedSeqParams
            # has the field, as data_schedule.py:838-850 on dev builds it;
            # older releases put the padded offsets there.
            kwargs["convention"] = ("compact" if "pad_between_seqs"
                                    in packed_seq_params_fields(_megatron_core()[0]) else "graph")
        if options.get("cp_sizes") is not None:
            kwargs["cp_sizes"] = options["cp_sizes"]
            if kwargs.get("cp_groups") is None:
                kwargs["cp_groups"] = _dynamic_groups()
        try:
            return GraphStep(options["C"], options["N"], cp, cp_rank, stage=stage,
                             cp_mode=options["cp_mode"], tp=tp, tp_rank=tp_rank,
                             sequence_parallel=options["sequence_parallel"],
                             multiple=options["multiple"], **kwargs)
        except ValueError as error:  # a step the config's values cannot make
            raise ConfigError(
                f"config (max_seqlen_per_dp_cp_rank={options['C']}, thd_max_packed_sequences="
                f"{options['N']}, cp_partition_mode={options['cp_mode']!r}, sequence_parallel="
                f"{options['sequence_parallel']}, tp={tp}, cp={cp}): {error}") from None


SEQUENCE_PACKING = SequencePackingBatches()


def get_batch_on_this_rank_for_sequence_packing(
        data_iterator, vpp_size: Optional[int] = None, mtp_on_this_rank: bool = False,
        vp_stage: Optional[int] = None, dynamic_cp: bool = False, pg_collection=None,
        config=None):
    """The reference framework's function of the same name and arguments
    (megatron/core/datasets/data_schedule.py:564-574 on dev), on a GraphStep:
    returns (tokens, labels, loss_mask, None, position_ids,
    packed_seq_params, padding_mask), the keys a stage does not read None.

    TP rank 0 takes the next batch dict from data_iterator (the other TP
    ranks pass None, as in the reference framework), loads it into the next
    slot of the stage's ring and runs the step; with tp > 1 it broadcasts
    the slot's outputs to the TP group. The step's options come from config
    (docs/megatron.md, "Megatron's flags"); the groups from pg_collection
    (tp, pp, cp) or megatron-core's parallel_state. Outputs are views of the
    slot's static buffers, valid until the ring comes back to the slot
    (slots_in_flight calls later). thdc.megatron.SEQUENCE_PACKING keeps the
    steps; its `last` slot has the status and dropped-work counters."""
    return SEQUENCE_PACKING(data_iterator, vpp_size, mtp_on_this_rank, vp_stage, dynamic_cp,
                            pg_collection, config)
