"""HDF5 in the DataPipeline layout: one file per task, `chunk_NNNNN.h5`, its datasets
by key as DataPipeline's `save_h5` groups them:
- records: `sequence` (variable-length int32, the record's tokens) and `loss_mask`
  (variable-length bool, True where trained); preference pairs: `chosen` / `rejected`
  (prompt then completion) with `chosen_mask` / `rejected_mask` (True on the completion);
- packed rows and pack-build samples: `sequence` [rows, width] int32 and `loss_mask`
  [rows, width] bool, plus `position_ids` [rows, width] int32;
- beside them `sample_id` (int64; packed rows: `sample_ids`, variable-length).
Needs `h5py` (`pip install mintdim-beam[hdf5]`); `h5py.File(path)` reads it."""
from __future__ import annotations

import io

import numpy as np


def _vlen(f, name: str, lists, dtype) -> None:
    import h5py

    data = f.create_dataset(name, (len(lists),), dtype=h5py.vlen_dtype(np.dtype(dtype)))
    for i, values in enumerate(lists):
        data[i] = np.asarray(values, dtype=dtype)


def encode(cols, ignore_id: int = -100) -> bytes:
    import h5py

    out = io.BytesIO()
    with h5py.File(out, "w", track_order=True) as f:
        if "chosen_ids" in cols.ragged:
            prompt = cols.row_lists("prompt_ids")
            for side in ("chosen", "rejected"):
                done = cols.row_lists(f"{side}_ids")
                _vlen(f, side, [np.concatenate([p, d]) for p, d in zip(prompt, done)], np.int32)
                _vlen(f, f"{side}_mask", [np.concatenate([np.zeros(len(p), bool),
                                                          np.ones(len(d), bool)])
                                          for p, d in zip(prompt, done)], np.bool_)
        elif "input_ids" in cols.ragged:
            _vlen(f, "sequence", cols.row_lists("input_ids"), np.int32)
            _vlen(f, "loss_mask", [m.astype(bool) for m in cols.row_lists("completion_mask")],
                  np.bool_)
        else:
            wide = "tokens" if "tokens" in cols.fixed else "input_ids"
            f.create_dataset("sequence", data=cols.fixed[wide].astype(np.int32))
            if wide == "tokens":  # pretraining: every token is a target
                mask = np.ones(cols.fixed["tokens"].shape, dtype=bool)
            else:
                mask = cols.fixed["labels"] != ignore_id
            f.create_dataset("loss_mask", data=mask)
            f.create_dataset("position_ids", data=cols.fixed["position_ids"].astype(np.int32))
        if "sample_id" in cols.scalars:
            f.create_dataset("sample_id", data=np.asarray(cols.scalars["sample_id"], np.int64))
        if "sample_ids" in cols.ragged:
            _vlen(f, "sample_ids", cols.row_lists("sample_ids"), np.int64)
    return out.getvalue()


def name(number: int, parts: int) -> str:
    return f"chunk_{number:05d}.h5"
