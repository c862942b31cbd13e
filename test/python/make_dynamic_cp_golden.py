"""Writes test/python/data/dynamic_cp_golden.json: the reference framework's
dynamic-CP scheduler (megatron-core's DefaultDynamicCPScheduler, whose
microbatch step is next_hdp_group_packing_aware in
megatron/core/datasets/data_schedule_utils.py) on random global batches,
for test_dynamic_cp_cpu.py to compare thdc.planner.dynamic_cp_plan against;
and, with virtual pipeline stages (microbatch_group_size_per_vp_stage),
the same scheduler whose microbatch count align_sample_id_groups makes a
multiple of the group.

    python3 test/python/make_dynamic_cp_golden.py /path/to/Megatron-LM
    python3 test/python/make_dynamic_cp_golden.py /path/to/Megatron-LM --ranks

--ranks writes data/dynamic_cp_ranks_golden.json instead: the same scheduler
at every DP x CP rank count W from 1 to 32 (most not powers of two), without
and with virtual pipeline stages, its groups, or how it fails.

A batch the scheduler fails on is recorded too, with `error` (what failed)
and `kind`: the exception's type (IndexError, AssertionError), "endless"
where it runs past a time limit (its fill loop under virtual pipeline
stages never ends when no sub-group can be widened), or "malformed" where
it returns a microbatch of more or fewer ranks than there are.

The path holds the `megatron` package (a checkout, or a megatron-core wheel
unpacked); the file records which. Lengths are >= 1: the framework's
size formula takes log2 of length/C, which fails for a length of 0.
"""
import json
import os
import random
import signal
import subprocess
import sys
import warnings


# Seconds a scheduler call may run before it counts as endless (a call
# that ends takes milliseconds).
TIME_LIMIT = 5


class Endless(Exception):
    pass


def _alarm(signum, frame):
    raise Endless()


def schedule(scheduler, lengths, ranks):
    """The scheduler's groups for `lengths` ({"groups": ...}), or how it
    fails ({"error": ..., "kind": ...})."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT)
    try:
        groups = scheduler.get_groups_and_subsamples(list(enumerate(lengths)))
    except Endless:
        return dict(error=f"endless: still running after {TIME_LIMIT} s", kind="endless")
    except Exception as error:  # noqa: BLE001 - the framework's own failure
        return dict(error=f"{type(error).__name__}: {error}", kind=type(error).__name__)
    finally:
        signal.alarm(0)
    for m, group in enumerate(groups):
        if len(group) != ranks:
            return dict(error=f"malformed: microbatch {m} has {len(group)} ranks, not {ranks}",
                        kind="malformed")
    return dict(groups=groups)


def _rank_cases(rng, per_ranks, vpp):
    """`per_ranks` random batches at each W = 1..32 ranks (dp = W / cp) and
    the scheduler's outcome for each, with a random
    microbatch_group_size_per_vp_stage when `vpp`; and the outcomes' counts
    by kind."""
    from megatron.core.datasets.data_schedule import DefaultDynamicCPScheduler

    cases, outcomes = [], {}
    for ranks in range(1, 33):
        cps = [c for c in (1, 2, 4) if ranks % c == 0]
        for _ in range(per_ranks):
            cp = rng.choice(cps)
            dp = ranks // cp
            C = rng.choice([64, 128, 256])
            min_cp = rng.choice([m for m in (1, 2) if m <= ranks])
            group = rng.choice([2, 3, 4]) if vpp else None
            top = C * (1 << (ranks.bit_length() - 1))
            lengths = [min(top, rng.randint(1, C * rng.choice([1, 1, 2, 4])))
                       for _ in range(rng.randint(1, 24))]
            case = dict(C=C, dp=dp, cp=cp, min_cp_size=min_cp, lengths=lengths)
            if vpp:
                case["microbatch_group_size_per_vp_stage"] = group
            scheduler = DefaultDynamicCPScheduler(C, cp, dp, group, max_num_seqs=None,
                                                  min_cp_size=min_cp)
            case.update(schedule(scheduler, lengths, ranks))
            kind = case.get("kind", "groups")
            outcomes[kind] = outcomes.get(kind, 0) + 1
            cases.append(case)
    return cases, outcomes


def rank_counts(source: str) -> int:
    """The scheduler at W = 1..32 ranks (dp = W / cp), random batches."""
    cases, outcomes = _rank_cases(random.Random(20261204), 6, vpp=False)
    # With virtual pipeline stages (microbatch_group_size_per_vp_stage):
    # align_sample_id_groups widens split microbatches back onto the W ranks,
    # which a power-of-two sub-group cannot always do when W is not one.
    vpp_cases, vpp_outcomes = _rank_cases(random.Random(20261206), 4, vpp=True)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                       "dynamic_cp_ranks_golden.json")
    with open(out, "w") as f:
        json.dump(dict(source="megatron-core DefaultDynamicCPScheduler."
                              "get_groups_and_subsamples at W = 1..32 ranks",
                       revision=_revision(source), cases=cases, vpp_cases=vpp_cases),
                  f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(cases)} cases: {outcomes}; {len(vpp_cases)} with virtual pipeline "
          f"stages: {vpp_outcomes} -> {out}")
    return 0


def _revision(source: str) -> str:
    try:
        return subprocess.run(["git", "-C", source, "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("MEGATRON_REVISION", "unknown")


def main() -> int:
    source = sys.argv[1]
    if "--ranks" in sys.argv[2:]:
        sys.path.insert(0, source)
        warnings.filterwarnings("ignore")
        return rank_counts(source)
    sys.path.insert(0, source)
    warnings.filterwarnings("ignore")
    from megatron.core.datasets.data_schedule import DefaultDynamicCPScheduler

    try:
        revision = subprocess.run(["git", "-C", source, "rev-parse", "HEAD"], check=True,
                                  capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        revision = os.environ.get("MEGATRON_REVISION", "unknown")
    rng = random.Random(20261203)
    cases, refused_cases = [], []
    while len(cases) < 80:
        dp, cp = rng.choice([1, 2, 3, 4, 8]), rng.choice([1, 2, 4, 8])
        ranks = dp * cp
        C = rng.choice([64, 256, 1024])
        min_cp = rng.choice([m for m in (1, 2, 4) if m <= ranks])
        lengths = [min(C * ranks, rng.randint(1, C * rng.choice([1, 1, 1, 2, 4, 8])))
                   for _ in range(rng.randint(1, 40))]
        scheduler = DefaultDynamicCPScheduler(C, cp, dp, None, max_num_seqs=None,
                                              min_cp_size=min_cp)
        outcome = schedule(scheduler, lengths, ranks)
        case = dict(C=C, dp=dp, cp=cp, min_cp_size=min_cp, lengths=lengths, **outcome)
        # The batches it fails on (an AssertionError: a sequence needs more
        # ranks than there are, or none fits the whole group) are kept apart.
        (cases if "groups" in outcome else refused_cases).append(case)
    # With virtual pipeline stages: the scheduler's microbatches made a
    # multiple of microbatch_group_size_per_vp_stage (align_sample_id_groups);
    # counts that are not one already, and the framework's refusals.
    vpp_cases, refused = [], 0
    while len(vpp_cases) < 80:
        dp, cp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4])
        ranks = dp * cp
        C = rng.choice([64, 256, 1024])
        min_cp = rng.choice([m for m in (1, 2, 4) if m <= ranks])
        group = rng.choice([2, 3, 4, 5, 8])
        lengths = [min(C * ranks, rng.randint(1, C * rng.choice([1, 1, 1, 2, 4, 8])))
                   for _ in range(rng.randint(1, 60))]
        plain = DefaultDynamicCPScheduler(C, cp, dp, None, max_num_seqs=None,
                                          min_cp_size=min_cp)
        outcome = schedule(plain, lengths, ranks)
        if "groups" not in outcome:  # one of the kinds refused_cases holds
            continue
        if len(outcome["groups"]) % group == 0:
            continue
        scheduler = DefaultDynamicCPScheduler(C, cp, dp, group, max_num_seqs=None,
                                              min_cp_size=min_cp)
        outcome = schedule(scheduler, lengths, ranks)
        if "groups" not in outcome:
            if refused >= 10:
                continue
            refused += 1
            outcome["groups"] = None
        vpp_cases.append(dict(C=C, dp=dp, cp=cp, min_cp_size=min_cp, lengths=lengths,
                              microbatch_group_size_per_vp_stage=group, **outcome))
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                       "dynamic_cp_golden.json")
    with open(out, "w") as f:
        json.dump(dict(source="megatron-core DefaultDynamicCPScheduler."
                              "get_groups_and_subsamples", revision=revision, cases=cases,
                       refused_cases=refused_cases, vpp_cases=vpp_cases),
                  f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(cases)} cases ({len(refused_cases)} more refused by the framework), "
          f"{len(vpp_cases)} with virtual pipeline stages ({refused} refused) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
