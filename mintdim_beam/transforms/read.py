"""ReadJSONL: byte ranges of the input files -> batches of non-blank lines."""
from __future__ import annotations

import apache_beam as beam

from .. import storage
from ..source import RangeBatches

COUNTS = "range_counts"


class ReadRangeFn(beam.DoFn):
    """Read one byte range; yield batches of (local sample, local line, text, error)."""

    def __init__(self, batch_sizes: dict):
        self._batch_sizes = batch_sizes  # dataset -> build_batch

    def process(self, byte_range):
        with storage.open_read(byte_range.path) as handle:
            batches = RangeBatches(handle, byte_range, self._batch_sizes[byte_range.dataset])
            yield from batches
        yield beam.pvalue.TaggedOutput(COUNTS, (byte_range.key, (batches.lines, batches.samples)))


class ReadJSONL(beam.PTransform):
    """Takes the planned ranges, spreads them over workers, reads them.

    Outputs `batches` ((dataset, file, range, batch), entries) and `range_counts`.
    """

    def __init__(self, ranges, batch_sizes: dict, spread: bool = True):
        super().__init__()
        self._ranges = ranges
        self._batch_sizes = batch_sizes
        self._spread = spread

    def expand(self, pbegin):
        ranges = pbegin | "Ranges" >> beam.Create(self._ranges, reshuffle=False)
        if self._spread:
            ranges = ranges | "SpreadRanges" >> beam.Reshuffle()
        read = ranges | "ReadRanges" >> beam.ParDo(ReadRangeFn(self._batch_sizes)).with_outputs(
            COUNTS, main="batches")
        batches = read.batches
        if self._spread:
            # Few ranges would keep most workers idle: deal the batches out too.
            batches = batches | "SpreadBatches" >> beam.Reshuffle()
        # A single in-process worker gains nothing from either spread and skips both
        # copies (and reads the ranges in order, the first one first).
        return {"batches": batches, COUNTS: read[COUNTS]}
