"""Preference pairs (DPO and friends) as one record with segments `prompt`, `chosen`,
`rejected`: the prompt is stored once and belongs to both sequences.

Row shapes (TRL's):
- standard: `{"prompt": str, "chosen": str, "rejected": str}`: the three segments are
  the strings as given (no template). Without a `prompt` key, strings are a problem (a
  prompt cut at the first differing character is not a prompt).
- conversational: `{"prompt": [messages], "chosen": [messages], "rejected": [messages]}`;
- implicit prompt: no `prompt` key, `chosen` and `rejected` are full message lists: the
  prompt is their longest common prefix of equal (normalized) messages.
With messages a template is needed: `prompt = render(prompt, add_generation_prompt=True)`,
`chosen = render(prompt + chosen)[len(prompt):]`, likewise `rejected`; the rendered
prompt must be a text prefix of both full renders, else a problem.

Problems besides the dialogue rules of `messages` (checked on prompt + completion;
`message_index` counts the prompt's messages first, then the completion's; the
problem text names the side): a missing `chosen`/`rejected`; mixed strings and lists;
an empty completion (no message, or a string of only whitespace); a completion that does not start with an assistant turn or holds
a user or system turn; `weight: 0` in a completion (a completion is trained whole);
`chosen` equal to `rejected` (strings and message lists alike); an implicit prompt that is empty (chosen and rejected
differ from their first message).

Plain-text spans (`spans`) as for chat records: in string rows, a whole string that
contains special-token text; in message rows, the flagged contents' spans.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from mintdim_beam.core.chat.messages import (DialogueProblem, Message, check_dialogue,
                                              normalize_messages)
from mintdim_beam.core.chat.spans import (SegmentSpan, content_spans, flagged,
                                          segment_spans, special_pattern)

PREFERENCE_SEGMENTS = ("prompt", "chosen", "rejected")


@dataclass(frozen=True)
class PreferenceRecord:
    """One preference record; `plain_spans` are `(segment index, start, end)` with
    segment indices into `PREFERENCE_SEGMENTS` (empty in the common case)."""

    prompt: str
    chosen: str
    rejected: str
    plain_spans: tuple[SegmentSpan, ...] = ()

    @property
    def segments(self) -> tuple[str, str, str]:
        return (self.prompt, self.chosen, self.rejected)


def _side(side: str, exc: DialogueProblem, offset: int = 0) -> DialogueProblem:
    index = None if exc.message_index is None else exc.message_index + offset
    return DialogueProblem(f"{side}: {exc.problem}", index)


def _normalize(side: str, raw) -> tuple[Message, ...]:
    try:
        return normalize_messages(raw, check=False)
    except DialogueProblem as exc:
        raise _side(side, exc) from None


def _check_pair(side: str, prompt: tuple[Message, ...], completion: tuple[Message, ...]) -> None:
    n = len(prompt)
    if not completion:
        raise DialogueProblem(f"{side}: empty completion", n)
    if completion[0].role != "assistant":
        raise DialogueProblem(f"{side}: completion starts with a {completion[0].role} turn, "
                              "not the assistant's", n)
    for i, message in enumerate(completion):
        if message.role in ("user", "system"):
            raise DialogueProblem(f"{side}: completion holds a {message.role} turn "
                                  "(it would be trained on)", n + i)
        if message.role == "assistant" and message.weight == 0:
            raise DialogueProblem(f"{side}: weight 0 in a completion (a completion is "
                                  "trained whole)", n + i)
    try:
        check_dialogue(prompt + completion)
    except DialogueProblem as exc:
        raise _side(side, exc) from None


def _strings(row: dict, special_tokens) -> PreferenceRecord:
    segments = (row["prompt"], row["chosen"], row["rejected"])
    for side in ("chosen", "rejected"):
        if not row[side].strip():
            raise DialogueProblem(f"{side}: empty completion")
    if row["chosen"] == row["rejected"]:
        raise DialogueProblem("chosen and rejected are the same")
    pattern = special_pattern(special_tokens)
    plain = ()
    if pattern is not None:
        plain = tuple((i, 0, len(s)) for i, s in enumerate(segments) if pattern.search(s))
    return PreferenceRecord(*segments, plain)


def _split_implicit(chosen, rejected) -> tuple[tuple[Message, ...], ...]:
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1
    return chosen[:n], chosen[n:], rejected[n:]


def preference_record(row: Any, template=None, *,
                      special_tokens: Sequence[str] | None = ()) -> PreferenceRecord:
    """One preference row -> its record (module docstring). `template` is a
    `ChatTemplate`, needed for message rows."""
    if not isinstance(row, dict):
        raise DialogueProblem("row is not a JSON object")
    for key in ("chosen", "rejected"):
        if key not in row:
            raise DialogueProblem(f"row has no {key!r} key (keys: {', '.join(sorted(row))})")
    present = [row[k] for k in PREFERENCE_SEGMENTS if k in row]
    if all(isinstance(v, str) for v in present):
        if "prompt" not in row:
            raise DialogueProblem("no 'prompt' key and chosen/rejected are strings: an "
                                  "implicit prompt needs message lists")
        return _strings(row, special_tokens)
    if not all(isinstance(v, list) for v in present):
        raise DialogueProblem("prompt, chosen and rejected must all be strings or all "
                              "message lists")
    if template is None:
        raise DialogueProblem("message lists need a chat template")
    chosen, rejected = _normalize("chosen", row["chosen"]), _normalize("rejected", row["rejected"])
    if "prompt" in row:
        prompt = _normalize("prompt", row["prompt"])
    else:
        prompt, chosen, rejected = _split_implicit(chosen, rejected)
        if not prompt and chosen != rejected:
            raise DialogueProblem("no 'prompt' key and chosen/rejected share no leading "
                                  "message to be the prompt", 0)
    if chosen == rejected:
        raise DialogueProblem("chosen and rejected are the same")
    _check_pair("chosen", prompt, chosen)
    _check_pair("rejected", prompt, rejected)
    prompt_text = template.render(prompt, add_generation_prompt=True)
    n, p = len(prompt), len(prompt_text)
    fulls = {}
    for side, completion in (("chosen", chosen), ("rejected", rejected)):
        full = template.render(prompt + completion)
        if not full.startswith(prompt_text):
            raise DialogueProblem(f"{side}: the chat template does not render the prompt "
                                  "(with its generation prompt) as a prefix of prompt + "
                                  f"{side}", n)
        fulls[side] = full
    plain: tuple[SegmentSpan, ...] = ()
    if special_pattern(special_tokens) is not None:
        plain = _spans(template, prompt, chosen, rejected, fulls, p, special_tokens)
    return PreferenceRecord(prompt_text, fulls["chosen"][p:], fulls["rejected"][p:], plain)


def _spans(template, prompt, chosen, rejected, fulls, p, special_tokens) -> tuple[SegmentSpan, ...]:
    """Prompt and chosen spans from the prompt + chosen render, rejected spans from the
    prompt + rejected render (marking only the rejected completion)."""
    n = len(prompt)
    out: list[SegmentSpan] = []
    both = prompt + chosen
    marked = flagged(both, special_tokens)
    if marked:
        spans = content_spans(template, both, marked, fulls["chosen"])
        out += segment_spans([(0, 0, p), (1, p, len(fulls["chosen"]))], spans)
    other = prompt + rejected
    marked = tuple(i for i in flagged(other, special_tokens) if i >= n)
    if marked:
        spans = content_spans(template, other, marked, fulls["rejected"])
        out += segment_spans([(2, p, len(fulls["rejected"]))], spans)
    return tuple(out)
