"""Tokenize: every field segment of a whole batch in one tokenizer call.

Literal segments are constant, so their ids come from the plan (encoded once on the
driver). The tokenizer itself loads once per worker process in `setup`.
"""
from __future__ import annotations

import itertools

import apache_beam as beam
import numpy as np

from ..faults import BundleFaults
from ..tokenizers import cached_tokenizer


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


class TokenizeFn(beam.DoFn):
    """One tokenizer call per batch for every field segment of every sample."""

    def __init__(self, plans: dict):
        self._plans = plans
        self._faults = BundleFaults("tokenize")

    def setup(self):
        self._tokenizers = {ds: cached_tokenizer(p.dataset.tokenizer_kind, p.dataset.tokenizer_path)
                            for ds, p in self._plans.items()}
        self._literal_surfaces = {
            ds: {i: self._tokenizers[ds].surfaces(
                     s.content, [k for k, t in enumerate(p.literal_ids[i]) if t == p.unk_id])
                 for i, s in enumerate(p.template.segments)
                 if s.kind == "literal" and p.unk_id in p.literal_ids[i]}
            for ds, p in self._plans.items()}

    def start_bundle(self):
        self._faults.start_bundle()

    def process(self, element):
        chunk_key, batch = element
        ds = chunk_key[0]
        plan, tokenizer = self._plans[ds], self._tokenizers[ds]
        texts = batch["texts"]
        encoded = tokenizer.encode_many([t for row in texts for t in row])
        self._faults.check(chunk_key)
        m, n = len(texts), plan.n_segments
        pieces = []
        field_iter = iter(encoded)
        for _ in range(m):
            for literal in plan.literal_ids:
                pieces.append(next(field_iter) if literal is None else literal)
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=m * n).reshape(m, n)
        total = int(lengths.sum())
        tokens = np.fromiter(itertools.chain.from_iterable(pieces), count=total,
                             dtype=np.uint16 if plan.token_dtype == "uint16" else np.uint32)
        unks = {}
        if total and (tokens == plan.unk_id).any():
            sample_of = np.repeat(np.arange(m), lengths.sum(axis=1))
            for i in np.unique(sample_of[tokens == plan.unk_id]).tolist():
                fields = iter(texts[i])
                row_texts = [s.content if s.kind == "literal" else next(fields)
                             for s in plan.template.segments]
                unks[i] = unk_details(tokenizer, row_texts, pieces[i * n:(i + 1) * n],
                                      plan.unk_id, self._literal_surfaces[ds])
        yield chunk_key, {
            "samples": batch["samples"], "lines": batch["lines"],
            "digests": batch["digests"], "empty": batch["empty"],
            "lengths": lengths, "tokens": tokens, "unks": unks}


class Tokenize(beam.PTransform):
    """Rendered batches -> token ids, segment lengths and UNK details per sample."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, rendered):
        return rendered | "EncodeSegments" >> beam.ParDo(TokenizeFn(self._plans))
