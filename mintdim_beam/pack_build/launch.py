"""Run a pack-build: validate and prepare on the driver (every config error before any
output), claim the output directory, run the pipeline and wait; a failure leaves
`PACK_BUILD_FAILED.md`, no manifest, and the original error class."""
from __future__ import annotations

import dataclasses
import json

from mintdim_beam.core.config.bad_rows import bad_rows
from mintdim_beam.core.config.pack_config import prepare_pack, resolve_pack, with_run
from mintdim_beam.core.files import storage
from mintdim_beam.core.files.disk_space import PACK_BUILD_PER_INPUT_BYTE, check_space, input_bytes
from mintdim_beam.core.files.ownership import PACK_FAILED, Claim, Heartbeat, check_free, new_run_id
from mintdim_beam.core.inputs.planned import PlannedRanges, forget_loaded, store_lists
from mintdim_beam.core.inputs.source import plan_ranges
from mintdim_beam.pack_build.finalize import MANIFEST, failed_notice
from mintdim_beam.runtime.failure_notices import leave_failure_notices
from mintdim_beam.runtime.frozen_heap import frozen_heap
from mintdim_beam.runtime.progress import progress_interval, say
from mintdim_beam.runtime.run_shape import RunShape, shown_progress
from mintdim_beam.runtime.sampler_period import short_sampler_period
from mintdim_beam.runtime.signals import failed_build, received


def log(message: str) -> None:
    say(f"[pack-build] {message}")


def _failure_notices(config, reason: str, claim: Claim) -> None:
    leave_failure_notices(config.output_path, config.output_given, reason, PACK_FAILED,
                          failed_notice(reason), MANIFEST, claim, log)


def on_storage(plan, ranges):
    """The plan and ranges as the graph carries them: the per-file lists (files, fields,
    templates), ranges and input identities in the scratch, only references in the graph
    (`core.inputs.planned`)."""
    config, scratch = plan.config, plan.config.scratch_path
    stored = dataclasses.replace(plan, config=store_lists(config, ("files", "fields",
                                                                    "templates"), scratch))
    return stored, PlannedRanges(ranges, lambda _: scratch)


def run_pack(raw: dict, pipeline_options=None, on_bad_row: str = "abort",
             max_rejected: float | None = None) -> dict:
    """Build and wait; returns the summary (documents, tokens, shards, ...)."""
    rows = bad_rows(on_bad_row, max_rejected)
    received.clear()
    run_id = new_run_id()
    config = with_run(resolve_pack(raw), run_id)
    check_free(config.output_path, config.output_given)
    plan = prepare_pack(config)
    run = RunShape(pipeline_options)
    progress_interval()  # the environment's settings, checked before the claim
    run.check_paths([("input", f.given, f.path) for f in config.files]
                    + [("tokenizer", config.tokenizer_given, config.tokenizer_path),
                       ("output", config.output_given, config.output_path)])
    ranges = plan_ranges([config], run.range_bytes, defer=True)
    claim = Claim(run_id)
    claim.take([(config.output_path, config.output_given)])
    if run.disk_check:  # after the claim: an unwritable output says so first
        try:
            check_space([(config.output_path, config.output_given,
                          int(PACK_BUILD_PER_INPUT_BYTE * input_bytes(ranges)))])
        except BaseException:
            claim.undo()
            raise
    log(f"engine: {plan.engine} encodes {config.tokenizer_given} ({plan.engine_why})")
    log(f"start output={config.output_given} files={len(config.files)} dtype={plan.dtype} "
        f"eod={plan.eod_id} seed={config.seed} shard_tokens={config.shard_tokens} "
        f"runner={run.runner} run={run_id}")
    try:
        options = run.beam_options()
        import apache_beam as beam

        from mintdim_beam.pack_build.graph import expand_pack_build
        from mintdim_beam.runtime.options import waits

        p = beam.Pipeline(options=options)
        expand_pack_build(p, *on_storage(plan, ranges), rows)
        with frozen_heap(), short_sampler_period(), shown_progress(run, ranges, "pack-build"), \
                Heartbeat([config.output_path]):
            result = p.run()
            if not waits(options):
                log(f"submitted ({run.runner}); the job finalizes its output itself")
                return {"output_dir": config.output_given, "state": "submitted"}
            result.wait_until_finish()
        # Inside the failure handling, as for unit-build.
        manifest = _finished_manifest(config, run)
    except BaseException as exc:
        error = failed_build(exc, lambda reason: _failure_notices(config, reason, claim), log)
        if error is not None:
            raise error from None
        raise
    finally:
        forget_loaded()  # the run's planned values (`on_storage`)
    summary = pack_summary(config.output_given, manifest)
    log(f"done output={config.output_given} documents={summary['documents']} "
        f"tokens={summary['tokens']} shards={summary['shards']}")
    return summary


def pack_summary(output_given: str, manifest: dict) -> dict:
    """A finished pack's summary from its manifest (as `run()` returns it and
    `transforms.WritePackBuild` gives it)."""
    return {"output_dir": output_given, "documents": manifest["documents"],
            "tokens": manifest["tokens"], "empty_documents": manifest["empty_documents"],
            "shards": len(manifest["shards"]), "dtype": manifest["dtype"],
            "eod_id": manifest["eod"]["id"],
            **({"rejected_rows": manifest["rejected"]} if "rejected" in manifest else {})}


def _finished_manifest(config, run) -> dict:
    path = storage.join(config.output_path, MANIFEST)
    try:
        return json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        raise run.missing_output(config.output_given, path) from None
