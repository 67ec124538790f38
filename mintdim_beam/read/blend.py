"""A blend's order: which source each of its items comes from, and which of that
source's items it is. Pure functions of the weights, the sources' sizes and the blend's
size; the blended readers (`blended`) read them from the reader cache.

The choice is megatron-core's (`helpers.build_blending_indices`, its behaviour): the
weights are normalized to sum 1; item i goes to the source whose error
`weight * max(i, 1) - items taken so far` is largest, the first source on a tie. After
n items each source has taken its `weight * n` items to within one (the rounding of
each item): this is the error-minimizing rule, and for pack-builds it makes our blend
megatron-core's `BlendedDataset` sample for sample.

When a source has given all its items within an epoch (`exhausted`):
- `repeat`: it goes on with its next epochs' items (another seeded order each), so
  every blend epoch has its size and its exact proportions;
- `stop`: the blend's epoch ends before the first item that source cannot give;
- `renormalize`: that source leaves the blend; the rest go on, their weights
  normalized again among themselves, until all are exhausted or the size is reached.
"""
from __future__ import annotations

import math

import numpy as np

from mintdim_beam.core.errors import ReaderArgumentError

EXHAUSTED = ("repeat", "stop", "renormalize")
MAX_SOURCES = 32767  # the int16 source index, as megatron-core's


def weights_of(weights, sources: int) -> list[float]:
    """`weights` normalized to sum 1, or `ReaderArgumentError` saying the rule: a list of
    one finite number >= 0 per source, not all zero."""
    rule = (f"a list of {sources} finite numbers >= 0, one per build, not all zero "
            "(they are normalized to sum 1)",
            f"danh sách {sources} số hữu hạn >= 0, mỗi build một số, không phải tất cả bằng 0 "
            "(được chuẩn hoá về tổng 1)")

    def refuse(why: str):
        return ReaderArgumentError(argument="weights", value=f"{weights!r}: {why}",
                                   allowed=rule[0], allowed_vi=rule[1])

    if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__"):
        raise refuse("not a list")
    if len(weights) != sources:
        raise refuse(f"{len(weights)} weights for {sources} builds")
    if not 1 <= sources <= MAX_SOURCES:
        raise refuse(f"{sources} builds")
    values = []
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)):
            raise refuse(f"{w!r} is not a number")
        w = float(w)
        if math.isnan(w) or math.isinf(w):
            raise refuse(f"{w!r} is not finite")
        if w < 0:
            raise refuse(f"{w!r} is negative")
        values.append(w)
    total = math.fsum(values)
    if total <= 0:
        raise refuse("all zero")
    return [w / total for w in values]


def exhausted_of(exhausted: str) -> str:
    if exhausted not in EXHAUSTED:
        raise ReaderArgumentError(
            argument="exhausted", value=repr(exhausted),
            allowed="'repeat', 'stop' or 'renormalize' (what a source that runs out does)",
            allowed_vi="'repeat', 'stop' hoặc 'renormalize' (nguồn hết dữ liệu thì làm gì)")
    return exhausted


def indices(weights: list[float], size: int, available=None,
            exhausted: str = "repeat") -> tuple[np.ndarray, np.ndarray]:
    """(source index int16, the source's item index int64) of each of the blend's items:
    `size` items, fewer when `stop` or `renormalize` end the epoch early. `available`:
    each source's items in an epoch (needed unless `repeat`, where an index past it
    reads the source's next epochs)."""
    d = len(weights)
    source = np.zeros(size, dtype=np.int16)
    taken_at = np.zeros(size, dtype=np.int64)
    counts = [0] * d
    live = list(range(d))
    w = list(weights)
    caps = list(available) if available is not None else [None] * d
    if exhausted != "repeat" and available is None:
        raise ValueError("the sources' sizes are needed unless exhausted='repeat'")
    i = 0
    while i < size:
        x = float(max(i, 1))
        best, best_error = live[0], w[live[0]] * x - counts[live[0]]
        for s in live[1:]:
            error = w[s] * x - counts[s]
            if error > best_error:
                best, best_error = s, error
        if exhausted != "repeat" and counts[best] >= caps[best]:
            if exhausted == "stop":
                break
            live.remove(best)
            if not live or all(w[s] == 0 for s in live):
                break
            rest = math.fsum(w[s] for s in live)
            w = [w[s] / rest if s in live else 0.0 for s in range(d)]
            continue
        source[i] = best
        taken_at[i] = counts[best]
        counts[best] += 1
        i += 1
    return source[:i], taken_at[:i]


def full_size(weights: list[float], available) -> int:
    """The largest blend no source runs out of: under the rule every source's count
    stays within one of `weight * n`, so this is near `min(available / weight)`, found
    exactly by walking the rule (`indices` with `stop`)."""
    bound = min(int(a / w) + 2 for a, w in zip(available, weights) if w > 0)
    return len(indices(weights, bound, available, "stop")[0])
