"""A pack's scratch files: per byte range, its tokens (raw, the output dtype) and a
table of its documents (an .npy of int64 columns), under the run's scratch directory.
Locally they are memory-mapped; on an object store a reader copies the byte range it
needs to a local temporary file first (a shard's slice of a range is contiguous). A
shard writer maps a bounded number at once, whatever the number of ranges."""
from __future__ import annotations

import io
import os
import tempfile
from collections import OrderedDict

import numpy as np

from mintdim_beam.core.files import storage

MAX_OPEN_BLOCKS = 64  # token maps a shard writer holds at once


def name(config, key, kind: str) -> str:
    ds, file_pos, range_no = key
    return storage.join(config.scratch_path, "pack", f"f{file_pos:05d}_r{range_no:06d}.{kind}")


def write_array(path: str, array: np.ndarray, output_dir: str) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    storage.write_atomic(path, buffer.getvalue(), output_dir)


def write_tokens(path: str, tokens: np.ndarray, output_dir: str) -> None:
    storage.write_atomic(path, np.ascontiguousarray(tokens).tobytes(), output_dir)


def read_array(path: str) -> np.ndarray:
    if storage.is_url(path):
        return np.load(io.BytesIO(storage.read_bytes(path)), allow_pickle=False)
    return np.load(path, allow_pickle=False)


def read_tokens(path: str, dtype: str) -> np.ndarray:
    if storage.is_url(path):
        return np.frombuffer(storage.read_bytes(path), dtype=dtype)
    if os.path.getsize(path) == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def write_sources(path: str, names: list, output_dir: str) -> None:
    """Each document's source name (keyed records, `records.pack`), in table order: the
    names' UTF-8 back to back after a header of int64 ends, so a slice of rows reads
    only its own names (`read_sources`)."""
    encoded = [name.encode("utf-8", "surrogatepass") for name in names]
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64)
    head = np.asarray([len(encoded)], dtype=np.int64).tobytes() + ends.tobytes()
    storage.write_atomic(path, head + b"".join(encoded), output_dir)


def read_sources(path: str, lo: int = 0, hi: int | None = None) -> list:
    """The source names of rows [lo, hi) (`write_sources`)."""
    with storage.open_read(path) as handle:
        count = int(np.frombuffer(handle.read(8), dtype=np.int64)[0])
        hi = count if hi is None else hi
        if hi <= lo:
            return []
        handle.seek(8 + 8 * max(lo - 1, 0))
        ends = np.frombuffer(handle.read(8 * (hi - lo + (lo > 0))), dtype=np.int64)
        first = int(ends[0]) if lo > 0 else 0
        ends = ends[1:] if lo > 0 else ends
        handle.seek(8 + 8 * count + first)
        blob = handle.read(int(ends[-1]) - first)
    starts = np.concatenate([[0], ends[:-1] - first]).tolist()
    return [blob[a:b].decode("utf-8", "surrogatepass")
            for a, b in zip(starts, (ends - first).tolist())]


class TokenBlocks:
    """The token ranges [tok_lo, tok_hi) of a shard's slices as arrays, at most
    `open_limit` of them mapped at once (each map holds a file descriptor, and a shard
    has a slice of every byte range: thousands under a `ulimit -n` of 1024). A remote
    range is copied to a local temporary file once, on first use; the copies hold no
    descriptor between uses and are removed by `close`."""

    def __init__(self, slices, dtype: str, open_limit: int = MAX_OPEN_BLOCKS):
        self._slices, self._dtype, self._limit = slices, np.dtype(dtype), max(1, open_limit)
        self._open: OrderedDict = OrderedDict()
        self._copies: dict = {}

    def tokens(self, i: int) -> np.ndarray:
        if i in self._open:
            self._open.move_to_end(i)
            return self._open[i]
        while len(self._open) >= self._limit:
            self._open.popitem(last=False)
        self._open[i] = self._map(i)
        return self._open[i]

    def _map(self, i: int) -> np.ndarray:
        piece = self._slices[i]
        start, end = piece.tok_lo, piece.tok_hi
        if end <= start:
            return np.zeros(0, dtype=self._dtype)
        path, offset = piece.token_file, start * self._dtype.itemsize
        if storage.is_url(path):
            if i not in self._copies:
                self._copies[i] = _local_copy(path, offset, (end - start) * self._dtype.itemsize)
            path, offset = self._copies[i], 0
        return np.memmap(path, dtype=self._dtype, mode="r", offset=offset, shape=(end - start,))

    def close(self) -> None:
        self._open.clear()
        for path in self._copies.values():
            os.unlink(path)
        self._copies.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _local_copy(path: str, offset: int, length: int) -> str:
    with tempfile.NamedTemporaryFile(prefix="mintdim-pack-", delete=False) as copy:
        try:
            with storage.open_read(path) as src:
                src.seek(offset)
                _copy_bytes(src, copy, length)
        except BaseException:
            copy.close()
            os.unlink(copy.name)
            raise
    return copy.name


def _copy_bytes(src, out, length: int, block: int = 8 << 20) -> None:
    left = length
    while left:
        chunk = src.read(min(block, left))
        if not chunk:
            raise OSError(f"scratch file ended {left} bytes early")
        out.write(chunk)
        left -= len(chunk)


def remove(config) -> None:
    storage.remove_tree(storage.join(config.scratch_path, "pack"))


