"""Packed steps as pure functions of (seed, epoch) and the records' lengths: whole
records of any units in rows of exactly `pack_length` tokens. Nothing here reads a file.

- Records of the build are numbered globally: units in ascending size, each unit's
  records in ordinal order (record g of unit u is ordinal `g - offset[u]`).
- The epoch's order: a permutation of all N records from
  `SeedSequence([seed, epoch, 2, 0])` (streams 0 and 1 are the unpacked reader's).
- Windows: the order is cut where the running token count passes a multiple of
  `window_rows * pack_length`, so a window holds about `window_rows` rows' worth of
  tokens whatever the records' lengths; a record belongs to the window its first token
  falls in.
- Each window is packed alone by best-fit decreasing: its records longest first (ties
  in window order), each put in the open row with the least room that still holds it,
  else in a new row. The window's rows are then ordered by their first record in the
  window order, and each row's records kept in window order, so a step's rows follow
  the shuffle rather than the sizes.
- The epoch's rows are the windows' rows in window order. Global step k is rows
  `[k*R, (k+1)*R)` (`R = max(1, tokens_per_step // pack_length)`), and rank r of W takes
  `[k*R + r*R/W, k*R + (r+1)*R/W)`: the same global sequence for every W. The last
  step's rows past the end are empty rows (`last="pad"`), or the step is left out
  (`last="drop"`, its records are not read that epoch).

So step k of an epoch is fixed by (seed, epoch, k) and the lengths, with no batch read
or replayed: resuming is arithmetic on the epoch's plan. Cost: the plan packs every
window of the epoch once when the epoch is first read (on each rank, in each DataLoader
worker that was not forked from a process that had it): O(N log W) in Python's bisect,
about 1.7 s per million records here, and 16 bytes a record (two int64 arrays); a step
is then O(its records).
"""
from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

import numpy as np

from mintdim_beam.read import order

PACK_STREAM = 2
_SHIFT = 32  # a room and a row id in one int key: (room << 32) | row
_ROW_MASK = (1 << _SHIFT) - 1


def best_fit_decreasing(lengths: np.ndarray, capacity: int) -> np.ndarray:
    """The row of each item (rows numbered in the order they are opened), longest item
    first; every length must be at most `capacity`.

    Open rows are kept as sorted int keys `(room << 32) | row` (full rows dropped), so
    the best fit for a length s is the first key >= `s << 32`: one bisect per item."""
    items = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable").tolist()
    sizes = np.asarray(lengths, dtype=np.int64).tolist()
    rows = [0] * len(sizes)
    keys: list[int] = []
    opened = 0
    for i in items:
        s = sizes[i]
        j = bisect_left(keys, s << _SHIFT)
        if j < len(keys):
            key = keys.pop(j)
            row, room = key & _ROW_MASK, (key >> _SHIFT) - s
        else:
            row, room = opened, capacity - s
            opened += 1
        rows[i] = row
        if room:
            insort(keys, (room << _SHIFT) | row)
    return np.asarray(rows, dtype=np.int64)


def window_ids(lengths_in_order: np.ndarray, window_tokens: int) -> np.ndarray:
    """The window of each record of the order: the multiple of `window_tokens` its first
    token falls in (non-decreasing)."""
    ends = np.cumsum(lengths_in_order, dtype=np.int64)
    return (ends - lengths_in_order) // window_tokens


@dataclass(frozen=True)
class PackPlan:
    """One epoch's rows: row i holds global records `records[starts[i]:starts[i+1]]` in
    that order. `len()` is the epoch's global step count, the same on every rank."""

    records: np.ndarray
    starts: np.ndarray
    rows_per_step: int
    last: str

    @property
    def rows(self) -> int:
        return len(self.starts) - 1

    def __len__(self) -> int:
        return order.unit_steps(self.rows, self.rows_per_step, self.last)

    def rank_rows(self, step: int, rank: int, world_size: int) -> tuple[int, int, int]:
        """(first row, end row, row count) of this rank's share of global step `step`:
        rows `[first, end)` of the plan, then `count - (end - first)` empty rows."""
        share = self.rows_per_step // world_size
        first = step * self.rows_per_step + rank * share
        return min(first, self.rows), min(first + share, self.rows), share


def pack_plan(lengths: np.ndarray, pack_length: int, window_rows: int, rows_per_step: int,
              seed: int, epoch: int, last: str) -> PackPlan:
    """The epoch's rows for records of `lengths` (global numbering, each <= pack_length)."""
    n = len(lengths)
    perm = order.generator(seed, epoch, PACK_STREAM, 0).permutation(n).astype(np.int64)
    in_order = np.asarray(lengths, dtype=np.int64)[perm]
    windows = window_ids(in_order, window_rows * pack_length)
    cuts = [0, *(np.flatnonzero(np.diff(windows)) + 1).tolist(), n]
    row_of = np.empty(n, dtype=np.int64)  # the epoch row of each position of the order
    rows = 0
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi == lo:
            continue
        local = best_fit_decreasing(in_order[lo:hi], pack_length)
        count = int(local.max()) + 1
        # rows ordered by their first record in the window (positions ascend in `local`)
        first = np.full(count, hi - lo, dtype=np.int64)
        np.minimum.at(first, local, np.arange(hi - lo, dtype=np.int64))
        rank = np.empty(count, dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(count, dtype=np.int64)
        row_of[lo:hi] = rows + rank[local]
        rows += count
    by_row = np.argsort(row_of, kind="stable")  # positions in order within a row
    starts = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of, minlength=rows), out=starts[1:])
    return PackPlan(records=perm[by_row], starts=starts, rows_per_step=rows_per_step, last=last)

