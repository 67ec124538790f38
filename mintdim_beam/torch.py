"""The readers as PyTorch `IterableDataset`s of tensor batches, one per step.

    from torch.utils.data import DataLoader
    from mintdim_beam.torch import UnitReaderDataset

    dataset = UnitReaderDataset(path, tokens_per_step=65536, seed=0, rank=rank,
                                world_size=world_size)        # UnitReader's arguments
    # batch_size=None: the dataset yields whole batches, the loader must not batch them
    loader = DataLoader(dataset, batch_size=None, num_workers=4)
    for epoch in range(start_epoch, epochs):
        dataset.set_epoch(epoch)
        for batch in loader:
            batch["input_ids"], batch["labels"]   # int64 [rows, unit_size]
            batch["attention_mask"]               # int64 [rows, unit_size], from lengths
            batch["lengths"]                      # int64 [rows], the records' tokens
            batch["sample_ids"]                   # int64 [rows], -1 for a padding row
            batch["valid"]                        # bool [rows], False for a padding row
            batch["unit_size"], batch["epoch"], batch["step"]  # plain ints
            ...
            state = dataset.state_dict(after=batch)   # resumes right after this batch

`UnitReaderDataset` wraps a `UnitReader`, `PackReaderDataset` a `PackReader`,
`BlendedUnitReaderDataset` and `BlendedPackReaderDataset` the blends of `read.blended`
(each batch with its rows' `dataset_ids`); `step_loader` makes the loader a
torchtitan-style trainer would (a torchdata `StatefulDataLoader`) from its local
`batch_size`.

With `pairs=True` a batch holds `chosen_*` and `rejected_*` (`input_ids`, `labels`,
`attention_mask`, `lengths` each, int64) instead of the plain four.

Packed (`pack_length=L`, see `mintdim_beam.read.reader`): `input_ids`, `labels`,
`position_ids`, `document_ids` int64 [rows, L]; `seq_lens`, `sample_ids` [rows, records];
`lengths`, `valid` [rows]; `cu_seqlens` int32 and `max_seqlen` (an int) for
flash-attention's varlen kernels; no `attention_mask`: `block_causal_mask(batch)` is the
4-D mask `scaled_dot_product_attention` takes (records attend only to themselves).

Workers. With `num_workers=N` worker w computes the reader's steps w, w+N, w+2N, ... of
the epoch (from the step the dataset is at when the loader starts iterating); the
DataLoader takes one batch from each worker in turn, so the loader yields exactly the
reader's own sequence, each step once, whatever N is (0 included).

Resume: the contract is the batch, not the dataset object. With workers, the batches
are made in worker processes on copies of the dataset (taken when `iter(loader)`
starts), so the dataset in the training process does not move while the loader runs,
and the loader prefetches: no object in the training process knows how many batches
the loop has consumed. Each batch therefore carries its `epoch` and global `step`, and
`dataset.state_dict(after=batch)` is the reader state that resumes with the next step
(`step == batch["step"] + 1`), for any `num_workers`. Save it with the model; to resume,
`dataset.load_state_dict(state)`, then the usual `set_epoch(epoch)` (the same epoch does
not restart it) and a new `iter(loader)`: its first batch is the step after the saved
one. `dataset.state_dict()` without `after` is the reader's own position: right only
when the dataset is iterated in this process (`num_workers=0` or a plain `for` loop).

`persistent_workers=True` is refused (RuntimeError from the second `iter(loader)`):
persistent workers keep the copies they started with, so a later `set_epoch` or
`load_state_dict` would never reach them.

`batch_size` other than None is refused (ReaderArgumentError, a ValueError, when the
loader starts; with workers torch re-raises it as a RuntimeError carrying the same
text): the reader already batches, so the loader's default `batch_size=1` would add a
leading dimension of 1 to every tensor and a larger one would stack steps of different
shapes. For more tokens a step, raise `tokens_per_step`. No `collate_fn` is needed:
with `batch_size=None` the loader passes the dataset's dicts through as they are.

Labels: every batch says its convention in `label_shift`. `UnitReader` gives
"aligned" labels by default (labels[t] is token t's target; Hugging Face models shift
inside their loss), `PackReader` "shifted" ones (labels[t] is the next token, position
t's target: Megatron, torchtitan, a plain cross-entropy over all positions); either
reader takes `labels="aligned"` or `labels="shifted"`, so a loop states which it wants
instead of shifting twice by accident.

torchdata's `StatefulDataLoader`: its `state_dict()` resumes exactly, with or without
workers. In a worker it asks the dataset's `state_dict()`, which is then that worker's
own next step; loaded back in the worker (`load_state_dict`) the worker goes on from
there with its stride, so the loader yields the step after the last one it gave.
`step_loader(dataset, batch_size=B, num_workers=N)` builds one as a torchtitan-style
trainer builds its loader: B, its local batch size, must be the rows one step gives
this rank (PackReader's `batch_size`; `tokens_per_step // pack_length // world_size`),
else ReaderArgumentError, since the loader would stack several steps.

This module imports torch; `import mintdim_beam` never imports this module.
"""
from __future__ import annotations

import sys

try:
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("mintdim_beam.torch needs PyTorch (pip install torch); "
                      "mintdim_beam.UnitReader reads the same batches as numpy arrays") from error

from mintdim_beam.core.errors import ReaderArgumentError
import numpy as np

from mintdim_beam.read import Batch, PackReader, UnitReader

try:  # the loader's fetcher, which asks for our iterator (see _refuse_loader_batching)
    from torch.utils.data._utils.fetch import _IterableDatasetFetcher as _Fetcher
except ImportError:  # pragma: no cover - another torch layout: the check is skipped
    _Fetcher = None

BATCH_SIZE_ALLOWED = (
    "None: UnitReaderDataset yields whole batches already (tokens_per_step tokens of one "
    "unit, this rank's rows), so DataLoader(dataset, batch_size=None); a batch_size, "
    "DataLoader's default 1 included, would stack several steps into one tensor (a "
    "leading dimension of 1, or steps of different shapes). For more tokens a step, "
    "raise tokens_per_step",
    "None: UnitReaderDataset đã trả về batch trọn vẹn (tokens_per_step token của một "
    "unit, các dòng của rank này), nên dùng DataLoader(dataset, batch_size=None); một "
    "batch_size, kể cả giá trị mặc định 1 của DataLoader, sẽ xếp chồng nhiều bước thành "
    "một tensor (thêm chiều đầu bằng 1, hoặc các bước khác hình dạng). Muốn nhiều token "
    "hơn mỗi bước, hãy tăng tokens_per_step")


def _refuse_loader_batching(caller) -> None:
    """A DataLoader with a batch_size makes its fetcher with `auto_collation` set, and the
    fetcher's __init__ is what calls iter(dataset), in this process or in a worker: the
    one place a dataset can see how the loader will batch what it yields."""
    fetcher = caller.f_locals.get("self") if caller is not None else None
    if _Fetcher is not None and isinstance(fetcher, _Fetcher) and fetcher.auto_collation:
        en, vi = BATCH_SIZE_ALLOWED
        raise ReaderArgumentError(argument="DataLoader batch_size",
                                  value="not None (DataLoader's default is 1)",
                                  allowed=en, allowed_vi=vi)

TENSORS = tuple(f"{side}{name}" for side in ("", "chosen_", "rejected_")
                for name in ("input_ids", "labels", "attention_mask", "lengths")) + (
    "position_ids", "document_ids", "seq_lens", "cu_seqlens")


def to_tensors(batch: Batch) -> dict:
    """A reader batch as a dict of tensors (sharing the batch's fresh arrays, no copy),
    plus `unit_size`, `epoch` and `step` (and packed, `max_seqlen`) as ints."""
    out = {name: torch.from_numpy(getattr(batch, name)) for name in TENSORS
           if getattr(batch, name) is not None}
    out["sample_ids"] = torch.from_numpy(batch.sample_ids)
    out["valid"] = torch.from_numpy(batch.valid)
    out.update(unit_size=int(batch.unit_size), epoch=int(batch.epoch), step=int(batch.step),
               label_shift=batch.label_shift)
    if batch.max_seqlen is not None:
        out["max_seqlen"] = int(batch.max_seqlen)
    return out


def block_causal_mask(batch, dtype: torch.dtype = torch.bool) -> torch.Tensor:
    """The 4-D mask `torch.nn.functional.scaled_dot_product_attention` takes for a packed
    batch (a dict from this dataset, or its `document_ids` tensor): [rows, 1, L, L],
    query i attends key j when j <= i within the same record, on the ids' device.
    `dtype=torch.bool` (True = attend); a float dtype gives the additive form, 0 where
    attended and the dtype's lowest value elsewhere (for code that adds masks to
    scores). Padding attends to its own row's padding only, so no query row is empty
    (SDPA would give NaN there)."""
    doc = batch["document_ids"] if isinstance(batch, dict) else batch
    width = doc.shape[-1]
    causal = torch.ones(width, width, dtype=torch.bool, device=doc.device).tril_()
    mask = (doc[:, None, :, None] == doc[:, None, None, :]) & causal
    if dtype == torch.bool:
        return mask
    additive = torch.zeros(mask.shape, dtype=dtype, device=doc.device)
    return additive.masked_fill_(~mask, torch.finfo(dtype).min)


class _StepDataset(IterableDataset):
    """A reader (`batch_at(step)`, `len`, `step`, `state_at(step)`, `set_epoch`,
    `load_state_dict`) as an IterableDataset of tensor dicts, one per step; see the
    module docstring for workers and resume."""

    def __init__(self, reader):
        super().__init__()
        self.reader = reader
        self._iterated_in_worker = False
        self._worker_next = None  # in a worker: the next step it makes (its own stride)
        self._loaded_in_worker = False

    def _tensors(self, batch) -> dict:
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        """Also plans the epoch here, so workers forked after it map the plan this
        process wrote to the reader's cache (`read.cache`) instead of each making its
        own."""
        self.reader.set_epoch(epoch)
        len(self.reader)

    def __len__(self) -> int:
        """Steps per epoch (a resumed epoch yields fewer)."""
        return len(self.reader)

    def state_dict(self, after: dict | None = None) -> dict:
        """The reader state; with `after` (a batch this dataset yielded) the state that
        resumes with the step after it, correct with any number of workers. In a
        loader's worker (torchdata's StatefulDataLoader asks there) the state of that
        worker's own next step."""
        if after is None:
            if self._worker_next is not None:
                return self.reader.state_at(min(self._worker_next, len(self.reader)))
            return self.reader.state_dict()
        epoch, step = int(after["epoch"]), int(after["step"]) + 1
        if epoch == self.reader.epoch:
            return self.reader.state_at(step)
        state = self.reader.state_dict()  # another epoch's: its own plan is checked on load
        for key in ("window", "steps_in_epoch"):
            state.pop(key, None)
        state["epoch"] = epoch
        if "position" in state:
            state["position"] = step * self.reader.global_batch
        else:
            state["step"] = step
        return state

    def load_state_dict(self, state: dict) -> None:
        self.reader.load_state_dict(state)
        self._worker_next = None
        # a worker that loads its own state (StatefulDataLoader) goes on from it, its
        # stride unchanged; a state loaded here reaches workers as their common start
        self._loaded_in_worker = get_worker_info() is not None

    def __iter__(self):
        _refuse_loader_batching(sys._getframe(1))
        return self._batches()

    def _batches(self):
        info = get_worker_info()
        if info is None:  # this process: the reader moves, so state_dict() stays right
            for batch in self.reader:
                yield self._tensors(batch)
            return
        if self._iterated_in_worker:
            raise RuntimeError(f"{type(self).__name__} does not support persistent_workers="
                               "True: the workers keep the copy of the dataset they started "
                               "with, so set_epoch and load_state_dict would not reach them")
        self._iterated_in_worker = True
        reader = self.reader
        steps = len(reader)
        start = reader.step if reader.step < steps else 0  # as the reader: repeat after the end
        first = start if self._loaded_in_worker else start + info.id
        for step in range(first, steps, info.num_workers):
            self._worker_next = step + info.num_workers
            yield self._tensors(reader.batch_at(step))
        self._worker_next = steps


def _with_sources(out: dict, batch) -> dict:
    """A blended batch's `dataset_ids` (each row's build) as a tensor too."""
    ids = getattr(batch, "dataset_ids", None)
    if ids is not None:
        out["dataset_ids"] = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    return out


class UnitReaderDataset(_StepDataset):
    """`UnitReader(path, **kwargs)` as an IterableDataset of tensor dicts, one per step."""

    def __init__(self, path: str, **kwargs):
        super().__init__(UnitReader(path, **kwargs))

    def _tensors(self, batch) -> dict:
        return to_tensors(batch)


class BlendedUnitReaderDataset(UnitReaderDataset):
    """`BlendedUnitReader(builds, weights, **kwargs)`: the same tensors, and
    `dataset_ids` [rows] (each row's build)."""

    def __init__(self, builds, weights, **kwargs):
        from mintdim_beam.read.blended import BlendedUnitReader

        _StepDataset.__init__(self, BlendedUnitReader(builds, weights, **kwargs))

    def _tensors(self, batch) -> dict:
        return _with_sources(to_tensors(batch), batch)


def pack_tensors(batch) -> dict:
    """A `PackBatch` as a dict of tensors: `input_ids`, `labels` (the batch's
    convention, `label_shift`), `position_ids` and `document_ids` (over `input_ids`),
    `sample_ids`, `tokens` (the `seq_len + 1` ids), plus `step`, `epoch` and
    `label_shift`; a blend's `dataset_ids` too."""
    out = {"tokens": torch.from_numpy(np.ascontiguousarray(batch.tokens)),
           "input_ids": torch.from_numpy(np.ascontiguousarray(batch.input_ids)),
           "labels": torch.from_numpy(np.ascontiguousarray(batch.labels)),
           "position_ids": torch.from_numpy(np.ascontiguousarray(batch.position_ids[:, :-1])),
           "document_ids": torch.from_numpy(np.ascontiguousarray(batch.document_ids[:, :-1])),
           "sample_ids": torch.from_numpy(np.asarray(batch.sample_ids, dtype=np.int64)),
           "step": int(batch.step), "epoch": int(batch.epoch),
           "label_shift": batch.label_shift}
    return _with_sources(out, batch)


class PackReaderDataset(_StepDataset):
    """`PackReader(out, seq_len, **kwargs)` as an IterableDataset of tensor dicts, one
    per step (`pack_tensors`): `batch_size` rows of this rank, Megatron's samples."""

    def __init__(self, out, seq_len: int, **kwargs):
        super().__init__(PackReader(out, seq_len, **kwargs))

    def _tensors(self, batch) -> dict:
        return pack_tensors(batch)


class BlendedPackReaderDataset(PackReaderDataset):
    """`BlendedPackReader(builds, weights, seq_len, **kwargs)`: `pack_tensors` with
    `dataset_ids`."""

    def __init__(self, builds, weights, seq_len: int, **kwargs):
        from mintdim_beam.read.blended import BlendedPackReader

        _StepDataset.__init__(self, BlendedPackReader(builds, weights, seq_len, **kwargs))


def rows_per_rank(dataset) -> int:
    """The rows one step of `dataset` gives this rank (what a batch size is)."""
    reader = dataset.reader
    if hasattr(reader, "batch_size"):
        return reader.batch_size
    if getattr(reader, "pack_length", None) is None:
        raise ReaderArgumentError(
            argument="batch_size", value="a number (unpacked unit steps)",
            allowed="an unpacked UnitReader's rows differ by unit (tokens_per_step // "
                    "unit_size): give pack_length for a fixed batch size",
            allowed_vi="số dòng của UnitReader không đóng gói khác nhau theo unit: hãy "
                       "dùng pack_length để có batch size cố định")
    from mintdim_beam.read import order

    return order.rows_per_step(reader.tokens_per_step, reader.pack_length) // reader.world_size


def step_loader(dataset, *, batch_size: int | None = None, num_workers: int = 0,
                stateful: bool = True, **loader_kwargs):
    """A loader for a step dataset the way a torchtitan-style trainer makes one: given
    its `batch_size` (rows per rank a step), checked against the dataset's own rows (a
    loader would otherwise stack several steps), then a torchdata `StatefulDataLoader`
    (`stateful=True`; its `state_dict()` resumes exactly, workers included) or a torch
    `DataLoader`, with `batch_size=None`: the dataset already yields whole steps."""
    if batch_size is not None and batch_size != rows_per_rank(dataset):
        en = (f"{rows_per_rank(dataset)}, the rows one step gives this rank (PackReader's "
              "batch_size; tokens_per_step // pack_length // world_size): a trainer's "
              "local batch size is the reader's, set there")
        raise ReaderArgumentError(argument="batch_size", value=str(batch_size), allowed=en,
                                  allowed_vi=f"{rows_per_rank(dataset)}, số dòng mỗi bước "
                                             "của rank này: đặt batch size ở reader")
    if stateful:
        from torchdata.stateful_dataloader import StatefulDataLoader as Loader
    else:
        from torch.utils.data import DataLoader as Loader
    return Loader(dataset, batch_size=None, num_workers=num_workers, **loader_kwargs)
