"""Stage 4: one shard from its slices of every range, merged by (hash, file, line):
`<shard>.bin` (the documents' tokens, each followed by the EOD id), `<shard>.idx`
(Megatron's layout, `core.formats.megatron`), `<shard>.csv.gz` (one row per document in shard
order: start,end,id,src,loc) and `<shard>.bin.index` (datatrove's document ends:
uint64 token counts, cumulative). Each is written under a temporary name and renamed
into place; a retried shard writes the same bytes again.

The provenance gzip is written without a name or time in its header, so it too is the
same bytes on every run."""
from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass

import apache_beam as beam
import numpy as np

from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.formats import doc_order, megatron
from mintdim_beam.pack_build import scratch
from mintdim_beam.pack_build.order import KEY, LENGTH, LINE, OFFSET
from mintdim_beam.runtime.faults import BundleFaults
from mintdim_beam.runtime.progress import tally

CHUNK_DOCS = 8192  # documents per write of the .bin


@dataclass(frozen=True)
class ShardWritten:
    shard: int
    name: str
    documents: int
    tokens: int  # EOD included
    bin_bytes: int
    tokens_per_file: tuple  # (file_pos, tokens with EOD) pairs
    sums: tuple = ()  # (file name, checksums.FileSum) of its four files


def shard_name(shard: int) -> str:
    return f"shard_{shard:06d}"


class WriteShardFn(beam.DoFn):
    def __init__(self, plan):
        self._plan = plan
        self._faults = BundleFaults("write")

    def start_bundle(self):
        self._faults.start_bundle()

    def process(self, element):
        shard, slices = element
        slices = sorted(slices, key=lambda s: s.key)
        rows = self._rows(slices)
        order = np.lexsort((rows["line"], rows["file_pos"], rows["key"]))
        rows = {k: v[order] for k, v in rows.items()}
        config, out = self._plan.config, self._plan.config.output_path
        prefix = storage.join(out, shard_name(shard))
        name = shard_name(shard)
        sums = {}
        with scratch.TokenBlocks(slices, self._plan.dtype) as blocks:
            sums[name + ".bin"] = checksums.write_stream(prefix + ".bin",
                                                         self._bin_chunks(rows, blocks), out)
        sequence_lengths = rows["length"] + 1
        sums[name + ".idx"] = checksums.write(
            prefix + ".idx", megatron.idx_bytes(sequence_lengths, self._plan.dtype), out)
        sums[name + ".csv.gz"] = checksums.write_stream(
            prefix + ".csv.gz", self._provenance(rows, sequence_lengths), out)
        # datatrove's document boundaries: cumulative ends in tokens, uint64, no leading 0
        sums[name + ".bin.index"] = checksums.write(
            prefix + ".bin.index",
            np.cumsum(sequence_lengths, dtype=np.uint64).astype("<u8").tobytes(), out)
        self._faults.check(shard)
        tally(assigned=len(order), shards=1)
        per_file = np.bincount(rows["file_pos"], weights=sequence_lengths,
                               minlength=len(config.files)).astype(np.int64)
        yield ShardWritten(shard, name, len(order), int(sequence_lengths.sum()),
                           sums[name + ".bin"].size,
                           tuple((i, int(t)) for i, t in enumerate(per_file) if t),
                           tuple(sorted(sums.items())))

    @staticmethod
    def _rows(slices) -> dict:
        parts = {"key": [], "line": [], "length": [], "offset": [], "file_pos": [], "slice": [],
                 "name": []}
        for i, piece in enumerate(slices):
            table = scratch.read_array(piece.table)[piece.lo:piece.hi]
            if piece.sources:  # keyed records: each row's source name (a file's: its position)
                parts["name"].append(np.asarray(
                    scratch.read_sources(piece.sources, piece.lo, piece.hi), dtype=object))
            parts["key"].append(table[:, KEY].view(np.uint64))
            parts["line"].append(table[:, LINE])
            parts["length"].append(table[:, LENGTH])
            parts["offset"].append(table[:, OFFSET] - piece.tok_lo)
            parts["file_pos"].append(np.full(len(table), piece.file_pos, dtype=np.int64))
            parts["slice"].append(np.full(len(table), i, dtype=np.int64))
        return {k: np.concatenate(v) for k, v in parts.items() if v}

    def _bin_chunks(self, rows, blocks):
        """The .bin in chunks of documents; within a chunk the documents are copied slice
        by slice (a slice's map is used once per chunk, so a bounded set of maps serves
        thousands of slices without reopening one per document)."""
        dtype = self._plan.dtype
        count = len(rows["key"])
        for lo in range(0, count, CHUNK_DOCS):
            hi = min(lo + CHUNK_DOCS, count)
            lengths = rows["length"][lo:hi]
            ends = np.cumsum(lengths + 1)
            starts = ends - lengths - 1
            chunk = np.empty(int(ends[-1]), dtype=dtype)
            chunk[ends - 1] = self._plan.eod_id
            by_slice = np.argsort(rows["slice"][lo:hi], kind="stable")
            slice_of, offsets = rows["slice"][lo:hi], rows["offset"][lo:hi]
            for j in by_slice.tolist():
                start, length = int(offsets[j]), int(lengths[j])
                at = int(starts[j])
                chunk[at:at + length] = blocks.tokens(int(slice_of[j]))[start:start + length]
            yield chunk.tobytes()

    def _provenance(self, rows, sequence_lengths):
        """The gzip CSV in chunks of rows (never the shard's whole text in memory); no
        name or time in the gzip header, so the bytes are the same on every run."""
        files = self._plan.config.files
        keyed = not files  # records of a user's pipeline: each row names its source
        ends = np.cumsum(sequence_lengths)
        starts = ends - sequence_lengths
        sink = _Drain()
        with gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0) as handle:
            for lo in range(0, len(starts), CHUNK_DOCS):
                hi = min(lo + CHUNK_DOCS, len(starts))
                file_pos, lines = rows["file_pos"][lo:hi], rows["line"][lo:hi]
                ids = np.empty(hi - lo, dtype=object)
                if keyed:
                    names = rows["name"][lo:hi]
                    for name in set(names.tolist()):
                        at = names == name
                        ids[at] = doc_order.document_ids(name, lines[at])
                    sources = names.tolist()
                else:
                    for f in np.unique(file_pos):
                        at = file_pos == f
                        ids[at] = doc_order.document_ids(files[int(f)].given, lines[at])
                    sources = [files[int(f)].given for f in file_pos]
                text = io.StringIO()
                csv.writer(text, lineterminator="\n").writerows(zip(
                    starts[lo:hi].tolist(), ends[lo:hi].tolist(), ids.tolist(),
                    sources, lines.tolist()))
                handle.write(text.getvalue().encode("utf-8"))
                yield sink.take()
        yield sink.take()


class _Drain(io.RawIOBase):
    """A write-only file whose bytes are taken out as they come (gzip's sink)."""

    def __init__(self):
        super().__init__()
        self._parts = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out
