"""The bad-row checker of `mintdim-beam verify` (unit-build and pack-build):
`rejected_index.jsonl` against the manifest's `rejected` count and `bad_rows` block.

A build under `on_bad_row="skip"` has both and the file; every row names a source file
of the build and a line, in file and line order, each line once, with an error class and
a one-line reason; the count is the rows'; no more rows than `max_rejected` allows. A
build under `abort` (and every build of mintdim 0.2.1) has none of them.
"""
from __future__ import annotations

import json

from mintdim_beam.core.config.bad_rows import POLICIES, exceeds, BadRows
from mintdim_beam.core.errors import ERROR_CLASSES
from mintdim_beam.core.formats import mintdim as fmt

REJECTED_KEYS = ["source_file", "source_line", "error", "reason"]
BAD_ROWS_KEYS = ["on_bad_row", "max_rejected", "rows"]


def check_rejected(manifest: dict, files: dict, read_text, add, source_files) -> int | None:
    """Problems via `add(rel, line, text)`; `read_text(rel)` reads an output file,
    `files` the output's files, `source_files` the build's inputs as given, in order.
    Returns the rows counted (None: the build did not skip bad rows)."""
    block, count = manifest.get("bad_rows"), manifest.get("rejected")
    rel = fmt.REJECTED_INDEX
    if block is None and count is None:
        if rel in files:
            add(rel, None, "unexpected file: manifest.json has no bad_rows block "
                "(the build did not skip bad rows)")
        return None
    if (not isinstance(block, dict) or list(block) != BAD_ROWS_KEYS
            or block["on_bad_row"] not in POLICIES
            or type(block["max_rejected"]) not in (int, float)
            or type(block["rows"]) is not int or type(count) is not int
            or not 0 <= count <= block["rows"]):
        add(fmt.MANIFEST, None, f"bad_rows {block!r} / rejected {count!r}: not an object with "
            f"keys {BAD_ROWS_KEYS} (a policy, a fraction, the rows judged) and a count of "
            "rejected rows no larger than the rows")
        return None
    if exceeds(BadRows(block["on_bad_row"], block["max_rejected"]), count, block["rows"]):
        add(fmt.MANIFEST, None, f"{count} of {block['rows']} rows rejected: more than "
            f"max_rejected {block['max_rejected']} allows (the build should have failed)")
    if rel not in files:
        add(rel, None, "missing (manifest.json has a bad_rows block)")
        return None
    text = read_text(rel)
    if text is None:
        return None
    order = {name: i for i, name in enumerate(source_files)}
    previous, rows = None, 0
    for line, raw in enumerate(text.splitlines(keepends=True), 1):
        rows += 1
        try:
            row = json.loads(raw)
        except ValueError as exc:
            add(rel, line, f"not a valid JSON line: {exc}")
            continue
        if not isinstance(row, dict) or list(row) != REJECTED_KEYS:
            add(rel, line, f"row is not an object with keys {REJECTED_KEYS}")
            continue
        if fmt.jsonl_row(row) != raw:
            add(rel, line, "not the canonical line of its row")
        source, number = row["source_file"], row["source_line"]
        if not order:  # records of a user's pipeline (`transforms`): no input files
            if type(source) is not str or type(number) is not int or number < 1:
                add(rel, line, f"source {source!r}:{number!r} is not a name and positive line")
            continue
        if source not in order:
            add(rel, line, f"source_file {source!r} is not an input of the build")
            continue
        if type(number) is not int or number < 1:
            add(rel, line, f"source_line {number!r} is not a positive int")
            continue
        if row["error"] not in ERROR_CLASSES or not isinstance(row["reason"], str) \
                or not row["reason"] or "\n" in row["reason"]:
            add(rel, line, f"error {row['error']!r} / reason {row['reason']!r}: not an error "
                "class of ours with a one-line reason")
        here = (order[source], number)
        if previous is not None and here <= previous:
            add(rel, line, f"{source}:{number} is not after the row before it (rows are in "
                "file and line order, each line once)")
        previous = here
    if rows != count:
        add(rel, None, f"{rows} rows but manifest.json counts {count} rejected")
    return rows
