"""The planned ranges into a pipeline: from storage when planned there
(`core.inputs.planned`), else from the graph itself (small audit passes). A remote file
the launcher only listed (`source.FileToPlan`) is planned here, by the worker that takes
it, and every file's manifest entry leaves as the `inputs` output."""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.errors import MintDimError
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.inputs.input_files import input_entry
from mintdim_beam.core.inputs.planned import PlannedRanges
from mintdim_beam.core.inputs.source import FileToPlan

INPUTS = "inputs"


class PlanFileFn(beam.DoFn):
    """A planned range passes; a FileToPlan becomes its ranges. Each file's first range
    also gives (dataset, file, manifest entry) on `inputs`."""

    def process(self, planned):
        if isinstance(planned, FileToPlan):
            try:
                ranges = planned.ranges()
            except MintDimError as exc:  # a format error or a changed file, as its class
                raise WorkerFailure(exc.to_payload()) from None
        else:
            ranges = [planned]
        for byte_range in ranges:
            if byte_range.range_no == 0:
                yield beam.pvalue.TaggedOutput(INPUTS, (byte_range.dataset, byte_range.file_pos,
                                                        input_entry(byte_range)))
            yield byte_range


class Ranges(beam.PTransform):
    """`ranges` (ByteRange) and `inputs` PCollections; `spread` deals the ranges out
    over the workers (a single in-process worker skips it and reads them in plan order)."""

    def __init__(self, ranges, spread: bool):
        super().__init__()
        self._ranges, self._spread = ranges, spread
        self._deferred = (ranges.deferred if isinstance(ranges, PlannedRanges)
                          else any(isinstance(r, FileToPlan) for r in ranges))

    def expand(self, pbegin):
        if isinstance(self._ranges, PlannedRanges):
            # One small reference a chunk in the graph, read back here (100,000 ranges
            # are a few MB: one worker loads them in about a second).
            chunks = pbegin | "Chunks" >> beam.Create(self._ranges.chunks, reshuffle=False)
            planned = chunks | "Load" >> beam.FlatMap(iter)
        else:
            planned = pbegin | "Listed" >> beam.Create(self._ranges, reshuffle=False)
        if self._spread and self._deferred:  # files left to plan: probed on every worker
            planned = planned | "SpreadPlanned" >> beam.Reshuffle()
        out = planned | "PlanFiles" >> beam.ParDo(PlanFileFn()).with_outputs(INPUTS,
                                                                              main="ranges")
        ranges = out.ranges
        if self._spread:
            ranges = ranges | "SpreadRanges" >> beam.Reshuffle()
        # Read as a side input: the BundleBasedDirectRunner hands one read straight from
        # a multi-output ParDo every output's elements; a plain Map in between fixes it.
        return {"ranges": ranges, INPUTS: out[INPUTS] | "Entries" >> beam.Map(lambda e: e)}
