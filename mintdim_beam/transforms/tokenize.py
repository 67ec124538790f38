"""Tokenize: every field segment of a whole batch in one tokenizer call.

Literal segments are constant, so their ids come from the plan (encoded once on the
driver). The tokenizer loads once per worker process in `setup`.

With helper encoder processes (the local default: one per core) batches go round-robin
to the helpers and this worker keeps rendering; each batch leaves once the helpers have
taken as many newer ones, and the rest leave at `finish_bundle`. Output order never
matters downstream: batches carry their keys.
"""
from __future__ import annotations

from collections import deque

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from ..encode_batch import BatchEncoder
from ..encoder_process import EncoderProcess
from ..faults import BundleFaults
from ..tokenizers import cached_tokenizer


def _tokenized(chunk_key, batch, encoded):
    lengths, tokens, unks = encoded
    return chunk_key, {
        "samples": batch["samples"], "lines": batch["lines"],
        "digests": batch["digests"], "empty": batch["empty"],
        "lengths": lengths, "tokens": tokens, "unks": unks}


class TokenizeFn(beam.DoFn):
    """One tokenizer call per batch, here or in helper encoder processes."""

    def __init__(self, plans: dict, encoder_processes: int = 0):
        self._plans = plans
        self._encoder_processes = encoder_processes
        self._faults = BundleFaults("tokenize")

    def setup(self):
        self._helpers = [self._new_helper() for _ in range(self._encoder_processes)]
        self._encoders = {} if self._helpers else {
            ds: BatchEncoder(p, cached_tokenizer(p.dataset.tokenizer_kind, p.dataset.tokenizer_path))
            for ds, p in self._plans.items()}

    def _new_helper(self) -> EncoderProcess:
        # Several helpers share the cores: each encodes with one native thread.
        return EncoderProcess(self._plans, threads=1 if self._encoder_processes > 1 else 0)

    def start_bundle(self):
        self._faults.start_bundle()
        self._pending = deque()
        self._submitted = 0
        for i, helper in enumerate(self._helpers):
            if helper.outstanding:
                # A failed bundle left replies unread: start over with a fresh helper.
                helper.close()
                self._helpers[i] = self._new_helper()

    def process(self, element):
        chunk_key, batch = element
        if not self._helpers:
            encoded = self._encoders[chunk_key[0]].encode(batch["texts"])
            self._faults.check(chunk_key)
            yield _tokenized(chunk_key, batch, encoded)
            return
        helper = self._helpers[self._submitted % len(self._helpers)]
        self._submitted += 1
        helper.submit(chunk_key[0], batch["texts"])
        self._pending.append((chunk_key, batch, helper))
        while len(self._pending) > len(self._helpers):
            yield self._collect()

    def finish_bundle(self):
        while self._pending:
            yield GlobalWindows.windowed_value(self._collect())

    def teardown(self):
        for helper in getattr(self, "_helpers", []):
            helper.close()

    def _collect(self):
        chunk_key, batch, helper = self._pending.popleft()
        encoded = helper.collect()
        self._faults.check(chunk_key)  # with newer batches still in the helpers
        return _tokenized(chunk_key, batch, encoded)


class Tokenize(beam.PTransform):
    """Rendered batches -> token ids, segment lengths and UNK details per sample."""

    def __init__(self, plans: dict, encoder_processes: int = 0):
        super().__init__()
        self._plans = plans
        self._encoder_processes = encoder_processes

    def expand(self, rendered):
        return rendered | "EncodeSegments" >> beam.ParDo(
            TokenizeFn(self._plans, self._encoder_processes))
