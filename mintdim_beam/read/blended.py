"""Blended readers: several builds read as one, each in a share of the steps' items set
by weights (`blend`: megatron-core's error-minimizing choice per item).

`BlendedPackReader(builds, weights, seq_len, ...)`: pack-builds, sample by sample. Item
i of a blend epoch is source d's item j (`blend.indices`): the j-th sample of that
source's own `PackReader` order, so for a blend whose sources stay within their first
epoch it is megatron-core's `BlendedDataset` over `GPTDataset`s with the same seed,
sample for sample (tests_interop). `batch.dataset_ids` names each row's source.

`BlendedUnitReader(builds, weights, tokens_per_step=..., pack_length=L, ...)`:
unit-builds. Packed, the items are packed rows: each build packs its own records into
rows of L tokens (the `UnitReader`'s best-fit plan for its seed and epoch), and every
step takes its rows from the builds by the blend's rule, row by row, so one step mixes
the builds in their proportions. Unpacked, the items are steps (a step is one unit's
rows of one build: shapes differ between builds, so rows cannot mix).

Source epochs: blend epoch e reads each source's epoch e; under `exhausted="repeat"` a
source that runs out goes on with its later epochs (e * span + k, `span` the source
epochs one blend epoch can reach), so epochs never share a source epoch. Every step is
a pure function of (seed, epoch, step): the global sequence is the same for every world
size, and the state (a few hundred bytes: the builds' fingerprints, the weights, where
the epoch is) resumes exactly on any world size whose global batch divides it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mintdim_beam.core.errors import ReaderArgumentError, ReaderStateError
from mintdim_beam.read import blend, cache, checks
from mintdim_beam.read.batch import Batch
from mintdim_beam.read.pack_reader import PackBatch, PackReader

STATE_VERSION = 1


class _Blend:
    """The blend's order of one kind of item, in the first source's reader cache."""

    def __init__(self, store, key: dict, weights, available, size, exhausted):
        self.weights, self.available, self.exhausted = weights, list(available), exhausted
        if size is None:
            size = blend.full_size(weights, available)
        self.asked = checks.argument("size", size, 1, None)
        made = store.get(f"blend.{cache.digest(key | {'size': self.asked})}",
                         lambda folder: self._write(folder))
        self.source, self.taken = made["source"], made["taken"]
        self.items = len(self.source)
        counts = np.bincount(np.asarray(self.source, dtype=np.int64), minlength=len(weights))
        # source epochs one blend epoch reaches (repeat: a source may run past its own)
        self.span = [max(1, -(-int(c) // a)) if a else 1 for c, a in zip(counts, available)]

    def _write(self, folder: str) -> None:
        source, taken = blend.indices(self.weights, self.asked, self.available, self.exhausted)
        np.save(f"{folder}/source.npy", source)
        np.save(f"{folder}/taken.npy", taken)

    def locate(self, items: np.ndarray, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, source epoch, item within that epoch) of blend items `items`."""
        source = np.asarray(self.source[items], dtype=np.int64)
        taken = np.asarray(self.taken[items], dtype=np.int64)
        available = np.asarray(self.available, dtype=np.int64)[source]
        span = np.asarray(self.span, dtype=np.int64)[source]
        return source, epoch * span + taken // available, taken % available


def _key(kind: str, fingerprints, weights, available, exhausted) -> dict:
    return {"kind": kind, "builds": list(fingerprints), "weights": [repr(w) for w in weights],
            "available": [int(a) for a in available], "exhausted": exhausted}


@dataclass
class BlendedPackBatch(PackBatch):
    """A `PackBatch` whose rows come from several builds: `dataset_ids` [rows] names
    each row's build (its index in `builds`); `sample_ids` are within that build's
    source epoch (`source_epochs`)."""

    dataset_ids: np.ndarray = field(default=None)
    source_epochs: np.ndarray = field(default=None)


class BlendedPackReader:
    """Pack-builds blended by weight, `seq_len + 1` tokens a sample, this rank's
    `batch_size` a step (see the module docstring). `size`: samples in a blend epoch
    (default: the most no source runs out of); `exhausted`: 'repeat', 'stop' or
    'renormalize' (`blend`)."""

    def __init__(self, builds, weights, seq_len: int, *, size: int | None = None,
                 exhausted: str = "repeat", seed: int = 0, rank: int = 0,
                 world_size: int = 1, batch_size: int = 1, cache_dir: str | None = None,
                 labels: str = "shifted"):
        if isinstance(builds, (str, bytes)) or not builds:
            raise ReaderArgumentError(argument="builds", value=checks.shown(builds),
                                      allowed="a non-empty list of pack-build paths or URLs")
        self.weights = blend.weights_of(weights, len(builds))
        self.exhausted = blend.exhausted_of(exhausted)
        self.world_size = checks.argument("world_size", world_size, 1, 1 << 20)
        self.rank = checks.argument("rank", rank, 0, self.world_size - 1,
                                    ("below world_size", "nhỏ hơn world_size"))
        self.batch_size = checks.argument("batch_size", batch_size, 1, 1 << 24)
        self.sources = [PackReader(b, seq_len, seed=seed, cache_dir=cache_dir, labels=labels)
                        for b in builds]
        self.labels = labels
        self.seed, self.seq_len = self.sources[0].seed, self.sources[0].seq_len
        available = [s.samples for s in self.sources]
        key = _key("pack", [s.build.fingerprint for s in self.sources], self.weights,
                   available, self.exhausted)
        self._blend = _Blend(self.sources[0].build.store, key, self.weights, available, size,
                             self.exhausted)
        self.size, self.samples = self._blend.asked, self._blend.items
        self.global_batch = self.batch_size * self.world_size
        if self.samples < self.global_batch:
            raise ReaderArgumentError(
                argument="batch_size", value=f"{batch_size} ({self.samples} blended samples "
                f"an epoch, {self.global_batch} needed a step)",
                allowed=f"batch_size * world_size at most {self.samples}")
        self.steps = self.samples // self.global_batch
        self.epoch, self.position = 0, 0

    def achieved(self) -> list[float]:
        """Each build's share of the epoch's samples (exact: the blend's own counts)."""
        counts = np.bincount(np.asarray(self._blend.source, dtype=np.int64),
                             minlength=len(self.sources))
        return (counts / max(1, self.samples)).tolist()

    def samples_at(self, items) -> BlendedPackBatch:
        """The blend epoch's items `items` (global sample numbers of the epoch): each
        build's samples gathered in one call in its own dtype, then put in the blend's
        order and widened in one pass."""
        items = np.asarray(items, dtype=np.int64).reshape(-1)
        source, epochs, taken = self._blend.locate(items, self.epoch)
        n, width = len(items), self.seq_len + 1
        tokens = np.empty((n, width), dtype=np.int64)  # each build's rows widened as placed
        sample_ids = np.empty(n, dtype=np.int64)
        counts = np.empty(n, dtype=np.int64)
        first_piece = np.empty(n, dtype=np.int64)  # each row's first piece in `pieces`
        pieces, at = [], 0
        for d, e in sorted(set(zip(source.tolist(), epochs.tolist()))):
            rows = np.flatnonzero((source == d) & (epochs == e))
            reader = self.sources[d]
            reader.set_epoch(int(e))
            ids = np.asarray(reader.sample_order()[taken[rows]], dtype=np.int64)
            got, (piece_counts, piece_sizes) = reader.samples_at(ids, raw=True)
            tokens[rows], sample_ids[rows], counts[rows] = got, ids, piece_counts
            first_piece[rows] = at + np.cumsum(piece_counts) - piece_counts
            pieces.append(piece_sizes)
            at += len(piece_sizes)
        flat = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        starts = np.cumsum(counts) - counts
        take = np.repeat(first_piece - starts, counts) + np.arange(int(counts.sum()))
        return BlendedPackBatch(tokens, sample_ids, 0, self.epoch, (counts, flat[take]),
                                self.labels, dataset_ids=source, source_epochs=epochs)

    def batch_at(self, step: int) -> BlendedPackBatch:
        step = checks.argument("step", step, 0, self.steps - 1,
                               ("a step of the epoch", "một bước của epoch"))
        return self._steps(step, 1)[0]

    def _steps(self, k: int, count: int) -> list:
        """This rank's batches of steps k .. k + count - 1, their samples read together
        (one gather per build for all of them)."""
        firsts = np.arange(k, k + count) * self.global_batch + self.rank * self.batch_size
        made = self.samples_at((firsts[:, None] + np.arange(self.batch_size)).reshape(-1))
        counts, sizes = made._pieces
        ends = np.cumsum(counts)
        out = []
        for i in range(count):
            rows = slice(i * self.batch_size, (i + 1) * self.batch_size)
            lo = int(ends[rows.start - 1]) if rows.start else 0
            hi = int(ends[rows.stop - 1])
            out.append(BlendedPackBatch(made.tokens[rows], made.sample_ids[rows], k + i,
                                        self.epoch, (counts[rows], sizes[lo:hi]), self.labels,
                                        dataset_ids=made.dataset_ids[rows],
                                        source_epochs=made.source_epochs[rows]))
        return out

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        from mintdim_beam.read.reader import PACK_AHEAD_STEPS, PACK_AHEAD_TOKENS

        ahead: list = []  # the next few steps, read together
        while self.position < self.steps * self.global_batch:
            k = self.position // self.global_batch
            if not ahead or ahead[0].step != k:
                per = self.batch_size * (self.seq_len + 1)
                count = min(PACK_AHEAD_STEPS, max(1, PACK_AHEAD_TOKENS // per), self.steps - k)
                ahead = self._steps(k, count)
            batch = ahead.pop(0)
            self.position += self.global_batch
            yield batch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = checks.argument("epoch", epoch, 0, None)
        self.position = 0

    def _settings(self) -> dict:
        return {"version": STATE_VERSION, "reader": "pack_blend",
                "fingerprints": [s.build.fingerprint for s in self.sources],
                "weights": list(self.weights), "size": self.size,
                "exhausted": self.exhausted, "seq_len": self.seq_len, "seed": self.seed,
                "labels": self.labels}

    @property
    def step(self) -> int:
        return self.position // self.global_batch

    def state_at(self, step: int) -> dict:
        """The state that resumes this epoch at `step` (0 to the epoch's steps)."""
        step = checks.argument("step", step, 0, self.steps, ("a step of the epoch, or its end",
                                                              "một bước của epoch"))
        return {**self._settings(), "epoch": self.epoch, "position": step * self.global_batch}

    def state_dict(self) -> dict:
        return {**self._settings(), "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        check_settings(state, self._settings())
        epoch = checks.state_value("epoch", state, 0, None)
        total = self.steps * self.global_batch
        position = min(checks.state_value("position", state, 0, None), total)
        if position % self.global_batch and position != total:
            raise ReaderStateError(
                key="position", found=str(position),
                allowed=f"a multiple of batch_size * world_size = {self.global_batch}")
        self.epoch, self.position = epoch, position


def check_settings(state, mine: dict) -> None:
    """A state saved by a reader with these settings (builds, weights, ...), or
    `ReaderStateError` naming the first that differs."""
    if not isinstance(state, dict):
        raise ReaderStateError(key="state", found=checks.shown(state),
                               allowed="a dict from the blended reader's state_dict()")
    for key, want in mine.items():
        found = state.get(key, "missing")
        same = (found == want if not isinstance(want, list) else
                isinstance(found, list) and len(found) == len(want) and all(
                    (math.isclose(a, b, rel_tol=0, abs_tol=1e-15)
                     if isinstance(b, float) else a == b) for a, b in zip(found, want)))
        if not same or isinstance(found, bool):
            raise ReaderStateError(key=key, found=checks.shown(found),
                                   expected=checks.shown(want))


@dataclass
class BlendedBatch(Batch):
    """A `Batch` of a blend of unit-builds: `dataset_ids` [rows] names each row's build
    (its index in `builds`); `sample_ids` are looked up in that build."""

    dataset_ids: np.ndarray = None
    _builds: list = field(default=None, repr=False, compare=False)

    @property
    def sample_ids(self) -> np.ndarray:
        if self.pack_length is None:  # a whole step of one build
            return Batch.sample_ids.fget(self)
        if self._sample_ids is None:
            ids = np.full(self.ordinals.shape, -1, dtype=np.int64)
            for d in np.unique(self.dataset_ids).tolist():
                rows = self.dataset_ids == d
                ordinals, units = self.ordinals[rows], self.units[rows]
                found = np.full(ordinals.shape, -1, dtype=np.int64)
                for unit in np.unique(units[units >= 0]).tolist():
                    mine = units == unit
                    found[mine] = self._builds[d].sample_ids(unit)[ordinals[mine]]
                ids[rows] = found
            self._sample_ids = ids
        return self._sample_ids


class BlendedUnitReader:
    """Unit-builds blended by weight (see the module docstring): packed rows
    (`pack_length`) mixed row by row within each step, or whole steps unpacked.
    `size`: items (packed rows, or steps) in a blend epoch (default: the most no build
    runs out of in epoch 0); `exhausted`: 'repeat', 'stop' or 'renormalize'; `targets`:
    one `target` per build (their segments differ), else `target` for all. The other
    arguments are `UnitReader`'s, the same for every build. A packed epoch has
    `items // rows_per_step` steps (a last partial step is left out)."""

    def __init__(self, builds, weights, *, tokens_per_step: int, pack_length: int | None = None,
                 size: int | None = None, exhausted: str = "repeat", seed: int = 0,
                 rank: int = 0, world_size: int = 1, target=None, targets=None,
                 ignore_id: int = -100, last: str = "pad", pack_window: int | None = None,
                 cache_dir: str | None = None, labels: str = "aligned"):
        from mintdim_beam.read import order
        from mintdim_beam.read.reader import DEFAULT_PACK_WINDOW, UnitReader

        if isinstance(builds, (str, bytes)) or not builds:
            raise ReaderArgumentError(argument="builds", value=checks.shown(builds),
                                      allowed="a non-empty list of unit-build paths or URLs")
        self.weights = blend.weights_of(weights, len(builds))
        self.exhausted = blend.exhausted_of(exhausted)
        self.world_size = checks.argument("world_size", world_size, 1, None)
        self.rank = checks.argument("rank", rank, 0, self.world_size - 1,
                                    ("below world_size", "nhỏ hơn world_size"))
        self.pack_length = pack_length
        packed = pack_length is not None
        if targets is None:
            targets = [target] * len(builds)
        elif target is not None or isinstance(targets, (str, bytes)) or \
                len(targets) != len(builds):
            raise ReaderArgumentError(
                argument="targets", value=checks.shown(targets),
                allowed=f"a list of {len(builds)} targets, one per build (each as UnitReader's "
                        "target), instead of target")
        options = dict(tokens_per_step=tokens_per_step, seed=seed,
                       ignore_id=ignore_id, last=last, pack_length=pack_length,
                       pack_window=pack_window or DEFAULT_PACK_WINDOW, cache_dir=cache_dir,
                       labels=labels)
        self.labels, self.ignore_id = labels, ignore_id
        # packed: the sources give rows of all ranks; unpacked: each its steps, this rank's
        self.sources = [UnitReader(b, rank=0 if packed else rank,
                                   world_size=1 if packed else world_size, target=t, **options)
                        for b, t in zip(builds, targets)]
        first = self.sources[0]
        self.tokens_per_step, self.seed, self.last = first.tokens_per_step, first.seed, last
        self.pack_window = first.pack_window
        self.rows_per_step = order.rows_per_step(self.tokens_per_step, pack_length) if packed else 1
        if packed and self.rows_per_step % self.world_size:
            raise ReaderArgumentError(
                argument="world_size", value=str(world_size),
                allowed=f"a divisor of the global batch of {self.rows_per_step} rows "
                        "(max(1, tokens_per_step // pack_length))")
        self._available = [s.epoch_items(0) for s in self.sources]
        self._size = size
        self.size = (blend.full_size(self.weights, self._available) if size is None
                     else checks.argument("size", size, 1, None))
        self._plans: dict = {}
        self._epoch_items: dict = {}
        self.epoch, self.step = 0, 0

    # -- the blend's plan ----------------------------------------------------------------
    def _plan(self, epoch: int) -> _Blend:
        """One plan for every epoch under `repeat` (sizes from epoch 0); else epoch e's
        own (each build's items of its epoch e)."""
        key = 0 if self.exhausted == "repeat" else epoch
        if key not in self._plans:
            available = (self._available if key == 0 else
                         [self._items(d, epoch) for d in range(len(self.sources))])
            settings = _key("unit-packed" if self.pack_length else "unit-steps",
                            [s.build.fingerprint for s in self.sources], self.weights,
                            available, self.exhausted) | {
                "tokens_per_step": self.tokens_per_step, "seed": self.seed,
                "pack_length": self.pack_length, "last": self.last}
            self._plans[key] = _Blend(self.sources[0].build.store, settings, self.weights,
                                      available, self.size, self.exhausted)
        return self._plans[key]

    def _items(self, d: int, epoch: int) -> int:
        if (d, epoch) not in self._epoch_items:
            self._epoch_items[(d, epoch)] = self.sources[d].epoch_items(epoch)
        return self._epoch_items[(d, epoch)]

    def _locate(self, items: np.ndarray):
        """(build, build epoch, item in that epoch) of this epoch's blend items. Under
        `repeat` a build's items run on into its later epochs (`span` of them reserved per
        blend epoch, one more packed: each epoch packs its own number of rows)."""
        plan = self._plan(self.epoch)
        source = np.asarray(plan.source[items], dtype=np.int64)
        taken = np.asarray(plan.taken[items], dtype=np.int64)
        epochs = np.full_like(taken, self.epoch)
        if self.exhausted != "repeat":
            return source, epochs, taken
        for d in np.unique(source).tolist():
            mine = source == d
            span = plan.span[d] + (1 if self.pack_length else 0)
            start = self.epoch * span
            need = int(taken[mine].max())
            if self.sources[d].holds_item(start, need):  # the usual case: no epoch counted
                epochs[mine] = start
                continue
            ends = [0]
            while ends[-1] <= need:  # only the build epochs these items reach are planned
                if len(ends) > span:
                    raise RuntimeError(f"build {d} would need more than {span} of its epochs "
                                       f"in blend epoch {self.epoch}: give a smaller size")
                ends.append(ends[-1] + self._items(d, start + len(ends) - 1))
            ends = np.asarray(ends[1:])
            k = np.searchsorted(ends, taken[mine], side="right")
            epochs[mine] = start + k
            taken[mine] -= np.concatenate([[0], ends])[k]
        return source, epochs, taken

    # -- steps ---------------------------------------------------------------------------
    def __len__(self) -> int:
        """Steps of the current epoch, the same on every rank."""
        return self._plan(self.epoch).items // self.rows_per_step

    def achieved(self) -> list[float]:
        """Each build's share of the current epoch's items (rows or steps)."""
        source = np.asarray(self._plan(self.epoch).source, dtype=np.int64)
        counts = np.bincount(source, minlength=len(self.sources))
        return (counts / max(1, len(source))).tolist()

    def batch_at(self, step: int) -> Batch:
        """This rank's batch of blend step `step` of the current epoch."""
        step = checks.argument("step", step, 0, len(self) - 1,
                               ("a step of the epoch", "một bước của epoch"))
        if self.pack_length is None:
            (d,), (epoch,), (j,) = self._locate(np.asarray([step]))
            reader = self.sources[d]
            reader.set_epoch(int(epoch))
            batch = reader.batch_at(int(j))
            batch.step, batch.epoch = step, self.epoch
            return BlendedBatch(**{f.name: getattr(batch, f.name)
                                   for f in Batch.__dataclass_fields__.values()},
                                dataset_ids=np.full(len(batch.ordinals), d, dtype=np.int64),
                                _builds=[s.build for s in self.sources])
        return self._packed_steps(step, 1)[step]

    def _packed_steps(self, k: int, count: int) -> dict:
        """Packed steps k .. k + count - 1 of this rank: their rows located in the builds,
        each build's rows of all of them assembled once (`UnitReader.rows_at`), each
        step's rows then taken from the pool (`packed.RowPool`), in the blend's order."""
        from mintdim_beam.read import masks, packed

        share = self.rows_per_step // self.world_size
        firsts = (np.arange(k, k + count) * self.rows_per_step + self.rank * share)
        items = (firsts[:, None] + np.arange(share)[None, :]).reshape(-1)
        source, epochs, taken = self._locate(items)
        parts, part_of_row = [], np.empty(len(items), np.int64)
        row_in_part = np.empty(len(items), np.int64)
        for d, e in sorted(set(zip(source.tolist(), epochs.tolist()))):
            rows = np.flatnonzero((source == d) & (epochs == e))
            lo, hi = int(taken[rows].min()), int(taken[rows].max()) + 1
            part_of_row[rows], row_in_part[rows] = len(parts), taken[rows] - lo
            parts.append(self.sources[d].rows_at(int(e), lo, hi))
        pool = packed.RowPool(parts, self.pack_length)
        builds = [s.build for s in self.sources]
        out = {}
        for i, step in enumerate(range(k, k + count)):
            cut = slice(i * share, (i + 1) * share)
            arrays = pool.take(part_of_row[cut], row_in_part[cut])
            if self.labels == "shifted":  # the parts' rows come aligned
                arrays["labels"] = masks.shift_left(arrays["labels"], self.ignore_id)
            out[step] = BlendedBatch(unit_size=self.pack_length, step=step, epoch=self.epoch,
                                     pack_length=self.pack_length, dataset_ids=source[cut],
                                     label_shift=self.labels, _builds=builds, **arrays)
        return out

    def __iter__(self):
        from mintdim_beam.read.reader import PACK_AHEAD_STEPS, PACK_AHEAD_TOKENS

        steps = len(self)
        if self.step >= steps:
            self.step = 0
        ahead: dict = {}  # packed: the next few steps, made together (as UnitReader's)
        while self.step < steps:
            k = self.step
            if self.pack_length is None:
                batch = self.batch_at(k)
            else:
                if k not in ahead:
                    share = self.rows_per_step // self.world_size * self.pack_length
                    count = min(PACK_AHEAD_STEPS, max(1, PACK_AHEAD_TOKENS // share), steps - k)
                    ahead = self._packed_steps(k, count)
                batch = ahead.pop(k)
            self.step = k + 1  # counted before the yield: a state saved now resumes after it
            yield batch

    def set_epoch(self, epoch: int) -> None:
        epoch = checks.argument("epoch", epoch, 0, checks.INT64_MAX)
        if epoch != self.epoch:
            self.epoch, self.step = epoch, 0

    def _settings(self) -> dict:
        return {"version": STATE_VERSION, "reader": "unit_blend",
                "fingerprints": [s.build.fingerprint for s in self.sources],
                "weights": list(self.weights), "size": self.size, "exhausted": self.exhausted,
                "tokens_per_step": self.tokens_per_step, "pack_length": self.pack_length,
                "pack_window": self.pack_window, "seed": self.seed, "last": self.last,
                "labels": self.labels}

    def state_dict(self) -> dict:
        return self.state_at(self.step)

    def state_at(self, step: int) -> dict:
        """The state that resumes this epoch at `step` (what a loader saves after a batch)."""
        return {**self._settings(), "epoch": self.epoch, "step": int(step)}

    def load_state_dict(self, state: dict) -> None:
        check_settings(state, self._settings())
        epoch = checks.state_value("epoch", state, 0, checks.INT64_MAX)
        before = self.epoch
        self.epoch = epoch
        try:
            self.step = checks.state_value("step", state, 0, len(self))
        except ReaderStateError:
            self.epoch = before
            raise
