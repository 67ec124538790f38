"""Templates: split a user template into literal and field segments, render samples.

Each segment is tokenized on its own, so the split is part of the on-disk contract
(`sequence_template`, the per-record segment lengths).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from mintdim_beam.core.errors import TemplateFieldMismatchError

LITERAL_NAME = "token_template"
# Literal segments a tokenizer block may add around every sample (`bos=True`, `eos=True`):
# their content is the token's text, their id the tokenizer's (see `prepare.with_edges`).
EDGE_NAMES = ("bos", "eos")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Segment:
    kind: str  # "literal" | "field"
    name: str  # LITERAL_NAME for literals, the field name otherwise
    content: str | None  # literal text, None for fields


@dataclass(frozen=True)
class CompiledTemplate:
    raw: str
    segments: tuple[Segment, ...]

    @property
    def sequence_template(self) -> list[str]:
        return [segment.name for segment in self.segments]

    @property
    def field_names(self) -> list[str]:
        return [s.name for s in self.segments if s.kind == "field"]

    def length_fields(self) -> list[dict]:
        rows = []
        for index, segment in enumerate(self.segments):
            row = {"index": index, "name": segment.name, "kind": segment.kind,
                   "content": segment.content}
            if segment.kind == "field":
                row["field"] = segment.name
            rows.append(row)
        return rows


def compile_template(template: str, fields: list[str], source_file: str) -> CompiledTemplate:
    """Split `template`; placeholders must equal `fields` as a set, both ways."""
    segments: list[Segment] = []
    cursor = 0
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        if name not in fields:
            raise TemplateFieldMismatchError(
                source_file=source_file, fields=list(fields), template=template,
                field=name, unused=False)
        if match.start() > cursor:
            segments.append(Segment("literal", LITERAL_NAME, template[cursor:match.start()]))
        segments.append(Segment("field", name, None))
        cursor = match.end()
    if cursor < len(template):
        segments.append(Segment("literal", LITERAL_NAME, template[cursor:]))
    used = {s.name for s in segments if s.kind == "field"}
    for name in sorted(set(fields) - used):
        raise TemplateFieldMismatchError(
            source_file=source_file, fields=list(fields), template=template,
            field=name, unused=True)
    return CompiledTemplate(template, tuple(segments))


def render_value(value) -> str | None:
    """A field value as text, or None for JSON types we refuse (null, array, object)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    return None


def json_kind(value) -> str:
    """A JSON value's kind in JSON's words (`object`, `array`, `string`, `number`,
    `boolean`, `null`), for messages about rows and dialogues (a refused field's
    `invalid_type`: null, array or object, `render_value`)."""
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__)
