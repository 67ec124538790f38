"""GroupByUnit + ShardWrite: each shard's records gathered by (unit, shard), sorted by
rank, written under a temporary name and renamed; index row parts likewise.

The widest group is one shard's records (samples_per_shard), never a whole unit.
"""
from __future__ import annotations


import apache_beam as beam
from apache_beam.metrics import Metrics

from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.runtime.faults import BundleFaults
from mintdim_beam.runtime.progress import say, tally

PART_KINDS = ("sample", "unk", "lossy")


def scratch_path(dataset, folder: str, chunk_key, extension: str) -> str:
    """A batch's file in this run's scratch dir, named by its place in the input."""
    _, file_pos, range_no, batch_no = chunk_key
    return storage.join(dataset.scratch_path, folder,
                        f"{file_pos:06d}-{range_no:09d}-{batch_no:09d}.{extension}")


def part_path(dataset, kind: str, chunk_key) -> str:
    return scratch_path(dataset, f"parts/{kind}", chunk_key, "jsonl")


class WriteShardFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans
        self._group_records = Metrics.distribution("mintdim", "shard_group_records")
        self._faults = BundleFaults("write")

    def start_bundle(self):
        self._faults.start_bundle()

    def process(self, element):
        (ds, unit, shard), pieces = element
        plan = self._plans[ds]
        ordered = [piece for _, piece in sorted(pieces, key=lambda p: p[0])]
        size = storage.pieces_size(ordered)
        samples = size // fmt.record_bytes(unit, plan.n_segments, plan.bytes_per_token)
        self._group_records.update(samples)
        out = plan.dataset.output_path
        self._faults.check((ds, unit, shard), before_raise=lambda: storage.write_partial_temp(
            storage.pieces_bytes(ordered)[: size // 2], out))
        summed = checksums.write_pieces(storage.join(out, fmt.shard_name(unit, shard)), ordered,
                                        out)
        tally(shards=1)
        for line in fmt.shard_progress_lines(shard, samples, size, unit):
            say(line)
        yield ds, unit, shard, samples, summed


class WriteShards(beam.PTransform):
    """Keyed record pieces -> shard files; outputs (dataset, unit, shard, samples,
    the shard's `checksums.FileSum`)."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, pieces):
        return (pieces
                | "GroupByUnitShard" >> beam.GroupByKey()
                | "WriteShard" >> beam.ParDo(WriteShardFn(self._plans)))


class WriteIndexPartFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans

    def process(self, element):
        kind, chunk_key, text = element
        dataset = self._plans[chunk_key[0]].dataset
        out = dataset.output_path
        path = part_path(dataset, kind, chunk_key)
        yield kind, chunk_key, path, checksums.write_text(path, text, out)


class WriteIndexParts(beam.PTransform):
    """Per-batch sample/unk/lossy rows -> part files, each summed as written: (kind,
    chunk key, path, FileSum), joined in order where they lie by Finalize."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, parts):
        return parts | "WritePart" >> beam.ParDo(WriteIndexPartFn(self._plans))
