"""Compressed inputs: tell gzip and zstd from plain JSONL by their magic bytes, and read
them as a stream of decompressed bytes.

Why magic bytes and not the name: corpora are often renamed (`part-0001`, `.json`), and a
`.gz` read as text fails only after the whole file went through the pipeline. A
compressed file cannot be split, so it is one range, read from its start to its end.
"""
from __future__ import annotations

import zlib

PLAIN, GZIP, ZSTD = "plain", "gzip", "zstd"
EXPECTED = ("JSON Lines text (UTF-8), a JSON array of objects, or Parquet; the text ones "
            "plain, gzip (.gz) or zstd (.zst)")

# Formats we recognise but cannot read: what to call them in the error.
_UNREADABLE = (
    (b"BZh", "bzip2-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"\x5d\x00\x00", "lzma-compressed data"),
    (b"\x04\x22\x4d\x18", "lz4-compressed data"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "a zip archive (empty)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"Rar!\x1a\x07", "a rar archive"),
    (b"\x1f\x9d", "Unix compress (.Z) data"),
)
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_available() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


def sniff(head: bytes) -> tuple[str | None, str | None]:
    """(codec, None) for a readable file from its first bytes, else (None, what it is)."""
    if head.startswith(b"\x1f\x8b"):
        return GZIP, None
    if head.startswith(_ZSTD_MAGIC):
        if zstd_available():
            return ZSTD, None
        return None, "zstd-compressed data, but the `zstandard` package is not installed " \
                     "(pip install zstandard)"
    for magic, what in _UNREADABLE:
        if head.startswith(magic):
            return None, what
    return PLAIN, None


class DecompressedStream:
    """The decompressed bytes as `source.iter_range_lines` reads them: `read(n)` (at most
    n bytes; b"" at the end), `tell()`, and `seek` forward only, since a compressed file
    is read once from its start. `lines_ended` counts line terminators handed out, so a
    broken stream can be reported at the physical line it broke in."""

    def __init__(self, inner):
        self._inner = inner
        self._pos = 0
        self.lines_ended = 0
        self._last_cr = False

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        if data:
            self._pos += len(data)
            ended = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
            if self._last_cr and data[:1] == b"\n":
                ended -= 1  # the '\n' of a '\r\n' split over two reads
            self.lines_ended += ended
            self._last_cr = data[-1:] == b"\r"
        return data

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0 or offset < self._pos:
            raise OSError("a compressed input is read forward only")
        while self._pos < offset:
            if not self.read(min(offset - self._pos, 1 << 20)):
                break
        return self._pos

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._inner.close()


class _ZstdFrames:
    """zstd frames one after another, with a stream that ends inside a frame reported as
    truncated (zstandard's own stream reader returns the partial data silently)."""

    _IN = 1 << 16  # compressed bytes per step: bounds the output of one step

    def __init__(self, raw):
        import zstandard

        self._raw, self._dctx = raw, zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._in_frame = False
        self._out = bytearray()

    def read(self, size: int = -1) -> bytes:
        while not self._out or (size < 0):
            data = self._raw.read(self._IN)
            if not data:
                if self._in_frame:
                    raise EOFError("the zstd stream ends inside a frame (truncated file)")
                break
            self._feed(data)
        if size < 0 or size >= len(self._out):
            out, self._out = bytes(self._out), bytearray()
            return out
        out = bytes(self._out[:size])
        del self._out[:size]
        return out

    def _feed(self, data: bytes) -> None:
        while data:
            self._in_frame = True
            self._out += self._obj.decompress(data)
            if not self._obj.eof:
                return
            self._in_frame = False
            data = self._obj.unused_data
            self._obj = self._dctx.decompressobj()

    def close(self) -> None:
        self._raw.close()


def decompressed(raw, codec: str):
    """A `DecompressedStream` over `raw` (an open binary file) for `codec`."""
    if codec == GZIP:
        import gzip

        return DecompressedStream(gzip.GzipFile(fileobj=raw, mode="rb"))
    if codec == ZSTD:
        return DecompressedStream(_ZstdFrames(raw))
    raise ValueError(f"not a compression: {codec!r}")


def stream_error(exc: BaseException, codec: str) -> str | None:
    """What is wrong with a compressed stream, when `exc` (raised while reading it) says
    it is corrupt or truncated; None for any other failure (network, permissions)."""
    name = "gzip" if codec == GZIP else "zstd"
    if isinstance(exc, EOFError):
        return f"the {name} stream ends early (truncated file): {exc}"
    if isinstance(exc, zlib.error) or type(exc).__name__ in ("BadGzipFile", "ZstdError"):
        return f"corrupt {name} stream: {exc}"
    return None
