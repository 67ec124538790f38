"""Finalize, inside the pipeline (a templated launch does not wait for the job): join
index parts in order where they lie (server-side compose or copy: `core.files.compose`,
their sums from the part writers, so no index byte is read here), write summaries and
unit notices, drop temporary files, and write manifest.json last, so its presence means
the build completed.
"""
from __future__ import annotations

import json

import apache_beam as beam

from mintdim_beam.core.config.unit_config import dataset_config
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.files.ownership import release
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.inputs import file_list
from mintdim_beam.core.inputs.input_files import entries_by_dataset
from mintdim_beam.core.version import __version__
from mintdim_beam.runtime.faults import BundleFaults
from mintdim_beam.runtime.first_error import FirstError
from mintdim_beam.runtime.rejected_rows import finish_rejected

_EMPTY_STATS = {"total_samples": 0, "total_tokens": 0, "samples_with_unk": 0,
                "unk_tokens": 0, "unit_distribution": {}}


def engines_used(card: dict, used: dict) -> dict:
    """The card with `engine.used`: {what encoded: samples} (`engine_used` of the
    workers' adapters: native, tiktoken, tokenizers, sp_ids or sentencepiece)."""
    return {**card, "engine": {**card["engine"], "used": dict(sorted(used.items()))}}


def first_lossy(plan, part_path: str) -> dict:
    """The payload of a `SampleRoundTripError` for the first lossy sample (the first
    row of the first part: parts are in sample order)."""
    first = storage.read_bytes(part_path).split(b"\n", 1)[0]
    row = json.loads(first)
    return {"class": "SampleRoundTripError", "kwargs": {
        "file": row["source_file"], "line": row["source_line"],
        "segment": row["segment_names"][0], "kind": row["kinds"][0],
        "source": row["source"], "decoded": row["decoded"]}}


class FinalizeFn(beam.DoFn):
    def __init__(self, plans: dict, claim=None):
        self._plans = plans
        self._claim = claim  # a user's pipeline: the notices are written here (`notices`)
        self._faults = BundleFaults("finalize")

    def start_bundle(self):
        self._faults.start_bundle()

    def process(self, ds, *sides):
        self._writing = False  # set once this attempt writes: a retry may then succeed
        if self._claim is None:
            yield from self._finalize(ds, *sides)
            return
        try:
            yield from self._finalize(ds, *sides)
        except WorkerFailure as exc:
            if self._writing:  # a failed write, not the build's verdict: the runner retries
                raise
            # the build's own error (found before any write): notices, then raise it
            from mintdim_beam.core.errors.failures import recover
            from mintdim_beam.unit_build.notices import write_failure_notices

            error = recover(exc)
            reason = f"{type(error or exc).__name__}: {error or exc}"  # as the launcher's
            write_failure_notices({ds: self._plans[ds]}, reason, self._claim, _warn)
            raise

    def _finalize(self, ds, error, packed_plans, stats, file_parts, dup_parts, shards,
                  rejected, numbering, inputs):
        overflow_plans = packed_plans.unpack()
        if error is not None:
            raise WorkerFailure(error)
        plan = self._plans[ds]
        if plan.bad_rows.skip:  # stops here when more rows were bad than max_rejected allows
            rejected_text, rejected_keys = finish_rejected(
                plan.bad_rows, rejected, numbering, {ds: plan.dataset}, ds)
        out = plan.dataset.output_path
        sizes = overflow_plans[ds].sizes

        sums = {fmt.shard_name(unit, shard): summed
                for d, unit, shard, _, summed in shards if d == ds}

        def write(name, text):
            sums[name] = checksums.write_text(storage.join(out, name), text, out)

        def join(name, parts):
            sums.update(checksums.join_parts(out, name, parts))

        parts = {}  # file name -> [(path, FileSum)] in order
        for (d, name), number, path, summed in sorted(file_parts, key=lambda p: p[:2]):
            if d == ds:
                parts.setdefault(name, []).append((path, summed))
        lossy = parts.get(fmt.LOSSY_INDEX)
        if lossy and plan.on_lossy == "abort":
            raise WorkerFailure(first_lossy(plan, lossy[0][0]))
        self._writing = True  # every check of the build's own errors is above
        for name in (fmt.SAMPLE_INDEX, fmt.UNK_INDEX, fmt.LOSSY_INDEX, fmt.DUPLICATE_INDEX):
            join(name, parts.get(name, []))
        dups = [(groups, samples) for d, _, _, groups, samples, _ in dup_parts if d == ds]
        decided = overflow_plans[ds]  # its rows written and summed by the decision
        join(fmt.OVERFLOW_INDEX, [(decided.rows_path, decided.rows_sum)])
        if plan.bad_rows.skip:
            write(fmt.REJECTED_INDEX, rejected_text)

        summary = stats.get(ds, _EMPTY_STATS)
        distribution = {int(k): v for k, v in summary["unit_distribution"].items()}
        write(fmt.HISTOGRAM, fmt.histogram_doc(distribution))
        write(fmt.STATS, fmt.stats_doc(summary, plan.token_dtype, plan.bytes_per_token,
                                       sum(d[0] for d in dups), sum(d[1] for d in dups)))
        write(fmt.LENGTH_FIELD, fmt.length_field_doc(plan))
        for size in sizes:
            storage.makedirs(storage.join(out, fmt.unit_dir(size)))
            if not distribution.get(size):
                write(f"{fmt.unit_dir(size)}/{fmt.EMPTY_UNIT}", fmt.empty_unit_notice(size))
        ours = {"mintdim_beam_version": __version__}
        # What the build read (`input_files`): each file's identity, as its ranges did.
        ours["inputs"] = entries_by_dataset(i for i in inputs if i[0] == ds).get(ds, [])
        if plan.bad_rows.skip:  # the rows that did not become samples, and the policy
            ours.update(rejected_keys)
        ours["build_config"] = dataset_config(plan.dataset)  # what `verify --deep` rebuilds
        entries = file_list.entries_block(plan.dataset.files)
        if entries:  # directories and patterns as written; source.files lists their files
            ours["source_entries"] = entries
        if plan.facts is not None:  # each special id and where it came from
            ours["special_tokens"] = plan.facts.manifest_block()
        ours["token_ids"] = {"bound": plan.id_bound}  # every id is below it
        ours["round_trip"] = fmt.round_trip_doc(summary, plan)
        # What encoded the samples: the planned engine, or where a worker could not have
        # it (no native module there), `tokenizers`, the same ids.
        ours["tokenizer_card"] = engines_used(plan.card, summary.get("engines") or {})
        ours["checksums"] = checksums.manifest_block(sums)  # every file above, as written
        manifest = fmt.manifest_doc(plan, sizes, ours)
        storage.write_text_atomic(storage.join(out, fmt.MANIFEST), manifest, out)
        self._faults.check(ds)
        # The parts go only after the manifest: a retried Finalize must find them again
        # and rewrite the same bytes, whichever step its first attempt died in.
        storage.remove_tree(storage.tmp_dir(out))
        release(out)  # last: until now the directory was this run's alone
        yield ds, out


def _warn(message: str) -> None:
    import logging

    logging.getLogger("mintdim_beam").warning("[unit-build] %s", message)


class Finalize(beam.PTransform):
    """One finalize per dataset, after every shard and part exists (side inputs); the
    index parts arrive as `join_parts.PartsOfFiles` numbers them. With a `claim` (a
    user's pipeline, no launcher waiting) it writes the failure notices itself."""

    def __init__(self, plans, datasets, sides: dict, claim=None):
        super().__init__()
        self._plans, self._datasets, self._sides = plans, datasets, sides
        self._claim = claim

    def expand(self, pbegin):
        s = self._sides
        datasets = self._datasets
        error = s["errors"] | "FirstError" >> FirstError(datasets, s["numbering"])
        return (pbegin
                | "Datasets" >> beam.Create(sorted(self._plans))
                | "FinalizeDataset" >> beam.ParDo(
                    FinalizeFn(self._plans, self._claim),
                    beam.pvalue.AsSingleton(error),
                    beam.pvalue.AsSingleton(s["overflow_plans"]),
                    beam.pvalue.AsDict(s["stats"]),
                    beam.pvalue.AsList(s["file_parts"]),
                    beam.pvalue.AsList(s["dup_parts"]),
                    beam.pvalue.AsList(s["shards"]),
                    beam.pvalue.AsList(s["rejected"]),
                    beam.pvalue.AsSingleton(s["numbering"]),
                    beam.pvalue.AsList(s["inputs"])))
