"""`source.files` entries turned into input files, before any output: a path to a file is
that file; a directory is its direct children named like an input (`INPUT_SUFFIXES`, not
hidden); a glob pattern (`*`, `?`, `[...]`, `**`) is the files it matches. Locally and
on gs:// / s3:// alike, through fsspec (`core.files.storage`).

Why here and not in the config checks: the expansion is I/O (listings) and one rule for
every pipeline; the configs only say which error to raise.

Rules the rest of the code relies on:
- An entry's files come in bytewise order of their paths, entries in the order written,
  so the same tree gives the same inputs, sample ids and bytes on every run.
- Each file keeps the spelling of its entry (`in/dir` gives `in/dir/a.jsonl`, also for a
  relative path or a `gcs://` alias): that is what index rows and the manifest record,
  and a `build_config` listing the expanded paths finds the same files again.
- A path that is a file wins over reading it as a pattern (`data[1].jsonl`).
- An entry that matches nothing (empty directory, pattern without a match) is a
  `SourceFilesError` naming it; a missing plain path stays the seed's
  `MintDimFileNotFoundError`.
- `same_file` tells two names of one file apart from two files: the real path and the
  (device, inode) pair locally (symlinks, hard links), the object's path remotely.
"""
from __future__ import annotations

import functools
import os
import posixpath
import re
from dataclasses import dataclass

from mintdim_beam.core.errors import MintDimFileNotFoundError, SourceFilesError
from mintdim_beam.core.files import storage

# Children of a directory entry that are inputs (case-insensitive); anything else in the
# directory (READMEs, _SUCCESS markers, checksums) is left alone.
INPUT_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".jsonl.zst", ".parquet")
_MAGIC = re.compile(r"[*?[]")


@dataclass(frozen=True)
class ListedFile:
    entry: int  # position of the source.files entry that named it
    entry_text: str  # that entry as written
    given: str  # the file's path in the entry's spelling (recorded in index rows)
    path: str  # resolved path used for I/O
    # A remote file found by a listing: its identity as the listing gave it (size and
    # generation / ETag), so planning needs no request of its own (`source.FileToPlan`).
    listed: tuple = ()

    @property
    def expanded(self) -> bool:
        """Whether the entry was a directory or a pattern rather than this file's path."""
        return self.given != self.entry_text


def as_list(value):
    """A single path string where a list of paths is expected: a list of one."""
    return [value] if isinstance(value, str) else value


def has_magic(entry: str) -> bool:
    return bool(_MAGIC.search(entry))


def expand(entries, context: str = "source") -> list[ListedFile]:
    """Every entry's files, in order (see the module's rules). Raises before any output."""
    listed = []
    for index, entry in enumerate(entries):
        found = _expand_one(entry, context)
        listed += [ListedFile(index, entry, given, storage.resolve(given), identity)
                   for given, identity in found]
    return listed


def _listed_identity(path: str, info: dict) -> tuple:
    """A remote file's identity from its listing entry; () locally or when the listing
    has no size."""
    if not storage.is_url(path) or "size" not in info:
        return ()
    from mintdim_beam.core.inputs.input_files import listing_identity

    return listing_identity(info)


def _expand_one(entry: str, context: str) -> list[tuple[str, tuple]]:
    path = storage.resolve(entry)
    if storage.is_file(path):
        return [(entry, ())]
    if storage.is_dir(path):
        found = _children(entry, path)
        if not found:
            raise SourceFilesError(entry=entry, rule="empty_directory")
        return found
    if has_magic(entry):
        found = _matches(entry)
        if not found:
            raise SourceFilesError(entry=entry, rule="no_match")
        return found
    raise MintDimFileNotFoundError(context=context, missing_file=entry)


def _is_file(fs, info: dict) -> bool:
    """A file, or a symlink to one (fsspec's local listing says "other" for a link)."""
    if info.get("type") == "file":
        return True
    return bool(info.get("islink")) and fs.isfile(info["name"])


def _join(base: str, name: str) -> str:
    """`name` below the entry `base`, in the entry's spelling."""
    if storage.is_url(base):
        return posixpath.join(base, name)
    return os.path.join(base, name)


def _children(entry: str, path: str) -> list[tuple[str, tuple]]:
    fs = storage.filesystem(path)
    fs.invalidate_cache(path)
    names = {}
    for info in fs.ls(path, detail=True):
        name = info["name"].rstrip("/").rsplit("/", 1)[-1]
        if name.startswith(".") or not _is_file(fs, info):
            continue
        if name.lower().endswith(INPUT_SUFFIXES):
            names[name] = _listed_identity(path, info)
    return [(_join(entry, name), names[name]) for name in _bytewise(names)]


def _bytewise(names) -> list[str]:
    """Python compares str by code point: the same order as their UTF-8 bytes."""
    return sorted(names)


def _root(entry: str) -> str:
    """The entry up to its first path component with a wildcard (scheme kept)."""
    scheme = ""
    match = re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", entry)
    if match:
        scheme, entry = match.group(0), entry[match.end():]
    parts = entry.split("/")
    first = next(i for i, part in enumerate(parts) if has_magic(part))
    root = "/".join(parts[:first])
    if not root and entry.startswith("/"):
        root = "/"
    return scheme + root


def _matches(entry: str) -> list[tuple[str, tuple]]:
    root = _root(entry)
    if storage.is_url(entry):
        fs = storage.filesystem(entry)
        base = fs._strip_protocol(root).rstrip("/")
        pattern = entry
    else:
        fs = storage.filesystem("file://")
        base = os.path.abspath(root or ".")
        pattern = storage.resolve(entry)
    fs.invalidate_cache()
    found = fs.glob(pattern, detail=True)
    given = {}
    hidden_wanted = entry.rstrip("/").rsplit("/", 1)[-1].startswith(".")
    for name, info in found.items():
        name = name.rstrip("/")
        if not _is_file(fs, info) or (name.rsplit("/", 1)[-1].startswith(".")
                                      and not hidden_wanted):
            continue  # a directory; a hidden file unless the pattern asks for one
        rel = name[len(base):].lstrip("/") if base and name.startswith(base) else name
        given[_join(root, rel) if root else rel] = _listed_identity(pattern, info)
    return [(name, given[name]) for name in _bytewise(given)]


def same_file_key(path: str) -> tuple:
    """What two names of one file share: ("local", device, inode) and ("real", realpath)
    locally, ("url", protocol, object path) remotely."""
    if not storage.is_url(path):
        stat = os.stat(path)
        return (("inode", stat.st_dev, stat.st_ino), ("real", os.path.realpath(path)))
    fs = _scheme_filesystem(path.split("://", 1)[0])  # not one lookup per file: 100,000
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return (("url", protocol, fs._strip_protocol(path)),)


@functools.lru_cache(maxsize=None)
def _scheme_filesystem(scheme: str):
    return storage.filesystem(f"{scheme}://")


def first_repeat(files) -> tuple | None:
    """(earlier, later) ListedFile pair naming one file, the first such later one in
    order; None when every file is named once."""
    seen: dict = {}
    for listed in files:
        keys = same_file_key(listed.path)
        for key in keys:
            if key in seen:
                return seen[key], listed
        for key in keys:
            seen[key] = listed
    return None


def entries_block(files) -> list[dict]:
    """What the user wrote for these input files (`InputFile`s, whose `entry` is the
    directory or pattern that gave them, "" for a path of its own), for the manifest:
    [{"entry": as written, "files": how many of the files, in order, it gave}], or []
    when no entry was a directory or a pattern (a manifest as before)."""
    if not any(f.entry for f in files):
        return []
    block: list[dict] = []
    for f in files:
        entry = f.entry or f.given
        if f.entry and block and block[-1]["entry"] == entry:
            block[-1]["files"] += 1
        else:
            block.append({"entry": entry, "files": 1})
    return block
