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


def epoch_plan(counts: dict[int, int], tokens_per_step: int, seed: int, epoch: int,
               last: str) -> EpochPlan:
    units, index = [], []
    for unit in sorted(counts):
        n = unit_steps(counts[unit], rows_per_step(tokens_per_step, unit), last)
        units.append(np.full(n, unit, dtype=np.int64))
        index.append(np.arange(n, dtype=np.int64))
    units = np.concatenate(units) if units else np.zeros(0, dtype=np.int64)
    index = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
    shuffle = generator(seed, epoch, 0, 0).permutation(len(units))
    return EpochPlan(units=units[shuffle], index=index[shuffle])


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
