"""The plain files `report` reads and writes: a build's JSON Lines indices, streamed, and
the exact plot data beside its figures as CSV (floats as repr, so a reader gets the very
numbers plotted)."""
from __future__ import annotations

import csv
import io
import json

from mintdim_beam.core.files import storage


def jsonl_rows(out: str, name: str):
    """Rows of a JSON Lines index of the build at `out`, streamed; a missing index reads
    as empty."""
    path = storage.join(out, name)
    if not storage.exists(path):
        return
    with storage.open_read(path) as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def csv_bytes(header, rows) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in row])
    return buffer.getvalue().encode("utf-8")
