"""A pack's scratch files: per byte range, its tokens (raw, the output dtype) and a
table of its documents (an .npy of int64 columns), under the run's scratch directory.
Locally they are memory-mapped; on an object store a reader copies the byte range it
needs to a local temporary file first (a shard's slice of a range is contiguous)."""
from __future__ import annotations

import io
import os
import tempfile

import numpy as np

from mintdim_beam.core import storage


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


class TokenBlock:
    """Tokens [start, end) of a scratch token file as an array: a memory map of the
    local file, or of a local copy of that byte range of a remote one."""

    def __init__(self, path: str, dtype: str, start: int, end: int):
        self._copy = None
        size = np.dtype(dtype).itemsize
        if end <= start:
            self.tokens = np.zeros(0, dtype=dtype)
        elif not storage.is_url(path):
            self.tokens = np.memmap(path, dtype=dtype, mode="r", offset=start * size,
                                    shape=(end - start,))
        else:
            self._copy = tempfile.NamedTemporaryFile(prefix="mintdim-pack-", delete=False)
            with storage.open_read(path) as src:
                src.seek(start * size)
                _copy_bytes(src, self._copy, (end - start) * size)
            self._copy.close()
            self.tokens = np.memmap(self._copy.name, dtype=dtype, mode="r")

    def close(self) -> None:
        self.tokens = None
        if self._copy is not None:
            os.unlink(self._copy.name)
            self._copy = None


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


