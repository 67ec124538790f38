"""Sample ids and token counts by unit, from `sample_index.jsonl`, the only file that
maps a unit's records to sample ids (records of a unit are in sample order, so its ids
are the ids of its rows in file order). `token_count` is the record's tokens (the sum of
its segment lengths, which `verify` checks), what packing needs of every record without
reading the shards.

Read in chunks of whole rows (memory: one chunk plus 16 bytes per row), each parsed
with two regular expressions: rows are written by `core.formats.mintdim.sample_row`, and `{"`
never occurs inside a JSON string (its quote would be escaped), so the first pattern
matches row starts only, and a key is never matched inside a value. About 0.8 s for a
1M-row index (290 MB) here; the reader parses it only when sample ids are asked for,
once, into its cache (`read.facts`)."""
from __future__ import annotations

import re

import numpy as np

from mintdim_beam.core.files import storage

CHUNK = 16 << 20
_SAMPLE_ID = re.compile(rb'\{"sample_id": (\d+),')
_UNIT_SIZE = re.compile(rb'"unit_size": (\d+),')
_TOKEN_COUNT = re.compile(rb'"token_count": (\d+),')


def parse(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sample ids, unit sizes, token counts) of every row, int64, in file order."""
    columns = ([], [], [])
    for parsed in pieces(path):
        for out, values in zip(columns, parsed):
            out.append(values)
    if not columns[0]:
        return tuple(np.zeros(0, np.int64) for _ in columns)
    return tuple(np.concatenate(out) for out in columns)


def pieces(path: str):
    """(sample ids, unit sizes, token counts) of the rows of each chunk, in file order:
    what the reader's cache writes out without holding the whole file's."""
    for chunk in _chunks(path):
        yield tuple(_ints(pattern.findall(chunk))
                    for pattern in (_SAMPLE_ID, _UNIT_SIZE, _TOKEN_COUNT))


def _ints(matches: list[bytes]) -> np.ndarray:
    return np.fromiter(map(int, matches), dtype=np.int64, count=len(matches))


def _chunks(path: str):
    """Whole rows, about CHUNK bytes at a time."""
    with storage.open_read(path) as handle:
        carry = b""
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                yield block[:cut]
        if carry.strip():
            yield carry
