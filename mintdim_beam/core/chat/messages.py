"""Normalize a JSON row into a tuple of `Message`s, before any rendering.

Two input shapes, detected per message (real exports mix the key names, e.g.
`{"conversations": [{"role", "content"}]}`):

- OpenAI: `{"role": ..., "content": ..., "weight": 0|1 (optional), ...}`
- ShareGPT: `{"from": ..., "value": ..., "weight": 0|1 (optional), ...}`

The list is read from `row["messages"]` or `row["conversations"]` (or a key the caller
names). The same dialogue in either shape normalizes to equal messages.

Roles (`ROLE_ALIASES`, matched after lower-casing): `user`, `human` -> user;
`assistant`, `gpt`, `chatgpt`, `bing`, `bard` -> assistant; `system` -> system;
`tool`, `function`, `observation`, `ipython` -> tool. Any other role is a problem.

Content: a string, or a list of text parts `{"type": "text", "text": ...}` joined with
no separator. Every key besides role/from, content/value and weight is kept as given in
`Message.extra` (`tool_calls`, `tool_call_id`, `name`, ...) for templates to read.
A `null` value means "not set", for `weight` and every extra key: Hugging Face
`datasets` writes `"weight": null` (and `null` for any key another row has) in every
message of an export.

Problems (`DialogueProblem`, naming the message index; nothing is silently trained on):
- the row has no `messages` / `conversations` key, or both; the list is not a list or
  is empty; a message is not an object or has neither `role` nor `from`;
- an unknown role; content that is not a string or a list of text parts; a non-text
  content part (image, audio, ...); null content (except the one normalization below);
- an assistant turn whose content is empty, whitespace or null and that has no
  `tool_calls`;
- `weight` that is not 0 or 1, or `weight: 1` on a turn that is not the assistant's;
- a system message that is not the first message;
- the first non-system turn is the assistant's or a tool's;
- two user turns in a row, two assistant turns in a row (tool turns in between
  separate assistant turns), a tool turn that follows neither an assistant nor a tool
  turn.

Normalizations (documented, not problems):
- an assistant turn with non-empty `tool_calls` and null/absent content gets content "";
- `weight: 0` on an assistant turn makes it context (never trained); `weight` on other
  turns may only be 0 and is ignored: only assistant turns are ever trained.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from mintdim_beam.core.render.template import json_kind as _json_type

ROLE_ALIASES: dict[str, str] = {
    "system": "system",
    "user": "user", "human": "user",
    "assistant": "assistant", "gpt": "assistant", "chatgpt": "assistant",
    "bing": "assistant", "bard": "assistant",
    "tool": "tool", "function": "tool", "observation": "tool", "ipython": "tool",
}
LIST_KEYS = ("messages", "conversations")
# Names a message's reasoning is passed under; templates read the first one
# (transformers fills them from each other the same way).
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class DialogueProblem(ValueError):
    """A malformed dialogue or preference pair. The caller, who knows the file and line,
    turns it into `SampleSchemaError(file=, line=, problem=, message_index=)`
    with `to_error`."""

    def __init__(self, problem: str, message_index: int | None = None):
        super().__init__(problem if message_index is None else f"message {message_index}: {problem}")
        self.problem = problem
        self.message_index = message_index

    def to_error(self, *, file: str, line: int):
        from mintdim_beam.core.errors import SampleSchemaError
        return SampleSchemaError(file=file, line=line, problem=self.problem,
                                 message_index=self.message_index)


@dataclass(frozen=True)
class Message:
    """One normalized turn. `role` is system | user | assistant | tool; `weight` is 1
    for a trained assistant turn, 0 otherwise (it defaults to 1 for the assistant and 0
    for the others); `extra` holds the message's other keys as given."""

    role: str
    content: str
    weight: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)  # compared, not hashed

    def __post_init__(self):
        if self.weight is None:
            object.__setattr__(self, "weight", 1 if self.role == "assistant" else 0)

    @property
    def trained(self) -> bool:
        return self.role == "assistant" and self.weight == 1

    def template_dict(self) -> dict[str, Any]:
        """The plain dict a chat template sees: role, content, then the extras whose
        value is not null (as transformers drops them), reasoning aliased like
        transformers does."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        for key, value in self.extra.items():
            if value is not None and key not in out:
                out[key] = value
        reasoning = next((out[k] for k in _REASONING_FIELDS if out.get(k) is not None), None)
        if reasoning is not None:
            out = {"thinking": reasoning, **out, "reasoning_content": reasoning}
        return out


def _content(value, index: int) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise DialogueProblem(f"content is a JSON {_json_type(value)}, not a string or a list "
                              "of text parts", index)
    texts = []
    for part in value:
        if not isinstance(part, dict):
            raise DialogueProblem(f"content part is a JSON {_json_type(part)}, not an object", index)
        kind = part.get("type")
        if kind != "text":
            raise DialogueProblem(f"non-text content part (type {kind!r}): only text is supported",
                                  index)
        text = part.get("text")
        if not isinstance(text, str):
            raise DialogueProblem(f"text content part has a JSON {_json_type(text)} 'text'", index)
        texts.append(text)
    return "".join(texts)


def normalize_message(raw: Any, index: int) -> Message:
    """One raw message (either shape) -> `Message`; shape problems only (ordering is
    `check_dialogue`'s)."""
    if type(raw) is dict and len(raw) == 2:  # the common {"role", "content"}: no extras
        given, content = raw.get("role"), raw.get("content")
        if type(given) is str and type(content) is str:
            role = ROLE_ALIASES.get(given.lower())
            if role is not None and role != "assistant":
                return Message(role, content, 0, {})
            if role == "assistant" and content.strip():
                return Message(role, content, 1, {})
    if not isinstance(raw, dict):
        raise DialogueProblem(f"message is a JSON {_json_type(raw)}, not an object", index)
    if "role" in raw:
        role_key, content_key = "role", "content"
    elif "from" in raw:
        role_key, content_key = "from", "value"
    else:
        raise DialogueProblem("message has neither 'role' nor 'from'", index)
    given = raw[role_key]
    role = ROLE_ALIASES.get(given.lower()) if isinstance(given, str) else None
    if role is None:
        raise DialogueProblem(f"unknown role {given!r} (known: {', '.join(sorted(ROLE_ALIASES))})",
                              index)
    extra = {k: v for k, v in raw.items()
             if k not in (role_key, content_key, "weight") and v is not None}
    weight = raw.get("weight")
    if weight is not None and (type(weight) is not int or weight not in (0, 1)):
        raise DialogueProblem(f"weight must be 0 or 1, got {weight!r}", index)
    if role != "assistant" and weight == 1:
        raise DialogueProblem(f"weight 1 on a {role} turn: only assistant turns are trained", index)
    content = _content(raw.get(content_key), index)
    if role == "assistant":
        if (content is None or not content.strip()) and not extra.get("tool_calls"):
            raise DialogueProblem("empty or null assistant content (and no tool_calls)", index)
        content = content or ""
        weight = 1 if weight is None else weight
    else:
        if content is None:
            raise DialogueProblem(f"null content in a {role} turn", index)
        weight = 0
    return Message(role, content, weight, extra)


def check_dialogue(messages: Sequence[Message]) -> None:
    """The ordering rules (module docstring); raises `DialogueProblem` at the first
    offending message."""
    if not messages:
        raise DialogueProblem("dialogue has no messages")
    previous = None  # role of the previous non-system message
    for index, message in enumerate(messages):
        role = message.role
        if role == "system":
            if index != 0:
                raise DialogueProblem("system message is not the first message", index)
            continue
        if previous is None and role != "user":
            what = "from the assistant" if role == "assistant" else "a tool result"
            raise DialogueProblem(f"first non-system turn is {what}, not the user's", index)
        if role == "user" and previous == "user":
            raise DialogueProblem("two user turns in a row", index)
        if role == "assistant" and previous == "assistant":
            raise DialogueProblem("two assistant turns in a row", index)
        if role == "tool" and previous not in ("assistant", "tool"):
            raise DialogueProblem("tool turn does not follow an assistant or tool turn", index)
        previous = role


def normalize_messages(raw: Any, *, check: bool = True) -> tuple[Message, ...]:
    """A raw message list -> messages; `check=False` skips the ordering rules (for
    pieces of a dialogue, e.g. a preference pair's completion)."""
    if not isinstance(raw, list):
        raise DialogueProblem(f"messages is a JSON {_json_type(raw)}, not an array")
    messages = tuple(normalize_message(item, index) for index, item in enumerate(raw))
    if check:
        check_dialogue(messages)
    return messages


def normalize_row(row: Mapping[str, Any], key: str | None = None) -> tuple[Message, ...]:
    """A JSON row -> its dialogue. `key` names the list; by default `messages` or
    `conversations` (a row with both, or neither, is a problem)."""
    if not isinstance(row, dict):
        raise DialogueProblem(f"row is a JSON {_json_type(row)}, not an object")
    if key is None:
        present = [k for k in LIST_KEYS if k in row]
        if len(present) != 1:
            what = ("both 'messages' and 'conversations' keys" if present
                    else "no 'messages' or 'conversations' key")
            raise DialogueProblem(f"row has {what} (keys: {', '.join(sorted(row)) or 'none'})")
        key = present[0]
    elif key not in row:
        raise DialogueProblem(f"row has no {key!r} key (keys: {', '.join(sorted(row)) or 'none'})")
    return normalize_messages(row[key])
