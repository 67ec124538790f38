"""`UnitReader`: a finished unit-build as fixed-shape training batches, one unit per step.

    reader = UnitReader(path, tokens_per_step=65536, seed=0, rank=0, world_size=8,
                        target=["output"], ignore_id=-100)
    reader.set_epoch(e)
    for batch in reader:      # one epoch, this rank's share
        batch.input_ids       # int64 [rows, unit_size]
        batch.labels          # the token inside a target segment, ignore_id elsewhere
        batch.attention_mask  # int64 [rows, unit_size], 1 on the record, 0 on padding
        batch.lengths         # int64 [rows], the record's tokens (0 for a padding row)
        batch.sample_ids      # int64 [rows], -1 for a padding row
    state = reader.state_dict()

Global batch: `max(1, tokens_per_step // unit_size)` rows of one unit; it must be a
multiple of `world_size` for every unit holding records (else ValueError at creation),
and rank r takes rows `[r*R/W, (r+1)*R/W)`. The order is a pure function of (seed,
epoch, step) (see `read.order`), so for one `tokens_per_step` the global sequence is the
same for every world size that divides the batches, and resuming is arithmetic.

A unit's last, partial global batch (`last="pad"`, the default) is filled up to the full
batch with padding rows after its real rows: `sample_ids == -1`, `input_ids` all
`pad_id`, `labels` all `ignore_id` (`batch.valid` is False there). So every record is
read exactly once per epoch across ranks, all ranks yield the same number of steps with
the same shapes (DDP lockstep), every step of a unit has one shape. A rank may get a
step of padding rows only: normalize the loss by the global count of label tokens (or
guard a per-rank mean over zero tokens). `last="drop"` skips partial batches instead.

Epochs and resume (like PyTorch's DistributedSampler and torchdata's
StatefulDataLoader): `set_epoch(e)` with a new epoch starts it at step 0; with the
current epoch it changes nothing, so `load_state_dict` then the usual `set_epoch` loop
continues where the state was saved. Iterating yields the steps from the current one to
the end of the epoch; iterating again after the end repeats the epoch from step 0.
`state_dict()` after k batches has `step == k`; a reader that loads it yields step k
next (0-based), also with another world size (elastic).

Arguments and states are checked (`read.checks`): ints only, each in a stated range
(`tokens_per_step` at most MAX_TOKENS_PER_STEP, a state's step in 0..steps of its
epoch, `batch_at` a step of the epoch), else ReaderArgumentError / ReaderStateError
saying the range.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mintdim_beam.core.errors import ReaderArgumentError, ReaderStateError

if TYPE_CHECKING:
    import numpy as np

    from mintdim_beam.read import order

# numpy and the reader's own modules are imported when a reader is made, not here:
# `import mintdim_beam` (every command, every helper process) stays free of numpy.

STATE_VERSION = 1

# The bound on tokens_per_step: 2**24 = 16,777,216 tokens a global step, the largest
# global batch of published pretraining runs (Llama 3 405B: 16M tokens). Each rank
# builds its share as int64 arrays (8 bytes a token each, 128 MiB an array at the bound
# on one rank); 10**9 would ask for 7.5 GiB an array.
MAX_TOKENS_PER_STEP = 1 << 24
TOKENS_BOUND_WHY = ("2**24, the largest published global batch; each rank builds its "
                    "share as int64 arrays, 8 bytes a token",
                    "2**24, batch toàn cục lớn nhất đã công bố; mỗi rank dựng phần của "
                    "mình thành mảng int64, 8 byte một token")


@dataclass
class Batch:
    """One step of one rank. Plain reads: `input_ids`, `labels`, `attention_mask`,
    `lengths`, `sample_ids`, `unit_size`; with `pairs=True`: `chosen_*` / `rejected_*`
    (`input_ids`, `labels`, `attention_mask`, `lengths` each; then the plain ones are
    None). `step` is the global step index in the epoch.

    `lengths` and `attention_mask` come from the records' segment lengths, never from
    comparing ids with the pad id: with pad = EOS, `input_ids != pad_id` would mask out
    every real EOS a record holds.

    `ordinals` are the rows' record numbers in their unit (-1 for padding rows);
    `sample_ids` are looked up from them on first use: only `sample_index.jsonl` maps
    records to sample ids, and a training loop that never asks does not parse it."""

    unit_size: int
    step: int
    epoch: int
    ordinals: np.ndarray
    input_ids: np.ndarray | None = None
    labels: np.ndarray | None = None
    lengths: np.ndarray | None = None
    chosen_input_ids: np.ndarray | None = None
    chosen_labels: np.ndarray | None = None
    chosen_lengths: np.ndarray | None = None
    rejected_input_ids: np.ndarray | None = None
    rejected_labels: np.ndarray | None = None
    rejected_lengths: np.ndarray | None = None
    _build: object = field(default=None, repr=False, compare=False)
    _sample_ids: np.ndarray | None = field(default=None, repr=False, compare=False)
    _masks: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def sample_ids(self) -> np.ndarray:
        """int64 [rows]: each row's sample id, -1 for a padding row."""
        if self._sample_ids is None:
            import numpy as np

            real = self.ordinals >= 0
            ids = np.full(len(self.ordinals), -1, dtype=np.int64)
            if real.any():
                ids[real] = self._build.sample_ids(self.unit_size)[self.ordinals[real]]
            self._sample_ids = ids
        return self._sample_ids

    @property
    def attention_mask(self) -> np.ndarray | None:
        """int64 [rows, unit_size]: 1 on each row's first `lengths` positions."""
        return self._mask("")

    @property
    def chosen_attention_mask(self) -> np.ndarray | None:
        return self._mask("chosen_")

    @property
    def rejected_attention_mask(self) -> np.ndarray | None:
        return self._mask("rejected_")

    def _mask(self, side: str) -> np.ndarray | None:
        """Made on first use (a loop that never asks does not pay for it), then kept."""
        lengths = getattr(self, f"{side}lengths")
        if lengths is None:
            return None
        if side not in self._masks:
            from mintdim_beam.read import masks

            self._masks[side] = masks.attention_mask(lengths, self.unit_size)
        return self._masks[side]

    @property
    def valid(self) -> np.ndarray:
        """False for the padding rows of a unit's last, partial batch."""
        return self.ordinals >= 0


class UnitReader:
    """Read a unit-build (a local directory or any fsspec URL) for training; see the
    module docstring for the order, the last partial batch and resume."""

    def __init__(self, path: str, *, tokens_per_step: int, seed: int = 0, rank: int = 0,
                 world_size: int = 1, target=None, ignore_id: int = -100,
                 pairs: bool = False, last: str = "pad"):
        from mintdim_beam.read import checks, masks, order
        from mintdim_beam.read.build import open_build

        self.tokens_per_step = checks.argument("tokens_per_step", tokens_per_step, 1,
                                               MAX_TOKENS_PER_STEP, TOKENS_BOUND_WHY)
        self.seed = checks.argument("seed", seed, 0, checks.INT64_MAX)
        self.world_size = checks.argument("world_size", world_size, 1, None)
        self.rank = checks.argument("rank", rank, 0, self.world_size - 1,
                                    (f"world_size {self.world_size}",
                                     f"world_size {self.world_size}"))
        self.ignore_id = checks.argument("ignore_id", ignore_id, -checks.INT64_MAX,
                                         checks.INT64_MAX)
        if last not in order.LAST_RULES:
            raise ReaderArgumentError(argument="last", value=checks.shown(last),
                                      allowed=" or ".join(map(repr, order.LAST_RULES)),
                                      allowed_vi=" hoặc ".join(map(repr, order.LAST_RULES)))
        if not isinstance(pairs, bool):
            raise ReaderArgumentError(argument="pairs", value=checks.shown(pairs),
                                      allowed="True or False", allowed_vi="True hoặc False")
        self.build = open_build(path)
        self.pairs, self.last = pairs, last
        segments = self.build.segments
        if pairs:
            self._chosen, _ = masks.pair_indices(segments)
        else:
            self._targets = masks.target_segments(segments, target)
        self._check_world_size()
        self.epoch, self.step = 0, 0
        self._plan_key, self._plan, self._perms = None, None, {}

    def _check_world_size(self) -> None:
        from mintdim_beam.read import order

        bad = [(u, order.rows_per_step(self.tokens_per_step, u)) for u in self.build.sizes
               if order.rows_per_step(self.tokens_per_step, u) % self.world_size]
        if bad:
            shown = ", ".join(f"unit {u}: {r} rows" for u, r in bad)
            raise ReaderArgumentError(
                argument="world_size", value=str(self.world_size),
                allowed=f"a divisor of the global batch (max(1, tokens_per_step // unit_size) "
                        f"rows) of every unit, which {shown} is not; choose tokens_per_step "
                        f"so that each is a multiple of it",
                allowed_vi=f"một ước của batch toàn cục (max(1, tokens_per_step // unit_size) "
                           f"dòng) của mọi unit, mà {shown} không chia hết; hãy chọn "
                           f"tokens_per_step để mỗi batch là bội của nó")

    # -- epochs and state ---------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        from mintdim_beam.read import checks

        epoch = checks.argument("epoch", epoch, 0, checks.INT64_MAX)
        if epoch != self.epoch:
            self.epoch, self.step = epoch, 0

    def __len__(self) -> int:
        """Steps per epoch, the same on every rank."""
        return len(self._epoch_plan())

    def _settings(self) -> dict:
        """What fixes the order: a state saved with other values is another sequence."""
        return {"version": STATE_VERSION, "fingerprint": self.build.fingerprint,
                "seed": self.seed, "tokens_per_step": self.tokens_per_step, "last": self.last}

    def state_dict(self) -> dict:
        return {**self._settings(), "epoch": self.epoch, "step": self.step,
                "steps_in_epoch": len(self), "world_size": self.world_size}

    def load_state_dict(self, state: dict) -> None:
        """Continue at the state's (epoch, step); `step` may be the epoch's step count
        (the epoch is done: iterating repeats it, `set_epoch(epoch + 1)` goes on)."""
        from mintdim_beam.read import checks

        if not isinstance(state, dict):
            raise ReaderStateError(key="state", found=checks.shown(state),
                                   allowed="a dict made by state_dict()",
                                   allowed_vi="một dict do state_dict() tạo ra")
        for key, mine in self._settings().items():
            found = state.get(key)
            if found != mine or checks.is_int(found) != checks.is_int(mine):
                raise ReaderStateError(key=key, expected=str(mine), found=checks.shown(found))
        epoch = checks.state_value("epoch", state, 0, checks.INT64_MAX)
        before = self.epoch, self.step
        self.epoch = epoch
        try:
            steps = len(self)
            step = checks.state_value("step", state, 0, steps,
                                      (f"epoch {epoch} has {steps} steps; {steps} is its end",
                                       f"epoch {epoch} có {steps} bước; {steps} là điểm kết thúc"))
            if "steps_in_epoch" in state and state["steps_in_epoch"] != steps:
                raise ReaderStateError(key="steps_in_epoch", expected=str(steps),
                                       found=checks.shown(state["steps_in_epoch"]))
        except ReaderStateError:
            self.epoch, self.step = before
            raise
        self.step = step

    # -- iteration ----------------------------------------------------------------------
    def __iter__(self):
        plan = self._epoch_plan()
        if self.step >= len(plan):
            self.step = 0
        while self.step < len(plan):
            k = self.step
            batch = self._batch(plan, k)
            self.step = k + 1  # counted before the yield: a state saved now resumes after it
            yield batch

    def batch_at(self, step: int) -> Batch:
        """This rank's batch of global step `step` of the current epoch, without moving
        (0 <= step < len(reader); no wrap-around from the end)."""
        from mintdim_beam.read import checks

        plan = self._epoch_plan()
        last = len(plan) - 1
        step = checks.argument("step", step, 0, last,
                               (f"epoch {self.epoch} has {last + 1} steps",
                                f"epoch {self.epoch} có {last + 1} bước"))
        return self._batch(plan, step)

    def _epoch_plan(self) -> order.EpochPlan:
        from mintdim_beam.read import order

        key = (self.epoch,)
        if self._plan_key != key:
            self._plan = order.epoch_plan(self.build.counts, self.tokens_per_step, self.seed,
                                          self.epoch, self.last)
            self._plan_key, self._perms = key, {}
        return self._plan

    def _permutation(self, unit: int) -> np.ndarray:
        from mintdim_beam.read import order

        if unit not in self._perms:
            self._perms[unit] = order.unit_permutation(self.build.counts[unit], self.seed,
                                                       self.epoch, unit)
        return self._perms[unit]

    def _batch(self, plan: order.EpochPlan, k: int) -> Batch:
        import numpy as np

        from mintdim_beam.read import masks, order

        unit = int(plan.units[k])
        rows = order.rows_per_step(self.tokens_per_step, unit)
        ordinals = order.rank_ordinals(self._permutation(unit), int(plan.index[k]), rows,
                                       self.rank, self.world_size)
        real = ordinals >= 0
        n = len(self.build.segments)
        if real.all():
            records = self.build.records(unit, ordinals)
            lengths = records[:, 1:1 + n].astype(np.int64)
            payload = records[:, 1 + n:].astype(np.int64)
        else:  # padding rows: pad ids, zero lengths
            lengths = np.zeros((len(ordinals), n), dtype=np.int64)
            payload = np.full((len(ordinals), unit), self.build.pad_id, dtype=np.int64)
            if real.any():
                records = self.build.records(unit, ordinals[real])
                lengths[real] = records[:, 1:1 + n]
                payload[real] = records[:, 1 + n:]
        batch = Batch(unit_size=unit, step=k, epoch=self.epoch, ordinals=ordinals,
                      _build=self.build)
        if self.pairs:
            for name, value in masks.pairs(payload, lengths, self._chosen, self.build.pad_id,
                                           self.ignore_id).items():
                setattr(batch, name, value)
        else:
            batch.input_ids = payload
            mask = masks.label_mask(lengths, self._targets, unit)
            batch.labels = masks.labels_for(batch.input_ids, mask, self.ignore_id)
            batch.lengths = lengths.sum(axis=1)
        return batch
