"""Iteration shapes for whole-iteration CUDA graphs (thdc.megatron.IterationGraphs):
which shape holds which, and the few shapes worth capturing for a stream of
iterations, from the host's plan alone. thdc.planner gives choose_shapes."""
from __future__ import annotations

import numbers
import operator
from typing import Dict, Iterable, List, Optional, Sequence, Tuple


def _extra_rows(rungs: Sequence[int], larger: Sequence[int],
                capacities: Sequence[int]) -> Optional[int]:
    """The rows the rungs `larger` add to `rungs` (both in load order) when
    they hold them, else None: the one rule of which shape holds which
    (the module's docstring)."""
    if len(rungs) != len(larger) or any(big < small for small, big in zip(rungs, larger)):
        return None
    return sum(capacities[big] - capacities[small] for small, big in zip(rungs, larger))


def choose_shapes(rung_lists: Iterable[Sequence[int]], capacities: Sequence[int],
                  max_graphs: int) -> List[Tuple[int, ...]]:
    """At most `max_graphs` iteration shapes to capture for a stream of
    iterations (each item the rung indices of one iteration's microbatches,
    from the plans of the coming iterations), chosen so that every iteration
    of the stream runs one that holds its own (IterationGraphs' rule: same
    microbatch count, each rung in load order at least its own) at few padded
    rows, `capacities` being the ladder's rows (GraphStep.capacities). Pass
    the result as IterationGraphs(shapes=...).

    Where the budget holds every distinct shape of the stream, those (the
    most frequent first): no row is padded. Else greedy: first, for each
    microbatch count (the most frequent first), the shape that holds all of
    that count (its rungs the largest met in each place); then, while the
    budget lasts, the stream's shape that saves the most rows over the
    stream, until none saves any. A shape of a count left without a graph (a
    budget under the number of counts) is not held by any, and runs as
    IterationGraphs' budget says. Shapes are rung tuples in load order
    (largest first); the result is in the order chosen. Work: quadratic in
    the number of distinct shapes, in NumPy."""
    import numpy as np

    capacities = _check_capacities(capacities)
    if type(max_graphs) is not int or max_graphs < 0:
        raise ValueError(f"choose_shapes: max_graphs must be an int >= 0; got {max_graphs!r}")
    counts: Dict[Tuple[int, ...], int] = {}
    for rungs in rung_lists:
        rungs = list(rungs)
        try:
            if any(isinstance(r, (bool, np.bool_)) for r in rungs):
                raise TypeError
            shape = tuple(sorted((operator.index(r) for r in rungs), reverse=True))
        except TypeError:
            raise TypeError(f"choose_shapes: rungs are ints (rung indices); got "
                            f"{rungs}") from None
        if not shape or not 0 <= shape[-1] <= shape[0] < len(capacities):
            raise ValueError(f"choose_shapes: an iteration's rungs must be 0 to "
                             f"{len(capacities) - 1}, at least one; got {rungs}")
        counts[shape] = counts.get(shape, 0) + 1
    if len(counts) <= max_graphs:
        return sorted(counts, key=lambda shape: (-counts[shape], shape))

    shapes = sorted(counts)  # the candidates, in the order ties are settled
    index = {shape: i for i, shape in enumerate(shapes)}
    n = np.array([counts[shape] for shape in shapes], np.int64)
    caps = np.asarray(capacities, np.int64)
    members_of: Dict[int, List[int]] = {}
    for i, shape in enumerate(shapes):
        members_of.setdefault(len(shape), []).append(i)
    groups = {k: np.asarray(members) for k, members in members_of.items()}
    table = {k: np.array([shapes[i] for i in members], np.int64) for k, members in groups.items()}
    rows = np.array([caps[list(shape)].sum() for shape in shapes], np.int64)

    def row_of(shape) -> np.ndarray:
        """The rows `shape` adds to each stream shape it holds, -1 where it
        holds none (_extra_rows, for every stream shape at once)."""
        out = np.full(len(shapes), -1, np.int64)
        members = groups.get(len(shape))
        if members is not None:
            holds = (np.asarray(shape, np.int64)[None, :] >= table[len(shape)]).all(axis=1)
            added = caps[list(shape)].sum() - rows[members]
            out[members] = np.where(holds, added, -1)
        return out

    # extra[c, s]: the rows stream shape c adds to stream shape s, -1 where
    # it does not hold it; one group of equal microbatch counts at a time.
    extra = np.full((len(shapes), len(shapes)), -1, np.int64)
    for k, members in groups.items():
        A = table[k]
        holds = np.ones((len(members), len(members)), bool)
        for column in range(k):  # a column at a time: no [m, m, k] array
            holds &= A[:, None, column] >= A[None, :, column]
        extra[np.ix_(members, members)] = np.where(
            holds, rows[members][:, None] - rows[members][None, :], -1)
    rows_of = {shape: extra[index[shape]] for shape in shapes}

    def cheapest(among) -> np.ndarray:
        """Per stream shape, the fewest rows a shape of `among` adds to it
        (-1: none holds it)."""
        best = np.full(len(shapes), -1, np.int64)
        for shape in among:
            r = rows_of.get(shape)
            if r is None:  # a count's first shape, which the stream may not hold
                r = rows_of[shape] = row_of(shape)
            best = np.where((r >= 0) & ((best < 0) | (r < best)), r, best)
        return best

    by_count: Dict[int, List[Tuple[int, ...]]] = {}
    for shape in shapes:
        by_count.setdefault(len(shape), []).append(shape)
    frequency = {k: sum(counts[s] for s in members) for k, members in by_count.items()}
    chosen: List[Tuple[int, ...]] = []
    for k in sorted(by_count, key=lambda k: (-frequency[k], k))[:max_graphs]:
        chosen.append(tuple(max(column) for column in zip(*by_count[k])))
    while True:
        cost = cheapest(chosen)
        added = False
        while len(chosen) < max_graphs:
            saves = (extra >= 0) & (cost >= 0)[None, :] & (extra < cost[None, :])
            gain = np.where(saves, (cost[None, :] - extra) * n[None, :], 0).sum(axis=1)
            gain[[index[c] for c in chosen if c in index]] = 0
            best = int(np.argmax(gain))
            if gain[best] <= 0:
                break
            chosen.append(shapes[best])
            added = True
            r = extra[best]
            cost = np.where((r >= 0) & ((cost < 0) | (r < cost)), r, cost)
        # A shape the later ones made useless (a count's first shape, once
        # the stream's own shapes hold all of it) gives its graph back.
        pruned = False
        for shape in list(chosen):
            rest = [c for c in chosen if c != shape]
            if np.array_equal(cheapest(rest), cost):
                chosen, pruned = rest, True
        if not (pruned and added):
            return chosen


def _check_capacities(capacities) -> List[int]:
    """The ladder's rows as ints: each an int >= 1 (never a bool, a float
    that int() would truncate, or a string), none smaller than the one
    before; TypeError or ValueError naming choose_shapes."""
    checked = []
    for c in capacities:
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise TypeError(f"choose_shapes: the ladder's rows are ints; got {c!r}")
        if c < 1:
            raise ValueError(f"choose_shapes: the ladder's rows must be >= 1; got {c!r}")
        checked.append(int(c))
    if any(b < a for a, b in zip(checked, checked[1:])):
        raise ValueError(f"choose_shapes: the ladder's rows must not decrease; got {checked}")
    return checked
