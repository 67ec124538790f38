"""Duplicate groups from a distributed group-by on the content hash: entries arrive in
hash buckets (about one shard's worth of samples each), grouped by hash within a bucket.

Groups are written as ordered parts: part p holds the groups whose first sample_id
falls in [p*W, (p+1)*W), so joining parts in order gives groups by first sample_id.
"""
from __future__ import annotations

import apache_beam as beam

from .. import format as fmt
from .. import storage


def _group_rows(element, plans):
    (ds, _), batches = element
    by_hash: dict = {}
    for entries in batches:  # GroupByKey hands out an iterable in no set order
        for digest, sid, file_pos, line in entries:
            by_hash.setdefault(digest, []).append((sid, file_pos, line))
    files = plans[ds].dataset.files
    width = plans[ds].dataset.samples_per_shard
    for digest, members in by_hash.items():
        if len(members) < 2:
            continue
        members.sort()
        row = fmt.duplicate_row(digest, [(sid, files[fp].given, line) for sid, fp, line in members])
        yield (ds, members[0][0] // width), (members[0][0], len(members), row)


class WriteDuplicatePartFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans

    def process(self, element):
        (ds, part), rows = element
        rows = sorted(rows)
        out = self._plans[ds].dataset.output_path
        path = storage.join(storage.tmp_dir(out), "parts", "duplicate", f"{part:012d}.jsonl")
        storage.write_text_atomic(path, "".join(row for _, _, row in rows), out)
        yield ds, part, path, len(rows), sum(count for _, count, _ in rows)


class DuplicateIndex(beam.PTransform):
    """((dataset, bucket), [hash entries]) -> duplicate parts: (dataset, part, path, groups, samples)."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, hashes):
        plans = self._plans
        return (hashes
                | "GroupByHashBucket" >> beam.GroupByKey()
                | "DuplicateRows" >> beam.FlatMap(_group_rows, plans)
                | "GroupByPart" >> beam.GroupByKey()
                | "WriteDuplicatePart" >> beam.ParDo(WriteDuplicatePartFn(plans)))
