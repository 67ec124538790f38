"""Encode one rendered batch: every field segment of every sample in one tokenizer call,
literal segments from the plan (encoded once on the driver), packed into numpy arrays.

Plain Python with no Beam in it, so the same code runs inside the Tokenize DoFn or in a
helper encoder process (see `encoder_process`).
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from mintdim_beam.core.chat.history import Continued, value_text
from mintdim_beam.core.chat.spans import special_pattern
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.tokenizer.round_trip import Decoder


def unk_details(tokenizer, texts_by_segment, seg_tokens, unk_id, literal_surfaces):
    """Payload positions, segment indices and source chars of every UNK in one sample."""
    positions, fields, chars = [], [], []
    cursor = 0
    for seg_index, tokens in enumerate(seg_tokens):
        if unk_id in tokens:
            local = [i for i, token in enumerate(tokens) if token == unk_id]
            surfaces = literal_surfaces.get(seg_index)
            if surfaces is None:
                surfaces = tokenizer.surfaces(texts_by_segment[seg_index], local)
            positions.extend(cursor + i for i in local)
            fields.extend([seg_index] * len(local))
            chars.extend(surfaces)
        cursor += len(tokens)
    return positions, fields, chars


class Encoded(NamedTuple):
    """One batch's encoding: `lengths` (samples, segments) int64; `tokens` the flat
    payload of the whole batch; `unks` {sample index: (positions, segment indices,
    surfaces)} and `lossy` {sample index: (the lossy segments' kinds, their
    lossy_index.jsonl fields)} (`round_trip`, `format.lossy_fields`) for the samples
    with any."""

    lengths: np.ndarray
    tokens: np.ndarray
    unks: dict
    lossy: dict


class BatchEncoder:
    """One dataset's encoder: `encode(texts)` -> `Encoded` for a batch whose `texts[i]`
    are sample i's rendered field values in template order."""

    def __init__(self, plan, tokenizer):
        self._plan = plan
        # The engine the launcher chose for this dataset (`engine_choice`).
        if hasattr(tokenizer, "with_engine"):
            tokenizer = tokenizer.with_engine(plan.engine)
        self._tokenizer = tokenizer
        self._dtype = np.uint16 if plan.token_dtype == "uint16" else np.uint32
        # Dialogue segments may come as (piece, is_plain) pieces (`render_dialogues`).
        self._may_have_pieces = plan.dataset.dialogue is not None
        segments = plan.template.segments
        self._fields = [i for i, s in enumerate(segments) if s.kind != "literal"]
        # A SentencePiece chat template's own text keeps its symbols (`<s>`, `[INST]`) as
        # ids; only the record's first segment starts a text (`encode_symbol_values`).
        self._symbols = (plan.dataset.dialogue is not None and tokenizer.kind == "sentencepiece")
        self._starts = [k == 0 and segments[0].kind != "literal" for k in range(len(self._fields))]
        self._appended = tuple(plan.appended_ids.get(i, ()) for i in self._fields)
        self._decoder = Decoder(tokenizer)
        self._names = tuple(plan.template.sequence_template)
        self._literal_surfaces = {
            i: tokenizer.surfaces(s.content, [k for k, t in enumerate(plan.literal_ids[i])
                                              if t == plan.unk_id])
            for i, s in enumerate(segments)
            if s.kind == "literal" and plan.unk_id is not None
            and plan.unk_id in plan.literal_ids[i]}

    def encode(self, texts: list[list[str]]) -> Encoded:
        plan, tokenizer = self._plan, self._tokenizer
        flat = [t for row in texts for t in row]
        m, n = len(texts), plan.n_segments
        continued = [i for i, value in enumerate(flat) if type(value) is Continued] \
            if self._may_have_pieces else []
        starts = self._starts * m
        if continued:  # a split record's history: only its gap is encoded, as text goes on
            flat = [value.gap if type(value) is Continued else value for value in flat]
            for i in continued:
                starts[i] = False
        if self._symbols:
            encoded, strips = encode_symbol_values(tokenizer, flat, starts)
        elif self._may_have_pieces:
            encoded, strips = encode_with_pieces(tokenizer, flat), None
        else:
            encoded, strips = tokenizer.encode_many(flat), None
        if continued:
            flat, strips = resolve_history(continued, len(self._fields), flat, encoded, strips)
        encoded_fields = encoded
        if any(self._appended):  # ids after a segment's text (a completion's EOS)
            appended = self._appended * m
            encoded = [ids + list(extra) if extra else ids for ids, extra in zip(encoded, appended)]
        pieces = []
        field_iter = iter(encoded)
        for _ in range(m):
            for literal in plan.literal_ids:
                pieces.append(next(field_iter) if literal is None else literal)
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=m * n).reshape(m, n)
        total = int(lengths.sum())
        tokens = np.fromiter(itertools.chain.from_iterable(pieces), count=total, dtype=self._dtype)
        unks = {}
        if plan.unk_id is None:  # a byte-level tokenizer without UNK never makes one
            return Encoded(lengths, tokens, unks, self._lossy(flat, encoded_fields, strips, unks))
        unk_at = np.flatnonzero(tokens == plan.unk_id)
        if len(unk_at):
            sample_of = np.repeat(np.arange(m), lengths.sum(axis=1))
            for i in np.unique(sample_of[unk_at]).tolist():
                nf = len(self._fields)
                fields = map(value_text, flat[i * nf:(i + 1) * nf])
                row_texts = [s.content if s.kind == "literal" else next(fields)
                             for s in plan.template.segments]
                unks[i] = unk_details(tokenizer, row_texts, pieces[i * n:(i + 1) * n],
                                      plan.unk_id, self._literal_surfaces)
        return Encoded(lengths, tokens, unks, self._lossy(flat, encoded_fields, strips, unks))

    def _lossy(self, flat, encoded, strips, unks) -> dict:
        """{sample index: (kinds, row fields)}: the field segments whose ids do not decode
        to their text (`round_trip`). A segment without UNK whose text the tokenizer's
        structure keeps (`Decoder.find`) needs no decode. `strips`: per value, whether it
        was encoded as the start of a text (None: every value was, each on its own)."""
        with_unk = {(i, segment) for i, details in unks.items() for segment in details[1]}
        found = self._decoder.find(flat, encoded, strips, self._fields, with_unk, self._symbols)
        return {i: (tuple(entry[1] for entry in entries), fmt.lossy_fields(entries, self._names))
                for i, entries in found.items()}


def resolve_history(continued: list, per_record: int, flat: list, encoded: list, strips):
    """Complete each continuing record's `context_0` (`history.Continued`, at the flat
    indices `continued`, ascending) in place: the previous record's ids, all its
    segments in order, then the gap's. Returns (values with each such text spelled out,
    for the round trip and UNK surfaces; whether each value starts a text)."""
    texts = list(flat)
    strips = None if strips is None else list(strips)
    for i in continued:
        record, slot = divmod(i, per_record)
        if slot != 0 or record == 0:
            raise AssertionError(f"a continuing record's history at value {i} has no record "
                                 "before it in the batch")
        before = range((record - 1) * per_record, record * per_record)
        encoded[i] = [token for k in before for token in encoded[k]] + encoded[i]
        texts[i] = "".join(value_text(texts[k]) for k in before) + value_text(flat[i])
        if strips is not None:
            strips[i] = strips[before[0]]
    return texts, strips


def encode_symbol_values(tokenizer, flat: list, starts: list) -> tuple[list, list]:
    """SentencePiece dialogue values -> (ids per value, whether each was encoded as the
    start of a text). A chat template's own text is cut at every symbol of the model
    (`tokenizer.symbols`: `<s>`, `</s>`, `[INST]`, `<start_of_turn>`), which becomes its
    id; the text between is encoded as the continuation of one text
    (`tokenizer.encode_runs`). Plain pieces (message content with symbol text in it)
    are never cut at a symbol: content stays text. SentencePiece matches user-defined
    symbols in any text it encodes, so plain text is cut inside such a match instead."""
    pattern, user = symbol_patterns(tokenizer)
    runs, run_starts, layouts, strips = [], [], [], []
    for value, start in zip(flat, starts):
        items = _cut_at_symbols(value, pattern, user, tokenizer.symbols)
        layout = []
        for item in items:
            if type(item) is str:  # a run: its place among the batch's runs
                layout.append(len(runs))
                run_starts.append(start and not layout[:-1])
                runs.append(item)
            else:
                layout.append(-1 - item)  # a symbol: its id, negated
        layouts.append(layout)
        strips.append(start and bool(items) and type(items[0]) is str)
    encoded = tokenizer.encode_runs(runs, run_starts) if runs else []
    out = []
    for layout in layouts:
        if len(layout) == 1 and layout[0] >= 0:
            out.append(encoded[layout[0]])
            continue
        ids = []
        for item in layout:
            if item >= 0:
                ids.extend(encoded[item])
            else:
                ids.append(-1 - item)
        out.append(ids)
    return out, strips


def _cut_at_symbols(value, pattern, user, ids_of) -> list:
    """A dialogue value (a string, or `(piece, is_plain)` pieces) as its runs of text
    (str) and symbol ids (int), in order: template text cut at every symbol; plain text
    cut only just inside a user-defined symbol's text (which SentencePiece would read)."""
    parts = []  # text, symbol ids, and None where plain text must be cut
    for text, plain in ((value, False),) if type(value) is str else value:
        pos = 0
        if plain:
            while user is not None and (match := user.search(text, pos)) is not None:
                parts += [text[pos:match.start() + 1], None]
                pos = match.start() + 1
        else:
            for match in pattern.finditer(text):
                parts += [text[pos:match.start()], ids_of[match.group()]]
                pos = match.end()
        parts.append(text[pos:])
    items, run = [], []
    for part in parts + [None]:  # neighbouring text is one run
        if type(part) is str:
            run.append(part)
            continue
        text = "".join(run)
        if text:
            items.append(text)
        run = []
        if part is not None:
            items.append(part)
    return items


def symbol_patterns(tokenizer):
    """(any symbol, user-defined symbols or None) as regexes, longest first; cached."""
    cached = getattr(tokenizer, "_symbol_patterns", None)
    if cached is None:
        user_ids = tokenizer.model.user_defined
        cached = (special_pattern(list(tokenizer.symbols)),
                  special_pattern([t for t, i in tokenizer.symbols.items() if i in user_ids]))
        tokenizer._symbol_patterns = cached
    return cached


def encode_with_pieces(tokenizer, flat: list) -> list:
    """`tokenizer.encode_many(flat)` where some values are `(piece, is_plain)` tuples: a
    segment holding user text with special-token strings. Its plain pieces are encoded
    as text only (`encode_plain_many`: no user can inject `<|eot_id|>`), the others as
    template text, in one call each for the whole batch."""
    marked = [i for i, value in enumerate(flat) if type(value) is not str]
    if not marked:
        return tokenizer.encode_many(flat)
    encoded = tokenizer.encode_many([v if type(v) is str else "" for v in flat])
    pieces = [piece for i in marked for piece in flat[i]]
    normal = iter(tokenizer.encode_many([text for text, plain in pieces if not plain]))
    plain = iter(tokenizer.encode_plain_many([text for text, plain in pieces if plain]))
    for i in marked:
        encoded[i] = [token for _, is_plain in flat[i]
                      for token in next(plain if is_plain else normal)]
    return encoded


def entry_sizes(entries) -> np.ndarray:
    """Bytes-ish size of each line entry (`source.RangeBatches`): its stripped text's
    length, 0 for a line that is not UTF-8."""
    return np.fromiter((len(text) if text else 0 for _, _, text, _ in entries),
                       dtype=np.int64, count=len(entries))


def split_points(sizes, shares: int) -> list[int]:
    """Entry boundaries [0, ..., len(sizes)] that cut a batch's lines into up to `shares`
    contiguous parts of about equal size. By raw line size, not rendered text: a helper
    that reads the lines itself (the head start) then renders only its own part."""
    m = len(sizes)
    if m <= 1 or shares <= 1:
        return [0, m]
    cumulative = np.cumsum(np.asarray(sizes, dtype=np.int64) + 1)
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, shares) / shares,
                           side="right")
    return [0] + sorted(set(int(c) for c in cuts if 0 < c < m)) + [m]


def share_entries(entries, share: int, shares: int) -> list:
    """The line entries of part `share` of `shares` (none if the batch has fewer parts)."""
    cuts = split_points(entry_sizes(entries), shares)
    return entries[cuts[share]:cuts[share + 1]] if share + 1 < len(cuts) else []


def share_bounds(batch: dict, shares: int) -> list[int]:
    """Sample boundaries in a rendered batch of the parts `share_entries` cuts: its
    samples are the valid lines among the entries, numbered from `first_sample` on.
    A part whose lines are all bad is empty."""
    cuts = np.asarray(split_points(batch["entry_sizes"], shares)) + batch["first_sample"]
    return np.searchsorted(batch["samples"], cuts).tolist()
