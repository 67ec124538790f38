"""Rows of a user's pipeline -> tokenized records: batched, rendered by the file
build's own `render_entries` and encoded by its `Tokenize` transform (helpers, engines
and faults included), then one element per record again.

A batch's keys and sources ride in the fourth slot of its key (where a file's batch
has its number), so the shared stages carry them untouched and the records find their
keys after encoding."""
from __future__ import annotations

import apache_beam as beam
import numpy as np

from mintdim_beam.core.render.render_batch import layout_for, render_entries

ERRORS = "errors"


class _Unkeyed:
    """The key of a bare row: its records leave bare too (pickled by name, so it is
    the same object in every worker process)."""

    def __reduce__(self):
        return "UNKEYED"


UNKEYED = _Unkeyed()


class KeySlot(tuple):
    """(keys, given sources) of a batch's rows, in entry order."""


def as_keyed(element):
    """(key, row) as given, or (UNKEYED, row) for a bare dict."""
    if type(element) is dict:
        return UNKEYED, element
    key, row = element
    return key, row


class RenderRecordsFn(beam.DoFn):
    """A batch of (key, row) -> ((0, 0, 0, KeySlot), rendered batch), and each bad row's
    (key, source, PendingError) on `errors`: a rendered batch as the file build's."""

    def __init__(self, plan, provenance):
        self._plan, self._provenance = plan, provenance

    def setup(self):
        self._layout = layout_for(self._plan)

    def process(self, pairs):
        keys = tuple(key for key, _ in pairs)
        sources = tuple(row_source(row, self._provenance) for _, row in pairs)
        entries = [(i, i, row, None) for i, (_, row) in enumerate(pairs)]
        chunk_key = (0, 0, 0, KeySlot((keys, sources)))
        batch, errors = render_entries(self._layout, chunk_key, entries)
        for error in errors:
            yield beam.pvalue.TaggedOutput(ERRORS, (keys[error.local_line],
                                                    sources[error.local_line], error))
        if batch is not None:
            yield chunk_key, batch

def row_source(row: dict, provenance):
    """The row's (file, line) from its provenance fields, or None without them."""
    if provenance is None:
        return None
    from mintdim_beam.core.errors import RecordKeyError

    file_field, line_field = provenance
    name, line = row.get(file_field), row.get(line_field)
    if type(name) is not str or type(line) is not int or line < 1:
        raise_worker(RecordKeyError(
            key=f"provenance fields {file_field!r}, {line_field!r}",
            problem=f"a row's {file_field!r} must be a str and {line_field!r} a positive "
                    f"int, got {name!r} and {line!r}"))
    return name, line


def raise_worker(error) -> None:
    """Raise `error` from a worker so that every runner carries its class."""
    from mintdim_beam.core.errors.failures import WorkerFailure

    raise WorkerFailure(error.to_payload())


def records_of(element, plan):
    """A tokenized batch -> one (key, record) per record (a bare record for an unkeyed
    row). A record: `ids` (every segment's ids back to back, as the bytes of `dtype`,
    little-endian: Beam's coder copies bytes as they are, where each numpy array cost
    a pickle), `lengths` (per segment),
    `segments` and `kinds` (the template's), `hash` (sha256 of the rendered text),
    `empty_fields`, `unks` and `lossy` (or None), `part` (a split dialogue's record, or
    None), `engine` and `source` (the provenance fields' (file, line), or None)."""
    (_, _, _, slot), batch = element
    keys, sources = slot
    lengths, tokens = batch["lengths"], batch["tokens"]
    tokens = tokens.astype(tokens.dtype.newbyteorder("<"), copy=False)
    raw, dtype = tokens.tobytes(), tokens.dtype.str
    width = tokens.dtype.itemsize
    totals = lengths.sum(axis=1)
    ends = (np.cumsum(totals) * width).tolist()
    starts = [end - total * width for end, total in zip(ends, totals.tolist())]
    engines = _engine_per_record(batch.get("engines") or {}, len(totals))
    parts = batch["parts"].tolist() if "parts" in batch else None
    names, kinds = _segments(plan)
    for j, (line, segment_lengths) in enumerate(zip(batch["lines"].tolist(), lengths.tolist())):
        record = {"ids": raw[starts[j]:ends[j]], "dtype": dtype, "lengths": segment_lengths,
                  "segments": names, "kinds": kinds, "hash": batch["digests"][j],
                  "empty_fields": batch["empty"].get(j, []),
                  "unks": batch["unks"].get(j), "lossy": batch["lossy"].get(j),
                  "part": None if parts is None else parts[j], "engine": engines[j],
                  "source": sources[line]}
        key = keys[line]
        yield record if key is UNKEYED else (key, record)


def error_record(item):
    """(key, source, PendingError) -> the record that carries the error to the sink."""
    key, source, error = item
    record = {"error": error, "source": source}
    return record if key is UNKEYED else (key, record)


def _segments(plan) -> tuple:
    segments = plan.template.segments
    return tuple(s.name for s in segments), tuple(s.kind for s in segments)


def _engine_per_record(engines: dict, count: int) -> list:
    """The batch's {engine: samples} handed out in order: the totals stay exact."""
    out = []
    for name, samples in engines.items():
        out += [name] * samples
    return (out + [None] * count)[:count]


class TokenizeRecordsStages(beam.PTransform):
    """(key, row) or bare rows -> tokenized records and error records."""

    def __init__(self, plan, provenance=None, encoder_processes=None):
        super().__init__()
        self._plan, self._provenance = plan, provenance
        self._encoder_processes = encoder_processes

    def expand(self, rows):
        from mintdim_beam.runtime.options import encoder_processes
        from mintdim_beam.unit_build.transforms.tokenize import Tokenize

        plan = self._plan
        size = plan.dataset.build_batch
        helpers = (encoder_processes(rows.pipeline.options)
                   if self._encoder_processes is None else self._encoder_processes)
        rendered = (rows
                    | "Keyed" >> beam.Map(as_keyed)
                    | "Batch" >> beam.BatchElements(min_batch_size=size, max_batch_size=size)
                    | "Render" >> beam.ParDo(RenderRecordsFn(plan, self._provenance))
                    .with_outputs(ERRORS, main="rendered"))
        tokenized = rendered.rendered | "Tokenize" >> Tokenize({0: plan}, helpers)
        records = tokenized | "Records" >> beam.FlatMap(records_of, plan)
        errors = rendered[ERRORS] | "ErrorRecords" >> beam.Map(error_record)
        return (records, errors) | "All" >> beam.Flatten()
