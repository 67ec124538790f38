"""Parquet for Hugging Face: one file per task, `data/part-NNNNN-of-MMMMM.parquet`, a
column per `Columns` entry: lists of ints for the ragged and fixed-width ones (int32
ids and positions, int64 labels, int8 masks), int64 / string scalars. `datasets.
load_dataset("parquet", data_files=...)` reads them; TRL's `SFTTrainer` takes a
dataset with `input_ids` as already tokenized and a `labels` column as it is."""
from __future__ import annotations

import io

import numpy as np


def _list_array(values: np.ndarray, offsets: np.ndarray):
    import pyarrow as pa

    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))


def encode(cols) -> bytes:
    """The task's rows as one Parquet file's bytes (no compression dictionary of ids:
    zstd)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays, names = [], []
    for name, (values, offsets) in cols.ragged.items():
        arrays.append(_list_array(values, offsets))
        names.append(name)
    for name, grid in cols.fixed.items():
        rows, width = grid.shape
        arrays.append(_list_array(grid.reshape(-1), np.arange(rows + 1, dtype=np.int64) * width))
        names.append(name)
    for name, values in cols.scalars.items():
        arrays.append(pa.array(values))
        names.append(name)
    table = pa.Table.from_arrays(arrays, names=names)
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", use_dictionary=False)
    return out.getvalue()


def name(number: int, parts: int) -> str:
    return f"data/part-{number:05d}-of-{parts:05d}.parquet"
