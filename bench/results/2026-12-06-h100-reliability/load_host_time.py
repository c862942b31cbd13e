"""Host time per call of the microbatch load, on the CPU (a step on CPU
tensors, its host gather): InputGather.segments (the checks and the plan,
nothing copied) and StepSlot.load_inputs (the whole load), median of 7
repeats of 2000 calls."""
import statistics, sys, time
import torch, thdc, thdc.megatron
sys.path.insert(0, "/work/main/test/python")
from microbatches import random_microbatch, step_inputs
import numpy as np
C, N, cp = 4096, 64, 2
step = thdc.megatron.GraphStep(C, N, cp, 1, device="cpu", cache_dir="/tmp/hb-cache")
rng = np.random.default_rng(0)
inputs = step_inputs(random_microbatch(rng, C, cp, N, rank=1), C, cp, device="cpu")
loader = step.slot(0)._loader
args = [inputs.get(k) for k in ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens",
                                "cu_seqlens_padded")] + [inputs.get("num_seqs")]
def per_call(f, n=2000):
    runs = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            f()
        runs.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(runs)
print(f"{sys.argv[1]}: segments {per_call(lambda: loader.fast.segments(*args)):.2f} us, "
      f"load_inputs {per_call(lambda: step.load_inputs(**inputs)):.2f} us")
