"""thdc's get_batch_on_this_rank_for_sequence_packing against the reference
framework's own function (megatron-core dev d48bd6be0a), field by field.

The same packed microbatches (make_megatron_dev_golden.cases()) go to both,
for every stage form, CP 1, 2, 3 and 4, zigzag and contiguous, graph mode
(C = 32, N = 6). dev's outputs come from the golden file that
make_megatron_dev_golden.py wrote by running dev's code; where a dev
checkout is named by THDC_MEGATRON_DEV, dev runs live as well and must
still equal the file.

Where dev trains a microbatch, thdc must give the same 7-tuple: every data
key, the padding mask, `attention_mask` None, and PackedSeqParams's fields
(format, the four cu arrays, max_seqlen, pad_between_seqs, the CP layout,
no total_tokens, no dynamic-CP fields) with status 0. Where dev refuses it
(an assert, or TE's partition check), thdc must refuse it too: raise
before copying (more rows than C*cp), or empty it and say so in its
status. The differences by design:

- `seq_idx`: thdc fills it (Mamba reads it; megatron-core's PackedSeqParams
  computes it only when total_tokens is set, which graph mode leaves None);
- an empty microbatch under zigzag CP > 1: TransformerEngine refuses a
  partition of 0 rows, so dev raises; thdc hands the ranks an all-padding
  microbatch (status 0, no row to train either way).
"""
import json
import warnings

import pytest

import thdc

torch = pytest.importorskip("torch")

import thdc.megatron  # noqa: E402

import make_megatron_dev_golden as golden  # noqa: E402
import megatron_dev  # noqa: E402
from conftest import needs_megatron_dev  # noqa: E402

GOLDEN = json.load(open(golden.OUT))
# A megatron-core release whose PackedSeqParams has no cp_partition_mode
# (0.19.2) reads no CP layout: the field is left out there.
CLASS_HAS_LAYOUT = "cp_partition_mode" in thdc.megatron.packed_seq_params_fields()
CASES = golden.cases()


def _by_design(layout, batch):
    """Why thdc and dev differ on this case by design, or None."""
    empty = len(batch["cu_seqlens"]) == 1
    if empty and layout["cp_mode"] == "zigzag" and layout["cp"] > 1:
        return "TE refuses a zigzag partition of 0 rows"
    return None


@pytest.fixture(scope="module")
def batches(cache_dir):
    return thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir,
                                                convention="compact")


def thdc_call(batches, layout, batch):
    from types import SimpleNamespace

    pg = SimpleNamespace(tp=megatron_dev.LocalGroup(0, 1),
                         cp=megatron_dev.LocalGroup(layout["cp_rank"], layout["cp"]),
                         pp=megatron_dev.LocalGroup(layout["pp_rank"], layout["pp"]))
    cfg = megatron_dev.config(golden.C, golden.N, cp_mode=layout["cp_mode"], cp=layout["cp"])
    try:
        result = batches(iter([golden.torch_batch(batch)]), pg_collection=pg, config=cfg,
                         **layout["form"])
    except ValueError as error:  # refused on the host, before anything is copied
        return error, None
    return result, int(batches.last.outputs.status[0])


def compare(layout, batch, dev, result, status):
    """The fields that differ, as text; [] when thdc matches dev."""
    reason = _by_design(layout, batch)
    if status is None:
        return [] if "error" in dev else [f"dev trains it but thdc raises {result}"]
    if "error" in dev:
        if reason:
            return [] if status == 0 else [f"status {status} for a by-design case ({reason})"]
        if status == 0:
            return [f"dev refuses ({dev['error'][:160]}) but thdc trains it (status 0)"]
        # Emptied: nothing of the microbatch reaches the loss.
        mask = result[megatron_dev.TUPLE.index("padding_mask")]
        loss = result[megatron_dev.TUPLE.index("loss_mask")]
        bad = []
        if not bool(mask.all()):
            bad.append("an emptied microbatch has rows that are not padding")
        if loss is not None and bool(loss.any()):
            bad.append("an emptied microbatch has loss_mask rows")
        return bad
    if status != 0:
        return [f"dev trains it but thdc empties it: status {status} "
                f"({thdc.describe_status(status)})"]
    return megatron_dev.differences(megatron_dev.flatten(result), dev,
                                    layout_field=CLASS_HAS_LAYOUT)


def test_the_golden_file_is_this_generators():
    assert len(GOLDEN["cases"]) == len(CASES)
    assert (GOLDEN["C"], GOLDEN["N"], GOLDEN["seed"]) == (golden.C, golden.N, golden.SEED)
    for (case, layout, _), stored in zip(CASES, GOLDEN["cases"]):
        assert stored["case"] == case and stored["layout"] == layout


@pytest.mark.parametrize("cp_mode, cp", [(m, cp) for cp, m, _, _ in golden.LAYOUTS])
def test_thdc_equals_megatron_dev(batches, cp_mode, cp):
    failures = []
    checked = trained = 0
    for (case, layout, batch), stored in zip(CASES, GOLDEN["cases"]):
        if (layout["cp_mode"], layout["cp"]) != (cp_mode, cp):
            continue
        result, status = thdc_call(batches, layout, batch)
        problems = compare(layout, batch, stored["dev"], result, status)
        checked += 1
        trained += "error" not in stored["dev"]
        if problems:
            failures.append(f"case {case} {layout}: " + "; ".join(problems))
    assert checked and trained, "no case of this layout"
    assert not failures, f"{len(failures)} of {checked} cases differ:\n" + "\n".join(failures[:8])


def test_packed_seq_params_say_the_cp_layout(batches):
    """A contiguous-CP config hands the model params that say contiguous
    (dev reads the field: the MTP roll, the GDN/CSA layout checks); a
    release without the field gets none."""
    for mode in ("zigzag", "contiguous"):
        layout = dict(cp=2, cp_mode=mode, cp_rank=1, pp=1, pp_rank=0, form={})
        batch = next(b for _, lay, b in CASES if lay["cp_mode"] == mode and lay["cp"] == 2)
        result, _ = thdc_call(batches, layout, batch)
        params = result[megatron_dev.TUPLE.index("packed_seq_params")]
        if not CLASS_HAS_LAYOUT:
            assert not hasattr(params, "cp_partition_mode")
            continue
        params = result[megatron_dev.TUPLE.index("packed_seq_params")]
        assert params.cp_partition_mode == mode


@needs_megatron_dev
def test_dev_itself_still_gives_the_golden_outputs():
    warnings.simplefilter("ignore")
    module = megatron_dev.load()
    for (case, layout, batch), stored in zip(CASES, GOLDEN["cases"]):
        cfg = megatron_dev.config(golden.C, golden.N, cp_mode=layout["cp_mode"],
                                  cp=layout["cp"])
        result = megatron_dev.call(module, golden.torch_batch(batch), cfg=cfg, cp=layout["cp"],
                                   cp_rank=layout["cp_rank"], pp=layout["pp"],
                                   pp_rank=layout["pp_rank"], form=layout["form"])
        assert megatron_dev.flatten(result) == stored["dev"], (case, layout)


def test_te_restatement_matches_the_spec_goldens():
    """The restated TE index: TE's unit-test golden and the refusals."""
    cu = torch.tensor([0, 8, 16], dtype=torch.int32)
    assert megatron_dev.te_partitioned_indices(cu, 16, 2, 0).tolist() == [0, 1, 6, 7, 8, 9, 14, 15]
    assert megatron_dev.te_partitioned_indices(cu, 16, 2, 1).tolist() == [2, 3, 4, 5, 10, 11, 12,
                                                                         13]
    with pytest.raises(megatron_dev.TERefusal, match="divisible by 2\\*cp"):
        megatron_dev.te_partitioned_indices(torch.tensor([0, 3, 8], dtype=torch.int32), 8, 2, 0)
    with pytest.raises(megatron_dev.TERefusal, match="must be > 0"):
        megatron_dev.te_partitioned_indices(torch.tensor([0, 0], dtype=torch.int32), 0, 2, 0)
