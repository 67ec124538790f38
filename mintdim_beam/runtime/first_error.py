"""FirstError: of all the errors workers found, the one to raise: the first in file and
line order, with its real line number (known only once every range is counted), so a
bad input gives the same error on every runner. Used by both pipelines and `plan`."""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.errors.failures import rejected_row, resolve
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.runtime.rejected_rows import NAMED, row_text
BAD_ROW_CLASSES = ("SourceParseError", "SampleSchemaError")  # not a unit decision


def first_error(pending_errors, numbering, datasets):
    """The first error's payload; when the build found more, a note says how many and
    names the next few, so a user fixes them together, not one build at a time."""
    if not pending_errors:
        return None
    ordered = sorted(pending_errors, key=lambda e: e.order)
    payload = resolve(ordered[0], numbering, datasets)
    rows = [e for e in ordered[1:] if e.cls in BAD_ROW_CLASSES and e.locator == "file_line"]
    if rows:
        named = [row_text(rejected_row(e, numbering, datasets)) for e in rows[:NAMED]]
        more = len(rows) - len(named)
        payload["notes"] = [
            f"The build found {len(rows)} more bad row(s) after this one:\n"
            + "\n".join(f"  {n}" for n in named)
            + (f"\n  ... and {more} more" if more else "")
            + "\nTo build without them and list them all in rejected_index.jsonl: "
              "on_bad_row: skip (config) or --on_bad_row skip."]
    return payload


class FirstError(beam.PTransform):
    """Pending errors -> one payload (or None): the first in file and line order, with
    its real line number. Shared by the build, the prompt's planning pass and `plan`."""

    def __init__(self, datasets, numbering):
        super().__init__()
        self._datasets, self._numbering = datasets, numbering

    def expand(self, pending):
        datasets = self._datasets
        return pending | "First" >> ApplyToAll(lambda errs, num: first_error(errs, num, datasets),
                                               beam.pvalue.AsSingleton(self._numbering))
