"""Tokenize: every field segment of a whole batch in one tokenizer call.

Literal segments are constant, so their ids come from the plan (encoded once on the
driver). The tokenizer loads once per worker process in `setup`, or once per helper:
helpers the driver started before building the pipeline (`warm_helpers`) are adopted,
so their start-up overlaps the planning instead of the first batches, and their head
start (the first batches, encoded while Beam loaded) is counted in `head_start_samples`.

With helper encoder processes (the local default: one per core) each batch is split
among the helpers by the size of its lines while this worker renders the next ones; a
batch leaves once two newer ones are submitted, the last at `finish_bundle`. Output
order never matters downstream: batches carry their keys.
"""
from __future__ import annotations

import signal
from collections import deque

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from mintdim_beam.core.errors import EncoderCrashError
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.tokenizer.encode_batch import BatchEncoder, Encoded, share_bounds
from mintdim_beam.core.tokenizer.tokenizers import cached_tokenizer
from mintdim_beam.runtime.encoder_process import EncoderProcessError, helper_threads, start_helpers
from mintdim_beam.runtime.faults import BundleFaults
from mintdim_beam.runtime.progress import tally
from mintdim_beam.runtime.warm_helpers import adopt_warm


def _tokenized(chunk_key, batch, encoded):
    lengths, tokens, unks, lossy, engine = encoded
    tally(tokenized=len(lengths), tokens=int(lengths.sum()))
    out = {"samples": batch["samples"], "lines": batch["lines"],
           "digests": batch["digests"], "empty": batch["empty"],
           "lengths": lengths, "tokens": tokens, "unks": unks, "lossy": lossy,
           "engines": engine if isinstance(engine, dict) else {engine: len(lengths)}}
    if "parts" in batch:  # the records of a dialogue split by on_extra_turns="split"
        out["parts"] = batch["parts"]
    return chunk_key, out


class TokenizeFn(beam.DoFn):
    """One tokenizer call per batch, here or in helper encoder processes."""

    def __init__(self, plans: dict, encoder_processes: int = 0, warm_key: str | None = None,
                 range_starts: dict | None = None):
        self._plans = plans
        self._encoder_processes = encoder_processes
        self._warm_key = warm_key  # helpers the driver started early (`warm_helpers`)
        # dataset -> {(dataset, file, range): first byte} (`planned.range_starts`)
        self._range_starts = range_starts or {}
        self._faults = BundleFaults("tokenize")
        self._head_start = Metrics.counter("mintdim", "head_start_samples")

    def setup(self):
        count = self._encoder_processes
        self._helpers = adopt_warm(self._warm_key, count) if count else []
        self._helpers += start_helpers(self._plans, count - len(self._helpers),
                                       helper_threads(count))
        self._encoders = {} if self._helpers else {
            ds: BatchEncoder(p, cached_tokenizer(p.dataset.tokenizer_kind, p.dataset.tokenizer_path,
                                                 p.dataset.tokenizer_options))
            for ds, p in self._plans.items()}

    def start_bundle(self):
        self._faults.start_bundle()
        self._pending = deque()
        for i, helper in enumerate(self._helpers):
            if helper.closed or helper.outstanding:
                # A failed bundle left replies unread: start over with a fresh helper.
                helper.close()
                self._helpers[i], = start_helpers(self._plans, 1,
                                                  helper_threads(self._encoder_processes))

    def process(self, element):
        chunk_key, batch = element
        if not self._helpers:
            encoded = self._encoders[chunk_key[0]].encode(batch["texts"])
            self._faults.check(chunk_key)
            yield _tokenized(chunk_key, batch, encoded)
            return
        # Every helper encodes a share of every batch: no helper waits for the others
        # at the end, and the first batch is back soonest.
        texts = batch["texts"]
        parts = share_bounds(batch, len(self._helpers))
        for helper, (start, end) in zip(self._helpers, zip(parts, parts[1:])):
            helper.submit(chunk_key[0], texts[start:end])
        self._pending.append((chunk_key, batch, parts))
        # Two batches in the helpers: each has its next share queued while we collect
        # and render, so none waits for us.
        while len(self._pending) > 2:
            yield self._collect()

    def finish_bundle(self):
        while self._pending:
            yield GlobalWindows.windowed_value(self._collect())

    def teardown(self):
        for helper in getattr(self, "_helpers", []):
            helper.close()

    def _collect(self):
        chunk_key, batch, parts = self._pending.popleft()
        helpers = self._helpers[:len(parts) - 1]
        ahead = sum(helper.head_start_samples for helper in helpers)
        try:
            shares = [helper.collect() for helper in helpers]
            self._faults.check(chunk_key)  # with the next batch still in the helpers
        except BaseException as exc:
            for helper in self._helpers:  # their queues are out of step with ours now
                helper.close()
            if isinstance(exc, EncoderProcessError) and exc.returncode is not None:
                raise WorkerFailure(self._crash(chunk_key, batch, exc.returncode)) from exc
            raise
        self._head_start.inc(sum(helper.head_start_samples for helper in helpers) - ahead)
        return _tokenized(chunk_key, batch, merge_shares(shares, parts))


    def _crash(self, chunk_key, batch, returncode: int) -> dict:
        """The payload of an `EncoderCrashError` for the batch whose reply never came."""
        ds, file_pos, range_no, _ = chunk_key
        files = self._plans[ds].dataset.files
        return EncoderCrashError(
            file=files[file_pos].given if files else "records",
            lines=batch_lines(batch["lines"],
                              self._range_starts.get(ds, {}).get(chunk_key[:3])),
            reason=exit_reason(returncode)).to_payload()


def batch_lines(local_lines, range_start: int | None) -> str:
    """A batch's lines, as exactly as known inside the pipeline: line numbers of a range
    after the first depend on the line counts of the ranges before it, which only the
    numbering step knows, so those are given within their range."""
    first, last = int(local_lines[0]) + 1, int(local_lines[-1]) + 1
    if range_start == 0:
        return f"lines {first}-{last}"
    where = "its byte range" if range_start is None else \
        f"the byte range starting at byte {range_start}"
    return f"lines {first}-{last} of {where}"


def exit_reason(returncode: int) -> str:
    if returncode >= 0:
        return f"the helper encoder process exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = str(-returncode)
    cause = " (as the out-of-memory killer does)" if -returncode == signal.SIGKILL else ""
    return f"the helper encoder process was killed by signal {name}{cause}"


def merge_shares(shares: list, parts: list[int]) -> Encoded:
    """The helpers' `Encoded` for consecutive parts -> one batch's."""
    if len(shares) == 1:
        return shares[0]

    def by_sample(field: int) -> dict:
        return {start + i: details for share, start in zip(shares, parts)
                for i, details in share[field].items()}

    engines: dict = {}
    for share in shares:
        for engine, samples in (share.engine if isinstance(share.engine, dict)
                                else {share.engine: len(share.lengths)}).items():
            engines[engine] = engines.get(engine, 0) + samples
    return Encoded(np.concatenate([share[0] for share in shares]),
                   np.concatenate([share[1] for share in shares]), by_sample(2), by_sample(3),
                   engines)


class Tokenize(beam.PTransform):
    """Rendered batches -> token ids, segment lengths and UNK details per sample."""

    def __init__(self, plans: dict, encoder_processes: int = 0, warm_key: str | None = None,
                 range_starts: dict | None = None):
        super().__init__()
        self._plans = plans
        self._encoder_processes = encoder_processes
        self._warm_key = warm_key
        self._range_starts = range_starts  # for the lines a dead helper's error names

    def expand(self, rendered):
        return rendered | "EncodeSegments" >> beam.ParDo(
            TokenizeFn(self._plans, self._encoder_processes, self._warm_key,
                       self._range_starts))
