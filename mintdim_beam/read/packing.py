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
`len()` packs them all (about 0.2 s a million records).

Given the reader's cache (`store`), the order, the lengths in that order, the windows'
cuts and, once `len()` has packed every window, each window's first row are written
once per (seed, epoch) into it (`read.cache`) and memory-mapped: a rank holds the
windows it packs (the last few, `KEEP_WINDOWS`), not 12 bytes a record, and a later
start or resume of that epoch opens them. Without one (arrays given here) they are
made in memory: 20 bytes a record.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict

import numpy as np

from mintdim_beam.read import cache, order

PACK_STREAM = 2
KEEP_WINDOWS = 64  # packed windows kept, the last used: a pack-ahead group's and more
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


def window_cuts(lengths_in_order: np.ndarray, window_tokens: int) -> np.ndarray:
    """Where the windows start in the order, and its end: the first record whose first
    token is at or past each multiple of `window_tokens` (found by bisection), a chunk
    of the order at a time (one chunk's running sums in memory, not the order's)."""
    n = len(lengths_in_order)
    found, carry, multiple = [np.zeros(0, np.int64)], 0, window_tokens
    for lo, piece in cache.chunks(lengths_in_order):
        ends = np.cumsum(piece, dtype=np.int64)
        ends += carry
        firsts = ends - piece
        top = int(firsts[-1])
        if multiple <= top:
            values = np.arange(multiple, top + 1, window_tokens, dtype=np.int64)
            found.append(lo + np.searchsorted(firsts, values))
            multiple = int(values[-1]) + window_tokens
        carry = int(ends[-1])
    cuts = np.unique(np.concatenate(found))
    if not n:
        return np.zeros(1, np.int64)
    return np.concatenate(([0], cuts[(cuts > 0) & (cuts < n)], [n])).astype(np.int64)


def write_order(folder: str, lengths: np.ndarray, seed: int, epoch: int) -> dict:
    """The epoch's order (`perm.npy`) and the records' lengths in it (`lengths.npy`)
    into a cache folder, the lengths gathered a chunk of the order at a time."""
    n = len(lengths)
    cache.shuffled(folder, "perm", n, order.generator(seed, epoch, PACK_STREAM, 0))
    perm = np.load(f"{folder}/perm.npy", mmap_mode="r")
    with cache.Writer(folder, "lengths", lengths.dtype, n) as out:
        for _, piece in cache.chunks(perm):
            out.append(lengths[piece])
    del perm
    return {}


class PlanMismatch(ValueError):
    """A window's first row given from outside (a saved state) disagrees with the rows
    the plan found for the windows before it."""


class PackPlan:
    """One epoch's rows, row i holding global records `records[starts[i]:starts[i+1]]`
    in that order; `len()` is the epoch's global step count, the same on every rank.

    Planned a window at a time, when a row of it is first asked for: windows are packed
    alone, so a window's rows need only its records, and its first row is the sum of
    the rows of the windows before it. The epoch's order and its cut into windows are
    made at once (O(N), once per epoch and cache); the first step packs one window, and
    a state that names the window of its step (`anchor`) resumes after packing that
    window only. `len()`, `rows`, `records` and `starts` need every window (with a
    cache, once: each window's first row is written into it)."""

    def __init__(self, lengths: np.ndarray, pack_length: int, window_rows: int,
                 rows_per_step: int, seed: int, epoch: int, last: str, store=None,
                 key: str = ""):
        self.pack_length, self.rows_per_step, self.last = pack_length, rows_per_step, last
        window_tokens = window_rows * pack_length
        self._store = store
        if store is None:
            lengths = np.asarray(lengths, dtype=np.int64)
            self._perm = order.generator(seed, epoch, PACK_STREAM, 0).permutation(
                len(lengths)).astype(np.int64, copy=False)
            self._in_order = lengths[self._perm]
            self._cuts = window_cuts(self._in_order, window_tokens)
        else:
            made = store.get(f"pack-order.{key}.s{seed}.e{epoch}",
                             lambda folder: write_order(folder, lengths, seed, epoch))
            self._perm, self._in_order, self._order = made["perm"], made["lengths"], made
            name = f"{key}.s{seed}.L{pack_length}.w{window_rows}.e{epoch}"
            self._cuts = np.array(store.get(f"pack-windows.{name}", lambda folder: np.save(
                f"{folder}/cuts.npy", window_cuts(self._in_order, window_tokens)))["cuts"])
            self._rows_name = f"pack-rows.{name}"
            made.release()  # what cutting the order touched
        self.windows = len(self._cuts) - 1
        self._packed: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._known_windows, self._known_rows = [0], [0]  # first rows known, ascending
        if store is not None:
            found = store.find(self._rows_name)
            if found is not None:
                self._all_known(found["firsts"])

    def _all_known(self, firsts: np.ndarray) -> None:
        self._known_windows = list(range(self.windows + 1))
        self._known_rows = np.asarray(firsts, dtype=np.int64).tolist()

    def window(self, w: int) -> tuple[np.ndarray, np.ndarray]:
        """Window w packed: (its positions in the order, from its first, in row order;
        each row's first index into them, and the end)."""
        got = self._packed.get(w)
        if got is not None:
            self._packed.move_to_end(w)
        else:
            lo, hi = int(self._cuts[w]), int(self._cuts[w + 1])
            local = best_fit_decreasing(self._in_order[lo:hi], self.pack_length)
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
            if len(self._packed) > KEEP_WINDOWS:
                self._packed.popitem(last=False)
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
        return self.take_lengths(first, end)[:2]

    def take_lengths(self, first: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`take`, and each record's length (from the lengths in the order, near each
        other, where the records' own places are all over the build)."""
        records, per_row, lens = ([np.zeros(0, np.int64)] for _ in range(3))
        row = first
        while row < end:
            w, w_first = self.locate(row)
            positions, starts = self.window(w)
            lo, hi = row - w_first, min(end - w_first, len(starts) - 1)
            at = self._cuts[w] + positions[starts[lo]:starts[hi]]
            records.append(self._perm[at].astype(np.int64))
            lens.append(self._in_order[at].astype(np.int64))
            per_row.append(np.diff(starts[lo:hi + 1]))
            row = w_first + hi
        return np.concatenate(records), np.concatenate(per_row), np.concatenate(lens)

    @property
    def rows(self) -> int:
        """The epoch's rows (packs every window; with a cache, the first time this epoch
        is planned there, then each window's first row is written into it)."""
        if self._store is None or len(self._known_windows) > self.windows:
            self.locate(1 << 62)
        else:
            self._all_known(self._store.get(self._rows_name, self._write_rows)["firsts"])
        return self._known_rows[-1]

    def _write_rows(self, folder: str) -> None:
        """Every window packed from the first (checking any anchor on the way), its
        first row and the epoch's rows at the end into `firsts.npy`; the order's pages
        the pass touched given back (`Artifact.release`)."""
        first = 0
        for w in range(self.windows):
            self._learn(w, first)
            first += len(self.window(w)[1]) - 1
        self._learn(self.windows, first)
        np.save(f"{folder}/firsts.npy", np.asarray(self._known_rows, dtype=np.int64))
        self._order.release()

    def every_row(self) -> tuple[np.ndarray, np.ndarray]:
        """(the epoch's records in row order, each row's first index into them and the
        end): every window packed, in one pass. A method, not attributes: readers take
        a step's rows (`take`); this is the whole plan at once, for checks."""
        records, per_row = self.take(0, self.rows)
        starts = np.zeros(len(per_row) + 1, dtype=np.int64)
        np.cumsum(per_row, out=starts[1:])
        return records, starts

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
              seed: int, epoch: int, last: str, store=None, key: str = "") -> PackPlan:
    """The epoch's rows for records of `lengths` (global numbering, each <= pack_length),
    planned when asked for (`PackPlan`); with `store` (a `read.cache.Store`) its arrays
    are kept there, `key` naming the lengths they come from."""
    return PackPlan(lengths, pack_length, window_rows, rows_per_step, seed, epoch, last,
                    store, key)
