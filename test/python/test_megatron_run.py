"""python -m thdc.megatron.run: Megatron-LM's training script with thdc's
batch function, on a stand-in checkout (megatron-core's module and a
pretrain_gpt.py that imports the function at its top and calls it, as dev's
does at :30 and :136): the function the script binds is thdc's with --thdc
step and megatron-core's with --thdc off; the script gets its own argv and
folder; every flag thdc cannot honour is refused by name before the script
runs (exit 2, nothing of the script run). Skipped without PyTorch."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

from thdc.megatron import run  # noqa: E402

GOOD = ["--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "8192",
        "--thd-max-packed-sequences", "64", "--pad-packed-seq-alignment", "max",
        "--num-layers", "12"]

SCRIPT = '''
import sys
from megatron.core.datasets.data_schedule import get_batch_on_this_rank_for_sequence_packing
import helper_beside_the_script  # found through the script's folder, as python SCRIPT finds it
print("bound:", get_batch_on_this_rank_for_sequence_packing.__module__)
print("argv:", " ".join(sys.argv))
print("name:", __name__)
'''


@pytest.fixture
def checkout(tmp_path):
    """A stand-in Megatron-LM checkout: megatron-core's module with the
    function, and the training script."""
    module = tmp_path / "megatron" / "core" / "datasets"
    module.mkdir(parents=True)
    for folder in (tmp_path / "megatron", tmp_path / "megatron" / "core", module):
        (folder / "__init__.py").write_text("")
    (module / "data_schedule.py").write_text(textwrap.dedent('''
        def get_batch_on_this_rank_for_sequence_packing(data_iterator, **kwargs):
            raise AssertionError("megatron-core's own function")
    '''))
    (tmp_path / "pretrain_gpt.py").write_text(SCRIPT)
    (tmp_path / "helper_beside_the_script.py").write_text("")
    return tmp_path


def launch(checkout, *argv, cwd=None):
    """The launcher in a new process, megatron-core the stand-in's."""
    here = os.path.dirname(run.__file__)
    package_root = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(checkout), package_root, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "thdc.megatron.run", *argv],
                          capture_output=True, text=True, env=env, cwd=cwd or checkout)


def test_the_script_binds_thdcs_function(checkout):
    done = launch(checkout, "pretrain_gpt.py", *GOOD)
    assert done.returncode == 0, done.stderr
    assert "bound: thdc.megatron.sequence_packing" in done.stdout
    assert "argv: pretrain_gpt.py " + " ".join(GOOD) in done.stdout
    assert "name: __main__" in done.stdout


def test_off_runs_the_script_as_it_is(checkout, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    script = str(checkout / "pretrain_gpt.py")
    done = launch(checkout, "--thdc", "off", script, "--num-layers", "2", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert "bound: megatron.core.datasets.data_schedule" in done.stdout
    assert f"argv: {script} --num-layers 2" in done.stdout


def test_flags_given_with_equals_signs(checkout):
    flags = [f"{a}={b}" for a, b in zip(GOOD[0::2], GOOD[1::2])]
    done = launch(checkout, "--thdc=step", "pretrain_gpt.py", *flags)
    assert done.returncode == 0, done.stderr
    assert "bound: thdc.megatron.sequence_packing" in done.stdout


def without(flag):
    i = GOOD.index(flag)
    return GOOD[:i] + GOOD[i + 2:]


@pytest.mark.parametrize("args, message", [
    (without("--sequence-packing-scheduler"), "--sequence-packing-scheduler is not set"),
    (without("--max-seqlen-per-dp-cp-rank"), "--max-seqlen-per-dp-cp-rank is not set"),
    (without("--thd-max-packed-sequences"),
     "--thd-max-packed-sequences is not set: it is N, .* with or without CUDA graphs"),
    (GOOD + ["--thd-max-packed-sequences", "1"], "--thd-max-packed-sequences is not set to 2"),
    (without("--pad-packed-seq-alignment"), "--pad-packed-seq-alignment is not set"),
    (GOOD + ["--pad-packed-seq-alignment", "64"],
     "--pad-packed-seq-alignment is 64: .* a length that varies per microbatch"),
    (GOOD + ["--thd-tail-padding-policy", "extend_last"],
     "--thd-tail-padding-policy extend_last"),
    (GOOD + ["--cuda-graph-impl", "full_iteration"],
     "--thdc step with --cuda-graph-impl full_iteration: megatron-core's whole-iteration "
     "graph is one graph for every iteration .*--thdc ladder puts thdc's"),
    (GOOD + ["--micro-batch-size", "2"], "--micro-batch-size 2"),
    (GOOD + ["--max-seqlen-per-dp-cp-rank", "many"],
     "the script's flags do not parse: argument --max-seqlen-per-dp-cp-rank: invalid int"),
])
def test_a_flag_thdc_cannot_honour_is_refused_by_name(args, message):
    with pytest.raises(run.Refusal, match=message):
        run.check_flags(args)


def test_a_refusal_ends_the_launch_before_the_script_runs(checkout):
    for args in (without("--thd-max-packed-sequences"),
                 GOOD + ["--cuda-graph-impl", "full_iteration"]):
        done = launch(checkout, "pretrain_gpt.py", *args)
        assert done.returncode == 2 and done.stdout == ""  # the script never ran
        assert done.stderr.startswith("thdc.megatron.run: error: --")
        assert "Traceback" not in done.stderr


def test_flags_that_hold_are_read_as_megatrons_parser_reads_them():
    flags = run.check_flags(GOOD + ["--cuda-graph-impl", "transformer_engine",
                                    "--pad-packed-seq-alignment=8192", "--micro-batch-size", "1"])
    assert (flags.max_seqlen_per_dp_cp_rank, flags.thd_max_packed_sequences) == (8192, 64)
    assert flags.cuda_graph_impl == "transformer_engine"
    assert run.check_flags(GOOD).cuda_graph_impl == "none"
    assert run.check_flags(GOOD + ["--cuda-graph-impl=local"]).cuda_graph_impl == "local"


def test_a_megatron_core_without_the_function_is_refused(checkout):
    (checkout / "megatron" / "core" / "datasets" / "data_schedule.py").write_text("")
    (checkout / "megatron" / "core" / "__init__.py").write_text("__version__ = '0.19.2'\n")
    done = launch(checkout, "pretrain_gpt.py", *GOOD)
    assert done.returncode == 2
    assert "this megatron-core (0.19.2" in done.stderr
    assert "has no megatron.core.datasets.data_schedule." \
           "get_batch_on_this_rank_for_sequence_packing" in done.stderr


def test_usage_errors(checkout):
    done = launch(checkout)
    assert done.returncode == 2 and "the following arguments are required: script" in done.stderr
    done = launch(checkout, "--thdc", "ladders", "pretrain_gpt.py")
    assert done.returncode == 2 and "invalid choice: 'ladders'" in done.stderr
    done = launch(checkout, "--thdc-capacities", "2048", "pretrain_gpt.py", *GOOD)
    assert done.returncode == 2 and "are for --thdc ladder" in done.stderr
    done = launch(checkout, "--thdc", "ladder", "--thdc-capacities", "2048,x", "pretrain_gpt.py")
    assert done.returncode == 2 and "'2048,x' is not a comma-separated list" in done.stderr
    done = launch(checkout, "no_such_script.py", *GOOD)
    assert done.returncode == 2 and "no script no_such_script.py" in done.stderr


def test_the_megatron_import_thdc_makes_is_quiet(checkout):
    """GraphStep imports megatron-core's PackedSeqParams on first use; the
    warnings megatron-core raises while it loads are not the user's import
    and are not shown (a user's own import still shows them)."""
    params = checkout / "megatron" / "core" / "packed_seq_params.py"
    params.write_text(textwrap.dedent('''
        import warnings
        from dataclasses import dataclass
        warnings.warn("Transformer Engine and Apex are not installed", UserWarning)
        @dataclass
        class PackedSeqParams:
            qkv_format: str = None
            cu_seqlens_q: object = None
            cu_seqlens_kv: object = None
            cu_seqlens_q_padded: object = None
            cu_seqlens_kv_padded: object = None
            max_seqlen_q: int = None
            max_seqlen_kv: int = None
    '''))
    code = textwrap.dedent('''
        import sys, warnings
        warnings.simplefilter("always")
        import thdc.megatron
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = thdc.megatron.GraphStep(64, 9, device="cpu")
        print("class:", type(step.packed_seq_params).__module__)
        print("warnings:", [str(w.message) for w in caught])
        if sys.argv[1] == "user":
            import importlib
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                importlib.reload(sys.modules["megatron.core.packed_seq_params"])
            print("user:", [str(w.message) for w in caught])
    ''')
    here = os.path.dirname(run.__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(checkout), os.path.dirname(os.path.dirname(here)), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code, "user"], capture_output=True, text=True,
                          env=env, cwd=checkout)
    assert done.returncode == 0, done.stderr
    assert "class: megatron.core.packed_seq_params" in done.stdout
    assert "warnings: []" in done.stdout
    assert "user: ['Transformer Engine and Apex are not installed']" in done.stdout


# -- the ladder and exact rows -------------------------------------------------

PLAN_SCRIPT = '''
import sys
from megatron.core.datasets import data_schedule
from megatron.core.datasets.data_schedule import get_batch_on_this_rank_for_sequence_packing
from megatron.training import training
import thdc.megatron
from thdc.megatron import loader
print("bound:", get_batch_on_this_rank_for_sequence_packing.__module__)
scheduler = data_schedule.scheduler_map["dp_balanced"]()
groups = scheduler.get_groups_and_subsamples([(0, 3000), (1, 4000), (2, 100)])
built = data_schedule.build_packed_microbatches({}, groups, 0, "cpu")
print("figures:", [loader.plan_figures(b) for b in built])
print("helper:", training.TECudaGraphHelper.__name__, training.TECudaGraphHelper.__mro__[1].__module__)
print("wrapper:", training.FullCudaGraphWrapper.__module__, training.FullCudaGraphWrapper.__name__)
packing = thdc.megatron.SEQUENCE_PACKING
print("ladder:", packing.step_kwargs.get("capacities"), packing.step_kwargs.get("sequence_capacities"))
print("exact:", packing.exact)
'''


@pytest.fixture
def plan_checkout(checkout):
    """The stand-in with dp_balanced's scheduler and build function and
    training.py's graph helper (their names and signatures on dev)."""
    module = checkout / "megatron" / "core" / "datasets" / "data_schedule.py"
    module.write_text(module.read_text() + textwrap.dedent('''
        class DpBalancedScheduler:
            def get_groups_and_subsamples(self, sample_id_seqlens):
                return [[[0, 1]], [[2]]]
        scheduler_map = {"dp_balanced": DpBalancedScheduler}
        def build_packed_microbatches(samples_this_rank_with_id, sample_id_groups, dcp_rank,
                                      dev, is_dynamic_cp=False):
            return [{} for _ in sample_id_groups]
    '''))
    training = checkout / "megatron" / "training"
    training.mkdir()
    (training / "__init__.py").write_text("")
    (training / "training.py").write_text(textwrap.dedent('''
        class TECudaGraphHelper:
            def __init__(self, model, config, seq_length, micro_batch_size, optimizers=[],
                         pg_collection=None, thd_sequence_length_upper_bound=None):
                pass
        class FullCudaGraphWrapper:
            cuda_graph = {"training": None, "validation": None}
            def __init__(self, forward_backward_func, cuda_graph_warmup_steps=1,
                         use_single_mempool=False):
                pass
    '''))
    (checkout / "pretrain_gpt.py").write_text(PLAN_SCRIPT)
    return checkout


def test_ladder_reads_the_plan_and_captures_per_rung(plan_checkout):
    done = launch(plan_checkout, "--thdc", "ladder", "pretrain_gpt.py", *GOOD,
                  "--cuda-graph-impl", "transformer_engine")
    assert done.returncode == 0, done.stderr
    assert "bound: thdc.megatron.sequence_packing" in done.stdout
    assert "figures: [(7000, 2, 4000), (100, 1, 100)]" in done.stdout
    assert "helper: LadderGraphHelper megatron.training.training" in done.stdout
    # The default ladder: four rungs evenly spaced up to C, N each.
    assert "ladder: [2048, 4096, 6144, 8192] [64, 64, 64, 64]" in done.stdout
    assert "exact: False" in done.stdout


def test_ladder_with_whole_iteration_graphs_puts_thdcs_in_megatrons_place(plan_checkout):
    done = launch(plan_checkout, "--thdc", "ladder", "pretrain_gpt.py", *GOOD,
                  "--cuda-graph-impl", "full_iteration")
    assert done.returncode == 0, done.stderr
    assert "wrapper: thdc.megatron.trainer FullIterationGraphs" in done.stdout
    assert "helper: TECudaGraphHelper" in done.stdout  # the per-layer helper stays
    assert "ladder: [2048, 4096, 6144, 8192] [64, 64, 64, 64]" in done.stdout


def test_ladder_without_graphs_leaves_the_helper(plan_checkout):
    done = launch(plan_checkout, "--thdc", "ladder", "--thdc-capacities", "1024,4096",
                  "--thdc-sequence-capacities", "16,32", "pretrain_gpt.py", *GOOD)
    assert done.returncode == 0, done.stderr
    assert "helper: TECudaGraphHelper" in done.stdout
    assert "wrapper: megatron.training.training FullCudaGraphWrapper" in done.stdout
    assert "ladder: [1024, 4096, 8192] [16, 32, 64]" in done.stdout


def test_exact_reads_the_plan(plan_checkout):
    done = launch(plan_checkout, "--thdc", "exact", "pretrain_gpt.py", *GOOD)
    assert done.returncode == 0, done.stderr
    assert "figures: [(7000, 2, 4000), (100, 1, 100)]" in done.stdout
    assert "ladder: None None" in done.stdout and "exact: True" in done.stdout


@pytest.mark.parametrize("mode, launcher, flags, message", [
    ("ladder", [], ["--tensor-model-parallel-size", "2"],
     "--thdc ladder with --tensor-model-parallel-size 2: each microbatch's rung"),
    ("exact", [], ["--pipeline-model-parallel-size=4"],
     "--thdc exact with --pipeline-model-parallel-size 4"),
    ("ladder", [], ["--context-parallel-size", "2"], "with --context-parallel-size 2"),
    ("ladder", [], ["--num-virtual-stages-per-pipeline-rank", "2"], "virtual pipeline stages"),
    ("ladder", [], ["--dynamic-context-parallel"], "--dynamic-context-parallel"),
    ("ladder", [], ["--sequence-packing-scheduler", "default_dynamic_cp"],
     "--sequence-packing-scheduler default_dynamic_cp: the rows of each microbatch"),
    ("exact", [], ["--cuda-graph-impl", "transformer_engine"],
     "--thdc exact with --cuda-graph-impl transformer_engine: exact rows"),
    ("ladder", [], ["--cuda-graph-impl", "local"], "--thdc ladder with --cuda-graph-impl local"),
    ("exact", [], ["--cuda-graph-impl", "full_iteration"],
     "--thdc exact with --cuda-graph-impl full_iteration"),
    ("ladder", ["--thdc-capacities", "4096,2048"], [], "--thdc-capacities 4096,2048,8192"),
    ("ladder", ["--thdc-capacities", "2048,16384"], [], "top rung must be"),
    ("ladder", ["--thdc-capacities", "2048,4096", "--thdc-sequence-capacities", "16"], [],
     "--thdc-sequence-capacities has 1 entries for 3 rungs"),
    ("ladder", ["--thdc-sequence-capacities", "8,16,32,128"], [], "top rung must be"),
])
def test_plan_modes_refuse_what_they_cannot_honour(plan_checkout, mode, launcher, flags,
                                                   message):
    done = launch(plan_checkout, "--thdc", mode, *launcher, "pretrain_gpt.py", *GOOD, *flags)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr
    assert "bound:" not in done.stdout  # nothing of the script ran


def test_a_megatron_core_without_the_scheduler_is_refused(checkout):
    done = launch(checkout, "--thdc", "ladder", "pretrain_gpt.py", *GOOD)
    assert done.returncode == 2
    assert "--thdc ladder: megatron.core.datasets.data_schedule has no dp_balanced scheduler" \
        in done.stderr


def test_the_rungs_microbatches_ran_are_reported_at_exit():
    code = ("from thdc.megatron import run\n"
            "listeners = []\n"
            "run.report_rungs([16, 32], listeners)\n"
            "for rung in (0, 1, 1):\n"
            "    listeners[0](rung)\n")
    here = os.path.dirname(run.__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(here)), os.environ.get("PYTHONPATH", "")]), RANK="0")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert ("microbatches by rung (rows: count): 16: 1, 32: 2; 83.3% of the rows at the top "
            "rung alone") in done.stderr
    env["RANK"] = "1"  # one report per run, from rank 0
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "microbatches by rung" not in done.stderr


# -- against Megatron-LM's own parser --------------------------------------------

def _golden():
    import json

    from conftest import SOURCE_DIR

    with open(os.path.join(SOURCE_DIR, "test", "python", "data", "megatron_run_flags.json")) as f:
        return json.load(f)


def _as_megatron_reads(dest, value):
    """The launcher reads --pad-packed-seq-alignment as text; Megatron's
    validate_args makes a number of it (_parse_pad_packed_seq_alignment)."""
    if dest == "pad_packed_seq_alignment" and isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def test_the_launcher_reads_every_flag_as_megatrons_parser_does():
    """Megatron-LM's parse_args and validate_args (dev d48bd6be0a, recorded
    by make_megatron_run_golden.py) and the launcher's read_flags give the
    same value of every flag thdc reads, on the documented command lines and
    their edges; a command line Megatron refuses, the launcher refuses too."""
    import make_megatron_run_golden as golden_cases

    golden = _golden()
    assert golden["flags"] == sorted(k["dest"] for k in run.FLAGS.values()), \
        "run.FLAGS changed: rerun make_megatron_run_golden.py"
    cases = golden_cases.cases()
    assert sorted(cases) == sorted(golden["cases"])
    for name, argv in cases.items():
        megatron = golden["cases"][name]
        if "error" in megatron:
            with pytest.raises(run.Refusal):
                run.check_flags(argv)
            continue
        ours = vars(run.read_flags(argv))
        for dest in golden["flags"]:
            assert _as_megatron_reads(dest, ours[dest]) == megatron[dest], (name, dest)
