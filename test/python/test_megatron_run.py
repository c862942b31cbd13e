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
     "--cuda-graph-impl full_iteration: .*thdc.megatron.IterationGraphs"),
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
    done = launch(checkout, "--thdc", "ladder", "pretrain_gpt.py")
    assert done.returncode == 2 and "invalid choice: 'ladder'" in done.stderr
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
