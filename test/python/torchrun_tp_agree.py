"""TP ranks whose steps differ, over a real collective: run with
    torchrun --standalone --nproc-per-node 2 test/python/torchrun_tp_agree.py
Two TP ranks on the CPU (gloo). The slot's buffer has the size of the step
that made it, and a broadcast of buffers of different sizes aborts a gloo
receiver (gloo::EnforceNotMet, SIGABRT; with NCCL it is undefined), so a
step's first broadcast on a group agrees on the steps first. In turn:
- rank 1 builds a smaller C than rank 0 (a buffer smaller than the
  sender's): every rank's broadcast raises ValueError naming C (and the
  buffer's size), none reaches the broadcast itself;
- rank 1 builds another capacity ladder: ValueError naming the rungs;
- both build the same step: the broadcasts send rank 0's outputs, equal on
  both ranks, and only the first of three agrees (one all_gather).
Each rank prints what it saw; rank 0 prints 'tp agreement checked' and the
exit code is 0 when every rank saw what it should, else 1."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import thdc.megatron  # noqa: E402
from microbatches import end_worker  # noqa: E402


def step(rank, C=64, **kwargs):
    return thdc.megatron.GraphStep(C, 9, device="cpu", tp=2, tp_rank=rank, **kwargs)


def load(step):
    rows = torch.arange(1, 53).view(1, -1)
    step.load_inputs(tokens=rows, labels=rows, position_ids=rows, loss_mask=torch.ones(1, 52),
                     cu_seqlens=torch.tensor([0, 20, 46], dtype=torch.int32),
                     cu_seqlens_padded=torch.tensor([0, 24, 52], dtype=torch.int32))


def refused(made, pattern):
    """Whether the step's first broadcast raises ValueError matching pattern
    (a substring) on this rank; what it saw otherwise."""
    if dist.get_rank() == 0:
        load(made)
        made.run()
    try:
        made.broadcast(src=0)
    except ValueError as error:
        print(f"rank {dist.get_rank()}: ValueError: {error}", flush=True)
        return None if pattern in str(error) else f"the message lacks {pattern!r}: {error}"
    return "the broadcast of different steps was not refused"


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    failures = []
    # Rank 1's buffer smaller than the sender's: what gloo aborts on.
    for mine, pattern in ((dict(C=64 if rank else 72), "rank 1 built another step than the "
                                                       "sender, rank 0: C = 64 (rank 0: 72), "
                                                       "size = "),
                          (dict(capacities=[32, 64], sequence_capacities=[5, 9]) if rank
                           else {}, "rank 0: other rungs (capacities")):
        failure = refused(step(rank, **mine), pattern)
        if failure:
            failures.append(failure)
    # The same step on both ranks: agreed once, then the broadcast alone.
    gathers = []
    all_gather = dist.all_gather
    dist.all_gather = lambda *args, **kwargs: gathers.append(1) or all_gather(*args, **kwargs)
    same = step(rank)
    for _ in range(3):
        if rank == 0:
            load(same)
            same.run()
        same.broadcast(src=0)
    dist.all_gather = all_gather
    buffers = [torch.empty_like(same.buffer) for _ in range(2)]
    dist.all_gather(buffers, same.buffer)
    if not torch.equal(buffers[0], buffers[1]) or int(same.status[0]) != 0:
        failures.append("the same steps' broadcast differs or is flagged")
    if same.batch["loss_mask"].sum() != 46:
        failures.append("the receiver lacks rank 0's microbatch")
    if len(gathers) != 1:
        failures.append(f"{len(gathers)} agreements for three broadcasts of one step")
    count = torch.tensor([len(failures)])
    dist.all_reduce(count)
    for failure in failures:
        print(f"rank {rank}: {failure}", flush=True)
    if rank == 0 and int(count) == 0:
        print("tp agreement checked", flush=True)
    dist.destroy_process_group()
    return 1 if int(count) else 0


if __name__ == "__main__":
    end_worker(main())
