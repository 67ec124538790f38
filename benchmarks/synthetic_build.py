"""Synthetic builds of many records, lengths only, written with numpy in the formats'
own layouts (docs/format.md, docs/pack_build.md), for the readers at scale
(`read_scale.py`, tests/test_reader_scale.py): no corpus, no tokenizer, seconds a
hundred million records.

- `unit_build(out, records)`: a unit-build of one `text` segment, units 4 to 64 (small
  records, so 100M fit in about 2.5 GB), token counts `1 + geometric` drawn from a seed,
  each record `[65535][count][count ids of 1, then pad 0 to the unit]`, shards of
  `per_shard` records; manifest.json, length_field.json, histogram.json. No
  sample_index.jsonl: a reader asked for sample ids refuses (none is asked here).
- `pack_build(out, documents)`: a pack-build of `shards` Megatron shards, document
  lengths `2 + geometric`; each `.idx` whole, each `.bin` a sparse file of zeros (its
  size right, no disk used: the reader never checks token values)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

MAGIC = 65535
SIZES = (4, 8, 16, 32, 64)
CHUNK = 1 << 23


def _lengths(rng, n: int, mean: float, low: int, high: int) -> np.ndarray:
    return np.minimum(low - 1 + rng.geometric(1.0 / mean, n), high).astype(np.int64)


def unit_build(out, records: int, *, per_shard: int = 1_000_000, seed: int = 0,
               mean: float = 6.5) -> Path:
    """The unit-build at `out` (reused when its manifest says `records`)."""
    out = Path(out)
    manifest_path = out / "manifest.json"
    if manifest_path.exists() and json.loads(manifest_path.read_text()).get(
            "synthetic", {}).get("records") == records:
        return out
    out.mkdir(parents=True, exist_ok=True)
    manifest_path.unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    sizes = np.asarray(SIZES)
    written = dict.fromkeys(SIZES, 0)
    handles: dict[int, object] = {}
    try:
        for lo in range(0, records, CHUNK):
            lengths = _lengths(rng, min(CHUNK, records - lo), mean, 1, SIZES[-1])
            units = sizes[np.searchsorted(sizes, lengths)]
            for unit in SIZES:
                mine = lengths[units == unit]
                rows = np.zeros((len(mine), 2 + unit), dtype="<u2")
                rows[:, 0], rows[:, 1] = MAGIC, mine
                rows[:, 2:] = np.arange(unit) < mine[:, None]  # ids of 1, then pad 0
                at = 0
                while at < len(rows):
                    shard, row = divmod(written[unit], per_shard)
                    if row == 0:
                        if unit in handles:
                            handles[unit].close()
                        (out / f"unit_{unit}").mkdir(exist_ok=True)
                        handles[unit] = open(out / f"unit_{unit}" / f"shard_{shard:06d}.bin", "wb")
                    take = min(len(rows) - at, per_shard - row)
                    handles[unit].write(rows[at:at + take].tobytes())
                    written[unit] += take
                    at += take
    finally:
        for handle in handles.values():
            handle.close()
    layout = {"magic": MAGIC, "sequence_template": ["text"],
              "length_fields": [{"index": 0, "name": "text", "kind": "field", "content": None,
                                 "field": "text"}],
              "token_dtype": "uint16", "pad_token_id": 0}
    (out / "length_field.json").write_text(json.dumps(layout, indent=2))
    (out / "histogram.json").write_text(json.dumps(
        {str(u): written[u] for u in SIZES if written[u]}, indent=2))
    manifest = {"pipeline": "unit-build", "mintdim_version": "0.2.1",
                "length_field_metadata": "length_field.json",
                "units": {"sizes": list(SIZES), "build_batch": 512},
                "output": {"samples_per_shard": per_shard},
                "synthetic": {"records": records, "seed": seed, "mean": mean}}
    manifest_path.write_text(json.dumps(manifest, indent=2))
    return out


def pack_build(out, documents: int, *, shards: int = 4, seed: int = 0, mean: float = 8.0) -> Path:
    """The pack-build at `out` (reused when its manifest says `documents`)."""
    out = Path(out)
    manifest_path = out / "manifest.json"
    if manifest_path.exists() and json.loads(manifest_path.read_text()).get(
            "documents") == documents:
        return out
    out.mkdir(parents=True, exist_ok=True)
    manifest_path.unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    listed, tokens = [], 0
    cuts = np.linspace(0, documents, shards + 1).astype(np.int64)
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        count, name = int(b - a), f"shard_{k:06d}"
        with open(out / f"{name}.idx", "wb") as idx:
            idx.write(b"MMIDIDX\x00\x00" + (1).to_bytes(8, "little") + bytes([8])
                      + count.to_bytes(8, "little") + (count + 1).to_bytes(8, "little"))
            shard_tokens, pieces = 0, []
            for lo in range(0, count, CHUNK):
                lengths = _lengths(rng, min(CHUNK, count - lo), mean, 2, 1 << 14)
                idx.write(lengths.astype("<i4").tobytes())
                pieces.append(lengths)
            for lengths in pieces:  # pointers: byte offsets, one document after another
                ends = np.cumsum(lengths) + shard_tokens
                idx.write(((ends - lengths) * 2).astype("<i8").tobytes())
                shard_tokens = int(ends[-1])
            for lo in range(0, count + 1, CHUNK):
                idx.write(np.arange(lo, min(count + 1, lo + CHUNK), dtype="<i8").tobytes())
        with open(out / f"{name}.bin", "wb") as bin_file:
            bin_file.truncate(shard_tokens * 2)  # sparse: zeros, no disk
        listed.append({"name": name, "documents": count, "tokens": shard_tokens})
        tokens += shard_tokens
    manifest = {"pipeline": "pack-build", "dtype": "uint16", "eod": {"id": 0},
                "documents": documents, "tokens": tokens, "shards": listed,
                "synthetic": {"documents": documents, "seed": seed, "mean": mean}}
    manifest_path.write_text(json.dumps(manifest, indent=2))
    return out


def disk_bytes(root) -> int:
    """Bytes the files under `root` take on disk (sparse files count what they hold)."""
    return sum(os.stat(p).st_blocks * 512 for p in Path(root).rglob("*") if p.is_file())
