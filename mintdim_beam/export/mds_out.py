"""MosaicML Streaming's MDS, written by us, read by `streaming.StreamingDataset`: one
shard per task, `shard.NNNNN.mds`, and `index.json` listing them (written last, by
Finalize). The layout (mosaicml-streaming's MDS version 2, uncompressed):

- shard: `u32 samples`, `u32 offsets[samples + 1]` (each sample's first byte in the
  file), the shard's config as sorted-key JSON, then the samples;
- sample: the columns in name order, first a `u32` size for each column without a fixed
  size, then each column's bytes: `ndarray:<dtype>` = one byte `(ndim << 2) | shape
  dtype code` (0 uint8, 1 uint16, 2 uint32, 3 uint64), the shape in that dtype, the
  values; `int64` = 8 bytes; `str` = UTF-8;
- config: {version 2, format "mds", compression null, hashes [], size_limit null,
  column_names, column_encodings, column_sizes};
- index.json: {"version": 2, "shards": [{samples, raw_data {basename, bytes, hashes},
  zip_data null, and the config}]}.
A list of no values cannot be an MDS array (the format refuses empty arrays)."""
from __future__ import annotations

import json

import numpy as np

_DTYPES = {"int8": "int8", "int32": "int32", "int64": "int64"}


def _array(values: np.ndarray) -> bytes:
    if values.size == 0:
        raise ValueError("MDS cannot hold an empty array (a row with no tokens)")
    shape = np.asarray(values.shape, dtype=np.int64)
    top = int(shape.max())
    code, dtype = ((0, np.uint8) if top < 1 << 8 else (1, np.uint16) if top < 1 << 16
                   else (2, np.uint32) if top < 1 << 32 else (3, np.uint64))
    return bytes([(len(values.shape) << 2) | code]) + shape.astype(dtype).tobytes() + \
        np.ascontiguousarray(values).tobytes()


def _columns(cols) -> dict:
    """name -> (encoding, per-row values getter)."""
    out = {}
    for name, (values, offsets) in cols.ragged.items():
        out[name] = (f"ndarray:{values.dtype.name}",
                     lambda i, v=values, o=offsets: v[o[i]:o[i + 1]])
    for name, grid in cols.fixed.items():
        out[name] = (f"ndarray:{grid.dtype.name}", lambda i, g=grid: g[i])
    for name, values in cols.scalars.items():
        if isinstance(values, list):
            out[name] = ("str", lambda i, v=values: v[i])
        else:
            out[name] = ("int64", lambda i, v=values: int(v[i]))
    return out


def config(cols) -> dict:
    columns = _columns(cols)
    names = sorted(columns)
    encodings = [columns[n][0] for n in names]
    return {"version": 2, "format": "mds", "compression": None, "hashes": [],
            "size_limit": None, "column_names": names, "column_encodings": encodings,
            "column_sizes": [8 if e == "int64" else None for e in encodings]}


def encode(cols) -> bytes:
    columns = _columns(cols)
    names = sorted(columns)
    conf = json.dumps(config(cols), sort_keys=True).encode("utf-8")
    samples = []
    for i in range(cols.rows):
        sizes, data = [], []
        for name in names:
            encoding, get = columns[name]
            value = get(i)
            if encoding == "int64":
                data.append(np.int64(value).tobytes())
                continue
            datum = value.encode("utf-8") if encoding == "str" else _array(value)
            sizes.append(len(datum))
            data.append(datum)
        samples.append(np.asarray(sizes, np.uint32).tobytes() + b"".join(data))
    offsets = np.zeros(len(samples) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in samples], out=offsets[1:])
    offsets += 4 + 4 * (len(samples) + 1) + len(conf)
    return (np.uint32(len(samples)).tobytes() + offsets.astype(np.uint32).tobytes() + conf
            + b"".join(samples))


def name(number: int, parts: int) -> str:
    return f"shard.{number:05d}.mds"


def index(shards: list) -> str:
    """index.json of the shards: (basename, bytes, samples, config) in order."""
    entries = []
    for basename, size, samples, conf in shards:
        entries.append({"samples": samples, "raw_data": {"basename": basename, "bytes": size,
                                                         "hashes": {}},
                        "zip_data": None, **conf})
    return json.dumps({"version": 2, "shards": entries}, sort_keys=True)
