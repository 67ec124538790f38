"""What the launcher plans, kept on storage instead of in the job graph.

Why: Beam pickles every DoFn's arguments and every `beam.Create` element into the
serialized pipeline, and Dataflow refuses a graph over 10 MB. At 100,000 input files the
planned ranges, the file list carried by each stage's plan and the manifest's input
identities came to about 210 bytes a file in the graph. A `Stored` value is written once
to the run's scratch directory (beside the parts, removed with them by Finalize) and
pickles as its path, length and digest: workers read it on first use, once per process.

A `Stored` reads like the tuple, list or dict it holds (`len` without reading it), so
code that indexes `dataset.files` or looks up `inputs[dataset]` does not know.
"""
from __future__ import annotations

import hashlib
import pickle
import threading

from mintdim_beam.core.files import storage

PLAN_DIR = "plan"  # inside a run's scratch directory
_LOADED: dict = {}  # (path, digest) -> value, per process
_LOCK = threading.Lock()


def _unreadable(path: str, why: str):
    """The error of a planned file a worker cannot read as written: an `OutputWriteError`
    naming the output directory (the plan lives in its scratch), carried as its class
    across the runner. Why it happens: workers that do not share the output's disk
    (`--shared_filesystem` said otherwise), or `clean` or another run removed it."""
    from mintdim_beam.core.errors import OutputWriteError
    from mintdim_beam.core.errors.failures import WorkerFailure

    marker = f"/{storage.TMP_DIR_NAME}/"
    directory = path.split(marker, 1)[0] if marker in path else path
    return WorkerFailure(OutputWriteError(directory=directory, reason=(
        f"the run's planned file {path} {why}: the workers do not see the output directory "
        "this launcher wrote (a local path on workers that do not share this disk?), or "
        "`clean` or another run removed it")).to_payload())


class Stored:
    """A value on storage; pickles as its address, length and digest."""

    __slots__ = ("path", "length", "digest")

    def __init__(self, path: str, length: int, digest: str):
        self.path, self.length, self.digest = path, length, digest

    def __reduce__(self):
        return Stored, (self.path, self.length, self.digest)

    @property
    def value(self):
        key = (self.path, self.digest)
        found = _LOADED.get(key)
        if found is None:
            with _LOCK:
                found = _LOADED.get(key)
                if found is None:
                    found = _LOADED[key] = _read(self.path, self.digest)
        return found

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        return iter(self.value)

    def __getitem__(self, key):
        return self.value[key]

    def __contains__(self, key) -> bool:
        return key in self.value

    def get(self, key, default=None):
        return self.value.get(key, default)

    def __eq__(self, other) -> bool:
        if isinstance(other, Stored):
            return (self.path, self.digest) == (other.path, other.digest)
        return self.value == other

    def __hash__(self) -> int:
        return hash((self.path, self.digest))

    def __repr__(self) -> str:
        return f"Stored({self.path!r}, {self.length} items)"


def forget_loaded() -> None:
    """Drop this process's loaded values (a launcher after its run, so a notebook that
    builds many times does not keep every run's file list); a later use reads again."""
    with _LOCK:
        _LOADED.clear()


def _read(path: str, digest: str):
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        raise _unreadable(path, "is not there") from None
    if _digest(data) != digest:
        raise _unreadable(path, "is not the one this run wrote")
    return pickle.loads(data)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def store(value, scratch: str, name: str) -> Stored:
    """Write `value` (a tuple, list or dict) as `name` in `scratch`'s plan directory; the
    value stays loaded in this process."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    folder = storage.join(scratch, PLAN_DIR)
    path = storage.join(folder, name)
    storage.makedirs(folder)
    storage.write_atomic(path, data, folder, scratch=folder)
    handle = Stored(path, len(value), _digest(data))
    _LOADED[(path, handle.digest)] = value
    return handle


# Ranges per element of the graph's `Create`: the graph holds one reference per chunk.
RANGES_PER_CHUNK = 1024


def store_lists(config, names, scratch: str):
    """`config` (a frozen dataclass) with its per-file lists `names` (files, fields,
    templates) `store`d in `scratch`: what a pipeline's graph carries of them."""
    import dataclasses

    return dataclasses.replace(config, **{name: store(tuple(getattr(config, name)), scratch,
                                                      f"{name}.pkl") for name in names})


def store_ranges(ranges, scratch_of) -> list[Stored]:
    """The planned ranges in chunks of RANGES_PER_CHUNK, each chunk in its dataset's
    scratch (`scratch_of(dataset)`), in plan order."""
    chunks, run = [], []
    for r in ranges:
        if run and (len(run) == RANGES_PER_CHUNK or run[-1].dataset != r.dataset):
            chunks.append(run)
            run = []
        run.append(r)
    if run:
        chunks.append(run)
    return [store(tuple(chunk), scratch_of(chunk[0].dataset), f"ranges-{n:06d}.pkl")
            for n, chunk in enumerate(chunks)]


class PlannedRanges:
    """The planned ranges on storage: chunk references for the graph's `Create`, and per
    dataset the ranges' first bytes (for the text of an error that names lines)."""

    def __init__(self, ranges, scratch_of):
        from mintdim_beam.core.inputs.source import FileToPlan

        self.count = len(ranges)
        self.deferred = any(isinstance(r, FileToPlan) for r in ranges)
        self.chunks = store_ranges(ranges, scratch_of)
        self.starts = {ds: store(starts, scratch_of(ds), "starts.pkl")
                       for ds, starts in range_starts(ranges).items()}


def range_starts(ranges) -> dict:
    """{dataset: {range key: first byte}}, from a list of ranges or a PlannedRanges (a
    file planned by its worker has only its first range here)."""
    if isinstance(ranges, PlannedRanges):
        return ranges.starts
    starts: dict = {}
    for r in ranges:
        starts.setdefault(r.dataset, {})[r.key] = r.start
    return starts


def files_on_storage(dataset, scratch: str, name: str = "files.pkl"):
    """`dataset` with its file list on storage (`Stored`)."""
    import dataclasses

    return dataclasses.replace(dataset, files=store(tuple(dataset.files), scratch, name))
