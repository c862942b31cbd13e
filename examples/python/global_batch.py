#!/usr/bin/env python3
"""A global batch of variable-length samples, planned into microbatches on the
host and packed on the GPU by examples/pack_microbatch.mlir: one fused kernel
per microbatch, one CP rank per process, no host synchronisation in the
microbatch loop.

    torchrun --standalone --nproc-per-node 2 examples/python/global_batch.py --bundle DIR
    python3 examples/python/global_batch.py --bundle DIR          # one process, cp = 1

With --backend gloo the ranks exchange lengths through host memory, so that
several ranks can share one GPU (NCCL needs a GPU per rank): the loop and
each rank's outputs can then be checked on a one-GPU machine, though the
times are those of ranks contending for one device.

DIR is a bundle of examples/pack_microbatch.mlir written by `thdc` on a
machine with MLIR (the GPU host needs none), for cp = the number of
processes (dp = 1: the processes are one CP group), e.g.

    thdc examples/pack_microbatch.mlir --param C=4096 --param cp=2 --param N=64 \\
        --param P=1048576 --param S=512 -o DIR

Without --bundle, a build of thdc with the JIT compiles the pipeline here.

Every process
  1. draws the same global batch (one seed): a pool of samples on the device
     (token, label and loss-mask rows; each sample's offset and valid length);
  2. takes its share of the valid lengths (samples rank, rank + world, ...)
     and exchanges them with ONE all_gather, as the reference framework's
     scheduler does, so that every rank knows every length;
  3. plans the microbatches on the host with thdc.planner (at most N-1
     samples each: one of the bundle's N slots is kept for the dummy
     sequence) and uploads every microbatch's inputs (sample ids, num_seqs)
     to the device at once;
  4. runs the microbatch loop under torch.cuda.set_sync_debug_mode("error"):
     for each microbatch, one launch packs this rank's part into outputs
     allocated beforehand (for as many microbatches as S12 allows), on the
     current stream;
  5. compares every microbatch's outputs with thdc.reference.pack_microbatch
     for this rank, and times the loop (CUDA events, the median over several
     global batches) against the reference framework's eager PyTorch step
     (bench/eager.py: eager_pack_step), whose outputs are checked too.
Rank 0 prints "N passed, N failed" and a JSON line of the figures (--json
OUT writes it too); the exit code is 1 on any failure.

The functions above main() need only NumPy and thdc (the tests run them on
the CPU: test/python/test_planner.py).
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import thdc
import thdc.planner

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PIPELINE = os.path.join(ROOT, "examples", "pack_microbatch.mlir")

VOCAB = 50000  # token ids are below VOCAB
EOD = 50000  # the last label of every sample
IGNORE = -100  # the label of prompt tokens (loss mask 0.0)
POOLS = ("token_pool", "label_pool", "loss_mask_pool", "sample_offsets", "sample_lengths")
OUTPUTS = ("tokens", "labels", "position_ids", "loss_mask", "padding_mask",
           "cu_seqlens_padded", "cu_seqlens", "max_seqlen", "status")


#
# The global batch, the planning and the check (NumPy and thdc only)
#

def draw_global_batch(seed, num_samples, C, cp, P, S):
    """The global batch every rank draws from the same seed, in the pipeline's
    static shapes: valid lengths from 1 to C*cp (mostly short, a few long,
    as in fine-tuning data) laid out one after another in a pool of P rows;
    as many samples as fit the pool's P rows and S slots (unused slots have
    length 0). Labels are the next tokens (EOD at the end of a sample) with
    a prompt of up to half the sample ignored (label -100, loss mask 0.0)."""
    rng = np.random.default_rng(seed)
    seq_length = C * cp
    lengths = rng.lognormal(np.log(seq_length / 8), 1.0, size=num_samples)
    lengths = np.clip(lengths, 1, seq_length).astype(np.int64)
    lengths = lengths[np.cumsum(lengths) <= P][:S]
    n, total = len(lengths), int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths

    tokens = rng.integers(1, VOCAB, size=total, dtype=np.int64)
    labels = np.append(tokens[1:], EOD)
    labels[offsets + lengths - 1] = EOD
    position = np.arange(total) - np.repeat(offsets, lengths)
    prompt = (lengths * rng.uniform(0, 0.5, size=n)).astype(np.int64)
    in_prompt = position < np.repeat(prompt, lengths)
    labels[in_prompt] = IGNORE

    batch = {
        "token_pool": np.zeros(P, np.int64),
        "label_pool": np.zeros(P, np.int64),
        "loss_mask_pool": np.zeros(P, np.float32),
        "sample_offsets": np.zeros(S, np.int32),
        "sample_lengths": np.zeros(S, np.int32),
        "num_samples": n,
    }
    batch["token_pool"][:total] = tokens
    batch["label_pool"][:total] = labels
    batch["loss_mask_pool"][:total] = np.where(in_prompt, 0.0, 1.0)
    batch["sample_offsets"][:n] = offsets
    batch["sample_lengths"][:n] = lengths
    return batch


def local_share(lengths, rank, world):
    """The valid lengths this rank's data loader sees: samples rank,
    rank + world, ..."""
    return np.asarray(lengths[rank::world], np.int32)


def share_size(num_samples, world):
    """Entries per rank in the all_gather (every share padded to one size)."""
    return -(-num_samples // world)


def interleave_shares(gathered, num_samples, world):
    """The global lengths (in sample order) from the all_gather of every
    rank's share, each padded to share_size entries."""
    shares = np.asarray(gathered, np.int32).reshape(world, -1)
    lengths = np.empty(num_samples, np.int32)
    for rank in range(world):
        lengths[rank::world] = shares[rank, :len(range(rank, num_samples, world))]
    return lengths


def plan_microbatches(valid_lengths, C, cp, N, cp_rank, algorithm="next_fit"):
    """S1 and S3 on the host: every sample's padded length, the plan (packs of
    at most C*cp padded tokens and N-1 samples), and this rank's inputs of
    pack_microbatch for every microbatch: sample_ids [microbatches, N-1] and
    num_seqs [microbatches] (int32). dp = 1, so the DP x CP rank is cp_rank."""
    padded = thdc.planner.align_lengths(valid_lengths, cp)
    plan = thdc.planner.plan(padded, C, cp, max_packed_sequences=N, alignment_set=True,
                             dummy_tail=True, algorithm=algorithm)
    sample_ids, num_seqs = thdc.planner.microbatch_inputs(plan, cp_rank, N)
    return plan, sample_ids, num_seqs


def reference_outputs(batch, sample_ids, num_seqs, cp_rank, C, cp, N):
    """thdc.reference.pack_microbatch of every microbatch for this rank."""
    pools = [batch[name] for name in POOLS]
    return [thdc.reference.pack_microbatch(*pools, sample_ids[m], int(num_seqs[m]), cp_rank,
                                           C, cp, N)
            for m in range(len(num_seqs))]


def differences(outputs, expected):
    """The names of the outputs (a mapping to arrays on the host) that differ
    from the reference's; floats are compared exactly."""
    bad = []
    for name in OUTPUTS:
        got = np.asarray(outputs[name]).reshape(-1)
        want = np.asarray(expected[name]).reshape(-1)
        if name == "padding_mask":
            got, want = got.astype(bool), want.astype(bool)
        if got.shape != want.shape or not np.array_equal(got, want.astype(got.dtype)):
            bad.append(name)
    return bad


#
# On the GPU
#

def load_kernel(args, world):
    """The bundle's kernel, or the pipeline compiled here (JIT) for cp =
    world; its parameters C, cp, N, P, S."""
    if args.bundle:
        kernel = thdc.load(args.bundle, backend="cuda")
    elif thdc.has_jit:
        kernel = thdc.compile(PIPELINE, {"C": args.C, "cp": world, "N": args.N, "P": args.P,
                                         "S": args.S}, backend="cuda")
    else:
        raise SystemExit("--bundle DIR is needed: this build of thdc has no JIT")
    params = kernel.params
    if params.get("cp") != world:
        raise SystemExit(f"the bundle is for cp = {params.get('cp')}, but {world} processes "
                         f"run (dp = 1: one process per CP rank)")
    return kernel, params


def collective_device(device):
    """Where the process group's collectives take their tensors: the GPU
    with NCCL, host memory with gloo."""
    import torch
    import torch.distributed as dist

    distributed = dist.is_available() and dist.is_initialized()
    return device if not distributed or dist.get_backend() == "nccl" else torch.device("cpu")


def exchange_lengths(local, num_samples, world):
    """ONE all_gather of every rank's valid lengths, copied to the host (a
    synchronisation, as in the reference framework's scheduler)."""
    import torch
    import torch.distributed as dist

    if world == 1:
        return local.cpu().numpy()
    device = collective_device(local.device)
    share = torch.full((share_size(num_samples, world),), -1, dtype=torch.int32, device=device)
    share[:local.numel()] = local
    gathered = torch.empty(world * share.numel(), dtype=torch.int32, device=device)
    dist.all_gather_into_tensor(gathered, share)
    return interleave_shares(gathered.cpu().numpy(), num_samples, world)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", help="pack_microbatch bundle (else the JIT compiles it)")
    parser.add_argument("--C", type=int, default=4096, help="with the JIT: tokens per CP rank")
    parser.add_argument("--N", type=int, default=64, help="with the JIT: sequence capacity")
    parser.add_argument("--P", type=int, default=1 << 20, help="with the JIT: pool rows")
    parser.add_argument("--S", type=int, default=512, help="with the JIT: pool samples")
    parser.add_argument("--samples", type=int, default=256, help="samples per global batch")
    parser.add_argument("--global-batches", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=1,
                        help="global batches run and checked but not timed")
    parser.add_argument("--algorithm", choices=("next_fit", "balanced"), default="next_fit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="OUT", help="also write the figures here")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl",
                        help="under torchrun: the process group's backend (gloo: ranks may "
                             "share a GPU)")
    args = parser.parse_args(argv)
    if args.global_batches < 1:
        parser.error("--global-batches must be >= 1")

    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import eager  # bench/eager.py: the reference framework's step in PyTorch

    distributed = "LOCAL_RANK" in os.environ  # started by torchrun
    if distributed:
        local_rank = int(os.environ["LOCAL_RANK"])
        if args.backend == "nccl" and local_rank >= torch.cuda.device_count():
            raise SystemExit(f"local rank {local_rank} has no GPU of its own "
                             f"({torch.cuda.device_count()} here); NCCL needs one per rank "
                             f"(--backend gloo lets ranks share one)")
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        dist.init_process_group(args.backend)
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    device = torch.device("cuda", torch.cuda.current_device())
    kernel, params = load_kernel(args, world)
    C, cp, N, P, S = (params[name] for name in ("C", "cp", "N", "P", "S"))
    kernel.prepare()  # load the module now, not in the first timed launch

    # Static buffers: the pool, the per-microbatch inputs and the outputs, for
    # as many microbatches as a global batch can need (S12: samples up to
    # C*cp tokens long).
    slots = thdc.planner.max_microbatches(args.samples, C * cp, C, cp, max_packed_sequences=N)
    pools = {name: torch.empty(size, dtype=dtype, device=device) for name, size, dtype in (
        ("token_pool", P, torch.int64), ("label_pool", P, torch.int64),
        ("loss_mask_pool", P, torch.float32), ("sample_offsets", S, torch.int32),
        ("sample_lengths", S, torch.int32))}
    sample_ids_dev = torch.zeros(slots, N - 1, dtype=torch.int32, device=device)
    num_seqs_dev = torch.zeros(slots, dtype=torch.int32, device=device)
    cp_rank_dev = torch.tensor([rank], dtype=torch.int32, device=device)
    outputs = {a.name: torch.empty((slots,) + a.shape, dtype=getattr(torch, a.dtype), device=device)
               for a in thdc.signature(kernel) if a.direction == "output"}

    counts = {"passed": 0, "failed": 0, "eager_passed": 0, "eager_failed": 0}
    timings = []  # (microbatches, thdc ms, eager ms, planning ms) per timed global batch
    for index in range(args.warmup + args.global_batches):
        batch = draw_global_batch(args.seed + index, args.samples, C, cp, P, S)
        n = batch["num_samples"]
        for name, pool in pools.items():
            pool.copy_(torch.from_numpy(batch[name]))
        local = torch.from_numpy(local_share(batch["sample_lengths"][:n], rank, world)).to(device)
        torch.cuda.synchronize()

        # Planning: one all_gather, the plan on the host, one upload.
        planning_start = time.perf_counter()
        lengths = exchange_lengths(local, n, world)
        plan, sample_ids, num_seqs = plan_microbatches(lengths, C, cp, N, rank, args.algorithm)
        microbatches = plan.num_microbatches
        sample_ids_dev[:microbatches].copy_(torch.from_numpy(sample_ids))
        num_seqs_dev[:microbatches].copy_(torch.from_numpy(num_seqs))
        torch.cuda.synchronize()
        planning_ms = 1e3 * (time.perf_counter() - planning_start)

        # The microbatch loop: one launch each, into the static outputs.
        steps = [(sample_ids_dev[m], num_seqs_dev[m:m + 1],
                  {name: out[m] for name, out in outputs.items()}) for m in range(microbatches)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.set_sync_debug_mode("error")
        try:
            start.record()
            for ids, count, out in steps:
                kernel(token_pool=pools["token_pool"], label_pool=pools["label_pool"],
                       loss_mask_pool=pools["loss_mask_pool"],
                       sample_offsets=pools["sample_offsets"],
                       sample_lengths=pools["sample_lengths"], sample_ids=ids, num_seqs=count,
                       cp_rank=cp_rank_dev, out=out)
            end.record()
        finally:
            torch.cuda.set_sync_debug_mode("default")

        # The same microbatches the reference framework's way (host syncs).
        eager_start = torch.cuda.Event(enable_timing=True)
        eager_end = torch.cuda.Event(enable_timing=True)
        eager_start.record()
        eager_outputs = [eager.eager_pack_step(pools, batch["sample_offsets"],
                                               batch["sample_lengths"],
                                               sample_ids[m, :num_seqs[m]], C, cp, N, rank)
                         for m in range(microbatches)]
        eager_end.record()
        torch.cuda.synchronize()
        if index >= args.warmup:
            timings.append((microbatches, start.elapsed_time(end),
                            eager_start.elapsed_time(eager_end), planning_ms))

        # Every microbatch against the reference, for this rank.
        expected = reference_outputs(batch, sample_ids, num_seqs, rank, C, cp, N)
        ours = {name: out[:microbatches].cpu().numpy() for name, out in outputs.items()}
        for m in range(microbatches):
            bad = differences({name: value[m] for name, value in ours.items()}, expected[m])
            bad_eager = differences({name: value.cpu().numpy()
                                     for name, value in eager_outputs[m].items()}, expected[m])
            counts["failed" if bad else "passed"] += 1
            counts["eager_failed" if bad_eager else "eager_passed"] += 1
            for who, names in (("thdc", bad), ("eager", bad_eager)):
                if names:
                    print(f"rank {rank} global batch {index} microbatch {m}: {who} differs "
                          f"from the reference in {names}", flush=True)

    # Totals over the ranks; each global batch's time is its slowest rank's.
    reduce_on = collective_device(device)
    totals = torch.tensor([counts[k] for k in counts], dtype=torch.int64, device=reduce_on)
    times = torch.tensor([t[1:3] for t in timings], dtype=torch.float64, device=reduce_on)
    if distributed:
        dist.all_reduce(totals)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
    counts = dict(zip(counts, totals.tolist()))
    if rank == 0:
        thdc_ms = statistics.median(times[:, 0].tolist())
        eager_ms = statistics.median(times[:, 1].tolist())
        figures = {
            "example": "global_batch", "device": torch.cuda.get_device_name(), "world": world,
            "gpus": torch.cuda.device_count() if not distributed else
            min(world, torch.cuda.device_count()),
            "backend": args.backend if distributed else None,
            "C": C, "cp": cp, "N": N, "P": P, "S": S, "samples": args.samples,
            "algorithm": args.algorithm, "microbatch_slots": slots,
            "microbatches": [t[0] for t in timings], "global_batches_timed": len(timings),
            "thdc_ms_per_global_batch": thdc_ms, "eager_ms_per_global_batch": eager_ms,
            "speedup": eager_ms / thdc_ms, "planning_ms": statistics.median(t[3] for t in timings),
            **counts,
        }
        print(f"global batch on {figures['gpus']} {figures['device']}, {world} rank(s)"
              f"{' over ' + args.backend if distributed else ''} (C={C}, cp={cp}, N={N}): "
              f"{statistics.median(figures['microbatches'])} microbatches, thdc "
              f"{thdc_ms:.3f} ms, eager PyTorch {eager_ms:.3f} ms per global batch "
              f"(median of {len(timings)})")
        print(f"{counts['passed']} passed, {counts['failed']} failed "
              f"(eager: {counts['eager_passed']} passed, {counts['eager_failed']} failed)")
        print(json.dumps(figures), flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump(figures, out, indent=1)
    if distributed:
        dist.destroy_process_group()
    return 1 if counts["failed"] or counts["eager_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
