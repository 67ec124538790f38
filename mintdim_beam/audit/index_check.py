"""The index checker of `mintdim-beam verify`: the four JSONL index files.

sample_index.jsonl is streamed once and joined on `sample_id` with unk_index.jsonl and
overflow_index.jsonl (all three ascending) and with the members of
duplicate_index.jsonl: row form and keys, types, order, sources, unit assignment and
overflow policy, shard paths, UNK rows, duplicate groups and their completeness (in a
split dialogue dataset, rows are keyed by (sample_id, part): `dialogue_check`). What the
shard checker needs from the rows (token counts and UNK positions per unit) is kept in
compact arrays.
"""
from __future__ import annotations

import bisect
import json
import re
from array import array

import numpy as np

from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.render.template import EDGE_NAMES

INDEX_FILES = (fmt.SAMPLE_INDEX, fmt.UNK_INDEX, fmt.OVERFLOW_INDEX, fmt.DUPLICATE_INDEX)
OVERFLOW_ACTIONS = ("truncate", "skip", "extend")
# Keys some overflow rows add, in this order: extend's new size (mintdim's); a whole line
# skipped (its size in bytes, or a dialogue's trained turns); why a truncation was skipped.
OVERFLOW_OPTIONAL = ("new_unit_size", "line_bytes", "trained_turns", "reason")

SAMPLE_KEYS = ["sample_id", "hash", "token_count", "unit_size", "source_file", "source_line",
               "shard_path", "empty_fields"]
UNK_KEYS = ["sample_id", "hash", "source_file", "source_line", "unk_count", "unk_positions",
            "unk_field_indices", "unk_chars"]
OVERFLOW_KEYS = ["sample_id", "source_file", "source_line", "token_count", "max_unit_size",
                 "action"]
DUPLICATE_KEYS = ["hash", "count", "samples"]
MEMBER_KEYS = ["sample_id", "source_file", "source_line"]
_HASH = re.compile(r"[0-9a-f]{64}")


def is_int(value) -> bool:
    return type(value) is int


class _Cursor:
    """An ascending stream of (line, row) with one row of lookahead; `key` is the head's
    order key (infinity once exhausted): its sample_id, or `key_of(row)` (a split
    dataset's (sample_id, part))."""

    END = float("inf")

    def __init__(self, rows, name: str, problems, key_of=None):
        self._rows = rows
        self._name = name
        self._p = problems
        self._key_of = key_of
        self._last = -1 if key_of is None else (-1, -1)
        self.end = self.END if key_of is None else (self.END, self.END)
        self.head = None
        self.key = self.end
        self.advance()

    def advance(self) -> None:
        for line, row in self._rows:
            sid = row.get("sample_id")
            if not is_int(sid) or sid < 0:
                self._p.add(self._name, line, f"sample_id {sid!r} is not a non-negative int",
                            key=(self._name, "sid"))
                continue
            key = sid if self._key_of is None else self._key_of(row)
            if key <= self._last:
                self._p.add(self._name, line, (
                    f"sample_id {sid} is not above the previous row's {self._last}: rows must "
                    "be in ascending sample_id" if self._key_of is None else
                    f"(sample_id, part) {key} is not above the previous row's {self._last}: "
                    "rows of a split dataset are ascending by (sample_id, part)"),
                    key=(self._name, "order"))
                continue
            self._last = key
            self.head, self.key = (line, row), key
            return
        self.head, self.key = None, self.end


class IndexChecks:
    """The index-file checks, a mixin of the verifier (`mintdim_beam.audit.verify`).
    `_indices` runs after the listing, the manifest and the layout; the attributes
    below are the state it shares with them and with the checks after it."""

    # read: set by the verifier (with p, result, fs and _path)
    files: dict[str, int]
    sizes: list[int]
    S: int
    n: int
    source_files: dict[str, int]
    field_segments: list[str]
    shard_set: set[str]
    # read: set by DialogueChecks (with its row helpers: part_rule, row_key, ...)
    dialogue: object
    split: bool
    # set here: read by ShardChecks (per unit) and by the summaries
    row_tokens: dict[int, array]
    row_lines: dict[int, array]
    unk_entries: dict[int, tuple]
    dup_groups: int
    dup_samples: int
    samples_with_unk: int
    unk_tokens: int

    # ---------------------------------------------------------------- reading rows
    def _jsonl(self, rel: str, keys: list[str], optional: tuple = (), render=None, part=None):
        """(line, row) for each row of an index file, streamed; bad rows become problems.
        `render(row)` is a fast formatter of the canonical line (json.dumps is the judge
        whenever it disagrees); `part`: the rule for a last `part` key (dialogue_check)."""
        if rel not in self.files:
            return
        decode = json.JSONDecoder().decode
        with self.fs.open(self._path(rel), "rb") as handle:
            for line, raw in enumerate(handle, 1):
                try:
                    text = raw.decode("utf-8")
                    row = decode(text)
                except (UnicodeDecodeError, ValueError) as exc:
                    self.p.add(rel, line, f"not a valid JSON line: {exc}", key=(rel, "json"))
                    continue
                if type(row) is not dict:
                    self.p.add(rel, line, f"row is not a JSON object but {type(row).__name__}",
                               key=(rel, "object"))
                    continue
                if render is not None:  # the common case: exactly the canonical line
                    try:
                        if render(row) == text:
                            yield line, row
                            continue
                    except (TypeError, ValueError, KeyError):
                        pass
                if not raw.endswith(b"\n"):
                    self.p.add(rel, line, "last line has no trailing newline")
                names = self._part_names(rel, line, row, part)
                if names != keys and names != keys + [k for k in optional if k in row]:
                    self.p.add(rel, line, f"keys {names} are not {keys}"
                               + (f" (+ {list(optional)})" if optional else ""),
                               key=(rel, "keys"))
                    if any(k not in row for k in keys):
                        continue
                elif text.rstrip("\n") + "\n" != fmt.jsonl_row(row):
                    self.p.add(rel, line, "row is not in the canonical form "
                               "(json.dumps(row, ensure_ascii=False) + newline)",
                               key=(rel, "canonical"))
                yield line, row

    def _quoted_source(self, row: dict) -> str:
        """The row's source_file as a JSON string, computed once per file name."""
        name = row["source_file"]
        quoted = self._quoted.get(name)
        if quoted is None:
            quoted = self._quoted[name] = fmt.json_string(name)
        return quoted

    def _sample_text(self, row: dict) -> str:
        quoted = self._quoted_source(row)
        return fmt.sample_row(row["sample_id"], row["hash"], row["token_count"], row["unit_size"],
                              quoted, row["source_line"], row["shard_path"], row["empty_fields"],
                              row["part"] if self.split else None)

    def _unk_text(self, row: dict) -> str:
        quoted = self._quoted_source(row)
        if row["unk_count"] != len(row["unk_positions"]):
            return ""
        return fmt.unk_row(row["sample_id"], row["hash"], quoted, row["source_line"],
                           row["unk_positions"], row["unk_field_indices"], row["unk_chars"],
                           row["part"] if self.split else None)

    # ---------------------------------------------------------------- the checks
    def _indices(self) -> None:
        """sample_index.jsonl streamed once, joined on sample_id with the overflow and UNK
        indices (all ascending) and with the members of duplicate_index.jsonl."""
        S, p, rel = self.S, self.p, fmt.SAMPLE_INDEX
        self._quoted: dict = {}
        self._empty_cache: dict = {}
        self.row_tokens = {s: array("q") for s in self.sizes}
        self.row_lines = {s: array("q") for s in self.sizes}
        self.unk_entries = {s: (array("q"), array("q"), array("q"), array("q"))
                            for s in self.sizes}  # k, position, field index, unk_index line
        hash_heads = array("Q")
        members = self._duplicates()
        extend_sizes = self._extend_sizes()
        known = sorted(s for s in self.sizes if s not in extend_sizes) or list(self.sizes)
        unit_sizes = set(self.sizes)
        sources = self.source_files
        shard_set = self.shard_set
        split = self.split  # records of one line numbered by part (dialogue_check)
        key_of = self.row_key if split else None
        unk = _Cursor(self._jsonl(fmt.UNK_INDEX, UNK_KEYS, render=self._unk_text,
                                  part=self.part_rule()), fmt.UNK_INDEX, self.p, key_of)
        over = _Cursor(self._jsonl(fmt.OVERFLOW_INDEX, OVERFLOW_KEYS, OVERFLOW_OPTIONAL,
                                   part=self.part_rule(overflow=True)),
                       fmt.OVERFLOW_INDEX, self.p, key_of)
        lossy = _Cursor(self.lossy_rows(), fmt.LOSSY_INDEX, self.p, key_of)  # lossy_check
        self._part_sid, self._part_next = -1, 0

        def rows_before(key) -> None:
            """Overflow and UNK rows of samples before `key`, which have no sample row."""
            while over.key < key:
                o_line, o_row = over.head
                if split and "part" in o_row:  # a skipped part keeps its number
                    self._part_seen(o_row["sample_id"], o_row["part"], fmt.OVERFLOW_INDEX, o_line)
                self._overflow_row(o_line, o_row, known, None)
                over.advance()
            while unk.key < key:
                u_line, u_row = unk.head
                p.add(fmt.UNK_INDEX, u_line, f"{self.row_label(u_row)} has no "
                      "sample_index.jsonl row", key=("unk", "orphan"))
                unk.advance()
            while lossy.key < key:
                self.lossy_orphan(*lossy.head)
                lossy.advance()

        samples_with_unk = unk_tokens = tokens = rows = 0
        last_sid, last_key, last_source = -1, (-1, -1), (-1, 0)
        for line, row in self._jsonl(rel, SAMPLE_KEYS, render=self._sample_text,
                                     part=self.part_rule()):
            sid, digest, count, unit = (row["sample_id"], row["hash"], row["token_count"],
                                        row["unit_size"])
            if not (type(sid) is int and type(count) is int and type(unit) is int
                    and type(digest) is str and sid >= 0 and count >= 0):
                p.add(rel, line, "sample_id, hash, token_count or unit_size has the wrong type",
                      key=(rel, "types"))
                continue
            same_line = False
            if split:
                key = self._sample_part(rel, line, row, last_key)
                if key <= last_key:
                    p.add(rel, line, f"(sample_id, part) {key} is not above the previous row's "
                          f"{last_key}: rows of a split dataset are ascending by (sample_id, "
                          "part)", key=(rel, "order"))
                    continue
                same_line, last_key = key[0] == last_key[0], key
            elif sid <= last_sid:
                p.add(rel, line, f"sample_id {sid} is not above the previous row's {last_sid}: "
                      "rows must be in ascending sample_id", key=(rel, "order"))
                continue
            else:
                key = sid
            last_sid = sid
            if _HASH.fullmatch(digest):
                hash_heads.append(int(digest[:16], 16))
            else:
                hash_heads.append(0)
                p.add(rel, line, f"hash {digest!r} is not 64 lowercase hex digits",
                      key=(rel, "hash"))
            name, number = row["source_file"], row["source_line"]
            index = (sources.get(name) if sources else 0) if type(name) is str else None
            if index is None or type(number) is not int or number < 1:
                self._source_problem(rel, line, name, number, key=(rel, "source"))
            elif sources:
                if same_line:
                    if (index, number) != last_source:
                        p.add(rel, line, f"part {key[1]} of sample_id {sid} is {name}:{number}, "
                              "not the source of its earlier parts (the records of a split "
                              "dialogue share its line)", key=(rel, "part_source"))
                elif (index, number) <= last_source:
                    p.add(rel, line, f"source {name}:{number} does not come after the previous "
                          "row's (sample_id follows file order then line order)",
                          key=(rel, "source_order"))
                last_source = (index, number)
            empty = row["empty_fields"]
            if empty.__class__ is not list or (empty and not self._empty_fields_ok(empty)):
                p.add(rel, line, f"empty_fields {empty!r} " + (
                    "are not [], as in every dialogue dataset (an empty turn is the layout)"
                    if self.dialogue else "are not field segment names of sequence_template in "
                    "segment order"), key=(rel, "empty"))
            rows += 1
            tokens += count

            rows_before(key)
            if split:
                self._part_seen(sid, key[1], rel, line)
            if over.key == key:
                self._overflow_row(*over.head, known, (line, row))
                over.advance()
            # unit assignment: the smallest size known at this sample that fits
            k = None
            if unit not in unit_sizes:
                p.add(rel, line, f"unit_size {unit} is not in manifest.json units.sizes",
                      key=(rel, "unit"))
            else:
                fit = bisect.bisect_left(known, count)
                if count > unit:
                    p.add(rel, line, f"token_count {count} does not fit unit_size {unit}",
                          key=(rel, "fit"))
                elif fit == len(known):
                    p.add(rel, line, f"token_count {count} exceeds every unit size "
                          f"({known[-1]}) and no overflow row extends or truncates it",
                          key=(rel, "overflow"))
                elif known[fit] != unit:
                    p.add(rel, line, f"unit_size {unit} but the smallest unit that fits "
                          f"token_count {count} is {known[fit]}", key=(rel, "assign"))
                counts = self.row_tokens[unit]
                k = len(counts)
                counts.append(count)
                self.row_lines[unit].append(line)
                want = fmt.shard_name(unit, k // S)  # lru_cached
                shard_path = row["shard_path"]
                if shard_path != want:
                    self._shard_path_problem(line, shard_path, unit, k, want)
                elif want not in shard_set:
                    p.add(rel, line, f"shard_path {shard_path} does not exist",
                          key=(rel, "shard_path", unit))

            if members and split:
                self._split_member(members, sid, row)
            elif members:
                member = members.pop(sid, None)
                if member is not None:
                    self._member(sid, member, row)
            if lossy.key == key:
                self.lossy_row(*lossy.head, row)
                lossy.advance()
            if unk.key == key:
                positions = self._unk_row(*unk.head, row, unit, k)
                if positions:
                    samples_with_unk += 1
                    unk_tokens += positions
                unk.advance()
        rows_before(over.end)
        for sid, member in sorted(members.items()):
            for digest, _, _, dup_line in (member if split else [member]):
                p.add(fmt.DUPLICATE_INDEX, dup_line, f"member sample_id {sid} has no "
                      "sample_index.jsonl row" + (f" with the group's hash {digest}"
                                                  if split else ""), key=("dup", "orphan"))
        self.result.samples, self.result.tokens = rows, tokens
        self.samples_with_unk, self.unk_tokens = samples_with_unk, unk_tokens
        self._duplicate_completeness(np.frombuffer(hash_heads, dtype=np.uint64)
                                     if len(hash_heads) else np.zeros(0, np.uint64))

    def cut_fills_unit(self) -> bool:
        """mintdim's cut (from the end, a JSONL template without bos / eos ids) fills the
        largest unit exactly; a cut that keeps the ends or whole turns may leave room."""
        kinds = getattr(self, "segment_kinds", None) or []
        return self.dialogue is None and not any(
            kind == "literal" and name in EDGE_NAMES for kind, name in zip(kinds, self.template))

    def _shard_path_problem(self, line, shard_path, unit, k, want) -> None:
        if not isinstance(shard_path, str) or shard_path not in self.shard_set:
            what = f"shard_path {shard_path!r} does not exist"
        elif shard_path.split("/")[0] != fmt.unit_dir(unit):
            what = f"shard_path {shard_path} is not in the directory of unit_size {unit}"
        else:
            what = f"row {k} of unit_{unit} is record {k % self.S} of {want}, not in {shard_path}"
        self.p.add(fmt.SAMPLE_INDEX, line, what, key=(fmt.SAMPLE_INDEX, "shard_path", unit))

    def _member(self, sid, member, row) -> None:
        m_hash, m_file, m_line, dup_line = member
        if m_hash != row["hash"]:
            self.p.add(fmt.DUPLICATE_INDEX, dup_line, f"member sample_id {sid} has hash "
                       f"{row['hash']} in sample_index.jsonl, not the group's {m_hash}",
                       key=("dup", "hash"))
        if (m_file, m_line) != (row["source_file"], row["source_line"]):
            self.p.add(fmt.DUPLICATE_INDEX, dup_line, f"member sample_id {sid} is "
                       f"{m_file}:{m_line}, sample_index.jsonl says "
                       f"{row['source_file']}:{row['source_line']}", key=("dup", "source"))

    def _empty_fields_ok(self, empty) -> bool:
        """A subsequence of the field segments' names, in segment order."""
        if not isinstance(empty, list) or not all(isinstance(e, str) for e in empty):
            return False
        key = tuple(empty)
        if key not in self._empty_cache:
            names = iter(self.field_segments)
            self._empty_cache[key] = all(any(e == name for name in names) for e in key)
        return self._empty_cache[key]

    def _source_problem(self, rel, line, name, number, key) -> None:
        if not isinstance(name, str) or not is_int(number) or number < 1:
            self.p.add(rel, line, f"source {name!r}:{number!r} is not a file name and a "
                       "1-based line", key=key)
        else:
            self.p.add(rel, line, f"source_file {name!r} is not one of manifest.json "
                       "source.files", key=key)

    def _unk_row(self, line, row, sample, unit, k) -> int:
        rel = fmt.UNK_INDEX
        sid = row["sample_id"]
        if row["hash"] != sample["hash"]:
            self.p.add(rel, line, f"hash of sample_id {sid} is {row['hash']}, sample_index.jsonl "
                       f"says {sample['hash']}", key=(rel, "hash"))
        if (row["source_file"], row["source_line"]) != (sample["source_file"], sample["source_line"]):
            self.p.add(rel, line, f"source {row['source_file']}:{row['source_line']} disagrees "
                       f"with sample_index.jsonl {sample['source_file']}:{sample['source_line']}",
                       key=(rel, "source"))
        positions, fields, chars = (row["unk_positions"], row["unk_field_indices"],
                                    row["unk_chars"])
        count = row["unk_count"]
        if not (isinstance(positions, list) and all(is_int(x) for x in positions)
                and isinstance(fields, list) and all(is_int(x) for x in fields)
                and isinstance(chars, list) and all(isinstance(c, str) for c in chars)):
            self.p.add(rel, line, "unk_positions / unk_field_indices must be int lists and "
                       "unk_chars a string list", key=(rel, "types"))
            return 0
        if not positions:
            self.p.add(rel, line, "row lists no UNK (only records with UNK get a row)",
                       key=(rel, "empty"))
        if count != len(positions) or len(fields) != len(positions) or len(chars) != len(positions):
            self.p.add(rel, line, f"unk_count {count!r} and the lengths of unk_positions "
                       f"({len(positions)}), unk_field_indices ({len(fields)}) and unk_chars "
                       f"({len(chars)}) must all agree", key=(rel, "count"))
        if any(a >= b for a, b in zip(positions, positions[1:])):
            self.p.add(rel, line, "unk_positions are not strictly ascending", key=(rel, "order"))
        token_count = sample["token_count"]
        bad = [p for p in positions if not 0 <= p < token_count]
        if bad:
            self.p.add(rel, line, f"unk position {bad[0]} is outside the payload "
                       f"(token_count {token_count})", key=(rel, "position"))
        if any(not 0 <= f < self.n for f in fields):
            self.p.add(rel, line, f"unk_field_indices {fields} are not segment indices "
                       f"0..{self.n - 1}", key=(rel, "field"))
        if k is None:  # the row's unit is unknown: its record cannot be found
            return len(positions)
        ks, ps, fs, ls = self.unk_entries[unit]
        for p, f in zip(positions, fields):
            if 0 <= p < min(token_count, unit):
                ks.append(k)
                ps.append(p)
                fs.append(f)
                ls.append(line)
        return len(positions)

    def _extend_sizes(self) -> set:
        sizes = set()
        for _, row in self._quiet_rows(fmt.OVERFLOW_INDEX):
            if row.get("action") == "extend" and is_int(row.get("new_unit_size")):
                sizes.add(row["new_unit_size"])
        return sizes

    def _quiet_rows(self, rel):
        if rel not in self.files:
            return
        with self.fs.open(self._path(rel), "rb") as handle:
            for line, raw in enumerate(handle, 1):
                try:
                    row = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    yield line, row

    def _overflow_row(self, line, row, known: list, sample) -> None:
        rel = fmt.OVERFLOW_INDEX
        sid, action = row["sample_id"], row["action"]
        if self._overflow_extras(line, row, known[-1]):  # a whole line skipped
            if sample is not None:
                self.p.add(rel, line, f"sample_id {sid} was skipped whole but has a "
                           f"sample_index.jsonl row (line {sample[0]})", key=(rel, "skip"))
            return
        count, max_size = row["token_count"], row["max_unit_size"]
        if action not in OVERFLOW_ACTIONS:
            self.p.add(rel, line, f"action {action!r} is not one of {list(OVERFLOW_ACTIONS)}",
                       key=(rel, "action"))
            return
        if ("new_unit_size" in row) != (action == "extend"):
            self.p.add(rel, line, "new_unit_size belongs to extend rows only",
                       key=(rel, "new_unit_size"))
        if not is_int(count) or not is_int(max_size):
            self.p.add(rel, line, "token_count and max_unit_size must be ints", key=(rel, "types"))
            return
        if max_size != known[-1]:
            self.p.add(rel, line, f"max_unit_size {max_size} is not the largest unit size known "
                       f"at this sample ({known[-1]})", key=(rel, "max"))
        if count <= max_size:
            self.p.add(rel, line, f"token_count {count} does not overflow max_unit_size "
                       f"{max_size}", key=(rel, "not_over"))
        if sample is not None:
            s_line, s_row = sample
            if (row["source_file"], row["source_line"]) != (s_row["source_file"], s_row["source_line"]):
                self.p.add(rel, line, f"source {row['source_file']}:{row['source_line']} disagrees "
                           f"with sample_index.jsonl line {s_line}", key=(rel, "source"))
        if action == "skip":
            if sample is not None:
                self.p.add(rel, line, f"sample_id {sid} was skipped but has a sample_index.jsonl "
                           f"row (line {sample[0]})", key=(rel, "skip"))
            return
        if sample is None:
            self.p.add(rel, line, f"sample_id {sid} ({action}) has no sample_index.jsonl row",
                       key=(rel, "orphan"))
        if action == "truncate":
            kept = None if sample is None else sample[1]["token_count"]
            if kept is None:
                return
            if self.cut_fills_unit() and kept != known[-1]:
                self.p.add(fmt.SAMPLE_INDEX, sample[0], f"truncated sample has token_count "
                           f"{kept}, not the largest unit size {known[-1]}",
                           key=(rel, "truncate"))
            elif not 0 < kept <= known[-1]:  # ends kept, whole turns, even cuts: at most full
                self.p.add(fmt.SAMPLE_INDEX, sample[0], f"truncated sample has token_count "
                           f"{kept}, not in 1..{known[-1]} (the largest unit size)",
                           key=(rel, "truncate"))
            return
        new = row.get("new_unit_size")
        # The policy extends to the token count; the prompt lets a user pick a larger size.
        if not is_int(new) or new < count:
            self.p.add(rel, line, f"new_unit_size {new!r} does not hold the sample's "
                       f"token_count {count}", key=(rel, "extend"))
        if sample is not None and sample[1]["token_count"] != count:
            self.p.add(fmt.SAMPLE_INDEX, sample[0], f"extended sample has token_count "
                       f"{sample[1]['token_count']}, not its overflow row's {count}",
                       key=(rel, "extend_count"))
        if is_int(new) and new not in known:
            if new not in self.sizes:
                self.p.add(rel, line, f"new_unit_size {new} is not in manifest.json units.sizes",
                           key=(rel, "extend_sizes"))
            bisect.insort(known, new)

    def _duplicates(self) -> dict:
        """duplicate_index.jsonl on its own; returns sample_id -> (hash, file, line, dup line)."""
        rel = fmt.DUPLICATE_INDEX
        members: dict = {}
        hashes = set()
        self.dup_groups = self.dup_samples = 0
        last_first = -1
        for line, row in self._jsonl(rel, DUPLICATE_KEYS):
            digest, count, samples = row["hash"], row["count"], row["samples"]
            if not isinstance(samples, list) or not all(isinstance(s, dict) for s in samples):
                self.p.add(rel, line, "samples is not a list of objects", key=(rel, "types"))
                continue
            self.dup_groups += 1
            self.dup_samples += len(samples)
            if not isinstance(digest, str) or not _HASH.fullmatch(digest):
                self.p.add(rel, line, f"hash {digest!r} is not 64 lowercase hex digits",
                           key=(rel, "hash"))
            elif digest in hashes:
                self.p.add(rel, line, f"hash {digest} has more than one group", key=(rel, "again"))
            hashes.add(digest)
            if count != len(samples) or len(samples) < 2:
                self.p.add(rel, line, f"count {count!r} must equal the number of samples "
                           f"({len(samples)}) and be at least 2", key=(rel, "count"))
            ids = []
            for member in samples:
                if list(member) != MEMBER_KEYS or not is_int(member["sample_id"]):
                    self.p.add(rel, line, f"member keys {list(member)} are not {MEMBER_KEYS}",
                               key=(rel, "member"))
                    continue
                sid = member["sample_id"]
                ids.append(sid)
                entry = (digest, member["source_file"], member["source_line"], line)
                if self.split:  # one entry per part: a sample_id may be in several groups
                    members.setdefault(sid, []).append(entry)
                    continue
                if sid in members:
                    self.p.add(rel, line, f"sample_id {sid} is in more than one group",
                               key=(rel, "twice"))
                members[sid] = entry
            if any(a > b or (a == b and not self.split) for a, b in zip(ids, ids[1:])):
                self.p.add(rel, line, "samples are not in ascending sample_id", key=(rel, "order"))
            if ids:
                # split: groups of different parts may share their first sample_id
                if ids[0] < last_first or (ids[0] == last_first and not self.split):
                    self.p.add(rel, line, "groups are not ordered by their first sample_id",
                               key=(rel, "group_order"))
                last_first = max(last_first, ids[0])
        return members

    def _duplicate_completeness(self, heads: np.ndarray) -> None:
        """Every hash shared by 2+ records has a group (compared on 64-bit hash prefixes)."""
        if heads.size:
            _, counts = np.unique(heads, return_counts=True)
            shared = counts[counts >= 2]
            groups, samples = int(shared.size), int(shared.sum())
        else:
            groups = samples = 0
        if (groups, samples) != (self.dup_groups, self.dup_samples):
            self.p.add(fmt.DUPLICATE_INDEX, None, f"sample_index.jsonl has {groups} hashes shared "
                       f"by 2+ records ({samples} records), duplicate_index.jsonl lists "
                       f"{self.dup_groups} groups ({self.dup_samples} samples)")
