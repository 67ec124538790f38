"""Checks of a template's own text against the tokenizer, made once on the driver before
any output: findings ("notices") are warnings, or errors under `on_lossy="abort"`.

- A literal (or a chat template's text) that encodes to no token, or whose ids decode
  to other text (`round_trip`): the demo SentencePiece model encodes "\\n" to nothing.
- A marker the tokenizer does not have as a token (`<|im_end|>` with a tokenizer
  without ChatML's tokens), so it is trained as several pieces of text.
- Special-token text in a SentencePiece literal of a JSONL template (`<s>`,
  `[INST]`): mintdim 0.2.1 encodes it as text, and so do we (`literal_specials:
  text`, the default keeps its bytes); the notice says how to get the id.

A chat template is probed with one plain dialogue (system, two user and assistant
turns, content of ASCII words): the markers it writes there are the ones every record
holds, and the probe's round trip is the template text's own (its content survives any
tokenizer worth building with).
"""
from __future__ import annotations

import re

from mintdim_beam.core.chat.templates import TemplateBug
from mintdim_beam.core.tokenizer.round_trip import Decoder, literal_report, shown

# What a marker looks like: <|im_end|>, <s>, </s>, <start_of_turn>, [INST], [/INST].
MARKER = re.compile(r"<\|[^|<>\s]+\|>|</?[A-Za-z][A-Za-z0-9_.\-]*>|\[/?[A-Z][A-Z0-9_]*\]")
_PROBES = (
    ({"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hello there"},
     {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Thanks"},
     {"role": "assistant", "content": "Welcome"}),
    ({"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "Hi"},
     {"role": "user", "content": "Thanks"}, {"role": "assistant", "content": "Welcome"}),
)


def notice_text(notice: dict) -> str:
    """One notice as the warning line says it."""
    where = notice["where"]
    kind = notice["kind"]
    if kind == "lossy_literal":
        becomes = ("encodes to no token" if not notice["tokens"] else
                   f"decodes to {shown(notice['decoded'])} ({notice['loss']})")
        return (f"{where}: the literal {shown(notice['literal'])} {becomes}; every record "
                "carries this loss (use another tokenizer, or change the literal)")
    if kind == "lossy_template_text":
        return (f"{where}: the chat template's text does not survive the tokenizer "
                f"({notice['loss']}): {shown(notice['source'])} decodes to "
                f"{shown(notice['decoded'])}")
    if kind == "split_marker":
        return (f"{where}: the marker {shown(notice['marker'])} is not a token of this "
                f"tokenizer; it is encoded as {len(notice['pieces'])} pieces of text "
                f"{notice['pieces']}")
    if kind == "special_text_literal":
        return (f"{where}: the literal {shown(notice['literal'])} holds special-token text "
                f"({', '.join(notice['tokens'])}), which SentencePiece encodes as text "
                f"({notice['pieces']} pieces), not as its id, as mintdim 0.2.1 does; for the "
                "id use bos: true / eos: true, or tokenizer literal_specials: ids")
    raise ValueError(f"unknown notice kind {kind!r}")


def encode_literal(tokenizer, text: str, literal_specials: str | None) -> tuple[list, bool]:
    """A literal segment's (ids, encoded as the start of a text). Default (None): as the
    tokenizer encodes a text on its own (mintdim's rule: SentencePiece keeps `<s>` as
    text, Hugging Face reads added tokens). "ids": special-token text becomes its id
    (SentencePiece: the text after one is encoded as a continuation); "text":
    special-token text stays text."""
    if literal_specials == "text":
        return list(tokenizer.encode_plain_many([text])[0]), True
    if literal_specials == "ids" and tokenizer.kind == "sentencepiece":
        from mintdim_beam.core.tokenizer.encode_batch import encode_symbol_values

        (ids,), (strip,) = encode_symbol_values(tokenizer, [text], [True])
        return ids, strip
    return list(tokenizer.encode_many([text])[0]), True


def literal_notices(tokenizer, decoder: Decoder, segments, where: str,
                    literal_specials: str | None) -> list[dict]:
    """Notices for a JSONL template's literal segments (`segments` as compiled, without
    the bos / eos edges, which are ids)."""
    out = []
    symbols = getattr(tokenizer, "symbols", None) or {}
    for index, segment in enumerate(segments):
        if segment.kind != "literal":
            continue
        text = segment.content
        ids, strip = encode_literal(tokenizer, text, literal_specials)
        found = literal_report(decoder, text, ids, strip)
        if found is not None:
            out.append({"kind": "lossy_literal", "where": where, "segment": index,
                        "literal": text, "tokens": found["tokens"],
                        "decoded": found["decoded"], "loss": found["kind"]})
        named = _unread_symbols(tokenizer, text)
        if named and literal_specials != "ids":
            out.append({"kind": "special_text_literal", "where": where, "segment": index,
                        "literal": text, "tokens": named, "pieces": len(ids)})
        out += _split_markers(tokenizer, [m.group() for m in MARKER.finditer(text)
                                          if m.group() not in symbols], where)
    return out


def chat_notices(tokenizer, decoder: Decoder, template, where: str) -> list[dict]:
    """Notices for a chat template: the markers its probe render writes that are not
    tokens, and the probe render's round trip."""
    rendered = None
    for probe in _PROBES:
        try:
            rendered = template.render_dicts(list(probe))
            break
        except TemplateBug:  # the template's own fault: the caller's config error
            raise
        except ValueError:  # DialogueProblem: the template refuses this probe's shape
            continue
    if rendered is None:
        return []
    symbols = getattr(tokenizer, "symbols", None)
    markers = [m.group() for m in MARKER.finditer(rendered)
               if symbols is None or m.group() not in symbols]
    out = _split_markers(tokenizer, markers, where)
    if tokenizer.kind == "sentencepiece":
        from mintdim_beam.core.tokenizer.encode_batch import encode_symbol_values

        (ids,), (strip,) = encode_symbol_values(tokenizer, [rendered], [True])
    else:
        ids, strip = tokenizer.encode_many([rendered])[0], True
    found = decoder.lossy(0, rendered, ids, strip)
    if found is not None:
        _, loss, source, decoded = found
        out.append({"kind": "lossy_template_text", "where": where, "source": source,
                    "decoded": decoded, "loss": loss})
    return out


def _unread_symbols(tokenizer, text: str) -> list[str]:
    """The SentencePiece control and unknown pieces written in `text`: encoded as text,
    since SentencePiece reads only user-defined symbols out of text."""
    if tokenizer.kind != "sentencepiece":
        return []
    from mintdim_beam.core.tokenizer.encode_batch import symbol_patterns

    pattern, _ = symbol_patterns(tokenizer)
    user = tokenizer.model.user_defined
    return sorted({m.group() for m in pattern.finditer(text)
                   if tokenizer.symbols[m.group()] not in user})


def _split_markers(tokenizer, markers, where: str) -> list[dict]:
    out, seen = [], set()
    for marker in markers:
        if marker in seen:
            continue
        seen.add(marker)
        if tokenizer.kind == "sentencepiece":  # as the template's text continues
            ids = tokenizer.encode_runs([marker], [False])[0]
        else:
            ids = tokenizer.encode_many([marker])[0]
        if len(ids) > 1:
            out.append({"kind": "split_marker", "where": where, "marker": marker,
                        "pieces": tokenizer.pieces(ids)})
    return out
