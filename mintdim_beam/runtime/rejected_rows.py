"""Rows rejected under `on_bad_row="skip"`, the same way in both pipelines: taken out of
the pending errors (`split_rejected`), numbered around (`source.number_ranges`), then,
in Finalize, resolved to their files and lines, held against `max_rejected` and written
as `rejected_index.jsonl` (`finish_rejected`)."""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.config.bad_rows import exceeds
from mintdim_beam.core.errors import TooManyRejectedError
from mintdim_beam.core.errors.failures import ExtraTurnsPending, WorkerFailure, rejected_row
from mintdim_beam.core.formats import mintdim as fmt

NAMED = 5  # rejected rows an error names


def split_rejected(p, pending, skipping: set):
    """(errors, rejected rows) of the pending errors: the bad rows of the datasets in
    `skipping` leave the errors (a dialogue with extra turns is a decision, not a bad
    row: it stays for the overflow decision)."""
    if not skipping:
        return pending, p | "NoRejectedRows" >> beam.Create([])

    def rejected(error, _):
        return int(error.dataset in skipping and not isinstance(error, ExtraTurnsPending))

    errors, rows = pending | "BadRows" >> beam.Partition(rejected, 2)
    # The rows are read as side inputs (numbering, Finalize): read straight from one
    # output of a multi-output ParDo, the BundleBasedDirectRunner gave them as empty, and
    # the rejected rows vanished from the ids and the index (`ApplyToAll`); a plain Map
    # in between fixes it.
    return errors, rows | "RejectedRows" >> beam.Map(lambda row: row)


def row_text(row: dict) -> str:
    """`file:line: Class: reason`, as errors and notes name a bad row."""
    return f"{row['source_file']}:{row['source_line']}: {row['error']}: {row['reason']}"


def finish_rejected(policy, rejected, numbering, datasets, ds: int) -> tuple[str, dict]:
    """(rejected_index.jsonl's text, the manifest's keys) for dataset `ds`, its rows in
    file and line order; more than `max_rejected` of its rows is a TooManyRejectedError
    (raised in the worker, before anything of Finalize is written)."""
    mine = sorted((e for e in rejected if e.dataset == ds), key=lambda e: e.order)
    rows = [rejected_row(e, numbering, datasets) for e in mine]
    total = numbering.totals.get(ds, 0) + len(rows)
    if exceeds(policy, len(rows), total):
        raise WorkerFailure(TooManyRejectedError(
            output=datasets[ds].output_given, rejected=len(rows), rows=total,
            max_rejected=policy.max_rejected,
            first=[row_text(r) for r in rows[:NAMED]]).to_payload())
    return ("".join(fmt.jsonl_row(r) for r in rows),
            {"rejected": len(rows), "bad_rows": policy.manifest_block(total)})
