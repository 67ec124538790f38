"""Render: parse each JSONL line and render its template segments.

Bad lines do not raise here: they leave as `PendingError`s, because their line
numbers are only known once every range has been counted.
"""
from __future__ import annotations

import hashlib
import json

import apache_beam as beam
import numpy as np

from ..failures import PendingError
from ..template import json_type_name, render_value

ERRORS = "errors"


def _parse_error(chunk_key, local_line, reason):
    ds, file_pos, range_no, _ = chunk_key
    return PendingError(ds, file_pos, range_no, local_line, "SourceParseError",
                        {"reason": reason}, "file_line")


def _schema_error(chunk_key, local_line, kwargs):
    ds, file_pos, range_no, _ = chunk_key
    return PendingError(ds, file_pos, range_no, local_line, "SampleSchemaError", kwargs,
                        "file_line")


class RenderFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans

    def process(self, element):
        chunk_key, entries = element
        plan = self._plans[chunk_key[0]]
        declared = list(plan.dataset.fields)
        segments = plan.template.segments
        field_slots = [s.name for s in segments if s.kind == "field"]
        literal_text = "".join  # joined per sample below
        samples, lines, texts, digests, empty = [], [], [], [], []
        for sample, local_line, text, bad_utf8 in entries:
            if bad_utf8 is not None:
                yield beam.pvalue.TaggedOutput(ERRORS, _parse_error(chunk_key, local_line, bad_utf8))
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                yield beam.pvalue.TaggedOutput(
                    ERRORS, _parse_error(chunk_key, local_line, f"invalid JSON syntax: {exc.msg}"))
                continue
            if not isinstance(row, dict):
                yield beam.pvalue.TaggedOutput(
                    ERRORS, _parse_error(chunk_key, local_line, "JSONL row is not a JSON object"))
                continue
            missing = [name for name in declared if name not in row]
            if missing:
                yield beam.pvalue.TaggedOutput(ERRORS, _schema_error(chunk_key, local_line, {
                    "declared_fields": declared, "missing_fields": missing,
                    "available_keys": [str(k) for k in row]}))
                continue
            values = {}
            refused = None
            for name in declared:
                value = render_value(row[name])
                if value is None:
                    refused = name
                    break
                values[name] = value
            if refused is not None:
                yield beam.pvalue.TaggedOutput(ERRORS, _schema_error(chunk_key, local_line, {
                    "declared_fields": declared, "invalid_field": refused,
                    "invalid_type": json_type_name(row[refused])}))
                continue
            rendered = [values[name] for name in field_slots]
            whole = literal_text(s.content if s.kind == "literal" else values[s.name]
                                 for s in segments)
            try:
                encoded = whole.encode("utf-8")
            except UnicodeEncodeError as exc:  # a "\ud800"-style escape: not Unicode text
                yield beam.pvalue.TaggedOutput(ERRORS, _parse_error(
                    chunk_key, local_line,
                    f"lone surrogate {whole[exc.start]!r} in a string: not valid Unicode text"))
                continue
            samples.append(sample)
            lines.append(local_line)
            texts.append(rendered)
            digests.append(hashlib.sha256(encoded).hexdigest())
            empty.append([name for name, value in zip(field_slots, rendered) if value == ""])
        if samples:
            yield chunk_key, {"samples": np.asarray(samples, dtype=np.int64),
                              "lines": np.asarray(lines, dtype=np.int64),
                              "texts": texts, "digests": digests, "empty": empty}


class Render(beam.PTransform):
    """Line batches -> rendered batches (field texts, content hash, empty fields)."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, batches):
        out = batches | "RenderLines" >> beam.ParDo(RenderFn(self._plans)).with_outputs(
            ERRORS, main="rendered")
        return {"rendered": out.rendered, ERRORS: out[ERRORS]}
