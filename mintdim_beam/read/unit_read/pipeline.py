"""`pipeline("unit-read")`: mintdim 0.2.1's reader, call for call.

    batch = (pipeline("unit-read")
             .queue(entries=[{"path": "out/unit_128", "unit": 128, "batch": 8, "accum": 4}])
             .layout(sequence_template=["instruction", "token_template", "output"])
             .target(fields=["output"], index=[2], ignore_id=-100)
             .read())          # each read() on the same object returns the next batch

Same batches as mintdim 0.2.1, read after read (rows, wrap-around, spans, accum_index,
should_step), with one deliberate difference: `target_mask` comes from segment positions
only. mintdim also drops every position whose target token equals `pad_id` (or
`ignore_id`), so with pad == EOS a model never learns to stop; here a target inside a
target segment is a target whatever its id."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mintdim_beam.core.errors import UnitReadRuntimeError
from mintdim_beam.read.masks import label_mask
from mintdim_beam.read.unit_read.config import UnitReadConfig, validate
from mintdim_beam.read.unit_read.metadata import MetadataCache
from mintdim_beam.read.unit_read.queue import QueueState, SourceSpan
from mintdim_beam.read.unit_read.shards import ShardFiles


@dataclass(frozen=True)
class UnitBatch:
    """One micro-batch: int64 `input_ids` and `target_ids` (the next token; `ignore_id`
    in the last column), bool `target_mask` (the position's next token lies in a target
    segment), where the rows came from, and the gradient-accumulation position."""

    input_ids: np.ndarray
    target_ids: np.ndarray
    target_mask: np.ndarray
    source_spans: tuple[SourceSpan, ...]
    accum_index: int
    should_step: bool


class _Runtime:
    """The queue's cursors and the open shards: kept across reads until the
    configuration changes."""

    def __init__(self, config: UnitReadConfig):
        self.config = config
        self.queue = QueueState(config.queue)
        self.metadata = MetadataCache()
        self.shards = ShardFiles()
        self.targets = np.zeros(len(config.sequence_template), dtype=bool)
        self.targets[list(config.target_index)] = True

    def read(self) -> UnitBatch:
        entry = self.queue.entry
        meta = self.metadata.for_shard(entry.path)
        if meta.sequence_template != self.config.sequence_template:
            configured, actual = self.config.sequence_template, meta.sequence_template
            raise UnitReadRuntimeError(
                component="layout.sequence_template",
                problem="configured layout does not match length_field.json sequence_template; "
                        f"configured={configured!r}, metadata={actual!r}",
                problem_vi="layout đã cấu hình không khớp sequence_template của "
                           f"length_field.json; cấu hình={configured!r}, metadata={actual!r}")
        plan = self.queue.plan_next(self.shards.count(entry.path, entry.unit, meta))
        parts = [self.shards.rows(s.path, entry.unit, meta, s.start, s.count) for s in plan.spans]
        lengths = parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
        payload = parts[0][1] if len(parts) == 1 else np.concatenate([p[1] for p in parts])
        return UnitBatch(input_ids=payload, target_ids=_next_tokens(payload, self.config.ignore_id),
                         target_mask=_next_in_target(lengths, self.targets, entry.unit),
                         source_spans=plan.spans, accum_index=plan.accum_index,
                         should_step=plan.should_step)


def _next_tokens(payload: np.ndarray, ignore_id: int) -> np.ndarray:
    out = np.empty_like(payload)
    out[:, :-1] = payload[:, 1:]
    out[:, -1] = ignore_id
    return out


def _next_in_target(lengths: np.ndarray, targets: np.ndarray, unit: int) -> np.ndarray:
    """Position p is trained when token p + 1 lies in a target segment."""
    inside = label_mask(lengths, targets, unit)
    out = np.zeros_like(inside)
    out[:, :-1] = inside[:, 1:]
    return out


class UnitReadPipeline:
    """The fluent reader; nothing is checked or read before `read()`."""

    def __init__(self):
        self._queue = self._layout = self._target = None
        self._runtime: _Runtime | None = None

    def queue(self, *, entries: Sequence[dict]) -> "UnitReadPipeline":
        self._queue = {"entries": [dict(e) for e in entries]}  # mintdim's TypeError/ValueError
        self._runtime = None
        return self

    def layout(self, *, sequence_template: Sequence[str]) -> "UnitReadPipeline":
        self._layout = {"sequence_template": sequence_template}
        self._runtime = None
        return self

    def target(self, *, fields: Sequence[str], index: Sequence[int],
               ignore_id: int = -100) -> "UnitReadPipeline":
        """`fields[i]` is the segment name at `layout.sequence_template[index[i]]`."""
        self._target = {"fields": fields, "index": index, "ignore_id": ignore_id}
        self._runtime = None
        return self

    def read(self) -> UnitBatch:
        """The next batch. The configuration is validated at the first read after it
        was set (mintdim validates at every read, then keeps its queue state anyway)."""
        if self._runtime is None:
            self._runtime = _Runtime(validate(self._queue, self._layout, self._target))
        return self._runtime.read()
