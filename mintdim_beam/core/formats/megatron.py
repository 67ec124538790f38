"""Megatron's indexed dataset, the output of pack-build: per shard a `.bin` of raw token
ids (no header) and an `.idx`, byte for byte as megatron-core's `IndexedDataset` reads it:

    magic     9 bytes  b"MMIDIDX\\x00\\x00"
    version   <Q       1
    dtype     <B       8 = uint16, 4 = int32 (Megatron's codes; it has no uint32)
    S         <Q       sequence count
    D         <Q       document-index count (S + 1: one sequence per document)
    lengths   int32[S]      tokens per sequence (the EOD included)
    pointers  int64[S]      byte offset of each sequence in the .bin
    documents int64[D]      0, 1, ..., S

Also the `{prefix: [S, D]}` JSON that Megatron's `--per-dataset-sequences-path` takes, so
it need not open every `.idx` to count."""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {"uint16": 8, "int32": 4}
CODE_DTYPES = {code: name for name, code in DTYPE_CODES.items()}
_HEADER = struct.Struct("<9sQBQQ")
HEADER_BYTES = _HEADER.size  # 34


DTYPE_MAX = {"uint16": (1 << 16) - 1, "int32": (1 << 31) - 1}


def dtype_for_vocab(vocab_size: int) -> str:
    """uint16 when every id fits (ids below 65536), int32 otherwise; `vocab_size` is the
    bound above every id the tokenizer can produce."""
    return "uint16" if vocab_size <= 1 << 16 else "int32"


def check_ids(ids: np.ndarray, dtype: str) -> None:
    """Every id fits `dtype` (a cast would wrap it silently), else TokenDTypeCapacityError."""
    from mintdim_beam.core.errors import TokenDTypeCapacityError

    if ids.size and (int(ids.max()) > DTYPE_MAX[dtype] or int(ids.min()) < 0):
        bad = int(ids.max()) if int(ids.max()) > DTYPE_MAX[dtype] else int(ids.min())
        raise TokenDTypeCapacityError(dtype=dtype, max_value=DTYPE_MAX[dtype], token_id=bad)


def idx_bytes(lengths: np.ndarray, dtype: str) -> bytes:
    """The `.idx` of sequences with these token counts, laid out back to back."""
    lengths = np.asarray(lengths, dtype=np.int64)
    count = len(lengths)
    pointers = np.zeros(count, dtype=np.int64)
    if count:
        np.cumsum(lengths[:-1] * np.dtype(dtype).itemsize, out=pointers[1:])
    header = _HEADER.pack(MAGIC, VERSION, DTYPE_CODES[dtype], count, count + 1)
    return b"".join((header, lengths.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(),
                     np.arange(count + 1, dtype="<i8").tobytes()))


@dataclass(frozen=True)
class Index:
    dtype: str
    lengths: np.ndarray
    pointers: np.ndarray
    documents: np.ndarray


def read_header(data: bytes, size: int) -> tuple[str, int, int]:
    """The dtype, sequence count and document-index count from an `.idx`'s first bytes
    (at least HEADER_BYTES of them), checked against the file's `size`: a reader that
    needs only the lengths and pointers reads those and nothing else. ValueError naming
    the first thing that is not the layout."""
    if size < HEADER_BYTES or len(data) < HEADER_BYTES:
        raise ValueError(f"{size} bytes, shorter than the {HEADER_BYTES}-byte header")
    magic, version, code, count, docs = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"magic is {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise ValueError(f"version is {version}, expected {VERSION}")
    if code not in CODE_DTYPES:
        raise ValueError(f"dtype code {code} is not one of {sorted(CODE_DTYPES)}")
    want = HEADER_BYTES + count * 4 + count * 8 + docs * 8
    if size != want:
        raise ValueError(f"{size} bytes, the header's counts ({count} sequences, "
                         f"{docs} document indices) need {want}")
    return CODE_DTYPES[code], count, docs


def read_idx(data: bytes) -> Index:
    """Parse an `.idx`; ValueError naming the first thing that is not the layout."""
    dtype, count, docs = read_header(data, len(data))
    at = HEADER_BYTES
    lengths = np.frombuffer(data, dtype="<i4", count=count, offset=at)
    pointers = np.frombuffer(data, dtype="<i8", count=count, offset=at + count * 4)
    documents = np.frombuffer(data, dtype="<i8", count=docs, offset=at + count * 12)
    return Index(dtype, lengths, pointers, documents)


def sequences_json(counts: dict[str, tuple[int, int]]) -> dict:
    """`{prefix: [sequences, documents]}` for `--per-dataset-sequences-path`."""
    return {prefix: [int(s), int(d)] for prefix, (s, d) in sorted(counts.items())}
