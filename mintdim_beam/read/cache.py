"""The readers' cache: per-record facts and per-epoch orders as `.npy` files, written
once and opened memory-mapped (`np.load(mmap_mode="r")`), as megatron-core keeps its
document, sample and shuffle indices (`path_to_cache`). Why: a rank's resident memory
then holds what it reads (the pages of a window, a step), not 4 to 16 bytes for every
record of the build, and a start or resume opens files instead of reading a billion
records' lengths or reshuffling them.

Where (`location`): the reader's `cache_dir`, else `$MINTDIM_BEAM_READER_CACHE`, else
beside a local build (`<build>.reader-cache/`) when its folder is writable, else the
user's cache folder (`$XDG_CACHE_HOME` or `~/.cache`, `mintdim_beam/reader/`), else the
temp folder; under it one folder per build, named by the kind and the manifest's sha256.
In it each artifact is a folder of `.npy` files and a `meta.json`, named by what fixes
its content (the shards' sizes and versions, seed, epoch, lengths of rows...), so a
changed input is another name, never a stale file.

Written once: the first process to need an artifact takes a lock (`flock` on a file
beside it; other processes wait, then open what it wrote), writes into a temp folder
and renames it into place, so a reader never sees half an artifact and concurrent
ranks converge on one copy; without `flock` (a filesystem without it) each writes its
own temp folder and the first rename wins, the others' identical content discarded.
Per-epoch artifacts (`<family>.e<epoch>`) older than the epoch before are removed when
a new one is written (a reader that still maps one keeps its pages; POSIX)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import re
import shutil
import tempfile
import uuid

import numpy as np

ENV = "MINTDIM_BEAM_READER_CACHE"
FORMAT = 1
META = "meta.json"
CHUNK = 1 << 22  # elements a pass holds at once (16-32 MB)
_EPOCH = re.compile(r"^(?P<family>.+)\.e(?P<epoch>\d+)$")
_TEMP = re.compile(r"\.tmp-(?P<pid>\d+)-[0-9a-f]+$")
_LOCK = re.compile(r"^\.(?P<name>.+)\.lock$")


VERSION_KEYS = ("generation", "etag", "ETag", "md5Hash", "crc32c", "mtime", "LastModified",
                "updated", "created")


def digest(value) -> str:
    """A short sha256 of `value` (bytes, or anything JSON-serializable)."""
    data = value if isinstance(value, bytes) else json.dumps(value, sort_keys=True,
                                                              default=str).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def version(entry) -> list:
    """What says a file's content is the one a cache was written from: a local file's
    size and mtime (an `os.stat_result`), an object's size and whichever of its
    generation, etag, hashes and times the store lists (an fsspec `info` dict)."""
    if isinstance(entry, os.stat_result):
        return [entry.st_size, entry.st_mtime_ns]
    return [int(entry["size"]), *(str(entry[k]) for k in VERSION_KEYS if k in entry)]


def location(root: str, cache_dir: str | None, kind: str, fingerprint: str) -> str:
    """The build's cache folder (see the module docstring), not created yet;
    `fingerprint` is the manifest's sha256."""
    key = f"{kind}-{fingerprint[:20]}"
    if cache_dir is not None:
        return os.path.join(os.path.abspath(os.fspath(cache_dir)), key)
    if os.environ.get(ENV):
        return os.path.join(os.path.abspath(os.environ[ENV]), key)
    from mintdim_beam.core.files import storage

    if not storage.is_url(root):
        parent, name = os.path.split(root.rstrip(os.sep))
        beside = os.path.join(parent, f"{name}.reader-cache")
        if os.access(beside if os.path.isdir(beside) else parent, os.W_OK | os.X_OK):
            return os.path.join(beside, key)
    user = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for base in (os.path.join(user, "mintdim_beam", "reader"),
                 os.path.join(tempfile.gettempdir(), f"mintdim_beam-reader-{os.getuid()}")):
        try:
            os.makedirs(base, exist_ok=True)
        except OSError:
            continue
        if os.access(base, os.W_OK | os.X_OK):
            return os.path.join(base, key)
    raise OSError(f"no writable folder for the reader's cache of {root}: give cache_dir "
                  f"or set {ENV}")


class Artifact:
    """One artifact opened: its `meta` and its arrays by name, each a read-only ndarray
    over a memory map of its `.npy` (as `np.load(mmap_mode="r")`, without np.memmap's
    per-index cost); `release()` gives back the pages a pass over them made resident."""

    def __init__(self, path: str):
        with open(os.path.join(path, META)) as handle:
            self.meta = json.load(handle)
        if self.meta.get("format") != FORMAT:
            raise ValueError(f"{path}: cache format {self.meta.get('format')}, not {FORMAT}")
        self.arrays, self._maps = {}, []
        for name in self.meta["arrays"]:
            self.arrays[name] = self._map(os.path.join(path, f"{name}.npy"))

    def _map(self, path: str) -> np.ndarray:
        with open(path, "rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            read = (np.lib.format.read_array_header_1_0 if major == 1
                    else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read(handle)
            offset = handle.tell()
            mm = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        count = int(np.prod(shape, dtype=np.int64))
        if fortran or offset + count * dtype.itemsize > len(mm):
            raise ValueError(f"{path}: not a whole C-order array")
        self._maps.append(mm)
        return np.frombuffer(mm, dtype=dtype, count=count, offset=offset).reshape(shape)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def release(self) -> None:
        """Drop this process's resident pages of the maps (MADV_DONTNEED: read-only
        file pages, read again from the page cache when next touched): after a pass over
        a whole array, so the pass does not stay in the rank's resident memory."""
        advice = getattr(mmap, "MADV_DONTNEED", None)
        for mm in self._maps if advice is not None else ():
            with contextlib.suppress(OSError, ValueError):
                mm.madvise(advice)


class Store:
    """A build's cache folder: `get(name, make)` opens artifact `name`, made first by
    `make(folder)` (which writes its `.npy` files there and returns its meta) when no
    process has yet. Opened artifacts are kept (memory maps, not their pages); a pickled
    store carries its path only."""

    def __init__(self, directory: str):
        self.dir = directory
        self._open: dict[str, Artifact] = {}

    def __getstate__(self):
        return {"dir": self.dir, "_open": {}}

    def get(self, name: str, make) -> Artifact:
        got = self._open.get(name)
        if got is None:
            got = self._open[name] = self._get(name, make)
        return got

    def find(self, name: str) -> Artifact | None:
        """Artifact `name` if a process has written it, without making it."""
        got = self._open.get(name) or _load(os.path.join(self.dir, name))
        if got is not None:
            self._open[name] = got
        return got

    def _get(self, name: str, make) -> Artifact:
        path = os.path.join(self.dir, name)
        found = _load(path)
        if found is not None:
            return found
        os.makedirs(self.dir, exist_ok=True)
        with _locked(os.path.join(self.dir, f".{name}.lock")):
            found = _load(path)  # made by the process that held the lock
            if found is not None:
                return found
            temp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            os.makedirs(temp)
            try:
                meta = dict(make(temp) or {})
                meta["format"] = FORMAT
                meta["arrays"] = sorted(f[:-4] for f in os.listdir(temp) if f.endswith(".npy"))
                with open(os.path.join(temp, META), "w") as handle:
                    json.dump(meta, handle)
                try:
                    os.rename(temp, path)
                except OSError:
                    if not os.path.isdir(path):  # lost to another writer: theirs is ours
                        raise
            finally:
                shutil.rmtree(temp, ignore_errors=True)
        self._prune(name)
        return Artifact(path)

    def _prune(self, name: str) -> None:
        """Per-epoch artifacts of `name`'s family two or more epochs behind it (and their
        lock files), and temp folders of writers that are gone."""
        match = _EPOCH.match(name)
        for entry in os.listdir(self.dir):
            lock, temp = _LOCK.match(entry), _TEMP.search(entry)
            other = _EPOCH.match(lock.group("name") if lock else entry)
            if temp and _abandoned(os.path.join(self.dir, entry), int(temp.group("pid"))):
                shutil.rmtree(os.path.join(self.dir, entry), ignore_errors=True)
            elif match and other and other.group("family") == match.group("family") \
                    and int(other.group("epoch")) < int(match.group("epoch")) - 1:
                path = os.path.join(self.dir, entry)
                if lock:
                    with contextlib.suppress(OSError):
                        os.remove(path)
                else:
                    shutil.rmtree(path, ignore_errors=True)


def _load(path: str) -> Artifact | None:
    """The artifact at `path`, or None when there is none (or a broken one, removed)."""
    if not os.path.isdir(path):
        return None
    try:
        return Artifact(path)
    except (OSError, ValueError, KeyError):
        broken = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        with contextlib.suppress(OSError):
            os.rename(path, broken)
            shutil.rmtree(broken, ignore_errors=True)
        return None


def _abandoned(path: str, pid: int) -> bool:
    """A temp folder whose writer is gone: its process is not running here and it is a
    day old (on a shared filesystem the pid may be another machine's)."""
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        pass
    except OSError:
        return False
    try:
        import time

        return time.time() - os.stat(path).st_mtime > 86400
    except OSError:
        return False


@contextlib.contextmanager
def _locked(path: str):
    """An exclusive `flock` on `path` for the block; none where the filesystem has none
    (then concurrent writers race, and the first rename wins)."""
    try:
        import fcntl

        handle = open(path, "a+b")  # noqa: SIM115 - closed below
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        handle.close()


class Writer:
    """A 1-D `.npy` of `length` items written in pieces (`put` at an index, `append` in
    order) through the file, not a map: the writing process holds one piece at a time."""

    def __init__(self, folder: str, name: str, dtype, length: int):
        self.dtype, self.length, self.at = np.dtype(dtype), int(length), 0
        self._handle = open(os.path.join(folder, f"{name}.npy"), "wb")  # noqa: SIM115
        np.lib.format.write_array_header_1_0(
            self._handle, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                           "fortran_order": False, "shape": (self.length,)})
        self._offset = self._handle.tell()
        self._handle.truncate(self._offset + self.length * self.dtype.itemsize)

    def put(self, index: int, values) -> None:
        data = np.ascontiguousarray(values, dtype=self.dtype)
        if index < 0 or index + len(data) > self.length:
            raise IndexError(f"items {index}..{index + len(data)} of {self.length}")
        os.pwrite(self._handle.fileno(), data.tobytes(), self._offset + index * self.dtype.itemsize)

    def append(self, values) -> None:
        self.put(self.at, values)
        self.at += len(values)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def index_dtype(n: int):
    """int32 for positions below 2**31, else int64: half the bytes for most builds."""
    return np.int32 if n < (1 << 31) else np.int64


def shuffled(folder: str, name: str, n: int, rng, dtype=None) -> None:
    """`{name}.npy`: `arange(n)` shuffled in place by `rng.shuffle` (a numpy Generator
    or RandomState) on the file's map. Numpy's Fisher-Yates makes the same swaps for any
    item type, so this is `rng.permutation(n)` (or Megatron's `RandomState.shuffle` of
    an int32 `arange`) exactly, in 4 bytes an item, mapped rather than anonymous; the
    map is dropped when done."""
    dtype = np.dtype(dtype or index_dtype(n))
    path = os.path.join(folder, f"{name}.npy")
    if n == 0:
        np.save(path, np.zeros(0, dtype=dtype))
        return
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n,))
    for lo in range(0, n, CHUNK):
        mm[lo:lo + CHUNK] = np.arange(lo, min(n, lo + CHUNK), dtype=dtype)
    rng.shuffle(mm.view(np.ndarray))  # a plain ndarray: numpy's fast in-place path
    mm.flush()
    del mm


def chunks(array: np.ndarray, size: int = CHUNK):
    """(start, piece) over a 1-D array, `size` items at a time."""
    for lo in range(0, len(array), size):
        yield lo, np.asarray(array[lo:lo + size])
