"""Spans of message content that must be tokenized as plain text.

A user must not inject `<|eot_id|>`: when a message's content contains any of the
tokenizer's special-token strings, the caller tokenizes that content as plain text,
while the template's own text keeps its special tokens. The common case is cheap: one
regex search per message (`flagged`), nothing else.

For a flagged sample, `content_spans` renders the dialogue once more with each flagged
content wrapped in two private-use marker characters (inside its leading/trailing
whitespace, so templates that `trim` content still see the markers), strips the
markers, and checks that the result is exactly the normal render: then the markers'
positions are the content spans. If the template renders the marked content
differently (it edits or splits it), that is a problem for the sample. A content the
template renders twice gives two spans.

A span is a flagged message's content without its outer whitespace, as it stands in
the render (`str.strip()`, the same as Jinja's `trim`).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from mintdim_beam.core.chat.messages import DialogueProblem, Message

# (segment index, start, end): a span inside one segment, relative to the segment.
SegmentSpan = tuple[int, int, int]


@lru_cache(maxsize=64)
def _compiled(tokens: tuple[str, ...]) -> re.Pattern | None:
    unique = sorted({t for t in tokens if t}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, unique))) if unique else None


def special_pattern(special_tokens: Sequence[str] | None) -> re.Pattern | None:
    """One regex matching any of the special-token strings (None for none)."""
    return _compiled(tuple(special_tokens or ()))


def flagged(messages: Sequence[Message], special_tokens: Sequence[str] | None) -> tuple[int, ...]:
    """Indices of the messages whose content contains a special-token string."""
    pattern = special_pattern(special_tokens)
    if pattern is None:
        return ()
    return tuple(i for i, m in enumerate(messages) if pattern.search(m.content))


def _markers(text: str) -> tuple[str, str]:
    for code in range(0xE000, 0xF8FF, 2):
        pair = (chr(code), chr(code + 1))
        if pair[0] not in text and pair[1] not in text:
            return pair
    raise DialogueProblem("cannot locate special-token text: the render uses every "
                          "private-use character")


def _wrap(content: str, m0: str, m1: str) -> str:
    core = content.strip()
    if not core:
        return content
    start = content.index(core)
    return content[:start] + m0 + core + m1 + content[start + len(core):]


def content_spans(template, messages: Sequence[Message], indices: Sequence[int], text: str, *,
                  add_generation_prompt: bool = False) -> tuple[tuple[int, int], ...]:
    """Spans in `text` (= `template.render(messages, add_generation_prompt=...)`) of the
    content of `messages[i]` for i in `indices`."""
    if not indices:
        return ()
    m0, m1 = _markers(text)
    chosen = set(indices)
    dicts = []
    for i, message in enumerate(messages):
        d = message.template_dict()
        if i in chosen:
            d["content"] = _wrap(message.content, m0, m1)
        dicts.append(d)
    marked = template.render_dicts(dicts, add_generation_prompt=add_generation_prompt)
    pieces, spans, cursor, length, start = [], [], 0, 0, None
    for match in re.finditer(f"[{m0}{m1}]", marked):
        piece = marked[cursor:match.start()]
        pieces.append(piece)
        length += len(piece)
        cursor = match.end()
        if (match.group() == m0) != (start is None):
            start = -1  # unpaired: make the check below fail
            break
        if match.group() == m0:
            start = length
        else:
            spans.append((start, length))
            start = None
    pieces.append(marked[cursor:])
    if start is not None or "".join(pieces) != text:
        raise DialogueProblem("the chat template changes content that contains special-token "
                              "text, so it cannot be kept apart as plain text", indices[0])
    return tuple(spans)


def segment_spans(bounds: Sequence[tuple[int, int, int]],
                  spans: Sequence[tuple[int, int]]) -> tuple[SegmentSpan, ...]:
    """Absolute `spans` cut along segment `bounds` (segment index, start, end) into
    segment-relative `(segment index, start, end)` triples."""
    out = []
    for index, a, b in bounds:
        for s, e in spans:
            lo, hi = max(s, a), min(e, b)
            if lo < hi:
                out.append((index, lo - a, hi - a))
    return tuple(out)


def plain_pieces(text: str, segment_index: int,
                 plain_spans: Sequence[SegmentSpan]) -> list[tuple[str, bool]]:
    """A segment's text as `(piece, is_plain)` pieces, in order, for the caller to
    tokenize: plain pieces as text only (no special tokens), the others normally."""
    out, cursor = [], 0
    for index, s, e in sorted(p for p in plain_spans if p[0] == segment_index):
        if s > cursor:
            out.append((text[cursor:s], False))
        out.append((text[s:e], True))
        cursor = e
    if cursor < len(text) or not out:
        out.append((text[cursor:], False))
    return out
