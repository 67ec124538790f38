"""A pack-build output's files for `PackReader`: the manifest, each shard's `.idx`
lengths and pointers, and the `.bin` tokens of document pieces.

Opening reads the manifest and each shard's size (one stat of each file locally, one
listing for a URL), since it is paid on every start and resume. Each document's length
and first token (`lengths`, `starts`) are facts written once into the reader's cache
(`read.cache`, named by the shards' sizes and versions) and memory-mapped: the first
open reads each `.idx`'s lengths and pointers (never its document index after them, 40%
of the file) in blocks of 4M documents, checks every pointer against the lengths, and
writes them; later opens, and every other rank, read none of it. For a URL the first
open asks for every shard's header, lengths and pointers in one `cat_ranges` call
(in calls of about 64 MB for a large build).

The shards' `.bin` files are one address space (shard k's tokens after shard k-1's),
so a piece of a document is an address and a size whatever its shard. Tokens: locally
one index and one gather from the memory-mapped `.bin` (with several shards touched,
the pieces sorted by shard and one gather each), for a URL one `cat_ranges` call per
batch. fsspec is imported only when needed."""
from __future__ import annotations

import hashlib
import json
import os
import posixpath

import numpy as np

from mintdim_beam.core.errors import ReaderArgumentError
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import megatron
from mintdim_beam.read import cache

PIPELINE = "pack-build"
BLOCK_DOCS = 1 << 22  # documents of an .idx read at once: 48 MB of lengths and pointers
CALL_BYTES = 64 << 20  # bytes of .idx files one cat_ranges call asks for


class PackStore:
    """A pack-build output: documents numbered across shards in shard-name order, each
    with its length (`lengths`, int32) and its first token in the shards' address space
    (`starts`, int64, one more: the tokens' end), memory-mapped from the cache."""

    def __init__(self, path, cache_dir=None):
        self.root = storage.resolve(str(path)).rstrip("/")
        self.is_url = storage.is_url(self.root)
        self._manifest = self._read_manifest(str(path))
        self.fingerprint = hashlib.sha256(self._manifest).hexdigest()
        manifest = json.loads(self._manifest)
        self.dtype = np.dtype(manifest["dtype"])
        self.eod = int(manifest["eod"]["id"])
        self.names = [s["name"] for s in manifest["shards"]]
        self._wanted = [int(s["documents"]) for s in manifest["shards"]]
        entries = self._listing()
        self._idx_sizes = [int(e[0][0]) for e in entries]
        bin_bytes = [int(e[1][0]) for e in entries]
        # shard k's first byte and first token in the address space; one past the end last
        self.byte_starts = np.zeros(len(self.names) + 1, dtype=np.int64)
        np.cumsum(bin_bytes, out=self.byte_starts[1:])
        self.token_starts = self.byte_starts // self.dtype.itemsize
        self.tokens = int(self.token_starts[-1])
        self.key = cache.digest(entries)
        self.store = cache.Store(cache.location(self.root, cache_dir, "pack", self.fingerprint))
        self._documents = None
        self.documents()  # written (and every .idx checked) when first opened
        self._maps: dict[int, np.ndarray] = {}
        self._ahead = np.arange(3) * max(1, 64 // self.dtype.itemsize)  # 3 cache lines
        self._arange = np.arange(0)

    def documents(self) -> cache.Artifact:
        """Each document's `lengths` and `starts` (see the class docstring)."""
        if self._documents is None:
            self._documents = self.store.get(f"documents.{self.key}", self._write_documents)
        return self._documents

    @property
    def lengths(self) -> np.ndarray:
        return self.documents()["lengths"]

    @property
    def starts(self) -> np.ndarray:
        return self.documents()["starts"]

    def _path(self, shard: int, ext: str) -> str:
        return storage.join(self.root, self.names[shard] + ext)

    def _read_manifest(self, given: str) -> bytes:
        path = storage.join(self.root, "manifest.json")
        allowed = "a complete pack-build output (its manifest.json says pipeline 'pack-build')"
        try:
            if self.is_url:
                raw = storage.read_bytes(path)
            else:
                with open(path, "rb") as handle:
                    raw = handle.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ReaderArgumentError(argument="out", value=f"{given} (no manifest.json)",
                                      allowed=allowed) from None
        pipeline = json.loads(raw).get("pipeline")
        if pipeline != PIPELINE:
            raise ReaderArgumentError(argument="out", value=f"{given} (a {pipeline!r} build)",
                                      allowed=allowed)
        return raw

    def _listing(self) -> list:
        """Each shard's (.idx, .bin) size and version (`cache.version`)."""
        if not self.is_url:
            return [[cache.version(os.stat(self._path(k, ext))) for ext in (".idx", ".bin")]
                    for k in range(len(self.names))]
        fs = storage.filesystem(self.root)
        fs.invalidate_cache(self.root)  # the build may be newer than this process's listing
        found = {posixpath.basename(e["name"].rstrip("/")): e
                 for e in fs.ls(self.root, detail=True)}
        out = []
        for k, name in enumerate(self.names):
            for ext in (".idx", ".bin"):
                if name + ext not in found:
                    raise FileNotFoundError(f"{self._path(k, ext)}: missing")
            out.append([cache.version(found[name + ext]) for ext in (".idx", ".bin")])
        return out

    # --- the documents, checked and written once -------------------------------------

    def _write_documents(self, folder: str) -> dict:
        """`lengths.npy` and `starts.npy` from every `.idx`, shard by shard and block by
        block: each shard's count and dtype against the manifest, its `.bin` size
        against its lengths, each pointer against the lengths before it."""
        item = self.dtype.itemsize
        total = sum(self._wanted)
        with cache.Writer(folder, "lengths", np.int32, total) as lengths, \
                cache.Writer(folder, "starts", np.int64, total + 1) as starts:
            token = 0
            for k, (dtype, count, read) in enumerate(self._indexes()):
                if count != self._wanted[k] or dtype != self.dtype.name:
                    raise ValueError(f"{self._path(k, '.idx')}: {count} {dtype} documents, "
                                     f"manifest.json says {self._wanted[k]} {self.dtype.name}")
                blocks = [(a, min(count, a + BLOCK_DOCS)) for a in range(0, count, BLOCK_DOCS)]
                whole = read(0, count) if len(blocks) == 1 else None
                want = (int(whole[0].sum(dtype=np.int64)) if whole is not None else
                        sum(int(read(a, b)[0].sum(dtype=np.int64)) for a, b in blocks)) * item
                size = int(self.byte_starts[k + 1] - self.byte_starts[k])
                if size != want:
                    raise ValueError(f"{self._path(k, '.bin')}: {size} bytes, its .idx needs {want}")
                at = 0  # bytes of the shard's documents before the block
                for a, b in blocks:
                    length, pointer = whole if whole is not None else read(a, b)
                    at = _check_pointers(self._path(k, ".idx"), length, pointer, item, a, at)
                    ends = np.cumsum(length, dtype=np.int64)
                    starts.append(token + ends - length)
                    lengths.append(length)
                    token += int(ends[-1]) if len(ends) else 0
            starts.append(np.array([token], dtype=np.int64))
        return {"documents": total, "tokens": token}

    def _indexes(self):
        """(dtype, count, read(a, b) -> documents a..b's lengths and pointers) per shard."""
        if not self.is_url:
            for k in range(len(self.names)):
                path = self._path(k, ".idx")
                with open(path, "rb") as handle:
                    head = handle.read(megatron.HEADER_BYTES)
                dtype, count, _ = _header(path, head, self._idx_sizes[k])
                yield dtype, count, _local_reader(path, count)
            return
        fs = storage.filesystem(self.root)
        paths = [self._path(k, ".idx") for k in range(len(self.names))]
        # a pack-build .idx has one document per sequence: its size gives the count, so
        # the header, lengths and pointers of every shard come in one request
        guess = [megatron.HEADER_BYTES + 12 * max(0, (s - megatron.HEADER_BYTES - 8) // 20)
                 for s in self._idx_sizes]
        if sum(guess) > CALL_BYTES:  # a large build: the headers first, then blocks
            guess = [megatron.HEADER_BYTES] * len(paths)
        blobs = _ranges(fs, paths, [0] * len(paths), guess, self._idx_sizes)
        for path, blob, size in zip(paths, blobs, self._idx_sizes):
            dtype, count, _ = _header(path, blob, size)
            yield dtype, count, _remote_reader(fs, path, count, blob)

    # --- tokens -----------------------------------------------------------------------

    def __getstate__(self):
        """Without the memory maps (pickling one would copy it): a copy maps again."""
        state = dict(self.__dict__)
        state["_maps"], state["_arange"], state["_documents"] = {}, np.arange(0), None
        return state

    def _map(self, shard: int) -> np.ndarray:
        mm = self._maps.get(shard)
        if mm is None:  # a plain ndarray over the map: np.memmap's indexing is slower
            mm = np.memmap(self._path(shard, ".bin"), dtype=self.dtype, mode="r").view(np.ndarray)
            self._maps[shard] = mm
        return mm

    def gather(self, starts: np.ndarray, sizes: np.ndarray, index: np.ndarray,
               raw: bool = False) -> np.ndarray:
        """Pieces of the address space, piece j `sizes[j]` tokens from token `starts[j]`,
        one after another as one int64 array (`raw`: the build's own dtype, for a caller
        that moves them before widening them once). `index` is each output token's
        address (what a local gather needs); a URL uses `starts` and `sizes` only."""
        wide = (lambda a: a) if raw else (lambda a: a.astype(np.int64))
        if not len(starts):
            return np.zeros(0, dtype=self.dtype if raw else np.int64)
        if self.is_url:
            return wide(self._fetch(starts, sizes))
        if len(self.names) == 1:
            return wide(self._take(self._map(0), index, starts))
        shard = np.searchsorted(self.token_starts, starts, side="right") - 1
        if (shard == shard[0]).all():
            k, at = int(shard[0]), self.token_starts[shard[0]]
            return wide(self._take(self._map(k), index - at, starts - at))
        # several shards: the pieces sorted by shard (however many shards, two index
        # arrays more), each shard's tokens gathered at once and written to their places
        by = np.argsort(shard, kind="stable")
        sizes_by = sizes[by]
        ends = np.cumsum(sizes_by)  # each sorted piece's end among the sorted tokens
        ahead = self._range(int(ends[-1]))
        local = starts[by] - self.token_starts[shard[by]] - (ends - sizes_by)
        source = np.repeat(local, sizes_by)  # each sorted token's place in its shard
        source += ahead
        place = np.repeat((np.cumsum(sizes) - sizes)[by] - (ends - sizes_by), sizes_by)
        place += ahead  # and in the output
        out = np.empty(len(place), dtype=self.dtype)  # (a scatter that casts is 3x slower)
        cut = np.searchsorted(shard[by], np.arange(len(self.names) + 1))  # shard k's pieces
        for k in np.unique(shard).tolist():
            lo, hi = cut[k], cut[k + 1]
            t0, t1 = int(ends[lo] - sizes_by[lo]), int(ends[hi - 1])
            first = starts[by[lo:hi]] - self.token_starts[k]
            out[place[t0:t1]] = self._take(self._map(k), source[t0:t1], first)
        return wide(out)

    def _range(self, n: int) -> np.ndarray:
        """`np.arange(n)`, a view of one kept for the longest n asked."""
        if len(self._arange) < n:
            self._arange = np.arange(n)
        return self._arange[:n]

    def _take(self, tokens: np.ndarray, index: np.ndarray, first: np.ndarray) -> np.ndarray:
        """`tokens[index]`, the first cache lines of every piece (from `first`) fetched
        before: a batch's few hundred pieces sit at random places of the .bin, and in
        the gather itself each piece's first lines are misses waited for in turn (the
        hardware prefetcher follows from the third on), where this short gather has
        them all in flight at once. A third off the gather's time."""
        np.take(tokens, (first[:, None] + self._ahead).ravel(), mode="clip")
        return np.take(tokens, index)  # (take: 10-15% faster than tokens[index])

    def _fetch(self, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        shard = np.searchsorted(self.token_starts, starts, side="right") - 1
        item = self.dtype.itemsize
        first = (starts - self.token_starts[shard]) * item
        paths = [self._path(k, ".bin") for k in shard.tolist()]
        blobs = _ranges(storage.filesystem(self.root), paths, first.tolist(),
                        (first + sizes * item).tolist())
        return np.frombuffer(b"".join(blobs), dtype=self.dtype)


def _check_pointers(path: str, lengths: np.ndarray, pointers: np.ndarray, item: int,
                    first: int = 0, at: int = 0) -> int:
    """A pack-build writes each shard's documents one after another: a pointer anywhere
    else (a corrupt .idx) would read other tokens silently, so it is refused here (a few
    ms a million documents). Documents `first...` of the shard, the first at byte `at`;
    returns the byte after the last."""
    expected = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=expected[1:])
    expected *= item
    expected += at
    bad = np.flatnonzero(pointers != expected)
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"{path}: document {first + i} starts at byte {int(pointers[i])}, "
                         f"its lengths put it at {int(expected[i])}")
    return at + int(lengths.sum(dtype=np.int64)) * item


def _local_reader(path: str, count: int):
    def read(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        with open(path, "rb") as handle:
            handle.seek(megatron.HEADER_BYTES + 4 * a)
            lengths = np.fromfile(handle, dtype="<i4", count=b - a)
            handle.seek(megatron.HEADER_BYTES + 4 * count + 8 * a)
            pointers = np.fromfile(handle, dtype="<i8", count=b - a)
        if len(pointers) != b - a:
            raise ValueError(f"{path}: shorter than its header says")
        return lengths, pointers

    return read


def _remote_reader(fs, path: str, count: int, blob: bytes):
    """Documents a..b's lengths and pointers: from `blob` when it holds them all (the
    one-request open), else by one `cat_ranges` call of two ranges."""
    at = megatron.HEADER_BYTES

    def read(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        if at + 12 * count <= len(blob):
            return (np.frombuffer(blob, "<i4", b - a, at + 4 * a),
                    np.frombuffer(blob, "<i8", b - a, at + 4 * count + 8 * a))
        got = _ranges(fs, [path, path], [at + 4 * a, at + 4 * count + 8 * a],
                      [at + 4 * b, at + 4 * count + 8 * b])
        return np.frombuffer(got[0], "<i4"), np.frombuffer(got[1], "<i8")

    return read


def _header(path: str, head: bytes, size: int) -> tuple[str, int, int]:
    try:
        return megatron.read_header(head, size)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _ranges(fs, paths: list, first: list, last: list, sizes: list | None = None) -> list:
    """Bytes [first, last) of each path in one request; OSError naming a range the store
    did not give whole (a file shorter than `sizes` says is read to its end only)."""
    if sizes is not None:
        last = [min(b, s) for b, s in zip(last, sizes)]
    blobs = fs.cat_ranges(paths, first, last)
    for blob, path, a, b in zip(blobs, paths, first, last):
        if isinstance(blob, Exception) or len(blob) != b - a:
            raise OSError(f"{path}: could not read bytes {a}..{b}: {blob!r:.200}")
    return blobs
