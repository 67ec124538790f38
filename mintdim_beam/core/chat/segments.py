"""A rendered dialogue split into a chat record's segments.

Each *trained* assistant turn (`Message.trained`) is its own segment `assistant_<i>`,
holding the turn's content AND the text the template puts after it up to the next
message (its end-of-turn, e.g. `<|im_end|>\\n`, `<|eot_id|>`), so the model learns to
stop. Everything else (system, user and tool turns, role headers, BOS, the assistant
header, untrained assistant turns) is context, in `context_<i>` segments between them:
`[context_0, assistant_0, context_1, ..., assistant_{T-1}, context_T]`.

How a turn is found (`render_dialogue`): for trained message k,
`prefix = render(messages[:k], add_generation_prompt=True)` and
`upto = render(messages[:k+1])`; the turn is `full[len(prefix):len(upto)]`, where
`full = render(messages)` is rendered once. Both must be text prefixes of `full`, and
turns must not overlap; otherwise the template does not render turns as prefixes (it
renders history differently from a generation prompt, e.g. it drops earlier reasoning
or adds a date only to the last turn): a problem for that sample. Cost: 2T+1 renders
for T trained turns (one fewer when the dialogue ends on a trained turn). In the common
case one render: the turns of a dialogue of an already seen structure (roles, trained
turns, outer whitespace, extras) come from a cached render of a skeleton of that
structure, when substituting the contents into it gives exactly this render
(`skeleton`); otherwise the prefix renders above. `fast=False` forces the latter.

A dataset has a fixed `max_turns` K: a record has the 2K+1 segments of
`segment_names(K)`; with T <= K trained turns, the segments after `context_T` are ""
(`context_T` holds the text after the last trained turn). With T > K, `on_extra_turns`:
- `abort`: a problem naming the (K+1)-th trained turn's message;
- `skip`: no records (`Layout.skipped`, `Layout.trained_turns` for the count);
- `split`: ceil(T/K) records; record j holds trained turns jK .. min(jK+K, T)-1. Its
  `context_0` is the whole render before its first trained turn (earlier trained turns
  included, as context); every record but the last ends right after its last trained
  turn (its trailing context is ""); the last ends where the dialogue ends. So each
  record's segments concatenate to a prefix of the full render, and the last one's to
  all of it. Record j > 0 `continues` record j-1: its `context_0` is record j-1's text
  then the context up to its first turn, and only that gap is held (`segments[0]`), so
  a dialogue's records cost memory and encoding linear in the dialogue; the tokenizer
  reuses record j-1's ids for the history (`history.Continued`), each piece of text is
  encoded once. The records of one split dialogue may hold at most
  `MAX_SPLIT_CHARACTERS` characters in all (they repeat the history: quadratic in the
  turns); a dialogue over it is a problem, before anything is encoded.
A dialogue with no trained turn is a problem (nothing to train on).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from mintdim_beam.core.chat.messages import DialogueProblem, Message
from mintdim_beam.core.chat.skeleton import fast_turns, skeleton_render
from mintdim_beam.core.chat.spans import SegmentSpan, content_spans, flagged, segment_spans

ON_EXTRA_TURNS = ("split", "abort", "skip")
MAX_MESSAGES = 1024  # default bound on a dialogue's messages (its turns are found by
#                     rendering each prefix: time quadratic in the messages)
MAX_SPLIT_CHARACTERS = 1 << 26  # all records of one split dialogue, history repeated


@lru_cache(maxsize=64)
def segment_names(max_turns: int) -> tuple[str, ...]:
    """`context_0, assistant_0, ..., assistant_{K-1}, context_K` for K = max_turns."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    names = []
    for i in range(max_turns):
        names += [f"context_{i}", f"assistant_{i}"]
    return tuple(names + [f"context_{max_turns}"])


@dataclass(frozen=True)
class RenderedDialogue:
    """The full render, the character range of each trained turn in it (in order), the
    message index of each, and the content spans to keep as plain text (usually none)."""

    text: str
    turns: tuple[tuple[int, int], ...]
    turn_messages: tuple[int, ...]
    content_spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ChatRecord:
    """One record: `segments` aligned with `segment_names(max_turns)`; `plain_spans` are
    `(segment index, start, end)` character ranges to tokenize as plain text (empty in
    the common case); `first_turn` is the index of its first trained turn in the
    dialogue, `turns` how many it holds; `continues`: a split record after the first,
    whose `context_0` is the previous record's whole text followed by `segments[0]`."""

    segments: tuple[str, ...]
    plain_spans: tuple[SegmentSpan, ...] = ()
    first_turn: int = 0
    turns: int = 0
    continues: bool = False  # context_0 is the previous record's text, then segments[0]
    end: int = 0  # characters of the full render the record covers (it is text[:end])


@dataclass(frozen=True)
class Layout:
    """The records of one dialogue; `skipped` when `on_extra_turns="skip"` dropped it."""

    records: tuple[ChatRecord, ...]
    trained_turns: int
    skipped: bool = False
    text: str = ""  # the full render

    def full_segments(self, j: int) -> tuple[str, ...]:
        """Record j's segments with its whole `context_0` spelled out (a split record
        holds only the part after the previous record)."""
        record = self.records[j]
        if not record.continues:
            return record.segments
        return (self.text[:self.records[j - 1].end] + record.segments[0],) + record.segments[1:]


def _not_prefix(what: str, k: int) -> DialogueProblem:
    return DialogueProblem(f"the chat template does not render turns as prefixes: {what} of "
                           "the dialogue", k)


def _prefix_turns(template, dicts: Sequence[dict], trained: Sequence[int],
                  text: str) -> tuple[list[tuple[int, int]], list[int]]:
    """The exact procedure: each trained turn of `text` (= the full render of `dicts`)
    by prefix renders (module docstring)."""
    turns, turn_messages, last_end = [], [], 0
    for k in trained:
        prefix = template.render_dicts(dicts[:k], add_generation_prompt=True)
        if not text.startswith(prefix):
            raise _not_prefix("the generation prompt before this turn is not a prefix", k)
        upto = text if k + 1 == len(dicts) else template.render_dicts(dicts[:k + 1])
        if not text.startswith(upto):
            raise _not_prefix("the dialogue up to this turn is not a prefix", k)
        start, end = len(prefix), len(upto)
        if start < last_end:
            raise _not_prefix("this turn's generation prompt reaches into the previous turn", k)
        if end <= start:
            raise DialogueProblem("the chat template renders this trained turn as no text", k)
        turns.append((start, end))
        turn_messages.append(k)
        last_end = end
    return turns, turn_messages


def render_dialogue(template, messages: Sequence[Message], *,
                    special_tokens: Sequence[str] | None = (),
                    fast: bool = True) -> RenderedDialogue:
    """Render once in full, then find each trained turn by prefix renders (module
    docstring). With `fast` (the default), a dialogue whose structure was seen before
    takes its turns from a cached skeleton render when that provably rebuilds this
    render (`skeleton`): one render instead of 2T+1, the same result; with a template
    whose render is its skeleton's by construction (`ChatTemplate.skeleton_exact`),
    none."""
    dicts = [m.template_dict() for m in messages]
    trained = [k for k, m in enumerate(messages) if m.trained]
    exact = fast and trained and getattr(template, "skeleton_exact", False)
    found = skeleton_render(template, dicts, trained, _prefix_turns) if exact else None
    if found is not None:
        text, turns = found
    else:
        text = template.render_dicts(dicts)
        turns = fast_turns(template, dicts, trained, text, _prefix_turns) \
            if fast and trained and not exact else None
    if turns is None:
        turns, turn_messages = _prefix_turns(template, dicts, trained, text)
    else:
        turn_messages = trained
    marked = flagged(messages, special_tokens)
    spans = content_spans(template, messages, marked, text) if marked else ()
    return RenderedDialogue(text, tuple(turns), tuple(turn_messages), spans)


def _count_trained(messages: Sequence[Message]) -> tuple[int, list[int]]:
    where = [k for k, m in enumerate(messages) if m.trained]
    return len(where), where


def _check_policy(max_turns: int, on_extra_turns: str) -> None:
    if on_extra_turns not in ON_EXTRA_TURNS:
        raise ValueError(f"on_extra_turns must be one of {', '.join(ON_EXTRA_TURNS)}, "
                         f"got {on_extra_turns!r}")
    segment_names(max_turns)  # validates max_turns


def _too_many(count: int, max_turns: int, message_index: int) -> DialogueProblem:
    return DialogueProblem(f"dialogue has {count} trained assistant turns, more than "
                           f"max_turns={max_turns} (on_extra_turns=abort)", message_index)


def lay_out(rendered: RenderedDialogue, *, max_turns: int,
            on_extra_turns: str = "abort") -> Layout:
    """Lay the trained turns into records of `segment_names(max_turns)` (module
    docstring)."""
    _check_policy(max_turns, on_extra_turns)
    text, turns = rendered.text, rendered.turns
    count = len(turns)
    if count == 0:
        raise DialogueProblem("dialogue has no trained assistant turn")
    if count > max_turns:
        if on_extra_turns == "abort":
            raise _too_many(count, max_turns, rendered.turn_messages[max_turns])
        if on_extra_turns == "skip":
            return Layout((), count, skipped=True)
    width = 2 * max_turns + 1
    starts = range(0, count, max_turns)
    ends = [len(text) if first + max_turns >= count else turns[first + max_turns - 1][1]
            for first in starts]
    if len(ends) > 1 and sum(ends) > MAX_SPLIT_CHARACTERS:
        held = list(itertools.accumulate(ends))
        over = next(j for j, total in enumerate(held) if total > MAX_SPLIT_CHARACTERS)
        raise DialogueProblem(
            f"its {len(ends)} split records would hold {held[-1]:,} characters, more than "
            f"{MAX_SPLIT_CHARACTERS:,} (each repeats the history before it; raise max_turns "
            "or shorten the dialogue)", rendered.turn_messages[starts[over]])
    records, previous_end = [], 0
    for first, end in zip(starts, ends):
        group = turns[first:first + max_turns]
        bounds, cursor = [], previous_end  # a continuing record holds the gap only
        for s, e in group:
            bounds += [(cursor, s), (s, e)]
            cursor = e
        bounds.append((cursor, end))
        bounds += [(end, end)] * (width - len(bounds))
        plain = ()
        if rendered.content_spans:
            plain = segment_spans([(i, a, b) for i, (a, b) in enumerate(bounds)],
                                  rendered.content_spans)
        records.append(ChatRecord(tuple(text[a:b] for a, b in bounds), plain, first, len(group),
                                  continues=first > 0, end=end))
        previous_end = end
    return Layout(tuple(records), count, text=text)


def chat_records(template, messages: Sequence[Message], *, max_turns: int,
                 on_extra_turns: str = "abort",
                 special_tokens: Sequence[str] | None = (), fast: bool = True,
                 max_messages: int = MAX_MESSAGES) -> Layout:
    """Render and lay out one dialogue. Dialogues that are skipped, or aborted for too
    many turns, or have no trained turn, or more than `max_messages` messages, are
    decided before rendering anything. `fast`: see `render_dialogue`."""
    _check_policy(max_turns, on_extra_turns)
    count, where = _count_trained(messages)
    if count == 0:
        raise DialogueProblem("dialogue has no trained assistant turn")
    if count > max_turns and on_extra_turns == "abort":
        raise _too_many(count, max_turns, where[max_turns])
    if count > max_turns and on_extra_turns == "skip":
        return Layout((), count, skipped=True)
    if len(messages) > max_messages:
        raise DialogueProblem(f"dialogue has {len(messages):,} messages, more than "
                              f"max_messages={max_messages:,} (finding its turns renders "
                              "every prefix of it: raise source.max_messages to accept it)",
                              max_messages)
    rendered = render_dialogue(template, messages, special_tokens=special_tokens, fast=fast)
    return lay_out(rendered, max_turns=max_turns, on_extra_turns=on_extra_turns)
