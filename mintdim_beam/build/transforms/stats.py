"""Histogram and stats: a CombineFn over per-batch partial counts."""
from __future__ import annotations

from collections import Counter

import apache_beam as beam

_SCALARS = ("total_samples", "total_tokens", "samples_with_unk", "unk_tokens")


class StatsCombineFn(beam.CombineFn):
    def create_accumulator(self):
        return {**{k: 0 for k in _SCALARS}, "unit_distribution": Counter()}

    def add_input(self, acc, partial):
        for key in _SCALARS:
            acc[key] += partial[key]
        acc["unit_distribution"].update(partial["unit_distribution"])
        return acc

    def merge_accumulators(self, accumulators):
        merged = self.create_accumulator()
        for acc in accumulators:
            self.add_input(merged, acc)
        return merged

    def extract_output(self, acc):
        return {**{k: acc[k] for k in _SCALARS},
                "unit_distribution": dict(acc["unit_distribution"])}


class BuildStats(beam.PTransform):
    """(dataset, partial stats) -> (dataset, stats) with the unit histogram."""

    def expand(self, partials):
        return partials | "CombineStats" >> beam.CombinePerKey(StatsCombineFn())
