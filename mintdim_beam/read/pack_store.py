"""A pack-build output's files for `PackReader`: the manifest, each shard's `.idx`
lengths and pointers, and the `.bin` tokens of document pieces.

Opening reads only what a reader needs, since it is paid on every start and resume:
locally each `.idx`'s lengths and pointers (two reads; the document index after them,
40% of the file, is never read) and each size (one stat); for a URL one listing (every
size) and one `cat_ranges` call for every shard's header, lengths and pointers.

The shards' `.bin` files are one address space (shard k's tokens after shard k-1's),
so a piece of a document is an address and a size whatever its shard. Tokens: locally
one index and one gather from the memory-mapped `.bin` (with several shards touched,
the pieces sorted by shard and one gather each), for a URL one `cat_ranges` call per
batch. fsspec and hashlib are imported only when needed."""
from __future__ import annotations

import json
import os
import posixpath

import numpy as np

from mintdim_beam.core.errors import ReaderArgumentError
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import megatron

PIPELINE = "pack-build"


class PackStore:
    """A pack-build output: documents numbered across shards in shard-name order, each
    with its length (`lengths`, int32) and its first byte in the shards' address space
    (`pointers`, int64)."""

    def __init__(self, path):
        self.root = storage.resolve(str(path)).rstrip("/")
        self.is_url = storage.is_url(self.root)
        self._manifest = self._read_manifest(str(path))
        manifest = json.loads(self._manifest)
        self.dtype = np.dtype(manifest["dtype"])
        self.eod = int(manifest["eod"]["id"])
        self.names = [s["name"] for s in manifest["shards"]]
        wanted = [int(s["documents"]) for s in manifest["shards"]]
        opened = self._open_remote() if self.is_url else self._open_local()
        lengths, pointers, bin_bytes = [], [], []
        for k, (dtype, length, pointer, size) in enumerate(opened):
            if len(length) != wanted[k] or dtype != self.dtype.name:
                raise ValueError(f"{self._path(k, '.idx')}: {len(length)} {dtype} documents, "
                                 f"manifest.json says {wanted[k]} {self.dtype.name}")
            want = int(length.sum(dtype=np.int64)) * self.dtype.itemsize
            if size != want:
                raise ValueError(f"{self._path(k, '.bin')}: {size} bytes, its .idx needs {want}")
            _check_pointers(self._path(k, ".idx"), length, pointer, self.dtype.itemsize)
            lengths.append(length)
            pointers.append(pointer)
            bin_bytes.append(size)
        # shard k's first byte and first token in the address space; one past the end last
        self.byte_starts = np.zeros(len(self.names) + 1, dtype=np.int64)
        np.cumsum(bin_bytes, out=self.byte_starts[1:])
        self.token_starts = self.byte_starts // self.dtype.itemsize
        self.tokens = int(self.token_starts[-1])
        if len(lengths) == 1:
            self.lengths, self.pointers = lengths[0], pointers[0]
        else:
            self.lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
            self.pointers = (np.concatenate([p + s for p, s in zip(pointers, self.byte_starts)])
                             if pointers else np.zeros(0, np.int64))
        self._maps: dict[int, np.ndarray] = {}
        self._ahead = np.arange(3) * max(1, 64 // self.dtype.itemsize)  # 3 cache lines
        self._arange = np.arange(0)
        self._fingerprint = None

    @property
    def fingerprint(self) -> str:
        """The manifest's sha256: what a state was saved on (hashlib on first use)."""
        if self._fingerprint is None:
            import hashlib

            self._fingerprint = hashlib.sha256(self._manifest).hexdigest()
        return self._fingerprint

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

    # --- opening: (dtype, lengths, pointers, .bin size) per shard ---------------------

    def _open_local(self) -> list:
        opened = []
        for k in range(len(self.names)):
            path = self._path(k, ".idx")
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                dtype, count, _ = _header(path, handle.read(megatron.HEADER_BYTES), size)
                # read, not mapped: the plan gathers every length and a batch a few
                # hundred pointers at random, 2-3x slower through a map's small pages
                lengths = np.fromfile(handle, dtype="<i4", count=count)
                pointers = np.fromfile(handle, dtype="<i8", count=count)
            if len(pointers) != count:
                raise ValueError(f"{path}: shorter than its header says")
            opened.append((dtype, lengths, pointers, os.stat(self._path(k, ".bin")).st_size))
        return opened

    def _open_remote(self) -> list:
        fs = storage.filesystem(self.root)
        fs.invalidate_cache(self.root)  # the build may be newer than this process's listing
        sizes = {posixpath.basename(e["name"].rstrip("/")): int(e["size"])
                 for e in fs.ls(self.root, detail=True)}
        for k, name in enumerate(self.names):
            for ext in (".idx", ".bin"):
                if name + ext not in sizes:
                    raise FileNotFoundError(f"{self._path(k, ext)}: missing")
        paths = [self._path(k, ".idx") for k in range(len(self.names))]
        idx_sizes = [sizes[n + ".idx"] for n in self.names]
        # a pack-build .idx has one document per sequence: its size gives the count, so
        # the header, lengths and pointers of every shard come in one request
        guess = [max(0, (s - megatron.HEADER_BYTES - 8) // 20) for s in idx_sizes]
        blobs = _ranges(fs, paths, [0] * len(paths),
                        [megatron.HEADER_BYTES + 12 * c for c in guess], idx_sizes)
        opened = []
        for k, (path, blob, size) in enumerate(zip(paths, blobs, idx_sizes)):
            dtype, count, _ = _header(path, blob, size)
            if megatron.HEADER_BYTES + 12 * count > len(blob):  # not one document a sequence
                blob = _ranges(fs, [path], [0], [megatron.HEADER_BYTES + 12 * count], [size])[0]
            at = megatron.HEADER_BYTES
            opened.append((dtype, np.frombuffer(blob, "<i4", count, at),
                           np.frombuffer(blob, "<i8", count, at + 4 * count),
                           sizes[self.names[k] + ".bin"]))
        return opened

    # --- tokens -----------------------------------------------------------------------

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_maps"], state["_arange"] = {}, np.arange(0)
        return state

    def _map(self, shard: int) -> np.ndarray:
        mm = self._maps.get(shard)
        if mm is None:  # a plain ndarray over the map: np.memmap's indexing is slower
            mm = np.memmap(self._path(shard, ".bin"), dtype=self.dtype, mode="r").view(np.ndarray)
            self._maps[shard] = mm
        return mm

    def gather(self, starts: np.ndarray, sizes: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Pieces of the address space, piece j `sizes[j]` tokens from token `starts[j]`,
        one after another as one int64 array. `index` is each output token's address
        (what a local gather needs); a URL uses `starts` and `sizes` only."""
        if not len(starts):
            return np.zeros(0, dtype=np.int64)
        if self.is_url:
            return self._fetch(starts, sizes)
        if len(self.names) == 1:
            return self._take(self._map(0), index, starts).astype(np.int64)
        shard = np.searchsorted(self.token_starts, starts, side="right") - 1
        if (shard == shard[0]).all():
            k, at = int(shard[0]), self.token_starts[shard[0]]
            return self._take(self._map(k), index - at, starts - at).astype(np.int64)
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
        return out.astype(np.int64)

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
        return np.frombuffer(b"".join(blobs), dtype=self.dtype).astype(np.int64)


def _check_pointers(path: str, lengths: np.ndarray, pointers: np.ndarray, item: int) -> None:
    """A pack-build writes each shard's documents one after another: a pointer anywhere
    else (a corrupt .idx) would read other tokens silently, so it is refused here (a few
    ms a million documents)."""
    expected = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=expected[1:])
    expected *= item
    bad = np.flatnonzero(pointers != expected)
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"{path}: document {i} starts at byte {int(pointers[i])}, its lengths "
                         f"put it at {int(expected[i])}")


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
