"""The launcher: validate and prepare on the driver, resolve prompts, run the Beam
pipeline, and turn any failure into the original error class plus failure notices.

Beam is imported only once the helper encoders of a default run are started (see
`local_default`): its import takes about a second, which they spend encoding.
"""
from __future__ import annotations

import dataclasses
import os
import pickle
import tempfile
from pathlib import Path

from mintdim_beam.core.config.bad_rows import BadRows, bad_rows
from mintdim_beam.core.config.prepare import prepare
from mintdim_beam.core.config.schema import LOSSY_POLICIES, check_choice
from mintdim_beam.core.config.unit_config import resolve_datasets
from mintdim_beam.core.errors import (TemplateRoundTripError,
                                      TemplateTokenizerError, error_from_payload)
from mintdim_beam.core.files import storage
from mintdim_beam.core.files.disk_space import UNIT_BUILD_PER_INPUT_BYTE, check_space, input_bytes
from mintdim_beam.core.files.ownership import Claim, Heartbeat, check_free, new_run_id
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.inputs.planned import PlannedRanges, files_on_storage, forget_loaded
from mintdim_beam.core.inputs.source import plan_ranges
from mintdim_beam.core.render.template_checks import notice_text
from mintdim_beam.runtime.frozen_heap import fewer_collections, frozen_heap
from mintdim_beam.runtime.local_default import auto_encoder_processes
from mintdim_beam.runtime.progress import progress_interval, say
from mintdim_beam.runtime.run_shape import RunShape, shown_progress
from mintdim_beam.runtime.sampler_period import short_sampler_period
from mintdim_beam.runtime.signals import build_error, failed_build, received
from mintdim_beam.runtime.warm_helpers import spawn_helpers, warm_helpers
from mintdim_beam.unit_build.notices import write_failure_notices
from mintdim_beam.unit_build.prompts import InteractiveChooser, ask_template_unk, stdin_is_tty
from mintdim_beam.unit_build.units import (POLICIES, TEMPLATE_UNK_POLICIES, decide_overflows,
                                           fixed_chooser, scripted_chooser)


def log(message: str) -> None:
    say(f"[unit-build] {message}")


def check_policies(on_template_unk: str, on_overflow: str, on_lossy: str = "continue") -> None:
    """The run options' values, named as the config and `run()` name them (a
    `ConfigValueError` listing the allowed values, the nearest as a suggestion)."""
    check_choice("on_lossy", on_lossy, LOSSY_POLICIES)
    check_choice("on_template_unk", on_template_unk, TEMPLATE_UNK_POLICIES)
    check_choice("on_overflow", on_overflow, POLICIES)


def _resolve_template_unk(plans, policy: str, interactive: bool) -> None:
    for plan in plans.values():
        if not plan.literal_unk_segments or policy == "continue":
            continue
        error = TemplateTokenizerError(
            file_index=plan.dataset.template_file_index, template=plan.dataset.template,
            literals=[plan.template.segments[i].content for i in plan.literal_unk_segments])
        if policy == "prompt" and interactive and ask_template_unk(
                plan.dataset.template_file_index, len(plan.literal_unk_segments)):
            continue
        raise error


def _resolve_notices(plans, on_lossy: str) -> None:
    """The template checks' findings (`template_checks`): warnings before any output,
    or under on_lossy="abort" the first one as an error."""
    engines = {}
    for plan in plans.values():
        engine = plan.card.get("engine") or {}
        engines.setdefault((plan.dataset.tokenizer_given, engine.get("name")), engine.get("why"))
    for (tokenizer, name), why in engines.items():
        log(f"engine: {name} encodes {tokenizer} ({why})")
    for plan in plans.values():
        for notice in plan.notices:
            if on_lossy == "abort":
                raise TemplateRoundTripError(where=notice["where"], problem=notice_text(notice))
            log(f"warning: {notice_text(notice)}")


def _survey_and_ask(plans, ranges, options) -> dict:
    """Interactive overflow: a planning pass finds overflows, then the user decides."""
    import apache_beam as beam

    from mintdim_beam.unit_build.graph import expand_overflow_survey

    with tempfile.TemporaryDirectory(prefix="mintdim-survey-") as scratch:
        result_path = os.path.join(scratch, "survey.pkl")
        with frozen_heap(), short_sampler_period(), beam.Pipeline(options=options) as p:
            expand_overflow_survey(p, plans, ranges, result_path)
        with open(result_path, "rb") as handle:
            survey = pickle.load(handle)
    if survey["error"] is not None:
        raise error_from_payload(survey["error"])
    choosers = {}
    for ds, plan in plans.items():
        chooser = InteractiveChooser(capacity=plan.magic)  # never an extend the dtype can't hold
        decide_overflows(plan.dataset.sizes, survey["candidates"].get(ds, []), chooser,
                         capacity=plan.magic)
        choosers[ds] = scripted_chooser(chooser.script)
    return choosers


def _output_summary(plan, run) -> dict:
    try:
        return output_summary(plan)
    except FileNotFoundError as exc:
        raise run.missing_output(plan.dataset.output_given, exc.filename or str(exc)) from None


def output_summary(plan) -> dict:
    """A finished build's summary, from its stats.json and manifest.json (as `run()`
    returns it and `transforms.WriteUnitBuild` gives it)."""
    import json

    out = plan.dataset.output_path
    stats = json.loads(storage.read_bytes(storage.join(out, fmt.STATS)))
    manifest = json.loads(storage.read_bytes(storage.join(out, fmt.MANIFEST)))
    given = plan.dataset.output_given
    return {"output_dir": given if storage.is_url(given) else str(Path(given)),
            "total_samples": stats["total_samples"], "total_tokens": stats["total_tokens"],
            "samples_with_unk": stats["samples_with_unk"],
            "duplicate_groups": stats["duplicate_groups"],
            "sizes": manifest["units"]["sizes"],
            "lossy_samples": manifest["round_trip"]["lossy_samples"],
            **({"rejected_rows": manifest["rejected"]} if "rejected" in manifest else {})}


def worker_paths(datasets, outputs: bool) -> list:
    """(what, as given, resolved) of every path a dataset's workers open: `check_paths`."""
    named = [("input", f.given, f.path) for d in datasets for f in d.files]
    named += [("tokenizer", d.tokenizer_given, d.tokenizer_path) for d in datasets]
    if outputs:
        named += [("output", d.output_given, d.output_path) for d in datasets]
    return named


def run_build(raw: dict, on_template_unk: str = "prompt", on_overflow: str = "prompt",
              pipeline_options=None, on_lossy: str = "continue", on_bad_row: str = "abort",
              max_rejected: float | None = None) -> dict:
    """Build and wait; returns {"outputs": [...]} as documented for `run()`. With
    `--no_wait` the outputs only name their directories and carry "state": "submitted"."""
    outputs, _ = launch(raw, on_template_unk, on_overflow, pipeline_options, on_lossy,
                        bad_rows(on_bad_row, max_rejected))
    return {"outputs": outputs}


def group_size_stats(pipeline_result) -> dict:
    """The `shard_group_records` distribution: records per (unit, shard) group."""
    from apache_beam.metrics.metric import MetricsFilter

    query = pipeline_result.metrics().query(MetricsFilter().with_name("shard_group_records"))
    dists = [d.committed or d.attempted for d in query["distributions"]]
    dists = [d for d in dists if d is not None and d.count]
    if not dists:
        return {"count": 0, "max": 0, "sum": 0}
    return {"count": sum(d.count for d in dists), "max": max(d.max for d in dists),
            "sum": sum(d.sum for d in dists)}


def on_storage(plans: dict, ranges):
    """The plans and ranges as the graph carries them: the file lists, ranges and input
    identities written to each dataset's scratch, only their references in the graph
    (`core.inputs.planned`: its size does not grow with the number of files)."""
    scratch = {ds: plan.dataset.scratch_path for ds, plan in plans.items()}
    stored = {ds: dataclasses.replace(plan, dataset=files_on_storage(plan.dataset, scratch[ds]))
              for ds, plan in plans.items()}
    return stored, PlannedRanges(ranges, scratch.__getitem__)


def launch(raw: dict, on_template_unk: str = "prompt", on_overflow: str = "prompt",
           pipeline_options=None, on_lossy: str = "continue", rows: BadRows = BadRows()):
    """Validate, prepare, run and wait; returns (outputs, Beam PipelineResult).

    Config errors are raised before anything is written. The output directories are
    claimed (`ownership`) once the config is known good: from then on this run owns
    them, and a failure leaves its notices there and no manifest."""
    check_policies(on_template_unk, on_overflow, on_lossy)
    received.clear()
    run_id = new_run_id()
    datasets = [dataclasses.replace(d, run_id=run_id) for d in resolve_datasets(raw)]
    for dataset in datasets:
        check_free(dataset.output_path, dataset.output_given)
    # A default run's helpers start now and load the tokenizer while the datasets are
    # planned below (`spawn_helpers`); nothing is written before `warm_helpers` adopts
    # them, and any error on the way stops them.
    spawned = spawn_helpers(datasets, auto_encoder_processes() if pipeline_options is None else 0)
    try:
        launched = _launch_planned(datasets, spawned, on_template_unk, on_overflow,
                                   pipeline_options, on_lossy, rows, run_id)
    except BaseException:
        for helper in spawned:  # a config error is not kept waiting for their start
            helper.close(kill=True)
        raise
    finally:
        forget_loaded()  # the run's planned values (`on_storage`)
    for helper in spawned:  # stopping one stopped already does nothing
        helper.close()
    return launched


def _launch_planned(datasets, spawned, on_template_unk, on_overflow, pipeline_options,
                    on_lossy, rows, run_id):
    plans = {d.index: dataclasses.replace(prepare(d), on_lossy=on_lossy, bad_rows=rows)
             for d in datasets}
    run = RunShape(pipeline_options)
    progress_interval()  # the environment's settings, checked before the claim
    run.check_paths(worker_paths(datasets, outputs=True))
    interactive = run.local and stdin_is_tty()
    _resolve_template_unk(plans, on_template_unk, interactive)
    _resolve_notices(plans, on_lossy)
    ranges = plan_ranges(datasets, run.range_bytes, defer=True)

    claim = Claim(run_id)
    claim.take([(d.output_path, d.output_given) for d in datasets])
    try:
        if run.disk_check:  # after the claim: an unwritable output says so first
            check_space([(d.output_path, d.output_given,
                          int(UNIT_BUILD_PER_INPUT_BYTE * input_bytes(ranges, d.index)))
                         for d in datasets])
        if on_overflow == "prompt" and interactive:
            choosers = _survey_and_ask(plans, ranges, run.beam_options())
        else:
            choosers = {ds: fixed_chooser(on_overflow) for ds in plans}
    except BaseException as exc:
        claim.undo()  # nothing was written yet: the directories are as they were
        # Ctrl-C, or an error the survey's workers carried (a changed or corrupt input)
        error = build_error(exc)
        if error is not None:
            raise error from None
        raise

    for plan in plans.values():
        log(f"start output={plan.dataset.output_given} files={len(plan.dataset.files)} "
            f"units={','.join(map(str, plan.dataset.sizes))} "
            f"build_batch={plan.dataset.build_batch} runner={run.runner} run={run_id}")
    try:
        # Beam's import and the graph allocate a long-lived heap: fewer young collections
        # walk it before the run freezes it (`frozen_heap`).
        with warm_helpers(plans, run.early_helpers, ranges[0] if ranges else None,
                          run.max_line_bytes, spawned) as warm_key, fewer_collections():
            options = run.beam_options()  # loads Beam while the helpers encode
            import apache_beam as beam

            from mintdim_beam.runtime.options import waits
            from mintdim_beam.unit_build.graph import expand_unit_build

            p = beam.Pipeline(options=options)
            expand_unit_build(p, *on_storage(plans, ranges), choosers, warm_key)
            with frozen_heap(), short_sampler_period(), shown_progress(run, ranges), \
                    Heartbeat(d.output_path for d in datasets):
                pipeline_result = p.run()
                if not waits(options):
                    log(f"submitted ({run.runner}); the job finalizes its outputs itself")
                    return [{"output_dir": plan.dataset.output_given, "state": "submitted"}
                            for plan in plans.values()], pipeline_result
                pipeline_result.wait_until_finish()
        # Inside the failure handling: a finished job whose output is not where the
        # launcher looks still ends with notices and the marker marked failed.
        outputs = [_output_summary(plans[ds], run) for ds in sorted(plans)]
    except BaseException as exc:
        error = failed_build(exc, lambda reason: write_failure_notices(plans, reason, claim, log),
                             log)
        if error is not None:
            raise error from None
        raise
    for out in outputs:
        log(f"done output={out['output_dir']} samples={out['total_samples']} "
            f"tokens={out['total_tokens']} samples_with_unk={out['samples_with_unk']} "
            f"duplicate_groups={out['duplicate_groups']} sizes={out['sizes']} "
            f"lossy_samples={out['lossy_samples']}")
    return outputs, pipeline_result
