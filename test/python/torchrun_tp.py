"""Tensor parallelism across processes: run with
    torchrun --standalone --nproc-per-node 2 test/python/torchrun_tp.py [--bundle DIR]
        [--device cpu]
Two TP ranks of one CP rank (the world is the TP group, gloo, so the ranks
may share one GPU, or run on the CPU with --device cpu). Each draws the
same random microbatches (a seed broadcast from rank 0) and checks both
recipes of docs/megatron.md:
- replicate: every rank runs thdc.megatron.GraphStep on identical inputs;
- broadcast: rank 0 runs it, `slot.broadcast()` sends its outputs (one
  buffer) and the other rank, which loaded nothing, receives them.
Every output is compared across the ranks (gathered over gloo) and with
the reference, and the sequence-parallel shard of the padding mask with the
rank's part of the full mask. Rank 0 prints 'tp ranks agree: N microbatches';
the exit code is 1 on any failure."""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
from microbatches import (end_worker, mismatches, random_microbatch, reference,  # noqa: E402
                          step_argument_parser, step_inputs)


def gathered_outputs(step):
    """Every rank's output buffer, on the host."""
    mine = step.buffer.cpu()
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    return everyone


def main():
    parser = step_argument_parser(microbatches=50)
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="the steps' device (cpu: the host code)")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, tp = dist.get_rank(), dist.get_world_size()
    on_cpu = args.device == "cpu"
    if not on_cpu:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    seed = torch.tensor([np.random.SeedSequence().entropy % (1 << 62)])
    dist.broadcast(seed, src=0)
    rng = np.random.default_rng(int(seed.item()))

    C, cp, N = args.C, args.cp, args.N
    cp_rank = 1 % cp
    make = lambda: thdc.megatron.GraphStep(C, N, cp, cp_rank, tp=tp, tp_rank=rank,
                                           sequence_parallel=True, bundle=args.bundle,
                                           device="cpu" if on_cpu else None)
    replicated, broadcast = make(), make()
    failures = []
    for trial in range(args.microbatches):
        mb = random_microbatch(rng, C, cp, N, rank=cp_rank)
        inputs = step_inputs(mb, C, cp, device=args.device)
        replicated(**inputs)
        if rank == 0:
            broadcast(**inputs)
        broadcast.broadcast(src=0)
        if not on_cpu:
            torch.cuda.synchronize()
        expected = reference(mb, C, cp, N)
        for name, step in (("replicate", replicated), ("broadcast", broadcast)):
            buffers = gathered_outputs(step)
            if any(not torch.equal(b, buffers[0]) for b in buffers):
                failures.append(f"{name}: ranks differ (trial {trial})")
            got = {k: v.cpu().numpy() for k, v in step.outputs._asdict().items()}
            bad = mismatches(got, expected)
            if bad:
                failures.append(f"{name}: {bad} differ from the reference (trial {trial})")
            shard = C // tp
            if not torch.equal(step.padding_mask_shard,
                               step.padding_mask_full[:, rank * shard:(rank + 1) * shard]):
                failures.append(f"{name}: the sequence-parallel shard (trial {trial})")
    count = torch.tensor([len(failures)])
    dist.all_reduce(count)
    for failure in failures[:10]:
        print(f"rank {rank}: {failure}", flush=True)
    if rank == 0 and int(count) == 0:
        print(f"tp ranks agree: {args.microbatches} microbatches, both recipes", flush=True)
    dist.destroy_process_group()
    return 1 if int(count) else 0


if __name__ == "__main__":
    end_worker(main())
