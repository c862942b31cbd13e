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
(--cuda-graph-impl local or transformer_engine). MODE "off" runs the script as it
is: the same command with thdc switched off.

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

MODES = ("step", "off")

# megatron-core's module and function the script imports (dev d48bd6be0a).
MEGATRON_MODULE = "megatron.core.datasets.data_schedule"
MEGATRON_FUNCTION = "get_batch_on_this_rank_for_sequence_packing"

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
}

# Megatron's CUDA graph modes in which the batch function runs eagerly,
# before captured layers (docs/megatron.md, "CUDA graphs").
GRAPH_MODES = ("none", "local", "transformer_engine")


class Refusal(Exception):
    """A flag (or a missing one) thdc cannot honour; the message names it."""


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"thdc.megatron.run: error: {message}\n")
    sys.exit(2)


def split_argv(argv: Sequence[str]) -> Tuple[str, str, List[str]]:
    """(mode, script, the script's arguments) from the launcher's arguments:
    its own options before the script's path, everything after it the
    script's. SystemExit (2) with usage on a bad command line."""
    parser = argparse.ArgumentParser(
        prog="python -m thdc.megatron.run", allow_abbrev=False,
        description="Runs Megatron-LM's training script with thdc's batch function.")
    parser.add_argument("--thdc", choices=MODES, default="step",
                        help="step: thdc's batch function (default); off: the script as it is")
    parser.add_argument("script", help="the training script, e.g. pretrain_gpt.py")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script's own flags, passed to it unchanged")
    options = parser.parse_args(list(argv))
    return options.thdc, options.script, list(options.args)


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


def check_flags(args: Sequence[str]) -> argparse.Namespace:
    """The flags thdc reads, checked: Refusal naming the flag and the reason
    where thdc cannot honour them."""
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
    if flags.cuda_graph_impl not in GRAPH_MODES:
        raise Refusal(
            f"--cuda-graph-impl {flags.cuda_graph_impl}: megatron-core's whole-iteration "
            f"graph is one graph for every iteration (full_cuda_graph.py:134-241 on dev), "
            f"and packed iterations differ in microbatch count and rungs; thdc's batch "
            f"function runs without graphs or before per-layer ones (--cuda-graph-impl "
            f"{', '.join(GRAPH_MODES)}), and thdc's whole-iteration graphs are "
            f"thdc.megatron.IterationGraphs")
    if flags.micro_batch_size not in (None, 1):
        raise Refusal(f"--micro-batch-size {flags.micro_batch_size}: sequence packing takes "
                      f"one packed microbatch at a time (--micro-batch-size 1)")
    return flags


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


def run_script(script: str, args: Sequence[str]) -> None:
    """The script as `python SCRIPT ARGS...` runs it: its folder first on
    sys.path, sys.argv its own, __name__ "__main__"."""
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


def main(argv: Optional[Sequence[str]] = None) -> int:
    mode, script, args = split_argv(sys.argv[1:] if argv is None else argv)
    try:
        if not os.path.isfile(script):
            raise Refusal(f"no script {script}")
        if mode == "step":
            check_flags(args)
            install()
    except Refusal as refusal:
        _fail(str(refusal))
    run_script(script, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
