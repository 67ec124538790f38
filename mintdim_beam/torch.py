"""`UnitReaderDataset`: a `UnitReader` as a PyTorch `IterableDataset` of tensor batches.

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
from mintdim_beam.read import Batch, UnitReader

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
    out.update(unit_size=int(batch.unit_size), epoch=int(batch.epoch), step=int(batch.step))
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


class UnitReaderDataset(IterableDataset):
    """`UnitReader(path, **kwargs)` as an IterableDataset of tensor dicts, one per step;
    see the module docstring for workers and resume."""

    def __init__(self, path: str, **kwargs):
        super().__init__()
        self.reader = UnitReader(path, **kwargs)
        self._iterated_in_worker = False

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
        resumes with the step after it, correct with any number of workers."""
        if after is None:
            return self.reader.state_dict()
        epoch, step = int(after["epoch"]), int(after["step"]) + 1
        if epoch == self.reader.epoch:  # with its packing window: a resume packs that only
            return self.reader.state_at(step)
        state = self.reader.state_dict()  # another epoch's: its own plan is checked on load
        state.pop("window", None)
        state.pop("steps_in_epoch", None)
        state["epoch"], state["step"] = epoch, step
        return state

    def load_state_dict(self, state: dict) -> None:
        self.reader.load_state_dict(state)

    def __iter__(self):
        _refuse_loader_batching(sys._getframe(1))
        return self._batches()

    def _batches(self):
        info = get_worker_info()
        if info is None:  # this process: the reader moves, so state_dict() stays right
            for batch in self.reader:
                yield to_tensors(batch)
            return
        if self._iterated_in_worker:
            raise RuntimeError("UnitReaderDataset does not support persistent_workers=True: "
                               "the workers keep the copy of the dataset they started with, "
                               "so set_epoch and load_state_dict would not reach them")
        self._iterated_in_worker = True
        reader = self.reader
        steps = len(reader)
        start = reader.step if reader.step < steps else 0  # as the reader: repeat after the end
        for step in range(start + info.id, steps, info.num_workers):
            yield to_tensors(reader.batch_at(step))
