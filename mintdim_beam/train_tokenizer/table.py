"""The summed word table: `PARTS` parts, a word's part chosen by a stable hash of it,
each part's words in bytewise order, written by the worker that summed them.

A part is a run of records `(u32 LE byte length, UTF-8 word, u64 LE count)`, the input
of `native/bpe_train`. The same corpus gives the same parts, byte for byte, on every
runner, worker count, range size and retry (the manifest records each part's sha256)."""
from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass

from mintdim_beam.core.files import storage

PARTS = 64
_HEAD = struct.Struct("<I")
_COUNT = struct.Struct("<Q")


def part_of(word: str) -> int:
    return zlib.crc32(word.encode("utf-8", "surrogatepass")) % PARTS


@dataclass(frozen=True)
class TablePart:
    """One written part: where, how many words and occurrences, its sha256, the
    characters its words hold (for the alphabet) and its most frequent word."""

    part: int
    path: str
    words: int
    occurrences: int
    sha256: str
    size: int
    chars: str  # sorted distinct characters
    top: tuple  # (count, word) of its most frequent word, or ()


def encode(items) -> bytes:
    """`items`: (word, count) pairs in the order to write."""
    out = bytearray()
    for word, count in items:
        data = word.encode("utf-8", "surrogatepass")
        out += _HEAD.pack(len(data)) + data + _COUNT.pack(count)
    return bytes(out)


def decode(data: bytes):
    """The (word, count) pairs of a part's bytes."""
    at, end = 0, len(data)
    while at < end:
        (length,) = _HEAD.unpack_from(data, at)
        at += 4
        word = data[at:at + length].decode("utf-8", "surrogatepass")
        at += length
        (count,) = _COUNT.unpack_from(data, at)
        at += 8
        yield word, count


def write_part(part: int, counts: dict, directory: str, output: str) -> TablePart:
    """Write one part's summed counts under `directory` (in the run's scratch)."""
    items = sorted(counts.items(), key=lambda item: item[0].encode("utf-8", "surrogatepass"))
    data = encode(items)
    path = storage.join(directory, f"words-{part:05d}.bin")
    storage.write_atomic(path, data, output)
    chars = "".join(sorted({c for word in counts for c in word}))
    top = max(((count, word) for word, count in items), default=())
    return TablePart(part, path, len(items), sum(counts.values()),
                     hashlib.sha256(data).hexdigest(), len(data), chars, top)


def merge_counts(accumulators) -> dict:
    """Sum dicts of counts (the CombineFn's merge)."""
    it = iter(accumulators)
    total = dict(next(it, {}))
    for other in it:
        for word, count in other.items():
            total[word] = total.get(word, 0) + count
    return total
