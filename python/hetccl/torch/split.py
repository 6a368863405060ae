"""Dividing a global batch among ranks in proportion to their speeds."""
import math


def check_speeds(speeds):
    """Every rank's speed must be a finite number above zero."""
    for rank, speed in enumerate(speeds):
        if not isinstance(speed, (int, float)) or not math.isfinite(speed) or speed <= 0:
            raise ValueError(f"hetccl: rank {rank} reports a speed of {speed!r} samples/s; "
                             "a speed must be a finite number above zero (did its speed probe fail?)")


def split_batch(global_batch, speeds):
    """Counts b_i summing to `global_batch`, b_i proportional to speeds[i],
    every b_i at least 1 (largest remainders; ties go to the lower rank).
    The same inputs give the same counts on every rank."""
    ranks = len(speeds)
    if ranks == 0:
        raise ValueError("hetccl: no ranks to split the batch among")
    if not isinstance(global_batch, int) or isinstance(global_batch, bool):
        raise ValueError(f"hetccl: the global batch must be an integer, not {global_batch!r}")
    if global_batch < ranks:
        raise ValueError(f"hetccl: a global batch of {global_batch} cannot give each of the {ranks} ranks a sample")
    check_speeds(speeds)
    total = float(sum(speeds))
    # One sample each first, the rest by speed: no rank is left without work.
    spare = global_batch - ranks
    ideal = [spare * s / total for s in speeds]
    counts = [1 + math.floor(x) for x in ideal]
    left = global_batch - sum(counts)
    order = sorted(range(ranks), key=lambda r: (-(ideal[r] - math.floor(ideal[r])), r))
    for r in order[:left]:
        counts[r] += 1
    return counts
