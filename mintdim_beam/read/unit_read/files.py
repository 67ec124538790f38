"""Paths of a unit-read queue, local or any fsspec URL: what a path is, a directory's
direct `.bin` children, and a shard's identity (so a rewritten shard is mapped again).

Local paths keep mintdim's spelling (`str(Path(path))`), because batches report them in
their source spans."""
from __future__ import annotations

import os
import posixpath
from pathlib import Path, PurePosixPath

from mintdim_beam.core.files import storage


def kind(path: str) -> str | None:
    """"file", "dir", "other" or None (does not exist)."""
    if storage.is_url(path):
        fs = storage.filesystem(path)
        fs.invalidate_cache(path)
        if not fs.exists(path):
            return None
        return "dir" if fs.isdir(path) else "file"
    p = Path(path)
    if not p.exists():
        return None
    return "file" if p.is_file() else "dir" if p.is_dir() else "other"


def name(path: str) -> str:
    return PurePosixPath(path.rstrip("/")).name if storage.is_url(path) else Path(path).name


def normal(path: str) -> str:
    return path if storage.is_url(path) else str(Path(path))


def _is_shard_name(file_name: str) -> bool:
    return file_name.endswith(".bin") and file_name != ".bin"


def direct_bin_files(directory: str) -> tuple[str, ...]:
    """The directory's direct `*.bin` files, sorted by name."""
    if not storage.is_url(directory):
        base = Path(directory)
        return tuple(str(c) for c in sorted(base.iterdir())
                     if c.is_file() and _is_shard_name(c.name))
    fs = storage.filesystem(directory)
    fs.invalidate_cache(directory)
    found = []
    for entry in fs.ls(directory, detail=True):
        if entry.get("type") == "file" and _is_shard_name(posixpath.basename(entry["name"])):
            found.append(posixpath.join(directory.rstrip("/"), posixpath.basename(entry["name"])))
    return tuple(sorted(found, key=posixpath.basename))


def metadata_dir(path: str) -> str:
    """Where `length_field.json` is for a queue path: beside a `.bin` file, or above it
    when the file sits in a `unit_<size>` directory (mintdim's rule)."""
    if name(path) == "length_field.json":
        return parent(path)
    if name(path).endswith(".bin") and name(path) != ".bin":
        directory = parent(path)
        return parent(directory) if name(directory).startswith("unit_") else directory
    return path


def parent(path: str) -> str:
    if storage.is_url(path):
        return path.rstrip("/").rsplit("/", 1)[0]
    return str(Path(path).parent)


def join(directory: str, file_name: str) -> str:
    return storage.join(directory, file_name)


def identity(path: str) -> tuple | None:
    """(size, mtime, inode) of a local file, (size, etag or mtime) of a URL; None when
    it does not exist or is not a file."""
    if storage.is_url(path):
        fs = storage.filesystem(path)
        fs.invalidate_cache(path)
        try:
            info = fs.info(path)
        except FileNotFoundError:
            return None
        if info.get("type") != "file":
            return None
        return (int(info["size"]), str(info.get("ETag") or info.get("etag")
                                       or info.get("generation") or info.get("mtime")
                                       or info.get("updated") or info.get("created")))
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not os.path.isfile(path):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)
