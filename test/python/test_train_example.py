"""examples/train on the CPU: the tiny preset for a few steps in the eager
mode and, where thdc has its JIT, with thdc's step (the pipeline's host code
behind GraphStep's methods); both must learn and agree."""
import importlib.util
import math
import os
import sys
import xml.dom.minidom

import numpy as np
import pytest

import thdc
from conftest import SOURCE_DIR

EXAMPLE_DIR = os.path.join(SOURCE_DIR, "examples", "train")
STEPS = 16
# fp32 on the CPU: the eager mode runs the model on the T rows of each
# microbatch, thdc's step on C rows; the real rows compute the same sums in
# another order, so the losses differ by rounding only (about 3e-5 after 20
# steps). A wrong mask, position or sequence boundary moves them by far more.
LOSS_TOLERANCE = 1e-3


def load(name):
    if EXAMPLE_DIR not in sys.path:
        sys.path.insert(0, EXAMPLE_DIR)
    spec = importlib.util.spec_from_file_location(f"train_example_{name}",
                                                  os.path.join(EXAMPLE_DIR, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_tiny(mode, path):
    """The tiny preset on the CPU in `mode`; train.py's result."""
    torch = pytest.importorskip("torch")
    train = load("train")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: more threads only contend
    try:
        return train.main(["--device", "cpu", "--preset", "tiny", "--steps", str(STEPS),
                           "--mode", mode, "--warmup", "2", "--log-every", "8",
                           "--json", str(path)])
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The eager mode's run, and the JSON file it wrote."""
    path = tmp_path_factory.mktemp("train") / "eager.json"
    return train_tiny("eager", path), path


def test_eager_mode_learns(run):
    losses = run[0]["modes"]["eager"]["loss"]
    assert len(losses) == STEPS and all(math.isfinite(v) for v in losses)
    assert np.mean(losses[-3:]) < losses[0] - 0.2, losses


def test_thdc_step_learns_as_eager(run, tmp_path):
    if not thdc.has_jit:
        pytest.skip("this build of thdc has no JIT")
    eager = run[0]["modes"]["eager"]
    step = train_tiny("thdc-eager", tmp_path / "thdc.json")["modes"]["thdc-eager"]
    assert all(math.isfinite(v) for v in step["loss"])
    assert np.mean(step["loss"][-3:]) < step["loss"][0] - 0.2, step["loss"]
    difference = max(abs(a - b) for a, b in zip(eager["loss"], step["loss"]))
    assert difference < LOSS_TOLERANCE, (eager["loss"], step["loss"])
    # The same work: every real token counted once in both.
    assert eager["tokens_per_step"] == step["tokens_per_step"]


def test_report(run, tmp_path):
    report = load("report")
    svg, markdown = tmp_path / "loss.svg", tmp_path / "RESULTS.md"
    assert report.main([str(run[1]), "--svg", str(svg), "--markdown", str(markdown)]) == 0
    text = markdown.read_text()
    for mode in run[0]["modes"]:
        assert f"| {mode} | tiny | 256 |" in text
    assert "![loss curves](loss.svg)" in text
    document = xml.dom.minidom.parse(str(svg))
    assert len(document.getElementsByTagName("polyline")) == len(run[0]["modes"])


def test_microbatch_rows_are_the_planned_documents():
    """Each microbatch's gathered rows are its documents one after another,
    and its cu_seqlens their boundaries; every document lands in exactly one
    microbatch of at most C tokens and N-1 documents."""
    data = load("data")
    C, N = 256, 16
    batch = data.global_batch(seed=3, step=7, documents=40, C=C, vocab=512)
    plan = data.plan_microbatches(batch, C, N)
    seen = []
    for m in range(plan.num_microbatches):
        ids = plan.documents(m)
        assert 1 <= len(ids) <= N - 1
        rows = plan.rows[plan.row_starts[m]:plan.row_starts[m + 1]]
        expected = np.concatenate([batch.tokens[batch.offsets[i]:batch.offsets[i] +
                                                batch.lengths[i]] for i in ids])
        assert len(rows) <= C and np.array_equal(batch.tokens[rows], expected)
        assert np.array_equal(plan.cu[m, :len(ids) + 1],
                              np.concatenate([[0], np.cumsum(batch.lengths[ids])]))
        assert np.array_equal(batch.positions[rows],
                              np.concatenate([np.arange(batch.lengths[i]) for i in ids]))
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(40))
    assert plan.num_microbatches <= data.max_microbatches(40, C, N)
    # The next token is the progression's: learnable from the document alone.
    assert np.array_equal(batch.labels[:-1][np.diff(batch.positions) == 1],
                          batch.tokens[1:][np.diff(batch.positions) == 1])
