"""Input files are the ones planned: each file's identity (size and modification time
locally; generation on GCS, ETag on S3; what the filesystem offers elsewhere) is taken
when the ranges are planned, carried in every range, checked when a range is opened and
again when it is done, and recorded in the manifest.

Why: a file replaced or truncated mid-build otherwise gives a build mixed from two
versions, or with samples missing, that completes and verifies clean. The check is once
per range (a stat, or one metadata request, and two block reads), never per line.

The identity ends with a digest of the file's first and last `ENDS_BLOCK` bytes: a
rewrite of the same size whose modification time was put back still differs there.
A remote file found by a directory or pattern is planned by a worker
(`source.FileToPlan`): the launcher keeps the size and stamp its listing gave, and the
worker's probe, which adds the digest, must find the same ones.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import os

from mintdim_beam.core.errors import SourceChangedError, SourceFormatError, SourceParseError
from mintdim_beam.core.files import storage
from mintdim_beam.core.inputs import formats
from mintdim_beam.core.inputs.compression import EXPECTED, PLAIN, decompressed, sniff, stream_error

# Remote metadata keys that change whenever an object's bytes do, best first, and the
# name each is recorded under.
_STAMPS = (("generation", "generation"), ("ETag", "etag"), ("etag", "etag"),
           ("mtime", "mtime"), ("LastModified", "modified"), ("updated", "updated"),
           ("created", "created"))
_NOT_IDENTITY = ("file", "compression", "format", "bom")  # manifest entry keys that are not compared
GONE = "the file no longer exists"
ENDS_BLOCK = 1 << 16


def _ends(read, size: int) -> tuple:
    """("ends", digest) of the first and last ENDS_BLOCK bytes; `read(start, length)`."""
    digest = hashlib.blake2b(read(0, min(size, ENDS_BLOCK)), digest_size=12)
    if size > ENDS_BLOCK:
        tail = max(ENDS_BLOCK, size - ENDS_BLOCK)
        digest.update(read(tail, size - tail))
    return (("ends", digest.hexdigest()),)


def _local_ends(fd: int, size: int) -> tuple:
    return _ends(lambda start, length: os.pread(fd, length, start), size)


def _remote_ends(fs, path: str, size: int) -> tuple:
    return _ends(lambda start, length: fs.cat_file(path, start=start, end=start + length)
                 if length else b"", size)


def _scalar(value):
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return value if isinstance(value, (int, float, str)) else str(value)


def _local(stat) -> tuple:
    return (("size", int(stat.st_size)), ("mtime_ns", int(stat.st_mtime_ns)))


def _from_info(info: dict) -> tuple:
    found = [("size", int(info["size"]))]
    for key, name in _STAMPS:
        if info.get(key) not in (None, ""):
            found.append((name, _scalar(info[key])))
            break
    return tuple(found)


def listing_identity(info: dict) -> tuple:
    """The identity a listing entry gives (size and stamp, no `ends`): what planning
    takes for a remote file found by a directory or pattern (`source.FileToPlan`)."""
    return _from_info(info)


def _fresh_fs(path: str):
    """The path's filesystem, its listing cache dropped: another process may have
    changed the object since this one last looked."""
    fs = storage.filesystem(path)
    fs.invalidate_cache(path)
    return fs


def identity_of(path: str) -> tuple:
    """The file's identity now, as ((name, value), ...): size first, then a stamp, then
    the digest of its ends."""
    if not storage.is_url(path):
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            return _local(stat) + _local_ends(handle.fileno(), stat.st_size)
    fs = _fresh_fs(path)
    found = _from_info(fs.info(path))
    return found + _remote_ends(fs, path, found[0][1])


def describe(identity) -> str:
    parts = []
    for name, value in identity:
        if name == "size":
            parts.append(f"{value} bytes")
        elif name == "mtime_ns":
            when = datetime.datetime.fromtimestamp(value / 1e9, datetime.timezone.utc)
            parts.append(f"modified {when.isoformat()} (mtime_ns {value})")
        elif name == "ends":
            parts.append(f"first and last blocks {value}")
        else:
            parts.append(f"{name} {value}")
    return ", ".join(parts) or "unknown"


def probe(path: str, given: str) -> tuple[tuple, str, str, bool]:
    """(identity, codec, format, BOM) of an input at planning (`formats`). Anything but
    JSONL, a JSON array or Parquet, plain or gzip / zstd (and zstd without the
    `zstandard` package) is a SourceFormatError, before any output."""
    if not storage.is_url(path):
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            identity = _local(stat) + _local_ends(handle.fileno(), stat.st_size)
            head = handle.read(formats.HEAD_BYTES)
    else:
        fs = _fresh_fs(path)
        identity = _from_info(fs.info(path))
        size = identity[0][1]
        identity += _remote_ends(fs, path, size)
        head = fs.cat_file(path, start=0, end=min(formats.HEAD_BYTES, size)) if size else b""
    if head.startswith(formats.PARQUET_MAGIC):
        return identity, PLAIN, formats.PARQUET, False
    codec, found = sniff(head)
    if codec is None:
        raise SourceFormatError(file=given, found=found, expected=EXPECTED)
    text = head if codec == PLAIN else _decompressed_head(path, codec)
    found = formats.unreadable(text, None if codec == PLAIN else codec)
    if found is not None:
        raise SourceFormatError(file=given, found=found, expected=EXPECTED)
    kind, bom = formats.text_format(text)
    return identity, codec, kind, bom


def _decompressed_head(path: str, codec: str) -> bytes:
    """The first decompressed bytes; b"" when even they cannot be had (a corrupt or
    truncated stream is then reported where the build reads it, at its line)."""
    try:
        with contextlib.closing(storage.open_read(path)) as raw:
            stream = decompressed(raw, codec)
            head = b""
            while len(head) < formats.HEAD_BYTES:
                data = stream.read(formats.HEAD_BYTES - len(head))
                if not data:
                    break
                head += data
            return head
    except Exception:  # noqa: BLE001 - see the docstring
        return b""


def _open(path: str):
    """(binary handle, identity of what it reads). A local handle is checked with
    fstat, so the identity is that of the very file being read."""
    if not storage.is_url(path):
        handle = open(path, "rb")  # noqa: SIM115 - closed by open_range
        return handle, _local_identity(handle)
    fs = _fresh_fs(path)
    handle = fs.open(path, "rb")
    details = getattr(handle, "details", None)  # fsspec takes them when it opens
    if isinstance(details, dict) and "size" in details:
        found = _from_info(details)
        return handle, found + _remote_ends(fs, path, found[0][1])
    return handle, identity_of(path)


def _local_identity(handle) -> tuple:
    stat = os.fstat(handle.fileno())
    return _local(stat) + _local_ends(handle.fileno(), stat.st_size)


def _now(path: str, handle) -> tuple | None:
    """The identity after reading (None: gone). Locally the open file's own."""
    try:
        if not storage.is_url(path):
            return _local_identity(handle)
        return identity_of(path)
    except FileNotFoundError:
        return None


def _changed(byte_range, found) -> SourceChangedError | None:
    planned = byte_range.identity
    if not planned or found == planned:
        return None
    return SourceChangedError(file=byte_range.given or byte_range.path,
                              planned=describe(planned),
                              found=GONE if found is None else describe(found))


@contextlib.contextmanager
def open_range(byte_range):
    """A binary handle for reading `byte_range` (a `source.ByteRange`): decompressed
    when the file is gzip or zstd. Raises SourceChangedError when the file is not the
    planned one, on opening and when the reading ends (shrunk, grown, replaced, gone);
    a corrupt or truncated compressed stream is a SourceParseError at its line."""
    path, codec = byte_range.path, byte_range.codec
    try:
        raw, found = _open(path)
    except FileNotFoundError:
        error = _changed(byte_range, None)
        if error is None:
            raise
        raise error from None
    with contextlib.closing(raw):
        error = _changed(byte_range, found)
        if error is not None:
            raise error
        stream = raw if codec == PLAIN else decompressed(raw, codec)
        try:
            yield stream
        except Exception as exc:
            error = _changed(byte_range, _now(path, raw))  # a changed file explains it
            if error is not None:
                raise error from None
            reason = None if codec == PLAIN else stream_error(exc, codec)
            if reason is None:
                raise
            raise SourceParseError(file=byte_range.given or path,
                                   line=stream.lines_ended + 1, reason=reason) from None
        error = _changed(byte_range, _now(path, raw))
        if error is not None:
            raise error


def manifest_inputs(ranges) -> dict:
    """{dataset: [input_entry, ...]} in file order, from the planned ranges (each
    file's first range)."""
    firsts = {(r.dataset, r.file_pos): r for r in ranges if r.range_no == 0}
    inputs: dict = {}
    for key in sorted(firsts):
        inputs.setdefault(key[0], []).append(input_entry(firsts[key]))
    return inputs


def input_entry(first_range) -> dict:
    """{"file": given, "size": ..., <stamp>: ..., ["compression"], ["format"], ["bom"]}
    from a file's first range. `format` is written for a JSON array or Parquet file,
    `bom` (true) for text that starts with a UTF-8 BOM: how it was read, not part of its
    identity."""
    r = first_range
    entry = {"file": r.given or r.path, **dict(r.identity)}
    if r.codec != PLAIN:
        entry["compression"] = r.codec
    if r.format != formats.JSONL:
        entry["format"] = r.format
    if r.bom:
        entry["bom"] = True
    return entry


def entries_by_dataset(firsts) -> dict:
    """{dataset: [entry, ...]} in file order from (dataset, file_pos, entry) triples
    (the `Ranges` stage's `inputs` output)."""
    inputs: dict = {}
    for ds, _, entry in sorted(firsts, key=lambda t: t[:2]):
        inputs.setdefault(ds, []).append(entry)
    return inputs


def recorded_status(entry) -> str:
    """Whether an input recorded in a manifest is still what the build read (for
    `verify`; informational: a later change does not make a finished build wrong)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        return f"unreadable entry {entry!r}"
    recorded = tuple((k, v) for k, v in entry.items() if k not in _NOT_IDENTITY)
    try:
        now = dict(identity_of(storage.resolve(entry["file"])))
    except FileNotFoundError:
        return "not found" + ("" if storage.is_url(entry["file"]) or os.path.isabs(
            entry["file"]) else " (relative paths are looked up from the current directory)")
    except Exception as exc:  # noqa: BLE001 - informational only: say why, go on
        return f"cannot be checked ({type(exc).__name__}: {exc})"
    compared = [(k, v) for k, v in recorded if k in now]
    if not compared:
        return f"cannot be compared (recorded {describe(recorded)}; now {describe(now.items())})"
    if all(now[k] == v for k, v in compared):
        return f"unchanged ({describe(recorded)})"
    return (f"changed since the build (recorded {describe(recorded)}; "
            f"now {describe(tuple(now.items()))})")
