"""Encode one rendered batch: every field segment of every sample in one tokenizer call,
literal segments from the plan (encoded once on the driver), packed into numpy arrays.

Plain Python with no Beam in it, so the same code runs inside the Tokenize DoFn or in a
helper encoder process (see `encoder_process`).
"""
from __future__ import annotations

import itertools

import numpy as np


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


class BatchEncoder:
    """One dataset's encoder: `encode(texts)` -> (lengths, tokens, unks) for a batch whose
    `texts[i]` are sample i's rendered field values in template order."""

    def __init__(self, plan, tokenizer):
        self._plan = plan
        self._tokenizer = tokenizer
        self._dtype = np.uint16 if plan.token_dtype == "uint16" else np.uint32
        # Dialogue segments may come as (piece, is_plain) pieces (`render_dialogues`).
        self._may_have_pieces = plan.dataset.dialogue is not None
        self._literal_surfaces = {
            i: tokenizer.surfaces(s.content, [k for k, t in enumerate(plan.literal_ids[i])
                                              if t == plan.unk_id])
            for i, s in enumerate(plan.template.segments)
            if s.kind == "literal" and plan.unk_id is not None
            and plan.unk_id in plan.literal_ids[i]}

    def encode(self, texts: list[list[str]]):
        """lengths: (samples, segments) int64; tokens: the flat payload of the whole batch;
        unks: {sample index: (positions, segment indices, surfaces)} for samples with UNK."""
        plan, tokenizer = self._plan, self._tokenizer
        flat = [t for row in texts for t in row]
        if self._may_have_pieces:
            encoded = encode_with_pieces(tokenizer, flat)
        else:
            encoded = tokenizer.encode_many(flat)
        m, n = len(texts), plan.n_segments
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
            return lengths, tokens, unks
        unk_at = np.flatnonzero(tokens == plan.unk_id)
        if len(unk_at):
            sample_of = np.repeat(np.arange(m), lengths.sum(axis=1))
            for i in np.unique(sample_of[unk_at]).tolist():
                fields = (t if type(t) is str else "".join(p for p, _ in t) for t in texts[i])
                row_texts = [s.content if s.kind == "literal" else next(fields)
                             for s in plan.template.segments]
                unks[i] = unk_details(tokenizer, row_texts, pieces[i * n:(i + 1) * n],
                                      plan.unk_id, self._literal_surfaces)
        return lengths, tokens, unks


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
