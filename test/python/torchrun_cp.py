"""Context parallelism across processes: run with
    torchrun --nproc-per-node 2 test/python/torchrun_cp.py --bundle DIR
Each process takes its GPU (torch.cuda.set_device(local_rank)), draws the
same random microbatches as the others (a seed broadcast over NCCL), and
runs its CP rank's THD step through thdc.megatron.GraphStep, eagerly and as
a replayed CUDA graph; each rank's outputs are compared with the reference
for that rank, and the failures are summed over the ranks with an
all-reduce. Rank 0 prints 'N passed, N failed'; the exit code is 1 on any
failure."""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import thdc  # noqa: E402
import thdc.megatron  # noqa: E402
from microbatches import (mismatches, random_microbatch, reference,  # noqa: E402
                          step_argument_parser)


def main():
    args = step_argument_parser(microbatches=200).parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, cp = dist.get_rank(), dist.get_world_size()

    seed = torch.tensor([np.random.SeedSequence().entropy % (1 << 62)], device="cuda")
    dist.broadcast(seed, src=0)
    rng = np.random.default_rng(int(seed.item()))

    step = thdc.megatron.GraphStep(args.C, args.N, cp, rank, bundle=args.bundle)
    assert step.kernel.device_name and torch.cuda.current_device() == local_rank
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.run()

    passed = failed = 0
    for trial in range(args.microbatches):
        mb = random_microbatch(rng, args.C, cp, args.N, rank=rank)
        n = int(mb["num_seqs"][0])
        rows = int(mb["cu_seqlens_padded"][n])
        step.load_inputs(
            tokens=torch.from_numpy(mb["tokens"][:rows]).cuda().view(1, -1),
            labels=torch.from_numpy(mb["labels"][:rows]).cuda().view(1, -1),
            loss_mask=torch.from_numpy(mb["loss_mask"][:rows]).cuda().view(1, -1),
            position_ids=torch.from_numpy(mb["position_ids"][:rows]).cuda().view(1, -1),
            cu_seqlens=torch.from_numpy(mb["cu_seqlens"][: n + 1]).cuda(),
            cu_seqlens_padded=torch.from_numpy(mb["cu_seqlens_padded"][: n + 1]).cuda())
        if trial % 2:
            graph.replay()
        else:
            step.run()
        got = {k: v.cpu().numpy() for k, v in step.outputs._asdict().items()}
        bad = mismatches(got, reference(mb, args.C, cp, args.N))
        if bad:
            failed += 1
            print(f"rank {rank} microbatch {trial}: {bad} differ", flush=True)
        else:
            passed += 1
    assert torch.cuda.current_device() == local_rank

    totals = torch.tensor([passed, failed], device="cuda")
    dist.all_reduce(totals)
    if rank == 0:
        print(f"torchrun: cp={cp}, {args.microbatches} microbatches per rank on "
              f"{torch.cuda.get_device_name()} x{cp}")
        print(f"{int(totals[0])} passed, {int(totals[1])} failed")
    dist.destroy_process_group()
    return 1 if int(totals[1]) else 0


if __name__ == "__main__":
    sys.exit(main())
