"""What an export writes, a task at a time: the rows of one range of a build, as named
columns every format writer takes (`Columns`).

Three kinds of task (`Task.kind`):
- `records`: a unit-build's records, one row each, for the sample-index lines whose
  first byte lies in the task's byte range of `sample_index.jsonl` (so rows are in
  sample id order and tasks partition the build): `input_ids`, `attention_mask`,
  `labels` (the token where the record is trained, `ignore_id` elsewhere),
  `completion_mask` and `assistant_masks` (1 on the trained tokens: TRL's names for a
  prompt-completion and a conversational record), `sample_id`, `source_file`,
  `source_line`. A preference build's pairs: `prompt_ids`, `chosen_ids`,
  `rejected_ids` (TRL's DPO layout: the shared prefix, then each completion) and the
  same provenance.
- `packed`: a unit-build's packed rows of `pack_length` (the `UnitReader`'s best-fit plan
  for epoch 0 and the seed), rows `[start, end)`: `input_ids`, `labels`, `position_ids`
  (from 0 at each record and at the row's padding), `seq_lengths` (the records' lengths,
  then the padding's: they sum to `pack_length`, as TRL's padding-free rows), `sample_ids`.
- `samples`: a pack-build's samples of `seq_len + 1` tokens in `PackReader`'s epoch-0
  order, samples `[start, end)` of it: `input_ids` and `labels` (the first `seq_len`
  tokens: aligned, the model shifts), `position_ids` and `seq_lengths` (document pieces),
  `tokens` (all `seq_len + 1`, Megatron's sample), `sample_id`.

Labels are aligned (Hugging Face's convention: labels[t] is token t's own target)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Task:
    number: int  # the part's number: its file names
    kind: str  # records | packed | samples
    start: int
    end: int


@dataclass
class Columns:
    """A task's rows: `ragged` name -> (values, offsets) (a list per row), `fixed` name ->
    [rows, width] array, `scalars` name -> [rows] array (ints or strings), in order."""

    rows: int
    ragged: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)

    def row_lists(self, name: str) -> list:
        values, offsets = self.ragged[name]
        return [values[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def _ragged(arrays: list, dtype) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    values = (np.concatenate(arrays).astype(dtype, copy=False) if arrays
              else np.zeros(0, dtype=dtype))
    return values, offsets


def index_lines(root: str, start: int, end: int) -> list[dict]:
    """The sample-index rows whose line starts in [start, end) of `sample_index.jsonl`."""
    import json

    from mintdim_beam.core.files import storage
    from mintdim_beam.core.formats import mintdim as fmt
    from mintdim_beam.core.inputs.source import iter_range_lines

    with storage.open_read(storage.join(root, fmt.SAMPLE_INDEX)) as handle:
        return [json.loads(line) for line in iter_range_lines(handle, start, end) if line.strip()]


def records(build, rows: list[dict], targets: np.ndarray | None, chosen: int | None,
            ignore_id: int) -> Columns:
    """The records of `rows` (sample-index rows): plain or, with `chosen` (the chosen
    segment's index), preference pairs."""
    n = len(build.segments)
    sample_ids = np.asarray([r["sample_id"] for r in rows], dtype=np.int64)
    units = np.asarray([r["unit_size"] for r in rows], dtype=np.int64)
    payloads: list = [None] * len(rows)
    lengths = np.zeros((len(rows), n), dtype=np.int64)
    for unit in np.unique(units).tolist():
        at = np.flatnonzero(units == unit)
        ordinals = np.searchsorted(build.sample_ids(unit), sample_ids[at])
        got = build.records(unit, ordinals)
        lengths[at] = got[:, 1:1 + n]
        for i, row in zip(at.tolist(), got):
            payloads[i] = row[1 + n:]
    cols = Columns(len(rows))
    totals = lengths.sum(axis=1)
    ids = [p[:t].astype(np.int64) for p, t in zip(payloads, totals)]
    starts = np.zeros_like(lengths)
    np.cumsum(lengths[:, :-1], axis=1, out=starts[:, 1:])
    if chosen is not None:
        prefix = starts[:, chosen]
        c, r = lengths[:, chosen], lengths[:, chosen + 1]
        cols.ragged["prompt_ids"] = _ragged([x[:p] for x, p in zip(ids, prefix)], np.int32)
        cols.ragged["chosen_ids"] = _ragged([x[p:p + k] for x, p, k in zip(ids, prefix, c)],
                                            np.int32)
        cols.ragged["rejected_ids"] = _ragged(
            [x[p + k:p + k + j] for x, p, k, j in zip(ids, prefix, c, r)], np.int32)
    else:
        masks = []
        for i, x in enumerate(ids):
            mask = np.zeros(len(x), dtype=np.int8)
            for s in np.flatnonzero(targets).tolist():
                mask[starts[i, s]:starts[i, s] + lengths[i, s]] = 1
            masks.append(mask)
        cols.ragged["input_ids"] = _ragged(ids, np.int32)
        cols.ragged["attention_mask"] = _ragged([np.ones(len(x), np.int8) for x in ids], np.int8)
        cols.ragged["labels"] = _ragged([np.where(m == 1, x, ignore_id) for x, m in
                                         zip(ids, masks)], np.int64)
        cols.ragged["completion_mask"] = _ragged(masks, np.int8)
        cols.ragged["assistant_masks"] = _ragged(masks, np.int8)
    cols.scalars["sample_id"] = sample_ids
    cols.scalars["source_file"] = [str(r["source_file"]) for r in rows]
    cols.scalars["source_line"] = np.asarray([r["source_line"] for r in rows], dtype=np.int64)
    return cols


def packed_rows(reader, start: int, end: int) -> Columns:
    """Rows [start, end) of `reader`'s (a packed UnitReader's) epoch-0 plan."""
    arrays = reader.rows_at(0, start, end)
    from mintdim_beam.read import packed

    width = reader.pack_length
    cu = arrays["cu_seqlens"].astype(np.int64)
    bounds = np.searchsorted(cu, np.arange(end - start + 1) * width)
    seg = np.diff(cu)
    cols = Columns(end - start)
    cols.fixed["input_ids"] = arrays["input_ids"].astype(np.int32)
    cols.fixed["labels"] = arrays["labels"]
    cols.fixed["position_ids"] = packed.position_ids(
        arrays["cu_seqlens"], arrays["_segment_docs"], arrays["input_ids"].shape).astype(np.int32)
    cols.ragged["seq_lengths"] = _ragged([seg[a:b] for a, b in zip(bounds[:-1], bounds[1:])],
                                         np.int32)
    build = reader.build
    sample_ids = np.full(arrays["ordinals"].shape, -1, dtype=np.int64)
    for unit in np.unique(arrays["units"][arrays["units"] >= 0]).tolist():
        mine = arrays["units"] == unit
        sample_ids[mine] = build.sample_ids(unit)[arrays["ordinals"][mine]]
    cols.ragged["sample_ids"] = _ragged([r[r >= 0] for r in sample_ids], np.int64)
    return cols


def samples(reader, start: int, end: int) -> Columns:
    """Samples [start, end) of `reader`'s (a PackReader's) epoch-0 order."""
    reader.set_epoch(0)
    ids = np.asarray(reader.sample_order()[start:end], dtype=np.int64)
    tokens, (counts, sizes) = reader.samples_at(ids)
    seq_len = reader.seq_len
    cols = Columns(end - start)
    cols.fixed["input_ids"] = tokens[:, :seq_len].astype(np.int32)
    cols.fixed["labels"] = tokens[:, :seq_len].astype(np.int64)
    cols.fixed["tokens"] = tokens.astype(np.int32)
    # each sample's pieces over its seq_len + 1 tokens; over input_ids the last is 1 shorter
    ends = np.cumsum(counts)
    pieces = [sizes[e - c:e].copy() for c, e in zip(counts, ends)]
    for p in pieces:
        p[-1] -= 1
    pieces = [p[p > 0] for p in pieces]
    cols.ragged["seq_lengths"] = _ragged(pieces, np.int32)
    cols.fixed["position_ids"] = np.stack(
        [np.concatenate([np.arange(k) for k in p]) for p in pieces]).astype(np.int32)
    cols.scalars["sample_id"] = ids
    return cols
