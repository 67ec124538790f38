"""ReadJSONL: byte ranges of the input files -> batches of non-blank lines."""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.errors import MintDimError
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.inputs.input_files import open_range
from mintdim_beam.core.inputs.source import DEFAULT_MAX_LINE_BYTES, RangeBatches
from mintdim_beam.runtime.planned_ranges import INPUTS, Ranges
from mintdim_beam.runtime.progress import range_size, tally

COUNTS = "range_counts"


class ReadRangeFn(beam.DoFn):
    """Read one byte range; yield batches of (local sample, local line, text, error)."""

    def __init__(self, batch_sizes: dict, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self._batch_sizes = batch_sizes  # dataset -> build_batch
        self._max_line_bytes = max_line_bytes

    def process(self, byte_range):
        size, counted = range_size(byte_range), 0
        try:
            # open_range checks the file is the planned one, before and after reading.
            with open_range(byte_range) as handle:
                batches = RangeBatches(handle, byte_range,
                                       self._batch_sizes[byte_range.dataset],
                                       self._max_line_bytes)
                for batch in batches:
                    yield batch
                    done = counted
                    if byte_range.tells_progress:  # a compressed range counts at its end
                        done = min(max(handle.tell() - byte_range.start, counted), size)
                    tally(samples=len(batch[1]), bytes=done - counted)
                    counted = done
        except MintDimError as exc:  # carried to the launcher as its own class
            raise WorkerFailure(exc.to_payload()) from None
        tally(bytes=size - counted)
        yield beam.pvalue.TaggedOutput(COUNTS, (byte_range.key, (batches.lines, batches.samples)))


class ReadJSONL(beam.PTransform):
    """Takes the planned ranges (a list, or `PlannedRanges` on storage), spreads them
    over workers, reads them.

    Outputs `batches` ((dataset, file, range, batch), entries), `range_counts` and
    `inputs` (each file's manifest entry, `planned_ranges`).
    """

    def __init__(self, ranges, batch_sizes: dict, spread: bool = True,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        super().__init__()
        self._ranges = ranges
        self._batch_sizes = batch_sizes
        self._spread = spread
        self._max_line_bytes = max_line_bytes

    def expand(self, pbegin):
        planned = pbegin | "Ranges" >> Ranges(self._ranges, self._spread)
        read = planned["ranges"] | "ReadRanges" >> beam.ParDo(ReadRangeFn(
            self._batch_sizes, self._max_line_bytes)).with_outputs(
            COUNTS, main="batches")
        batches = read.batches
        if self._spread:
            # Few ranges would keep most workers idle: deal the batches out too.
            batches = batches | "SpreadBatches" >> beam.Reshuffle()
        # A single in-process worker gains nothing from either spread and skips both
        # copies (and reads the ranges in order, the first one first).
        return {"batches": batches, COUNTS: read[COUNTS], INPUTS: planned[INPUTS]}
