"""A unit-build's per-record facts, written once into the reader's cache (`read.cache`):
every record's token count and every record's sample id, in the global numbering
(units ascending, each unit's records by ordinal), so that no rank holds them in memory.

Token counts come from the records themselves: each record's segment lengths summed,
read block by block (16 MB a read, whole rows; only the length slots of records over
1 MiB), magic and lengths checked as `Build.records` checks them. Locally through the
file (no map, so the filling process holds one block, not the shards' pages); for a URL
by byte ranges, `cat_ranges` calls of about 64 MB, never `sample_index.jsonl` (a
billion rows: 150 GB parsed on one machine). The meta keeps each unit's largest count
and token total, which `pack_length` checks and `padding_fraction` needs.

Sample ids: only `sample_index.jsonl` maps records to sample ids, so it is parsed
(chunk by chunk, `read.sample_index`) the first time a batch's `sample_ids` are asked
for, each chunk's ids written to their records' places."""
from __future__ import annotations

import os

import numpy as np

from mintdim_beam.core.files import storage
from mintdim_beam.core.formats.mintdim import SAMPLE_INDEX
from mintdim_beam.read import cache, sample_index

BLOCK = 16 << 20  # bytes of whole rows a read
CALL = 64 << 20  # bytes a cat_ranges call asks for (a URL build)
CALL_RANGES = 4096  # ranges a call asks for, at most
GAP = 1 << 20  # records longer than this: only their magic and length slots are read


def length_dtype(sizes) -> np.dtype:
    """uint16 when every unit is below 65,536 tokens, else uint32: a record's token
    count is at most its unit."""
    return np.dtype(np.uint16 if max(sizes, default=0) < (1 << 16) else np.uint32)


def offsets(build) -> dict[int, int]:
    """Each unit's first record in the global numbering."""
    out, at = {}, 0
    for unit in build.sizes:
        out[unit] = at
        at += build.counts[unit]
    return out


def write_lengths(build, folder: str) -> dict:
    """`lengths.npy`: every record's token count (see the module docstring)."""
    n = len(build.segments)
    dtype = length_dtype(build.sizes)
    most, tokens = {}, {}
    with cache.Writer(folder, "lengths", dtype, sum(build.counts.values())) as out:
        for unit in build.sizes:
            top = total = 0
            for shard, first, head in _headers(build, unit):
                counts = head[:, 1].astype(np.int64)
                for j in range(2, 1 + n):
                    counts += head[:, j]
                bad = np.flatnonzero((head[:, 0] != build.magic) | (counts > unit))
                if len(bad):
                    row = int(bad[0])
                    build.check_records(unit, head[row:row + 1], np.array([shard]),
                                        np.array([first + row]))  # raises
                out.append(counts)
                if len(counts):
                    top, total = max(top, int(counts.max())), total + int(counts.sum())
            most[str(unit)], tokens[str(unit)] = top, total
    return {"max": most, "tokens": tokens, "dtype": dtype.name}


def _pieces(build, unit: int):
    """(shard, first row, rows, path, start byte, end byte) of the unit's reads."""
    item = build.dtype.itemsize
    record, head = build.width(unit) * item, (1 + len(build.segments)) * item
    whole = record - head <= GAP
    per = max(1, BLOCK // record) if whole else 1
    for shard in range(build.shard_count(unit)):
        rows = min(build.samples_per_shard, build.counts[unit] - shard * build.samples_per_shard)
        path = build.shard_path(unit, shard)
        for lo in range(0, rows, per):
            hi = min(rows, lo + per)
            end = hi * record if whole else lo * record + head
            yield shard, lo, hi - lo, path, lo * record, end


def _headers(build, unit: int):
    """(shard, first row, magic and length slots [rows, 1 + n]) block by block."""
    n, width = len(build.segments), build.width(unit)
    blobs = _local_blobs(build, unit) if build.is_local else _remote_blobs(build, unit)
    for (shard, first, rows, _, _, _), blob in blobs:
        view = np.frombuffer(blob, dtype=build.dtype)
        view = view.reshape(rows, -1) if len(view) == rows * width else view.reshape(1, -1)
        yield shard, first, view[:, :1 + n]


def _local_blobs(build, unit: int):
    handle = name = None
    try:
        for piece in _pieces(build, unit):
            if piece[3] != name:
                if handle is not None:
                    os.close(handle)
                name, handle = piece[3], os.open(piece[3], os.O_RDONLY)
            start, end = piece[4], piece[5]
            blob = os.pread(handle, end - start, start)
            if len(blob) != end - start:
                raise OSError(f"{name}: could not read bytes {start}..{end} (the file changed?)")
            yield piece, blob
    finally:
        if handle is not None:
            os.close(handle)


def _remote_blobs(build, unit: int):
    fs = storage.filesystem(build.root)
    group, size = [], 0
    for piece in [*_pieces(build, unit), None]:
        if piece is not None:
            group.append(piece)
            size += piece[5] - piece[4]
        if group and (piece is None or size >= CALL or len(group) >= CALL_RANGES):
            blobs = fs.cat_ranges([p[3] for p in group], [p[4] for p in group],
                                  [p[5] for p in group])
            for p, blob in zip(group, blobs):
                if isinstance(blob, Exception) or len(blob) != p[5] - p[4]:
                    raise OSError(f"{p[3]}: could not read bytes {p[4]}..{p[5]}: {blob!r:.200}")
                yield p, blob
            group, size = [], 0


def write_sample_ids(build, folder: str) -> dict:
    """`ids.npy`: every record's sample id, from `sample_index.jsonl` chunk by chunk;
    ValueError when its rows do not match histogram.json's counts."""
    path = storage.join(build.root, SAMPLE_INDEX)
    first, placed = offsets(build), dict.fromkeys(build.sizes, 0)
    rows = 0
    with cache.Writer(folder, "ids", np.int64, sum(build.counts.values())) as out:
        for ids, units, tokens in sample_index.pieces(path):
            rows += len(ids)
            if not len(ids) == len(units) == len(tokens):
                raise ValueError(f"{build.root}: {SAMPLE_INDEX} has rows without a sample_id, "
                                 f"unit_size or token_count")
            for unit in np.unique(units).tolist():
                mine = units == unit
                got = ids[mine]
                if unit not in placed or placed[unit] + len(got) > build.counts[unit]:
                    raise ValueError(f"{build.root}: {SAMPLE_INDEX} has more rows of unit {unit} "
                                     f"than histogram.json counts ({build.counts.get(unit, 0)})")
                if int(tokens[mine].max()) > unit:
                    raise ValueError(f"{build.root}: {SAMPLE_INDEX} gives a record of unit {unit} "
                                     f"{int(tokens[mine].max())} tokens, more than the unit holds")
                out.put(first[unit] + placed[unit], got)
                placed[unit] += len(got)
    if rows != sum(build.counts.values()) or placed != build.counts:
        short = [u for u in build.sizes if placed[u] != build.counts[u]]
        raise ValueError(f"{build.root}: {SAMPLE_INDEX} has {rows} rows, histogram.json counts "
                         f"{sum(build.counts.values())} records"
                         + (f" (unit {short[0]}: {placed[short[0]]} rows, "
                            f"{build.counts[short[0]]} records)" if short else ""))
    return {}
