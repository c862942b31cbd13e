"""The training data: a deterministic stream of synthetic documents, each
global batch planned into packed microbatches by thdc.planner.

Every document is an arithmetic progression over the vocabulary,
token[t] = (start + stride * t) mod vocab, with a random start and a stride
drawn from 1..MAX_STRIDE. The next token is learnable: a model that only
looks at the current token (a bigram) gets down to ln(MAX_STRIDE); one whose
attention reads the previous token of the same document infers the stride
and predicts the rest of the document exactly, so the loss keeps falling
below ln(MAX_STRIDE) only if attention stays inside documents and positions
are right. Lengths are long-tailed (log-normal) between MIN_LENGTH and the
microbatch capacity C.

Global batch `step` depends only on (seed, step), so every mode of a run
trains on the same documents in the same order.
"""
from dataclasses import dataclass

import numpy as np

import thdc.planner

MIN_LENGTH = 16
MAX_STRIDE = 8


@dataclass
class GlobalBatch:
    """One global batch on the host. The documents lie one after another in
    the pools (rows [offsets[i], offsets[i] + lengths[i]) are document i);
    labels are the next tokens, and every label counts in the loss."""

    tokens: np.ndarray  # int64 [total]
    labels: np.ndarray  # int64 [total]
    loss_mask: np.ndarray  # float32 [total]
    positions: np.ndarray  # int64 [total]: the row's position in its document
    offsets: np.ndarray  # int32 [documents]
    lengths: np.ndarray  # int32 [documents]

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())


def document_lengths(rng, count, C):
    """`count` long-tailed lengths in [MIN_LENGTH, C]: log-normal around C/16."""
    median = max(2 * MIN_LENGTH, C // 16)
    lengths = rng.lognormal(np.log(median), 1.0, size=count)
    return np.clip(lengths, MIN_LENGTH, C).astype(np.int32)


def global_batch(seed, step, documents, C, vocab):
    """Global batch number `step` of the stream: `documents` documents."""
    rng = np.random.default_rng([seed, step])
    lengths = document_lengths(rng, documents, C)
    offsets = (np.cumsum(lengths) - lengths).astype(np.int32)
    total = int(lengths.sum())
    positions = np.arange(total, dtype=np.int64) - np.repeat(offsets, lengths)
    start = np.repeat(rng.integers(0, vocab, size=documents), lengths)
    stride = np.repeat(rng.integers(1, MAX_STRIDE + 1, size=documents), lengths)
    tokens = (start + stride * positions) % vocab
    labels = (start + stride * (positions + 1)) % vocab
    return GlobalBatch(tokens=tokens.astype(np.int64), labels=labels.astype(np.int64),
                       loss_mask=np.ones(total, np.float32), positions=positions,
                       offsets=offsets, lengths=lengths)


@dataclass
class MicrobatchPlan:
    """How a global batch is cut into microbatches (cp = 1, so the aligned
    lengths are the lengths). For microbatch m: its documents sample_ids[m,
    :num_seqs[m]] in pack order; the pool rows it concatenates,
    rows[row_starts[m]:row_starts[m + 1]]; its cu_seqlens, cu[m, :num_seqs[m]
    + 1]."""

    sample_ids: np.ndarray  # int32 [M, N-1]
    num_seqs: np.ndarray  # int32 [M]
    rows: np.ndarray  # int64 [total]
    row_starts: np.ndarray  # int64 [M + 1]
    cu: np.ndarray  # int32 [M, N+1]
    max_lengths: np.ndarray  # int64 [M]: the longest document of each microbatch
    rungs: np.ndarray = None  # int32 [M]: each microbatch's rung of a ladder, or None

    @property
    def num_microbatches(self) -> int:
        return len(self.num_seqs)

    def documents(self, m):
        return self.sample_ids[m, :self.num_seqs[m]]

    def num_rows(self, m) -> int:
        return int(self.row_starts[m + 1] - self.row_starts[m])


def plan_microbatches(batch: GlobalBatch, C, N, algorithm="next_fit", ladder=None):
    """The reference framework's scheduler through thdc.planner: packs of at
    most C tokens and N-1 documents (the last slot is the dummy sequence's),
    and where each microbatch's rows come from in the pools. ladder:
    (capacities, sequence_capacities) of a capacity ladder whose top rung is
    (C, N): each microbatch's rung is recorded (thdc.planner.assign_rungs);
    algorithm "ladder" plans over it (thdc.planner.ladder_plan: next-fit or
    balanced, whichever pads fewer rows at the rungs)."""
    padded = thdc.planner.align_lengths(batch.lengths, 1)
    rungs = None
    if algorithm == "ladder":
        assert ladder is not None, "the ladder algorithm needs a ladder"
        planned = thdc.planner.ladder_plan(padded, ladder[0], 1, max_packed_sequences=N,
                                           sequence_capacities=ladder[1])
        plan, rungs = planned.plan, planned.pack_rungs
    else:
        plan = thdc.planner.plan(padded, C, 1, max_packed_sequences=N, algorithm=algorithm)
        if ladder is not None:
            rungs = thdc.planner.assign_rungs(plan, padded, ladder[0], max_packed_sequences=N,
                                              sequence_capacities=ladder[1]).pack_rungs
    sample_ids, num_seqs = thdc.planner.microbatch_inputs(plan, 0, N)
    M = len(num_seqs)
    cu = np.zeros((M, N + 1), np.int32)
    rows, row_starts = [], [0]
    for m in range(M):
        ids = sample_ids[m, :num_seqs[m]]
        lengths = batch.lengths[ids]
        cu[m, 1:len(ids) + 1] = np.cumsum(lengths)
        starts = np.repeat(batch.offsets[ids] - (np.cumsum(lengths) - lengths), lengths)
        rows.append(np.arange(int(lengths.sum()), dtype=np.int64) + starts)
        row_starts.append(row_starts[-1] + int(lengths.sum()))
    max_lengths = np.array([int(batch.lengths[sample_ids[m, :num_seqs[m]]].max())
                            for m in range(M)], np.int64)
    return MicrobatchPlan(sample_ids=sample_ids, num_seqs=num_seqs,
                          rows=np.concatenate(rows), row_starts=np.asarray(row_starts),
                          cu=cu, max_lengths=max_lengths,
                          rungs=None if rungs is None else np.asarray(rungs, np.int32))


def sample_lengths(seed, documents, C, count=20):
    """The padded lengths of the stream's first `count` global batches: what
    a run knows before it starts, for thdc.planner.advise."""
    rng_batches = [document_lengths(np.random.default_rng([seed, step]), documents, C)
                   for step in range(count)]
    return [thdc.planner.align_lengths(b, 1) for b in rng_batches]


def max_microbatches(documents, C, N):
    """The planner's bound on the microbatches of a global batch (S12): the
    graph slots to capture."""
    return thdc.planner.max_microbatches(documents, C, C, 1, max_packed_sequences=N)
