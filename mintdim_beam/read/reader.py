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

Packed steps (`pack_length=L`): rows of exactly L tokens holding whole records of any
units, packed by best-fit decreasing per window of the epoch's shuffled order of all
records (`read.packing`: the plan, its cost; `read.packed`: the arrays). A batch is
`max(1, tokens_per_step // L)` rows split over ranks as above, with `input_ids`,
`labels` (ignore_id also at each record's first token), `position_ids` (from 0 at each
record), `document_ids` (the record's index in its row, -1 on padding), `seq_lens` and
`sample_ids` [rows, records], flash-attention's `cu_seqlens` / `max_seqlen`, `lengths`;
no 2-D `attention_mask` (ones over a packed row would let records attend to each
other: `batch.block_causal_mask()` is the 4-D mask from `document_ids`). Every record once per epoch,
one shape for every step, the same global sequence for every world size, and resume
as above; a record longer than L is refused when the reader is made.

Memory (`read.cache`): every record's token count and sample id, and each epoch's
shuffles and packing plan, are `.npy` files written once into the build's reader cache
(`cache_dir`, else beside the build, else the user's cache folder) and memory-mapped,
so a rank holds the pages its steps touch and the windows it packs, whatever the
build's size; a start or resume opens them.

Arguments and states are checked (`read.checks`): ints only, each in a stated range
(`tokens_per_step` at most MAX_TOKENS_PER_STEP, a state's step in 0..steps of its
epoch, `batch_at` a step of the epoch), else ReaderArgumentError / ReaderStateError
saying the range.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from mintdim_beam.core.errors import ReaderArgumentError, ReaderStateError
from mintdim_beam.read.batch import Batch

if TYPE_CHECKING:
    import numpy as np

    from mintdim_beam.read import order, packing

# numpy and the reader's own modules are imported when a reader is made, not here:
# `import mintdim_beam` (every command, every helper process) stays free of numpy.

STATE_VERSION = 1

# The bound on tokens_per_step: 2**24 = 16,777,216 tokens a global step, the largest
# global batch of published pretraining runs (Llama 3 405B: 16M tokens). Each rank
# builds its share as int64 arrays (8 bytes a token each, 128 MiB an array at the bound
# on one rank); 10**9 would ask for 7.5 GiB an array.
MAX_TOKENS_PER_STEP = 1 << 24
# Packing windows, in rows' worth of tokens: 1024 leaves the last, part-filled row of a
# window at most 1/1024 of it. 256 padded more than TRL's BFD (1,000 records a batch) on
# long-tailed lengths (0.30% against 0.27%; 1024: 0.09%, tests_interop/test_padding_vs_trl.py)
# for 10% more plan time; the bound keeps a window's bisect list, and so its best-fit
# cost, small.
DEFAULT_PACK_WINDOW = 1024
# Packed steps are made a few at a time when iterated: up to 2**18 tokens of this rank's
# rows (4 steps of 65,536), at most 16 steps. A 65,536-token step's records lie in about
# 48 of the 1M benchmark build's 52 shards, so 4 steps at once gather each shard once
# for 4 steps, and pay each pass's fixed cost once (CPU 0.44 -> 0.37 ms a step here,
# benchmarks/read_cpu.py; 2**19 and 2**20 were no faster).
PACK_AHEAD_TOKENS = 1 << 18
PACK_AHEAD_STEPS = 16
MAX_PACK_WINDOW = 1 << 16
TOKENS_BOUND_WHY = ("2**24, the largest published global batch; each rank builds its "
                    "share as int64 arrays, 8 bytes a token",
                    "2**24, batch toàn cục lớn nhất đã công bố; mỗi rank dựng phần của "
                    "mình thành mảng int64, 8 byte một token")


class UnitReader:
    """Read a unit-build (a local directory or any fsspec URL) for training; see the
    module docstring for the order, the last partial batch and resume."""

    def __init__(self, path: str, *, tokens_per_step: int, seed: int = 0, rank: int = 0,
                 world_size: int = 1, target=None, ignore_id: int = -100,
                 pairs: bool = False, last: str = "pad", pack_length: int | None = None,
                 pack_window: int = DEFAULT_PACK_WINDOW, cache_dir: str | None = None,
                 labels: str = "aligned"):
        from mintdim_beam.read import checks, masks, order
        from mintdim_beam.read.build import open_build

        if labels not in masks.LABELS:
            raise ReaderArgumentError(argument="labels", value=checks.shown(labels),
                                      allowed=masks.LABELS_WHY[0], allowed_vi=masks.LABELS_WHY[1])
        self.labels = labels

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
        self.pack_length = self.pack_window = None
        if pack_length is not None:
            self.pack_length = checks.argument("pack_length", pack_length, 1,
                                               MAX_TOKENS_PER_STEP, TOKENS_BOUND_WHY)
            self.pack_window = checks.argument("pack_window", pack_window, 1, MAX_PACK_WINDOW,
                                               ("rows' worth of tokens a packing window holds",
                                                "số dòng token mà một cửa sổ đóng gói chứa"))
            if pairs:
                raise ReaderArgumentError(
                    argument="pairs", value="True",
                    allowed="False with pack_length: preference pairs are read unpacked",
                    allowed_vi="False khi có pack_length: cặp preference được đọc không đóng gói")
        self.build = open_build(path, cache_dir)
        self.pairs, self.last = pairs, last
        segments = self.build.segments
        if pairs:
            self._chosen, _ = masks.pair_indices(segments)
        else:
            self._targets = masks.target_segments(segments, target)
        self._check_world_size()
        if self.pack_length is not None:
            self._check_record_lengths()
        self.epoch, self.step = 0, 0
        self._plan_key, self._plan, self._perms = None, None, {}

    def __getstate__(self):
        """Pickled (to a DataLoader worker) without the epoch's plan: its arrays are
        memory maps of the cache (pickling one would copy it); a copy opens them again."""
        state = dict(self.__dict__)
        state["_plan_key"], state["_plan"], state["_perms"] = None, None, {}
        return state

    @property
    def _offsets(self) -> np.ndarray:
        import numpy as np

        return np.asarray([self.build.first_record(u) for u in self.build.sizes], dtype=np.int64)

    def _check_world_size(self) -> None:
        from mintdim_beam.read import order

        widths = [self.pack_length] if self.pack_length is not None else self.build.sizes
        bad = [(u, order.rows_per_step(self.tokens_per_step, u)) for u in widths
               if order.rows_per_step(self.tokens_per_step, u) % self.world_size]
        if self.pack_length is not None and bad:
            raise ReaderArgumentError(
                argument="world_size", value=str(self.world_size),
                allowed=f"a divisor of the global batch of {bad[0][1]} rows (max(1, "
                        f"tokens_per_step // pack_length)); choose tokens_per_step so that "
                        f"it is a multiple of it",
                allowed_vi=f"một ước của batch toàn cục {bad[0][1]} dòng (max(1, "
                           f"tokens_per_step // pack_length)); hãy chọn tokens_per_step để "
                           f"batch là bội của nó")
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

    def _check_record_lengths(self) -> None:
        """A record longer than pack_length is refused here, naming the longest record
        and its unit, and how many of each unit do not fit: each unit's longest from the
        cache's meta (its token counts are read, and the cache written, the first time),
        the records themselves looked at only to say which."""
        import numpy as np

        from mintdim_beam.core.errors.base import num

        most = {int(u): int(m) for u, m in self.build.facts().meta["max"].items()}
        if max(most.values(), default=0) <= self.pack_length:
            return
        counts = [self.build.token_counts(u) for u in self.build.sizes]
        over = {u: int((c > self.pack_length).sum()) for u, c in zip(self.build.sizes, counts)}
        unit, tokens = max(zip(self.build.sizes, counts), key=lambda uc: int(uc[1].max()))
        worst = int(np.argmax(tokens))
        top, sid = int(tokens[worst]), int(self.build.sample_ids(unit)[worst])
        where = ", ".join(f"unit {u}: {num(k, ',')}" for u, k in over.items() if k)
        where_vi = ", ".join(f"unit {u}: {num(k, '.')}" for u, k in over.items() if k)
        raise ReaderArgumentError(
            argument="pack_length", value=str(self.pack_length),
            allowed=f"at least {num(top, ',')}, the longest record (unit {unit}, record "
                    f"{worst} of the unit, sample id {sid}); records longer than "
                    f"{num(self.pack_length, ',')} tokens: {where}; a row holds whole "
                    f"records only",
            allowed_vi=f"ít nhất {num(top, '.')}, record dài nhất (unit {unit}, record "
                       f"{worst} của unit, sample id {sid}); record dài hơn "
                       f"{num(self.pack_length, '.')} token: {where_vi}; một dòng chỉ "
                       f"chứa record nguyên vẹn")

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
        """What fixes the order: a state saved with other values is another sequence
        (shifted labels too: a loop saved with them must not resume aligned)."""
        settings = {"version": STATE_VERSION, "fingerprint": self.build.fingerprint,
                    "seed": self.seed, "tokens_per_step": self.tokens_per_step,
                    "last": self.last, "pack_length": self.pack_length,
                    "pack_window": self.pack_window}
        if self.labels != "aligned":
            settings["labels"] = self.labels
        return settings

    def _labelled(self, batch: Batch) -> Batch:
        """The batch with this reader's label convention (made aligned, shifted here)."""
        from mintdim_beam.read import masks

        batch.label_shift = self.labels
        if self.labels == "shifted":
            for side in ("", "chosen_", "rejected_"):
                labels = getattr(batch, f"{side}labels")
                if labels is not None:
                    setattr(batch, f"{side}labels", masks.shift_left(labels, self.ignore_id))
        return batch

    def state_dict(self) -> dict:
        """Packed, also `window`: the plan window of the step's first row and that
        window's first row, in this epoch (`{"epoch", "index", "first_row"}`), so that a
        resume packs that window only; `steps_in_epoch` packs every window of the epoch
        the first time a state of it is made (0.2 s a million records here)."""
        return self.state_at(self.step)

    def state_at(self, step: int) -> dict:
        """The state that resumes this epoch at `step` (0 to the epoch's step count):
        what `state_dict()` gives once the reader stands there. Why: a DataLoader's
        workers read ahead of the training loop, so the loop saves the state after the
        batch it last used (`mintdim_beam.torch`), with its packing window too."""
        from mintdim_beam.read import checks

        steps = len(self)
        step = checks.argument("step", step, 0, steps,
                               (f"epoch {self.epoch} has {steps} steps; {steps} is its end",
                                f"epoch {self.epoch} có {steps} bước; {steps} là điểm kết thúc"))
        state = {**self._settings(), "epoch": self.epoch, "step": step,
                 "steps_in_epoch": steps, "world_size": self.world_size}
        if self.pack_length is not None:
            index, first = self._epoch_plan().step_window(step)
            state["window"] = {"epoch": self.epoch, "index": index, "first_row": first}
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue at the state's (epoch, step); `step` may be the epoch's step count
        (the epoch is done: iterating repeats it, `set_epoch(epoch + 1)` goes on)."""
        from mintdim_beam.read import checks

        if not isinstance(state, dict):
            raise ReaderStateError(key="state", found=checks.shown(state),
                                   allowed="a dict made by state_dict()",
                                   allowed_vi="một dict do state_dict() tạo ra")
        for key, mine in {**self._settings(), "labels": self.labels}.items():
            found = state.get(key, "aligned") if key == "labels" else state.get(key)
            if found != mine or checks.is_int(found) != checks.is_int(mine):
                raise ReaderStateError(key=key, expected=str(mine), found=checks.shown(found))
        epoch = checks.state_value("epoch", state, 0, checks.INT64_MAX)
        before = self.epoch, self.step
        self.epoch = epoch
        if self._resume_in_window(state):
            self.step = int(state["step"])
            return
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

    def _resume_in_window(self, state: dict) -> bool:
        """A packed state's step taken without packing the epoch: when the state's
        `window` (made by `state_dict` in the same epoch) holds the step's first row once
        that window alone is packed, and nothing known contradicts its first row. A step
        changed by hand within the window is still right (the window's first row is a
        fact of the epoch's plan, whatever the step); otherwise (a state without it, a
        step moved out of it, an epoch changed by hand) the caller packs the epoch and
        checks the step against it. `steps_in_epoch` is not checked here: the settings
        checked before fix it, and the reader never uses it."""
        from mintdim_beam.read import checks

        window = state.get("window")
        if self.pack_length is None or not isinstance(window, dict):
            return False
        step, epoch, w, first = (state.get("step"), window.get("epoch"), window.get("index"),
                                 window.get("first_row"))
        if not all(checks.is_int(v) and v >= 0 for v in (step, epoch, w, first)):
            return False
        if epoch != self.epoch:  # a fact about another epoch's plan
            return False
        plan = self._epoch_plan()
        return plan.anchor(int(w), int(first), int(step) * plan.rows_per_step)

    # -- iteration ----------------------------------------------------------------------
    def _past_end(self, plan, step: int) -> bool:
        """Packed: packs only up to the step (the epoch's length is not needed)."""
        return plan.at_end(step) if self.pack_length is not None else step >= len(plan)

    def __iter__(self):
        plan = self._epoch_plan()
        if self._past_end(plan, self.step):
            self.step = 0
        ahead: dict[int, Batch] = {}  # packed: the next few steps, made together
        while not self._past_end(plan, self.step):
            k = self.step
            if self.pack_length is None:
                batch = self._batch(plan, k)
            else:
                if k not in ahead:
                    ahead = self._packed_batches(plan, k)
                batch = ahead.pop(k)
            self.step = k + 1  # counted before the yield: a state saved now resumes after it
            yield batch

    def batch_at(self, step: int) -> Batch:
        """This rank's batch of global step `step` of the current epoch, without moving
        (0 <= step < len(reader); no wrap-around from the end)."""
        from mintdim_beam.read import checks

        plan = self._epoch_plan()
        if not (checks.is_int(step) and step >= 0 and not self._past_end(plan, step)):
            last = len(plan) - 1
            step = checks.argument("step", step, 0, last,
                                   (f"epoch {self.epoch} has {last + 1} steps",
                                    f"epoch {self.epoch} có {last + 1} bước"))
        return self._batch(plan, int(step))

    def _epoch_plan(self) -> order.Steps | packing.PackPlan:
        """The epoch's plan, its arrays in the build's cache (`read.cache`): made there
        once per (seed, epoch, ...), memory-mapped by every reader after."""
        from mintdim_beam.read import cache, order, packing

        key = (self.epoch,)
        if self._plan_key != key:
            store = self.build.store
            if self.pack_length is None:
                steps = order.step_counts(self.build.counts, self.tokens_per_step, self.last)
                total = sum(steps.values())
                made = store.get(
                    f"steps.s{self.seed}.t{self.tokens_per_step}.{self.last}.e{self.epoch}",
                    lambda folder: cache.shuffled(folder, "shuffle", total, order.step_shuffle(
                        total, self.seed, self.epoch)))
                self._plan = order.Steps(steps, made["shuffle"])
            else:
                facts = self.build.facts()
                self._plan = packing.pack_plan(
                    facts["lengths"], self.pack_length, self.pack_window,
                    order.rows_per_step(self.tokens_per_step, self.pack_length),
                    self.seed, self.epoch, self.last, store=store,
                    key=cache.digest(self.build.versions))
                facts.release()  # what ordering the lengths touched
            self._plan_key, self._perms = key, {}
        return self._plan

    def epoch_items(self, epoch: int) -> int:
        """What a blend counts of epoch `epoch` (`read.blended`): its steps, or packed,
        its rows (all ranks' together; packs every window of that epoch once)."""
        self.set_epoch(epoch)
        plan = self._epoch_plan()
        return plan.rows if self.pack_length is not None else len(plan)

    def holds_item(self, epoch: int, item: int) -> bool:
        """Whether epoch `epoch` has step (packed: row) `item`; packed, it packs only the
        windows up to that row, where `epoch_items` packs the epoch."""
        self.set_epoch(epoch)
        plan = self._epoch_plan()
        if self.pack_length is None:
            return item < len(plan)
        return plan.locate(item) is not None

    def rows_at(self, epoch: int, first: int, end: int) -> dict:
        """Packed: the arrays of rows `[first, end)` of epoch `epoch`'s plan (all ranks'
        rows, in plan order), as a step of those rows has them (`packed.assemble_steps`),
        labels aligned."""
        from mintdim_beam.read import packed

        self.set_epoch(epoch)
        plan = self._epoch_plan()
        records, per_row, lens = plan.take_lengths(first, end)
        (arrays,) = packed.assemble_steps(self.build, [(records, per_row, end - first, lens)],
                                          self.pack_length, self._offsets, self._targets,
                                          self.ignore_id)
        return arrays

    def padding_fraction(self) -> float:
        """The share of this epoch's token slots (all ranks, every step) that hold no
        record's token: what packing is for. Reads no record's tokens, only their
        counts (`Build.token_counts`; packed: those the reader took when made). Packed,
        packs every window of the epoch."""
        import numpy as np

        from mintdim_beam.read import order

        plan = self._epoch_plan()
        totals = {int(u): int(t) for u, t in self.build.facts().meta["tokens"].items()}
        if self.pack_length is not None:
            rows = min(len(plan) * plan.rows_per_step, plan.rows)
            # all the records' tokens, less those of the rows a dropped last step holds
            used = sum(totals.values()) - int(plan.take_lengths(rows, plan.rows)[2].sum())
            return 1.0 - used / (len(plan) * plan.rows_per_step * self.pack_length or 1)
        slots = used = 0
        for unit in self.build.sizes:
            rows = order.rows_per_step(self.tokens_per_step, unit)
            steps = order.unit_steps(self.build.counts[unit], rows, self.last)
            left = self._permutation(unit)[steps * rows:]  # records a dropped step holds
            dropped = int(np.sum(self.build.token_counts(unit)[left])) if len(left) else 0
            slots, used = slots + steps * rows * unit, used + totals[unit] - dropped
        return 1.0 - used / (slots or 1)

    def _permutation(self, unit: int) -> np.ndarray:
        """The unit's record order this epoch (`order.unit_permutation`), from the cache."""
        from mintdim_beam.read import cache, order

        if unit not in self._perms:
            count = self.build.counts[unit]
            self._perms[unit] = self.build.store.get(
                f"unit-order.s{self.seed}.u{unit}.e{self.epoch}",
                lambda folder: cache.shuffled(folder, "perm", count, order.generator(
                    self.seed, self.epoch, 1, unit)))["perm"]
        return self._perms[unit]

    def _packed_batch(self, plan: packing.PackPlan, k: int) -> Batch:
        return self._packed_batches(plan, k, 1)[k]

    def _packed_batches(self, plan: packing.PackPlan, k: int, count: int | None = None) -> dict:
        """Steps k, k+1, ... (`count`, or as many as make PACK_AHEAD_TOKENS of this rank's
        rows, at most PACK_AHEAD_STEPS, none past the epoch's end) made together
        (`packed.assemble_steps`); each the batch `batch_at` gives."""
        from mintdim_beam.read import packed

        if count is None:
            share = plan.rows_per_step // self.world_size * self.pack_length
            count = min(PACK_AHEAD_STEPS, max(1, PACK_AHEAD_TOKENS // share))
        steps = []
        for j in range(k, k + count):
            if j > k and self._past_end(plan, j):
                break
            first, end, rows = plan.rank_rows(j, self.rank, self.world_size)
            records, per_row, lens = plan.take_lengths(first, end)
            steps.append((records, per_row, rows, lens))
        made = packed.assemble_steps(self.build, steps, self.pack_length, self._offsets,
                                     self._targets, self.ignore_id)
        return {j: self._labelled(Batch(unit_size=self.pack_length, step=j, epoch=self.epoch,
                                        pack_length=self.pack_length, _build=self.build,
                                        **arrays))
                for j, arrays in zip(range(k, k + len(made)), made)}

    def _batch(self, plan, k: int) -> Batch:
        import numpy as np

        from mintdim_beam.read import masks, order

        if self.pack_length is not None:
            return self._packed_batch(plan, k)
        unit, index = plan.step(k)
        rows = order.rows_per_step(self.tokens_per_step, unit)
        ordinals = order.rank_ordinals(self._permutation(unit), index, rows,
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
        return self._labelled(batch)
