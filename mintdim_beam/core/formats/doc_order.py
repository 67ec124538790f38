"""The order of documents in a pack-build: a seeded stable hash of each document's
identity (its source file as given and its 1-based physical line), never Python's
`hash()` (salted per process) nor a runner's shuffle (differs per run). Shards are
ranges of that hash, cut where the running token count crosses `shard_tokens`, so the
order and the cuts are the same on every runner, worker count and range size.

The hash: splitmix64 of (blake2b-64 of seed and file) xor (line times the golden
ratio), computed for whole arrays of lines at once."""
from __future__ import annotations

import hashlib

import numpy as np

BUCKET_BITS = 16  # shard cuts fall between buckets of the hash's top 16 bits
BUCKETS = 1 << BUCKET_BITS
_SHIFT = np.uint64(64 - BUCKET_BITS)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _file_key(domain: str, src: str) -> np.uint64:
    digest = hashlib.blake2b(f"{domain}\0{src}".encode("utf-8"), digest_size=8).digest()
    return np.uint64(int.from_bytes(digest, "little"))


def _mix(key: np.uint64, lines) -> np.ndarray:
    z = (np.asarray(lines, dtype=np.uint64) * _GOLDEN) ^ key
    with np.errstate(over="ignore"):
        z = z + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def order_keys(seed: int, src: str, lines) -> np.ndarray:
    """uint64 sort keys of the documents at `lines` of `src` for this seed."""
    return _mix(_file_key(f"order:{seed}", src), lines)


def document_ids(src: str, lines) -> list[str]:
    """Stable document ids (16 hex digits), the same for every seed and run."""
    return [f"{int(v):016x}" for v in _mix(_file_key("id", src), lines)]


def buckets(keys: np.ndarray) -> np.ndarray:
    return (np.asarray(keys, dtype=np.uint64) >> _SHIFT).astype(np.int64)


def shard_of_bucket(tokens_per_bucket: np.ndarray, shard_tokens: int) -> np.ndarray:
    """The shard of every hash bucket: a bucket goes to shard (tokens before it) //
    shard_tokens, renumbered 0, 1, ... over the buckets holding tokens, so every shard
    holds about `shard_tokens` tokens (one bucket's worth more at most), none is empty,
    and a bucket larger than `shard_tokens` is a shard of its own."""
    tokens = np.asarray(tokens_per_bucket, dtype=np.int64)
    before = np.cumsum(tokens) - tokens
    raw = before // int(shard_tokens)
    held = tokens > 0
    names = np.unique(raw[held])
    out = np.searchsorted(names, raw).astype(np.int64)
    out[~held] = -1
    return out
