"""Round-trip evidence: do a segment's ids decode back to its source text?

A tokenizer may lose text without any UNK: SentencePiece's `nmt_nfkc` normalizer turns
`ｈｅｌｌｏ` into `hello` and collapses whitespace (the demo model encodes "\\n" to no
token at all), a `Whitespace` pre-tokenizer drops every space, a lower-casing
normalizer drops case. A build must say so, per sample, instead of training on
something other than its source without a word.

Decoding is emulated with a table (each id's bytes as the tokenizer's decoder gives
them, and whether a leading space is the decoder's to drop), so the check costs one
`b"".join` per segment instead of a decode call (SentencePiece's own decode costs as much
as its encode). The table is built only for decoders whose output is a per-token
concatenation (SentencePiece; Hugging Face ByteLevel, Metaspace, no decoder, and the
Llama-2 style Replace/ByteFallback/Fuse/Strip sequence) and is checked against the real
decoder when it is built (`_agrees`): ids one at a time and random sequences. Any other
decoder, or a table that disagrees, decodes with the tokenizer itself.

Ids a template's own text means as tokens (SentencePiece control and user-defined
pieces, Hugging Face added tokens) decode to their text, so a chat segment with `<s>`
or `<|im_end|>` in it round-trips; an UNK decodes to a byte no UTF-8 text holds, so a
segment with one is never equal to its source (its kind is "unknown").
"""
from __future__ import annotations

import json
import random
import re
import unicodedata
from dataclasses import dataclass

KINDS = ("normalization", "whitespace", "unknown", "other")
_UNK = b"\xff"  # never part of UTF-8 text
_WHITESPACE = re.compile(r"\s+")
EXCERPT = 40  # characters of source / decoded text kept around the first difference


@dataclass(frozen=True)
class Lossy:
    """One segment whose ids do not decode to its source: `kind` (`KINDS`) and short
    excerpts of both texts around where they first differ."""

    segment: int
    kind: str
    source: str
    decoded: str


def kind_of(source: str, decoded: str, has_unk: bool) -> str:
    """Why a round trip failed: an UNK; only whitespace differs; equal after Unicode
    compatibility normalization and case folding (whitespace aside); else other."""
    if has_unk:
        return "unknown"
    bare_source, bare_decoded = _WHITESPACE.sub("", source), _WHITESPACE.sub("", decoded)
    if bare_source == bare_decoded:
        return "whitespace"
    if _folded(bare_source) == _folded(bare_decoded):
        return "normalization"
    return "other"


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def excerpts(source: str, decoded: str) -> tuple[str, str]:
    """Both texts from a little before their first difference, EXCERPT characters each."""
    low, high = 0, min(len(source), len(decoded))
    while low < high:  # the longest common prefix, by halving (slices compare in C)
        mid = (low + high + 1) // 2
        if source[:mid] == decoded[:mid]:
            low = mid
        else:
            high = mid - 1
    start = max(0, low - 8)
    return source[start:start + EXCERPT], decoded[start:start + EXCERPT]


class Decoder:
    """`decode(ids, strip)` -> the bytes a tokenizer's decoder gives for one segment;
    `strip`: the segment was encoded as the start of a text, so a decoder that drops a
    leading space (the dummy prefix) may drop it here."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.unk_id = tokenizer.unk_id
        built = _table(tokenizer)
        self.emulated = built is not None and _agrees(tokenizer, *built)
        self._table, self._lead = built if self.emulated else (None, None)
        self._while_empty = _strips_while_empty(tokenizer)
        self._symbols = _symbol_texts(tokenizer)

    def decode(self, ids, strip: bool) -> bytes:
        if self._table is None:
            return self._slow(ids)
        return _joined(self._table, self._lead, ids, strip, self._while_empty)

    def _slow(self, ids) -> bytes:
        """The tokenizer's own decode, run by run between symbol ids (their text kept)."""
        out, run = [], []
        for token in ids:
            if token == self.unk_id:
                out += [self._decode_run(run), _UNK]
                run = []
            elif token in self._symbols:
                out += [self._decode_run(run), self._symbols[token]]
                run = []
            else:
                run.append(token)
        out.append(self._decode_run(run))
        return b"".join(out)

    def _decode_run(self, run) -> bytes:
        return self._tokenizer.decode_many([run])[0].encode("utf-8") if run else b""

    def lossy(self, segment: int, text: str, ids, strip: bool) -> Lossy | None:
        """None when `ids` decode to `text`; else what was lost."""
        data = self.decode(ids, strip)
        source = text.encode("utf-8")
        if data == source:
            return None
        decoded = data.decode("utf-8", "replace")
        kind = kind_of(text, decoded, self.unk_id is not None and self.unk_id in ids)
        return Lossy(segment, kind, *excerpts(text, decoded))


def _symbol_texts(tokenizer) -> dict:
    """{id: text bytes} of ids a template's text means as tokens."""
    symbols = getattr(tokenizer, "symbols", None) or {}
    return {i: text.encode("utf-8") for text, i in symbols.items() if i != tokenizer.unk_id}


def _table(tokenizer):
    """(bytes per id, drops-a-leading-space per id), or None when the decoder is not a
    per-token concatenation we know."""
    if tokenizer.kind == "sentencepiece":
        return _sp_table(tokenizer)
    return _hf_table(tokenizer)


def _sp_table(tokenizer):
    model = tokenizer.model
    if model.treat_whitespace_as_suffix or not model.escape_whitespaces:
        return None
    pieces = tokenizer.pieces(range(tokenizer.vocab_size))
    bytes_ids = tokenizer.byte_ids
    drops = model.add_dummy_prefix or model.remove_extra_whitespaces
    table, lead = [], []
    for i, piece in enumerate(pieces):
        if i == tokenizer.unk_id:
            table.append(_UNK)
            lead.append(False)
        elif i in bytes_ids:
            table.append(bytes((int(piece[3:5], 16),)))
            lead.append(False)
        else:
            table.append(piece.replace("\u2581", " ").encode("utf-8"))
            lead.append(drops and piece.startswith("\u2581"))
    return table, lead


_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _hf_table(tokenizer):
    decoder = tokenizer.spec.get("decoder")
    tokens = tokenizer.pieces(range(tokenizer.vocab_size))
    unk = tokenizer.unk_id
    kind = _hf_decoder_kind(decoder)
    if kind is None:
        return None
    table, lead = [], []
    if kind == "bytelevel":
        mapping = _byte_decoder()
        for i, token in enumerate(tokens):
            if token is None:
                return None
            try:
                data = bytes(mapping[c] for c in token)
            except KeyError:  # a character outside the byte alphabet: its own UTF-8
                data = token.encode("utf-8")
            table.append(_UNK if i == unk else data)
            lead.append(False)
    elif kind == "none":  # tokens joined with spaces: each one's space, the first dropped
        for i, token in enumerate(tokens):
            if token is None:
                return None
            table.append(b" " + (_UNK if i == unk else token.encode("utf-8")))
            lead.append(True)
    else:  # metaspace / llama: "▁" is a space, a leading one dropped (and bytes fused)
        replacement = decoder.get("replacement", "\u2581") if kind == "metaspace" else "\u2581"
        if kind == "metaspace" and _prepend_scheme(decoder) == "never":
            return None
        for i, token in enumerate(tokens):
            if token is None:
                return None
            byte = _BYTE_PIECE.fullmatch(token) if kind == "llama" else None
            if i == unk:
                data = _UNK
            elif byte:
                data = bytes((int(byte.group(1), 16),))
            else:
                data = token.replace(replacement, " ").encode("utf-8")
            table.append(data)
            lead.append(data.startswith(b" ") if kind == "llama" else token.startswith(replacement))
    return table, lead


def _hf_decoder_kind(decoder) -> str | None:
    if decoder is None:
        return "none"
    kind = decoder.get("type")
    if kind == "ByteLevel":
        return "bytelevel"
    if kind == "Metaspace":
        return "metaspace"
    if kind == "Sequence":
        steps = [d.get("type") for d in decoder.get("decoders") or []]
        if steps == ["Replace", "ByteFallback", "Fuse", "Strip"]:
            replace, strip = decoder["decoders"][0], decoder["decoders"][3]
            if (replace.get("pattern", {}).get("String") == "\u2581" and replace.get("content") == " "
                    and strip.get("content") == " " and strip.get("start") == 1
                    and not strip.get("stop")):
                return "llama"
    return None


def _prepend_scheme(decoder: dict) -> str:
    scheme = decoder.get("prepend_scheme")
    if scheme is None:
        return "always" if decoder.get("add_prefix_space", True) else "never"
    return scheme


def _byte_decoder() -> dict:
    """GPT-2's byte-level alphabet, character -> byte."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars, n = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


# Texts whose encodings the table is checked on, beside random id sequences: byte
# fallback and multi-byte characters, leading and repeated spaces.
_PROBES = ("plain words here", " leading space", "  two spaces", "tab\tand\nnewline",
           "Ünïcödé façade", "漢字かな交じり文", "emoji 😀🏴\u200d☠️", "ﬁ ① ｈｅｌｌｏ", "x")


def _agrees(tokenizer, table, lead, samples: int = 400) -> bool:
    """The table gives what the real decoder gives: every symbol-free id alone, random
    sequences (seeded) and the probes' encodings, with the leading-space rule. Only
    sequences whose bytes are UTF-8 count: decoders replace broken bytes each their own
    way, and a segment equal to its (UTF-8) source never has any."""
    skip = set(_symbol_texts(tokenizer)) | {tokenizer.unk_id}
    ids = [i for i in range(tokenizer.vocab_size) if i not in skip]
    if not ids:
        return True
    rng = random.Random(0)
    singles = ids if len(ids) <= 4000 else rng.sample(ids, 4000)
    sequences = [[i] for i in singles] + [[rng.choice(ids) for _ in range(rng.randint(2, 12))]
                                          for _ in range(samples)]
    sequences += [seq for seq in tokenizer.encode_many(list(_PROBES)) if seq and not skip & set(seq)]
    real = tokenizer.decode_many(sequences)
    for seq, text in zip(sequences, real):
        try:
            data = _joined(table, lead, seq, True, _strips_while_empty(tokenizer))
            decoded = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if decoded != text:
            return False
    return True


def _strips_while_empty(tokenizer) -> bool:
    """SentencePiece with remove_extra_whitespaces drops the leading space of every
    token until it has written something; otherwise only the first token's goes."""
    return tokenizer.kind == "sentencepiece" and tokenizer.model.remove_extra_whitespaces


def _joined(table, lead, ids, strip: bool, while_empty: bool) -> bytes:
    """A segment's bytes from the table. `strip`: a leading space the decoder drops is
    dropped: the first token's, or each leading token's while nothing has been written
    yet (`_strips_while_empty`)."""
    if not (strip and ids and lead[ids[0]]):
        return b"".join(map(table.__getitem__, ids))
    if not while_empty:
        return table[ids[0]][1:] + b"".join(map(table.__getitem__, ids[1:]))
    for k, token in enumerate(ids):
        head = table[token][1:] if lead[token] else table[token]
        if head:
            return head + b"".join(map(table.__getitem__, ids[k + 1:]))
    return b""


def literal_report(decoder: Decoder, text: str, ids, strip: bool = True) -> dict | None:
    """A template literal that encodes to nothing or decodes to other text: what it
    becomes, for the warning and the manifest (None when it round-trips)."""
    if text and not ids:
        return {"literal": text, "tokens": 0, "decoded": "", "kind": kind_of(text, "", False)}
    found = decoder.lossy(0, text, ids, strip)
    if found is None:
        return None
    decoded = decoder.decode(ids, strip).decode("utf-8", "replace")
    return {"literal": text, "tokens": len(ids), "decoded": decoded, "kind": found.kind}


def shown(text: str) -> str:
    """A literal as it reads in a message: JSON-quoted (newlines, tabs visible)."""
    return json.dumps(text, ensure_ascii=False)
