"""Render one batch of chat or preference JSONL lines into records: each line's dialogue
normalized, rendered by the dataset's chat template and laid out into the fixed
segments (`core.chat`), in the same batch shape as `render_batch`, so Tokenize, the
helpers' head start and everything after the global step treat both alike.

A line may give several records (`on_extra_turns="split"`): they share the line's
sample number and carry their `parts` (0, 1, ...). A dialogue skipped for its extra
turns, like a line over --max_line_bytes, still takes its sample number and is indexed
in `overflow_index.jsonl` (an `ExtraTurnsPending`).
"""
from __future__ import annotations

import hashlib

import numpy as np

from mintdim_beam.core.chat import (DialogueProblem, chat_records, normalize_row, plain_pieces,
                                    preference_record)
from mintdim_beam.core.chat.history import Continued
from mintdim_beam.core.errors.failures import ExtraTurnsPending, PendingError
from mintdim_beam.core.tokenizer.encode_batch import entry_sizes

_LIST_KEYS = {"messages": "messages", "sharegpt": "conversations"}


class DialogueLayout:
    """Per-dataset constants for rendering dialogues."""

    def __init__(self, plan):
        dialogue = plan.dataset.dialogue
        self.kind = dialogue.kind
        self.key = _LIST_KEYS.get(dialogue.format)
        self.template = plan.chat_template
        self.max_turns, self.on_extra_turns = dialogue.max_turns, dialogue.on_extra_turns
        self.max_messages = dialogue.max_messages
        # Message content holding special-token text is kept as plain text: its spans
        # are encoded without reading tokens out of them (`encode_batch`).
        self.special_tokens = plan.facts.special_tokens if plan.facts else ()
        self.split = self.kind == "chat" and self.on_extra_turns == "split"

    def records(self, row) -> tuple[list, int | None, str]:
        """(records as (segments, plain spans, continues, end), trained turns when
        skipped else None, the full render: record k's text is its first `end` chars)."""
        if self.kind == "preference":
            record = preference_record(row, self.template, special_tokens=self.special_tokens)
            text = "".join(record.segments)
            return [(record.segments, record.plain_spans, False, len(text))], None, text
        layout = chat_records(self.template, normalize_row(row, self.key),
                              max_turns=self.max_turns, on_extra_turns=self.on_extra_turns,
                              special_tokens=self.special_tokens,
                              max_messages=self.max_messages)
        if layout.skipped:
            return [], layout.trained_turns, ""
        return ([(r.segments, r.plain_spans, r.continues, r.end) for r in layout.records], None,
                layout.text)


def _problem(chunk_key, local_line, problem: DialogueProblem) -> PendingError:
    ds, file_pos, range_no, _ = chunk_key
    return PendingError(ds, file_pos, range_no, local_line, "SampleSchemaError",
                        {"problem": problem.problem, "message_index": problem.message_index},
                        "file_line")


def _segment_values(segments, plain_spans, continues: bool) -> list:
    """Texts to encode: a plain string per segment, or, for a segment holding user text
    with special-token strings in it, its `(piece, is_plain)` pieces; a continuing split
    record's `context_0` refers to the record before it (`history.Continued`)."""
    values = list(segments)
    if plain_spans:
        marked = {index for index, _, _ in plain_spans}
        values = [tuple(plain_pieces(text, i, plain_spans)) if i in marked else text
                  for i, text in enumerate(segments)]
    if continues:
        values[0] = Continued(values[0])
    return values


def _digests(text: str, ends) -> list[str]:
    """sha256 of each record's text (`text[:end]`), in one pass over the render."""
    if len(ends) == 1:
        return [hashlib.sha256(text[:ends[0]].encode("utf-8")).hexdigest()]
    state, out, done = hashlib.sha256(), [], 0
    for end in ends:
        state.update(text[done:end].encode("utf-8"))
        out.append(state.copy().hexdigest())
        done = end
    return out


def render_dialogue_entries(layout: DialogueLayout, chunk_key, entries, parse_row, bad_line):
    """(local sample, local line, text, problem) entries -> (batch or None, errors), as
    `render_batch.render_entries`; `parse_row` and `bad_line` are its line handling."""
    samples, lines, parts, texts, digests, errors = [], [], [], [], [], []
    for sample, local_line, text, problem in entries:
        if problem is not None:
            errors.append(bad_line(chunk_key, sample, local_line, problem))
            continue
        row, error = parse_row(chunk_key, local_line, text)
        if error is not None:
            errors.append(error)
            continue
        try:
            records, skipped_turns, text = layout.records(row)
        except DialogueProblem as exc:
            errors.append(_problem(chunk_key, local_line, exc))
            continue
        if skipped_turns is not None:
            ds, file_pos, range_no, _ = chunk_key
            errors.append(ExtraTurnsPending(
                ds, file_pos, range_no, local_line, "SampleSchemaError",
                {"problem": f"{skipped_turns} trained turns, max_turns {layout.max_turns}"},
                "file_line", local_sample=sample, trained_turns=skipped_turns))
            continue
        try:
            record_digests = _digests(text, [end for *_, end in records])
        except UnicodeEncodeError:  # a "\ud800"-style escape: not Unicode text
            errors.append(PendingError(*chunk_key[:3], local_line, "SourceParseError",
                                       {"reason": "lone surrogate in a string: not valid "
                                                  "Unicode text"}, "file_line"))
            continue
        for part, ((segments, spans, continues, _), digest) in enumerate(
                zip(records, record_digests)):
            samples.append(sample)
            lines.append(local_line)
            parts.append(part)
            texts.append(_segment_values(segments, spans, continues))
            digests.append(digest)
    if not samples:
        return None, errors
    batch = {"samples": np.asarray(samples, dtype=np.int64),
             "lines": np.asarray(lines, dtype=np.int64),
             "texts": texts, "digests": digests, "empty": {},
             "entry_sizes": entry_sizes(entries), "first_sample": entries[0][0]}
    if layout.split:
        batch["parts"] = np.asarray(parts, dtype=np.int64)
    return batch, errors
