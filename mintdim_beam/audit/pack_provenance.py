"""The provenance, order and totals checks of the pack-build verifier
(`mintdim_beam.audit.pack_check`), a mixin of its PackVerifier. Kept apart from the shard
files' checks because these read text (gzip CSV, JSON), follow the pack order across all
shards and compare the manifest's counts with what was measured.

The provenance `.csv.gz` is streamed row by row and checked in numpy batches: its rows
match the sequences (start, end), name a source file of the manifest and a line >= 1,
carry the stable document id of (src, line) (`core.formats.doc_order.document_ids`) and follow
the pack order: (seeded hash, file, line) strictly ascending over the whole stream,
shards cut between hash buckets. Last the manifest's totals, per shard and per source,
and the sequence counts of per_dataset_sequences.json are compared with what was
counted. Memory: one batch of rows.
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import zlib

import numpy as np

from mintdim_beam.audit.index_check import is_int as _is_int
from mintdim_beam.audit.pack_shards import Shard, plural
from mintdim_beam.core.formats import doc_order
from mintdim_beam.core.formats import mintdim as fmt

SEQUENCES = "per_dataset_sequences.json"
ROW_BATCH = 1 << 16     # provenance rows per numpy batch
_DOC_ID = re.compile(r"[0-9a-f]{16}")


class PackProvenanceChecks:
    """The provenance rows, the pack order, per_dataset_sequences.json and the manifest's
    totals, a mixin of PackVerifier. The attributes below are the state they share with
    the verifier (and with PackShardChecks, through `Shard` and the result)."""

    # read: set by the verifier (with p, result, fs, _path and _json)
    files: dict[str, int]
    manifest: dict
    sources: list[str]
    file_pos: dict[str, int]
    records: bool = False  # a pack of a user's records (`transforms`): sources named per row
    shard_entries: list[dict]
    seed: int
    check_order: bool
    # written: the per-source sums, the last row's order key, whether all was read
    source_docs: np.ndarray
    source_tokens: np.ndarray
    last_order: tuple | None
    measured_complete: bool

    # ---------------------------------------------------------------- provenance
    def _provenance(self, shard: Shard, entry: dict) -> None:
        rel = shard.name + ".csv.gz"
        if rel not in self.files:
            self.measured_complete = False
            return
        self.result.bytes += self.files[rel]
        state = {"rows": 0, "end": 0}
        batch: list[list] = []
        try:
            with self.fs.open(self._path(rel), "rb") as raw, \
                    gzip.GzipFile(fileobj=raw, mode="rb") as unzipped, \
                    io.TextIOWrapper(unzipped, encoding="utf-8", newline="") as text:
                for line, row in enumerate(csv.reader(text), 1):
                    parsed = self._row(rel, line, row)
                    if parsed is not None:
                        batch.append(parsed)
                    state["rows"] = line
                    if len(batch) >= ROW_BATCH:
                        self._rows(rel, shard, batch, state)
                        batch = []
            if batch:
                self._rows(rel, shard, batch, state)
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            self.p.add(rel, None, f"not a readable gzip file: {exc}")
            self.measured_complete = False
            return
        except UnicodeDecodeError as exc:
            self.p.add(rel, None, f"not valid UTF-8 ({exc.reason})")
            self.measured_complete = False
            return
        except csv.Error as exc:
            self.p.add(rel, None, f"not valid CSV: {exc}")
            self.measured_complete = False
            return
        rows = state["rows"]
        shard.rows = rows
        if shard.sequences is not None and rows != shard.sequences:
            self.p.add(rel, None, f"{plural(rows, 'row')}, but {shard.name}.idx holds "
                       f"{plural(shard.sequences, 'sequence')} (one row per document)")
        elif shard.sequences is None and rows != entry.get("documents"):
            self.p.add(rel, None, f"{plural(rows, 'row')}, but manifest.json shards says "
                       f"{entry.get('documents')!r} documents for {shard.name}")

    def _row(self, rel: str, line: int, row: list):
        """(line, start, end, id, file_pos, loc), or None and a problem."""
        if len(row) != 5:
            self.p.add(rel, None, f"row {line} has {len(row)} fields, not 5 "
                       "(start,end,id,src,loc)", key=(rel, "fields"))
            return None
        start, end, doc_id, src, loc = row
        try:
            start, end, loc = int(start), int(end), int(loc)
        except ValueError:
            self.p.add(rel, None, f"row {line}: start, end and loc must be integers, got "
                       f"{row[0]!r}, {row[1]!r}, {row[4]!r}", key=(rel, "int"))
            return None
        if src not in self.file_pos and self.records:  # each row names its own source
            self.file_pos[src] = len(self.sources)
            self.sources.append(src)
        if src not in self.file_pos:
            self.p.add(rel, None, f"row {line}: src {src!r} is not a source file of "
                       "manifest.json", key=(rel, "src"))
            return None
        if loc < 1:
            self.p.add(rel, None, f"row {line}: loc {loc} is not a 1-based line number",
                       key=(rel, "loc"))
            return None
        if not _DOC_ID.fullmatch(doc_id):
            self.p.add(rel, None, f"row {line}: id {doc_id!r} is not 16 lowercase hex digits",
                       key=(rel, "id_form"))
            return None
        return (line, start, end, doc_id, self.file_pos[src], loc)

    def _rows(self, rel: str, shard: Shard, batch: list, state: dict) -> None:
        lines = np.array([r[0] for r in batch], dtype=np.int64)
        starts = np.array([r[1] for r in batch], dtype=np.int64)
        ends = np.array([r[2] for r in batch], dtype=np.int64)
        ids = np.array([r[3] for r in batch], dtype=object)
        pos = np.array([r[4] for r in batch], dtype=np.int64)
        locs = np.array([r[5] for r in batch], dtype=np.int64)
        seq = lines - 1  # row n describes sequence n - 1

        # start, end: the sequence's token range in the shard
        if shard.ends is not None:
            inside = seq < shard.sequences
            want_end = np.full(len(seq), -1, dtype=np.int64)
            want_end[inside] = shard.ends[seq[inside]]
            want_start = np.full(len(seq), -1, dtype=np.int64)
            want_start[inside] = want_end[inside] - shard.lengths[seq[inside]]
            wrong = np.flatnonzero(inside & ((starts != want_start) | (ends != want_end)))
            if wrong.size:
                k = int(wrong[0])
                self.p.add(rel, None, f"row {int(lines[k])}: start,end {int(starts[k])},"
                           f"{int(ends[k])} but sequence {int(seq[k])} of {shard.name}.idx "
                           f"spans tokens {int(want_start[k])},{int(want_end[k])}",
                           key=(rel, "span"), count=int(wrong.size))
        else:  # no usable .idx: the rows must at least tile the shard from 0
            prev = np.concatenate([[state["end"]], ends[:-1]])
            wrong = np.flatnonzero((starts != prev) | (ends <= starts))
            if wrong.size:
                k = int(wrong[0])
                self.p.add(rel, None, f"row {int(lines[k])}: start,end {int(starts[k])},"
                           f"{int(ends[k])} do not continue from the previous row's end "
                           f"{int(prev[k])}", key=(rel, "span"), count=int(wrong.size))
        if len(ends):
            state["end"] = int(ends[-1])

        # ids: the stable id of (src, line); keys: the pack order
        keys = np.zeros(len(batch), dtype=np.uint64)
        want_ids = np.empty(len(batch), dtype=object)
        for p in np.unique(pos):
            at = np.flatnonzero(pos == p)
            src = self.sources[int(p)]
            want_ids[at] = doc_order.document_ids(src, locs[at])
            keys[at] = doc_order.order_keys(self.seed, src, locs[at])
        wrong = np.flatnonzero(ids != want_ids)
        if wrong.size:
            k = int(wrong[0])
            self.p.add(rel, None, f"row {int(lines[k])}: id {ids[k]} is not the document id "
                       f"{want_ids[k]} of {self.sources[int(pos[k])]!r} line {int(locs[k])}",
                       key=(rel, "id"), count=int(wrong.size))

        # per source, from the rows (a records pack lists no sources to compare with)
        if not self.records:
            np.add.at(self.source_docs, pos, 1)
            np.add.at(self.source_tokens, pos, ends - starts)

        if not self.check_order:
            return
        prev = self.last_order
        if prev is not None:
            k0, p0, l0, shard0 = prev
            key_prev = np.concatenate([[np.uint64(k0)], keys[:-1]])
            pos_prev = np.concatenate([[p0], pos[:-1]])
            loc_prev = np.concatenate([[l0], locs[:-1]])
        else:
            key_prev, pos_prev, loc_prev = keys[:-1], pos[:-1], locs[:-1]
        key_now, pos_now, loc_now = (keys, pos, locs) if prev is not None else (
            keys[1:], pos[1:], locs[1:])
        if self.records:  # sources have no file order: equal keys only must differ
            ahead = (key_now > key_prev) | ((key_now == key_prev) & (
                (pos_now != pos_prev) | (loc_now != loc_prev)))
        else:
            ahead = (key_now > key_prev) | ((key_now == key_prev) & (
                (pos_now > pos_prev) | ((pos_now == pos_prev) & (loc_now > loc_prev))))
        wrong = np.flatnonzero(~ahead)
        if wrong.size:
            k = int(wrong[0]) + (0 if prev is not None else 1)
            same = (key_now[wrong[0]] == key_prev[wrong[0]] and pos_now[wrong[0]] ==
                    pos_prev[wrong[0]] and loc_now[wrong[0]] == loc_prev[wrong[0]])
            before = ("the previous row" if k > 0 or prev is None or prev[3] == shard.name
                      else f"the last row of {prev[3]}.csv.gz")
            self.p.add(rel, None, f"row {int(lines[k])} ({self.sources[int(pos[k])]!r} line "
                       f"{int(locs[k])}) " + ("repeats the document of " if same else
                                              "is out of the pack order after ")
                       + before + f" (documents ascend by seeded hash for seed {self.seed}, "
                       "then file, then line, over all shards)", key=("order",),
                       count=int(wrong.size))
        if prev is not None and prev[3] != shard.name and len(keys):  # a shard's first rows
            last_bucket = int(doc_order.buckets(np.array([prev[0]], dtype=np.uint64))[0])
            first_bucket = int(doc_order.buckets(keys[:1])[0])
            if last_bucket == first_bucket:
                self.p.add(rel, None, f"row 1 is in hash bucket {first_bucket}, as is the last "
                           f"row of {prev[3]}.csv.gz: shards are cut between buckets",
                           key=("bucket_cut",))
        if len(keys):
            self.last_order = (int(keys[-1]), int(pos[-1]), int(locs[-1]), shard.name)

    # ---------------------------------------------------------------- sequences JSON
    def _sequences_json(self, shards: list[Shard]) -> None:
        rel = SEQUENCES
        doc = self._doc(rel)
        if doc is None:
            return
        want = {s.name: (s.sequences if s.sequences is not None
                         else self.shard_entries[i].get("documents"))
                for i, s in enumerate(shards)}
        seen, prefixes = set(), set()
        for key, value in doc.items():
            head, _, name = key.rpartition("/")
            prefixes.add(head)
            if name not in want:
                self.p.add(rel, None, f"key {key!r} does not name a shard of manifest.json "
                           "(<output dir>/shard_NNNNNN)", key=(rel, "key"))
                continue
            seen.add(name)
            S = want[name]
            if not (isinstance(value, list) and len(value) == 2 and all(map(_is_int, value))):
                self.p.add(rel, None, f"{key!r}: {value!r} is not [sequences, documents]")
            elif _is_int(S) and value != [S, S + 1]:
                self.p.add(rel, None, f"{key!r}: {value} but {name}.idx holds {S} sequences, "
                           f"so [{S}, {S + 1}]")
        for name in sorted(set(want) - seen):
            self.p.add(rel, None, f"shard {name} has no entry", key=(rel, "absent"))
        if len(prefixes) > 1:
            self.p.add(rel, None, f"keys name {len(prefixes)} different directories "
                       f"{sorted(prefixes)}; all shards are in one output directory")

    # ---------------------------------------------------------------- totals
    def _totals(self, shards: list[Shard]) -> None:
        m, rel = self.manifest, fmt.MANIFEST
        listed_docs = sum(s.get("documents") for s in self.shard_entries
                          if _is_int(s.get("documents")))
        listed_tokens = sum(s.get("tokens") for s in self.shard_entries
                            if _is_int(s.get("tokens")))
        if m.get("documents") != listed_docs:
            self.p.add(rel, None, f"documents is {m.get('documents')!r}, but its shards list "
                       f"{listed_docs}")
        if m.get("tokens") != listed_tokens:
            self.p.add(rel, None, f"tokens is {m.get('tokens')!r}, but its shards list "
                       f"{listed_tokens}")
        sources = m["sources"]
        if self.records:  # no sources listed: the totals are checked against the shards
            sources = [{"documents": m.get("documents"), "tokens": m.get("tokens"),
                        "empty_documents": m.get("empty_documents")}]
        empty = sum(s.get("empty_documents") for s in sources if _is_int(s.get("empty_documents")))
        if m.get("empty_documents") != empty:
            self.p.add(rel, None, f"empty_documents is {m.get('empty_documents')!r}, but its "
                       f"sources add up to {empty}")
        for key, listed in (("documents", sum(s.get("documents") for s in sources
                                              if _is_int(s.get("documents")))),
                            ("tokens", sum(s.get("tokens") for s in sources
                                           if _is_int(s.get("tokens"))))):
            if m.get(key) != listed:
                self.p.add(rel, None, f"{key} is {m.get(key)!r}, but its sources add up to "
                           f"{listed}")
        if not self.measured_complete:
            return  # a shard could not be read: its counts are missing from the sums
        measured = {"documents": self.result.documents, "tokens": self.result.tokens}
        for key, value in measured.items():
            if m.get(key) != value:
                self.p.add(rel, None, f"{key} is {m.get(key)!r}, but the shards' .idx files "
                           f"hold {value}")
        for i, s in enumerate([] if self.records else sources):
            for key, value in (("documents", int(self.source_docs[i])),
                               ("tokens", int(self.source_tokens[i]))):
                if s.get(key) != value:
                    self.p.add(rel, None, f"sources[{i}] ({s['file']!r}) {key} is "
                               f"{s.get(key)!r}, but the provenance rows give {value}")

