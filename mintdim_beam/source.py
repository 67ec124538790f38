"""JSONL input in byte ranges: plan ranges, read the physical lines that start inside
one, and turn per-range counts into exact line numbers and sample ids.

Lines end at `\\n`, `\\r\\n` or a lone `\\r` (Python's universal newlines). A line belongs
to the range holding its first byte, so every line is read by exactly one range.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import storage

DEFAULT_RANGE_BYTES = 64 << 20
_BLOCK = 1 << 16
_TERMINATOR = re.compile(rb"[\r\n]")


@dataclass(frozen=True)
class ByteRange:
    dataset: int
    file_pos: int  # position of the file within its dataset
    path: str
    range_no: int
    start: int
    end: int

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.dataset, self.file_pos, self.range_no)


def plan_ranges(datasets, range_bytes: int = DEFAULT_RANGE_BYTES) -> list[ByteRange]:
    if range_bytes <= 0:
        raise ValueError("input_range_bytes must be positive")
    ranges = []
    for dataset in datasets:
        for file_pos, source in enumerate(dataset.files):
            total = storage.size(source.path)
            starts = range(0, max(total, 1), range_bytes)
            for range_no, start in enumerate(starts):
                ranges.append(ByteRange(dataset.index, file_pos, source.path, range_no,
                                        start, min(start + range_bytes, total)))
    return ranges


def _terminator_end(handle, term_pos: int, block: bytes, idx: int) -> int:
    """Position just after the line terminator found at `term_pos` (`block[idx]`)."""
    if block[idx:idx + 1] == b"\n":
        return term_pos + 1
    if idx + 1 < len(block):
        following = block[idx + 1:idx + 2]
    else:
        handle.seek(term_pos + 1)
        following = handle.read(1)
    return term_pos + 2 if following == b"\n" else term_pos + 1


def first_line_start(handle, start: int) -> int | None:
    """Smallest line-start position >= start, or None when no line starts there."""
    if start == 0:
        return 0
    handle.seek(start - 1)
    previous = handle.read(1)
    if previous == b"\n":
        return start
    # A '\r' just before `start` may pair with a '\n' at `start`: scan from the '\r'.
    pos = start - 1 if previous == b"\r" else start
    handle.seek(pos)
    while True:
        block = handle.read(_BLOCK)
        if not block:
            return None
        match = _TERMINATOR.search(block)
        if match:
            return _terminator_end(handle, pos + match.start(), block, match.start())
        pos += len(block)


# Lines are read in blocks this size: the first batch of a range leaves after one block,
# not after the whole range (64 MiB by default) is in memory.
_READ_BLOCK = 1 << 20


def iter_range_lines(handle, start: int, end: int, block: int = _READ_BLOCK):
    """The physical lines (without terminators) whose first byte lies in [start, end),
    as they are read. Terminators are those of `bytes.splitlines`: \\n, \\r and \\r\\n."""
    first = first_line_start(handle, start)
    if first is None or first >= end:
        return
    handle.seek(first)
    pos, carry = first, []  # carry: the pieces of the line that starts at `pos`
    while pos < end:
        chunk = handle.read(block)
        if not chunk:
            if carry:
                yield _without_terminator(b"".join(carry))  # the file's last line
            return
        if (carry and not carry[-1].endswith(b"\r")
                and chunk.find(b"\n") < 0 and chunk.find(b"\r") < 0):
            carry.append(chunk)  # a long line goes on: joined once, when it ends
            continue
        lines = b"".join(carry + [chunk]).splitlines(keepends=True)
        # Unless it ends in '\\n', the last line may go on in the next block (a '\\r'
        # may be the first half of '\\r\\n').
        carry = [] if lines[-1].endswith(b"\n") else [lines.pop()]
        for line in lines:
            if pos >= end:
                return
            pos += len(line)
            yield _without_terminator(line)


def _without_terminator(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith((b"\n", b"\r")) else line


class RangeBatches:
    """Iterate one byte range as ((dataset, file, range, batch), entries) batches of `size`
    non-blank lines, each entry (local sample, local line, stripped text or None, UTF-8
    error or None); `lines` and `samples` count the range once it is exhausted.

    Plain Python: the ReadJSONL DoFn and a helper's head start (`encoder_process`) cut
    the same batches from it."""

    def __init__(self, handle, byte_range: ByteRange, size: int):
        self._handle, self._range, self._size = handle, byte_range, size
        self.lines = self.samples = 0

    def __iter__(self):
        key, size = self._range.key, self._size
        batch, batch_no, samples, lines = [], 0, 0, 0
        # Batches leave as their lines are read, so the encoders start at once.
        for raw in iter_range_lines(self._handle, self._range.start, self._range.end):
            local_line, lines = lines, lines + 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                entry = (samples, local_line, None,
                         f"invalid UTF-8: {exc.reason} at byte {exc.start}")
            else:
                stripped = text.strip()
                if not stripped:
                    continue  # blank lines take no sample_id
                entry = (samples, local_line, stripped, None)
            samples += 1
            batch.append(entry)
            if len(batch) == size:
                yield key + (batch_no,), batch
                batch, batch_no = [], batch_no + 1
        if batch:
            yield key + (batch_no,), batch
        self.lines, self.samples = lines, samples


class Numbering(dict):
    """(dataset, file, range) -> (line offset, sample offset); `totals[dataset]` holds the
    dataset's sample count."""

    def __init__(self, offsets: dict, totals: dict):
        super().__init__(offsets)
        self.totals = totals

    def __reduce__(self):
        return (Numbering, (dict(self), self.totals))


def number_ranges(datasets, counts: dict) -> Numbering:
    """Per-range (line offset, sample offset) from per-range (lines, samples) counts.

    Line numbers restart in every file; sample ids run across the files of a dataset.
    """
    offsets, totals = {}, {}
    ranges_by_file: dict[tuple[int, int], list[int]] = {}
    for (ds, file_pos, range_no) in counts:
        ranges_by_file.setdefault((ds, file_pos), []).append(range_no)
    for dataset in datasets:
        sample_offset = 0
        for file_pos in range(len(dataset.files)):
            line_offset = 0
            for range_no in sorted(ranges_by_file.get((dataset.index, file_pos), [])):
                key = (dataset.index, file_pos, range_no)
                offsets[key] = (line_offset, sample_offset)
                lines, samples = counts[key]
                line_offset += lines
                sample_offset += samples
        totals[dataset.index] = sample_offset
    return Numbering(offsets, totals)
