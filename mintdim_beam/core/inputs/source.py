"""Inputs in ranges: plan ranges, read the physical lines of JSONL that start inside
one (or the rows of a Parquet range, the elements of a JSON array), and turn per-range
counts into exact line numbers and sample ids.

Lines end at `\\n`, `\\r\\n` or a lone `\\r` (Python's universal newlines). A line belongs
to the range holding its first byte, so every line is read by exactly one range.
A gzip or zstd file cannot be split: it is one range, read decompressed (`compression`).
A Parquet range is one or more whole row groups (`parquet`); a JSON array is one range
(`json_array`); a UTF-8 BOM at the start of a JSONL file is skipped (`formats`).
Each range carries its file's identity at planning, checked when it is read
(`input_files`). A remote file a listing found is planned where it is read
(`FileToPlan`): planning 100,000 objects then costs their listing, not a request each.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RANGE_BYTES = 64 << 20
# Lines longer than this are not read (see `LongLine`): tokenizing one took up to 165
# times its size in memory here, so one 200 MB line could take a worker past 15 GB.
DEFAULT_MAX_LINE_BYTES = 16 << 20
UNBOUNDED = (1 << 63) - 1  # the end of a range that is a whole compressed file
_BLOCK = 1 << 16
_TERMINATOR = re.compile(rb"[\r\n]")


@dataclass(frozen=True)
class ByteRange:
    dataset: int
    file_pos: int  # position of the file within its dataset
    path: str
    range_no: int
    start: int
    end: int  # UNBOUNDED for a compressed file: read to the end of its decompressed text
    given: str = ""  # the path as the user wrote it, for errors
    identity: tuple = ()  # the file's identity at planning (`input_files`); () = unchecked
    codec: str = "plain"  # "gzip" / "zstd": the range is the whole file, decompressed
    format: str = "jsonl"  # or "json_array" (one range), "parquet" (`row_groups`)
    bom: bool = False  # the (decompressed) text starts with a UTF-8 BOM, skipped
    row_groups: tuple = ()  # Parquet: (first, end) row groups; start/end are progress bytes

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.dataset, self.file_pos, self.range_no)

    @property
    def tells_progress(self) -> bool:
        """Whether the read handle's position says how far into the range reading is."""
        return self.codec == "plain" and self.format != "parquet"


def plan_ranges(datasets, range_bytes: int = DEFAULT_RANGE_BYTES,
                defer: bool = False) -> list:
    """Every input file's ranges, in order. With `defer`, a remote file a listing found
    (its `listed` identity known) is one `FileToPlan` instead, planned where it is read:
    planning then makes no request per file."""
    if range_bytes <= 0:
        raise ValueError("input_range_bytes must be positive")
    ranges = []
    for dataset in datasets:
        for file_pos, source in enumerate(dataset.files):
            if defer and getattr(source, "listed", ()):
                ranges.append(FileToPlan(dataset.index, file_pos, source.path, source.given,
                                         source.listed, range_bytes))
            else:
                ranges += plan_file(dataset.index, file_pos, source, range_bytes)
    return ranges


def plan_file(dataset: int, file_pos: int, source, range_bytes: int) -> list[ByteRange]:
    """One file's ranges: its identity and format probed now (`input_files.probe`)."""
    from mintdim_beam.core.inputs.input_files import probe

    identity, codec, kind, bom = probe(source.path, source.given)
    extra = {"given": source.given, "identity": identity, "codec": codec,
             "format": kind, "bom": bom}
    if kind == "parquet":
        return _parquet_ranges(dataset, file_pos, source, range_bytes, extra)
    if codec != "plain" or kind == "json_array":  # cannot be split
        return [ByteRange(dataset, file_pos, source.path, 0, 0, UNBOUNDED, **extra)]
    total = dict(identity)["size"]
    starts = range(0, max(total, 1), range_bytes)
    return [ByteRange(dataset, file_pos, source.path, range_no, start,
                      min(start + range_bytes, total), **extra)
            for range_no, start in enumerate(starts)]


@dataclass(frozen=True)
class FileToPlan:
    """A remote input whose ranges are planned by the worker that takes it (`ranges`):
    its format is found from its first bytes, which planning 100,000 objects would
    otherwise fetch one request at a time. Reads like its file's first range to the
    launcher (size for progress and the disk check, the key of range 0)."""

    dataset: int
    file_pos: int
    path: str
    given: str
    identity: tuple  # size and stamp from the listing
    range_bytes: int
    range_no: int = 0
    start: int = 0
    codec: str = "plain"
    format: str = "jsonl"
    bom: bool = False

    @property
    def end(self) -> int:
        return int(dict(self.identity)["size"])

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.dataset, self.file_pos, 0)

    def ranges(self) -> list[ByteRange]:
        """The file's ranges as `plan_file` makes them; SourceChangedError when the
        file is no longer the one listed."""
        from mintdim_beam.core.errors import SourceChangedError
        from mintdim_beam.core.inputs.input_files import describe

        planned = plan_file(self.dataset, self.file_pos, self, self.range_bytes)
        found = planned[0].identity[:len(self.identity)]
        if found != self.identity:
            raise SourceChangedError(file=self.given or self.path,
                                     planned=describe(self.identity), found=describe(found))
        return planned


def _parquet_ranges(dataset: int, file_pos: int, source, range_bytes: int, extra) -> list:
    from mintdim_beam.core.errors import SourceFormatError
    from mintdim_beam.core.inputs import parquet
    from mintdim_beam.core.inputs.compression import EXPECTED

    try:
        groups = parquet.row_groups(source.path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise SourceFormatError(file=source.given, found=f"a Parquet file whose footer cannot "
                                f"be read ({type(exc).__name__}: {exc})",
                                expected=EXPECTED) from None
    return [ByteRange(dataset, file_pos, source.path, range_no, start, end,
                      row_groups=(first, last), **extra)
            for range_no, (first, last, start, end)
            in enumerate(parquet.plan_groups(groups, range_bytes))]


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


class LineTooLong(Exception):
    """Raised by decoding a `LongLine`; `.line` is the marker."""

    def __init__(self, line):
        super().__init__(long_line_reason(line.nbytes, line.limit))
        self.line = line


class LongLine:
    """Stands for a line over the bound, whose bytes were scanned, not kept. Decoding it
    raises `LineTooLong`: readers already catch decode errors, so the common line needs
    no type test."""

    __slots__ = ("nbytes", "limit")

    def __init__(self, nbytes: int, limit: int):
        self.nbytes, self.limit = nbytes, limit

    def decode(self, *_):
        raise LineTooLong(self)


def long_line_reason(nbytes: int, limit: int) -> str:
    return f"line of {nbytes} bytes exceeds --max_line_bytes {limit}"


def iter_range_lines(handle, start: int, end: int, block: int = _READ_BLOCK,
                     limit: int | None = None):
    """The physical lines (without terminators) whose first byte lies in [start, end),
    as they are read. Terminators are those of `bytes.splitlines`: \\n, \\r and \\r\\n.
    A line over `limit` bytes (terminator excluded) comes as a `LongLine`, or as b""
    when it is only ASCII whitespace (a blank line): at most `limit` + 2 blocks of it are
    ever held."""
    first = first_line_start(handle, start)
    if first is None or first >= end:
        return
    handle.seek(first)
    limit = (1 << 62) if limit is None else limit
    # carry: the pieces of the line that starts at `pos`, `carried` bytes of it without
    # its terminator; ahead: bytes read past a long line, to be split before reading on
    pos, carry, carried, ahead = first, [], 0, b""
    while pos < end:
        if carried > limit:
            line, size, ahead = _scan_long_line(handle, carry, carried, limit, block)
            yield line
            pos, carry, carried = pos + size, [], 0
            continue
        chunk = ahead or handle.read(block)
        ahead = b""
        if not chunk:
            if carry:
                yield _without_terminator(b"".join(carry))  # the file's last line
            return
        if (carry and not carry[-1].endswith(b"\r")
                and chunk.find(b"\n") < 0 and chunk.find(b"\r") < 0):
            carry.append(chunk)  # a long line goes on: joined once, when it ends
            carried += len(chunk)
            continue
        lines = b"".join(carry + [chunk]).splitlines(keepends=True)
        # Unless it ends in '\\n', the last line may go on in the next block (a '\\r'
        # may be the first half of '\\r\\n').
        carry = [] if lines[-1].endswith(b"\n") else [lines.pop()]
        carried = len(carry[0]) - carry[0].endswith(b"\r") if carry else 0  # its content
        if lines and max(map(len, lines)) > limit:  # one pass in C per block
            for line in lines:
                if pos >= end:
                    return
                pos += len(line)
                yield _bounded(_without_terminator(line), limit)
            continue
        for line in lines:
            if pos >= end:
                return
            pos += len(line)
            yield _without_terminator(line)


def _bounded(line: bytes, limit: int):
    return line if len(line) <= limit else _long_line(len(line), limit, line.isspace())


def _scan_long_line(handle, carry: list, carried: int, limit: int, block: int):
    """Read on to the end of the line whose first pieces are `carry` (`carried` bytes, and
    perhaps a final '\\r' that ends it), keeping none of it. Returns (its
    `LongLine`, or b"" if blank; bytes it takes with its terminator; bytes read past it)."""
    blank, content = all(piece.isspace() for piece in carry), carried
    if carry[-1].endswith(b"\r"):  # it has ended: only a '\\n' may still pair with it
        after = handle.read(block)
    else:
        while True:
            piece = handle.read(block)
            match = _TERMINATOR.search(piece)
            stop = match.start() if match else len(piece)
            content += stop
            blank = blank and (stop == 0 or piece[:stop].isspace())
            if match is None:
                if piece:
                    continue
                return _long_line(content, limit, blank), content, b""  # the file's last
            after = piece[stop + 1:]
            if piece[stop] == 0x0A:  # '\\n'
                return _long_line(content, limit, blank), content + 1, after
            after = after or handle.read(block)  # a '\\r': is a '\\n' next?
            break
    if after[:1] == b"\n":
        return _long_line(content, limit, blank), content + 2, after[1:]
    return _long_line(content, limit, blank), content + 1, after


def _long_line(nbytes: int, limit: int, blank: bool):
    return b"" if blank else LongLine(nbytes, limit)


def _without_terminator(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith((b"\n", b"\r")) else line


class RangeBatches:
    """Iterate one byte range as ((dataset, file, range, batch), entries) batches of `size`
    non-blank lines, each entry (local sample, local line, stripped text or None, UTF-8
    error or None); `lines` and `samples` count the range once it is exhausted.

    Plain Python: the ReadJSONL DoFn and a helper's head start (`encoder_process`) cut
    the same batches from it. A line over `max_line_bytes` is an entry whose error is
    its `LongLine` (it takes a sample number: the `skip` policy indexes it)."""

    def __init__(self, handle, byte_range: ByteRange, size: int,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self._handle, self._range, self._size = handle, byte_range, size
        self._limit = max_line_bytes
        self.lines = self.samples = 0

    def __iter__(self):
        if self._range.format != "jsonl":
            yield from self._rows()
            return
        key, size = self._range.key, self._size
        batch, batch_no, samples, lines = [], 0, 0, 0
        raws = iter_range_lines(self._handle, self._range.start, self._range.end,
                                limit=self._limit)
        if self._range.bom and self._range.start == 0:
            raws = _without_bom(raws)
        # Batches leave as their lines are read, so the encoders start at once.
        for raw in raws:
            local_line, lines = lines, lines + 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                entry = (samples, local_line, None,
                         f"invalid UTF-8: {exc.reason} at byte {exc.start}")
            except LineTooLong as exc:
                entry = (samples, local_line, None, exc.line)
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

    def _rows(self):
        """A Parquet range's rows or a JSON array's elements: each a sample at its row
        or element number, the parsed object in the text slot (`render_batch.parse_row`
        takes it as is), an element that is not an object a problem."""
        from mintdim_beam.core.inputs import json_array, parquet
        from mintdim_beam.core.render.template import json_kind

        byte_range, key, size = self._range, self._range.key, self._size
        if byte_range.format == "parquet":
            values = parquet.iter_rows(self._handle, *byte_range.row_groups, size,
                                       byte_range.given or byte_range.path)
        else:
            values = json_array.iter_elements(self._handle, byte_range.given or byte_range.path,
                                              self._limit)
        batch, batch_no, count = [], 0, 0
        for value in values:
            if type(value) is dict:
                batch.append((count, count, value, None))
            else:
                batch.append((count, count, None, f"JSON array element is a JSON "
                              f"{json_kind(value)}, not an object"))
            count += 1
            if len(batch) == size:
                yield key + (batch_no,), batch
                batch, batch_no = [], batch_no + 1
        if batch:
            yield key + (batch_no,), batch
        self.lines = self.samples = count


def _without_bom(raws):
    """The lines, the UTF-8 BOM at the start of the first one dropped."""
    for raw in raws:
        yield raw[3:] if type(raw) is bytes and raw.startswith(b"\xef\xbb\xbf") else raw
        break
    yield from raws


class Numbering(dict):
    """(dataset, file, range) -> (line offset, sample offset); `totals[dataset]` holds the
    dataset's sample count; `rejected[(dataset, file, range)]` the sorted local sample
    numbers of the range's rows rejected under `on_bad_row="skip"`, which take no id."""

    def __init__(self, offsets: dict, totals: dict, rejected: dict | None = None):
        super().__init__(offsets)
        self.totals = totals
        self.rejected = rejected or {}

    def sample_ids(self, key, local):
        """The sample ids of local sample numbers (an int or an int64 array) of the
        range `key`: dense over the accepted rows."""
        offset = self[key][1]
        gaps = self.rejected.get(key)
        if gaps is None:
            return offset + local
        import numpy as np

        return offset + local - np.searchsorted(gaps, local)

    def __reduce__(self):
        return (Numbering, (dict(self), self.totals, self.rejected))


def number_ranges(datasets, counts: dict, rejected=()) -> Numbering:
    """Per-range (line offset, sample offset) from per-range (lines, samples) counts and
    the rows rejected under `on_bad_row="skip"` (`PendingError`s: range and sample).

    Line numbers restart in every file; sample ids run across the files of a dataset,
    over the rows that became samples.
    """
    import numpy as np

    gaps: dict = {}
    for row in rejected:
        gaps.setdefault(row.order[:3], []).append(row.local_sample)
    gaps = {key: np.unique(np.asarray(found, dtype=np.int64)) for key, found in gaps.items()}
    offsets, totals = {}, {}
    ranges_by_file: dict[tuple[int, int], list[int]] = {}
    for (ds, file_pos, range_no) in counts:
        ranges_by_file.setdefault((ds, file_pos), []).append(range_no)
    for dataset in datasets:
        sample_offset = 0
        # the files with ranges, in order (a file without any adds nothing); so a
        # dataset whose "files" are key ranges (`records.order`) need not list them
        for file_pos in sorted(fp for ds, fp in ranges_by_file if ds == dataset.index):
            line_offset = 0
            for range_no in sorted(ranges_by_file.get((dataset.index, file_pos), [])):
                key = (dataset.index, file_pos, range_no)
                offsets[key] = (line_offset, sample_offset)
                lines, samples = counts[key]
                line_offset += lines
                sample_offset += samples - (len(gaps[key]) if key in gaps else 0)
        totals[dataset.index] = sample_offset
    return Numbering(offsets, totals, gaps)
