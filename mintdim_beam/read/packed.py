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
from mintdim_beam.read import masks


def _exclusive(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def assemble(build, records: np.ndarray, per_row: np.ndarray, rows: int, pack_length: int,
             lengths: np.ndarray, offsets: np.ndarray, targets: np.ndarray,
             ignore_id: int) -> dict:
    """Arrays of `rows` rows holding global `records` (row by row, `per_row[i]` in row i,
    rows past `len(per_row)` empty); `lengths` and `offsets` index the global numbering.

    The rows flattened are cut exactly by the segments (each record, then each row's
    padding), so position and document ids are one `np.repeat` over the segments, and
    each unit's tokens are scattered once to their places in the flattened rows."""
    n = len(build.segments)
    lens = lengths[records]
    unit_index = np.searchsorted(offsets, records, side="right") - 1
    units = np.asarray(sorted(build.counts), dtype=np.int64)[unit_index]
    ordinals = records - offsets[unit_index]

    per_row = np.concatenate([per_row, np.zeros(rows - len(per_row), dtype=np.int64)])
    row_of = np.repeat(np.arange(rows, dtype=np.int64), per_row)
    fill = np.bincount(row_of, weights=lens, minlength=rows).astype(np.int64)
    tail = pack_length - fill
    has_tail = (tail > 0).astype(np.int64)
    first = _exclusive(per_row)  # each row's first record
    doc = np.arange(len(records), dtype=np.int64) - first[row_of]
    # segment order: a row's records, then its padding (if any)
    record_seg = np.arange(len(records), dtype=np.int64) + _exclusive(has_tail)[row_of]
    tail_seg = (first + per_row + _exclusive(has_tail))[tail > 0]
    seg_len = np.empty(len(records) + len(tail_seg), dtype=np.int64)
    seg_len[record_seg], seg_len[tail_seg] = lens, tail[tail > 0]
    seg_doc = np.full(len(seg_len), -1, dtype=np.int64)
    seg_doc[record_seg] = doc
    cu = np.zeros(len(seg_len) + 1, dtype=np.int64)
    np.cumsum(seg_len, out=cu[1:])
    at = cu[:-1][record_seg]  # each record's first slot in the flattened rows

    size = rows * pack_length
    ids = np.full(size, build.pad_id, dtype=np.int64)
    # target spans as +1 / -1 marks over the flattened rows, summed once at the end
    marks_at, marks = [], []
    for unit in np.unique(units).tolist():
        sel = np.flatnonzero(units == unit)
        got = build.records(unit, ordinals[sel])
        seg = got[:, 1:1 + n].astype(np.int64)
        _check_counts(build, unit, ordinals[sel], seg.sum(axis=1), lens[sel])
        mine = lens[sel]
        record = np.repeat(np.arange(len(sel), dtype=np.int64), mine)
        within = np.arange(len(record), dtype=np.int64) - np.repeat(_exclusive(mine), mine)
        ids[np.repeat(at[sel], mine) + within] = got.reshape(-1)[
            record * got.shape[1] + (1 + n) + within]
        begin = masks.starts(seg)[:, targets]
        end = begin + seg[:, targets]
        marks_at += [(at[sel][:, None] + begin).ravel(), (at[sel][:, None] + end).ravel()]
        marks += [np.ones(begin.size), -np.ones(end.size)]
    trained = np.zeros(size, dtype=bool)
    if marks_at:
        depth = np.bincount(np.concatenate(marks_at), weights=np.concatenate(marks),
                            minlength=size + 1)
        trained = np.cumsum(depth[:size]) > 0.5
    trained[at[lens > 0]] = False  # no loss on a record's first token
    labels = np.where(trained, ids, np.int64(ignore_id))

    width = max(1, int(per_row.max(initial=0)))
    out = {"input_ids": ids.reshape(rows, pack_length),
           "labels": labels.reshape(rows, pack_length),
           "position_ids": (np.arange(size, dtype=np.int64)
                            - np.repeat(cu[:-1], seg_len)).reshape(rows, pack_length),
           "document_ids": np.repeat(seg_doc, seg_len).reshape(rows, pack_length),
           "seq_lens": np.zeros((rows, width), dtype=np.int64),
           "lengths": fill, "cu_seqlens": cu.astype(np.int32),
           "max_seqlen": int(seg_len.max(initial=0))}
    out["seq_lens"][row_of, doc] = lens
    for name, values in (("ordinals", ordinals), ("units", units)):
        out[name] = np.full((rows, width), -1, dtype=np.int64)
        out[name][row_of, doc] = values
    return out


def _check_counts(build, unit: int, ordinals: np.ndarray, found: np.ndarray,
                  planned: np.ndarray) -> None:
    bad = np.flatnonzero(found != planned)
    if len(bad):
        k = int(bad[0])
        shard, row = divmod(int(ordinals[k]), build.samples_per_shard)
        raise ShardRecordError(shard=shard_name(unit, shard), row=row,
                               problem=f"segment lengths add up to {int(found[k])}, "
                                       f"sample_index.jsonl token_count says {int(planned[k])}")
