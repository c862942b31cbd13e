#!/usr/bin/env python3
"""Host time per call of the drop-in's launch path for one tree of the
Python package (the folder holding thdc/, first on sys.path): `step(**batch)`
(GraphStep.__call__: the first slot's load_inputs, then run),
`slot.load_inputs(**batch); slot.run()`, and
`get_batch_on_this_rank_for_sequence_packing` through SequencePackingBatches
(tp = 1, the same batch dict on every next()). Each is the median of ROUNDS
rounds of CALLS calls queued back to back (host wall time / CALLS, then one
synchronize; the fastest round beside it), on bench/inputs.py's "long" microbatch for C=8192, cp=2, N=64,
rank 1. Prints one JSON line.

    python3 host_time.py TREE LABEL [cpu]   (run.sh alternates the two trees)

With "cpu" the same on a step on the CPU (its host code, C=512, N=16),
where no GPU is at hand: the Python layer's share is larger there.
"""
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace

tree, label = sys.argv[1], sys.argv[2]
on_cpu = sys.argv[3:] == ["cpu"]
sys.path.insert(0, tree)
bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(1, bench)

import torch  # noqa: E402

import eager  # noqa: E402
import inputs as thd_inputs  # noqa: E402
import thdc  # noqa: E402
import thdc.megatron  # noqa: E402

assert thdc.__file__.startswith(os.path.abspath(tree)), thdc.__file__
ROUNDS, CALLS = 7, 2000
C, cp, N, rank = (512, 2, 16, 1) if on_cpu else (8192, 2, 64, 1)
device = "cpu" if on_cpu else "cuda"
sync = (lambda: None) if on_cpu else torch.cuda.synchronize


class Group:
    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


batch = eager.framework_batch(thd_inputs.generate(C, cp, N, "long", 1), device)
config = SimpleNamespace(max_seqlen_per_dp_cp_rank=C, thd_max_packed_sequences=N,
                         pad_packed_seq_alignment="max", cuda_graph_impl="local")
pg = SimpleNamespace(tp=Group(0, 1), cp=Group(rank, cp), pp=Group(0, 1))
batches = thdc.megatron.SequencePackingBatches(convention="graph", device=device)


class Repeat:
    def __next__(self):
        return batch


loader = Repeat()
get_batch = lambda: batches(loader, pg_collection=pg, config=config)  # noqa: E731
get_batch()
step = thdc.megatron.GraphStep(C, N, cp, rank, convention="graph", device=device)
slot = step.slot(0)


def per_call(call):
    call()
    sync()
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        rounds.append(1e6 * (time.perf_counter() - start) / CALLS)
        sync()
    return statistics.median(rounds), min(rounds)


paths = {"step(**batch)": lambda: step(**batch),
         "load_inputs+run": lambda: (slot.load_inputs(**batch), slot.run()),
         "get_batch": get_batch}
results, fastest = {}, {}
for name, call in paths.items():
    results[name], fastest[name] = per_call(call)
print(json.dumps({"tree": label,
                  "device": "cpu" if on_cpu else torch.cuda.get_device_name(),
                  "torch": torch.__version__, "us_per_call": results,
                  "us_per_call_fastest_round": fastest}))
