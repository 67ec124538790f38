"""StageRecords: each batch's records for its declared units go to a block file in the
output's scratch dir as soon as the batch is tokenized; only references to them travel
on to ShardWrite.

Why: a sample that fits a declared unit has a record that depends on nothing but its
own tokens, so it can be built while the encoders still work on the next batches (both
cores busy) instead of after the global step (one core). Carrying 50 MB of padded
records per 100k samples through the local runner's data plane (encoded, grouped, copied
and decoded again) cost more than writing and reading them back through the page cache.
Samples longer than the largest declared unit wait for the overflow decisions and keep
their tokens in the batch. Outputs on object stores (gs://, s3://) and memory:// keep
every token in the batch and records travel as bytes: a shard there would otherwise be
read back from one object per batch.
"""
from __future__ import annotations

from typing import NamedTuple

import apache_beam as beam
import numpy as np

from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.unit_build.transforms.write import scratch_path
from mintdim_beam.unit_build.units import assign_declared


class BlockRange(NamedTuple):
    """Records `[start, start + length)` (in bytes) of a staged block file."""
    path: str
    start: int
    length: int


def block_path(dataset, chunk_key) -> str:
    return scratch_path(dataset, "blocks", chunk_key, "bin")


def overflow_path(dataset, chunk_key) -> str:
    """A batch's second block: its overflow samples' records, written by AssignFn."""
    return scratch_path(dataset, "blocks", chunk_key, "overflow.bin")


def gather_index(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Indices of [starts[i], starts[i] + counts[i]) for every i, concatenated."""
    offsets = np.cumsum(counts) - counts
    return np.arange(int(counts.sum())) + np.repeat(starts - offsets, counts)


def unit_records(plan, unit: int, tokens, starts, counts, lengths, full=None,
                 tails=None) -> np.ndarray:
    """Records of `unit` for the samples whose payloads are `tokens[starts[i]:][:counts[i]]`
    and whose segment lengths are the rows of `lengths`. With `full` (the lengths before
    truncation), each segment's first tokens are taken instead (`segment_gather`): a
    record cut apart keeps its ends, a preference pair the start of both completions."""
    if full is None or np.array_equal(full, lengths):
        index = gather_index(starts, counts)
    else:
        index = segment_gather(starts, full, lengths, tails)
    return fmt.build_records(tokens[index], lengths, unit, plan.magic, plan.pad_id,
                             plan.token_dtype)


def segment_gather(starts, full, lengths, tails=None) -> np.ndarray:
    """Indices of each sample's kept tokens, segment by segment: the first `lengths -
    tails` tokens of each segment (of `full` length, from `starts`), then its last
    `tails` (a completion's EOS kept when the completion is cut)."""
    segment_starts = starts[:, None] + np.cumsum(full, axis=1) - full
    if tails is None:
        return gather_index(segment_starts.ravel(), lengths.ravel())
    heads = lengths - tails
    ranges = np.stack([segment_starts, segment_starts + full - tails], axis=2)
    counts = np.stack([heads, tails], axis=2)
    return gather_index(ranges.ravel(), counts.ravel())


def block_sections(plan, declared: np.ndarray) -> dict:
    """{unit: first byte} of each declared unit's records in a batch's block: units in
    ascending order, each unit's samples in batch order. `declared`: unit per sample,
    0 for samples past the largest declared unit (they are not in the block)."""
    units, counts = np.unique(declared[declared > 0], return_counts=True)
    sections, start = {}, 0
    for unit, count in zip(units.tolist(), counts.tolist()):
        sections[unit] = start
        start += count * fmt.record_bytes(unit, plan.n_segments, plan.bytes_per_token)
    return sections


def stage_batch(plan, chunk_key, batch: dict) -> dict:
    """Write the block of `batch`; returns the batch with only the other samples' tokens."""
    lengths, tokens = batch["lengths"], batch["tokens"]
    totals = lengths.sum(axis=1)
    starts = np.cumsum(totals) - totals
    declared = assign_declared(plan.dataset.sizes, totals)
    records = []
    for unit in block_sections(plan, declared):
        members = np.flatnonzero(declared == unit)
        records.append(unit_records(plan, unit, tokens, starts[members], totals[members],
                                    lengths[members]))
    if records:
        out = plan.dataset.output_path
        storage.write_atomic(block_path(plan.dataset, chunk_key), b"".join(records), out)
    rest = np.flatnonzero(declared == 0)
    return {**batch, "tokens": tokens[gather_index(starts[rest], totals[rest])], "staged": True}


class StageRecords(beam.PTransform):
    """Tokenized batches -> the same batches, their declared units' records staged.
    `enabled=False` (`--stage_records=off`) passes every batch on as it is."""

    def __init__(self, plans: dict, enabled: bool = True):
        super().__init__()
        self._plans = plans
        # Local outputs only (see the module docstring).
        self.staged = {ds for ds, plan in plans.items()
                       if enabled and not storage.is_url(plan.dataset.output_path)}

    def expand(self, tokenized):
        plans, staged = self._plans, self.staged

        def stage(element):
            chunk_key, batch = element
            if chunk_key[0] not in staged:
                return element
            return chunk_key, stage_batch(plans[chunk_key[0]], chunk_key, batch)

        return tokenized | "WriteBlocks" >> beam.Map(stage)
