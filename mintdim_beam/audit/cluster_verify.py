"""`verify OUT --runner=...`: the content proof of `verify` spread over a Beam runner's
workers, one task per file the manifest sums and one per block of a joined file's
parts, so a build's bytes are reread in parallel (minutes for a billion samples on a
cluster) instead of on one machine. The launcher still checks what is metadata (the
manifest, the listing and layout, each part table's tiling of its file); the records'
structure, which only a full read proves, is left to the local verify, and the summary
says so.

The graph holds one element per whole file and per `TABLE_BLOCK` rows of a part table
(never a row per part); each task writes its problems to a results directory the
launcher reads: a local temporary one when the workers share this disk, else under
`--temp_location`.
"""
from __future__ import annotations

import json
import tempfile
import uuid

import apache_beam as beam

from mintdim_beam.core.files import checksums, storage

TABLE_BLOCK = 256  # part-table rows one task checks (about 150 MB of index at 4096-sample parts)


def tasks(block: dict, exists, open_file) -> tuple[list, list]:
    """(tasks for the workers, problems found here) from a manifest's `checksums`: a
    task is ("file", name, bytes, sha256) or ("parts", name, table, first row, rows)."""
    work, problems = [], []
    entries = block["files"] if isinstance(block, dict) and isinstance(block.get("files"),
                                                                        dict) else None
    if entries is None:  # the local rule words it
        return [], checksums.changed(block, exists, open_file)
    for name, want in sorted(entries.items()):
        if isinstance(want, dict) and isinstance(want.get("parts"), str):
            table = want["parts"]
            if not exists(table) or not exists(name):
                problems += checksums.changed({**block, "files": {name: want}}, exists, open_file)
                continue
            with open_file(table) as handle:
                try:
                    rows = checksums.read_part_table(handle)
                except ValueError as exc:
                    problems.append((table, f"not a part table: {exc}"))
                    continue
            whole = rows[-1][0] + rows[-1][1] if rows else 0
            if whole != want.get("bytes"):
                problems.append((name, f"content changed: the part table covers {whole} "
                                       f"bytes, the manifest records {want.get('bytes')}"))
                continue
            work += [("parts", name, table, lo, min(TABLE_BLOCK, len(rows) - lo))
                     for lo in range(0, len(rows), TABLE_BLOCK)]
        elif isinstance(want, dict) and isinstance(want.get("bytes"), int) and \
                isinstance(want.get("sha256"), str) and exists(name):
            work.append(("file", name, want["bytes"], want["sha256"]))
        else:  # missing, or an entry of the wrong shape: worded by the local rule
            problems += checksums.changed({**block, "files": {name: want}}, exists, open_file)
    return work, problems


class CheckTaskFn(beam.DoFn):
    """One task's problems, written to `results/<task number>.json`."""

    def __init__(self, root: str, results: str):
        self._root, self._results = root, results

    def process(self, element):
        number, task = element
        path = lambda name: storage.join(self._root, name)  # noqa: E731
        problems = []
        if task[0] == "file":
            _, name, size, digest = task
            with storage.open_read(path(name)) as handle:
                problems = checksums.compare(name, checksums.stream_sum(handle), size, digest,
                                             "the manifest records")
        else:
            _, name, table, lo, count = task
            with storage.open_read(path(table)) as handle:
                rows = checksums.read_part_table(handle)
            with storage.open_read(path(name)) as handle:
                for k in range(lo, lo + count):
                    start, size, digest = rows[k]
                    problems = checksums.part_changed(name, handle, start, size, digest,
                                                      k + 1, len(rows))
                    if problems:  # as the local rule: a file's first changed part
                        break
                whole = start + size
                if not problems and lo + count == len(rows) and handle.seek(0, 2) != whole:
                    problems = [(name, f"content changed: {handle.tell()} bytes, the "
                                       f"manifest records {whole}")]
        storage.write_text_atomic(storage.join(self._results, f"{number:09d}.json"),
                                  json.dumps(problems), self._results)
        yield number


def results_dir(options) -> str:
    """Where the tasks leave their problems for the launcher."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    from mintdim_beam.runtime.options import workers_share_disk

    if workers_share_disk(options):
        return tempfile.mkdtemp(prefix="mintdim-verify-")
    base = options.view_as(GoogleCloudOptions).temp_location
    if not base:
        raise ValueError("verify on a runner whose workers do not share this disk writes "
                         "its results under --temp_location: give one (e.g. gs://bucket/tmp)")
    return storage.join(base, f"mintdim-verify-{uuid.uuid4().hex}")


def prove_on_runner(root: str, block: dict, exists, open_file, options) -> tuple[list, int]:
    """(problems in file order, tasks run) of the content proof, run on `options`' runner."""
    work, problems = tasks(block, exists, open_file)
    if not work:
        return problems, 0
    results = results_dir(options)
    try:
        with beam.Pipeline(options=options) as p:
            _ = (p | "Tasks" >> beam.Create(list(enumerate(work)), reshuffle=False)
                 | "Spread" >> beam.Reshuffle()
                 | "Check" >> beam.ParDo(CheckTaskFn(root, results)))
        named = set()
        for number in range(len(work)):
            found = json.loads(storage.read_bytes(storage.join(results, f"{number:09d}.json")))
            for name, what in found:
                if name not in named:  # the first changed part of a file, as locally
                    named.add(name)
                    problems.append((name, what))
    finally:
        storage.remove_tree(results)
    return problems, len(work)
