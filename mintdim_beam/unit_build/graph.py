"""The unit-build pipeline graph:

ReadJSONL -> Render -> Tokenize -> AssignUnit -> GroupByUnit -> ShardWrite, with side
outputs for index rows, hashes (duplicates) and a CombineFn for stats; Finalize last.
"""
from __future__ import annotations

import os
import pickle

import apache_beam as beam

from mintdim_beam.core.errors.failures import ExtraTurnsPending, LongLinePending
from mintdim_beam.core.files import storage
from mintdim_beam.core.inputs.planned import range_starts
from mintdim_beam.core.inputs.source import number_ranges
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.runtime.first_error import FirstError
from mintdim_beam.runtime.planned_ranges import INPUTS
from mintdim_beam.runtime.rejected_rows import split_rejected
from mintdim_beam.unit_build.transforms.assign import (HASHES, INDEX_PARTS, STATS, AssignUnits,
                                                       UnitOffsets, declared_units,
                                                       number_candidates, overflow_candidates)
from mintdim_beam.unit_build.transforms.decide import (DecideOverflows, abort_errors,
                                                       outcomes_by_batch)
from mintdim_beam.unit_build.transforms.duplicates import DuplicateIndex
from mintdim_beam.unit_build.transforms.finalize import Finalize
from mintdim_beam.unit_build.transforms.join_parts import PartsOfFiles
from mintdim_beam.unit_build.transforms.read import COUNTS, ReadJSONL
from mintdim_beam.unit_build.transforms.render import ERRORS, Render
from mintdim_beam.unit_build.transforms.spill import SpillBatches
from mintdim_beam.unit_build.transforms.stage import StageRecords
from mintdim_beam.unit_build.transforms.stats import BuildStats
from mintdim_beam.unit_build.transforms.tokenize import Tokenize
from mintdim_beam.unit_build.transforms.write import WriteIndexParts, WriteShards

# Pending "errors" the overflow decision may turn into skips: a line over --max_line_bytes
# (skipped under on_overflow=skip) and a dialogue with extra turns (always skipped).
SKIPPABLE = (LongLinePending, ExtraTurnsPending)


def real_errors(pending):
    """The pending errors that are errors whatever the policies (for passes that only
    report, such as the prompt's survey and `plan`)."""
    return pending | "NotSkips" >> beam.Filter(lambda e: not isinstance(e, ExtraTurnsPending))


def read_and_tokenize(p, plans: dict, ranges, warm_key: str | None = None):
    """ReadJSONL -> Render -> Tokenize, plus exact numbering from per-range counts and
    the rows rejected under `on_bad_row="skip"` (which take no sample id).
    `warm_key`: helper encoder processes the driver already started (`warm_helpers`).
    Returns (numbering, pending errors, tokenized batches, rejected rows, input entries)."""
    from mintdim_beam.runtime.options import encoder_processes, is_single_process, max_line_bytes

    datasets = {ds: plan.dataset for ds, plan in plans.items()}
    batch_sizes = {ds: plan.dataset.build_batch for ds, plan in plans.items()}
    spread = not is_single_process(p.options)
    read = p | "ReadJSONL" >> ReadJSONL(ranges, batch_sizes, spread=spread,
                                        max_line_bytes=max_line_bytes(p.options))
    rendered = read["batches"] | "Render" >> Render(plans)
    errors, rejected = split_rejected(
        p, rendered[ERRORS], {ds for ds, plan in plans.items() if plan.bad_rows.skip})
    numbering = read[COUNTS] | "NumberLines" >> ApplyToAll(
        lambda counts, gone: number_ranges([datasets[d] for d in sorted(datasets)],
                                           dict(counts), gone),
        beam.pvalue.AsList(rejected))
    tokenized = rendered["rendered"] | "Tokenize" >> Tokenize(
        plans, encoder_processes(p.options), warm_key, range_starts(ranges))
    return numbering, errors, tokenized, rejected, read[INPUTS]


def expand_unit_build(p, plans: dict, ranges, choosers: dict, warm_key: str | None = None):
    """Add the whole unit-build to pipeline `p`; returns the finalized (dataset, dir):
    our reader and tokenizer (`read_and_tokenize`), then `write_units`, the writing half
    that `transforms.WriteUnitBuild` applies to a user's keyed records."""
    numbering, bad_lines, tokenized, rejected, inputs = read_and_tokenize(p, plans, ranges,
                                                                          warm_key)
    return write_units(p, plans, choosers, {
        "numbering": numbering, "errors": bad_lines, "tokenized": tokenized,
        "rejected": rejected, "inputs": inputs})


def write_units(p, plans: dict, choosers: dict, found: dict, staged: bool | None = None,
                claim=None):
    """StageRecords -> DecideOverflows -> AssignUnit -> ShardWrite, the indices, stats and
    Finalize, from what the reading half `found`: tokenized batches keyed (dataset, file,
    range, batch) in sample order, their numbering, pending errors, rejected rows and
    the inputs' manifest entries. `staged`: stage records locally (default: as the
    options say); `claim`: the `Claim` Finalize marks failed when the build stops
    (a user's pipeline has no launcher to do it)."""
    from mintdim_beam.runtime.options import max_line_bytes, stages_records

    numbering, bad_lines, tokenized = found["numbering"], found["errors"], found["tokenized"]
    datasets = {ds: plan.dataset for ds, plan in plans.items()}
    staging = StageRecords(plans, stages_records(p.options) if staged is None else staged)
    tokenized = tokenized | "StageRecords" >> staging
    tokenized = tokenized | "SpillBatches" >> SpillBatches(plans, staging.staged, declared_units,
                                                           overflow_candidates)
    # Lines over --max_line_bytes are decided with the overflows: skipped or an error.
    bad_lines, long_lines = bad_lines | "LongLines" >> beam.Partition(
        lambda error, _: int(isinstance(error, SKIPPABLE)), 2)
    overflow_plans = (tokenized, numbering, long_lines) | "DecideOverflows" >> DecideOverflows(
        plans, choosers, overflow_candidates)
    outcomes = overflow_plans | "OutcomesByBatch" >> beam.Map(outcomes_by_batch)
    offsets = (tokenized, outcomes) | "UnitOffsets" >> UnitOffsets(plans)
    assigned = tokenized | "AssignUnit" >> AssignUnits(plans, outcomes, offsets, numbering)

    shards = assigned["pieces"] | "ShardWrite" >> WriteShards(plans)
    index_parts = assigned[INDEX_PARTS] | "IndexParts" >> WriteIndexParts(plans)
    dup_parts = assigned[HASHES] | "Duplicates" >> DuplicateIndex(plans)
    stats = assigned[STATS] | "Stats" >> BuildStats()
    file_parts = (index_parts, dup_parts) | "PartsOfFiles" >> PartsOfFiles(plans)

    aborts = overflow_plans | "AbortErrors" >> beam.FlatMap(abort_errors, plans,
                                                            max_line_bytes(p.options))
    errors = ((bad_lines, aborts)
              | "CollectErrors" >> beam.Flatten())
    return p | "Finalize" >> Finalize(plans, datasets, {
        "errors": errors, "numbering": numbering, "overflow_plans": overflow_plans,
        "stats": stats, "file_parts": file_parts, "dup_parts": dup_parts,
        "shards": shards, "rejected": found["rejected"], "inputs": found["inputs"]},
        claim=claim)


def expand_overflow_survey(p, plans: dict, ranges, result_path: str):
    """Planning pass for the interactive prompt: the overflow candidates and the first
    bad line, pickled to `result_path` for the driver to ask about."""
    datasets = {ds: plan.dataset for ds, plan in plans.items()}
    numbering, bad_lines, tokenized, _, _ = read_and_tokenize(p, plans, ranges)
    candidates = (tokenized
                  | "OverflowCandidates" >> beam.FlatMap(lambda e: overflow_candidates(plans, e))
                  | "Number" >> ApplyToAll(lambda c, num: number_candidates(c, datasets, num),
                                           beam.pvalue.AsSingleton(numbering)))
    error = real_errors(bad_lines) | "FirstError" >> FirstError(datasets, numbering)

    def save(cands, err):
        storage.write_atomic(result_path, pickle.dumps({"candidates": cands, "error": err}),
                             os.path.dirname(result_path))

    return candidates | "Save" >> beam.Map(save, beam.pvalue.AsSingleton(error))
