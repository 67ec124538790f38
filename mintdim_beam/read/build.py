"""A finished build as the reader sees it: what `manifest.json`, `length_field.json`,
`histogram.json` and `sample_index.jsonl` say, checked against the shards on disk, and
records read by (unit, ordinal).

Records are fixed-width, so record i of a unit is row `i % S` of shard `i // S`
(S = `output.samples_per_shard`) at byte `row * record_bytes`. Local shards are
memory-mapped (`np.memmap`, a few kept open, never read whole); URLs are read by byte
ranges through `core.files.storage` (one `cat_ranges` call per batch, adjacent rows merged).

Per-record facts (`read.facts`), each written once into the reader's cache
(`read.cache`) and memory-mapped: every record's token count, read from the shards'
own length slots (never from `sample_index.jsonl`, locally or for a URL), when a packed
reader or `padding_fraction` first needs them; every record's sample id, from
`sample_index.jsonl` (the only file that maps records to sample ids) when a batch's
`sample_ids` are first asked for. Their names carry the shards' (or the index's) sizes
and versions, so a shard changed since is read again.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from mintdim_beam.core.errors import ShardRecordError
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats.mintdim import (HISTOGRAM, LENGTH_FIELD, MANIFEST, NP_DTYPES,
                                               SAMPLE_INDEX, record_bytes, shard_name)
from mintdim_beam.read import cache, facts, sample_index

_OPEN_SHARDS = 64  # memory maps kept open (each holds a file descriptor)


@dataclass(frozen=True)
class Segment:
    index: int
    name: str
    kind: str  # literal / field (templated), context / trained (chat, preference)


@dataclass
class Build:
    """A complete build's layout; `counts[size]` records per unit (units with records)."""

    root: str
    fingerprint: str
    dtype: np.dtype
    magic: int
    pad_id: int
    segments: tuple[Segment, ...]
    samples_per_shard: int
    counts: dict[int, int]
    cache_dir: str | None = None
    versions: list = field(default_factory=list, repr=False)  # each shard's size and version
    _maps: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    def __getstate__(self):
        """Pickled (to a DataLoader worker) without its memory maps: pickling an
        np.memmap would copy the shard (or the cached facts)."""
        state = dict(self.__dict__)
        state["_maps"], state["_cache"] = OrderedDict(), {}
        return state

    @property
    def sizes(self) -> list[int]:
        return sorted(self.counts)

    @property
    def is_local(self) -> bool:
        return not storage.is_url(self.root)

    def width(self, unit: int) -> int:
        """Token slots per record: magic, one length per segment, the payload."""
        return 1 + len(self.segments) + unit

    def shard_path(self, unit: int, shard: int) -> str:
        return storage.join(self.root, *shard_name(unit, shard).split("/"))

    def shard_count(self, unit: int) -> int:
        return -(-self.counts[unit] // self.samples_per_shard)

    @property
    def store(self) -> cache.Store:
        """The reader's cache of this build (`read.cache.location`)."""
        if "store" not in self._cache:
            self._cache["store"] = cache.Store(cache.location(self.root, self.cache_dir, "unit",
                                                              self.fingerprint))
        return self._cache["store"]

    def first_record(self, unit: int) -> int:
        """The unit's first record in the global numbering (units ascending)."""
        return sum(self.counts[u] for u in self.sizes if u < unit)

    def facts(self) -> cache.Artifact:
        """Every record's token count (`lengths`, global numbering) and each unit's
        largest count and token total (`meta["max"]`, `meta["tokens"]`), written once
        into the cache from the shards' length slots (`read.facts`)."""
        if "facts" not in self._cache:
            self._cache["facts"] = self.store.get(
                f"lengths.{cache.digest(self.versions)}",
                lambda folder: facts.write_lengths(self, folder))
        return self._cache["facts"]

    def token_counts(self, unit: int) -> np.ndarray:
        """The unit's records' token counts by ordinal (uint16, or uint32 for units of
        65,536 tokens and more), memory-mapped from the cache: each record's segment
        lengths summed, magic and lengths checked, when the cache was written."""
        lo = self.first_record(unit)
        return self.facts()["lengths"][lo:lo + self.counts[unit]]

    def sample_ids(self, unit: int) -> np.ndarray:
        """The unit's sample ids by record ordinal (int64), memory-mapped from the cache,
        which `sample_index.jsonl` fills the first time sample ids are asked for (its
        size and version looked up once per process)."""
        if "ids" not in self._cache:
            path = storage.join(self.root, SAMPLE_INDEX)
            if self.is_local:
                seen = cache.version(os.stat(path))
            else:
                fs = storage.filesystem(path)
                fs.invalidate_cache(path)
                seen = cache.version(fs.info(path))
            self._cache["ids"] = self.store.get(
                f"sample_ids.{cache.digest(seen)}",
                lambda folder: facts.write_sample_ids(self, folder))["ids"]
        ids = self._cache["ids"]
        lo = self.first_record(unit)
        return ids[lo:lo + self.counts[unit]]

    def records(self, unit: int, ordinals: np.ndarray) -> np.ndarray:
        """Records `ordinals` of `unit`, in that order, as (len, width) in the token
        dtype; each one's magic and segment lengths checked."""
        width = self.width(unit)
        ordinals = np.asarray(ordinals, dtype=np.int64)
        shards, rows = np.divmod(ordinals, self.samples_per_shard)
        if self.is_local:
            out = self._records_local(unit, shards, rows, width)
        else:
            out = self._records_remote(unit, shards, rows, width)
        self.check_records(unit, out, shards, rows)
        return out

    def _records_local(self, unit, shards, rows, width) -> np.ndarray:
        out = np.empty((len(rows), width), dtype=self.dtype)
        by_shard = np.argsort(shards, kind="stable")
        cuts = [0, *(np.flatnonzero(np.diff(shards[by_shard])) + 1).tolist(), len(rows)]
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            group = by_shard[lo:hi]
            out[group] = self._memmap(unit, int(shards[group[0]]), width)[rows[group]]
        return out

    def _memmap(self, unit: int, shard: int, width: int) -> np.ndarray:
        key = (unit, shard)
        if key in self._maps:
            self._maps.move_to_end(key)
            return self._maps[key]
        path = self.shard_path(unit, shard)
        nrows = _shard_rows(self.counts[unit], self.samples_per_shard, shard)
        # a plain ndarray over the map: np.memmap's own indexing costs ~7 us a call
        mm = np.memmap(path, dtype=self.dtype, mode="r", shape=(nrows, width)).view(np.ndarray)
        self._maps[key] = mm
        if len(self._maps) > _OPEN_SHARDS:
            self._maps.popitem(last=False)
        return mm

    def _records_remote(self, unit, shards, rows, width) -> np.ndarray:
        """Byte ranges: rows sorted by (shard, row), adjacent ones merged into one range,
        all ranges of the batch fetched by one `cat_ranges` call."""
        nbytes = width * self.dtype.itemsize
        order = np.lexsort((rows, shards))
        paths, starts, ends, spans = [], [], [], []
        i = 0
        while i < len(order):
            j = i + 1
            while (j < len(order) and shards[order[j]] == shards[order[i]]
                   and rows[order[j]] == rows[order[j - 1]] + 1):
                j += 1
            first = int(rows[order[i]])
            paths.append(self.shard_path(unit, int(shards[order[i]])))
            starts.append(first * nbytes)
            ends.append((first + j - i) * nbytes)
            spans.append((i, j))
            i = j
        fs = storage.filesystem(self.root)
        blobs = fs.cat_ranges(paths, starts, ends)
        out = np.empty((len(rows), width), dtype=self.dtype)
        for (i, j), blob, path, start, end in zip(spans, blobs, paths, starts, ends):
            if isinstance(blob, Exception) or len(blob) != end - start:
                raise OSError(f"{path}: could not read bytes {start}..{end}: {blob!r:.200}")
            out[order[i:j]] = np.frombuffer(blob, dtype=self.dtype).reshape(j - i, width)
        return out

    def check_records(self, unit: int, out: np.ndarray, shards, rows) -> None:
        """ShardRecordError naming the first of the records `out` (rows of `shards`,
        their magic and length slots first) whose magic or lengths are wrong."""
        n = len(self.segments)
        bad_magic = out[:, 0] != self.magic
        lengths = out[:, 1:1 + n].astype(np.int64)
        bad_lengths = lengths.sum(axis=1) > unit
        bad = np.flatnonzero(bad_magic | bad_lengths)
        if not len(bad):
            return
        k = int(bad[0])
        shard = shard_name(unit, int(shards[k]))
        if bad_magic[k]:
            problem = f"magic is {int(out[k, 0])}, expected {self.magic}"
        else:
            problem = (f"segment lengths {lengths[k].tolist()} add up to {int(lengths[k].sum())}, "
                       f"more than the unit size {unit}")
        raise ShardRecordError(shard=shard, row=int(rows[k]), problem=problem)


def _shard_rows(count: int, per_shard: int, shard: int) -> int:
    return min(per_shard, count - shard * per_shard)


def _read_json(root: str, name: str):
    return json.loads(_read(root, name))


def _read(root: str, name: str) -> bytes:
    path = storage.join(root, name)
    if not storage.is_url(path):
        with open(path, "rb") as handle:
            return handle.read()
    return storage.read_bytes(path)


def open_build(path: str, cache_dir: str | None = None) -> Build:
    """The build at `path` (a directory or URL holding `manifest.json`); `cache_dir`:
    where the reader's cache goes (`read.cache.location`)."""
    root = storage.resolve(str(path)).rstrip("/")
    try:
        manifest_bytes = _read(root, MANIFEST)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no {MANIFEST}; not a complete unit-build "
                                "(the manifest is written last)") from None
    manifest = json.loads(manifest_bytes)
    if manifest.get("pipeline") != "unit-build":
        raise ValueError(f"{path}: manifest.json is a {manifest.get('pipeline')!r} build, "
                         "the reader reads unit-build outputs")
    layout = _read_json(root, manifest.get("length_field_metadata") or LENGTH_FIELD)
    histogram = _read_json(root, HISTOGRAM)
    sizes = [int(s) for s in manifest["units"]["sizes"]]
    counts = {int(k): int(v) for k, v in histogram.items() if int(v) > 0}
    unknown = sorted(set(counts) - set(sizes))
    if unknown:
        raise ValueError(f"{path}: histogram.json counts units {unknown} that manifest.json "
                         f"units.sizes {sizes} does not list")
    dtype_name = layout["token_dtype"]
    segments = tuple(Segment(int(f["index"]), f["name"], f["kind"])
                     for f in layout["length_fields"])
    if [s.name for s in segments] != list(layout["sequence_template"]):
        raise ValueError(f"{path}: length_field.json length_fields and sequence_template differ")
    build = Build(root=root, fingerprint=hashlib.sha256(manifest_bytes).hexdigest(),
                  dtype=NP_DTYPES[dtype_name], magic=int(layout["magic"]),
                  pad_id=int(layout["pad_token_id"]), segments=segments,
                  samples_per_shard=int(manifest["output"]["samples_per_shard"]),
                  counts=counts, cache_dir=cache_dir)
    _check_shards(build)
    return build


def _check_shards(build: Build) -> None:
    """Every shard the counts call for is there with exactly its records' bytes: one
    stat per shard locally, one listing per unit for a URL; each shard's size and
    version kept (`build.versions`), what the cached token counts were read from."""
    for unit in build.sizes:
        nbytes = record_bytes(unit, len(build.segments), build.dtype.itemsize)
        found = _shard_entries(build, unit)
        for shard in range(build.shard_count(unit)):
            path = build.shard_path(unit, shard)
            want = _shard_rows(build.counts[unit], build.samples_per_shard, shard) * nbytes
            seen = found.get(shard)
            got = None if seen is None else seen[0]
            build.versions.append([unit, shard, *(seen or [])])
            if got != want:
                what = "missing" if got is None else f"{got} bytes"
                raise ShardRecordError(shard=shard_name(unit, shard), row=None,
                                       problem=f"{what}, expected {want} bytes "
                                               f"({path}; histogram.json and samples_per_shard)")


def _shard_entries(build: Build, unit: int) -> dict[int, list]:
    """shard -> its size and version (`cache.version`) for the shards found."""
    if build.is_local:
        sizes = {}
        for shard in range(build.shard_count(unit)):
            try:
                sizes[shard] = cache.version(os.stat(build.shard_path(unit, shard)))
            except FileNotFoundError:
                pass
        return sizes
    directory = storage.join(build.root, f"unit_{unit}")
    fs = storage.filesystem(directory)
    fs.invalidate_cache(directory)
    sizes = {}
    try:
        entries = fs.ls(directory, detail=True)
    except FileNotFoundError:  # object stores have no empty directories: no shard left
        return sizes
    for entry in entries:
        match = re.search(r"shard_(\d{6})\.bin$", entry["name"])
        if match:
            sizes[int(match.group(1))] = cache.version(entry)
    return sizes


def parse_sample_index(build: Build) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """unit -> (sample ids, token counts) by record ordinal."""
    ids, units, tokens = sample_index.parse(storage.join(build.root, SAMPLE_INDEX))
    if not len(ids) == len(units) == len(tokens) == sum(build.counts.values()):
        raise ValueError(f"{build.root}: {SAMPLE_INDEX} has {len(ids)} rows "
                         f"({len(units)} unit sizes, {len(tokens)} token counts), "
                         f"histogram.json counts {sum(build.counts.values())} records")
    out = {}
    for unit in build.sizes:
        mine = units == unit
        out[unit] = ids[mine], tokens[mine]
        if len(out[unit][0]) != build.counts[unit]:
            raise ValueError(f"{build.root}: {SAMPLE_INDEX} has {len(out[unit][0])} rows of unit "
                             f"{unit}, histogram.json counts {build.counts[unit]}")
        if len(tokens) and int(out[unit][1].max(initial=0)) > unit:
            raise ValueError(f"{build.root}: {SAMPLE_INDEX} gives a record of unit {unit} "
                             f"{int(out[unit][1].max())} tokens, more than the unit holds")
    return out
