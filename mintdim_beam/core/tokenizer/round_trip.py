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

What needs no decode at all (`_kept_by`, `_only_spaces_change`), because the
tokenizer's structure decides it: a byte-level BPE keeps every text; SentencePiece's
identity normalizer every text without a literal "▁"; a normalizer checked (with the
model's own `normalize`) to keep printable ASCII and collapse its whitespace gives ASCII
text back collapsed; a tokenizer without decoder joins its tokens with spaces. The
check then costs next to nothing on lossless data and stays linear on lossy data
(`benchmarks/README.md`, Round trip).
"""
from __future__ import annotations

import json
import random
import re
import string
import unicodedata

KINDS = ("normalization", "whitespace", "unknown", "other")
_UNK = b"\xff"  # never part of UTF-8 text
# ASCII the plain-ASCII rule takes: printable, and \t \n \f \r; anything else (control
# characters: SentencePiece's tables drop \x0b and \x1c-\x1f, which Python calls
# whitespace) is left to the decoder. A bytes table deletes these in one C pass.
_PLAIN_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n\r\x0c"
# Where a text and its whitespace collapsed part inside: whitespace other than one space.
_ANOMALIES = ("\n", "  ", "\t", "\r", "\x0c")
EXCERPT = 40  # characters of source / decoded text kept around the first difference


# A lossy segment is a plain tuple (segment index, kind, source excerpt, decoded
# excerpt): `KINDS`, excerpts around where the texts first differ ("" for a record's
# later lossy segments, which no index row shows). Plain, so Beam's coder writes it
# natively (a named tuple is pickled one by one: 3% of a lossy build's time).
SEGMENT, KIND, SOURCE, DECODED = range(4)


def kind_of(source: str, decoded: str, has_unk: bool) -> str:
    """Why a round trip failed: an UNK; only whitespace differs; equal after Unicode
    compatibility normalization and case folding (whitespace aside); else other."""
    if has_unk:
        return "unknown"
    words = source.split()
    if " ".join(words) == decoded:  # the common case: whitespace collapsed, cheaply seen
        return "whitespace"
    bare_source, bare_decoded = "".join(words), "".join(decoded.split())
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
        # What a segment's text alone proves (`find`): by the tokenizer's structure
        # ("all": any text; "no_metaspace": any text without U+2581, which it reads as a
        # space), or, for a normalizer checked to keep printable ASCII as it is, such text
        # without doubled, leading or trailing spaces ("plain_ascii"); None: nothing.
        self.kept_by = _kept_by(tokenizer) if self.emulated else None
        # Tokens that are pieces of the text, joined by spaces (no decoder): a segment
        # can only lose whitespace, so a lossy one is "whitespace" without comparing, and
        # its decoded length says whether it is lossy (`find`).
        self._spaced = self.emulated and _only_spaces_change(tokenizer)
        self._lengths = [len(data) for data in self._table] if self._spaced else None

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

    def lossy(self, segment: int, text: str, ids, strip: bool, data: bytes | None = None,
              excerpt: bool = True, kind: str | None = None) -> tuple | None:
        """None when `ids` decode to `text`; else what was lost (`data`: the decoded bytes,
        when the caller has them; `excerpt=False`: no excerpts, as for a record's second
        lossy segment, which no index row shows)."""
        if data is None:
            data = self.decode(ids, strip)
        if data == text.encode("utf-8"):
            return None
        decoded = data.decode("utf-8", "replace")
        if kind is None:
            kind = kind_of(text, decoded, self.unk_id is not None and self.unk_id in ids)
        return (segment, kind, *(excerpts(text, decoded) if excerpt else ("", "")))

    def find(self, values, encoded, strips, fields, with_unk, symbols: bool) -> dict:
        """{sample: [lossy segment tuples]} for a batch's field values (`len(fields)` per
        sample, in order; `fields[k]`: the template segment of value k), their ids and
        whether each was encoded as the start of a text (`strips`, None: all were);
        `with_unk`: (sample, segment) pairs holding an UNK. A value without UNK whose
        text the tokenizer's structure surely keeps (`kept_by`) is not decoded."""
        kept_by, nf = self.kept_by, len(fields)
        out: dict = {}
        texts = [value if type(value) is str else "".join(p for p, _ in value)
                 for value in values]
        if kept_by == "all":
            todo = [i for i in range(len(texts)) if (i // nf, fields[i % nf]) in with_unk]
        elif kept_by == "no_metaspace":
            todo = [i for i, text in enumerate(texts)
                    if "\u2581" in text or (i // nf, fields[i % nf]) in with_unk]
        elif kept_by == "plain_ascii" and not symbols:
            todo = _plain_ascii(texts, nf, fields, with_unk, out)
        else:
            todo = range(len(texts))
        decode, lossy, spaced = self.decode, self.lossy, self._spaced
        for index in todo:
            text, ids = texts[index], encoded[index]
            sample, segment = index // nf, fields[index % nf]
            strip = True if strips is None else strips[index]
            known = "whitespace" if spaced and (sample, segment) not in with_unk else None
            if known and sample in out:
                # a later lossy segment of a sample already indexed: its kind is known and
                # no excerpt is shown, so its length decides (an equal one is compared)
                if sum(map(self._lengths.__getitem__, ids)) - bool(ids) != len(
                        text.encode("utf-8")):
                    out[sample].append((segment, "whitespace", "", ""))
                    continue
            data = decode(ids, strip)
            if data != text.encode("utf-8"):
                found = out.get(sample)
                first = found is None or segment < found[0][0]  # the one a row shows
                entry = lossy(segment, text, ids, strip, data, excerpt=first, kind=known)
                if found is None:
                    out[sample] = [entry]
                else:
                    found.append(entry)
        for entries in out.values():  # the ASCII pass may have added later segments first
            entries.sort()
        return out


def _plain_ascii(texts, nf, fields, with_unk, out) -> list:
    """The plain-ASCII rule of `_kept_by` on a batch's texts: ASCII text without odd
    control characters decodes to itself with its whitespace collapsed, so it is kept
    (printable, single spaces between words) or lossy ("whitespace", recorded in `out`)
    without a decode. Returns the indices left to decode (UNKs, other text)."""
    todo, plain_bytes = [], _PLAIN_BYTES
    place = {segment: k for k, segment in enumerate(fields)}  # UNKs of literals: not ours
    unk_at = {sample * nf + place[segment] for sample, segment in with_unk if segment in place}
    for index, text in enumerate(texts):
        if index in unk_at:
            todo.append(index)
        elif text.isascii() and text.isprintable() and "  " not in text \
                and text[:1] != " " and text[-1:] != " ":
            continue  # printable ASCII, single spaces between words: kept as it is
        elif not text.isascii() or text.encode("ascii").translate(None, plain_bytes):
            todo.append(index)
        else:  # ASCII with other whitespace, doubled, leading or trailing: collapsed
            sample, segment = divmod(index, nf)
            segment = fields[segment]
            if sample in out:
                out[sample].append((segment, "whitespace", "", ""))
                continue
            part = _first_anomaly(text)  # where the text and its collapsed form part
            at = max(0, part - 8)
            out[sample] = [(segment, "whitespace", text[at:at + EXCERPT],
                            _collapsed_window(text, at, part))]
    return todo


def _collapsed_window(text: str, at: int, part: int) -> str:
    """`" ".join(text.split())[at:at + EXCERPT]` for `at <= part`, the place where the
    two first part, without collapsing all of a long text: up to `part` both are the
    same; there a whitespace run becomes one space when words stand on both sides."""
    # A window is a prefix of the true one at any width, so the width only sets how often
    # the loop runs: 64 characters usually hold the excerpt (160 split and joined more).
    width = EXCERPT + 24
    while True:
        tail = " ".join(text[part:part + width].split())
        # the run's one space, unless the run began before `part` (then it is in the head)
        space = " " if tail and text[part].isspace() and not text[part - 1:part].isspace() \
            and part else ""
        window = text[at:part] + space + tail
        if len(window) > EXCERPT or part + width >= len(text):  # a word cut at the end
            return window[:EXCERPT]                              # is past the excerpt
        width *= 4


def _first_anomaly(text: str) -> int:
    """Where `text` and its whitespace collapsed first part: leading whitespace, two in
    a row, whitespace other than a space, or trailing whitespace."""
    if text[:1].isspace():
        return 0
    at = len(text.rstrip())  # the trailing whitespace, if any
    for mark in _ANOMALIES:  # each search stops where an earlier one found something
        found = text.find(mark, 0, at)
        if found >= 0:
            at = found
    return at


def _kept_by(tokenizer) -> str | None:
    """The structural class of what `Decoder.find` need not decode.

    - Hugging Face byte-level BPE (no normalizer; ByteLevel without a prefix space, Split
      that keeps what it matches, Digits, Punctuation as pre-tokenizers; ByteLevel
      decoder): bytes map to characters one to one, splits and merges only group them,
      the decoder maps them back: every text. "all".
    - SentencePiece with the identity normalizer, whitespace kept, spaces escaped as
      "▁" (Llama, Mistral, Gemma): the pieces concatenate to the text with spaces as "▁"
      (an UNK aside), which the decoder turns back; only a "▁" in the text itself comes
      back as a space. "no_metaspace".
    - SentencePiece with another normalizer whose table keeps printable ASCII as it is
      and collapses its whitespace (checked here with the model's own normalizer):
      ASCII text decodes to itself with its whitespace collapsed. "plain_ascii"."""
    if tokenizer.kind == "sentencepiece":
        model = tokenizer.model
        if not model.escape_whitespaces or model.treat_whitespace_as_suffix:
            return None
        if model.normalizer == "identity" and not model.remove_extra_whitespaces:
            return "no_metaspace"
        normalize = tokenizer.normalize
        keeps = all(normalize(f"a{c}b") == f"\u2581a{c}b" for c in string.printable
                    if c.isprintable() and c != " ")
        # \t \n \f \r and spaces collapse to one space, the ends dropped (`find`)
        collapses = model.remove_extra_whitespaces and all(
            normalize(f"{c}a{c}{c}b{c}") == "\u2581a\u2581b" for c in " \t\n\f\r")
        return "plain_ascii" if keeps and collapses else None
    spec = tokenizer.spec
    if spec.get("normalizer") is not None or (spec.get("model") or {}).get("type") != "BPE":
        return None
    if (spec.get("model") or {}).get("dropout"):
        return None
    decoder = spec.get("decoder") or {}
    if decoder.get("type") != "ByteLevel":
        return None
    steps = _pre_steps(spec.get("pre_tokenizer"))
    if steps is None or not any(step.get("type") == "ByteLevel" for step in steps):
        return None
    for step in steps:
        kind = step.get("type")
        if kind == "ByteLevel" and step.get("add_prefix_space"):
            return None
        if kind in ("Split", "Punctuation") and str(step.get("behavior", "")).lower() == "removed":
            return None
        if kind not in ("ByteLevel", "Split", "Digits", "Punctuation"):
            return None
    return "all"


def _only_spaces_change(tokenizer) -> bool:
    """A Hugging Face tokenizer whose tokens are pieces of the text and whose decoding
    joins them with spaces: no normalizer, pre-tokenizers that only split at whitespace,
    punctuation or digits, a model whose tokens carry no prefix or suffix, no decoder."""
    if tokenizer.kind != "hf_json":
        return False
    spec = tokenizer.spec
    model = spec.get("model") or {}
    if spec.get("normalizer") is not None or spec.get("decoder") is not None:
        return False
    if model.get("type") not in ("BPE", "Unigram", "WordLevel") or model.get(
            "continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return False
    steps = _pre_steps(spec.get("pre_tokenizer"))
    return bool(steps) and all(
        step.get("type") in ("Whitespace", "WhitespaceSplit", "Punctuation", "Digits")
        and str(step.get("behavior", "")).lower() != "removed" for step in steps)


def _pre_steps(node) -> list | None:
    if not isinstance(node, dict):
        return None
    if node.get("type") == "Sequence":
        steps = []
        for child in node.get("pretokenizers") or []:
            inner = _pre_steps(child)
            if inner is None:
                return None
            steps += inner
        return steps
    return [node]


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
    return {"literal": text, "tokens": len(ids), "decoded": decoded, "kind": found[KIND]}


def shown(text: str) -> str:
    """A literal as it reads in a message: JSON-quoted (newlines, tabs visible)."""
    return json.dumps(text, ensure_ascii=False)
