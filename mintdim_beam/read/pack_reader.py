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
(tests_interop/test_pack_reader_megatron.py checks it). The plan is the document order
(4 bytes a document), each shuffled document's start in the stream and its address
(8 + 8: a sample's documents are a run of the order, so a batch reads a few runs, not
a page per document), the sample order and Megatron's sample index (each sample's first
document; 4 + 4 bytes a sample),
as megatron-core's document, sample and shuffle indices: made from (seed, epoch) once
per (seed, epoch, seq_len) into the reader's cache (`read.cache`) and memory-mapped by
every reader after, so a rank holds the pages its batches touch, and resuming opens
files, nothing is replayed. A batch is then a few hundred document pieces, one index of
their addresses, one gather.

Ranks: step k is global samples `[k*G, (k+1)*G)` of the epoch's order, G = batch_size *
world_size, rank r taking `[k*G + r*batch_size, ...)`: the same global sequence for any
world size, every rank the same number of steps (the last `samples % G` are left out).

Reading (`pack_store`): of each shard's `.idx` only the lengths and pointers (for a URL
every shard's in one request); a batch's document pieces are addresses and sizes,
gathered from the `.bin` memory-mapped locally (one index, one gather, as a bare gather
of as many windows), or for a URL (gs://, s3://, any fsspec filesystem) by byte
ranges, one `cat_ranges` call per batch."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mintdim_beam.core.errors import ReaderArgumentError, ReaderStateError
from mintdim_beam.read import cache, checks
from mintdim_beam.read.pack_store import PackStore

STATE_VERSION = 1
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
    index); `step`, `epoch`. `labels`: `tokens[:, 1:]` (`label_shift` "shifted",
    Megatron's, the default) or `input_ids` itself ("aligned", Hugging Face's: the
    model shifts; the sample's extra last token, the next one's first, is then unused)."""

    tokens: np.ndarray
    sample_ids: np.ndarray
    step: int
    epoch: int
    # each sample's count of document pieces, and each piece's size (row after row)
    _pieces: tuple = field(default=(), repr=False)
    # "shifted" (Megatron's): labels are the next tokens; "aligned" (Hugging Face's):
    # labels are `input_ids` themselves, the model shifts inside
    label_shift: str = "shifted"

    @cached_property
    def document_ids(self) -> np.ndarray:
        """Made on first use (a training loop that only wants ids pays nothing)."""
        counts, sizes = self._pieces
        piece = np.arange(len(sizes)) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(piece, sizes).reshape(self.tokens.shape)

    @cached_property
    def position_ids(self) -> np.ndarray:
        _, sizes = self._pieces
        width = self.tokens.shape[1]
        column = (np.cumsum(sizes) - sizes) % width  # each piece's first column
        return np.arange(width)[None, :] - np.repeat(column, sizes).reshape(self.tokens.shape)

    @property
    def input_ids(self) -> np.ndarray:
        return self.tokens[:, :-1]

    @property
    def labels(self) -> np.ndarray:
        return self.tokens[:, 1:] if self.label_shift == "shifted" else self.tokens[:, :-1]


class PackReader:
    """Samples of `seq_len + 1` tokens from a pack-build output `out` (a directory or a
    URL), Megatron's `GPTDataset` cut in a seeded order, this rank's `batch_size` a step.

    Iterating yields `PackBatch`es from the current position to the epoch's end;
    `state_dict()` / `load_state_dict()` resume exactly (also on another world size
    whose global batch divides the position); `set_epoch(e)` starts epoch e."""

    def __init__(self, out, seq_len: int, *, seed: int = 0, rank: int = 0,
                 world_size: int = 1, batch_size: int = 1, cache_dir: str | None = None,
                 labels: str = "shifted"):
        from mintdim_beam.read import masks

        if labels not in masks.LABELS:
            raise ReaderArgumentError(argument="labels", value=checks.shown(labels),
                                      allowed=masks.LABELS_WHY[0], allowed_vi=masks.LABELS_WHY[1])
        self.labels = labels
        self.world_size = checks.argument("world_size", world_size, 1, 1 << 20)
        self.rank = checks.argument("rank", rank, 0, self.world_size - 1,
                                    ("below world_size", "nhỏ hơn world_size"))
        self.seed = checks.argument("seed", seed, 0, _SEED_MAX,
                                    ("numpy.random.RandomState's range, as Megatron's random_seed",
                                     "phạm vi của numpy.random.RandomState"))
        self.batch_size = checks.argument("batch_size", batch_size, 1, 1 << 24)
        checks.argument("seq_len", seq_len, 1, None)
        self.build = PackStore(out, cache_dir)
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
        self._arange = np.arange(0)

    # --- the plan ---------------------------------------------------------------------

    def _plan(self):
        """(each document of the order's first token in the shards' address space, its
        first token in the stream and the stream's end, sample order, each stream
        sample's first document in that order and the next sample's) of the current
        epoch, from the cache (made there once)."""
        if self._plan_epoch is None or self._plan_epoch[0] != self.epoch:
            made = self.build.store.get(
                f"plan.{self.build.key}.s{self.seed}.q{self.seq_len}.e{self.epoch}",
                self._write_plan)
            self._plan_epoch = (self.epoch, made["address"], made["stream"], made["shuffle"],
                                made["holder"])
        return self._plan_epoch[1:]

    def _write_plan(self, folder: str) -> None:
        """The epoch's plan into a cache folder, as Megatron makes it: one random state
        shuffles the documents (`arange` as int32), then the samples (uint32 below
        2**32 - 1 of them); the stream's starts and the sample index a chunk at a time
        (`cache.CHUNK` documents), so the writer holds a chunk, not the epoch."""
        lengths = self.build.lengths
        docs = len(lengths)
        rs = np.random.RandomState(self.seed if self.epoch == 0 else [self.seed, self.epoch])
        cache.shuffled(folder, "order", docs, rs, np.int32)
        order = np.load(f"{folder}/order.npy", mmap_mode="r")
        with cache.Writer(folder, "stream", np.int64, docs + 1) as out, \
                cache.Writer(folder, "address", np.int64, docs) as address:
            out.append(np.zeros(1, np.int64))
            carry = 0
            for _, piece in cache.chunks(order):
                ends = np.cumsum(lengths[piece], dtype=np.int64)
                ends += carry
                out.append(ends)
                carry = int(ends[-1])
                address.append(self.build.starts[piece])
        del order
        dtype = np.uint32 if self.samples < np.iinfo(np.uint32).max - 1 else np.int64
        cache.shuffled(folder, "shuffle", self.samples, rs, dtype)
        # Megatron's sample index: the document holding each sample's first token (a
        # sample's last token is the next one's first): within each chunk of documents,
        # the samples that start in it, by one sorted search of its starts
        stream = np.load(f"{folder}/stream.npy", mmap_mode="r")
        with cache.Writer(folder, "holder", np.int32 if docs < 1 << 31 else np.int64,
                          self.samples + 1) as out:
            for lo in range(0, docs, cache.CHUNK):
                starts = np.asarray(stream[lo:lo + cache.CHUNK + 1])
                first = -(-int(starts[0]) // self.seq_len)
                end = min(self.samples + 1, -(-int(starts[-1]) // self.seq_len))
                if first < end:
                    at = np.arange(first, end, dtype=np.int64) * self.seq_len
                    out.put(first, lo + np.searchsorted(starts, at, side="right") - 1)
        del stream
        self.build.documents().release()  # what gathering lengths and starts touched

    def __getstate__(self):
        """Without the plan (tens of MB for millions of documents): a DataLoader worker
        makes it again on its first batch."""
        state = dict(self.__dict__)
        state["_plan_epoch"], state["_arange"] = None, np.arange(0)
        return state

    def sample_order(self) -> np.ndarray:
        """The epoch's samples (their index in the stream) in reading order."""
        return self._plan()[2]

    def samples_at(self, sample_ids, raw: bool = False) -> tuple[np.ndarray, tuple]:
        """The tokens [len(sample_ids), seq_len + 1] of the epoch's stream samples
        `sample_ids` (int64; `raw`: the build's dtype), and their document pieces (each
        sample's count, each piece's size) from which a PackBatch makes document_ids
        and position_ids."""
        sample_ids = np.asarray(sample_ids, dtype=np.int64).reshape(-1)
        if len(sample_ids) and (sample_ids.min() < 0 or sample_ids.max() >= self.samples):
            raise ReaderArgumentError(
                argument="sample_ids", value=checks.shown(sample_ids.tolist()),
                allowed=f"ints in 0..{self.samples - 1}, the epoch's samples")
        return self._samples_at(sample_ids, raw)

    def _samples_at(self, sample_ids: np.ndarray, raw: bool = False) -> tuple[np.ndarray, tuple]:
        address, starts, _, holder = self._plan()
        rows, width = len(sample_ids), self.seq_len + 1
        lo = sample_ids * self.seq_len  # each sample's first token in the stream
        first = holder[sample_ids]  # the document holding it (its place in the order)
        counts = holder[sample_ids + 1] - first + 1  # the next sample's first is its last
        ends = np.cumsum(counts)
        row_first = ends - counts  # each sample's first piece
        d = np.repeat(first - row_first, counts)
        d += self._range(int(ends[-1]))  # each piece's document, its place in the order
        shift = address[d] - starts[d]  # stream position + shift = address, within a document
        a = starts[d]  # each piece's document's first token in the stream, then its own
        a[row_first] = lo
        sizes = starts[d + 1]
        sizes[ends - 1] = lo + width
        sizes -= a
        start = shift + a  # each piece's address
        index = None
        if not self.build.is_url:  # output token t of piece j is at address t + shift[j]
            shift += np.repeat(lo - self._range(rows) * width, counts)  # sample r at r * width
            index = np.repeat(shift, sizes)
            index += self._range(rows * width)
        tokens = self.build.gather(start, sizes, index, raw)
        return tokens.reshape(rows, width), (counts, sizes)

    def _range(self, n: int) -> np.ndarray:
        """`np.arange(n)`, a view of one kept for the longest n asked."""
        if len(self._arange) < n:
            self._arange = np.arange(n)
        return self._arange[:n]

    # --- steps ------------------------------------------------------------------------

    def batch_at(self, step: int) -> PackBatch:
        """This rank's batch of `step` of the current epoch (a pure function of seed,
        epoch, step and the build)."""
        step = checks.argument("step", step, 0, self.steps - 1, ("a step of the epoch",
                                                                 "một bước của epoch"))
        at = step * self.global_batch + self.rank * self.batch_size
        ids = self.sample_order()[at:at + self.batch_size].astype(np.int64)
        tokens, pieces = self._samples_at(ids)
        return PackBatch(tokens, ids, step, self.epoch, pieces, self.labels)

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

    @property
    def step(self) -> int:
        """The next step of the epoch."""
        return self.position // self.global_batch

    def state_at(self, step: int) -> dict:
        """The state that resumes this epoch at `step` (0 to the epoch's steps)."""
        step = checks.argument("step", step, 0, self.steps, ("a step of the epoch, or its end",
                                                              "một bước của epoch"))
        return {**self.state_dict(), "position": step * self.global_batch}

    # --- state ------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """A few numbers: where the global sequence is, and what made it."""
        state = {"version": STATE_VERSION, "reader": "pack", "fingerprint": self.build.fingerprint,
                 "seq_len": self.seq_len, "seed": self.seed, "epoch": self.epoch,
                 "position": self.position}
        if self.labels != "shifted":
            state["labels"] = self.labels
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue where `state` was saved; refused (the reader unchanged) if it was
        saved on another build, seq_len or seed, or holds a position no step ends at."""
        if not isinstance(state, dict):
            raise ReaderStateError(key="state", found=checks.shown(state),
                                   allowed="a dict from PackReader.state_dict()")
        if state.get("labels", "shifted") != self.labels:
            raise ReaderStateError(key="labels", found=checks.shown(state.get("labels", "shifted")),
                                   expected=checks.shown(self.labels))
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
