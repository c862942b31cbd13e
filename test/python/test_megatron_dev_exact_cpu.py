"""thdc's exact rows against the reference framework's eager, unpadded path
(megatron-core dev d48bd6be0a), field by field.

dev's eager, unpadded path is get_batch_on_this_rank_for_sequence_packing
(megatron/core/datasets/data_schedule.py:564-874) with a config whose
pad_packed_seq_alignment is None, its default: no padding is resolved
(:640-651; cuda_graph_impl is read only inside that branch, :649) and
pad_sequence_for_thd is skipped (:856). It builds the padding mask over the
cu_seqlens_padded[-1] = T packed rows and zeroes the data at padded rows
(:667-672, _build_thd_padding_mask :31-58, _sanitize_thd_padding_values
:61-72), slices them for CP (:697-709; zigzag: TE's partition index over
the T rows), views them as [1, T/cp] (:720-774) and returns the loader's
cu arrays and max_seqlen as they came (:776-790, :826; the loader's
max_seqlen is the longest padded sequence, data_schedule_utils.py:253) in
PackedSeqParams with the valid offsets in cu_seqlens_q/kv, the padded ones
in cu_seqlens_q/kv_padded, pad_between_seqs True, the CP layout, and no
total_tokens, so no seq_idx (:838-850; packed_seq_params.py:57).

thdc's counterpart is SequencePackingBatches(exact=True), what `thdc.megatron
.run --thdc exact` installs: the step pads the microbatch to C rows and N+1
offsets, then StepSlot.exact_rows cuts it to its own rows from the plan's
figures (loader.PLAN_KEYS: rows, sequences, longest padded sequence). Its
config is the one --thdc exact takes (run.py: --pad-packed-seq-alignment
max, --cuda-graph-impl none), since the step's static capacities come from
it; dev runs with its eager config (make_megatron_dev_exact_golden.
dev_config). The same microbatches (make_megatron_dev_exact_golden.cases():
CP 1 with first-and-last, first, last, middle and MTP stages; CP 2 zigzag,
both ranks; C = 32, N = 6) go to both. dev's outputs come from the golden
file the generator wrote by running dev's code; where a dev checkout is
named by THDC_MEGATRON_DEV, dev runs live as well and must still equal it.

Where both train the microbatch, thdc must give dev's 7-tuple exactly: the
data keys and the padding mask (the T/cp rows), `attention_mask` None, and
every PackedSeqParams field megatron_dev.PARAMS names (format, the four cu
arrays of n+1 entries, max_seqlen_q/kv, local_cp_size, cp_group,
total_tokens, pad_between_seqs, the CP layout), and status 0. max_seqlen
agrees because both are the longest padded sequence: dev's from its loader,
thdc's the plan's figure (exact_rows' bound). The differences by design,
each checked as stated:

- `seq_idx`: thdc fills it, as in graph mode (Mamba reads it); dev's eager
  path leaves it None (no total_tokens). thdc's must be what megatron-core's
  PackedSeqParams computes from the returned padded offsets with
  total_tokens = T (packed_seq_params.py:57-80), [1, T] over all CP ranks'
  rows.
- more rows than C*cp: dev's eager path takes any length; thdc's step holds
  C*cp rows and raises before copying (at a middle stage, which is given no
  data tensor whose length the host could see, the step empties it, status
  total_exceeds_capacity, and the view is all padding). Megatron's
  dp_balanced scheduler never packs more (max_seq_len_all_ranks = C*cp,
  data_schedule.py:151, :175).
- N sequences and a tail: dev's eager path takes any count; thdc's N counts
  the dummy sequence over the tail, so the step empties the microbatch
  (status num_seqs_out_of_range) and the view is all padding. Under the flags
  --thdc exact requires (an alignment, the dummy tail) dev's scheduler packs
  at most N-1 sequences (data_schedule.py:456-483), so it never comes.
- an empty microbatch (T = 0): dev gives 0 rows, cu arrays [0] and
  max_seqlen 0 at CP 1, and under zigzag CP 2 TE refuses to partition 0 rows
  (dev raises); thdc's view is one padding row at CP 1, two per rank at
  zigzag CP 2 (a 2cp granule), offsets [0, 2cp or 1], max_seqlen 1, status 0
  (nothing to train either way; exact_rows' docstring).

test_a_full_microbatch_keeps_its_rows: N sequences that fill the C*cp rows
exactly, which the step holds, keep their rows in exact rows (the batch
function once judged them by the planner's N-1 rule and cut them to an
empty microbatch with status 0; exact_rows now also flags figures whose
sequence count is not the one loaded).
"""
import json
import warnings

import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
from thdc.megatron import loader  # noqa: E402

import make_megatron_dev_exact_golden as golden  # noqa: E402
import megatron_dev  # noqa: E402
from conftest import needs_megatron_dev  # noqa: E402

GOLDEN = json.load(open(golden.OUT))
CLASS_HAS_LAYOUT = "cp_partition_mode" in thdc.megatron.packed_seq_params_fields()
CASES = golden.cases()
C, N = golden.C, golden.N
T_INDEX = {name: i for i, name in enumerate(megatron_dev.TUPLE)}


def shape_of(layout, batch):
    """What the microbatch is to thdc's exact rows: "over" (more rows than
    C*cp), "emptied" (N sequences and a tail), "empty" (no row), "full" (N
    sequences filling the C*cp rows: the suspected bug) or "trained"."""
    rows, seqs, _ = golden.figures(batch)
    capacity = C * layout["cp"]
    if rows > capacity:
        return "over"
    if seqs == N:
        return "full" if rows == capacity else "emptied"
    return "empty" if rows == 0 else "trained"


@pytest.fixture(scope="module")
def batches(cache_dir):
    return thdc.megatron.SequencePackingBatches(device="cpu", cache_dir=cache_dir,
                                                convention="compact", exact=True)


def thdc_config(cp, cp_mode="zigzag"):
    """The config --thdc exact takes: pad_packed_seq_alignment "max" (the
    step's capacities), no CUDA graphs."""
    config = megatron_dev.config(C, N, graphs=True, cp_mode=cp_mode, cp=cp)
    config.cuda_graph_impl = "none"
    return config


def thdc_call(batches, layout, batch):
    """thdc's 7-tuple and status for the microbatch with its plan figures,
    or (the ValueError, None) where it refuses it before copying."""
    from types import SimpleNamespace

    pg = SimpleNamespace(tp=megatron_dev.LocalGroup(0, 1),
                         cp=megatron_dev.LocalGroup(layout["cp_rank"], layout["cp"]),
                         pp=megatron_dev.LocalGroup(layout["pp_rank"], layout["pp"]))
    given = golden.base.torch_batch(batch)
    given.update(zip(loader.PLAN_KEYS, golden.figures(batch)))
    try:
        result = batches(iter([given]), pg_collection=pg,
                         config=thdc_config(layout["cp"], layout["cp_mode"]), **layout["form"])
    except ValueError as error:
        return error, None
    return result, int(batches.last.outputs.status[0])


def same_as_dev(dev, result, status):
    """The fields where thdc's exact rows differ from dev's eager outputs."""
    if "error" in dev:
        return [f"dev refuses it ({dev['error'][:160]})"]
    if status is None:
        return [f"dev trains it but thdc raises {result}"]
    bad = [] if status == 0 else [f"status {status} ({thdc.describe_status(status)})"]
    bad += megatron_dev.differences(megatron_dev.flatten(result), dev,
                                    layout_field=CLASS_HAS_LAYOUT)
    bad += seq_idx_problems(result)
    return bad


def seq_idx_problems(result):
    """thdc fills seq_idx where dev's eager path leaves it None (no
    total_tokens): it must be what megatron-core's PackedSeqParams computes
    from the returned padded offsets with total_tokens their last entry
    (packed_seq_params.py:57-80 on dev), each of the T rows of all CP ranks
    its sequence's index."""
    params = result[T_INDEX["packed_seq_params"]]
    seq_idx = getattr(params, "seq_idx", None)
    if seq_idx is None:
        return []
    padded = params.cu_seqlens_q_padded.to(torch.int64)
    expected = torch.repeat_interleave(torch.arange(padded.numel() - 1), padded.diff())
    if seq_idx.tolist() != [expected.tolist()]:
        return [f"packed_seq_params.seq_idx {seq_idx.tolist()} != {[expected.tolist()]}"]
    return []


def all_padding(layout, result, status, *, emptied):
    """An all-padding view of what exact_rows makes of an empty or emptied
    microbatch: one padding row (2cp rows, 2 per rank, under zigzag CP > 1)
    as one sequence of max_seqlen 1, nothing in the loss; the status says
    why where the step emptied it."""
    if status is None:
        return [f"thdc raises {result}"]
    cp = layout["cp"]
    total = 2 * cp if cp > 1 else 1
    bad = []
    if emptied != (status != 0):
        bad.append(f"status {status} ({thdc.describe_status(status)})")
    got = megatron_dev.flatten(result)
    if got["padding_mask"] != [True] * (total // cp):
        bad.append(f"padding_mask {got['padding_mask']}: not {total // cp} padding rows")
    for name in megatron_dev.DATA:
        if got[name] is not None and len(got[name]) != total // cp:
            bad.append(f"{name} has {len(got[name])} rows, not {total // cp}")
    if got["loss_mask"] is not None and any(got["loss_mask"]):
        bad.append("loss_mask rows in an all-padding view")
    params = got["packed_seq_params"]
    for field in ("cu_seqlens_q", "cu_seqlens_kv", "cu_seqlens_q_padded",
                  "cu_seqlens_kv_padded"):
        if params[field] != [0, total]:
            bad.append(f"packed_seq_params.{field} {params[field]} != [0, {total}]")
    if (params["max_seqlen_q"], params["max_seqlen_kv"]) != (1, 1):
        bad.append(f"max_seqlen {params['max_seqlen_q']}, {params['max_seqlen_kv']} != 1")
    return bad + seq_idx_problems(result)


def compare(layout, batch, dev, result, status):
    """The problems of thdc's answer for this case, as text; [] when it is
    dev's, or differs from it exactly as the module docstring says."""
    shape = shape_of(layout, batch)
    rows = golden.figures(batch)[0]
    if shape == "over":
        if status is None:  # refused on the host, before anything is copied
            bad = []
        elif layout["form"] or layout["pp"] == 1 or layout["pp_rank"] in (0, layout["pp"] - 1):
            bad = [f"thdc takes {rows} rows > C*cp at a stage with data (status {status})"]
        else:  # a middle stage, no data tensor whose length the host sees
            bad = all_padding(layout, result, status, emptied=True)
            if not status & thdc.STATUS_BITS["total_exceeds_capacity"]:
                bad.append(f"status {status} lacks total_exceeds_capacity")
        if "error" in dev or len(dev["padding_mask"]) != rows // layout["cp"]:
            bad.append("dev's eager path does not train all the rows")
        return bad
    if shape == "emptied":
        if "error" in dev:
            bad = ["dev refuses it"]
        else:
            bad = all_padding(layout, result, status, emptied=True)
            if status is not None and not status & thdc.STATUS_BITS["num_seqs_out_of_range"]:
                bad.append(f"status {status} lacks num_seqs_out_of_range")
        return bad
    if shape == "empty":
        bad = all_padding(layout, result, status, emptied=False)
        if layout["cp"] > 1:
            if "error" not in dev:
                bad.append("dev partitions 0 rows under zigzag CP")
        elif "error" in dev or dev["padding_mask"] != [] or \
                dev["packed_seq_params"]["cu_seqlens_q_padded"] != [0]:
            bad.append(f"dev's empty microbatch is not 0 rows: {str(dev)[:160]}")
        return bad
    return same_as_dev(dev, result, status)


def test_the_golden_file_is_this_generators():
    assert len(GOLDEN["cases"]) == len(CASES)
    assert (GOLDEN["C"], GOLDEN["N"], GOLDEN["seed"]) == (C, N, golden.SEED)
    for (case, layout, _), stored in zip(CASES, GOLDEN["cases"]):
        assert stored["case"] == case and stored["layout"] == layout


def test_the_cases_cover_every_shape():
    shapes = {(layout["cp"], shape_of(layout, batch)) for _, layout, batch in CASES}
    assert shapes == {(cp, s) for cp in (1, 2)
                      for s in ("over", "emptied", "empty", "full", "trained")}


@pytest.mark.parametrize("cp", [cp for cp, _, _ in golden.LAYOUTS])
def test_exact_rows_equal_megatron_dev_eager(batches, cp):
    failures = []
    checked = trained = 0
    for (case, layout, batch), stored in zip(CASES, GOLDEN["cases"]):
        if layout["cp"] != cp or shape_of(layout, batch) == "full":
            continue
        result, status = thdc_call(batches, layout, batch)
        problems = compare(layout, batch, stored["dev"], result, status)
        checked += 1
        trained += shape_of(layout, batch) == "trained"
        if problems:
            failures.append(f"case {case} {layout}: " + "; ".join(problems))
    assert checked and trained, "no case of this layout"
    assert not failures, f"{len(failures)} of {checked} cases differ:\n" + "\n".join(failures[:8])


def test_a_full_microbatch_keeps_its_rows(batches):
    """N sequences filling the C*cp rows exactly, no tail: dev's eager path
    trains them, and so does thdc's step (status 0); exact rows must give
    dev's 7-tuple, as for any microbatch the step trains."""
    failures = []
    checked = 0
    for (case, layout, batch), stored in zip(CASES, GOLDEN["cases"]):
        if shape_of(layout, batch) != "full":
            continue
        result, status = thdc_call(batches, layout, batch)
        checked += 1
        problems = same_as_dev(stored["dev"], result, status)
        if problems:
            failures.append(f"case {case} {layout}: " + "; ".join(problems))
    assert checked
    assert not failures, f"{len(failures)} of {checked} cases differ:\n" + "\n".join(failures[:4])


def test_contiguous_cp_is_refused(batches):
    """dev's eager path slices contiguous CP too (T/cp rows each,
    data_schedule_utils.py:78-89); exact rows refuse it by name (a rank's
    real rows do not lie at the start of its C rows), so it is not compared."""
    from types import SimpleNamespace

    batch = next(b for _, lay, b in CASES if lay["cp"] == 2 and shape_of(lay, b) == "trained")
    given = golden.base.torch_batch(batch)
    given.update(zip(loader.PLAN_KEYS, golden.figures(batch)))
    pg = SimpleNamespace(tp=megatron_dev.LocalGroup(0, 1), cp=megatron_dev.LocalGroup(0, 2),
                         pp=megatron_dev.LocalGroup(0, 1))
    with pytest.raises(ValueError, match="exact_rows needs zigzag CP"):
        batches(iter([given]), pg_collection=pg, config=thdc_config(2, "contiguous"))


@needs_megatron_dev
def test_dev_itself_still_gives_the_golden_outputs():
    warnings.simplefilter("ignore")
    module = megatron_dev.load()
    for (case, layout, batch), stored in zip(CASES, GOLDEN["cases"]):
        result = golden.run_dev(module, layout, batch)
        assert megatron_dev.flatten(result) == stored["dev"], (case, layout)


@needs_megatron_dev
def test_dev_eager_config_pads_nothing():
    """The config the golden was made with is dev's unpadded path: with
    pad_packed_seq_alignment "max" and no graphs dev pads to C rows instead
    (get_thd_padding_kwargs, packed_seq_params.py:205-228), which is what
    thdc's step gives before the cut."""
    warnings.simplefilter("ignore")
    module = megatron_dev.load()
    case, layout, batch = next(c for c in CASES if shape_of(c[1], c[2]) == "trained"
                               and c[1]["cp"] == 1 and golden.figures(c[2])[0] < C)
    eager = golden.run_dev(module, layout, batch)
    padded = megatron_dev.call(module, golden.base.torch_batch(batch), cfg=thdc_config(1),
                               cp=1, cp_rank=0)
    rows = golden.figures(batch)[0]
    assert eager[T_INDEX["tokens"]].shape == (1, rows)
    assert padded[T_INDEX["tokens"]].shape == (1, C)
    assert torch.equal(padded[T_INDEX["tokens"]][:, :rows], eager[T_INDEX["tokens"]])
