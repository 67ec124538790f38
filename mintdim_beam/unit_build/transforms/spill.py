"""SpillBatches: a local output's tokenized batches wait for the global step on disk,
not in memory; only a handle crosses it.

Why: the in-process runner keeps every element of a collection that waits for a side
input (the line numbering, the overflow decisions, the unit offsets) in memory until
that side input exists, so a batch's metadata (token counts, hashes, index-row
material, the tokens of samples still waiting for an overflow decision) stayed resident
for the whole first phase: about 750 MB per million samples. Here each batch is pickled
to the run's scratch directory as soon as its records are staged, and the element
becomes a `SpilledBatch`: the file's path plus the two small things the global step
needs from it (its declared-unit counts for `UnitOffsets`, its overflow candidates for
`DecideOverflows`). `AssignFn` reads each batch back, one at a time. The bytes written
are the same; outputs on object stores keep their batches in the pipeline (the
runner's shuffle already holds them off the heap on Dataflow and Flink)."""
from __future__ import annotations

import pickle
from typing import NamedTuple

import apache_beam as beam
import numpy as np

from mintdim_beam.core.files import storage
from mintdim_beam.unit_build.transforms.write import scratch_path


class SpilledBatch(NamedTuple):
    path: str
    declared: dict  # {unit: samples} for the samples that fit a declared unit
    candidates: tuple  # overflow_candidates' output for this batch: () or one (key, rows)


def spill_path(dataset, chunk_key) -> str:
    return scratch_path(dataset, "batches", chunk_key, "pkl")


def load(batch):
    """The batch itself, read back when it was spilled."""
    if not isinstance(batch, SpilledBatch):
        return batch
    with open(batch.path, "rb") as handle:
        return pickle.load(handle)


class SpillBatches(beam.PTransform):
    """Tokenized (staged) batches -> `SpilledBatch` handles for the datasets in `spilled`."""

    def __init__(self, plans: dict, spilled: set, declared_units, overflow_candidates):
        super().__init__()
        self._plans, self._spilled = plans, spilled
        self._declared, self._candidates = declared_units, overflow_candidates

    def expand(self, tokenized):
        plans, spilled = self._plans, self._spilled
        declared_units, overflow_candidates = self._declared, self._candidates

        def spill(element):
            chunk_key, batch = element
            if chunk_key[0] not in spilled:
                return element
            plan = plans[chunk_key[0]]
            path = spill_path(plan.dataset, chunk_key)
            storage.write_atomic(path, pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL),
                                 plan.dataset.output_path)
            _, counts = declared_units(plans, element)
            candidates = tuple((key, np.asarray(rows))
                               for key, rows in overflow_candidates(plans, element))
            return chunk_key, SpilledBatch(path, dict(counts), candidates)

        return tokenized | "Spill" >> beam.Map(spill)
