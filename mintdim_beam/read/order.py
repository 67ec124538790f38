"""The reader's order as pure functions of (seed, epoch, step): nothing here reads a file.

- A unit of `count` records and `rows` rows per global batch has `ceil(count / rows)`
  steps; step j covers positions `[j*rows, (j+1)*rows)` of the unit's permutation of its
  record ordinals, drawn from `Generator(PCG64(SeedSequence([seed, epoch, 1, unit])))`.
- The steps of all units are interleaved by a permutation of the step list (units in
  ascending size, each unit's steps in order) from `SeedSequence([seed, epoch, 0, 0])`.
- The last, partial step of a unit (`last="pad"`, the default) keeps its real records
  first and is filled up to `rows` with padding rows (ordinal -1). Every record is then
  read exactly once per epoch, every step of a unit has the same global shape, and
  since `rows` is a multiple of the world size every rank gets the same number of rows
  in every step (DDP lockstep). `last="drop"` leaves the partial step out (its records
  are not read that epoch).
- Rank r of W takes rows `[r*rows/W, (r+1)*rows/W)` of each global batch, so the
  rows of all ranks in rank order are the global batch, whatever W.

The reader keeps the two shuffles in its cache (`read.cache`), memory-mapped: `Steps`
finds global step k's unit and index from the step shuffle alone (one bisection), so
no per-step or per-record array of the epoch is held in memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LAST_RULES = ("pad", "drop")


def rows_per_step(tokens_per_step: int, unit: int) -> int:
    return max(1, tokens_per_step // unit)


def generator(seed: int, epoch: int, stream: int, unit: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch, stream, unit])))


def unit_steps(count: int, rows: int, last: str) -> int:
    return count // rows if last == "drop" else -(-count // rows)


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's step list: `units[k]` and `index[k]` say which unit and which of its
    steps global step k is."""

    units: np.ndarray
    index: np.ndarray

    def __len__(self) -> int:
        return len(self.units)


def step_counts(counts: dict[int, int], tokens_per_step: int, last: str) -> dict[int, int]:
    """Each unit's steps in an epoch (units ascending)."""
    return {unit: unit_steps(counts[unit], rows_per_step(tokens_per_step, unit), last)
            for unit in sorted(counts)}


def step_shuffle(steps: int, seed: int, epoch: int) -> np.random.Generator:
    """The generator whose `permutation(steps)` orders the epoch's step list."""
    return generator(seed, epoch, 0, 0)


def epoch_plan(counts: dict[int, int], tokens_per_step: int, seed: int, epoch: int,
               last: str) -> EpochPlan:
    units, index = [], []
    for unit, n in step_counts(counts, tokens_per_step, last).items():
        units.append(np.full(n, unit, dtype=np.int64))
        index.append(np.arange(n, dtype=np.int64))
    units = np.concatenate(units) if units else np.zeros(0, dtype=np.int64)
    index = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
    shuffle = step_shuffle(len(units), seed, epoch).permutation(len(units))
    return EpochPlan(units=units[shuffle], index=index[shuffle])


class Steps:
    """An epoch's step list as `epoch_plan` orders it, from its shuffle (`shuffle[k]` is
    global step k's place in the list of units' steps, units ascending): `step(k)` is
    (unit, that unit's step index), without an array per step."""

    def __init__(self, steps: dict[int, int], shuffle: np.ndarray):
        self.sizes = list(steps)
        self.starts = np.cumsum([0, *steps.values()], dtype=np.int64)
        self.shuffle = shuffle

    def __len__(self) -> int:
        return int(self.starts[-1])

    def step(self, k: int) -> tuple[int, int]:
        at = int(self.shuffle[k])
        u = int(np.searchsorted(self.starts, at, side="right")) - 1
        return self.sizes[u], at - int(self.starts[u])


def unit_permutation(count: int, seed: int, epoch: int, unit: int) -> np.ndarray:
    return generator(seed, epoch, 1, unit).permutation(count).astype(np.int64)


def rank_ordinals(permutation: np.ndarray, step_index: int, rows: int, rank: int,
                  world_size: int) -> np.ndarray:
    """This rank's record ordinals for one step of a unit; -1 marks a padding row."""
    share = rows // world_size
    start = step_index * rows + rank * share
    out = np.full(share, -1, dtype=np.int64)
    real = permutation[start:start + share]
    out[:len(real)] = real
    return out
