"""thdc.megatron.get_batch_on_this_rank_for_sequence_packing as the
reference framework calls it: run with
    torchrun --standalone --nproc-per-node 4 test/python/torchrun_megatron.py
        [--device cpu] [--microbatches M]
Four ranks, TP = 2 and CP = 2 in megatron-core's rank order (rank =
tp_rank + tp * cp_rank; gloo, so the ranks may share one GPU or run on CPU
tensors), one pipeline stage. Only TP rank 0 of each TP group has a data
iterator, of the batch dicts the reference framework's packing loader
yields (1-D int64 data, int32 cu arrays, max_seqlen a 0-d int32 tensor);
every CP rank of the group reads the same microbatches. Every stage form is
called through the function's own arguments (no vp_stage: one stage;
vpp_size 3 and vp_stage 0, 1, 2: first, middle, last; MTP: every key), with
sequence parallelism and an MXFP8 config, the step's ring of slots (3) and
random, empty, full and invalid microbatches. Each rank checks:
- every output against the reference for its CP rank, and the outputs of
  the two microbatches before it, still intact in their slots;
- padding_mask of the tokens' shape [1, C] (megatron-core's GPTModel
  asserts it and scatters the mask itself; with megatron-core installed its
  PackedSeqParams class is the one returned), and padding_mask_shard equal
  to that scatter (megatron-core's scatter_to_sequence_parallel_region
  itself when it is installed);
- PackedSeqParams: the padded offsets, the valid ones with the dummy as the
  reference framework appends it (cu_seqlens[-1] + the tail), N+1 entries,
  max_seqlen C*cp, pad_between_seqs;
- both TP ranks of the group hold the same bytes;
- the refusals: a data iterator on TP rank 1, a config without
  thd_max_packed_sequences, dynamic_cp without a DP x CP group.
Rank 0 prints 'megatron ranks agree: ...'; the exit code is 1 on any
failure."""
import argparse
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
from microbatches import end_worker, given_rows, invalidate, random_microbatch, reference  # noqa: E402

FORMS = (("first_last", dict()),
         ("first", dict(vpp_size=3, vp_stage=0)),
         ("middle", dict(vpp_size=3, vp_stage=1)),
         ("last", dict(vpp_size=3, vp_stage=2)),
         ("first_last", dict(vpp_size=3, vp_stage=1, mtp_on_this_rank=True)))
DATA = ("tokens", "labels", "loss_mask", "position_ids")
SLOTS = 3


def megatron_batch(mb, device):
    """The batch dict of the reference framework's packing loader
    (_pack_sequences, megatron/core/datasets/data_schedule_utils.py:232-269
    on dev) for a microbatch of microbatches.py."""
    n = int(mb["num_seqs"][0])
    entries = max(min(n + 1, len(mb["cu_seqlens"])), 1)
    rows = int(mb["cu_seqlens_padded"][entries - 1])
    rows = max(0, min(rows, len(mb["tokens"])))
    take = lambda k, count: torch.from_numpy(mb[k][:count].copy()).to(device)
    batch = {k: take(k, rows) for k in DATA}
    batch.update(cu_seqlens=take("cu_seqlens", entries),
                 cu_seqlens_padded=take("cu_seqlens_padded", entries))
    if entries != n + 1 or entries == len(mb["cu_seqlens"]):
        batch["num_seqs"] = n  # an invalid count, or arrays as long as the step's
    lengths = np.diff(mb["cu_seqlens_padded"][:entries])
    batch["max_seqlen"] = torch.tensor(int(lengths.max()) if lengths.size else 0,
                                       dtype=torch.int32, device=device)
    return batch


def check(result, expected, n, C, cp, N, stage, tp, tp_rank):
    """Names of what differs between one call's 7-tuple and the reference."""
    tokens, labels, loss_mask, attention_mask, position_ids, params, padding_mask = result
    got = dict(tokens=tokens, labels=labels, loss_mask=loss_mask, position_ids=position_ids)
    keys = thdc.stages.data_keys(stage)
    bad = [k for k in DATA if (got[k] is None) != (k not in keys)]
    bad += [k for k in keys if got[k] is not None
            and not np.array_equal(got[k].cpu().numpy().reshape(-1), expected[k])]
    if attention_mask is not None:
        bad.append("attention_mask")
    if tuple(padding_mask.shape) != (1, C) or (tokens is not None and
                                               padding_mask.shape != tokens.shape):
        bad.append("padding_mask shape")
    if not np.array_equal(padding_mask.cpu().numpy().reshape(-1).astype(np.int64),
                          expected["padding_mask"]):
        bad.append("padding_mask")
    cup = params.cu_seqlens_q_padded.cpu().numpy()
    if not np.array_equal(cup, expected["cu_seqlens_padded"]) or len(cup) != N + 1:
        bad.append("cu_seqlens_q_padded")
    compact = getattr(params, "pad_between_seqs", None) is True
    cu_q = params.cu_seqlens_q.cpu().numpy()
    if not np.array_equal(cu_q, expected["cu_seqlens"] if compact else expected["cu_seqlens_padded"]):
        bad.append("cu_seqlens_q")
    if compact and expected["status"] == 0:
        # The reference framework's compact dummy: the valid offsets, then
        # their end plus the tail (packed_seq_params.py:608-616 on dev).
        valid = expected["cu_seqlens"]
        tail = C * cp - int(expected["given_rows"])
        if tail and int(cu_q[n + 1]) != int(valid[n]) + tail:
            bad.append("compact dummy")
    if params.max_seqlen_q != C * cp or params.max_seqlen_kv != C * cp:
        bad.append("max_seqlen")
    if thdc.megatron.USING_MEGATRON_CORE:
        from megatron.core.packed_seq_params import PackedSeqParams
        if not isinstance(params, PackedSeqParams):
            bad.append("PackedSeqParams class")
    return bad


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--C", type=int, default=256)
    parser.add_argument("--N", type=int, default=9)
    parser.add_argument("--microbatches", type=int, default=12,
                        help="microbatches per stage form")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tp, cp = 2, 2
    assert world == tp * cp, "run with --nproc-per-node 4"
    device = args.device
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    tp_rank, cp_rank = rank % tp, rank // tp
    # Every rank makes every group, in the same order (megatron-core's layout).
    tp_groups = [dist.new_group([c * tp + t for t in range(tp)]) for c in range(cp)]
    cp_groups = [dist.new_group([c * tp + t for c in range(cp)]) for t in range(tp)]
    pp_groups = [dist.new_group([r]) for r in range(world)]
    pg = SimpleNamespace(tp=tp_groups[cp_rank], cp=cp_groups[tp_rank], pp=pp_groups[rank])
    C, N = args.C, args.N
    config = SimpleNamespace(
        max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N, pad_packed_seq_alignment="max",
        thd_tail_padding_policy=None, cp_partition_mode="zigzag", cuda_graph_impl="local",
        sequence_parallel=True, tensor_model_parallel_size=tp, context_parallel_size=cp,
        fp8="e4m3", fp8_recipe="mxfp8", microbatch_group_size_per_vp_stage=None)
    thdc.megatron.SEQUENCE_PACKING.configure(device=device, slots=SLOTS)

    scatter = None
    if thdc.megatron.USING_MEGATRON_CORE:
        try:
            from megatron.core.tensor_parallel import (
                scatter_to_sequence_parallel_region as scatter)
        except Exception as error:  # said, not hidden: the split is then restated here
            if rank == 0:
                print(f"megatron-core's scatter_to_sequence_parallel_region does not import: "
                      f"{type(error).__name__}: {error}", flush=True)

    seed = torch.tensor([np.random.SeedSequence().entropy % (1 << 62)])
    dist.broadcast(seed, src=0)
    rng = np.random.default_rng(int(seed.item()))
    failures, calls = [], 0
    for stage, form in FORMS:
        alive = []  # (result, expected, n) of the calls whose slots still hold them
        microbatches = []
        for i in range(args.microbatches):
            mb = random_microbatch(rng, C, cp, N, rank=cp_rank)
            if i % 5 == 4:
                invalidate(rng, mb, N)
            microbatches.append(mb)
        iterator = (iter([megatron_batch(mb, device) for mb in microbatches])
                    if tp_rank == 0 else None)
        for i, mb in enumerate(microbatches):
            result = thdc.megatron.get_batch_on_this_rank_for_sequence_packing(
                iterator, pg_collection=pg, config=config, **form)
            calls += 1
            rows = given_rows(mb, C, cp) if thdc.stages.data_keys(stage) else None
            expected = reference(mb, C, cp, N, rows_given=rows)
            expected["given_rows"] = given_rows(mb, C, cp)
            alive = (alive + [(result, expected, int(mb["num_seqs"][0]), i)])[-SLOTS:]
            for old, old_expected, n, j in alive:
                bad = check(old, old_expected, n, C, cp, N, stage, tp, tp_rank)
                if bad:
                    failures.append(f"{stage} {form}: microbatch {j} after {i}: {bad}")
            slot = thdc.megatron.SEQUENCE_PACKING.last
            shard = C // tp
            if scatter is not None:
                # megatron-core's own scatter, as GPTModel applies it to the
                # mask ([b, s] -> [s, b], split along s over the TP group).
                scattered = scatter(result[6].transpose(0, 1).contiguous(),
                                    group=pg.tp).transpose(0, 1)
            else:
                scattered = result[6][:, tp_rank * shard:(tp_rank + 1) * shard]
            if not torch.equal(slot.padding_mask_shard, scattered):
                failures.append(f"{stage}: the sequence-parallel shard (microbatch {i})")
            mine = slot.buffer.cpu()
            both = [torch.empty_like(mine) for _ in range(tp)]
            dist.all_gather(both, mine, group=pg.tp)
            if not torch.equal(both[0], both[1]):
                failures.append(f"{stage}: TP ranks differ (microbatch {i})")

    # Refusals, each naming what is wrong.
    def refused(call, text):
        try:
            call()
        except (ValueError, KeyError) as error:
            if text not in str(error):
                failures.append(f"refusal {text!r}: got {error}")
            return
        failures.append(f"not refused: {text!r}")

    if tp_rank == 1:
        refused(lambda: thdc.megatron.get_batch_on_this_rank_for_sequence_packing(
            iter([]), pg_collection=pg, config=config), "data_iterator must be None")
    no_capacity = SimpleNamespace(**dict(vars(config), thd_max_packed_sequences=None))
    refused(lambda: thdc.megatron.get_batch_on_this_rank_for_sequence_packing(
        None, pg_collection=pg, config=no_capacity), "config.thd_max_packed_sequences is not set")
    refused(lambda: thdc.megatron.get_batch_on_this_rank_for_sequence_packing(
        None, pg_collection=pg, config=config, dynamic_cp=True),
        "dynamic_cp=True: the DP x CP group")

    count = torch.tensor([len(failures)])
    dist.all_reduce(count)
    for failure in failures[:10]:
        print(f"rank {rank}: {failure}", flush=True)
    if rank == 0 and int(count) == 0:
        print(f"megatron ranks agree: tp {tp} x cp {cp}, {calls} calls per rank over "
              f"{len(FORMS)} stage forms, {SLOTS} slots; megatron-core's PackedSeqParams: "
              f"{thdc.megatron.USING_MEGATRON_CORE}, its scatter: {scatter is not None}",
              flush=True)
    dist.destroy_process_group()
    return 1 if int(count) else 0


if __name__ == "__main__":
    end_worker(main())
