"""Disk a local build needs, checked before it starts: a build that runs out of disk
half way has wasted its time, so a local output directory whose disk has less free
space than the estimate is a `ScratchSpaceError` before any output exists.

The estimate is the input's (uncompressed) size times what a build was measured to
need at its peak, output and scratch files together, per input byte (see README,
"Disk"): unit-build keeps each batch's staged records, spilled batches and index parts
in the output's scratch directory until Finalize has joined them into shards and
indices; pack-build keeps each range's tokens twice (as read, then in hash order)."""
from __future__ import annotations

import os
import shutil

from mintdim_beam.core.errors import ScratchSpaceError
from mintdim_beam.core.files import storage

# Peak disk use (output + scratch) per byte of JSONL input, measured on the benchmark
# corpus (README "Disk"), with a margin.
UNIT_BUILD_PER_INPUT_BYTE = 3.5
PACK_BUILD_PER_INPUT_BYTE = 2.0
COMPRESSED_RATIO = 5  # a gzip or zstd JSONL, or a Parquet file, counts as this many times its size


def input_bytes(ranges, dataset: int = 0) -> int:
    """A dataset's inputs' size as text, one count per file (planned identities)."""
    sizes = {}
    for r in ranges:
        if r.dataset != dataset:
            continue
        size = int(dict(r.identity).get("size", 0)) if r.identity else 0
        sizes[r.file_pos] = size * (1 if r.codec == "plain" and r.format != "parquet"
                                  else COMPRESSED_RATIO)
    return sum(sizes.values())


def _existing_ancestor(path: str) -> str:
    """The nearest directory of `path` that exists: where its disk can be asked."""
    path = os.path.abspath(path)
    missing = storage.missing_dirs(path)
    return os.path.dirname(missing[-1]) if missing else path


def _shown(nbytes: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if nbytes < 1000:
            return f"{nbytes:,.0f} {unit}" if unit == "bytes" else f"{nbytes:,.1f} {unit}"
        nbytes /= 1000
    return f"{nbytes:,.1f} TB"


def check_space(outputs) -> None:
    """`outputs`: (output path, as given, bytes needed) per output; outputs on one disk
    are summed; object stores are not checked."""
    by_disk: dict = {}
    for path, given, needed in outputs:
        if storage.is_url(path):
            continue
        probe = _existing_ancestor(path)
        device = os.stat(probe).st_dev
        _, first_given, total = by_disk.get(device, (probe, given, 0))
        by_disk[device] = (probe, first_given, total + needed)
    for probe, given, needed in by_disk.values():
        free = shutil.disk_usage(probe).free
        if free < needed:
            raise ScratchSpaceError(directory=given, needed=_shown(needed), free=_shown(free))
