"""Parquet inputs, read through pyarrow: planned by row groups, each range one or more
whole row groups, so a big file spreads over workers like a big JSONL does.

A row is the dict its JSON object would be: `fields` name columns; a list-of-structs
column (chat `messages` / `conversations`) gives a list of dicts. A struct field that is
null is left out of its dict, as the key an exporter's JSON did not have: Parquet gives
every struct of a column every field of the column's type (a `tool_calls` field of one
message is null in all the others). A null *cell* stays None, as a JSON null.
`source_line` is the row's 1-based number in the file.
"""
from __future__ import annotations

import contextlib

from mintdim_beam.core.files import storage


def _pq():
    import pyarrow.parquet as pq

    return pq


def row_groups(path: str) -> list[tuple[int, int]]:
    """[(rows, compressed bytes)] of each row group, from the file's footer."""
    with contextlib.closing(storage.open_read(path)) as handle:
        meta = _pq().ParquetFile(handle).metadata
        out = []
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            size = sum(group.column(c).total_compressed_size for c in range(group.num_columns))
            out.append((group.num_rows, size))
        return out


def row_group_count(handle) -> int:
    return _pq().ParquetFile(handle).metadata.num_row_groups


def plan_groups(groups: list[tuple[int, int]], range_bytes: int):
    """(first group, end group, start byte, end byte) of each range: consecutive groups
    up to `range_bytes` compressed bytes (at least one group). The byte span is the
    cumulative compressed size, for progress only."""
    plans, first, start, pos = [], 0, 0, 0
    for i, (_, size) in enumerate(groups):
        if i > first and pos + size - start > range_bytes:
            plans.append((first, i, start, pos))
            first, start = i, pos
        pos += size
    if groups:
        plans.append((first, len(groups), start, pos))
    return plans or [(0, 0, 0, 0)]


def _has_struct(arrow_type) -> bool:
    import pyarrow.types as pt

    if pt.is_struct(arrow_type):
        return True
    if pt.is_list(arrow_type) or pt.is_large_list(arrow_type) or pt.is_fixed_size_list(arrow_type):
        return _has_struct(arrow_type.value_type)
    return False


def _without_null_fields(value):
    if type(value) is dict:
        return {k: _without_null_fields(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [_without_null_fields(v) for v in value]
    return value


def iter_rows(handle, first_group: int, end_group: int, batch_rows: int, file: str):
    """The rows (dicts) of row groups [first_group, end_group), in file order. Data
    pyarrow cannot decode is a SourceParseError at the first row of its batch."""
    from mintdim_beam.core.errors import SourceParseError

    before, read = 0, 0  # rows of the file before this range; rows of it read
    try:
        parquet_file = _pq().ParquetFile(handle)
        meta = parquet_file.metadata
        before = sum(meta.row_group(i).num_rows for i in range(first_group))
        nested = [f.name for f in parquet_file.schema_arrow if _has_struct(f.type)]
        groups = list(range(first_group, end_group))
        batches = parquet_file.iter_batches(batch_size=max(1, batch_rows), row_groups=groups,
                                            use_threads=False) if groups else ()
        for batch in batches:
            rows = batch.to_pylist()
            if nested:
                for row in rows:
                    for name in nested:
                        row[name] = _without_null_fields(row[name])
            read += len(rows)
            yield from rows
    except (OSError, ValueError) as exc:  # ArrowInvalid / ArrowIOError
        raise SourceParseError(file=file, line=before + read + 1,
                               reason=f"unreadable Parquet data ({type(exc).__name__}: "
                                      f"{exc})") from None
