"""A row's fields through its file's template into one text: a pack-build document, a
train-tokenizer row. (A unit-build keeps the segments apart: `render_batch`.)"""
from __future__ import annotations

from mintdim_beam.core.errors.failures import PendingError
from mintdim_beam.core.render.template import json_kind, render_value


def pending(key, local_line, cls, kwargs) -> PendingError:
    """A bad row of range `key` (dataset, file, range) at its local line."""
    ds, file_pos, range_no = key
    return PendingError(ds, file_pos, range_no, local_line, cls, kwargs, "file_line")


def unicode_text(key, local_line, text):
    """(text, None), or (None, the pending error) for a text holding a lone surrogate
    (a JSON "\\ud800" escape), which no tokenizer can take as Unicode text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return None, pending(key, local_line, "SourceParseError", {
            "reason": f"lone surrogate {text[exc.start]!r} in a string: not valid Unicode text"})
    return text, None


class Renderer:
    """One file's template: literal parts with the field values put in their slots."""

    def __init__(self, fields, template):
        self.fields = list(fields)
        self.parts = [s.content if s.kind == "literal" else None for s in template.segments]
        self.slots = [(i, self.fields.index(s.name)) for i, s in enumerate(template.segments)
                      if s.kind == "field"]

    def text(self, key, local_line, row):
        """(text, None) or (None, pending error)."""
        try:
            values = [row[name] for name in self.fields]
        except KeyError:
            return None, pending(key, local_line, "SampleSchemaError", {
                "declared_fields": self.fields,
                "missing_fields": [n for n in self.fields if n not in row],
                "available_keys": [str(k) for k in row]})
        parts = list(self.parts)
        for slot, value_at in self.slots:
            value = render_value(values[value_at])
            if value is None:
                name = self.fields[value_at]
                return None, pending(key, local_line, "SampleSchemaError", {
                    "declared_fields": self.fields, "invalid_field": name,
                    "invalid_type": json_kind(row[name])})
            parts[slot] = value
        whole = "".join(parts)
        return unicode_text(key, local_line, whole)
