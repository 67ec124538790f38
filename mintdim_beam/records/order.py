"""Keyed records -> the batches the writing half of a unit-build takes, in key order.

The key space is cut into ranges (`range_count`) at quantiles of a sample of the keys; each
range is one group, sorted there, and becomes one virtual "range" of the numbering
(`number_ranges`: its count of samples), so sample ids run dense from 0 in key order
without any step holding every key. Where the cuts fall changes which worker sorts
what, never a byte of the output (equal keys always share a range). Each batch carries
its records' sources (`sources`, `source_lines`), which the indices print instead of a
file's name and line."""
from __future__ import annotations

import bisect
from collections import Counter

import apache_beam as beam
import numpy as np

from mintdim_beam.core.errors.failures import PendingError
from mintdim_beam.records.keys import KeyTypeError, key_text, sort_key, source_of

COUNTS = "range_counts"
ERRORS = "errors"  # the rows' own: bad rows (rejected under skip), skipped dialogues
KEY_ERRORS = "key_errors"  # a repeated key: an error whatever the bad-row policy
SAMPLED_KEYS = 1 << 16  # keys sampled to place the cuts (a reservoir per bundle, merged)
RANGE_RECORDS = 50_000  # records per key range, when the ranges are counted for the corpus
MAX_RANGES = 8192  # at most SAMPLED_KEYS / 8: every cut between distinct sampled keys


def with_sort_key(element):
    """(key, record) -> (sort key bytes, key, record); a key no order can take stops
    the build with `RecordKeyError`."""
    from mintdim_beam.core.errors import RecordKeyError
    from mintdim_beam.records.tokenize import raise_worker

    if type(element) is not tuple or len(element) != 2:
        raise_worker(RecordKeyError(key=repr(element)[:200], problem=(
            "the sinks take (key, record) pairs: key the records first, "
            "for example beam.Map(lambda r: ((r['file'], r['line']), r)) before TokenizeRecords")))
    key, record = element
    try:
        return sort_key(key), key, record
    except KeyTypeError as exc:
        raise_worker(RecordKeyError(key=repr(key)[:200], problem=str(exc)))


def range_count(records: int, buckets: int | None) -> int:
    """The key ranges: `buckets` if given, else one per RANGE_RECORDS records (at most
    MAX_RANGES: past 400 million records a range holds more)."""
    if buckets is not None:
        return buckets
    return max(1, min(MAX_RANGES, -(-records // RANGE_RECORDS)))


def cut_points(sampled: list, buckets: int) -> list:
    """`buckets - 1` sort keys at the sample's quantiles (fewer when it is small)."""
    keys = sorted(set(sampled))
    if buckets <= 1 or not keys:
        return []
    return sorted({keys[len(keys) * i // buckets] for i in range(1, buckets)})


def keyed_groups(items):
    """A key range's (sort key, key, record) items -> (key, its records, why it
    repeats or "") per key, in key order (a split dialogue's records in part order)."""
    items = sorted(items, key=lambda item: (item[0], _part(item[2])))
    i = 0
    while i < len(items):
        end = i + 1
        while end < len(items) and items[end][0] == items[i][0]:
            end += 1
        group = items[i:end]
        i = end
        yield group[0][1], [item[2] for item in group], _repeated(group)


def key_error(bucket: int, sample: int, key, source, why: str) -> PendingError:
    """A repeated key at its place: an error whatever the bad-row policy."""
    return PendingError(0, bucket, 0, sample, "RecordKeyError",
                        {"key": key_text(key), "problem": why}, "none", local_sample=sample,
                        source=source)


class OrderBucketFn(beam.DoFn):
    """One key range's records -> its batches of `build_batch` samples in key order
    (the records of a split dialogue together), its count, and pending errors: bad
    rows, skipped dialogues, and a key that repeats."""

    def __init__(self, plan):
        self._plan = plan

    def process(self, element):
        bucket, items = element
        size, range_key = self._plan.dataset.build_batch, (0, bucket, 0)
        batch, batch_no, sample = [], 0, 0
        for key, records, repeated in keyed_groups(items):
            source = source_of(key, records[0].get("source"))
            if repeated:
                yield beam.pvalue.TaggedOutput(KEY_ERRORS, key_error(bucket, sample, key,
                                                                     source, repeated))
            elif "error" in records[0]:
                yield beam.pvalue.TaggedOutput(ERRORS, placed(records[0]["error"], bucket,
                                                               sample, source))
            else:
                batch.append((sample, source, records))
            sample += 1
            if len(batch) >= size:
                yield _batch(range_key + (batch_no,), batch)
                batch, batch_no = [], batch_no + 1
        if batch:
            yield _batch(range_key + (batch_no,), batch)
        yield beam.pvalue.TaggedOutput(COUNTS, (range_key, (sample, sample)))


def _part(record) -> int:
    part = record.get("part")
    return -1 if part is None else part


def _repeated(group) -> str:
    """Why a key's records cannot be one row's, or ""."""
    if len(group) == 1:
        return ""
    parts = [item[2].get("part") for item in group]
    if None in parts or any("error" in item[2] for item in group) or \
            parts != list(range(len(parts))):
        return f"the key is given to {_rows(group)} rows (each row needs a key of its own)"
    return ""


def _rows(group) -> str:
    starts = sum(1 for item in group if item[2].get("part") in (None, 0))
    return str(max(starts, 2))


def placed(error, bucket: int, sample: int, source) -> PendingError:
    """A row's pending error at its place in the key order."""
    import dataclasses

    return dataclasses.replace(error, dataset=0, file_pos=bucket, range_no=0,
                               local_line=sample, local_sample=sample, source=source)


def _batch(chunk_key, rows):
    """(chunk key, tokenized batch) as `Tokenize` gives one, with the rows' sources."""
    records = [(sample, source, record) for sample, source, group in rows for record in group]
    samples = np.asarray([sample for sample, _, _ in records], dtype=np.int64)
    lengths = np.asarray([record["lengths"] for _, _, record in records], dtype=np.int64)
    dtype = np.dtype(records[0][2]["dtype"])  # the encoder's own (uint16 or uint32)
    tokens = np.frombuffer(b"".join([record["ids"] for _, _, record in records]),
                           dtype=dtype).astype(dtype.newbyteorder("="), copy=False)
    batch = {"samples": samples, "lines": samples.copy(),
             "digests": [record["hash"] for _, _, record in records],
             "empty": {j: record["empty_fields"] for j, (_, _, record) in enumerate(records)
                       if record["empty_fields"]},
             "lengths": lengths, "tokens": tokens,
             "unks": {j: record["unks"] for j, (_, _, record) in enumerate(records)
                      if record["unks"] is not None},
             "lossy": {j: record["lossy"] for j, (_, _, record) in enumerate(records)
                       if record["lossy"] is not None},
             "engines": dict(Counter(record["engine"] for _, _, record in records
                                     if record["engine"] is not None)),
             "sources": [source[0] for _, source, _ in records],
             "source_lines": np.asarray([source[1] for _, source, _ in records],
                                        dtype=np.int64)}
    if records[0][2]["part"] is not None:
        batch["parts"] = np.asarray([record["part"] for _, _, record in records],
                                    dtype=np.int64)
    return chunk_key, batch


class GroupKeyRanges(beam.PTransform):
    """(key, record) pairs -> (key range, [(sort key, key, record)]) groups, the ranges
    in key order: `buckets` of them, or None: one per RANGE_RECORDS records."""

    def __init__(self, buckets: int | None = None):
        super().__init__()
        self._buckets = buckets

    def expand(self, keyed):
        buckets = self._buckets
        sorted_keys = keyed | "SortKeys" >> beam.Map(with_sort_key)
        keys = sorted_keys | "KeysOnly" >> beam.Map(lambda item: item[0])
        records = keys | "CountKeys" >> beam.combiners.Count.Globally()
        cuts = (keys
                | "SampleKeys" >> beam.combiners.Sample.FixedSizeGlobally(SAMPLED_KEYS)
                | "Cuts" >> beam.Map(lambda sampled, n: cut_points(sampled, range_count(n, buckets)),
                                     beam.pvalue.AsSingleton(records)))
        return (sorted_keys
                | "ToRanges" >> beam.Map(lambda item, at: (bisect.bisect_right(at, item[0]), item),
                                         beam.pvalue.AsSingleton(cuts))
                | "GroupRanges" >> beam.GroupByKey())


class KeyOrder(beam.PTransform):
    """(key, record) pairs -> {"tokenized", "range_counts", "errors", "key_errors"} in
    key order (a unit-build's batches), over `GroupKeyRanges(buckets)`."""

    def __init__(self, plan, buckets: int | None = None):
        super().__init__()
        self._plan, self._buckets = plan, buckets

    def expand(self, keyed):
        ordered = (keyed
                   | "GroupKeyRanges" >> GroupKeyRanges(self._buckets)
                   | "OrderRange" >> beam.ParDo(OrderBucketFn(self._plan)).with_outputs(
                       COUNTS, ERRORS, KEY_ERRORS, main="tokenized"))
        return {"tokenized": ordered.tokenized, COUNTS: ordered[COUNTS],
                ERRORS: ordered[ERRORS], KEY_ERRORS: ordered[KEY_ERRORS]}
