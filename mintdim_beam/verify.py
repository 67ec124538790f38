"""`mintdim-beam verify OUT`: check a finished unit-build from its own files.

Nothing but OUT is read (the inputs the manifest records are only looked up, to say
whether each is still what the build read): manifest.json and length_field.json give the
layout, the shards are scanned with numpy (memory-mapped when local, read in
record-aligned chunks through fsspec otherwise), and the four index files are streamed
line by line and joined on `sample_id` (every one of them is ascending). What is kept in
memory is per-unit arrays of token counts (one int per record) plus what
duplicate_index.jsonl and the UNK positions hold.

Exit 0 and a one-line summary when the build is clean; exit 1 and the first problems
(file, record or line, what) otherwise.
"""
from __future__ import annotations

import bisect
import json
import re
import time
from array import array
from dataclasses import dataclass, field

import fsspec
import numpy as np

from . import format as fmt
from .ownership import MARKER
from . import storage
from .errors import TokenDTypeCapacityError
from .input_files import recorded_status
from .plan import DTYPES, select_dtype
from .template import LITERAL_NAME

SUMMARY_FILES = (fmt.MANIFEST, fmt.LENGTH_FIELD, fmt.HISTOGRAM, fmt.STATS)
INDEX_FILES = (fmt.SAMPLE_INDEX, fmt.UNK_INDEX, fmt.OVERFLOW_INDEX, fmt.DUPLICATE_INDEX)
REPORT_DIR = "report"  # written by `mintdim-beam report`; allowed, not checked
MAGICS = {name: magic for name, magic, _ in DTYPES}
BYTES_PER_TOKEN = {name: width for name, _, width in DTYPES}
OVERFLOW_ACTIONS = ("truncate", "skip", "extend")

SAMPLE_KEYS = ["sample_id", "hash", "token_count", "unit_size", "source_file", "source_line",
               "shard_path", "empty_fields"]
UNK_KEYS = ["sample_id", "hash", "source_file", "source_line", "unk_count", "unk_positions",
            "unk_field_indices", "unk_chars"]
OVERFLOW_KEYS = ["sample_id", "source_file", "source_line", "token_count", "max_unit_size",
                 "action"]
DUPLICATE_KEYS = ["hash", "count", "samples"]
MEMBER_KEYS = ["sample_id", "source_file", "source_line"]
STATS_KEYS = ["total_samples", "total_tokens", "token_dtype", "bytes_per_token",
              "duplicate_groups", "duplicate_samples", "samples_with_unk", "unk_tokens",
              "unit_distribution"]
LENGTH_FIELD_KEYS = ["magic", "sequence_template", "length_fields", "token_dtype",
                     "pad_token_id"]
MANIFEST_KEYS = ["pipeline", "mintdim_version", "tokenizer", "token_storage",
                 "sequence_template", "length_field_metadata", "units", "source", "output"]

_SHARD = re.compile(r"shard_(\d{6,})\.bin")  # at least 6 digits, as `fmt.shard_name` writes
_UNIT = re.compile(r"unit_(\d+)")
_HASH = re.compile(r"[0-9a-f]{64}")
CHUNK_SLOTS = 1 << 22  # token slots per numpy chunk (8 MiB of uint16)


@dataclass
class Problem:
    file: str              # relative to OUT ("" for OUT itself)
    record: int | None     # record index inside a shard, 1-based line of a .jsonl, or None
    what: str

    def where(self) -> str:
        if self.record is None:
            return self.file or "."
        unit = "line" if self.file.endswith(".jsonl") else "record"
        return f"{self.file} ({unit} {self.record})"

    def __str__(self) -> str:
        return f"{self.where()}: {self.what}"


@dataclass
class VerifyResult:
    out: str
    problems: list[Problem] = field(default_factory=list)
    # problems found, each repeated kind once (its entry says how many more like it);
    # `problems` holds the first max_problems
    problem_count: int = 0
    records: int = 0         # records in the shards
    shards: int = 0
    units: int = 0           # unit directories (manifest units.sizes)
    units_with_records: int = 0
    samples: int = 0         # sample_index rows
    tokens: int = 0          # sum of sample_index token_count
    bytes: int = 0           # shard bytes scanned
    seconds: float = 0.0
    # (file as given, status) per input the manifest records (`inputs`, ours; absent in
    # a mintdim 0.2.1 build): informational, a later change does not fail the build
    inputs: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def summary(self) -> str:
        if self.ok:
            return (f"verify {self.out}: OK, {self.records} records, {self.shards} shards, "
                    f"{self.units} units ({self.units_with_records} with records), "
                    f"{self.tokens} tokens, {fmt.format_mib(self.bytes)}, "
                    f"{self.seconds:.2f} s")
        shown = len(self.problems)
        more = f", first {shown} shown" if shown < self.problem_count else ""
        return (f"verify {self.out}: FAILED, {self.problem_count} problem"
                f"{'s' if self.problem_count != 1 else ''}{more} ({self.seconds:.2f} s)")


class _Problems:
    """Keeps the first `limit` problems. A repeated kind of problem (same key) is folded
    into its first occurrence as a count, so one corrupt unit cannot flood the list."""

    def __init__(self, limit: int):
        self.limit = max(0, limit)
        self.kept: list[Problem] = []
        self.total = 0
        self._first: dict = {}
        self._more: dict = {}

    def add(self, file: str, record, what: str, key=None, count: int = 1) -> None:
        if key is not None and key in self._first:
            self._more[key] += count
            return
        problem = Problem(file, None if record is None else int(record), what)
        self.total += 1
        if key is not None:
            self._first[key] = problem
            self._more[key] = count - 1
        if len(self.kept) < self.limit:
            self.kept.append(problem)

    def finish(self) -> list[Problem]:
        for key, more in self._more.items():
            if more:
                self._first[key].what += f" (and {more} more like it)"
        return self.kept


def _is_int(value) -> bool:
    return type(value) is int


def _canonical_doc(text: str, obj) -> bool:
    return text == fmt.json_document(obj)


class _Cursor:
    """An ascending-by-sample_id stream of (line, row) with one row of lookahead; `sid` is
    the head's sample_id (infinity once exhausted)."""

    END = float("inf")

    def __init__(self, rows, name: str, problems: _Problems):
        self._rows = rows
        self._name = name
        self._p = problems
        self._last = -1
        self.head = None
        self.sid = self.END
        self.advance()

    def advance(self) -> None:
        for line, row in self._rows:
            sid = row.get("sample_id")
            if not _is_int(sid) or sid < 0:
                self._p.add(self._name, line, f"sample_id {sid!r} is not a non-negative int",
                            key=(self._name, "sid"))
                continue
            if sid <= self._last:
                self._p.add(self._name, line, f"sample_id {sid} is not above the previous row's "
                            f"{self._last}: rows must be in ascending sample_id",
                            key=(self._name, "order"))
                continue
            self._last = sid
            self.head, self.sid = (line, row), sid
            return
        self.head, self.sid = None, self.END


class _Verifier:
    def __init__(self, out: str, max_problems: int):
        self.out = out
        self.p = _Problems(max_problems)
        self.result = VerifyResult(out=out)

    # ---------------------------------------------------------------- listing, I/O
    def _list(self) -> bool:
        self.fs, self.root = fsspec.core.url_to_fs(storage.resolve(self.out))
        self.root = self.root.rstrip("/") or "/"
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.local = "file" in protocols or "local" in protocols
        self.fs.invalidate_cache(self.root)
        if not self.fs.exists(self.root) or not self.fs.isdir(self.root):
            self.p.add("", None, f"output directory {self.out} does not exist")
            return False
        self.files: dict[str, int] = {}
        self.dirs: set[str] = set()
        prefix = self.root.rstrip("/") + "/"
        for path, info in self.fs.find(self.root, withdirs=True, detail=True).items():
            path = path.rstrip("/")
            if not path.startswith(prefix):
                continue
            rel = path[len(prefix):]
            if info.get("type") == "directory":
                self.dirs.add(rel)
            else:
                self.files[rel] = int(info.get("size") or 0)
        for rel in list(self.files):  # object stores: directories are implied
            parts = rel.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        return True

    def _path(self, rel: str) -> str:
        return self.root.rstrip("/") + "/" + rel

    def _read_text(self, rel: str):
        try:
            with self.fs.open(self._path(rel), "rb") as handle:
                return handle.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            self.p.add(rel, None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})")
        except OSError as exc:
            self.p.add(rel, None, f"cannot be read: {exc}")
        return None

    def _doc(self, rel: str):
        """A whole-file JSON document, parsed; None (and a problem) when unusable."""
        if rel not in self.files:
            return None
        text = self._read_text(rel)
        if text is None:
            return None
        try:
            obj = json.loads(text)
        except ValueError as exc:
            self.p.add(rel, None, f"not valid JSON: {exc}")
            return None
        if not isinstance(obj, dict):
            self.p.add(rel, None, f"not a JSON object but {type(obj).__name__}")
            return None
        if not _canonical_doc(text, obj):
            self.p.add(rel, None, "not written in the canonical form (json.dump with "
                       "ensure_ascii=False, indent=2, no trailing newline)")
        return obj

    def _jsonl(self, rel: str, keys: list[str], optional: tuple = (), render=None):
        """(line, row) for each row of an index file, streamed; bad rows become problems.
        `render(row)` is a fast formatter of the canonical line (json.dumps is the judge
        whenever it disagrees)."""
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
                names = list(row)
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
                              quoted, row["source_line"], row["shard_path"], row["empty_fields"])

    def _unk_text(self, row: dict) -> str:
        quoted = self._quoted_source(row)
        if row["unk_count"] != len(row["unk_positions"]):
            return ""
        return fmt.unk_row(row["sample_id"], row["hash"], quoted, row["source_line"],
                           row["unk_positions"], row["unk_field_indices"], row["unk_chars"])

    # ---------------------------------------------------------------- the checks
    def run(self) -> VerifyResult:
        start = time.perf_counter()
        try:
            if self._list() and self._manifest():
                self._layout()
                self._indices()
                self._shards()
                self._join_rows_and_records()
                self._summaries()
        finally:
            r = self.result
            r.problems = self.p.finish()
            r.problem_count = self.p.total
            r.seconds = time.perf_counter() - start
        return self.result

    def _inputs(self, inputs) -> None:
        """Which inputs the build came from, and whether each is still the same."""
        if inputs is None:
            return
        if not isinstance(inputs, list):
            self.p.add(fmt.MANIFEST, None, f"inputs {inputs!r} is not a list")
            return
        for entry in inputs:
            name = entry.get("file") if isinstance(entry, dict) else None
            self.result.inputs.append((name if isinstance(name, str) else repr(entry),
                                       recorded_status(entry)))

    def _manifest(self) -> bool:
        if fmt.MANIFEST not in self.files:
            failed = sorted(rel for rel in self.files
                            if rel.split("/")[-1] == fmt.FAILED_UNIT)
            what = "manifest.json is missing: the build did not complete"
            if failed:
                reason = self._failure_reason(failed[0])
                what += (f"; it failed ({fmt.FAILED_UNIT} in "
                         f"{', '.join(f.rsplit('/', 1)[0] for f in failed)})"
                         + (f": {reason}" if reason else ""))
            self.p.add(fmt.MANIFEST, None, what)
            return False
        m = self._doc(fmt.MANIFEST)
        if m is None:
            return False
        head = list(m)[:len(MANIFEST_KEYS)]
        if head != MANIFEST_KEYS:
            self.p.add(fmt.MANIFEST, None, f"keys start {head}, expected {MANIFEST_KEYS}")
        self._inputs(m.get("inputs"))

        def get(*path):
            obj = m
            for name in path:
                if not isinstance(obj, dict) or name not in obj:
                    self.p.add(fmt.MANIFEST, None, f"{'.'.join(path)} is missing")
                    return None
                obj = obj[name]
            return obj

        if m.get("pipeline") != "unit-build":
            self.p.add(fmt.MANIFEST, None, f"pipeline is {m.get('pipeline')!r}, not 'unit-build'")
        if m.get("length_field_metadata", fmt.LENGTH_FIELD) != fmt.LENGTH_FIELD:
            self.p.add(fmt.MANIFEST, None, f"length_field_metadata is "
                       f"{m.get('length_field_metadata')!r}, not {fmt.LENGTH_FIELD!r}")
        vocab, unk, pad = get("tokenizer", "vocab_size"), get("tokenizer", "unk_id"), get("tokenizer", "pad_id")
        dtype, bpt, magic = (get("token_storage", "dtype"), get("token_storage", "bytes_per_token"),
                             get("token_storage", "magic"))
        template, sizes = get("sequence_template"), get("units", "sizes")
        per_shard = get("output", "samples_per_shard")
        files = get("source", "files")
        usable = True
        if dtype not in fmt.NP_DTYPES or dtype not in MAGICS:
            self.p.add(fmt.MANIFEST, None, f"token_storage.dtype {dtype!r} is not uint16 or uint32")
            usable = False
        else:
            if magic != MAGICS[dtype]:
                self.p.add(fmt.MANIFEST, None, f"token_storage.magic {magic!r} is not {MAGICS[dtype]} "
                           f"for {dtype}")
            if bpt != BYTES_PER_TOKEN[dtype]:
                self.p.add(fmt.MANIFEST, None, f"token_storage.bytes_per_token {bpt!r} is not "
                           f"{BYTES_PER_TOKEN[dtype]} for {dtype}")
        if not _is_int(vocab) or vocab <= 0:
            self.p.add(fmt.MANIFEST, None, f"tokenizer.vocab_size {vocab!r} is not a positive int")
            usable = False
        elif dtype in MAGICS:
            try:
                want = select_dtype(vocab)[0]
            except TokenDTypeCapacityError:
                want = None
            if want != dtype:
                self.p.add(fmt.MANIFEST, None, f"vocab_size {vocab} needs token dtype {want}, "
                           f"manifest says {dtype}")
        for name, value in (("unk_id", unk), ("pad_id", pad)):
            if not _is_int(value) or value < 0 or (_is_int(vocab) and value >= vocab):
                self.p.add(fmt.MANIFEST, None, f"tokenizer.{name} {value!r} is not an id in "
                           f"[0, vocab_size)")
                usable = False
        if (not isinstance(template, list) or not template
                or not all(isinstance(s, str) for s in template)):
            self.p.add(fmt.MANIFEST, None, f"sequence_template {template!r} is not a non-empty "
                       "list of segment names")
            usable = False
        if (not isinstance(sizes, list) or not sizes or not all(_is_int(s) and s > 0 for s in sizes)
                or any(a >= b for a, b in zip(sizes, sizes[1:]))):
            self.p.add(fmt.MANIFEST, None, f"units.sizes {sizes!r} are not positive ints in "
                       "strictly ascending order")
            usable = False
        if not _is_int(per_shard) or per_shard <= 0:
            self.p.add(fmt.MANIFEST, None, f"output.samples_per_shard {per_shard!r} is not a "
                       "positive int")
            usable = False
        if not isinstance(files, list):
            files = []
        if not usable:
            return False
        self.vocab, self.unk_id, self.pad_id = vocab, unk, pad
        self.dtype_name, self.dtype = dtype, fmt.NP_DTYPES[dtype]
        self.bpt, self.magic = BYTES_PER_TOKEN[dtype], MAGICS[dtype]
        self.template, self.n = template, len(template)
        self.sizes, self.S = list(sizes), per_shard
        self.source_files = {f: i for i, f in enumerate(files) if isinstance(f, str)}
        self.result.units = len(self.sizes)
        self.field_segments = [s for s in template if s != LITERAL_NAME]
        self._empty_cache: dict = {}
        self._length_field()
        return True

    def _failure_reason(self, rel: str) -> str:
        text = self._read_text(rel) or ""
        _, _, tail = text.partition("Failure:")
        for line in tail.splitlines():
            if line.strip():
                return line.strip()[:300]
        return ""

    def _length_field(self) -> None:
        rel = fmt.LENGTH_FIELD
        doc = self._doc(rel)
        if doc is None:
            return
        if list(doc) != LENGTH_FIELD_KEYS:
            self.p.add(rel, None, f"keys {list(doc)} are not {LENGTH_FIELD_KEYS}")
        for key, want, name in (("magic", self.magic, "token_storage.magic"),
                                ("sequence_template", self.template, "sequence_template"),
                                ("token_dtype", self.dtype_name, "token_storage.dtype"),
                                ("pad_token_id", self.pad_id, "tokenizer.pad_id")):
            if doc.get(key) != want:
                self.p.add(rel, None, f"{key} {doc.get(key)!r} disagrees with manifest.json "
                           f"{name} {want!r}")
        fields = doc.get("length_fields")
        if not isinstance(fields, list) or len(fields) != self.n:
            self.p.add(rel, None, f"length_fields must list the {self.n} segments of "
                       "sequence_template")
            return
        self.field_segments = []
        for i, entry in enumerate(fields):
            if not isinstance(entry, dict):
                self.p.add(rel, None, f"length_fields[{i}] is not an object")
                continue
            if entry.get("index") != i or entry.get("name") != self.template[i]:
                self.p.add(rel, None, f"length_fields[{i}] is {entry.get('index')!r}/"
                           f"{entry.get('name')!r}, not {i}/{self.template[i]!r}")
            kind = entry.get("kind")
            if kind == "field":
                self.field_segments.append(entry.get("name"))
                if entry.get("content") is not None or entry.get("field") != entry.get("name"):
                    self.p.add(rel, None, f"length_fields[{i}] is a field segment: content must "
                               "be null and field its name")
            elif kind == "literal":
                if not isinstance(entry.get("content"), str) or "field" in entry:
                    self.p.add(rel, None, f"length_fields[{i}] is a literal segment: content "
                               "must be its text, with no field key")
            else:
                self.p.add(rel, None, f"length_fields[{i}].kind {kind!r} is not field or literal")

    def _layout(self) -> None:
        """Which files exist: the fixed set, one directory per unit, nothing temporary."""
        for name in SUMMARY_FILES + INDEX_FILES:
            if name not in self.files:
                self.p.add(name, None, "missing" + (" (an empty index file must still exist)"
                                                    if name.endswith(".jsonl") else ""))
        tmp_top = storage.TMP_DIR_NAME
        if tmp_top in self.dirs or any(f.startswith(tmp_top + "/") for f in self.files):
            inside = sorted(f for f in self.files if f.startswith(tmp_top + "/"))
            self.p.add(tmp_top, None, f"temporary directory left behind by an unfinished or "
                       f"failed write ({len(inside)} file{'s' if len(inside) != 1 else ''} inside"
                       + (f", e.g. {inside[0]})" if inside else ")"))
        unit_of = {fmt.unit_dir(s): s for s in self.sizes}
        self.shard_files: dict[int, dict[int, str]] = {s: {} for s in self.sizes}
        empty_notice = set()
        reported_tops = set()
        for rel in sorted(self.files):
            parts = rel.split("/")
            top = parts[0]
            if top == tmp_top:
                continue
            if parts[-1].endswith(".tmp"):
                self.p.add(rel, None, "temporary file (*.tmp) left behind by an unfinished or "
                           "failed write", key=("tmp", "/".join(parts[:-1])))
                continue
            if top == REPORT_DIR and len(parts) > 1:
                continue
            if len(parts) == 1:
                if top == MARKER:
                    self.p.add(rel, None, "ownership marker of a build that did not end: "
                               "the build is incomplete (see mintdim-beam clean)")
                elif top not in SUMMARY_FILES + INDEX_FILES:
                    self.p.add(rel, None, "unexpected file in the output directory")
                continue
            if top in unit_of:
                size = unit_of[top]
                match = _SHARD.fullmatch(parts[1]) if len(parts) == 2 else None
                number = int(match.group(1)) if match else None
                if match and fmt.shard_name(size, number) == rel:
                    self.shard_files[size][number] = rel
                elif len(parts) == 2 and parts[1] == fmt.EMPTY_UNIT:
                    empty_notice.add(size)
                elif len(parts) == 2 and parts[1] == fmt.FAILED_UNIT:
                    self.p.add(rel, None, "failure notice in a build that has manifest.json")
                else:
                    self.p.add(rel, None, f"unexpected file in {top}/")
                continue
            reported_tops.add(top)
        # Directories with files (above) or empty ones, each reported once.
        reported_tops |= {rel for rel in self.dirs if "/" not in rel and rel not in unit_of
                          and rel not in (tmp_top, REPORT_DIR)}
        for top in sorted(reported_tops):
            self.p.add(top, None, (f"unit directory not listed in manifest.json units.sizes "
                                   f"{self.sizes}" if _UNIT.fullmatch(top) else
                                   "unexpected directory in the output directory"))
        for size in self.sizes:
            udir = fmt.unit_dir(size)
            shards = self.shard_files[size]
            if udir not in self.dirs:
                self.p.add(udir, None, "unit directory is missing (every unit in "
                           "manifest.json units.sizes gets one)")
                continue
            if not shards and size not in empty_notice:
                self.p.add(udir, None, f"unit has no shard and no {fmt.EMPTY_UNIT}")
            if shards and size in empty_notice:
                self.p.add(f"{udir}/{fmt.EMPTY_UNIT}", None, "unit has shards but also an "
                           "empty-unit notice")
            if shards:
                count = max(shards) + 1
                for k in range(count):
                    if k not in shards:
                        self.p.add(fmt.shard_name(size, k), None,
                                   f"missing shard: shard files must be numbered 0..{count - 1} "
                                   "without gaps", key=("gap", size))
        self.result.shards = sum(len(v) for v in self.shard_files.values())
        self.shard_set = {rel for v in self.shard_files.values() for rel in v.values()}

    # ---------------------------------------------------------------- index files
    def _indices(self) -> None:
        """sample_index.jsonl streamed once, joined on sample_id with the overflow and UNK
        indices (all ascending) and with the members of duplicate_index.jsonl."""
        S, p, rel = self.S, self.p, fmt.SAMPLE_INDEX
        self._quoted: dict = {}
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
        unk = _Cursor(self._jsonl(fmt.UNK_INDEX, UNK_KEYS, render=self._unk_text),
                      fmt.UNK_INDEX, self.p)
        over = _Cursor(self._jsonl(fmt.OVERFLOW_INDEX, OVERFLOW_KEYS, ("new_unit_size",)),
                       fmt.OVERFLOW_INDEX, self.p)

        def rows_before(sid) -> None:
            """Overflow and UNK rows of samples before `sid`, which have no sample row."""
            while over.sid < sid:
                self._overflow_row(*over.head, known, None)
                over.advance()
            while unk.sid < sid:
                u_line, u_row = unk.head
                p.add(fmt.UNK_INDEX, u_line, f"sample_id {u_row['sample_id']} has no "
                      "sample_index.jsonl row", key=("unk", "orphan"))
                unk.advance()

        samples_with_unk = unk_tokens = tokens = rows = 0
        last_sid, last_source = -1, (-1, 0)
        for line, row in self._jsonl(rel, SAMPLE_KEYS, render=self._sample_text):
            sid, digest, count, unit = (row["sample_id"], row["hash"], row["token_count"],
                                        row["unit_size"])
            if not (type(sid) is int and type(count) is int and type(unit) is int
                    and type(digest) is str and sid >= 0 and count >= 0):
                p.add(rel, line, "sample_id, hash, token_count or unit_size has the wrong type",
                      key=(rel, "types"))
                continue
            if sid <= last_sid:
                p.add(rel, line, f"sample_id {sid} is not above the previous row's {last_sid}: "
                      "rows must be in ascending sample_id", key=(rel, "order"))
                continue
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
                if (index, number) <= last_source:
                    p.add(rel, line, f"source {name}:{number} does not come after the previous "
                          "row's (sample_id follows file order then line order)",
                          key=(rel, "source_order"))
                last_source = (index, number)
            empty = row["empty_fields"]
            if empty.__class__ is not list or (empty and not self._empty_fields_ok(empty)):
                p.add(rel, line, f"empty_fields {empty!r} are not field segment names of "
                      "sequence_template in segment order", key=(rel, "empty"))
            rows += 1
            tokens += count

            rows_before(sid)
            if over.sid == sid:
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

            if members:
                member = members.pop(sid, None)
                if member is not None:
                    self._member(sid, member, row)
            if unk.sid == sid:
                positions = self._unk_row(*unk.head, row, unit, k)
                if positions:
                    samples_with_unk += 1
                    unk_tokens += positions
                unk.advance()
        rows_before(_Cursor.END)
        for sid, (_, _, _, dup_line) in sorted(members.items()):
            p.add(fmt.DUPLICATE_INDEX, dup_line, f"member sample_id {sid} has no "
                  "sample_index.jsonl row", key=("dup", "orphan"))
        self.result.samples, self.result.tokens = rows, tokens
        self.samples_with_unk, self.unk_tokens = samples_with_unk, unk_tokens
        self._duplicate_completeness(np.frombuffer(hash_heads, dtype=np.uint64)
                                     if len(hash_heads) else np.zeros(0, np.uint64))

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
        if not isinstance(name, str) or not _is_int(number) or number < 1:
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
        if not (isinstance(positions, list) and all(_is_int(x) for x in positions)
                and isinstance(fields, list) and all(_is_int(x) for x in fields)
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
            if row.get("action") == "extend" and _is_int(row.get("new_unit_size")):
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
        count, max_size = row["token_count"], row["max_unit_size"]
        if action not in OVERFLOW_ACTIONS:
            self.p.add(rel, line, f"action {action!r} is not one of {list(OVERFLOW_ACTIONS)}",
                       key=(rel, "action"))
            return
        if ("new_unit_size" in row) != (action == "extend"):
            self.p.add(rel, line, "new_unit_size belongs to extend rows only",
                       key=(rel, "new_unit_size"))
        if not _is_int(count) or not _is_int(max_size):
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
            if sample is not None and sample[1]["token_count"] != known[-1]:
                self.p.add(fmt.SAMPLE_INDEX, sample[0], f"truncated sample has token_count "
                           f"{sample[1]['token_count']}, not the largest unit size {known[-1]}",
                           key=(rel, "truncate"))
            return
        new = row.get("new_unit_size")
        # The policy extends to the token count; the prompt lets a user pick a larger size.
        if not _is_int(new) or new < count:
            self.p.add(rel, line, f"new_unit_size {new!r} does not hold the sample's "
                       f"token_count {count}", key=(rel, "extend"))
        if sample is not None and sample[1]["token_count"] != count:
            self.p.add(fmt.SAMPLE_INDEX, sample[0], f"extended sample has token_count "
                       f"{sample[1]['token_count']}, not its overflow row's {count}",
                       key=(rel, "extend_count"))
        if _is_int(new) and new not in known:
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
                if list(member) != MEMBER_KEYS or not _is_int(member["sample_id"]):
                    self.p.add(rel, line, f"member keys {list(member)} are not {MEMBER_KEYS}",
                               key=(rel, "member"))
                    continue
                sid = member["sample_id"]
                ids.append(sid)
                if sid in members:
                    self.p.add(rel, line, f"sample_id {sid} is in more than one group",
                               key=(rel, "twice"))
                members[sid] = (digest, member["source_file"], member["source_line"], line)
            if any(a >= b for a, b in zip(ids, ids[1:])):
                self.p.add(rel, line, "samples are not in ascending sample_id", key=(rel, "order"))
            if ids:
                if ids[0] <= last_first:
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

    # ---------------------------------------------------------------- shards
    def _chunks(self, rel: str, records: int, width: int):
        """(first record, array of shape (c, width)) over the whole records of a shard."""
        if records <= 0:
            return
        step = max(1, CHUNK_SLOTS // width)
        path = self._path(rel)
        if self.local:
            mm = np.memmap(path, dtype=self.dtype, mode="r", shape=(records, width))
            try:
                for a in range(0, records, step):
                    yield a, np.asarray(mm[a:a + step])
            finally:
                del mm
            return
        with self.fs.open(path, "rb") as handle:
            for a in range(0, records, step):
                c = min(step, records - a)
                want = c * width * self.bpt
                data = handle.read(want)
                while len(data) < want:
                    more = handle.read(want - len(data))
                    if not more:
                        break
                    data += more
                c = len(data) // (width * self.bpt)
                if not c:
                    return
                yield a, np.frombuffer(data[:c * width * self.bpt], dtype=self.dtype).reshape(c, width)

    def _guess_unit(self, rel: str, size: int, own: int) -> str:
        """For a shard whose records do not fit: the unit whose records it looks like."""
        for other in self.sizes:
            width, rec_bytes = 1 + self.n + other, fmt.record_bytes(other, self.n, self.bpt)
            if other == own or size % rec_bytes:
                continue
            records = size // rec_bytes
            if self.local:
                heads = np.memmap(self._path(rel), dtype=self.dtype, mode="r",
                                  shape=(records, width))[:, 0]
            elif size <= 256 << 20:
                heads = np.frombuffer(self.fs.cat_file(self._path(rel)),
                                      dtype=self.dtype).reshape(records, width)[:, 0]
            else:
                return ""
            if bool(np.all(heads == self.magic)):
                return f"; it looks like a shard of unit_{other} ({records} records of {width} slots)"
        return ""

    def _shards(self) -> None:
        """Every shard of every unit, in record-aligned numpy chunks."""
        self.records: dict[int, int] = {}
        self.record_sums: dict[int, dict[int, np.ndarray]] = {}
        for unit in self.sizes:
            shards = self.shard_files[unit]
            unks = tuple(np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64)
                         for a in self.unk_entries[unit])  # k, position, field, line
            count = (max(shards) + 1) if shards else 0
            self.records[unit] = 0
            self.record_sums[unit] = {}  # k -> segment-length sums of its first <= S records
            for k in sorted(shards):
                self._scan_shard(unit, k, shards[k], last=k == count - 1, unks=unks)
        self.result.records = sum(self.records.values())
        self.result.units_with_records = sum(1 for v in self.records.values() if v)

    def _scan_shard(self, unit: int, k: int, rel: str, last: bool, unks) -> None:
        n, S = self.n, self.S
        width, rec_bytes = 1 + n + unit, fmt.record_bytes(unit, n, self.bpt)
        size = self.files[rel]
        self.result.bytes += size
        records, extra = divmod(size, rec_bytes)
        self.records[unit] += records
        if size == 0:
            self.p.add(rel, None, "empty shard (no shard file may be empty)")
            return
        if extra:
            self.p.add(rel, None, f"size {size} bytes is not a whole number of records of "
                       f"{width} slots (1 + {n} + unit {unit}, {rec_bytes} bytes): {extra} bytes "
                       f"over {records} records (truncated, or a shard of another unit)"
                       f"{self._guess_unit(rel, size, unit)}")
        elif records > S or (not last and records != S):
            self.p.add(rel, None, f"holds {records} records; every shard but the last holds "
                       f"samples_per_shard = {S} and the last 1..{S}")
        damaged = False  # some record's contents do not fit this unit
        kept = []
        for a, chunk in self._chunks(rel, records, width):
            sums, inside, bad = self._check_records(rel, unit, a, chunk)
            damaged = damaged or bad
            keep = min(chunk.shape[0], max(0, S - a))  # rows that are unit records k*S + i
            if keep:
                kept.append(sums[:keep])
                self._check_unks(rel, k * S + a, a, chunk[:keep], inside[:keep], unks)
        if kept:
            self.record_sums[unit][k] = np.concatenate(kept)
        if damaged and not extra:
            guess = self._guess_unit(rel, size, unit)
            if guess:
                self.p.add(rel, None, f"records do not fit unit_{unit}{guess}")

    def _check_records(self, rel: str, unit: int, a: int, chunk: np.ndarray):
        """Magic, lengths, padding and token range of records a.. of a shard, vectorized.
        Returns the records' segment-length sums, which payload slots hold their tokens,
        and whether any record is damaged."""
        n = self.n
        bad_magic = np.flatnonzero(chunk[:, 0] != self.magic)
        if bad_magic.size:
            r = bad_magic[0]
            self.p.add(rel, a + r, f"slot 0 is {int(chunk[r, 0])}, not the magic {self.magic} "
                       "(record misaligned or corrupt)", key=(rel, "magic"),
                       count=int(bad_magic.size))
        sums = chunk[:, 1:1 + n].astype(np.int64).sum(axis=1)
        bad_len = np.flatnonzero(sums > unit)
        if bad_len.size:
            r = bad_len[0]
            self.p.add(rel, a + r, f"segment lengths {chunk[r, 1:1 + n].tolist()} sum to "
                       f"{int(sums[r])} > unit size {unit}", key=(rel, "lengths"),
                       count=int(bad_len.size))
        payload = chunk[:, 1 + n:]
        inside = np.arange(unit)[None, :] < sums[:, None]
        bad_pad = np.flatnonzero(((payload != self.pad_id) & ~inside).any(axis=1))
        if bad_pad.size:
            r = bad_pad[0]
            j = int(np.flatnonzero((payload[r] != self.pad_id) & ~inside[r])[0])
            self.p.add(rel, a + r, f"payload slot {j} (after the {int(sums[r])}-token payload) "
                       f"is {int(payload[r, j])}, not pad_id {self.pad_id}", key=(rel, "pad"),
                       count=int(bad_pad.size))
        bad_tok = np.flatnonzero(((payload >= self.vocab) & inside).any(axis=1))
        if bad_tok.size:
            r = bad_tok[0]
            j = int(np.flatnonzero((payload[r] >= self.vocab) & inside[r])[0])
            self.p.add(rel, a + r, f"payload token {int(payload[r, j])} at position {j} is not "
                       f"below vocab_size {self.vocab} (the magic is never a token)",
                       key=(rel, "vocab"), count=int(bad_tok.size))
        return sums, inside, bool(bad_magic.size or bad_len.size or bad_pad.size or bad_tok.size)

    def _check_unks(self, rel, first, a, chunk, inside, unks) -> None:
        """Records first.. of the unit (rows a.. of the shard): each listed UNK position
        holds unk_id inside the segment it names, and no other payload token is unk_id."""
        n = self.n
        unk_k, unk_p, unk_f, unk_l = unks
        c = chunk.shape[0]
        lo, hi = np.searchsorted(unk_k, [first, first + c]) if unk_k.size else (0, 0)
        payload = chunk[:, 1 + n:]
        have = np.count_nonzero((payload == self.unk_id) & inside, axis=1)
        want = np.bincount(unk_k[lo:hi] - first, minlength=c)
        diff = np.flatnonzero(have != want)
        if diff.size:
            r = diff[0]
            self.p.add(rel, a + r, f"payload holds {int(have[r])} unk_id ({self.unk_id}) tokens, "
                       f"unk_index.jsonl lists {int(want[r])} for this record",
                       key=(rel, "unk_count"), count=int(diff.size))
        if hi <= lo:
            return
        rows, pos = unk_k[lo:hi] - first, unk_p[lo:hi]
        got = payload[rows, pos]
        bad = np.flatnonzero(got != self.unk_id)
        if bad.size:
            b = bad[0]
            self.p.add(fmt.UNK_INDEX, int(unk_l[lo + b]), f"position {int(pos[b])} of record "
                       f"{a + int(rows[b])} in {rel} holds {int(got[b])}, not unk_id "
                       f"{self.unk_id}", key=("unk", "token"), count=int(bad.size))
        ends = np.cumsum(chunk[rows, 1:1 + n].astype(np.int64), axis=1)
        segment = (ends <= pos[:, None]).sum(axis=1)
        bad = np.flatnonzero(segment != unk_f[lo:hi])
        if bad.size:
            b = bad[0]
            where = (f"is in segment {int(segment[b])}" if segment[b] < n else
                     f"is past the record's {int(ends[b, -1])}-token payload")
            self.p.add(fmt.UNK_INDEX, int(unk_l[lo + b]), f"position {int(pos[b])} {where} "
                       f"of record {a + int(rows[b])} in {rel}, unk_field_indices says "
                       f"{int(unk_f[lo + b])}", key=("unk", "field"), count=int(bad.size))

    def _join_rows_and_records(self) -> None:
        """The k-th row of unit U is record k of U (shard k // S, position k % S)."""
        S = self.S
        rel = fmt.SAMPLE_INDEX
        for unit in self.sizes:
            tokens = (np.frombuffer(self.row_tokens[unit], dtype=np.int64)
                      if len(self.row_tokens[unit]) else np.zeros(0, np.int64))
            lines = self.row_lines[unit]
            rows, records = tokens.size, self.records[unit]
            shard_sums = self.record_sums[unit]
            if rows != records:
                self.p.add(rel, None, f"unit_{unit} has {rows} sample_index rows but {records} "
                           "records in its shards")
            for k in range(-(-rows // S)):  # rows whose record does not exist
                start = k * S + len(shard_sums.get(k, ()))
                end = min(k * S + S, rows)
                if start < end:
                    self.p.add(rel, lines[start], f"row {start} of unit_{unit} has no record "
                               f"(record {start % S} of {fmt.shard_name(unit, k)} does not "
                               "exist)", key=(rel, "no_record", unit), count=end - start)
            for k in sorted(shard_sums):
                sums = shard_sums[k]
                lo, hi = k * S, k * S + sums.size
                if hi > rows:  # records without a row
                    start = max(lo, rows)
                    self.p.add(fmt.shard_name(unit, k), start - lo, f"record {start} of "
                               f"unit_{unit} has no sample_index.jsonl row",
                               key=("no_row", unit), count=hi - start)
                common = min(hi, rows) - lo
                if common <= 0:
                    continue
                diff = np.flatnonzero(sums[:common] != tokens[lo:lo + common])
                if diff.size:
                    j = lo + int(diff[0])
                    self.p.add(rel, lines[j], f"token_count {int(tokens[j])} but its record "
                               f"(record {j - lo} of {fmt.shard_name(unit, k)}) has segment "
                               f"lengths summing to {int(sums[j - lo])}",
                               key=(rel, "token_count", unit), count=int(diff.size))

    # ---------------------------------------------------------------- summaries
    def _summaries(self) -> None:
        distribution = {str(u): self.records[u] for u in self.sizes if self.records[u]}
        histogram = self._doc(fmt.HISTOGRAM)
        if histogram is not None:
            self._unit_counts(fmt.HISTOGRAM, "", histogram, distribution)
        stats = self._doc(fmt.STATS)
        if stats is None:
            return
        if list(stats) != STATS_KEYS:
            self.p.add(fmt.STATS, None, f"keys {list(stats)} are not {STATS_KEYS}")
        want = {
            "total_samples": (self.result.samples, "sample_index.jsonl rows"),
            "total_tokens": (self.result.tokens, "the sum of sample_index.jsonl token_count"),
            "token_dtype": (self.dtype_name, "manifest.json token_storage.dtype"),
            "bytes_per_token": (self.bpt, "the token dtype's size"),
            "duplicate_groups": (self.dup_groups, "duplicate_index.jsonl rows"),
            "duplicate_samples": (self.dup_samples, "the members of duplicate_index.jsonl"),
            "samples_with_unk": (self.samples_with_unk, "unk_index.jsonl rows"),
            "unk_tokens": (self.unk_tokens, "the sum of unk_index.jsonl unk_count"),
        }
        for key, (value, source) in want.items():
            if key not in stats:
                self.p.add(fmt.STATS, None, f"{key} is missing")
            elif stats[key] != value or type(stats[key]) is not type(value):
                self.p.add(fmt.STATS, None, f"{key} is {stats[key]!r} but {source} gives {value!r}")
        dist = stats.get("unit_distribution")
        if isinstance(dist, dict):
            self._unit_counts(fmt.STATS, "unit_distribution ", dist, distribution)
        else:
            self.p.add(fmt.STATS, None, f"unit_distribution {dist!r} is not an object")

    def _unit_counts(self, rel, label, have: dict, want: dict) -> None:
        """{size: records} in `rel` against the shards': values, int type, size order."""
        if have != want:
            for key in sorted(set(have) | set(want), key=lambda k: (len(k), k)):
                if have.get(key) != want.get(key):
                    self.p.add(rel, None, f"{label}{key!r}: {have.get(key)!r}, but the shards "
                               f"hold {want.get(key, 0)} records per unit"
                               + (" (a unit with no record has no entry)"
                                  if key not in want else ""))
        elif not all(_is_int(v) for v in have.values()):
            self.p.add(rel, None, f"{label}record counts {list(have.values())} are not all ints")
        elif list(have) != list(want):
            self.p.add(rel, None, f"{label}sizes are not in ascending order")



def verify_output(out: str, max_problems: int = 50) -> VerifyResult:
    """Check a finished build in `out` (local path or fsspec URL) from its own files."""
    return _Verifier(out, max_problems).run()


def verify_command(args) -> int:
    """`mintdim-beam verify OUT [--max-problems N]`: 0 when clean, 1 otherwise."""
    limit = getattr(args, "max_problems", None)
    try:
        result = verify_output(args.out, 50 if limit is None else limit)
    except OSError as exc:
        print(f"verify {args.out}: cannot read the output: {exc}")
        return 1
    print(result.summary())
    for name, status in result.inputs:
        print(f"  input {name}: {status}")
    if result.ok:
        return 0
    for problem in result.problems:
        print(f"  {problem}")
    if result.problem_count > len(result.problems):
        print(f"  ... and {result.problem_count - len(result.problems)} more (--max-problems)")
    return 1
