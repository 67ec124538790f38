"""One I/O layer for every path: local files, gs:// (gcsfs), s3:// (s3fs), memory://.

Every read and write of the product goes through here, so remote and local paths share
one code path and the temp-then-rename rule lives in one place.
"""
from __future__ import annotations

import contextlib
import os
import posixpath
import re
import uuid

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

TMP_DIR_NAME = "_mintdim_tmp"


def is_url(path: str) -> bool:
    return bool(_URL.match(path))


def resolve(path: str) -> str:
    """Absolute form used for I/O: workers may run with another working directory."""
    if is_url(path):
        return path
    return os.path.abspath(path)


def _fsspec():
    """fsspec, imported on first use: a helper encoder process that only reads local
    files never needs it (0.06 s of its start-up)."""
    import fsspec

    return fsspec


def filesystem(path: str):
    fs, _ = _fsspec().core.url_to_fs(path)
    return fs


def join(base: str, *parts: str) -> str:
    if is_url(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


def _fresh(path: str):
    """The filesystem with its listing cache dropped for `path`: another process (or an
    earlier build) may have changed the bucket since this process last looked."""
    fs = filesystem(path)
    fs.invalidate_cache(path)
    return fs


def exists(path: str) -> bool:
    return _fresh(path).exists(path)


def is_file(path: str) -> bool:
    return _fresh(path).isfile(path)


def is_dir(path: str) -> bool:
    return _fresh(path).isdir(path)


def size(path: str) -> int:
    return int(filesystem(path).size(path))


def read_bytes(path: str) -> bytes:
    """The whole file, looked up afresh: a listing cached while the directory was being
    written (the ownership claim lists it) must not hide a file written since."""
    with _fresh(path).open(path, "rb") as handle:
        return handle.read()


def read_range(path: str, start: int, length: int) -> bytes:
    """`length` bytes of a file from byte `start`; a shorter file is an error."""
    with _fsspec().open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(length)
    if len(data) != length:
        raise OSError(f"{path}: {len(data)} bytes at {start}, {length} expected")
    return data


def open_read(path: str):
    """A binary file object for reading; a local path is opened by Python itself."""
    if not is_url(path):
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    return _fsspec().open(path, "rb").open()


def is_new_or_empty_dir(path: str) -> bool:
    fs = _fresh(path)
    if not fs.exists(path):
        return True
    if not fs.isdir(path):
        return False
    try:
        return not fs.ls(path, detail=False)
    except FileNotFoundError:  # an object store "directory" that holds nothing
        return True


def rename(fs, source: str, target: str) -> None:
    """Local: an atomic os.rename. Object stores have no rename; a copy is atomic per
    object (it appears whole or not at all), then the temporary object is deleted."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if "file" in protocols or "memory" in protocols:
        fs.mv(source, target)
    else:
        fs.copy(source, target)
        fs.rm(source)


def makedirs(path: str) -> None:
    filesystem(path).makedirs(path, exist_ok=True)


def missing_dirs(path: str) -> list:
    """The directories from `path` upwards that do not exist yet, deepest first (local
    only: object stores have no directories)."""
    if is_url(path):
        return []
    missing = []
    while path and not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def tmp_dir(output_dir: str) -> str:
    return join(output_dir, TMP_DIR_NAME)


def run_scratch(output_dir: str, run_id: str) -> str:
    """A run's own scratch dir: two runs never share a part or block name."""
    return join(tmp_dir(output_dir), run_id) if run_id else tmp_dir(output_dir)


def _new_temp(fs, output_dir: str, scratch: str | None = None) -> str:
    """A unique temporary name, in the output dir's scratch dir unless told otherwise."""
    scratch = scratch or tmp_dir(output_dir)
    fs.makedirs(scratch, exist_ok=True)
    return join(scratch, f"{uuid.uuid4().hex}.tmp")


@contextlib.contextmanager
def writing(output_dir: str):
    """A failed write (disk full, quota, permissions, read-only filesystem) becomes one
    OutputWriteError naming the output directory, carried across any runner's worker
    boundary, instead of an OSError deep inside a runner's traceback."""
    try:
        yield
    except OSError as exc:
        from mintdim_beam.core.errors import OutputWriteError
        from mintdim_beam.core.errors.failures import WorkerFailure

        reason = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
        raise WorkerFailure(OutputWriteError(directory=output_dir, reason=reason).to_payload()) from exc


def write_atomic(path: str, data: bytes, output_dir: str, scratch: str | None = None) -> None:
    """Write under a unique temporary name inside the output dir, then rename into place.

    A retried or duplicated bundle writes the same bytes again, so whichever rename
    lands last leaves an identical file: exactly-once in effect.
    """
    with writing(output_dir):
        _write_atomic(path, data, output_dir, scratch)


def _write_atomic(path: str, data: bytes, output_dir: str, scratch: str | None) -> None:
    fs = filesystem(path)
    temp = _new_temp(fs, output_dir, scratch)
    fs.makedirs(posixpath.dirname(path) if is_url(path) else os.path.dirname(path), exist_ok=True)
    with fs.open(temp, "wb") as handle:
        handle.write(data)
    rename(fs, temp, path)


def write_pieces_atomic(path: str, pieces: list, output_dir: str) -> None:
    """`write_atomic` of the pieces joined: each is bytes, or a (file, start, length)
    range of a file. For a local path the ranges are copied by the kernel
    (`os.copy_file_range`), never through a Python buffer."""
    copy_range = getattr(os, "copy_file_range", None)
    if is_url(path) or copy_range is None:
        write_atomic(path, pieces_bytes(pieces), output_dir)
        return
    with writing(output_dir):
        _copy_pieces(copy_range, path, pieces, output_dir)


def _copy_pieces(copy_range, path: str, pieces: list, output_dir: str) -> None:
    fs = filesystem(path)
    temp = _new_temp(fs, output_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(temp, "wb", buffering=0) as out:
        for piece in pieces:
            if isinstance(piece, bytes):
                _write_all(out, piece)
            else:
                _copy_range(copy_range, piece, out)
    rename(fs, temp, path)


def pieces_bytes(pieces: list) -> bytes:
    """The pieces of `write_pieces_atomic` joined in memory, ranges read."""
    return b"".join(p if isinstance(p, bytes) else read_range(*p) for p in pieces)


def pieces_size(pieces: list) -> int:
    return sum(len(p) if isinstance(p, bytes) else p[2] for p in pieces)


def _write_all(out, data) -> None:
    view = memoryview(data)
    while view:
        view = view[out.write(view):]


def _copy_range(copy_range, piece, out) -> None:
    source, start, length = piece
    with open(source, "rb", buffering=0) as src:
        done = 0
        while done < length:
            try:
                copied = copy_range(src.fileno(), out.fileno(), length - done, start + done)
            except OSError:  # not between these filesystems: copy it ourselves
                _write_all(out, read_range(source, start + done, length - done))
                return
            if copied == 0:
                raise OSError(f"{source}: {done} bytes at {start}, {length} expected")
            done += copied


def write_partial_temp(data: bytes, output_dir: str) -> str:
    """What a worker killed mid-write leaves behind: a temp file, never a final name."""
    fs = filesystem(output_dir)
    temp = _new_temp(fs, output_dir)
    with fs.open(temp, "wb") as handle:
        handle.write(data)
    return temp


def write_stream_atomic(path: str, chunks, output_dir: str) -> int:
    """`write_atomic` of an iterable of byte chunks, streamed (never whole in memory);
    returns the bytes written."""
    with writing(output_dir):
        fs = filesystem(path)
        temp = _new_temp(fs, output_dir)
        fs.makedirs(posixpath.dirname(path) if is_url(path) else os.path.dirname(path),
                    exist_ok=True)
        written = 0
        with fs.open(temp, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                written += len(chunk)
        rename(fs, temp, path)
    return written


def write_text_atomic(path: str, text: str, output_dir: str, scratch: str | None = None) -> None:
    write_atomic(path, text.encode("utf-8"), output_dir, scratch)


def concat_atomic(target: str, parts: list[str], output_dir: str, block: int = 8 << 20) -> None:
    """Join part files, in the order given, into one file (streamed, never whole in memory)."""
    with writing(output_dir):
        _concat(target, parts, output_dir, block)


def _concat(target: str, parts: list[str], output_dir: str, block: int) -> None:
    fs = filesystem(target)
    temp = _new_temp(fs, output_dir)
    with fs.open(temp, "wb") as out:
        for part in parts:
            with fs.open(part, "rb") as src:
                while True:
                    chunk = src.read(block)
                    if not chunk:
                        break
                    out.write(chunk)
    rename(fs, temp, target)


def remove_tree(path: str) -> None:
    fs = _fresh(path)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def list_dir(path: str) -> list[str]:
    fs = _fresh(path)
    if not fs.exists(path):
        return []
    return sorted(fs.ls(path, detail=False))
