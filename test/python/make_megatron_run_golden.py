"""Writes test/python/data/megatron_run_flags.json: what Megatron-LM's own
argument parser (megatron-core dev d48bd6be0a: parse_args and validate_args,
megatron/training/arguments.py, as pretrain_gpt.py:573-576 calls them) makes
of the command lines thdc's launcher reads, for the flags it reads
(thdc.megatron.run.FLAGS), or the error it raises. test_megatron_run.py
checks the launcher reads each command line as Megatron's parser does, where
dev's code cannot run (it needs Python 3.12 and PyTorch; CI has neither
together).

    THDC_MEGATRON_DEV=/path/to/Megatron-LM python3.12 test/python/make_megatron_run_golden.py

The command lines are `cases()`, which the test shares: bench/megatron_pretrain.py's
command for every mode, the same flags written `--flag=value`, and edges."""
import contextlib
import io
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data", "megatron_run_flags.json")
DEV_COMMIT = "d48bd6be0a"


def _bench():
    import importlib.util

    sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
    spec = importlib.util.spec_from_file_location(
        "megatron_pretrain", os.path.join(HERE, "..", "..", "bench", "megatron_pretrain.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def cases():
    """{name: the script's arguments}."""
    bench = _bench()
    common = bench.megatron_flags("125m", 8192, 64, 300, "/tmp/data-cache")
    out = {}
    for mode in bench.MODES:
        command = bench.mode_command(mode, "pretrain_gpt.py", common, 64)
        out[mode] = command[command.index("pretrain_gpt.py") + 1:]
    graphs = out["thdc-graphs"]
    pairs, i = [], 0
    while i < len(graphs):  # --flag value -> --flag=value, switches as they are
        if i + 1 < len(graphs) and not graphs[i + 1].startswith("--"):
            pairs.append(f"{graphs[i]}={graphs[i + 1]}")
            i += 2
        else:
            pairs.append(graphs[i])
            i += 1
    out["equals-signs"] = pairs
    out["alignment-as-C"] = [a if a != "max" else "8192" for a in graphs]
    out["last-one-wins"] = graphs + ["--max-seqlen-per-dp-cp-rank", "4096",
                                     "--seq-length", "4096", "--max-position-embeddings", "4096"]
    out["alignment-below-C-with-graphs"] = [a if a != "max" else "4096" for a in graphs]
    out["eager-alignment-below-C"] = [a if a != "max" else "4096" for a in out["thdc-eager"]]
    out["tail-extend-last"] = graphs + ["--thd-tail-padding-policy", "extend_last"]
    return out


def dev_reads(argv, dests):
    """Megatron's parser on argv: {dest: value} for `dests`, or {"error": ...}."""
    from megatron.training.arguments import parse_args, validate_args

    sys.argv = ["pretrain_gpt.py", *argv]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            args = parse_args()
            validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
    except (Exception, SystemExit) as error:
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
    return {dest: getattr(args, dest) for dest in dests}


def main() -> int:
    import warnings

    dev = os.environ.get("THDC_MEGATRON_DEV")
    if not dev:
        sys.exit("THDC_MEGATRON_DEV must name a megatron-core dev checkout")
    sys.path.insert(0, dev)
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)
    warnings.simplefilter("ignore")
    from thdc.megatron import run

    dests = sorted(keywords["dest"] for keywords in run.FLAGS.values())
    golden = {"megatron_core": DEV_COMMIT, "flags": dests,
              "cases": {name: dev_reads(argv, dests) for name, argv in cases().items()}}
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, read in golden["cases"].items():
        print(name, read.get("error", "parsed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
