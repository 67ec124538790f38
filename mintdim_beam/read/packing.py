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
or replayed. Windows are packed alone, so the plan is made a window at a time
(`PackPlan`): the order and its cut into windows at once (vectorized, about 0.05 s a
million records here), each window when a row of it is first needed (about 2.5 ms for
10,000 records), its first row the sum of the rows of the windows before it. The first
step packs one window; a resume whose state names its window packs that window;
`len()` packs them all (about 0.2 s a million records). Memory: 12 bytes a record.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

import numpy as np

from mintdim_beam.read import order

PACK_STREAM = 2
_SHIFT = 32  # a room and a row id in one int key: (room << 32) | row
_ROW_MASK = (1 << _SHIFT) - 1


def stable_argsort(keys: np.ndarray, bound: int) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` for ints of magnitude at most `bound`: as int16
    when they fit, where numpy sorts by radix (20 times faster on 10,000 keys here)."""
    if bound < (1 << 15):
        keys = keys.astype(np.int16)
    return np.argsort(keys, kind="stable")


def best_fit_decreasing(lengths: np.ndarray, capacity: int) -> np.ndarray:
    """The row of each item (rows numbered in the order they are opened), longest item
    first (ties in the given order); every length must be at most `capacity`.

    Open rows are kept as sorted int keys `(room << 32) | row` (full rows dropped), so
    the best fit for a length s is the first key >= `s << 32`. Items of one length are
    placed together: the best row keeps being the best while it has room for one more
    (its room only shrinks below every other fitting room), so it takes
    `min(left, room // s)` of them at once, then the next best or a new row. So the
    loop runs once per (length, row it fills), not once per item: lengths repeat a lot
    (token counts: about 350 distinct among 10,000 records of a window here)."""
    sizes = np.asarray(lengths, dtype=np.int64)
    items = stable_argsort(-sizes, capacity)
    ordered = sizes[items]
    cuts = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), len(ordered)]
    runs = zip(ordered[cuts[:-1]].tolist(), np.diff(cuts).tolist())
    keys: list[int] = []
    taken_rows, taken = [], []
    opened, mask, shift, find = 0, _ROW_MASK, _SHIFT, bisect_left  # locals: a hot loop
    add_row, add_count = taken_rows.append, taken.append
    for s, left in runs:
        need = s << shift
        while left:
            j = find(keys, need)
            if j < len(keys):
                key = keys[j]
                q = (key >> shift) // s if s else left
                if q > left:
                    q = left
                row, new = key & mask, key - q * need
                if new >> shift:
                    p = find(keys, new, 0, j)
                    if p == j:
                        keys[j] = new
                    else:
                        del keys[j]
                        keys.insert(p, new)
                else:
                    del keys[j]
            else:
                q = capacity // s if s else left
                if q > left:
                    q = left
                row = opened
                opened += 1
                if capacity - q * s:
                    insort(keys, ((capacity - q * s) << shift) | row)
            add_row(row)
            add_count(q)
            left -= q
    rows = np.empty(len(sizes), dtype=np.int64)
    rows[items] = np.repeat(np.asarray(taken_rows, dtype=np.int64), taken)
    return rows


def window_ids(lengths_in_order: np.ndarray, window_tokens: int) -> np.ndarray:
    """The window of each record of the order: the multiple of `window_tokens` its first
    token falls in (non-decreasing)."""
    ends = np.cumsum(lengths_in_order, dtype=np.int64)
    return (ends - lengths_in_order) // window_tokens


class PlanMismatch(ValueError):
    """A window's first row given from outside (a saved state) disagrees with the rows
    the plan found for the windows before it."""


class PackPlan:
    """One epoch's rows, row i holding global records `records[starts[i]:starts[i+1]]`
    in that order; `len()` is the epoch's global step count, the same on every rank.

    Planned a window at a time, when a row of it is first asked for: windows are packed
    alone, so a window's rows need only its records, and its first row is the sum of
    the rows of the windows before it. The epoch's order and its cut into windows are
    made at once (vectorized, O(N)); the first step packs one window, and a state that
    names the window of its step (`anchor`) resumes after packing that window only.
    `len()`, `rows`, `records` and `starts` need every window. Memory: the order (8
    bytes a record) and each packed window's row order (4 bytes a record)."""

    def __init__(self, lengths: np.ndarray, pack_length: int, window_rows: int,
                 rows_per_step: int, seed: int, epoch: int, last: str):
        self.pack_length, self.rows_per_step, self.last = pack_length, rows_per_step, last
        self._lengths = np.asarray(lengths, dtype=np.int64)
        n = len(self._lengths)
        self._perm = order.generator(seed, epoch, PACK_STREAM, 0).permutation(n).astype(
            np.int64, copy=False)
        # windows (`window_ids`) cut where a record's first token reaches a multiple of
        # window_tokens: the first record at or past each multiple, found by bisection
        in_order = self._lengths[self._perm]
        firsts = np.cumsum(in_order)
        total = int(firsts[-1]) if n else 0
        firsts -= in_order
        del in_order
        window_tokens = window_rows * pack_length
        cuts = np.unique(np.searchsorted(firsts, np.arange(window_tokens, total + 1, window_tokens)))
        self._cuts = np.concatenate(([0], cuts[(cuts > 0) & (cuts < n)], [n])).astype(
            np.int64) if n else np.zeros(1, np.int64)
        self.windows = len(self._cuts) - 1
        self._packed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._known_windows, self._known_rows = [0], [0]  # first rows known, ascending

    def window(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """Window w packed: (its positions in the order, from its first, in row order;
        each row's first index into them, and the end)."""
        got = self._packed.get(w)
        if got is None:
            lo, hi = int(self._cuts[w]), int(self._cuts[w + 1])
            local = best_fit_decreasing(self._lengths[self._perm[lo:hi]], self.pack_length)
            count = int(local.max()) + 1
            # rows ordered by their first record in the window (positions ascend in `local`)
            first = np.full(count, hi - lo, dtype=np.int64)
            np.minimum.at(first, local, np.arange(hi - lo, dtype=np.int64))
            rank = np.empty(count, dtype=np.int64)
            rank[np.argsort(first, kind="stable")] = np.arange(count, dtype=np.int64)
            row_of = rank[local]
            starts = np.zeros(count + 1, dtype=np.int64)
            np.cumsum(np.bincount(row_of, minlength=count), out=starts[1:])
            got = stable_argsort(row_of, count).astype(np.int32), starts
            self._packed[w] = got
        return got

    def locate(self, row: int) -> tuple[int, int] | None:
        """(window, its first row) of global row `row`, or None past the epoch's last
        row; packs the windows from the nearest one whose first row is known."""
        i = bisect_right(self._known_rows, row) - 1
        w, first = self._known_windows[i], self._known_rows[i]
        while w < self.windows:
            count = len(self.window(w)[1]) - 1
            if row < first + count:
                return w, first
            w, first = w + 1, first + count
            self._learn(w, first)
        return None

    def anchor(self, w: int, first: int, row: int) -> bool:
        """Take `first` as window w's first row if window w then holds global row `row`
        and nothing known contradicts it (a saved state's position); False otherwise."""
        if not 0 <= w < self.windows or first < 0:
            return False
        count = len(self.window(w)[1]) - 1
        if not first <= row < first + count:
            return False
        windows, rows = self._known_windows, self._known_rows
        i = bisect_left(windows, w)
        if i < len(windows) and windows[i] == w:
            return rows[i] == first
        if (i and rows[i - 1] >= first) or (i < len(rows) and rows[i] <= first):
            return False  # the known windows around it would be out of order
        windows.insert(i, w)
        rows.insert(i, first)
        return True

    def _learn(self, w: int, first: int) -> None:
        i = bisect_left(self._known_windows, w)
        if i < len(self._known_windows) and self._known_windows[i] == w:
            if self._known_rows[i] != first:
                raise PlanMismatch(f"window {w} of the plan starts at row {self._known_rows[i]}, "
                                   f"not {first}: a loaded state's window does not belong to "
                                   f"this plan")
            return
        self._known_windows.insert(i, w)
        self._known_rows.insert(i, first)

    def take(self, first: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Global records of rows `[first, end)` (all existing) in row order, and how
        many each row holds."""
        records, per_row = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        row = first
        while row < end:
            w, w_first = self.locate(row)
            positions, starts = self.window(w)
            lo, hi = row - w_first, min(end - w_first, len(starts) - 1)
            records.append(self._perm[self._cuts[w] + positions[starts[lo]:starts[hi]]])
            per_row.append(np.diff(starts[lo:hi + 1]))
            row = w_first + hi
        return np.concatenate(records), np.concatenate(per_row)

    @property
    def rows(self) -> int:
        """The epoch's rows (packs every window)."""
        self.locate(1 << 62)
        return self._known_rows[-1]

    @property
    def records(self) -> np.ndarray:
        return self.take(0, self.rows)[0]

    @property
    def starts(self) -> np.ndarray:
        per_row = self.take(0, self.rows)[1]
        starts = np.zeros(len(per_row) + 1, dtype=np.int64)
        np.cumsum(per_row, out=starts[1:])
        return starts

    def __len__(self) -> int:
        return order.unit_steps(self.rows, self.rows_per_step, self.last)

    def at_end(self, step: int) -> bool:
        """Whether `step` is past the epoch's last step (packs up to that step only)."""
        row = step * self.rows_per_step if self.last == "pad" else (step + 1) * self.rows_per_step - 1
        return self.locate(row) is None

    def step_window(self, step: int) -> tuple[int, int]:
        """(window, its first row) of the step's first row; (windows, rows) past the end:
        what a saved state carries so that a resume packs that window only."""
        found = self.locate(step * self.rows_per_step)
        return found if found is not None else (self.windows, self.rows)

    def rank_rows(self, step: int, rank: int, world_size: int) -> tuple[int, int, int]:
        """(first row, end row, row count) of this rank's share of global step `step`:
        rows `[first, end)` of the plan, then `count - (end - first)` empty rows."""
        share = self.rows_per_step // world_size
        first = step * self.rows_per_step + rank * share
        if share and self.locate(first + share - 1) is None:
            rows = self.rows
            return min(first, rows), min(first + share, rows), share
        return first, first + share, share


def pack_plan(lengths: np.ndarray, pack_length: int, window_rows: int, rows_per_step: int,
              seed: int, epoch: int, last: str) -> PackPlan:
    """The epoch's rows for records of `lengths` (global numbering, each <= pack_length),
    planned when asked for (`PackPlan`)."""
    return PackPlan(lengths, pack_length, window_rows, rows_per_step, seed, epoch, last)
