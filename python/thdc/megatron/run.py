"""Megatron-LM's own training script with thdc's batch function, Megatron's
files unedited:

    python -m thdc.megatron.run [--thdc MODE] pretrain_gpt.py MEGATRON_FLAGS...
    torchrun --nproc-per-node 8 -m thdc.megatron.run [--thdc MODE] pretrain_gpt.py ...

MODE "step" (the default) puts thdc.megatron.get_batch_on_this_rank_for_
sequence_packing where megatron-core's function of that name is, before the
script imports it (pretrain_gpt.py:30 and pretrain_hybrid.py:29 on
megatron-core dev d48bd6be0a; pretrain_gpt.py's get_batch calls it whenever
--sequence-packing-scheduler is set, :133-145): every microbatch is then
padded to static shapes by one fused kernel with no host synchronisation,
in eager mode and before Megatron's per-layer CUDA graphs
(--cuda-graph-impl local or transformer_engine). MODE "ladder" pads each
microbatch to the smallest rung of a capacity ladder that holds it
(--thdc-capacities, --thdc-sequence-capacities; default four rungs evenly
spaced up to C), the rung chosen from the figures of the host's own plan
(thdc.megatron.trainer), and with --cuda-graph-impl transformer_engine
Megatron's per-layer graphs are captured once per rung; with
--cuda-graph-impl full_iteration thdc's whole-iteration graphs take the
place of megatron-core's one graph, one per iteration shape (the
microbatch count and each microbatch's rung). MODE "exact" cuts
each microbatch to its own rows, for a model run without graphs. MODE
"off" runs the script as it is: the same command with thdc switched off.

Before the script runs, the flags thdc reads are checked and one it cannot
honour is refused by name, with the reason (exit status 2): thdc never
trains otherwise than the flags say. The script then runs as `python
SCRIPT FLAGS...` would run it (its folder first on sys.path, its own
sys.argv), and Megatron's own parser checks every flag."""
from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import List, NoReturn, Optional, Sequence, Tuple

MODES = ("step", "ladder", "exact", "off")
# The modes that read the plan's figures of each microbatch (trainer.py).
PLAN_MODES = ("ladder", "exact")
# The ladder's rungs when --thdc-capacities is not given: evenly spaced up to
# C, each a multiple of LADDER_MULTIPLE rows (thdc.planner.even_ladder).
LADDER_RUNGS = 4
LADDER_MULTIPLE = 128

# megatron-core's module and function the script imports (dev d48bd6be0a).
MEGATRON_MODULE = "megatron.core.datasets.data_schedule"
MEGATRON_FUNCTION = "get_batch_on_this_rank_for_sequence_packing"
# training.py's per-layer graph helper (imported by name, training.py:117;
# made at :4244-4252 for --cuda-graph-impl transformer_engine).
TRAINING_MODULE = "megatron.training.training"
GRAPH_HELPER = "TECudaGraphHelper"

# The flags of Megatron-LM's parser that thdc reads (megatron-core dev
# d48bd6be0a: ModelParallelConfig, model_parallel_config.py:74-134, and
# TransformerConfig.cuda_graph_impl, transformer_config.py:1117), each with
# the argparse keywords that read it as Megatron's parser does.
FLAGS = {
    "--sequence-packing-scheduler": dict(dest="sequence_packing_scheduler"),
    "--max-seqlen-per-dp-cp-rank": dict(dest="max_seqlen_per_dp_cp_rank", type=int),
    "--thd-max-packed-sequences": dict(dest="thd_max_packed_sequences", type=int),
    "--pad-packed-seq-alignment": dict(dest="pad_packed_seq_alignment"),
    "--thd-tail-padding-policy": dict(dest="thd_tail_padding_policy"),
    "--cuda-graph-impl": dict(dest="cuda_graph_impl", default="none"),
    "--micro-batch-size": dict(dest="micro_batch_size", type=int),
    "--tensor-model-parallel-size": dict(dest="tensor_model_parallel_size", type=int, default=1),
    "--pipeline-model-parallel-size": dict(dest="pipeline_model_parallel_size", type=int,
                                           default=1),
    "--context-parallel-size": dict(dest="context_parallel_size", type=int, default=1),
    "--num-layers-per-virtual-pipeline-stage": dict(dest="num_layers_per_virtual_pipeline_stage",
                                                    type=int),
    "--num-virtual-stages-per-pipeline-rank": dict(dest="num_virtual_stages_per_pipeline_rank",
                                                   type=int),
    "--dynamic-context-parallel": dict(dest="dynamic_context_parallel", action="store_true"),
}

# Megatron's CUDA graph modes in which the batch function runs eagerly,
# before captured layers (docs/megatron.md, "CUDA graphs").
GRAPH_MODES = ("none", "local", "transformer_engine")
# Megatron's whole-iteration graphs, which --thdc ladder replaces with its
# own (trainer.iteration_graphs_wrapper), one per iteration shape.
FULL_ITERATION = "full_iteration"
FULL_ITERATION_WRAPPER = "FullCudaGraphWrapper"  # training.py:57, made at :4148, :4760


class Refusal(Exception):
    """A flag (or a missing one) thdc cannot honour; the message names it."""


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"thdc.megatron.run: error: {message}\n")
    sys.exit(2)


def split_argv(argv: Sequence[str]) -> argparse.Namespace:
    """The launcher's options (thdc, thdc_capacities,
    thdc_sequence_capacities), the script and its arguments (args): the
    launcher's own options before the script's path, everything after it
    the script's. SystemExit (2) with usage on a bad command line."""
    parser = argparse.ArgumentParser(
        prog="python -m thdc.megatron.run", allow_abbrev=False,
        description="Runs Megatron-LM's training script with thdc's batch function.")
    parser.add_argument("--thdc", choices=MODES, default="step",
                        help="step: thdc's batch function (default); ladder: the same with a "
                             "capacity ladder; exact: each microbatch cut to its own rows "
                             "(no graphs); off: the script as it is")
    parser.add_argument("--thdc-capacities", type=_int_list, metavar="B1,B2,...",
                        help=f"--thdc ladder: the rungs' rows per rank, increasing, the last "
                             f"--max-seqlen-per-dp-cp-rank (default {LADDER_RUNGS} rungs evenly "
                             f"spaced, multiples of {LADDER_MULTIPLE})")
    parser.add_argument("--thdc-sequence-capacities", type=_int_list, metavar="N1,N2,...",
                        help="--thdc ladder: each rung's sequences, the dummy included, the "
                             "last --thd-max-packed-sequences (default: that for every rung)")
    parser.add_argument("script", help="the training script, e.g. pretrain_gpt.py")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script's own flags, passed to it unchanged")
    options = parser.parse_args(list(argv))
    if options.thdc != "ladder" and (options.thdc_capacities or options.thdc_sequence_capacities):
        parser.error("--thdc-capacities and --thdc-sequence-capacities are for --thdc ladder")
    return options


def _int_list(text: str) -> List[int]:
    try:
        values = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of "
                                         f"integers") from None
    if any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every entry must be 1 or more")
    return values


def read_flags(args: Sequence[str]) -> argparse.Namespace:
    """The values of FLAGS in the script's arguments (the other flags are
    Megatron's business), as Megatron's parser reads them: `--flag value`
    or `--flag=value`, the last one given winning."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for flag, keywords in FLAGS.items():
        parser.add_argument(flag, **keywords)
    try:
        known, _ = parser.parse_known_args(list(args))
    except argparse.ArgumentError as error:
        raise Refusal(f"the script's flags do not parse: {error}") from None
    return known


def check_flags(args: Sequence[str], mode: str = "step") -> argparse.Namespace:
    """The flags thdc reads, checked for --thdc `mode`: Refusal naming the
    flag and the reason where thdc cannot honour them."""
    flags = read_flags(args)
    if flags.sequence_packing_scheduler is None:
        raise Refusal("--sequence-packing-scheduler is not set: pretrain_gpt.py calls the "
                      "batch function thdc replaces only with sequence packing (set it, e.g. "
                      "--sequence-packing-scheduler dp_balanced, or run with --thdc off)")
    C = flags.max_seqlen_per_dp_cp_rank
    if C is None or C < 1:
        raise Refusal("--max-seqlen-per-dp-cp-rank is not set: it is C, the rows every CP "
                      "rank holds, which thdc pads every microbatch to")
    N = flags.thd_max_packed_sequences
    if N is None or N < 2:
        raise Refusal(
            "--thd-max-packed-sequences is not set" + ("" if N is None else f" to 2 or more "
                                                       f"(got {N})")
            + ": it is N, the sequences a microbatch can hold (the dummy sequence over the "
              "tail included). thdc pads every microbatch to static shapes, C rows and N+1 "
              "offsets, with or without CUDA graphs; Megatron's own eager path takes any "
              "count. Set it above the most sequences a microbatch of your data holds "
              "(thdc.planner.advise suggests one); a microbatch with more is emptied and "
              "counted, never trained in part")
    alignment = flags.pad_packed_seq_alignment
    if alignment is None or alignment not in ("max", str(C)):
        raise Refusal(
            f"--pad-packed-seq-alignment is {alignment or 'not set'}: thdc pads every "
            f"microbatch to --max-seqlen-per-dp-cp-rank = {C} rows, which is "
            f"--pad-packed-seq-alignment max" + (
                "" if alignment is None else
                f"; {alignment} would pad each rank to a multiple of {alignment}, a length "
                f"that varies per microbatch"))
    policy = flags.thd_tail_padding_policy
    if policy not in (None, "append_dummy_seq"):
        raise Refusal(f"--thd-tail-padding-policy {policy}: thdc covers the tail with a "
                      f"dummy sequence (append_dummy_seq, the default)")
    if flags.cuda_graph_impl == FULL_ITERATION and mode != "ladder":
        raise Refusal(
            f"--thdc {mode} with --cuda-graph-impl {FULL_ITERATION}: megatron-core's "
            f"whole-iteration graph is one graph for every iteration (full_cuda_graph.py:"
            f"145-257 on dev), and packed iterations differ in microbatch count and sizes; "
            f"--thdc ladder puts thdc's whole-iteration graphs in its place, one per "
            f"iteration shape")
    if flags.cuda_graph_impl not in GRAPH_MODES + (FULL_ITERATION,):
        raise Refusal(f"--cuda-graph-impl {flags.cuda_graph_impl}: thdc knows the modes "
                      f"{', '.join(GRAPH_MODES + (FULL_ITERATION,))}")
    if flags.micro_batch_size not in (None, 1):
        raise Refusal(f"--micro-batch-size {flags.micro_batch_size}: sequence packing takes "
                      f"one packed microbatch at a time (--micro-batch-size 1)")
    return flags


def check_plan_mode(mode: str, flags: argparse.Namespace) -> None:
    """The flags the modes that read the plan's figures (PLAN_MODES) cannot
    honour yet, refused by name: they pick each microbatch's rung (or its
    rows) on the host of its one rank."""
    if flags.sequence_packing_scheduler != "dp_balanced":
        raise Refusal(f"--thdc {mode} with --sequence-packing-scheduler "
                      f"{flags.sequence_packing_scheduler}: the rows of each microbatch come "
                      f"from dp_balanced's plan (set --sequence-packing-scheduler dp_balanced)")
    for flag, value in (("--tensor-model-parallel-size", flags.tensor_model_parallel_size),
                        ("--pipeline-model-parallel-size", flags.pipeline_model_parallel_size),
                        ("--context-parallel-size", flags.context_parallel_size)):
        if value not in (None, 1):
            raise Refusal(
                f"--thdc {mode} with {flag} {value}: each microbatch's rung is chosen from the "
                f"plan on one rank, and carrying it to the other ranks of a tensor, pipeline "
                f"or context parallel group is not built yet; --thdc step takes these")
    if flags.num_layers_per_virtual_pipeline_stage or flags.num_virtual_stages_per_pipeline_rank:
        raise Refusal(f"--thdc {mode} with virtual pipeline stages: their iterators carry no "
                      f"plan figures (megatron-core copies the metadata keys alone); --thdc "
                      f"step takes them")
    if flags.dynamic_context_parallel:
        raise Refusal(f"--thdc {mode} with --dynamic-context-parallel: --thdc step takes it")
    if mode == "exact" and flags.cuda_graph_impl != "none":
        raise Refusal(f"--thdc exact with --cuda-graph-impl {flags.cuda_graph_impl}: exact rows "
                      f"give every microbatch its own shape, which no graph holds (--thdc "
                      f"ladder puts graphs at a few shapes)")
    if mode == "ladder" and flags.cuda_graph_impl == "local":
        raise Refusal("--thdc ladder with --cuda-graph-impl local: the ladder's graphs are "
                      "per rung through TransformerEngine's per-layer graphs "
                      "(--cuda-graph-impl transformer_engine) or none")


def ladder(options: argparse.Namespace, flags: argparse.Namespace) -> Tuple[List[int], List[int]]:
    """The rungs of --thdc ladder: (rows per rank, sequences) for each, the
    top one (C, N) (appended where the lists stop below it). Refusal for a
    ladder thdc.planner.check_ladder refuses."""
    from .. import planner

    C, N = flags.max_seqlen_per_dp_cp_rank, flags.thd_max_packed_sequences
    rows = list(options.thdc_capacities or [])
    if not rows:
        multiple = LADDER_MULTIPLE if C % LADDER_MULTIPLE == 0 else 1
        rows = planner.even_ladder(C, LADDER_RUNGS, multiple)
    if rows[-1] != C:
        rows.append(C)
    seqs = list(options.thdc_sequence_capacities or [N] * len(rows))
    if len(seqs) == len(rows) - 1 and seqs[-1] != N:
        seqs.append(N)
    if len(seqs) != len(rows):
        raise Refusal(f"--thdc-sequence-capacities has {len(seqs)} entries for "
                      f"{len(rows)} rungs ({','.join(map(str, rows))})")
    if rows[-1] != C or seqs[-1] != N or max(rows) > C or max(seqs) > N:
        raise Refusal(f"the ladder's top rung must be --max-seqlen-per-dp-cp-rank {C} and "
                      f"--thd-max-packed-sequences {N}; got rows {rows}, sequences {seqs}")
    try:
        planner.check_ladder(rows, seqs)
    except (TypeError, ValueError) as error:
        raise Refusal(f"--thdc-capacities {','.join(map(str, rows))} "
                      f"--thdc-sequence-capacities {','.join(map(str, seqs))}: {error}") from None
    return rows, seqs


def install() -> None:
    """thdc's function in place of megatron-core's, before the script
    imports it. Refusal where megatron-core cannot be imported or has no
    such function (a release before sequence packing: PyPI's 0.19.2)."""
    import importlib

    try:
        module = importlib.import_module(MEGATRON_MODULE)
    except Exception as error:  # not installed, or fails to import
        raise Refusal(f"{MEGATRON_MODULE} does not import ({type(error).__name__}: {error}): "
                      f"run from a Megatron-LM checkout with sequence packing (dev at "
                      f"d48bd6be0a is the tested one)") from None
    if not hasattr(module, MEGATRON_FUNCTION):
        import megatron.core

        raise Refusal(f"this megatron-core ({getattr(megatron.core, '__version__', '?')}, "
                      f"{os.path.dirname(megatron.core.__file__)}) has no "
                      f"{MEGATRON_MODULE}.{MEGATRON_FUNCTION}: sequence packing is in "
                      f"Megatron-LM's dev branch (d48bd6be0a is the tested one)")
    from .sequence_packing import get_batch_on_this_rank_for_sequence_packing

    setattr(module, MEGATRON_FUNCTION, get_batch_on_this_rank_for_sequence_packing)


def report_rungs(capacities: Sequence[int], listeners: list) -> None:
    """Counts the microbatches each rung ran and says so on stderr when the
    process exits (rank 0 of a run with several): the padding a ladder
    saved is a user's first question about it."""
    import atexit

    counts = [0] * len(capacities)
    listeners.append(lambda rung: counts.__setitem__(rung, counts[rung] + 1))

    def report() -> None:
        if os.environ.get("RANK", "0") == "0" and sum(counts):
            rows = sum(c * b for c, b in zip(counts, capacities))
            sys.stderr.write(
                "thdc.megatron.run: microbatches by rung (rows: count): "
                + ", ".join(f"{b}: {c}" for b, c in zip(capacities, counts))
                + f"; {rows / (sum(counts) * capacities[-1]):.1%} of the rows at the top rung "
                  f"alone\n")

    atexit.register(report)


def install_plan_mode(mode: str, rungs: Optional[Tuple[List[int], List[int]]],
                      graph_impl: str) -> None:
    """For PLAN_MODES, after install(): megatron-core's scheduler leaves the
    plan's figures in each microbatch (trainer.leave_plan_figures), thdc's
    batch function runs the rung (or exact rows) they choose; with
    per-layer graphs (graph_impl, --cuda-graph-impl) training.py's graph
    helper captures every rung (trainer.ladder_graph_helper), with
    whole-iteration graphs thdc's take the place of megatron-core's
    (trainer.iteration_graphs_wrapper). Refusal where this megatron-core
    lacks a piece."""
    import importlib

    from . import trainer
    from .sequence_packing import SEQUENCE_PACKING

    module = importlib.import_module(MEGATRON_MODULE)
    try:
        trainer.leave_plan_figures(module)
    except (AttributeError, KeyError) as error:
        raise Refusal(f"--thdc {mode}: {MEGATRON_MODULE} has no dp_balanced scheduler or "
                      f"build_packed_microbatches to read the plan from ({error})") from None
    capacities, sequences = rungs if rungs is not None else (None, None)
    SEQUENCE_PACKING.configure(capacities=capacities, sequence_capacities=sequences,
                               exact=mode == "exact")
    if capacities is not None:
        report_rungs(capacities, SEQUENCE_PACKING.rung_listeners)
    if graph_impl == "none" or rungs is None:
        return
    name = FULL_ITERATION_WRAPPER if graph_impl == FULL_ITERATION else GRAPH_HELPER
    try:
        training = importlib.import_module(TRAINING_MODULE)
        base = getattr(training, name)
    except Exception as error:
        raise Refusal(f"--thdc ladder: {TRAINING_MODULE}.{name}, megatron-core's "
                      f"{'whole-iteration' if name == FULL_ITERATION_WRAPPER else 'per-layer'} "
                      f"graph {'wrapper' if name == FULL_ITERATION_WRAPPER else 'helper'}, "
                      f"cannot be read ({type(error).__name__}: {error})") from None
    if graph_impl == FULL_ITERATION:
        replacement = trainer.iteration_graphs_wrapper(SEQUENCE_PACKING,
                                                       SEQUENCE_PACKING.rung_listeners,
                                                       report=True)
    else:
        replacement = trainer.ladder_graph_helper(base, capacities, sequences,
                                                  SEQUENCE_PACKING.rung_listeners)
    setattr(training, name, replacement)


def run_script(script: str, args: Sequence[str]) -> None:
    """The script as `python SCRIPT ARGS...` runs it: its folder first on
    sys.path (there already when main put it there), sys.argv its own,
    __name__ "__main__"."""
    sys.argv = [script, *args]
    folder = os.path.dirname(os.path.abspath(script))
    if sys.path[:1] != [folder]:
        sys.path.insert(0, folder)
    runpy.run_path(script, run_name="__main__")


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = split_argv(sys.argv[1:] if argv is None else argv)
    mode, script, args = options.thdc, options.script, options.args
    try:
        if not os.path.isfile(script):
            raise Refusal(f"no script {script}")
        if mode != "off":
            flags = check_flags(args, mode)
            rungs = None
            if mode in PLAN_MODES:
                check_plan_mode(mode, flags)
                rungs = ladder(options, flags) if mode == "ladder" else None
            # The script's folder first, as the script will have it, so that
            # megatron-core is the checkout's.
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            install()
            if mode in PLAN_MODES:
                install_plan_mode(mode, rungs, flags.cuda_graph_impl)
    except Refusal as refusal:
        _fail(str(refusal))
    run_script(script, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
