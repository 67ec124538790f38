"""The unit-build sink: keyed tokenized records -> a finished build directory, by the
same writing half as a file build (`unit_build.graph.write_units`) after `KeyOrder`.

The output is validated and claimed when the transform is applied (before any of the
pipeline runs), the records never stage (`StageRecords` reads blocks of a file's
batches), and Finalize writes the failure notices itself, since no launcher waits."""
from __future__ import annotations

from typing import NamedTuple

import apache_beam as beam

from mintdim_beam.core.inputs.source import number_ranges
from mintdim_beam.records.order import COUNTS, ERRORS, KEY_ERRORS, KeyOrder
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.runtime.rejected_rows import split_rejected


class KeyRanges(NamedTuple):
    """What `number_ranges` needs of a dataset whose "files" are key ranges: its index."""
    index: int


def summary(finalized, plan) -> dict:
    """(dataset, dir) -> the build's summary, as `run()` returns one output's."""
    from mintdim_beam.unit_build.launch import output_summary

    return output_summary(plan)


class WriteKeyedUnits(beam.PTransform):
    """(key, record) pairs -> one summary dict, the build written and finalized."""

    def __init__(self, plan, chooser, claim, buckets: int | None):
        super().__init__()
        self._plan, self._chooser, self._claim = plan, chooser, claim
        self._buckets = buckets

    def expand(self, keyed):
        from mintdim_beam.unit_build.graph import write_units

        p, plan, buckets = keyed.pipeline, self._plan, self._buckets
        ordered = keyed | "KeyOrder" >> KeyOrder(plan, buckets)
        errors, rejected = split_rejected(p, ordered[ERRORS], {0} if plan.bad_rows.skip else set())
        errors = (errors, ordered[KEY_ERRORS]) | "WithKeyErrors" >> beam.Flatten()
        ranges = KeyRanges(0)
        numbering = ordered[COUNTS] | "NumberRecords" >> ApplyToAll(
            lambda counts, gone: number_ranges([ranges], dict(counts), gone),
            beam.pvalue.AsList(rejected))
        finalized = write_units(p, {0: plan}, {0: self._chooser}, {
            "numbering": numbering, "errors": errors, "tokenized": ordered["tokenized"],
            "rejected": rejected, "inputs": p | "NoInputFiles" >> beam.Create([])},
            staged=False, claim=self._claim)
        return finalized | "Summary" >> beam.Map(summary, plan)
