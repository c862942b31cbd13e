#!/usr/bin/env python3
"""Deterministic THD microbatches for the benchmark (Python twin of bench/inputs.h).

Both files implement the algorithm specified once, in bench/README.md, section
"The microbatch generator", and produce bit-identical data for identical
arguments. Check it with

    python3 bench/inputs.py --digests        # same lines as
    build/handwritten_check --digests

A microbatch is what megatron_graph_step (examples/megatron_graph_step.mlir)
takes: C*cp token rows and N+1 cu_seqlens entries, of which only the first
cu_seqlens_padded[num_seqs] rows and num_seqs+1 entries are meaningful; the
rest is deterministic garbage.

The per-row work uses NumPy when it is installed (fast); without it a
pure-Python path computes the same values (slow for 1M-token microbatches).

Command line:
    inputs.py --digests [--seed S] [--small] [--backend numpy|python]
    inputs.py --write-input FILE --config C,cp,N --mix long|short
              [--seed S] [--rank R]
The second form writes the pipeline's inputs as the JSON object that
`thd-run --input` reads (argument names mapping to flat arrays).
"""

import argparse
import dataclasses
import json
import sys

try:
    import numpy as np
except ImportError:  # the pure-Python path below needs nothing
    np = None

# The benchmark's configurations (C, cp, N); bench/inputs.h: kBenchConfigs.
CONFIGS = [
    (8192, 1, 64),
    (32768, 2, 64),
    (32768, 4, 128),
    (131072, 2, 256),
    (1048576, 2, 1024),
]
MIXES = ("long", "short")

VOCAB = 50000  # real token ids are below VOCAB
EOD = 50000  # end-of-document id
PAD = 50001  # alignment pad id (nonzero, so that sanitising is visible)
IGNORE = -100  # label of prompt positions

# Random streams (README: "Streams").
STREAM_LENGTHS = 0
STREAM_TOKENS = 1
STREAM_GARBAGE_TOKENS = 2
STREAM_GARBAGE_LABELS = 3
STREAM_GARBAGE_POSITION_IDS = 4
STREAM_GARBAGE_LOSS_MASK = 5
STREAM_GARBAGE_CU_SEQLENS = 6
STREAM_GARBAGE_CU_SEQLENS_PADDED = 7

GAMMA = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1


def mix64(z):
    """splitmix64's output function on a Python int."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def draw(state, index):
    """Output number `index` (from 0) of splitmix64 started in `state`."""
    return mix64((state + (index + 1) * GAMMA) & MASK64)


def stream_key(seed, stream):
    """The starting state of `stream` for `seed`."""
    return draw(seed & MASK64, stream)


def _draw_np(state, index):
    """draw() on uint64 arrays (state: int or array, index: array)."""
    z = np.asarray(state, dtype=np.uint64) + (index + np.uint64(1)) * np.uint64(GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _signed(value, bits):
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


@dataclasses.dataclass
class Microbatch:
    """A microbatch in megatron_graph_step's static shapes.

    Arrays are NumPy arrays (int64 / float32 / int32) with the NumPy backend,
    Python lists otherwise.
    """

    C: int
    cp: int
    N: int
    mix: str
    seed: int
    num_seqs: int
    valid_lengths: list
    padded_lengths: list
    prompt_lengths: list
    tokens: object  # C*cp rows; rows past cu_seqlens_padded[n] are garbage
    labels: object
    position_ids: object
    loss_mask: object
    cu_seqlens: object  # N+1 entries; entries past n are garbage
    cu_seqlens_padded: object

    @property
    def packed_length(self):
        """T = cu_seqlens_padded[num_seqs]."""
        return int(self.cu_seqlens_padded[self.num_seqs])


def _lengths(C, cp, N, mix, seed):
    """n, v, p, q and the offsets (README: "Lengths")."""
    key = stream_key(seed, STREAM_LENGTHS)
    counter = [0]

    def next_draw():
        value = draw(key, counter[0])
        counter[0] += 1
        return value

    granularity = 2 * cp if cp > 1 else 1
    units = C * cp // granularity
    r0 = next_draw()
    n = 3 + r0 % 3 if mix == "long" else N - 1
    n = min(n, N - 1, units)
    fill_percent = 85 + next_draw() % 13
    budget = max(units * fill_percent // 100, n)
    weights = []
    for _ in range(n):
        r = next_draw()
        weights.append(32768 + r % 32768 if mix == "long" else 1 + r % 65536)
    weight_sum = sum(weights)
    padded = [(1 + (budget - n) * w // weight_sum) * granularity for w in weights]
    valid = [p - next_draw() % granularity for p in padded]
    prompt = [next_draw() % (v // 4 + 1) for v in valid]
    cu, cup = [0], [0]
    for v, p in zip(valid, padded):
        cu.append(cu[-1] + v)
        cup.append(cup[-1] + p)
    return n, valid, padded, prompt, cu, cup


def generate(C, cp, N, mix, seed, backend=None):
    """The microbatch of (C, cp, N, mix, seed) as bench/README.md specifies.

    backend: "numpy" (default when NumPy is installed) or "python".
    """
    if C < 1 or cp < 1 or N < 1:
        raise ValueError(f"needs C >= 1, cp >= 1 and N >= 1 (C={C}, cp={cp}, N={N})")
    if cp > 1 and C % 2:
        raise ValueError(f"C = {C} must be even when cp = {cp} > 1")
    if C * cp >= 1 << 31 or N >= (1 << 31) - 1:
        raise ValueError(f"C*cp = {C * cp} and N = {N} must fit int32")
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {MIXES}, got {mix!r}")
    if backend is None:
        backend = "numpy" if np is not None else "python"
    n, valid, padded, prompt, cu, cup = _lengths(C, cp, N, mix, seed)
    make = _rows_numpy if backend == "numpy" else _rows_python
    rows = make(C * cp, N, n, valid, padded, prompt, cu, cup, seed)
    return Microbatch(C, cp, N, mix, seed, n, valid, padded, prompt, *rows)


def _rows_python(rows, N, n, valid, padded, prompt, cu, cup, seed):
    token_key = stream_key(seed, STREAM_TOKENS)
    tokens, labels, position_ids, loss_mask = [], [], [], []
    for i in range(n):
        v, q = valid[i], prompt[i]
        for k in range(padded[i]):
            row = cup[i] + k
            if k + 1 < q:
                label = IGNORE
            elif k < v - 1:
                label = draw(token_key, row + 1) % VOCAB
            elif k == v - 1:
                label = EOD
            else:
                label = PAD
            tokens.append(draw(token_key, row) % VOCAB if k < v else EOD if k == v else PAD)
            labels.append(label)
            position_ids.append(k)
            loss_mask.append(1.0 if k < v and label != IGNORE else 0.0)
    keys = [stream_key(seed, s) for s in (STREAM_GARBAGE_TOKENS, STREAM_GARBAGE_LABELS,
                                          STREAM_GARBAGE_POSITION_IDS, STREAM_GARBAGE_LOSS_MASK)]
    for row in range(cup[n], rows):
        tokens.append(_signed(draw(keys[0], row), 64))
        labels.append(_signed(draw(keys[1], row), 64))
        position_ids.append(_signed(draw(keys[2], row), 64))
        loss_mask.append(float((draw(keys[3], row) >> 54) - 512))
    cu_full, cup_full = list(cu), list(cup)
    cu_key = stream_key(seed, STREAM_GARBAGE_CU_SEQLENS)
    cup_key = stream_key(seed, STREAM_GARBAGE_CU_SEQLENS_PADDED)
    for e in range(n + 1, N + 1):
        cu_full.append(_signed(draw(cu_key, e) & 0xFFFFFFFF, 32))
        cup_full.append(_signed(draw(cup_key, e) & 0xFFFFFFFF, 32))
    return tokens, labels, position_ids, loss_mask, cu_full, cup_full


def _rows_numpy(rows, N, n, valid, padded, prompt, cu, cup, seed):
    total = cup[n]
    token_index = np.arange(total + 1, dtype=np.uint64)
    token = (_draw_np(stream_key(seed, STREAM_TOKENS), token_index) % np.uint64(VOCAB)).astype(np.int64)
    seq = np.repeat(np.arange(n, dtype=np.int64), np.asarray(padded, dtype=np.int64))
    k = np.arange(total, dtype=np.int64) - np.asarray(cup[:n], dtype=np.int64)[seq]
    v = np.asarray(valid, dtype=np.int64)[seq]
    q = np.asarray(prompt, dtype=np.int64)[seq]
    packed_tokens = np.where(k < v, token[:total], np.where(k == v, EOD, PAD))
    packed_labels = np.where(k + 1 < q, IGNORE,
                             np.where(k < v - 1, token[1:total + 1],
                                      np.where(k == v - 1, EOD, PAD)))
    packed_loss = ((k < v) & (packed_labels != IGNORE)).astype(np.float32)

    garbage = np.arange(total, rows, dtype=np.uint64)

    def garbage_i64(stream):
        return _draw_np(stream_key(seed, stream), garbage).view(np.int64)

    garbage_loss = ((_draw_np(stream_key(seed, STREAM_GARBAGE_LOSS_MASK), garbage)
                     >> np.uint64(54)).astype(np.int64) - 512).astype(np.float32)
    tokens = np.concatenate([packed_tokens.astype(np.int64), garbage_i64(STREAM_GARBAGE_TOKENS)])
    labels = np.concatenate([packed_labels.astype(np.int64), garbage_i64(STREAM_GARBAGE_LABELS)])
    position_ids = np.concatenate([k, garbage_i64(STREAM_GARBAGE_POSITION_IDS)])
    loss_mask = np.concatenate([packed_loss, garbage_loss])

    entries = np.arange(n + 1, N + 1, dtype=np.uint64)

    def garbage_i32(stream):
        low = _draw_np(stream_key(seed, stream), entries) & np.uint64(0xFFFFFFFF)
        return low.astype(np.uint32).view(np.int32)

    cu_full = np.concatenate([np.asarray(cu, dtype=np.int32), garbage_i32(STREAM_GARBAGE_CU_SEQLENS)])
    cup_full = np.concatenate([np.asarray(cup, dtype=np.int32),
                               garbage_i32(STREAM_GARBAGE_CU_SEQLENS_PADDED)])
    return tokens, labels, position_ids, loss_mask, cu_full, cup_full


def digest(values, width):
    """Order-sensitive digest (README: "Digests") of an array of `width`-byte
    elements: sum mod 2^64 of draw(bits_i, i), bits_i the zero-extended bit
    pattern of element i."""
    if np is not None and isinstance(values, np.ndarray):
        bits = values.view(np.uint32 if width == 4 else np.uint64).astype(np.uint64)
        index = np.arange(len(bits), dtype=np.uint64)
        return int(np.sum(_draw_np(bits, index), dtype=np.uint64))
    import struct
    total = 0
    for i, value in enumerate(values):
        if isinstance(value, float):
            bits = struct.unpack("<I", struct.pack("<f", value))[0]
        else:
            bits = value & ((1 << (8 * width)) - 1)
        total = (total + draw(bits, i)) & MASK64
    return total


def digest_line(mb):
    """The line --digests prints (bench/inputs.h: digestLine)."""
    digests = [digest(mb.tokens, 8), digest(mb.labels, 8), digest(mb.position_ids, 8),
               digest(mb.loss_mask, 4), digest(mb.cu_seqlens, 4), digest(mb.cu_seqlens_padded, 4)]
    return (f"C={mb.C} cp={mb.cp} N={mb.N} mix={mb.mix} seed={mb.seed} n={mb.num_seqs} "
            f"T={mb.packed_length} " + " ".join(f"{d:016x}" for d in digests))


def _as_list(values):
    return values.tolist() if hasattr(values, "tolist") else list(values)


def pipeline_inputs(mb, rank):
    """megatron_graph_step's inputs as a dict of flat lists (thd-run --input)."""
    return {
        "tokens": _as_list(mb.tokens),
        "labels": _as_list(mb.labels),
        "position_ids": _as_list(mb.position_ids),
        "loss_mask": [float(x) for x in _as_list(mb.loss_mask)],
        "cu_seqlens": _as_list(mb.cu_seqlens),
        "cu_seqlens_padded": _as_list(mb.cu_seqlens_padded),
        "num_seqs": [mb.num_seqs],
        "cp_rank": [rank],
    }


def parse_config(text):
    """"C,cp,N" -> (C, cp, N)."""
    parts = text.split(",")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected C,cp,N, got {text!r}")
    return tuple(int(p) for p in parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digests", action="store_true",
                        help="print the digest line of every configuration and mix")
    parser.add_argument("--small", action="store_true",
                        help="with --digests: only configurations with C*cp <= 131072")
    parser.add_argument("--write-input", metavar="FILE",
                        help="write one microbatch's pipeline inputs as JSON")
    parser.add_argument("--config", type=parse_config, default=CONFIGS[0], metavar="C,cp,N")
    parser.add_argument("--mix", choices=MIXES, default="long")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--backend", choices=("numpy", "python"), default=None)
    args = parser.parse_args(argv)
    if args.backend == "numpy" and np is None:
        parser.error("--backend numpy needs NumPy")
    if args.digests:
        for C, cp, N in CONFIGS:
            if args.small and C * cp > 131072:
                continue
            for mix in MIXES:
                print(digest_line(generate(C, cp, N, mix, args.seed, args.backend)), flush=True)
        return 0
    if args.write_input:
        C, cp, N = args.config
        mb = generate(C, cp, N, args.mix, args.seed, args.backend)
        with open(args.write_input, "w") as out:
            json.dump(pipeline_inputs(mb, args.rank), out, separators=(",", ":"))
        print(f"wrote {args.write_input}: C={C} cp={cp} N={N} mix={args.mix} seed={args.seed} "
              f"rank={args.rank} n={mb.num_seqs} T={mb.packed_length}")
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
