"""Duplicate groups from a distributed group-by on the content hash: entries arrive in
hash buckets (about one shard's worth of samples each), grouped by hash within a bucket.

Groups are written as ordered parts: part p holds the groups whose first sample_id
falls in [p*W, (p+1)*W), so joining parts in order gives groups by first sample_id.
"""
from __future__ import annotations

import apache_beam as beam
import numpy as np

from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.unit_build.transforms.write import scratch_path

# A staged batch's hash entries on disk: the raw digest, sample id and line per row.
HASH_ROW = np.dtype([("digest", "V32"), ("sample_id", "<i8"), ("line", "<i8")])


def hash_ref(file_pos: int, range_no: int, batch_no: int, lo: int, hi: int) -> tuple:
    """Rows [lo, hi) of a staged batch's hash file: a plain tuple of five ints (the
    batch's place in the input names its file), a few bytes in the group-by's buffer
    where a path and a named tuple took about 200."""
    return file_pos, range_no, batch_no, lo, hi


def hashes_path(dataset, chunk_key) -> str:
    return scratch_path(dataset, "hashes", chunk_key, "bin")


def write_hash_rows(path: str, raw: bytes, sample_ids, lines, output_dir: str) -> None:
    rows = np.empty(len(sample_ids), dtype=HASH_ROW)
    rows["digest"] = np.frombuffer(raw, dtype="V32")
    rows["sample_id"], rows["line"] = sample_ids, lines
    storage.write_atomic(path, rows.tobytes(), output_dir)


def _entries(part, ds: int, dataset):
    """(raw digests, sample ids, file, lines) of a group-by value, read from its batch's
    hash file when it is a `hash_ref` (five ints; the entries themselves are four)."""
    if len(part) == 4:
        return part
    file_pos, range_no, batch_no, lo, hi = part
    path = hashes_path(dataset, (ds, file_pos, range_no, batch_no))
    rows = np.fromfile(path, dtype=HASH_ROW, count=hi - lo, offset=lo * HASH_ROW.itemsize)
    return rows["digest"].tobytes(), rows["sample_id"], file_pos, rows["line"]


def group_rows(element, plans):
    (ds, _), parts = element
    dataset = plans[ds].dataset
    # GroupByKey's iterable: in no set order
    parts = [_entries(part, ds, dataset) for part in parts]
    if not parts:
        return
    raw = np.frombuffer(b"".join(part[0] for part in parts), dtype="V32")
    sample_ids = np.concatenate([part[1] for part in parts])
    file_pos = np.concatenate([np.full(len(part[1]), part[2]) for part in parts])
    lines = np.concatenate([part[3] for part in parts])
    # Grouped by the 32 raw bytes of each hash, which sort as their hex does: 7 times
    # faster than a unique over the hex strings as a numpy string array.
    _, inverse, counts = np.unique(raw, return_inverse=True, return_counts=True)
    repeated = np.flatnonzero(counts[inverse] > 1)
    if not len(repeated):
        return
    # Members of a group sorted by sample_id: sort by (group, sample_id).
    order = repeated[np.lexsort((sample_ids[repeated], inverse[repeated]))]
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    files = plans[ds].dataset.files
    width = plans[ds].dataset.samples_per_shard
    for members in np.split(order, bounds):
        sids = sample_ids[members].tolist()
        row = fmt.duplicate_row(raw[members[0]].tobytes().hex(), [
            (sid, files[fp].given, line)
            for sid, fp, line in zip(sids, file_pos[members].tolist(), lines[members].tolist())])
        yield (ds, sids[0] // width), (sids[0], len(sids), row)


class WriteDuplicatePartFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans

    def process(self, element):
        (ds, part), rows = element
        rows = sorted(rows)
        dataset = self._plans[ds].dataset
        out = dataset.output_path
        path = storage.join(dataset.scratch_path, "parts", "duplicate", f"{part:012d}.jsonl")
        storage.write_text_atomic(path, "".join(row for _, _, row in rows), out)
        yield ds, part, path, len(rows), sum(count for _, count, _ in rows)


class DuplicateIndex(beam.PTransform):
    """((dataset, bucket), (raw 32-byte digests joined, sample ids, file, lines)) ->
    duplicate parts:
    (dataset, part, path, groups, samples)."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, hashes):
        plans = self._plans
        return (hashes
                | "GroupByHashBucket" >> beam.GroupByKey()
                | "DuplicateRows" >> beam.FlatMap(group_rows, plans)
                | "GroupByPart" >> beam.GroupByKey()
                | "WriteDuplicatePart" >> beam.ParDo(WriteDuplicatePartFn(plans)))
