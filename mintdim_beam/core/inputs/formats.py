"""What an input file is, from its first bytes: JSON Lines, a JSON array, or Parquet;
or a format we cannot read, named for the `SourceFormatError` raised at planning.

Why the bytes and not the name: `.json` is either JSONL or an array, exports are renamed
(`part-0001`), and a format found only when a worker reads it fails after output exists.
The text checks run on the decompressed head of a gzip or zstd file, so a `.tar.gz` is
refused as a tar archive and a gzip-compressed JSON array is read as one.
"""
from __future__ import annotations

JSONL, JSON_ARRAY, PARQUET = "jsonl", "json_array", "parquet"
HEAD_BYTES = 512  # a tar header's `ustar` magic sits at offset 257
BOM = b"\xef\xbb\xbf"
PARQUET_MAGIC = b"PAR1"
_TAR_MAGIC_AT = 257

_BINARY = (
    (b"ARROW1", "an Arrow IPC / Feather file (ARROW1); convert it to Parquet or JSONL"),
    (b"FEA1", "a Feather v1 file; convert it to Parquet or JSONL"),
    (b"PARE", "an encrypted Parquet file (not supported)"),
    (b"\xff\xff\xff\xff", "an Arrow IPC stream; convert it to Parquet or JSONL"),
    (b"\xff\xfe", "UTF-16 text (byte-order mark FF FE); re-encode it as UTF-8"),
    (b"\xfe\xff", "UTF-16 text (byte-order mark FE FF); re-encode it as UTF-8"),
)


def unreadable(head: bytes, packed_in: str | None = None) -> str | None:
    """What the (decompressed) head shows that we cannot read, or None. `packed_in`
    names the compression it came out of ("gzip"), for the message."""
    found = None
    if head[_TAR_MAGIC_AT:_TAR_MAGIC_AT + 5] == b"ustar":
        found = "a tar archive"
    else:
        for magic, what in _BINARY:
            if head.startswith(magic):
                found = what
                break
    if found is None:
        return None
    return f"{found}, {packed_in}-compressed" if packed_in else found


def text_format(head: bytes) -> tuple[str, bool]:
    """(JSONL or JSON_ARRAY, whether the text starts with a UTF-8 BOM): an array when
    the first byte that is not whitespace (after the BOM) is `[`."""
    bom = head.startswith(BOM)
    body = head[len(BOM):] if bom else head
    first = body.lstrip(b" \t\r\n")[:1]
    return (JSON_ARRAY if first == b"[" else JSONL), bom
