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
  counts from 0 as a segment of its own;
- `document_ids` the record's index in its row (0, 1, ...), -1 on padding;
- `seq_lens` [rows, k] the records' lengths in row order (0 past a row's records),
  `sample_ids` / `ordinals` / `units` [rows, k] likewise (-1 past them);
- `cu_seqlens` int32 [segments + 1], flash-attention's boundaries of the whole batch
  flattened to `rows * pack_length` tokens: every record, and every row's padding as a
  segment of its own, so the segments cover the flattened batch exactly; `max_seqlen`.

The token counts the plan used (sample_index.jsonl) are checked against each record's
segment lengths as it is read: a record that disagrees is a ShardRecordError."""
from __future__ import annotations

import numpy as np

from mintdim_beam.core.errors import ShardRecordError
from mintdim_beam.core.formats.mintdim import shard_name


def _exclusive(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def assemble(build, records: np.ndarray, per_row: np.ndarray, rows: int, pack_length: int,
             lengths: np.ndarray, offsets: np.ndarray, targets: np.ndarray,
             ignore_id: int) -> dict:
    """Arrays of `rows` rows holding global `records` (row by row, `per_row[i]` in row i,
    rows past `len(per_row)` empty); `lengths` and `offsets` index the global numbering.

    The rows flattened are cut exactly by the pieces: each record's segments, then each
    row's padding. Every per-token array is one `np.repeat` of a per-piece value (where
    its tokens come from, the record's first slot, its document id, whether it is a
    target), so a step costs a few passes over its tokens whatever its records. The
    records are read whole, unit by unit, into one buffer with `pack_length` pad ids at
    its end, the padding's source."""
    n = len(build.segments)
    k = len(records)
    lens = lengths[records]
    unit_index = np.searchsorted(offsets, records, side="right") - 1
    units = np.asarray(sorted(build.counts), dtype=np.int64)[unit_index]
    ordinals = records - offsets[unit_index]

    per_row = np.concatenate([per_row, np.zeros(rows - len(per_row), dtype=np.int64)])
    row_of = np.repeat(np.arange(rows, dtype=np.int64), per_row)
    fill = np.bincount(row_of, weights=lens, minlength=rows).astype(np.int64)
    tail = pack_length - fill
    has_tail = tail > 0
    tails_before = _exclusive(has_tail.astype(np.int64))
    first = _exclusive(per_row)  # each row's first record
    doc = np.arange(k, dtype=np.int64) - first[row_of]
    # coarse segments (flash-attention's): a row's records, then its padding (if any)
    record_seg = np.arange(k, dtype=np.int64) + tails_before[row_of]
    tail_seg = (first + per_row + tails_before)[has_tail]
    seg_len = np.empty(k + len(tail_seg), dtype=np.int64)
    seg_len[record_seg], seg_len[tail_seg] = lens, tail[has_tail]
    cu = np.zeros(len(seg_len) + 1, dtype=np.int64)
    np.cumsum(seg_len, out=cu[1:])
    at = cu[:-1][record_seg]  # each record's first slot in the flattened rows

    source, payload, seg = _read(build, units, ordinals, lens, pack_length)
    pad_at = len(source) - pack_length  # pack_length pad ids end the buffer

    # pieces: a (k, n + 1) grid, record r's n segments then its row's padding if r is
    # the row's last record (else an empty piece); then each empty row, a piece alone
    last = np.zeros(k, dtype=bool)
    last[(first + per_row - 1)[per_row > 0]] = True
    row_tail = np.where(last, tail[row_of], 0)
    tail_start = at + lens  # where a record's row's padding would begin
    empty_at = cu[:-1][tail_seg][per_row[has_tail] == 0]  # rows without records
    piece_len = np.empty(k * (n + 1) + len(empty_at), dtype=np.int64)
    grid = piece_len[:k * (n + 1)].reshape(k, n + 1)
    grid[:, :n], grid[:, n] = seg, row_tail
    piece_len[k * (n + 1):] = pack_length

    def per_token(record_value, tail_value, empty_value, dtype=np.int64) -> np.ndarray:
        table = np.empty(len(piece_len), dtype=dtype)
        cells = table[:k * (n + 1)].reshape(k, n + 1)
        cells[:, :n] = record_value[:, None] if np.ndim(record_value) == 1 else record_value
        cells[:, n] = tail_value
        table[k * (n + 1):] = empty_value
        return np.repeat(table, piece_len)

    size = rows * pack_length
    slots = np.arange(size, dtype=np.int64)
    ids = source[slots + per_token(payload - at, pad_at - tail_start, pad_at - empty_at)]
    ids = ids.astype(np.int64)
    trained = per_token(targets[None, :], False, False, dtype=bool)
    labels = np.where(trained, ids, np.int64(ignore_id))
    labels[at[lens > 0]] = ignore_id  # no loss on a record's first token
    position_ids = slots - per_token(at, tail_start, empty_at)
    document_ids = per_token(doc, -1, -1)

    width = max(1, int(per_row.max(initial=0)))
    out = {"input_ids": ids.reshape(rows, pack_length),
           "labels": labels.reshape(rows, pack_length),
           "position_ids": position_ids.reshape(rows, pack_length),
           "document_ids": document_ids.reshape(rows, pack_length),
           "seq_lens": np.zeros((rows, width), dtype=np.int64),
           "lengths": fill, "cu_seqlens": cu.astype(np.int32),
           "max_seqlen": int(seg_len.max(initial=0))}
    out["seq_lens"][row_of, doc] = lens
    for name, values in (("ordinals", ordinals), ("units", units)):
        out[name] = np.full((rows, width), -1, dtype=np.int64)
        out[name][row_of, doc] = values
    return out


def _read(build, units: np.ndarray, ordinals: np.ndarray, lens: np.ndarray,
          pack_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step's records, whole, in one buffer of the token dtype ending with a row of
    pad ids: (buffer, where each record's payload begins in it, each record's segment
    lengths [k, n]); magic and lengths checked, and the lengths against the plan's.

    Locally the records are taken shard by shard straight from the memory maps (one
    sort of the step's records by unit and shard, one gather a shard, no scatter back
    to the step's order); a URL reads each unit's records by `Build.records`."""
    n, k = len(build.segments), len(ordinals)
    parts, payload = [], np.empty(k, dtype=np.int64)
    seg = np.empty((k, n), dtype=np.int64)
    at = 0
    if build.is_local:
        shard, row = np.divmod(ordinals, build.samples_per_shard)
        by = np.lexsort((shard, units))
        unit_sorted, shard_sorted, row_sorted = units[by], shard[by], row[by]
        new_unit = np.flatnonzero(np.diff(unit_sorted)) + 1
        new_group = np.flatnonzero(np.diff(unit_sorted) | np.diff(shard_sorted)) + 1
        groups = zip([0, *new_group.tolist()], [*new_group.tolist(), k],
                     shard_sorted[np.r_[0, new_group]].tolist() if k else [])
        group = next(groups, None)
        for lo, hi in zip([0, *new_unit.tolist()], [*new_unit.tolist(), k]) if k else ():
            unit = int(unit_sorted[lo])
            width = build.width(unit)
            got = np.empty((hi - lo, width), dtype=build.dtype)
            while group is not None and group[0] < hi:  # the unit's shards, one gather each
                g_lo, g_hi, g_shard = group
                np.take(build._memmap(unit, g_shard, width), row_sorted[g_lo:g_hi], axis=0,
                        out=got[g_lo - lo:g_hi - lo])
                group = next(groups, None)
            build._check(unit, got, shard_sorted[lo:hi], row_sorted[lo:hi])
            picked = by[lo:hi]
            seg[picked] = got[:, 1:1 + n]
            payload[picked] = at + np.arange(hi - lo, dtype=np.int64) * width + 1 + n
            parts.append(got.reshape(-1))
            at += got.size
    else:
        for unit in np.unique(units).tolist():
            picked = np.flatnonzero(units == unit)
            got = build.records(unit, ordinals[picked])
            seg[picked] = got[:, 1:1 + n]
            payload[picked] = at + np.arange(len(picked), dtype=np.int64) * got.shape[1] + 1 + n
            parts.append(got.reshape(-1))
            at += got.size
    found = seg.sum(axis=1)
    for unit in np.unique(units[found != lens]).tolist():
        picked = np.flatnonzero(units == unit)
        _check_counts(build, unit, ordinals[picked], found[picked], lens[picked])
    parts.append(np.full(pack_length, build.pad_id, dtype=build.dtype))
    return np.concatenate(parts), payload, seg


def _check_counts(build, unit: int, ordinals: np.ndarray, found: np.ndarray,
                  planned: np.ndarray) -> None:
    bad = np.flatnonzero(found != planned)
    if len(bad):
        k = int(bad[0])
        shard, row = divmod(int(ordinals[k]), build.samples_per_shard)
        raise ShardRecordError(shard=shard_name(unit, shard), row=row,
                               problem=f"segment lengths add up to {int(found[k])}, "
                                       f"sample_index.jsonl token_count says {int(planned[k])}")
