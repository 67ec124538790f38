"""Encode one rendered batch: every field segment of every sample in one tokenizer call,
literal segments from the plan (encoded once on the driver), packed into numpy arrays.

Plain Python with no Beam in it, so the same code runs inside the Tokenize DoFn or in a
helper encoder process (see `encoder_process`). The chat package (and Jinja with it) is
imported only for dialogue datasets: a helper encoding JSONL fields starts without it.
"""
from __future__ import annotations

import functools
import itertools
import operator
from typing import NamedTuple

import numpy as np

from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.tokenizer.round_trip import Decoder


_SEGMENT_KIND = operator.itemgetter(0, 1)  # a lossy segment's (segment, kind): `round_trip`


class Encoded(NamedTuple):
    """One batch's encoding: `lengths` (samples, segments) int64; `tokens` the flat
    payload of the whole batch; `unks` {sample index: (positions, segment indices,
    surfaces)} and `lossy` {sample index: (the lossy segments' kinds, their
    lossy_index.jsonl fields)} (`round_trip`, `format.lossy_fields`) for the samples
    with any; `engine` what encoded them ({engine: samples} for a batch merged from
    helpers' shares), recorded in the manifest (`tokenizer_card.engine.used`)."""

    lengths: np.ndarray
    tokens: np.ndarray
    unks: dict
    lossy: dict
    engine: str | dict = ""


class BatchEncoder:
    """One dataset's encoder: `encode(texts)` -> `Encoded` for a batch whose `texts[i]`
    are sample i's rendered field values in template order."""

    def __init__(self, plan, tokenizer):
        self._plan = plan
        # The engine the launcher chose for this dataset (`engine_choice`).
        if hasattr(tokenizer, "with_engine"):
            tokenizer = tokenizer.with_engine(plan.engine)
        self._tokenizer = tokenizer
        # BPE dropout draws other ids for each copy of a text: those are encoded each.
        self._encode_many = tokenizer.encode_many if _samples(tokenizer) else \
            functools.partial(encode_once_each, tokenizer.encode_many)
        self._dtype = np.uint16 if plan.token_dtype == "uint16" else np.uint32
        # Dialogue segments may come as (piece, is_plain) pieces (`render_dialogues`).
        self._may_have_pieces = plan.dataset.dialogue is not None
        if self._may_have_pieces:
            from mintdim_beam.core.chat.history import Continued
            self._continued = Continued
        segments = plan.template.segments
        self._fields = [i for i, s in enumerate(segments) if s.kind != "literal"]
        self._field_slot = {segment: k for k, segment in enumerate(self._fields)}
        # A SentencePiece chat template's own text keeps its symbols (`<s>`, `[INST]`) as
        # ids; only the record's first segment starts a text (`encode_symbol_values`).
        self._symbols = (plan.dataset.dialogue is not None and tokenizer.kind == "sentencepiece")
        self._starts = [k == 0 and segments[0].kind != "literal" for k in range(len(self._fields))]
        self._appended = tuple(plan.appended_ids.get(i, ()) for i in self._fields)
        self._decoder = Decoder(tokenizer)
        self._names = tuple(plan.template.sequence_template)
        self._lossy_kinds: dict = {}  # (segment, kind) pairs -> their kinds (`_lossy`)
        self._literal_surfaces = {
            i: tokenizer.surfaces(s.content, [k for k, t in enumerate(plan.literal_ids[i])
                                              if t == plan.unk_id])
            for i, s in enumerate(segments)
            if s.kind == "literal" and plan.unk_id is not None
            and plan.unk_id in plan.literal_ids[i]}

    @property
    def engine(self) -> str:
        """The engine that encodes in this process (`engine_used` of the adapter)."""
        return getattr(self._tokenizer, "engine_used", self._tokenizer.kind)

    def encode(self, texts: list[list[str]]) -> Encoded:
        plan, tokenizer = self._plan, self._tokenizer
        flat = [t for row in texts for t in row]
        m, n = len(texts), plan.n_segments
        if self._may_have_pieces:
            Continued = self._continued
            continued = [i for i, value in enumerate(flat) if type(value) is Continued]
        else:
            continued = []
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
            encoded, strips = self._encode_many(flat), None
        if continued:
            flat, strips = resolve_history(continued, len(self._fields), flat, encoded, strips)
        encoded_fields = encoded
        if any(self._appended):  # ids after a segment's text (a completion's EOS)
            appended = self._appended * m
            encoded = [ids + list(extra) if extra else ids for ids, extra in zip(encoded, appended)]
        # Every sample's segments in template order, a column at a time (one C-level
        # slice assignment per segment instead of an append per sample and segment).
        pieces = [None] * (m * n)
        nf, k = len(self._fields), 0
        for i, literal in enumerate(plan.literal_ids):
            if literal is None:
                pieces[i::n] = encoded[k::nf]
                k += 1
            else:
                pieces[i::n] = [literal] * m
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=m * n).reshape(m, n)
        total = int(lengths.sum())
        tokens = np.fromiter(itertools.chain.from_iterable(pieces), count=total, dtype=self._dtype)
        unks = {}
        if plan.unk_id is None:  # a byte-level tokenizer without UNK never makes one
            return Encoded(lengths, tokens, unks, self._lossy(flat, encoded_fields, strips, unks),
                           self.engine)
        unk_at = np.flatnonzero(tokens == plan.unk_id)
        if len(unk_at):
            unks = self._unk_details(flat, lengths, unk_at)
        return Encoded(lengths, tokens, unks, self._lossy(flat, encoded_fields, strips, unks),
                       self.engine)

    def _unk_details(self, flat, lengths, unk_at) -> dict:
        """{sample: (payload positions, segment indices, source chars)} of every UNK, in
        order, from where they are in the batch's tokens (`unk_at`): their segments and
        positions in one numpy pass, then the surfaces of each segment holding any (a
        literal's from the plan). Scanning each such sample's token lists in Python took
        most of this step."""
        n = lengths.shape[1]
        nf, slot = len(self._fields), self._field_slot
        segment_lengths = lengths.ravel()
        segment_ends = np.cumsum(segment_lengths)
        # the segment (flat: sample * n + segment) holding each UNK; empty ones hold none
        at_segment = np.searchsorted(segment_ends, unk_at, side="right")
        in_segment = (unk_at - segment_ends[at_segment] + segment_lengths[at_segment]).tolist()
        totals = lengths.sum(axis=1)
        sample_starts = np.cumsum(totals) - totals
        in_payload = (unk_at - sample_starts[at_segment // n]).tolist()
        bounds = np.flatnonzero(np.diff(at_segment)) + 1
        out: dict = {}
        for lo, hi in zip([0] + bounds.tolist(), bounds.tolist() + [len(unk_at)]):
            sample, segment = divmod(int(at_segment[lo]), n)
            surfaces = self._literal_surfaces.get(segment)
            if surfaces is None:
                text = _value_text(flat[sample * nf + slot[segment]])
                surfaces = self._tokenizer.surfaces(text, in_segment[lo:hi])
            details = out.get(sample)
            if details is None:
                details = out[sample] = ([], [], [])
            details[0].extend(in_payload[lo:hi])
            details[1].extend([segment] * (hi - lo))
            details[2].extend(surfaces)
        return out

    def _lossy(self, flat, encoded, strips, unks) -> dict:
        """{sample index: (kinds, row fields)}: the field segments whose ids do not decode
        to their text (`round_trip`). A segment without UNK whose text the tokenizer's
        structure keeps (`Decoder.find`) needs no decode. `strips`: per value, whether it
        was encoded as the start of a text (None: every value was, each on its own)."""
        with_unk = {(i, segment) for i, details in unks.items() for segment in details[1]}
        found = self._decoder.find(flat, encoded, strips, self._fields, with_unk, self._symbols)
        # A few shapes of (segment, kind) repeat over a whole build: one kinds tuple each,
        # shared (a generator per sample was a third of this step; pickles share it too).
        names, shapes, out = self._names, self._lossy_kinds, {}
        for i, entries in found.items():
            pairs = tuple(map(_SEGMENT_KIND, entries))
            kinds = shapes.get(pairs)
            if kinds is None:
                kinds = tuple(kind for _, kind in pairs)
                if len(shapes) < 4096:  # dialogues with many segments: bounded
                    shapes[pairs] = kinds
            out[i] = (kinds, fmt.lossy_fields(entries, names))
        return out


def encode_once_each(encode, texts: list[str]) -> list[list[int]]:
    """`encode(texts)`, encoding each distinct text once: a batch repeats texts (empty
    inputs, a dataset's few instructions: 41% of the benchmark corpus's field values),
    and the same text gives the same ids (for a tokenizer that does not sample: see
    `_samples`). Repeated texts share one list of ids, which nothing downstream changes."""
    unique = dict.fromkeys(texts)
    if len(unique) == len(texts):
        return encode(texts)
    ids_of = dict(zip(unique, encode(list(unique))))
    return list(map(ids_of.__getitem__, texts))


def _samples(tokenizer) -> bool:
    """Whether `tokenizer` may give one text other ids on another call (BPE dropout)."""
    spec = getattr(tokenizer, "spec", None) or {}
    return bool((spec.get("model") or {}).get("dropout"))


def _value_text(value) -> str:
    """`history.value_text`, without importing the chat package for plain strings."""
    if type(value) is str:
        return value
    from mintdim_beam.core.chat.history import value_text

    return value_text(value)


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
        texts[i] = "".join(_value_text(texts[k]) for k in before) + _value_text(flat[i])
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
        from mintdim_beam.core.chat.spans import special_pattern

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
