"""Duplicate groups from a distributed group-by on the content hash: entries arrive in
hash buckets (about one shard's worth of samples each), grouped by hash within a bucket.

Groups are written as ordered parts: part p holds the groups whose first sample_id
falls in [p*W, (p+1)*W), so joining parts in order gives groups by first sample_id.
A bucket's rows go to a scratch file and only (bucket, rows) references reach the
part's group-by: memory stays flat however many samples repeat (issue 28).
"""
from __future__ import annotations

import itertools

import apache_beam as beam
import numpy as np

from mintdim_beam.core.files import checksums, storage
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


def group_members(element, plans):
    """A hash bucket's duplicate groups, in ascending first sample_id: (first sample_id,
    members, duplicate_index row)."""
    (ds, _), parts = element
    dataset = plans[ds].dataset
    # GroupByKey's iterable: in no set order
    parts = [_entries(part, ds, dataset) for part in parts]
    if not parts:
        return
    raw = np.frombuffer(b"".join(part[0] for part in parts), dtype="V32")
    sample_ids = np.concatenate([part[1] for part in parts])
    # each entry's file position, or for keyed records its source name (`records`)
    keyed = any(np.ndim(part[2]) for part in parts)
    file_pos = np.concatenate([part[2] if np.ndim(part[2]) else
                               np.full(len(part[1]), part[2], dtype=object if keyed else None)
                               for part in parts])
    lines = np.concatenate([part[3] for part in parts])
    # Grouped by the 32 raw bytes of each hash, which sort as their hex does: 7 times
    # faster than a unique over the hex strings as a numpy string array.
    _, inverse, counts = np.unique(raw, return_inverse=True, return_counts=True)
    repeated = np.flatnonzero(counts[inverse] > 1)
    if not len(repeated):
        return
    # Members of a group sorted by sample_id: sort by (group, sample_id); the groups
    # then by their first member (a sample is in one group: no two groups share it).
    order = repeated[np.lexsort((sample_ids[repeated], inverse[repeated]))]
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    groups = np.split(order, bounds)
    firsts = sample_ids[order[np.concatenate(([0], bounds))]]
    files = dataset.files
    for g in np.argsort(firsts, kind="stable").tolist():
        members = groups[g]
        sids = sample_ids[members].tolist()
        row = fmt.duplicate_row(raw[members[0]].tobytes().hex(), [
            (sid, fp if type(fp) is str else files[fp].given, line)
            for sid, fp, line in zip(sids, file_pos[members].tolist(), lines[members].tolist())])
        yield sids[0], len(sids), row


# A bucket's rows file holds its duplicate_index rows in first sample_id order; its
# index file one entry per row: first sample_id, members, byte offset and length.
ROW_INDEX = np.dtype([("first", "<i8"), ("count", "<i8"), ("start", "<i8"), ("length", "<i8")])
_CHUNK = 1 << 20  # bytes of rows joined per write


def bucket_rows_path(dataset, bucket: int, extension: str) -> str:
    return storage.join(dataset.scratch_path, "parts", "duplicate_rows",
                        f"{bucket:09d}.{extension}")


def group_rows(element, plans):
    """Write a hash bucket's duplicate rows to its rows file (`bucket_rows_path`) and
    yield, for each part its groups fall in, ((dataset, part), (bucket, lo, hi)): rows
    [lo, hi) of the bucket's index. Why not the rows themselves: a group-by holds its
    whole input, and when samples repeat every sample is in a group, so the rows would
    wait there all at once (116 bytes a sample, held several times over)."""
    (ds, bucket), _ = element
    dataset = plans[ds].dataset
    rows = group_members(element, plans)
    head = next(rows, None)
    if head is None:
        return
    index = []

    def chunks():
        batch, size, start = [], 0, 0
        for first, count, row in itertools.chain([head], rows):
            data = row.encode("utf-8")
            index.append((first, count, start, len(data)))
            start += len(data)
            batch.append(data)
            size += len(data)
            if size >= _CHUNK:
                yield b"".join(batch)
                batch, size = [], 0
        if batch:
            yield b"".join(batch)

    out = dataset.output_path
    storage.write_stream_atomic(bucket_rows_path(dataset, bucket, "jsonl"), chunks(), out)
    table = np.array(index, dtype=ROW_INDEX)
    storage.write_atomic(bucket_rows_path(dataset, bucket, "idx"), table.tobytes(), out)
    part_of = table["first"] // dataset.samples_per_shard
    cuts = (np.flatnonzero(np.diff(part_of)) + 1).tolist()
    for lo, hi in zip([0] + cuts, cuts + [len(table)]):
        yield (ds, int(part_of[lo])), (bucket, lo, hi)


class RowRun:
    """Rows [lo, hi) of a bucket's rows file, read forward `chunk` bytes at a time
    (contiguous: the rows file is in first sample_id order, and so is a part)."""

    def __init__(self, dataset, bucket: int, lo: int, hi: int, chunk: int):
        size = ROW_INDEX.itemsize
        self.index = np.frombuffer(storage.read_range(
            bucket_rows_path(dataset, bucket, "idx"), lo * size, (hi - lo) * size), dtype=ROW_INDEX)
        self._path, self._chunk = bucket_rows_path(dataset, bucket, "jsonl"), chunk
        self._pos = int(self.index["start"][0])
        self._end = int(self.index["start"][-1] + self.index["length"][-1])
        self._buf, self._at = b"", 0

    def take(self, length: int) -> bytes:
        """The next `length` bytes of the run."""
        if self._at + length > len(self._buf):
            rest = self._buf[self._at:]
            want = min(max(self._chunk, length - len(rest)), self._end - self._pos)
            self._buf, self._at = rest + storage.read_range(self._path, self._pos, want), 0
            self._pos += want
        data = self._buf[self._at:self._at + length]
        self._at += length
        return data


def merged_rows(runs: list):
    """The rows of `runs` in ascending first sample_id, in chunks of about `_CHUNK` bytes."""
    which = np.concatenate([np.full(len(run.index), k) for k, run in enumerate(runs)])
    firsts = np.concatenate([run.index["first"] for run in runs])
    lengths = np.concatenate([run.index["length"] for run in runs])
    order = np.argsort(firsts, kind="stable")
    batch, size = [], 0
    for k, length in zip(which[order].tolist(), lengths[order].tolist()):
        batch.append(runs[k].take(length))
        size += length
        if size >= _CHUNK:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)


class WriteDuplicatePartFn(beam.DoFn):
    """One part from the buckets' runs of rows in it: read a bounded chunk of each run
    at a time (about 16 MiB in all) and written as they merge, never whole in memory."""

    READ_BUDGET, MIN_CHUNK = 16 << 20, 64 << 10

    def __init__(self, plans: dict):
        self._plans = plans

    def process(self, element):
        (ds, part), refs = element
        refs = sorted(refs)
        dataset = self._plans[ds].dataset
        chunk = max(self.MIN_CHUNK, self.READ_BUDGET // len(refs))
        runs = [RowRun(dataset, bucket, lo, hi, chunk) for bucket, lo, hi in refs]
        out = dataset.output_path
        path = storage.join(dataset.scratch_path, "parts", "duplicate", f"{part:012d}.jsonl")
        summed = checksums.write_stream(path, merged_rows(runs), out)
        yield ds, part, path, sum(len(r.index) for r in runs), sum(
            int(r.index["count"].sum()) for r in runs), summed


class DuplicateIndex(beam.PTransform):
    """((dataset, bucket), hash entries or `hash_ref`s) -> duplicate parts:
    (dataset, part, path, groups, samples, FileSum). Only small references cross the group-bys;
    the rows go through scratch files (`group_rows`)."""

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
