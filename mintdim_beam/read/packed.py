"""A packed step's arrays from its records: the rows `read.packing` planned, filled with
the records' own tokens and labels, and the positions, document ids and lengths that
keep the records apart in attention and loss.

Per row of `pack_length` slots, the records one after another, then padding:
- `input_ids` the records' tokens, `pad_id` on padding;
- `labels` the records' labels as the unpacked reader gives them (the token inside a
  target segment), except `ignore_id` at every record's first token, so that with the
  usual shift (position t predicts label t+1) no loss crosses from one record into the
  next (nothing predicts a record's first token unpacked either), and on padding;
- `position_ids` 0, 1, ... restarting at every record; the padding after the records
  counts from 0 as a segment of its own (made on first use, `position_ids`);
- `document_ids` the record's index in its row (0, 1, ...), -1 on padding (made on
  first use, `document_ids`);
- `seq_lens` [rows, k] the records' lengths in row order (0 past a row's records),
  `sample_ids` / `ordinals` / `units` [rows, k] likewise (-1 past them);
- `cu_seqlens` int32 [segments + 1], flash-attention's boundaries of the whole batch
  flattened to `rows * pack_length` tokens: every record, and every row's padding as a
  segment of its own, so the segments cover the flattened batch exactly; `max_seqlen`.

The token counts the plan used (the reader's cache of the shards' own length slots,
`read.facts`) are checked against each record's segment lengths as it is read: a record
that disagrees (its shard changed in place since) is a ShardRecordError."""
from __future__ import annotations

import numpy as np

from mintdim_beam.core.errors import ShardRecordError
from mintdim_beam.core.formats.mintdim import shard_name


def _exclusive(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


_SLOTS: dict[int, np.ndarray] = {}


def _slots(size: int) -> np.ndarray:
    """`arange(size)`, read-only, kept: every step of a reader has the same size."""
    if size not in _SLOTS:
        if len(_SLOTS) > 8:
            _SLOTS.clear()
        _SLOTS[size] = np.arange(size, dtype=np.int64)
        _SLOTS[size].flags.writeable = False
    return _SLOTS[size]


def assemble_steps(build, steps: list, pack_length: int, offsets: np.ndarray,
                   targets: np.ndarray, ignore_id: int) -> list[dict]:
    """The arrays of each step `(records, per_row, rows, lengths)`: `rows` rows holding
    global `records` row by row (`per_row[i]` in row i, rows past `len(per_row)` empty:
    only the last step may end with them), `lengths` the records' token counts as the
    plan took them; `offsets` are each unit's first record in the global numbering. Several steps are made as one and cut into each step's arrays (views):
    a reader going through an epoch reads a few steps' records with one gather per
    (unit, shard) and one pass of each kind, where one step at a time pays them per
    step (a 65,536-token step's records lie in about 48 of the 1M build's 52 shards).
    Each step's arrays are the ones it gets made alone."""
    records = np.concatenate([s[0] for s in steps])
    lens = np.concatenate([s[3] for s in steps])
    per_row = np.concatenate([np.concatenate([s[1], np.zeros(s[2] - len(s[1]), np.int64)])
                              for s in steps])
    step_rows = [s[2] for s in steps]
    return _split(_assemble(build, records, per_row, sum(step_rows), pack_length, lens,
                            offsets, targets, ignore_id), step_rows, pack_length)


def _split(out: dict, step_rows: list, pack_length: int) -> list[dict]:
    """Each step's rows of arrays made for several: row slices (views), its own record
    columns (copies, contiguous like a step's own), its segments of `cu_seqlens` from 0."""
    cu, per_row = out.pop("_cu"), out.pop("_per_row")
    if len(step_rows) == 1:
        return [out]
    seg_docs = out["_segment_docs"]
    steps, row = [], 0
    for rows in step_rows:
        lo, hi = row, row + rows
        a, b = np.searchsorted(cu, [lo * pack_length, hi * pack_length])
        width = max(1, int(per_row[lo:hi].max(initial=0)))
        seg_len = np.diff(cu[a:b + 1])
        steps.append({"input_ids": out["input_ids"][lo:hi], "labels": out["labels"][lo:hi],
                      "_segment_docs": seg_docs[a:b], "lengths": out["lengths"][lo:hi],
                      **{name: np.ascontiguousarray(out[name][lo:hi, :width])
                         for name in ("seq_lens", "ordinals", "units")},
                      "cu_seqlens": (cu[a:b + 1] - cu[a]).astype(np.int32),
                      "max_seqlen": int(seg_len.max(initial=0))})
        row = hi
    return steps


def _assemble(build, records: np.ndarray, per_row: np.ndarray, rows: int, pack_length: int,
              lens: np.ndarray, offsets: np.ndarray, targets: np.ndarray,
              ignore_id: int) -> dict:
    """`assemble_steps`'s work on the steps' rows together; empty rows (no record)
    only at the end.

    The records are read whole into one buffer that ends with `pack_length` pad ids
    (`_read`). The rows flattened are cut exactly by the segments (each record, then
    each row's padding), so `input_ids` is one gather from the buffer at one `np.repeat`
    of each segment's offset plus the slot numbers; the label mask is one `np.repeat` of
    a flag per record segment (and per padding); `position_ids` and `document_ids` are
    made from the segments on first use (`Batch`)."""
    n, k = len(build.segments), len(records)
    size = rows * pack_length
    unit_index = np.searchsorted(offsets, records, side="right") - 1
    units = np.asarray(sorted(build.counts), dtype=np.int64)[unit_index]
    ordinals = records - offsets[unit_index]

    per_row = np.concatenate([per_row, np.zeros(rows - len(per_row), dtype=np.int64)])
    first = _exclusive(per_row)  # each row's first record
    ends = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(lens, out=ends[1:])
    row_of = np.repeat(np.arange(rows, dtype=np.int64), per_row)
    fill = ends[first + per_row] - ends[first]
    tail = pack_length - fill
    has_tail = tail > 0
    doc = np.arange(k, dtype=np.int64) - first[row_of]
    # segments (flash-attention's): a row's records, then its padding (if any)
    tails_before = _exclusive(has_tail)
    record_seg = np.arange(k, dtype=np.int64) + tails_before[row_of]
    tail_seg = (first + per_row + tails_before)[has_tail]
    seg_len = np.empty(k + len(tail_seg), dtype=np.int64)
    seg_len[record_seg], seg_len[tail_seg] = lens, tail[has_tail]
    cu = np.zeros(len(seg_len) + 1, dtype=np.int64)
    np.cumsum(seg_len, out=cu[1:])
    at = cu[record_seg]  # each record's first slot in the flattened rows

    source, payload, seg = _read(build, units, ordinals, lens, pack_length)
    offset = np.empty(len(seg_len), dtype=np.int64)  # buffer index - slot, per segment
    offset[record_seg], offset[tail_seg] = payload - at, len(source) - pack_length - cu[tail_seg]
    where = np.repeat(offset, seg_len)
    where += _slots(size)
    ids = source.take(where).astype(np.int64)

    # target flags by piece: record r's n segments then, if r ends its row, the row's
    # padding, as a (k, n + 1) grid; then each empty row
    empty = int((per_row == 0).sum())
    piece_len = np.empty(k * (n + 1) + empty, dtype=np.int64)
    grid = piece_len[:k * (n + 1)].reshape(k, n + 1)
    grid[:, :n] = seg
    grid[:, n] = 0
    ends_row = (first + per_row - 1)[per_row > 0]
    grid[ends_row, n] = tail[per_row > 0]
    piece_len[k * (n + 1):] = pack_length
    flag = np.zeros(len(piece_len), dtype=bool)
    flag[:k * (n + 1)].reshape(k, n + 1)[:, :n] = targets
    labels = np.where(np.repeat(flag, piece_len), ids, np.int64(ignore_id))
    labels[at[lens > 0]] = ignore_id  # no loss on a record's first token

    seg_doc = np.full(len(seg_len), -1, dtype=np.int64)
    seg_doc[record_seg] = doc
    width = max(1, int(per_row.max(initial=0)))
    out = {"input_ids": ids.reshape(rows, pack_length),
           "labels": labels.reshape(rows, pack_length),
           "_segment_docs": seg_doc,
           "seq_lens": np.zeros((rows, width), dtype=np.int64),
           "lengths": fill, "cu_seqlens": cu.astype(np.int32),
           "max_seqlen": int(seg_len.max(initial=0))}
    out["seq_lens"][row_of, doc] = lens
    for name, values in (("ordinals", ordinals), ("units", units)):
        out[name] = np.full((rows, width), -1, dtype=np.int64)
        out[name][row_of, doc] = values
    out["_cu"], out["_per_row"] = cu, per_row
    return out


def position_ids(cu_seqlens: np.ndarray, segment_docs: np.ndarray, shape) -> np.ndarray:
    """0, 1, ... from each segment's first token (`cu_seqlens`' segments: records and
    row padding), int64 `shape`."""
    cu = cu_seqlens.astype(np.int64)
    return (_slots(int(cu[-1])) - np.repeat(cu[:-1], np.diff(cu))).reshape(shape)


def document_ids(cu_seqlens: np.ndarray, segment_docs: np.ndarray, shape) -> np.ndarray:
    """Each segment's document id on its tokens, int64 `shape`."""
    return np.repeat(segment_docs, np.diff(cu_seqlens.astype(np.int64))).reshape(shape)


def _read(build, units: np.ndarray, ordinals: np.ndarray, lens: np.ndarray,
          pack_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step's records, whole, in one buffer of the token dtype ending with a row of
    pad ids: (buffer, where each record's payload begins in it, each record's segment
    lengths [k, n], a view of [n, k]); magic and lengths checked, and the lengths against the plan's.

    Locally the records are taken shard by shard straight from the memory maps (one
    sort of the step's records by unit and shard, one gather a shard, no scatter back
    to the step's order); a URL reads each unit's records by `Build.records`."""
    n, k = len(build.segments), len(ordinals)
    payload = np.empty(k, dtype=np.int64)
    seg = np.empty((n, k), dtype=np.int64)  # segment j of record r at [j, r]
    if build.is_local and k:
        shard, row = np.divmod(ordinals, build.samples_per_shard)
        by = np.argsort(units * (int(ordinals.max()) + 1) + ordinals)  # by unit, shard, row
        unit_sorted, shard_sorted, row_sorted = units[by], shard[by], row[by]
        at = np.zeros(k + 1, dtype=np.int64)  # each record's place in the buffer
        np.cumsum(unit_sorted + 1 + n, out=at[1:])
        source = np.empty(int(at[-1]) + pack_length, dtype=build.dtype)
        cuts = [0, *(np.flatnonzero(np.diff(unit_sorted) | np.diff(shard_sorted)) + 1).tolist(), k]
        maps = build._maps  # the open maps, looked up without Build._memmap's LRU upkeep
        for lo, hi, unit, shard_no, begin, end in zip(
                cuts, cuts[1:], unit_sorted[cuts[:-1]].tolist(), shard_sorted[cuts[:-1]].tolist(),
                at[cuts].tolist(), at[cuts[1:]].tolist()):  # one gather a (unit, shard)
            width = unit + 1 + n
            mm = maps.get((unit, shard_no))
            if mm is None:
                mm = build._memmap(unit, shard_no, width)
            mm.take(row_sorted[lo:hi], axis=0, out=source[begin:end].reshape(hi - lo, width))
        seg[:, by] = source[at[:-1] + np.arange(1, 1 + n)[:, None]]
        payload[by] = at[:-1] + 1 + n
        bad = np.flatnonzero((source[at[:-1]] != build.magic) | (seg[:, by].sum(axis=0) > unit_sorted))
        if len(bad):
            i = int(bad[0])
            unit = int(unit_sorted[i])
            build.check_records(unit, source[at[i]:at[i + 1]].reshape(1, -1), shard_sorted[i:i + 1],
                         row_sorted[i:i + 1])  # raises
    else:  # a URL, or no records
        parts, at = [], 0
        for unit in np.unique(units).tolist():
            picked = np.flatnonzero(units == unit)
            got = build.records(unit, ordinals[picked])
            seg[:, picked] = got[:, 1:1 + n].T
            payload[picked] = at + np.arange(len(picked), dtype=np.int64) * got.shape[1] + 1 + n
            parts.append(got.reshape(-1))
            at += got.size
        source = np.concatenate([*parts, np.empty(pack_length, dtype=build.dtype)])
    source[len(source) - pack_length:] = build.pad_id
    found = seg.sum(axis=0)
    if (found != lens).any():
        for unit in np.unique(units[found != lens]).tolist():
            picked = np.flatnonzero(units == unit)
            _check_counts(build, unit, ordinals[picked], found[picked], lens[picked])
    return source, payload, seg.T


def _check_counts(build, unit: int, ordinals: np.ndarray, found: np.ndarray,
                  planned: np.ndarray) -> None:
    bad = np.flatnonzero(found != planned)
    if len(bad):
        k = int(bad[0])
        shard, row = divmod(int(ordinals[k]), build.samples_per_shard)
        raise ShardRecordError(shard=shard_name(unit, shard), row=row,
                               problem=f"segment lengths add up to {int(found[k])}, "
                                       f"the reader's cached token count says {int(planned[k])} "
                                       f"(the shard changed since the cache was written)")


class RowPool:
    """The rows of several assembled parts (`assemble_steps`' dicts, each from its own
    build), joined once, from which steps take their rows (`take`): what a blend of
    builds makes its packed steps from, a few steps' parts assembled together. Each
    row's segments (its records, then its padding) move with it, so a step's
    `cu_seqlens` and segment document ids are those of its rows in their order; the
    per-record columns are padded to the widest part (0 / -1)."""

    def __init__(self, parts: list[dict], pack_length: int):
        self.parts = parts
        self.base = _exclusive(np.asarray([len(p["lengths"]) for p in parts], dtype=np.int64))
        self.width = max(p["seq_lens"].shape[1] for p in parts)
        seg_len, seg_doc, seg_first, seg_count, at = [], [], [], [], 0
        for p in parts:
            cu = p["cu_seqlens"].astype(np.int64)
            bounds = np.searchsorted(cu, np.arange(len(p["lengths"]) + 1) * pack_length)
            seg_len.append(np.diff(cu))
            seg_doc.append(p["_segment_docs"])
            seg_first.append(bounds[:-1] + at)
            seg_count.append(np.diff(bounds))
            at += len(cu) - 1
        self.seg_len, self.seg_doc = np.concatenate(seg_len), np.concatenate(seg_doc)
        self.seg_first, self.seg_count = np.concatenate(seg_first), np.concatenate(seg_count)

    def take(self, part_of_row: np.ndarray, row_in_part: np.ndarray) -> dict:
        """One step's arrays: output row i is row `row_in_part[i]` of part `part_of_row[i]`
        (each row copied once, straight from its part)."""
        n, first = len(part_of_row), self.parts[0]
        out = {name: np.empty((n,) + first[name].shape[1:], first[name].dtype)
               for name in ("input_ids", "labels", "lengths")}
        for name, fill in (("seq_lens", 0), ("ordinals", -1), ("units", -1)):
            out[name] = np.full((n, self.width), fill, dtype=first[name].dtype)
        for p, part in enumerate(self.parts):
            mine = np.flatnonzero(part_of_row == p)
            if not len(mine):
                continue
            src = row_in_part[mine]
            for name in ("input_ids", "labels", "lengths"):
                out[name][mine] = part[name][src]
            k = part["seq_lens"].shape[1]
            for name in ("seq_lens", "ordinals", "units"):
                out[name][mine, :k] = part[name][src]
        rows = self.base[part_of_row] + row_in_part
        first_seg, count = self.seg_first[rows], self.seg_count[rows]
        take = np.repeat(first_seg - _exclusive(count), count) + np.arange(int(count.sum()))
        lens = self.seg_len[take]
        cu = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=cu[1:])
        out.update(cu_seqlens=cu.astype(np.int32), max_seqlen=int(lens.max(initial=0)),
                   _segment_docs=self.seg_doc[take])
        return out


def merge_rows(parts: list[dict], part_of_row: np.ndarray, row_in_part: np.ndarray,
               pack_length: int) -> dict:
    """One step's arrays from the rows of several parts (`RowPool` for one step)."""
    return RowPool(parts, pack_length).take(part_of_row, row_in_part)
