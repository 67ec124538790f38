"""The exact plot data `report` writes beside its figures, as CSV (floats as repr, so a
reader gets the very numbers plotted)."""
from __future__ import annotations

import csv
import io


def csv_bytes(header, rows) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in row])
    return buffer.getvalue().encode("utf-8")
