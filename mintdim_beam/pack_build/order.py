"""Stages 2 and 3: the global order.

`OrderRangeFn`: once every range's lines are counted, each document's 1-based line is
known, so its seeded hash (`core.formats.doc_order`); the range's documents are sorted by
(hash, line) and its tokens rewritten in that order, so that any hash range of it is
one contiguous block. It emits the tokens per hash bucket (EOD included).

`BucketTokens` sums them over all ranges (a CombineFn: one accumulator per bundle), and
`shard_of_bucket` cuts the hash space into shards. `SliceRangeFn` then tells each shard
which rows of each range it holds: the sort makes them one run per shard."""
from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam
import numpy as np

from mintdim_beam.core.formats import doc_order
from mintdim_beam.pack_build import scratch

# Columns of a range's ordered table (int64; the hash is stored as its bit pattern).
KEY, LINE, LENGTH, OFFSET = range(4)


@dataclass(frozen=True)
class OrderedRange:
    key: tuple
    file_pos: int
    docs: int
    table: str  # (docs, 4) int64: hash bits, line, tokens, offset in `token_file`
    token_file: str
    bucket_ids: np.ndarray  # the buckets this range has tokens in
    bucket_tokens: np.ndarray  # and how many (EOD included)
    sources: str = ""  # keyed records: the documents' source names in table order


@dataclass(frozen=True)
class Slice:
    """Rows [lo, hi) of a range's ordered table, tokens [tok_lo, tok_hi) of its file."""

    key: tuple
    file_pos: int
    table: str
    token_file: str
    lo: int
    hi: int
    tok_lo: int
    tok_hi: int
    sources: str = ""  # keyed records: the source names of the range's table


class OrderRangeFn(beam.DoFn):
    def __init__(self, plan):
        self._plan = plan

    def process(self, part, numbering):
        config, dtype = self._plan.config, self._plan.dtype
        table = scratch.read_array(part.table)
        lengths = table[:, 1]
        if part.sources:  # keyed records: each document's own source name and line
            lines, names = table[:, 0], scratch.read_sources(part.sources)
            keys = source_order_keys(config.seed, names, lines)
        else:
            line_offset, _ = numbering[part.key]
            lines = table[:, 0] + line_offset + 1
            keys = doc_order.order_keys(config.seed, config.files[part.file_pos].given, lines)
        order = np.lexsort((lines, keys))
        tokens = scratch.read_tokens(part.token_file, dtype)
        starts = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths):
            np.cumsum(lengths[:-1], out=starts[1:])
        sorted_lengths = lengths[order]
        new_starts = np.zeros(len(order), dtype=np.int64)
        if len(order):
            np.cumsum(sorted_lengths[:-1], out=new_starts[1:])
        # token i of the new file comes from old position (its doc's old start + i - new start)
        gather = (np.repeat(starts[order] - new_starts, sorted_lengths)
                  + np.arange(int(sorted_lengths.sum()), dtype=np.int64))
        ordered = np.stack([keys[order].view(np.int64), lines[order], sorted_lengths,
                            new_starts], axis=1).reshape(-1, 4)
        out = config.output_path
        table_path = scratch.name(config, part.key, "order.npy")
        token_path = scratch.name(config, part.key, "sorted")
        scratch.write_tokens(token_path, np.asarray(tokens)[gather], out)
        scratch.write_array(table_path, ordered, out)
        sources = ""
        if part.sources:
            sources = scratch.name(config, part.key, "order.sources")
            scratch.write_sources(sources, [names[i] for i in order.tolist()], out)
        ids, first = np.unique(doc_order.buckets(keys[order]), return_index=True)
        per_doc = sorted_lengths + 1  # the EOD
        sums = np.add.reduceat(per_doc, first) if len(first) else np.zeros(0, np.int64)
        yield OrderedRange(part.key, part.file_pos, part.docs, table_path, token_path, ids, sums,
                           sources)


def source_order_keys(seed: int, names: list, lines: np.ndarray) -> np.ndarray:
    """`doc_order.order_keys` of documents with a source name each (keyed records)."""
    keys = np.zeros(len(names), dtype=np.uint64)
    by_name: dict = {}
    for i, name in enumerate(names):
        by_name.setdefault(name, []).append(i)
    for name, at in by_name.items():
        keys[at] = doc_order.order_keys(seed, name, lines[at])
    return keys


class BucketTokens(beam.CombineFn):
    """Tokens per hash bucket over all ranges: one dense int64 array."""

    def create_accumulator(self):
        return np.zeros(doc_order.BUCKETS, dtype=np.int64)

    def add_input(self, acc, ordered):
        np.add.at(acc, ordered.bucket_ids, ordered.bucket_tokens)
        return acc

    def merge_accumulators(self, accumulators):
        out = self.create_accumulator()
        for acc in accumulators:
            out += acc
        return out

    def extract_output(self, acc):
        return acc


class SliceRangeFn(beam.DoFn):
    """(shard, Slice) for every shard a range has documents in."""

    def process(self, ordered, shard_of_bucket):
        if not ordered.docs:
            return
        table = scratch.read_array(ordered.table)
        shards = shard_of_bucket[doc_order.buckets(table[:, KEY].view(np.uint64))]
        cuts = np.flatnonzero(np.diff(shards)) + 1
        bounds = [0, *cuts.tolist(), len(shards)]
        ends = table[:, OFFSET] + table[:, LENGTH]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            yield int(shards[lo]), Slice(ordered.key, ordered.file_pos, ordered.table,
                                         ordered.token_file, lo, hi, int(table[lo, OFFSET]),
                                         int(ends[hi - 1]), ordered.sources)
