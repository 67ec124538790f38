"""`PackReader`: fixed-length training samples from a pack-build output (Megatron's
indexed dataset), cut across document boundaries as megatron-core's `GPTDataset` cuts
them, numpy only.

The build's documents, every shard in name order, are one list. An epoch is planned
the way `GPTDataset` plans its one epoch (its behaviour, not its code):
- a `numpy.random.RandomState` (epoch 0: `RandomState(seed)`, Megatron's own seeding;
  epoch e >= 1: `RandomState([seed, e])`) shuffles the documents (`arange(D)` as
  int32, the document index);
- the shuffled documents are one stream of T tokens, and sample i is the stream's
  tokens `[i*seq_len, i*seq_len + seq_len + 1)` (the sample index: consecutive samples
  share one token, Megatron's `add_extra_token_to_sequence`), for i in
  `0 .. (T - 1) // seq_len - 1` (the partial last sample is dropped);
- the same random state then shuffles `arange(samples)` (uint32 below 2**32 - 1
  samples): the shuffle index, the order samples are read in.
So epoch 0's sample j is `GPTDataset(seed)[j]`'s `seq_len + 1` ids exactly
(tests_interop/test_pack_reader_megatron.py checks it). The plan is a document order
(4 bytes a document), the stream's document ends (8) and the sample order (4 a sample),
made again from (seed, epoch) on every reader: resuming computes, nothing is replayed.

Ranks: step k is global samples `[k*G, (k+1)*G)` of the epoch's order, G = batch_size *
world_size, rank r taking `[k*G + r*batch_size, ...)`: the same global sequence for any
world size, every rank the same number of steps (the last `samples % G` are left out).

Reading: each shard's `.idx` is read whole when the reader is made (its lengths and
pointers); tokens come from the `.bin` memory-mapped locally, or for a URL (gs://,
s3://, any fsspec filesystem) by byte ranges, one `cat_ranges` call per batch."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mintdim_beam.core.errors import ReaderArgumentError, ReaderStateError
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats.megatron import read_idx
from mintdim_beam.read import checks

STATE_VERSION = 1
_PIPELINE = "pack-build"
_SEED_MAX = (1 << 32) - 1  # numpy.random.RandomState's seed range


@dataclass
class PackBatch:
    """This rank's samples of one step, each `seq_len + 1` ids of the stream.

    `tokens` [rows, seq_len + 1] int64; `input_ids` / `labels` are its first and last
    `seq_len` columns (Megatron's `tokens` / `labels`). `document_ids` (the document's
    index within its sample, from 0) and `position_ids` (0 at each document's first
    token in the sample, and at the sample's first token) are aligned with `tokens`: a
    document's EOD is its last token, so the next id starts the next document. For
    document-masked attention over `input_ids` take `[:, :-1]` of both; both are made
    on first use.
    `sample_ids` [rows]: each sample's index in the epoch's stream (Megatron's sample
    index); `step`, `epoch`."""

    tokens: np.ndarray
    sample_ids: np.ndarray
    step: int
    epoch: int
    # each document piece's index in its sample, its size, its first column
    _pieces: tuple = field(default=(), repr=False)

    @cached_property
    def document_ids(self) -> np.ndarray:
        """Made on first use (a training loop that only wants ids pays nothing)."""
        piece, sizes, _ = self._pieces
        return np.repeat(piece, sizes).reshape(self.tokens.shape)

    @cached_property
    def position_ids(self) -> np.ndarray:
        _, sizes, first = self._pieces
        return np.arange(self.tokens.shape[1])[None, :] - np.repeat(first, sizes).reshape(
            self.tokens.shape)

    @property
    def input_ids(self) -> np.ndarray:
        return self.tokens[:, :-1]

    @property
    def labels(self) -> np.ndarray:
        return self.tokens[:, 1:]


class _PackBuild:
    """A pack-build output: every shard's lengths and pointers, documents numbered
    across shards in shard-name order."""

    def __init__(self, path: str):
        self.root = storage.resolve(str(path)).rstrip("/")
        manifest_path = storage.join(self.root, "manifest.json")
        allowed = "a complete pack-build output (its manifest.json says pipeline 'pack-build')"
        try:
            if storage.is_url(manifest_path):
                raw = storage.read_bytes(manifest_path)
            else:
                with open(manifest_path, "rb") as handle:
                    raw = handle.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ReaderArgumentError(argument="out", value=f"{path} (no manifest.json)",
                                      allowed=allowed) from None
        manifest = json.loads(raw)
        if manifest.get("pipeline") != _PIPELINE:
            raise ReaderArgumentError(
                argument="out", value=f"{path} (a {manifest.get('pipeline')!r} build)",
                allowed=allowed)
        self.fingerprint = hashlib.sha256(raw).hexdigest()
        self.dtype = np.dtype(manifest["dtype"])
        self.eod = int(manifest["eod"]["id"])
        self.names = [s["name"] for s in manifest["shards"]]
        lengths, pointers, shard_of = [], [], []
        for k, shard in enumerate(manifest["shards"]):
            index = read_idx(storage.read_bytes(self._path(k, ".idx")))
            if len(index.lengths) != int(shard["documents"]) or index.dtype != self.dtype.name:
                raise ValueError(f"{self._path(k, '.idx')}: {len(index.lengths)} {index.dtype} "
                                 f"documents, manifest.json says {shard['documents']} "
                                 f"{self.dtype.name}")
            want = int(index.lengths.sum(dtype=np.int64)) * self.dtype.itemsize
            got = storage.size(self._path(k, ".bin"))
            if got != want:
                raise ValueError(f"{self._path(k, '.bin')}: {got} bytes, its .idx needs {want}")
            lengths.append(index.lengths.astype(np.int64))
            pointers.append(index.pointers.astype(np.int64))
            shard_of.append(np.full(len(index.lengths), k, dtype=np.int32))
        self.lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        self.pointers = np.concatenate(pointers) if pointers else np.zeros(0, np.int64)
        self.shard_of = np.concatenate(shard_of) if shard_of else np.zeros(0, np.int32)
        self.tokens = int(self.lengths.sum())
        self._maps: dict[int, np.ndarray] = {}

    def _path(self, shard: int, ext: str) -> str:
        return storage.join(self.root, self.names[shard] + ext)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_maps"] = {}
        return state

    def _map(self, shard: int) -> np.ndarray:
        mm = self._maps.get(shard)
        if mm is None:  # a plain ndarray over the map: np.memmap's indexing is slower
            mm = np.memmap(self._path(shard, ".bin"), dtype=self.dtype, mode="r").view(np.ndarray)
            self._maps[shard] = mm
        return mm

    def read(self, docs: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Tokens `[starts, ends)` of each document `docs`, one after another, as one
        int64 array: locally one fancy-index gather per shard touched."""
        item = self.dtype.itemsize
        if not storage.is_url(self.root):
            sizes = ends - starts
            total = int(sizes.sum())
            into = np.cumsum(sizes) - sizes  # each piece's place in the output
            shards = self.shard_of[docs]
            src = np.repeat(self.pointers[docs] // item + starts - into, sizes) + np.arange(total)
            if (shards == shards[0]).all():
                return self._map(int(shards[0]))[src].astype(np.int64)
            out = np.empty(total, dtype=np.int64)
            token_shard = np.repeat(shards, sizes)
            for k in np.unique(shards).tolist():
                picked = token_shard == k
                out[picked] = self._map(k)[src[picked]]
            return out
        paths = [self._path(int(self.shard_of[d]), ".bin") for d in docs.tolist()]
        first = self.pointers[docs] + starts * item
        last = self.pointers[docs] + ends * item
        blobs = storage.filesystem(self.root).cat_ranges(paths, first.tolist(), last.tolist())
        out = []
        for blob, path, a, b in zip(blobs, paths, first.tolist(), last.tolist()):
            if isinstance(blob, Exception) or len(blob) != b - a:
                raise OSError(f"{path}: could not read bytes {a}..{b}: {blob!r:.200}")
            out.append(np.frombuffer(blob, dtype=self.dtype))
        return np.concatenate(out).astype(np.int64)


class PackReader:
    """Samples of `seq_len + 1` tokens from a pack-build output `out` (a directory or a
    URL), Megatron's `GPTDataset` cut in a seeded order, this rank's `batch_size` a step.

    Iterating yields `PackBatch`es from the current position to the epoch's end;
    `state_dict()` / `load_state_dict()` resume exactly (also on another world size
    whose global batch divides the position); `set_epoch(e)` starts epoch e."""

    def __init__(self, out, seq_len: int, *, seed: int = 0, rank: int = 0,
                 world_size: int = 1, batch_size: int = 1):
        self.world_size = checks.argument("world_size", world_size, 1, 1 << 20)
        self.rank = checks.argument("rank", rank, 0, self.world_size - 1,
                                    ("below world_size", "nhỏ hơn world_size"))
        self.seed = checks.argument("seed", seed, 0, _SEED_MAX,
                                    ("numpy.random.RandomState's range, as Megatron's random_seed",
                                     "phạm vi của numpy.random.RandomState"))
        self.batch_size = checks.argument("batch_size", batch_size, 1, 1 << 24)
        checks.argument("seq_len", seq_len, 1, None)
        self.build = _PackBuild(out)
        self.seq_len = int(seq_len)
        self.samples = (self.build.tokens - 1) // self.seq_len if self.build.tokens else 0
        self.global_batch = self.batch_size * self.world_size
        if self.samples < self.global_batch:
            hi = max(1, self.build.tokens - 1) if self.samples == 0 else self.seq_len
            raise ReaderArgumentError(
                argument="seq_len" if self.samples == 0 else "batch_size",
                value=f"{seq_len if self.samples == 0 else batch_size} ({self.samples} samples of "
                      f"{self.seq_len + 1} tokens in the build's {self.build.tokens} tokens, "
                      f"{self.global_batch} needed a step)",
                allowed=(f"an int in 1..{hi}: one sample of seq_len + 1 tokens needs "
                         f"seq_len + 1 tokens of the stream" if self.samples == 0 else
                         f"batch_size * world_size at most {self.samples}, the epoch's samples"))
        self.steps = self.samples // self.global_batch
        self.epoch = 0
        self.position = 0  # global samples of this epoch already handed out
        self._plan_epoch = None

    # --- the plan ---------------------------------------------------------------------

    def _plan(self):
        if self._plan_epoch is None or self._plan_epoch[0] != self.epoch:
            rs = np.random.RandomState(self.seed if self.epoch == 0 else [self.seed, self.epoch])
            order = np.arange(len(self.build.lengths), dtype=np.int32)
            rs.shuffle(order)
            ends = np.cumsum(self.build.lengths[order])
            dtype = np.uint32 if self.samples < np.iinfo(np.uint32).max - 1 else np.int64
            shuffle = np.arange(self.samples, dtype=dtype)
            rs.shuffle(shuffle)
            self._plan_epoch = (self.epoch, order, ends, shuffle)
        return self._plan_epoch[1:]

    def sample_order(self) -> np.ndarray:
        """The epoch's samples (their index in the stream) in reading order."""
        return self._plan()[2]

    def samples_at(self, sample_ids) -> tuple[np.ndarray, tuple]:
        """The tokens [len(sample_ids), seq_len + 1] of the epoch's stream samples
        `sample_ids`, and their document pieces (index in the sample, size, first
        column) from which a PackBatch makes document_ids and position_ids."""
        order, ends, _ = self._plan()
        sample_ids = np.asarray(sample_ids, dtype=np.int64)
        width = self.seq_len + 1
        lo = sample_ids * self.seq_len
        first = np.searchsorted(ends, lo, side="right")
        last = np.searchsorted(ends, lo + self.seq_len, side="right")
        counts = last - first + 1
        row = np.repeat(np.arange(len(sample_ids)), counts)
        piece = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        d = first[row] + piece
        doc = order[d].astype(np.int64)
        doc_start = ends[d] - self.build.lengths[doc]
        a = np.maximum(lo[row], doc_start)
        b = np.minimum(lo[row] + width, ends[d])
        tokens = self.build.read(doc, a - doc_start, b - doc_start).reshape(len(sample_ids), width)
        return tokens, (piece, b - a, a - lo[row])

    # --- steps ------------------------------------------------------------------------

    def batch_at(self, step: int) -> PackBatch:
        """This rank's batch of `step` of the current epoch (a pure function of seed,
        epoch, step and the build)."""
        step = checks.argument("step", step, 0, self.steps - 1, ("a step of the epoch",
                                                                 "một bước của epoch"))
        at = step * self.global_batch + self.rank * self.batch_size
        ids = self.sample_order()[at:at + self.batch_size].astype(np.int64)
        tokens, pieces = self.samples_at(ids)
        return PackBatch(tokens, ids, step, self.epoch, pieces)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        while self.position < self.steps * self.global_batch:
            batch = self.batch_at(self.position // self.global_batch)
            self.position += self.global_batch
            yield batch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = checks.argument("epoch", epoch, 0, None)
        self.position = 0

    # --- state ------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """A few numbers: where the global sequence is, and what made it."""
        return {"version": STATE_VERSION, "reader": "pack", "fingerprint": self.build.fingerprint,
                "seq_len": self.seq_len, "seed": self.seed, "epoch": self.epoch,
                "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        """Continue where `state` was saved; refused (the reader unchanged) if it was
        saved on another build, seq_len or seed, or holds a position no step ends at."""
        if not isinstance(state, dict):
            raise ReaderStateError(key="state", found=checks.shown(state),
                                   allowed="a dict from PackReader.state_dict()")
        for key, mine in (("reader", "pack"), ("version", STATE_VERSION),
                          ("fingerprint", self.build.fingerprint), ("seq_len", self.seq_len),
                          ("seed", self.seed)):
            if state.get(key, "missing") != mine or isinstance(state.get(key), bool):
                raise ReaderStateError(key=key, found=checks.shown(state.get(key, "missing")),
                                       expected=checks.shown(mine))
        epoch = checks.state_value("epoch", state, 0, None)
        total = self.steps * self.global_batch
        position = checks.state_value("position", state, 0, None)
        if position > total and position <= self.samples:
            position = total  # saved with a global batch whose last step went further
        position = checks.state_value("position", {"position": position}, 0, total,
                                      ("global samples read, at most the epoch's",
                                       "số mẫu đã đọc"))
        if position % self.global_batch and position != total:
            raise ReaderStateError(
                key="position", found=str(position),
                allowed=f"a multiple of batch_size * world_size = {self.global_batch} "
                        "(the state's step is not a step of this reader)")
        self.epoch, self.position = epoch, position
