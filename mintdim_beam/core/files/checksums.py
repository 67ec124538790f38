"""Content checksums: the sha256 of every file a build writes (shards, `.idx`, indices,
summaries), taken from the bytes as they are written, never by reading the output back,
and recorded in the manifest under `checksums`. `verify` recomputes them: any changed
byte names its file.

sha256 because anyone can check one by hand (`sha256sum`) and it runs at memory speed
here (about 1.7 GB/s with the CPU's SHA extensions: far under a build's cost per byte).
The writers wrap `core.files.storage`'s atomic writes; scratch files are not summed.

A file joined from parts written by many workers (the index files) is never read again
to be summed: its entry names a part table (`checksums/<stem>.parts.jsonl`, one row per
part: start, bytes, sha256, each summed by the worker that wrote the part), and the
table's own sum is an entry like any other file's. A file of one part keeps its plain
sum.
"""
from __future__ import annotations

import hashlib
import json
from typing import Iterable, NamedTuple

from mintdim_beam.core.files import compose, storage

ALGORITHM = "sha256"
PARTS_DIR = "checksums"  # the part tables of files joined from parts
BLOCK = 8 << 20  # bytes read at a time when a file is summed, or a range copied


class FileSum(NamedTuple):
    size: int
    sha256: str

    def doc(self) -> dict:
        return {"bytes": self.size, "sha256": self.sha256}


class Summer:
    """A running sum of bytes as they pass."""

    def __init__(self):
        self._state, self._size = hashlib.sha256(), 0

    def update(self, data) -> None:
        self._state.update(data)
        self._size += len(data)

    def result(self) -> FileSum:
        return FileSum(self._size, self._state.hexdigest())

    def passing(self, chunks: Iterable[bytes]):
        """`chunks`, each summed on its way."""
        for chunk in chunks:
            self.update(chunk)
            yield chunk


class PartsSum(NamedTuple):
    """A file joined from parts: its size and its part table's name in the build."""
    size: int
    table: str

    def doc(self) -> dict:
        return {"bytes": self.size, "parts": self.table}


def part_table_name(name: str) -> str:
    return f"{PARTS_DIR}/{name.rsplit('.', 1)[0]}.parts.jsonl"


def part_table(sums: list) -> str:
    rows, start = [], 0
    for summed in sums:
        rows.append(json.dumps({"start": start, "bytes": summed.size,
                                "sha256": summed.sha256}) + "\n")
        start += summed.size
    return "".join(rows)


def read_part_table(handle) -> list[tuple[int, int, str]]:
    """(start, bytes, sha256) of each row of an open part table; ValueError if a row
    is not one or the parts do not follow each other."""
    rows, at = [], 0
    for number, line in enumerate(handle.read().decode("utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
            start, size, digest = row["start"], row["bytes"], row["sha256"]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"line {number} is not {{start, bytes, sha256}}") from None
        if not (isinstance(start, int) and isinstance(size, int) and isinstance(digest, str)) \
                or start != at or size < 0:
            raise ValueError(f"line {number}: part at {start!r} of {size!r} bytes does not "
                             f"follow the one before (it ends at {at})")
        rows.append((start, size, digest))
        at += size
    return rows


def join_parts(output_dir: str, name: str, parts: list) -> dict:
    """`name` in `output_dir` joined where the parts lie (`core.files.compose`) from
    (path, FileSum) pairs in order: {name: its sum} for one part or none, else
    {name: PartsSum, its table's name: the table's FileSum}. Nothing is read back."""
    compose.join(storage.join(output_dir, name), [path for path, _ in parts],
                 [summed.size for _, summed in parts], output_dir)
    if len(parts) <= 1:
        return {name: parts[0][1] if parts else of_bytes(b"")}
    table = part_table_name(name)
    return {name: PartsSum(sum(summed.size for _, summed in parts), table),
            table: write_text(storage.join(output_dir, table),
                              part_table([summed for _, summed in parts]), output_dir)}


def of_bytes(data: bytes) -> FileSum:
    return FileSum(len(data), hashlib.sha256(data).hexdigest())


def write(path: str, data: bytes, output_dir: str) -> FileSum:
    storage.write_atomic(path, data, output_dir)
    return of_bytes(data)


def write_text(path: str, text: str, output_dir: str) -> FileSum:
    return write(path, text.encode("utf-8"), output_dir)


def write_stream(path: str, chunks: Iterable[bytes], output_dir: str) -> FileSum:
    summer = Summer()
    storage.write_stream_atomic(path, summer.passing(chunks), output_dir)
    return summer.result()


def write_pieces(path: str, pieces: list, output_dir: str) -> FileSum:
    """`storage.write_pieces_atomic` (bytes and file ranges; the kernel copies the
    ranges) with the sum of the pieces: each range is read once for it, from the
    scratch file just written (in the page cache), never from the output."""
    if storage.is_url(path) or any(not isinstance(p, bytes) and storage.is_url(p[0])
                                   for p in pieces):  # read each remote range once
        pieces = [p if isinstance(p, bytes) else storage.read_range(*p) for p in pieces]
    summer = Summer()
    for piece in pieces:
        if isinstance(piece, bytes):
            summer.update(piece)
            continue
        source, start, length = piece
        with storage.open_read(source) as handle:
            handle.seek(start)
            left = length
            while left:
                chunk = handle.read(min(BLOCK, left))
                if not chunk:
                    raise OSError(f"{source}: {length - left} bytes at {start}, {length} expected")
                summer.update(chunk)
                left -= len(chunk)
    storage.write_pieces_atomic(path, pieces, output_dir)
    return summer.result()


def stream_sum(handle) -> FileSum:
    """The sum of an open file from where it is to its end, streamed."""
    summer = Summer()
    while chunk := handle.read(BLOCK):
        summer.update(chunk)
    return summer.result()


def file_sum(path: str) -> FileSum:
    """The sum of a file as it is now."""
    with storage.open_read(path) as handle:
        return stream_sum(handle)


def manifest_block(sums: dict) -> dict:
    """{relative name: FileSum} -> the manifest's `checksums` (names sorted)."""
    return {"algorithm": ALGORITHM,
            "files": {name: sums[name].doc() for name in sorted(sums)}}


def changed(block, exists, open_file) -> list[tuple[str, str]]:
    """(file, what) for every file of a manifest's `checksums` that is missing, has
    another size or another sha256 now; `exists(name)` says whether OUT holds it,
    `open_file(name)` opens it for reading."""
    if not isinstance(block, dict) or block.get("algorithm") != ALGORITHM or \
            not isinstance(block.get("files"), dict):
        return [("manifest.json", f"checksums is not {{'algorithm': '{ALGORITHM}', 'files': "
                                  "{name: {bytes, sha256}}}")]
    problems = []
    for name, want in block["files"].items():
        if isinstance(want, dict) and isinstance(want.get("parts"), str) and \
                isinstance(want.get("bytes"), int):
            problems += _parts_changed(name, want, exists, open_file)
            continue
        if not (isinstance(want, dict) and isinstance(want.get("bytes"), int)
                and isinstance(want.get("sha256"), str)):
            problems.append(("manifest.json", f"checksums entry of {name} is not "
                                              "{bytes, sha256} or {bytes, parts}"))
            continue
        if not exists(name):
            problems.append((name, "missing: the manifest records its checksum"))
            continue
        with open_file(name) as handle:
            now = stream_sum(handle)
        problems += compare(name, now, want["bytes"], want["sha256"], "the manifest records")
    return problems


def compare(name: str, now: FileSum, size: int, digest: str, source: str) -> list:
    """The problem, if any, of a file (or part) whose sum is `now`, not (size, digest)."""
    if now.size != size:
        return [(name, f"content changed: {now.size} bytes, {source} {size}")]
    if now.sha256 != digest:
        return [(name, f"content changed: sha256 {now.sha256[:16]}..., {source} "
                       f"{digest[:16]}...")]
    return []


def _parts_changed(name: str, want: dict, exists, open_file) -> list:
    """A file joined from parts, checked part by part against its table."""
    table = want["parts"]
    if not exists(table):
        return [(table, f"missing: the manifest names it as the part table of {name}")]
    with open_file(table) as handle:
        try:
            rows = read_part_table(handle)
        except ValueError as exc:
            return [(table, f"not a part table: {exc}")]
    if not exists(name):
        return [(name, "missing: the manifest records its checksum")]
    whole = (rows[-1][0] + rows[-1][1]) if rows else 0
    if whole != want["bytes"]:
        return [(name, f"content changed: the part table covers {whole} bytes, the "
                       f"manifest records {want['bytes']}")]
    problems = []
    with open_file(name) as handle:
        for number, (start, size, digest) in enumerate(rows, 1):
            problems += part_changed(name, handle, start, size, digest, number, len(rows))
            if problems:
                return problems
        rest = stream_sum(handle).size
    if rest:
        return [(name, f"content changed: {whole + rest} bytes, the manifest records "
                       f"{want['bytes']}")]
    return []


def part_changed(name: str, handle, start: int, size: int, digest: str, number: int,
                 count: int) -> list:
    """The problem, if any, with bytes start..start+size of an open file against the
    digest its part table records (part `number` of `count`)."""
    handle.seek(start)
    summer = Summer()
    left = size
    while left and (chunk := handle.read(min(BLOCK, left))):
        summer.update(chunk)
        left -= len(chunk)
    where = f"part {number} of {count} (bytes {start}..{start + size})"
    if left:
        return [(name, f"content changed: ends inside {where}")]
    return compare(name, summer.result(), size, digest, f"in {where}: the part table records")
