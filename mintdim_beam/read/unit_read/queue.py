"""Which rows the next `read()` takes, as mintdim 0.2.1 plans them.

Each queue entry (one shard) has its own cursor. A read takes `batch` rows from the
current entry's cursor; past the shard's end it wraps to that shard's first rows (so a
batch may hold a row twice, or a shard's rows more than once when `batch` exceeds
them). When the read reaches or passes the shard's end, the next read moves to the next
entry (after the last, the first again). `accum_index` counts reads modulo the current
entry's `accum`, across entries; `should_step` is True on the read that completes an
accumulation."""
from __future__ import annotations

from dataclasses import dataclass

from mintdim_beam.core.errors import UnitReadQueueError
from mintdim_beam.read.unit_read.config import QueueEntry


@dataclass(frozen=True)
class SourceSpan:
    """Rows `[start, start + count)` of the shard file `path`."""

    path: str
    start: int
    count: int


@dataclass(frozen=True)
class Plan:
    entry: QueueEntry
    spans: tuple[SourceSpan, ...]
    accum_index: int
    should_step: bool


class QueueState:
    def __init__(self, entries: tuple[QueueEntry, ...]):
        if not entries:
            raise UnitReadQueueError(component="entries", problem="queue entries must not be empty",
                                     problem_vi="queue không được rỗng")
        self.entries = entries
        self.cursors = [0] * len(entries)
        self.current = 0
        self.accum_index = 0

    @property
    def entry(self) -> QueueEntry:
        return self.entries[self.current]

    def plan_next(self, total: int) -> Plan:
        """Advance past the next batch of the current entry, whose shard has `total` rows."""
        if type(total) is not int or total <= 0:
            raise UnitReadQueueError(
                component="total_records",
                problem=f"total_records must be a positive integer, got {total!r}",
                problem_vi=f"total_records phải là số nguyên dương, nhận {total!r}")
        entry, before = self.entry, self.cursors[self.current]
        if not 0 <= before < total:
            raise UnitReadQueueError(
                component="cursor",
                problem=f"cursor {before} is outside shard record count {total}",
                problem_vi=f"con trỏ {before} nằm ngoài số record của shard {total}")
        spans, cursor, left = [], before, entry.batch
        while left:
            take = min(left, total - cursor)
            spans.append(SourceSpan(entry.path, cursor, take))
            left -= take
            cursor = (cursor + take) % total
        accum = self.accum_index
        self.accum_index = (accum + 1) % entry.accum
        self.cursors[self.current] = cursor
        if before + entry.batch >= total:
            self.current = (self.current + 1) % len(self.entries)
        return Plan(entry, tuple(spans), accum, self.accum_index == 0)
