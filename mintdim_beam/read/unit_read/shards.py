"""Records of one shard file by row range: local shards memory-mapped once and sliced
(mintdim 0.2.1 reads the whole file with `np.fromfile` at every `read()`), URLs read by
the byte range of the rows asked for.

Checks as mintdim makes them: the file is a whole number of records of the entry's
unit, every record's magic is the build's (locally the whole shard is checked once per
file identity, when it is mapped, so the first bad record reported is the same as
mintdim's; remotely the rows read are checked), and the rows read have segment lengths
that fit the unit."""
from __future__ import annotations

import numpy as np

from mintdim_beam.core.errors import UnitReadShardError
from mintdim_beam.core.files import storage
from mintdim_beam.read.unit_read import files
from mintdim_beam.read.unit_read.metadata import Metadata


def _bad(path: str, en: str, vi: str):
    raise UnitReadShardError(path=path, problem=en, problem_vi=vi)


class ShardFiles:
    """The shards one reader has open, each kept while its file's identity holds."""

    def __init__(self):
        self._maps: dict[str, tuple[tuple, np.ndarray]] = {}

    def count(self, path: str, unit: int, meta: Metadata) -> int:
        """Records in the shard, from its size (an error unless it is a whole number)."""
        ident = files.identity(path)
        if ident is None:
            _bad(path, "shard path does not resolve to an existing file",
                 "đường dẫn shard không trỏ tới một file có thật")
        nbytes = record_bytes(unit, meta)
        if ident[0] % nbytes:
            _bad(path, f"file size {ident[0]} bytes is not divisible by record size {nbytes} bytes",
                 f"kích thước file {ident[0]} byte không chia hết cho kích thước record "
                 f"{nbytes} byte")
        return ident[0] // nbytes

    def rows(self, path: str, unit: int, meta: Metadata, start: int, count: int):
        """(segment lengths, payload) of rows [start, start+count), both int64 copies."""
        n = len(meta.sequence_template)
        if storage.is_url(path):
            records = self._remote(path, unit, meta, start, count)
            _check_magic(path, records, meta, first_row=start)
        else:
            records = self._mapped(path, unit, meta)[start:start + count]
        lengths = records[:, 1:1 + n].astype(np.int64)
        payload = records[:, 1 + n:1 + n + unit].astype(np.int64)
        sums = lengths.sum(axis=1)
        over = np.flatnonzero(sums > unit)
        if over.size:
            k = int(over[0])
            _bad(path, f"record {start + k} segment lengths sum to {int(sums[k])}, exceeding "
                       f"unit_size {unit}",
                 f"record {start + k} có tổng độ dài segment {int(sums[k])}, vượt unit_size {unit}")
        return lengths, payload

    def _mapped(self, path: str, unit: int, meta: Metadata) -> np.ndarray:
        ident = (files.identity(path), unit, meta.token_dtype, meta.magic)
        held = self._maps.get(path)
        if held is not None and held[0] == ident:
            return held[1]
        width = 1 + len(meta.sequence_template) + unit
        rows = ident[0][0] // record_bytes(unit, meta)
        mapped = np.memmap(path, dtype=np.dtype(meta.token_dtype), mode="r", shape=(rows, width))
        _check_magic(path, mapped, meta, first_row=0)
        self._maps[path] = (ident, mapped)
        return mapped

    def _remote(self, path: str, unit: int, meta: Metadata, start: int, count: int):
        nbytes = record_bytes(unit, meta)
        data = storage.read_range(path, start * nbytes, count * nbytes)
        width = 1 + len(meta.sequence_template) + unit
        return np.frombuffer(data, dtype=np.dtype(meta.token_dtype)).reshape(count, width)


def record_bytes(unit: int, meta: Metadata) -> int:
    return (1 + len(meta.sequence_template) + unit) * np.dtype(meta.token_dtype).itemsize


def _check_magic(path: str, records: np.ndarray, meta: Metadata, first_row: int) -> None:
    bad = np.flatnonzero(records[:, 0] != meta.magic)
    if bad.size:
        k = int(bad[0])
        _bad(path, f"record {first_row + k} has magic {int(records[k, 0])}, expected {meta.magic}",
             f"record {first_row + k} có magic {int(records[k, 0])}, cần {meta.magic}")
