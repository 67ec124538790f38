"""Render one batch of JSONL lines: parse each line and render its template segments.

Plain Python with no Beam in it, so the Render DoFn and a helper encoder's head start
(`encoder_process`) cut identical texts from the same lines.

Bad lines do not raise here: they come back as `PendingError`s, because their line
numbers are only known once every range has been counted.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import numpy as np

from mintdim_beam.core.errors.failures import LongLinePending, PendingError
from mintdim_beam.core.inputs.source import long_line_reason
from mintdim_beam.core.render.render_dialogues import DialogueLayout, render_dialogue_entries
from mintdim_beam.core.render.template import EDGE_NAMES, json_kind, render_value
from mintdim_beam.core.tokenizer.encode_batch import entry_sizes

# The JSON scanner json.loads itself uses, called directly: lines are already stripped,
# so the whitespace handling around it only costs time. Failures go to json.loads.
_SCAN = json.JSONDecoder().scan_once


def _parse_error(chunk_key, local_line, reason):
    ds, file_pos, range_no, _ = chunk_key
    return PendingError(ds, file_pos, range_no, local_line, "SourceParseError",
                        {"reason": reason}, "file_line")


def _bad_line(chunk_key, sample, local_line, problem):
    """A line that could not be read: invalid UTF-8 (`problem` is the reason) or over
    --max_line_bytes (`problem` is its `source.LongLine`)."""
    if type(problem) is str:
        return _parse_error(chunk_key, local_line, problem)
    ds, file_pos, range_no, _ = chunk_key
    return LongLinePending(ds, file_pos, range_no, local_line, "SourceParseError",
                           {"reason": long_line_reason(problem.nbytes, problem.limit)},
                           "file_line", local_sample=sample, line_bytes=problem.nbytes)


def _schema_error(chunk_key, local_line, kwargs):
    ds, file_pos, range_no, _ = chunk_key
    return PendingError(ds, file_pos, range_no, local_line, "SampleSchemaError", kwargs,
                        "file_line")


class Layout:
    """Per-dataset constants for rendering: which declared field fills which segment."""

    def __init__(self, plan):
        self.declared = list(plan.dataset.fields)
        segments = plan.template.segments
        self.slot_names = [s.name for s in segments if s.kind == "field"]
        self.slot_values = [self.declared.index(name) for name in self.slot_names]
        # BOS / EOS segments are token ids, not text: the hash covers the template's text
        self.parts = [s.content if s.kind == "literal" and s.name not in EDGE_NAMES else ""
                      for s in segments]
        self.slot_parts = [i for i, s in enumerate(segments) if s.kind == "field"]


def parse_row(chunk_key, local_line, text):
    """(the line's JSON value, None) or (None, its SourceParseError): not JSON, not an
    object. A Parquet row or JSON array element comes parsed (`source.RangeBatches`)."""
    if type(text) is dict:
        return text, None
    try:
        row, end = _SCAN(text, 0)
        if end != len(text):
            raise ValueError("extra data")
    except RecursionError:  # Python's parser recurses per level: 200k levels end here
        return None, _parse_error(chunk_key, local_line,
                                  "JSON nested too deeply to parse (arrays or objects "
                                  "nested thousands of levels)")
    except (StopIteration, ValueError):
        try:  # json.loads has the canonical message for every syntax error
            json.loads(text)
        except json.JSONDecodeError as exc:
            return None, _parse_error(chunk_key, local_line, f"invalid JSON syntax: {exc.msg}")
        raise
    if type(row) is not dict:
        return None, _parse_error(chunk_key, local_line, "JSONL row is not a JSON object")
    return row, None


def layout_for(plan):
    """How a dataset's lines render: templated fields, or dialogues (`render_dialogues`)."""
    if plan.dataset.dialogue is not None:
        return DialogueLayout(plan)
    return Layout(plan)


def numbered(errors, entries):
    """The errors with their lines' sample numbers: a row rejected under
    `on_bad_row="skip"` gives its number up, so the ids after it close the gap."""
    if not errors:
        return errors
    samples = {local_line: sample for sample, local_line, _, _ in entries}
    return [e if e.local_sample >= 0 else replace(e, local_sample=samples[e.local_line])
            for e in errors]


def render_entries(layout, chunk_key, entries):
    """(local sample, local line, text, problem) entries -> (batch or None, errors).

    The batch: samples and lines (int64 arrays), texts (each sample's field values in
    template order), digests (sha256 of the whole rendered text), empty ({sample index:
    the fields rendered empty} for the samples with any), and entry_sizes and
    first_sample, which say how the helpers split the batch
    (`encode_batch.share_bounds`); errors: one `PendingError` per bad line."""
    if isinstance(layout, DialogueLayout):
        batch, errors = render_dialogue_entries(layout, chunk_key, entries, parse_row, _bad_line)
        return batch, numbered(errors, entries)
    declared, slot_values, slot_names = layout.declared, layout.slot_values, layout.slot_names
    parts, slot_parts = list(layout.parts), layout.slot_parts
    sha256, only_str = hashlib.sha256, {str}
    samples, lines, texts, digests, errors = [], [], [], [], []
    empty = {}  # only samples with empty fields: 100k empty lists cost 0.02 s to unpickle
    for sample, local_line, text, problem in entries:
        if problem is not None:
            errors.append(_bad_line(chunk_key, sample, local_line, problem))
            continue
        row, error = parse_row(chunk_key, local_line, text)
        if error is not None:
            errors.append(error)
            continue
        try:
            values = [row[name] for name in declared]
        except KeyError:
            errors.append(_schema_error(chunk_key, local_line, {
                "declared_fields": declared,
                "missing_fields": [name for name in declared if name not in row],
                "available_keys": [str(k) for k in row]}))
            continue
        if set(map(type, values)) != only_str:
            values = [render_value(v) for v in values]
            if None in values:
                name = declared[values.index(None)]
                errors.append(_schema_error(chunk_key, local_line, {
                    "declared_fields": declared, "invalid_field": name,
                    "invalid_type": json_kind(row[name])}))
                continue
        rendered = [values[i] for i in slot_values]
        for k, value in zip(slot_parts, rendered):
            parts[k] = value
        whole = "".join(parts)
        try:
            encoded = whole.encode("utf-8")
        except UnicodeEncodeError as exc:  # a "\ud800"-style escape: not Unicode text
            errors.append(_parse_error(
                chunk_key, local_line,
                f"lone surrogate {whole[exc.start]!r} in a string: not valid Unicode text"))
            continue
        samples.append(sample)
        lines.append(local_line)
        texts.append(rendered)
        digests.append(sha256(encoded).hexdigest())
        if "" in rendered:
            empty[len(samples) - 1] = [n for n, v in zip(slot_names, rendered) if not v]
    errors = numbered(errors, entries)
    if not samples:
        return None, errors
    return {"samples": np.asarray(samples, dtype=np.int64),
            "lines": np.asarray(lines, dtype=np.int64),
            "texts": texts, "digests": digests, "empty": empty,
            "entry_sizes": entry_sizes(entries), "first_sample": entries[0][0]}, errors
