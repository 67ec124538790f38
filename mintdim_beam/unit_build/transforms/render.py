"""Render: parse each JSONL line and render its template segments (`render_batch`).

Bad lines do not raise here: they leave as `PendingError`s on the `errors` output,
because their line numbers are only known once every range has been counted.
"""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.render.render_batch import layout_for, render_entries

ERRORS = "errors"


class RenderFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans

    def setup(self):
        self._layouts = {ds: layout_for(plan) for ds, plan in self._plans.items()}

    def process(self, element):
        chunk_key, entries = element
        batch, errors = render_entries(self._layouts[chunk_key[0]], chunk_key, entries)
        for error in errors:
            yield beam.pvalue.TaggedOutput(ERRORS, error)
        if batch is not None:
            yield chunk_key, batch


class Render(beam.PTransform):
    """Line batches -> rendered batches (field texts, content hash, empty fields)."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, batches):
        out = batches | "RenderLines" >> beam.ParDo(RenderFn(self._plans)).with_outputs(
            ERRORS, main="rendered")
        return {"rendered": out.rendered, ERRORS: out[ERRORS]}
