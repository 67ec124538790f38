"""The kinds of source a build reads: templated fields (`jsonl`, mintdim's), chat
dialogues (`chat`) and preference pairs (`preference`), and the validation of the
settings the dialogue kinds add.

Why a module of its own: the field source is the 0.2.1 contract and stays exactly as it
was in `config`; dialogue sources add settings that apply to all their files (one
template, one turn layout per dataset), checked here before any output exists.
"""
from __future__ import annotations

from dataclasses import dataclass

from mintdim_beam.core.config import schema
from mintdim_beam.core.config.schema import (CHAT_FORMATS, EXTRA_TURN_POLICIES, check_choice,
                                            check_keys)
from mintdim_beam.core.errors import ConfigValueError, PipelineValidationError
from mintdim_beam.core.render.template import CompiledTemplate, Segment

KINDS = schema.SOURCE_KINDS
# The keys of each dialogue kind: declared once, in the schema.
CHAT_KEYS = set(schema.SOURCE.keys) | set(schema.SOURCE.variants["chat"])
PREFERENCE_KEYS = set(schema.SOURCE.keys) | set(schema.SOURCE.variants["preference"])
DEFAULT_MAX_MESSAGES = 1024  # = core.chat.segments.MAX_MESSAGES


@dataclass(frozen=True)
class DialogueSource:
    """The settings of a chat or preference source (shared by all its files)."""

    kind: str  # "chat" | "preference"
    format: str | None  # "messages" | "sharegpt" (chat); None for preference
    chat_template: str | None  # "tokenizer", a built-in name, or a path; None: plain text
    template_vars: tuple  # sorted (name, value) pairs, JSON values
    max_turns: int  # trained assistant turns per record (1 for preference)
    on_extra_turns: str  # what a dialogue with more trained turns than max_turns gets
    max_messages: int = DEFAULT_MAX_MESSAGES  # a longer dialogue is a bad row (chat)

    @property
    def variables(self) -> dict:
        return dict(self.template_vars)

    def manifest_block(self, files) -> dict:
        """The manifest's `source` for a dialogue dataset."""
        doc = {"files": list(files), "type": self.kind}
        if self.kind == "chat":
            doc.update(format=self.format, max_turns=self.max_turns,
                       on_extra_turns=self.on_extra_turns, max_messages=self.max_messages)
        doc.update(chat_template=self.chat_template, template_vars=self.variables)
        return doc


def source_kind(source: dict) -> str:
    """`type` when given; a chat source may say so by its `format` alone."""
    kind = schema.source_kind(source)
    check_choice("source.type", kind, KINDS)
    return kind


def _bad(what: str):
    return PipelineValidationError(missing=[what])


def _value(key: str, value) -> ConfigValueError:
    """A bad value, said in the schema's words for the key."""
    name = key.split(".", 1)[1]
    spec = {**schema.SOURCE.keys, **schema.SOURCE.variants["chat"]}[name]
    return ConfigValueError(key=key, value=value, expected=spec.what)


def dialogue_source(source: dict, kind: str) -> DialogueSource:
    """Validate a chat or preference source block (files are checked by the caller)."""
    check_keys(source, schema.SOURCE, "source.")
    template = source.get("chat_template")
    if template is not None and (not isinstance(template, str) or not template):
        raise _value("source.chat_template", template)
    variables = source.get("template_vars") or {}
    if not isinstance(variables, dict) or not all(isinstance(k, str) for k in variables):
        raise _value("source.template_vars", variables)
    if kind == "preference":
        return DialogueSource("preference", None, template, tuple(sorted(variables.items())), 1,
                              "abort")
    fmt = source.get("format", "messages")
    check_choice("source.format", fmt, CHAT_FORMATS)
    if template is None:
        raise _bad("source.chat_template (\"tokenizer\", a built-in name or a .jinja path)")
    turns = source.get("max_turns", 1)
    if type(turns) is not int or turns < 1:
        raise _value("source.max_turns", turns)
    policy = source.get("on_extra_turns", "split")
    check_choice("source.on_extra_turns", policy, EXTRA_TURN_POLICIES)
    messages = source.get("max_messages", DEFAULT_MAX_MESSAGES)
    if type(messages) is not int or messages < 2:
        raise _value("source.max_messages", messages)
    return DialogueSource("chat", fmt, template, tuple(sorted(variables.items())), turns, policy,
                          messages)


def segment_names(dialogue: DialogueSource) -> list[str]:
    """The fixed `sequence_template` of a dialogue dataset."""
    if dialogue.kind == "preference":
        return ["prompt", "chosen", "rejected"]
    names = []
    for i in range(dialogue.max_turns):
        names += [f"context_{i}", f"assistant_{i}"]
    return names + [f"context_{dialogue.max_turns}"]


def is_trained(name: str) -> bool:
    """Whether a trainer learns from a segment: assistant turns, and both completions."""
    return name.startswith("assistant_") or name in ("chosen", "rejected")


def dialogue_template(dialogue: DialogueSource) -> CompiledTemplate:
    """The record layout of a dialogue dataset: every segment is the sample's own text,
    `trained` or `context` (the kinds length_field.json records, for readers' masks)."""
    return CompiledTemplate(f"<{dialogue.kind}>", tuple(
        Segment("trained" if is_trained(name) else "context", name, None)
        for name in segment_names(dialogue)))
