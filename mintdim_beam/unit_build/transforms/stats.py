"""Histogram and stats: a CombineFn over per-batch partial counts."""
from __future__ import annotations

from collections import Counter

import apache_beam as beam

_SCALARS = ("total_samples", "total_tokens", "samples_with_unk", "unk_tokens",
            "segments_checked", "lossy_segments", "lossy_samples")
_COUNTERS = ("unit_distribution", "lossy_kinds", "engines")  # engines: samples each encoded


class StatsCombineFn(beam.CombineFn):
    def create_accumulator(self):
        return {**{k: 0 for k in _SCALARS}, **{k: Counter() for k in _COUNTERS}}

    def add_input(self, acc, partial):
        for key in _SCALARS:
            acc[key] += partial.get(key, 0)
        for key in _COUNTERS:
            acc[key].update(partial.get(key) or {})
        return acc

    def merge_accumulators(self, accumulators):
        merged = self.create_accumulator()
        for acc in accumulators:
            self.add_input(merged, acc)
        return merged

    def extract_output(self, acc):
        return {**{k: acc[k] for k in _SCALARS}, **{k: dict(acc[k]) for k in _COUNTERS}}


class BuildStats(beam.PTransform):
    """(dataset, partial stats) -> (dataset, stats) with the unit histogram."""

    def expand(self, partials):
        return partials | "CombineStats" >> beam.CombinePerKey(StatsCombineFn())
