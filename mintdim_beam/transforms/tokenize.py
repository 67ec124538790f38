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


def unk_details(tokenizer, plan, texts_by_segment, lengths_row, seg_tokens, unk_id, literal_surfaces):
    """Payload positions, segment indices and source chars of every UNK in one sample."""
    positions, fields, chars = [], [], []
    cursor = 0
    for seg_index, tokens in enumerate(seg_tokens):
        if unk_id in tokens:
            surfaces = literal_surfaces.get(seg_index)
            if surfaces is None:
                surfaces = tokenizer.surfaces(texts_by_segment[seg_index])
            for local, token in enumerate(tokens):
                if token == unk_id:
                    positions.append(cursor + local)
                    fields.append(seg_index)
                    chars.append(surfaces[local] if local < len(surfaces) else "")
        cursor += len(tokens)
    return positions, fields, chars


class TokenizeFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans
        self._faults = BundleFaults("tokenize")

    def start_bundle(self):
        self._faults.start_bundle()

    def setup(self):
        self._tokenizers = {ds: cached_tokenizer(p.dataset.tokenizer_kind, p.dataset.tokenizer_path)
                            for ds, p in self._plans.items()}
        self._literal_surfaces = {
            ds: {i: self._tokenizers[ds].surfaces(s.content)
                 for i, s in enumerate(p.template.segments)
                 if s.kind == "literal" and p.unk_id in p.literal_ids[i]}
            for ds, p in self._plans.items()}

    def process(self, element):
        chunk_key, batch = element
        ds = chunk_key[0]
        plan, tokenizer = self._plans[ds], self._tokenizers[ds]
        texts = batch["texts"]
        m, n_fields = len(texts), len(texts[0])
        encoded = tokenizer.encode_many([t for row in texts for t in row]) if n_fields else []
        self._faults.check(chunk_key)
        pieces = []
        field_iter = iter(encoded)
        for _ in range(m):
            for literal in plan.literal_ids:
                pieces.append(next(field_iter) if literal is None else literal)
        n = plan.n_segments
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=m * n).reshape(m, n)
        total = int(lengths.sum())
        tokens = np.fromiter(itertools.chain.from_iterable(pieces), dtype=np.uint32, count=total)
        unks = {}
        if total and (tokens == plan.unk_id).any():
            sample_of = np.repeat(np.arange(m), lengths.sum(axis=1))
            segment_kinds = plan.template.segments
            for i in np.unique(sample_of[tokens == plan.unk_id]).tolist():
                row_texts, fi = [], 0
                for s in segment_kinds:
                    if s.kind == "literal":
                        row_texts.append(s.content)
                    else:
                        row_texts.append(texts[i][fi])
                        fi += 1
                unks[i] = unk_details(tokenizer, plan, row_texts, lengths[i],
                                      pieces[i * n:(i + 1) * n], plan.unk_id,
                                      self._literal_surfaces[ds])
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
