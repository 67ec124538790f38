"""Stage 1 of train-tokenizer: one byte range -> its word counts, per table part.

Each non-blank line (a Parquet row, a JSON array element) is parsed and its text made
(`words.RowTexts`); its hash decides whether it is trained on, held out or left out of
the sample. The trained texts' words are counted as the trainer counts them
(`words.word_counter`) in one dict per table part, summed by `SumCounts`. Beside them:
the range's line counts (numbering), its bad rows as pending errors (raised or rejected
as in the builds), up to `REPORT_ROWS` rows for `report` (the held-out rows if any are
held out, else trained rows), for SentencePiece unigram the range's `sample_size`
sentences of smallest hash, and the range's tallies."""
from __future__ import annotations

import heapq
from collections import Counter

import apache_beam as beam

from mintdim_beam.core.errors import MintDimError
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.inputs.input_files import open_range
from mintdim_beam.core.inputs.source import DEFAULT_MAX_LINE_BYTES, RangeBatches, long_line_reason
from mintdim_beam.core.render.document_text import pending
from mintdim_beam.core.render.render_batch import numbered, parse_row
from mintdim_beam.runtime.faults import BundleFaults
from mintdim_beam.runtime.progress import range_size, tally
from mintdim_beam.train_tokenizer import table
from mintdim_beam.train_tokenizer.words import (HELD_OUT, TRAIN, RowTexts, sentences,
                                                text_hash, row_fate, word_counter)

BATCH = 1024  # rows per counting call
REPORT_ROWS = 10_000  # rows kept for `report`'s held-out figures
COUNTS, ERRORS, REPORT, SAMPLE, TALLY = "counts", "errors", "report", "sample", "tally"
TALLY_KEYS = ("rows", "trained", "held_out", "left_out", "empty")


class Smallest:
    """The `size` smallest items seen (a bounded max-heap of negated keys)."""

    def __init__(self, size: int):
        self.size, self._heap = size, []

    def add(self, key: int, value: str) -> None:
        if len(self._heap) < self.size:
            heapq.heappush(self._heap, (-key, value))
        elif -self._heap[0][0] > key:
            heapq.heapreplace(self._heap, (-key, value))

    def items(self) -> list:
        return sorted((-k, v) for k, v in self._heap)


class SmallestOf(beam.CombineFn):
    """The `size` smallest (hash, text) pairs of lists of them, sorted."""

    def __init__(self, size: int):
        self._size = size

    def create_accumulator(self):
        return []

    def add_input(self, accumulator, items):
        return heapq.nsmallest(self._size, accumulator + list(items))

    def merge_accumulators(self, accumulators):
        return heapq.nsmallest(self._size, [item for acc in accumulators for item in acc])

    def extract_output(self, accumulator):
        return sorted(accumulator)


class SumCounts(beam.CombineFn):
    """A table part's word counts: dicts summed (the trainer's `feed` reduce)."""

    def create_accumulator(self):
        return {}

    def add_input(self, accumulator, counts):
        for word, count in counts.items():
            accumulator[word] = accumulator.get(word, 0) + count
        return accumulator

    def merge_accumulators(self, accumulators):
        return table.merge_counts(accumulators)

    def extract_output(self, accumulator):
        return accumulator


class CountWordsFn(beam.DoFn):
    def __init__(self, config, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self._config = config
        self._max_line_bytes = max_line_bytes

    def setup(self):
        self._texts = RowTexts(self._config)
        self._counter = word_counter(self._config.trainer)
        self._faults = BundleFaults("tokenize")

    def start_bundle(self):
        self._faults.start_bundle()

    def process(self, byte_range):
        config, key = self._config, byte_range.key
        spec = config.trainer
        counts: Counter = Counter()
        errors, report = [], Smallest(REPORT_ROWS)
        sample = Smallest(spec.sample_size) if spec.counts_words_with == "sample" else None
        tallies = dict.fromkeys(TALLY_KEYS, 0)
        size, counted = range_size(byte_range), 0
        try:
            with open_range(byte_range) as handle:
                batches = RangeBatches(handle, byte_range, BATCH, self._max_line_bytes)
                waiting: list = []  # texts to count, a counter's batch at a time
                for _, entries in batches:
                    found = len(errors)
                    waiting += self._texts_of(key, entries, errors, report, sample, tallies)
                    if self._counter is not None and len(waiting) >= self._counter.BATCH:
                        self._counter.count(waiting, counts)
                        waiting = []
                    errors[found:] = numbered(errors[found:], entries)
                    done = counted
                    if byte_range.tells_progress:
                        done = min(max(handle.tell() - byte_range.start, counted), size)
                    tally(samples=len(entries), bytes=done - counted, tokenized=len(entries))
                    counted = done
                if self._counter is not None and waiting:
                    self._counter.count(waiting, counts)
        except MintDimError as exc:
            raise WorkerFailure(exc.to_payload()) from None
        tally(bytes=size - counted)
        self._faults.check(key)
        by_part: dict[int, dict] = {}
        for word, count in counts.items():
            by_part.setdefault(table.part_of(word), {})[word] = count
        for error in errors:
            yield beam.pvalue.TaggedOutput(ERRORS, error)
        yield beam.pvalue.TaggedOutput(COUNTS, (key, (batches.lines, batches.samples)))
        yield beam.pvalue.TaggedOutput(REPORT, report.items())
        if sample is not None:
            yield beam.pvalue.TaggedOutput(SAMPLE, sample.items())
        yield beam.pvalue.TaggedOutput(TALLY, tuple(tallies[k] for k in TALLY_KEYS))
        for part in sorted(by_part):
            yield part, by_part[part]

    def _texts_of(self, key, entries, errors, report, sample, tallies) -> list:
        """The batch's texts to count; the others noted where they go."""
        config = self._config
        held = config.holdout > 0
        texts = []
        for _, local_line, text, problem in entries:
            if problem is not None:
                reason = problem if type(problem) is str else long_line_reason(problem.nbytes,
                                                                               problem.limit)
                errors.append(pending(key, local_line, "SourceParseError", {"reason": reason}))
                continue
            row, error = parse_row(key + (0,), local_line, text)
            if error is None:
                text, error = self._texts.text(key, local_line, row)
            if error is not None:
                errors.append(error)
                continue
            tallies["rows"] += 1
            if not text:
                tallies["empty"] += 1
                continue
            fate, h = row_fate(config.seed, config.holdout, config.sample, text)
            if fate == HELD_OUT:
                tallies["held_out"] += 1
                report.add(h, text)
                continue
            if fate != TRAIN:
                tallies["left_out"] += 1
                continue
            tallies["trained"] += 1
            if not held:
                report.add(h, text)
            texts.append(text)
            if sample is not None:  # the lines the trainer would keep of a file of them
                for line in sentences(text, config.trainer.option("max_sentence_length")):
                    sample.add(text_hash(config.trainer.seed, line, b"sentence"), line)
        return texts
