"""The unit-build verifier: a finished unit-build checked from its own files
(`mintdim-beam verify OUT` dispatches here, `audit.verify`).

Nothing but OUT is read (the inputs the manifest records are only looked up, to say
whether each is still what the build read): manifest.json and length_field.json give the
layout, the shards are scanned with numpy (memory-mapped when local, read in
record-aligned chunks through fsspec otherwise), and the four index files are streamed
line by line and joined on `sample_id` (every one of them is ascending). What is kept in
memory is per-unit arrays of token counts (one int per record) plus what
duplicate_index.jsonl and the UNK positions hold.

Exit 0 and a one-line summary when the build is clean; exit 1 and the first problems
(file, record or line, what) otherwise.

This module is the orchestration: listing and reading OUT, the manifest / length_field / layout / summaries
checks and the inputs report. The index files are checked by
`mintdim_beam.audit.index_check`, the shards by `mintdim_beam.audit.shard_check`, what
chat and preference builds write beyond mintdim by `mintdim_beam.audit.dialogue_check`;
all are mixins of the one verifier here, sharing its state as attributes they declare.
"""
from __future__ import annotations

import json
import re
import time

import fsspec

from mintdim_beam.audit.checksum_check import ChecksumChecks
from mintdim_beam.audit.deep_check import DeepChecks
from mintdim_beam.audit.dialogue_check import DialogueChecks
from mintdim_beam.audit.index_check import INDEX_FILES, IndexChecks, is_int
from mintdim_beam.audit.rejected_check import check_rejected
from mintdim_beam.audit.lossy_check import LossyChecks
from mintdim_beam.audit.report_common import REPORT_DIR
from mintdim_beam.audit.shard_check import ShardChecks
from mintdim_beam.audit.verify_result import Problems, VerifyResult
from mintdim_beam.core.config.prepare import DTYPES, select_dtype
from mintdim_beam.core.errors import TokenDTypeCapacityError
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.files.ownership import MARKER
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.inputs.input_files import recorded_status
from mintdim_beam.core.render.template import LITERAL_NAME

SUMMARY_FILES = (fmt.MANIFEST, fmt.LENGTH_FIELD, fmt.HISTOGRAM, fmt.STATS)
MAGICS = {name: magic for name, magic, _ in DTYPES}
BYTES_PER_TOKEN = {name: width for name, _, width in DTYPES}

STATS_KEYS = ["total_samples", "total_tokens", "token_dtype", "bytes_per_token",
              "duplicate_groups", "duplicate_samples", "samples_with_unk", "unk_tokens",
              "unit_distribution"]
LENGTH_FIELD_KEYS = ["magic", "sequence_template", "length_fields", "token_dtype",
                     "pad_token_id"]
MANIFEST_KEYS = ["pipeline", "mintdim_version", "tokenizer", "token_storage",
                 "sequence_template", "length_field_metadata", "units", "source", "output"]

_SHARD = re.compile(r"shard_(\d{6,})\.bin")  # at least 6 digits, as `fmt.shard_name` writes
_UNIT = re.compile(r"unit_(\d+)")


def _canonical_doc(text: str, obj) -> bool:
    return text == fmt.json_document(obj)


class Verifier(ChecksumChecks, DeepChecks, DialogueChecks, IndexChecks, LossyChecks,
                ShardChecks):
    """One check of one OUT. The listing and the manifest set the state every check
    reads (fs, root, local, files, dirs; vocab, unk_id, pad_id, dtype, bpt, magic,
    template, n, sizes, S, source_files, field_segments), `_layout` the shards found
    (shard_files, shard_set); IndexChecks and ShardChecks declare what they read and
    what they set for the checks after them."""

    def __init__(self, out: str, max_problems: int, deep: int = 0):
        self.out = out
        self.p = Problems(max_problems)
        self.result = VerifyResult(out=out)
        self.deep_samples = deep  # `--deep`: how many records to re-tokenize

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

    # ---------------------------------------------------------------- the checks
    def run(self) -> VerifyResult:
        start = time.perf_counter()
        try:
            if self._list() and self._manifest():
                self._layout()
                self._checksums(self.manifest, self._written())
                if self.runner_options is not None:
                    return self.result  # the records' structure: the local verify
                self._indices()
                self._shards()
                self._join_rows_and_records()
                self._summaries()
                self._lossy_totals(self.result.samples)
                if self.deep_samples and self.p.total == 0:  # records proven sound first
                    self._deep(self.deep_samples)
        finally:
            self._finished(start)
        return self.result

    def _finished(self, start: float) -> None:
        """The result's problems, their count and the time taken (a pack verifier's too)."""
        r = self.result
        r.problems = self.p.finish()
        r.problem_count = self.p.total
        r.seconds = time.perf_counter() - start

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

    def _special_tokens(self, block, unk, pad) -> None:
        """Our `special_tokens` block, when present, names the same pad and UNK ids."""
        if block is None:
            return
        if not isinstance(block, dict):
            self.p.add(fmt.MANIFEST, None, f"special_tokens {block!r} is not an object")
            return
        for name, want in (("pad", pad), ("unk", unk)):
            entry = block.get(name)
            got = entry.get("id") if isinstance(entry, dict) else entry
            if got != want:
                self.p.add(fmt.MANIFEST, None, f"special_tokens.{name} id {got!r} disagrees "
                           f"with tokenizer.{name}_id {want!r}")

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
        self.manifest = m
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
        if not is_int(vocab) or vocab <= 0:
            self.p.add(fmt.MANIFEST, None, f"tokenizer.vocab_size {vocab!r} is not a positive int")
            usable = False
        else:  # ours: above every id (a vocabulary with gaps); mintdim's builds: vocab_size
            vocab = id_bound(m, vocab, lambda what: self.p.add(fmt.MANIFEST, None, what))
            try:
                want = select_dtype(vocab)[0]
            except TokenDTypeCapacityError:
                want = None
            if dtype in MAGICS and want != dtype:
                self.p.add(fmt.MANIFEST, None, f"ids below {vocab} need token dtype {want}, "
                           f"manifest says {dtype}")
        for name, value in (("unk_id", unk), ("pad_id", pad)):
            if name == "unk_id" and value is None and "unk_id" in (m.get("tokenizer") or {}):
                continue  # null: a tokenizer without UNK (byte-level), beyond mintdim 0.2.1
            if not is_int(value) or value < 0 or (is_int(vocab) and value >= vocab):
                self.p.add(fmt.MANIFEST, None, f"tokenizer.{name} {value!r} is not an id in "
                           f"[0, {vocab})")
                usable = False
        if (not isinstance(template, list) or not template
                or not all(isinstance(s, str) for s in template)):
            self.p.add(fmt.MANIFEST, None, f"sequence_template {template!r} is not a non-empty "
                       "list of segment names")
            usable = False
        if (not isinstance(sizes, list) or not sizes or not all(is_int(s) and s > 0 for s in sizes)
                or any(a >= b for a, b in zip(sizes, sizes[1:]))):
            self.p.add(fmt.MANIFEST, None, f"units.sizes {sizes!r} are not positive ints in "
                       "strictly ascending order")
            usable = False
        if not is_int(per_shard) or per_shard <= 0:
            self.p.add(fmt.MANIFEST, None, f"output.samples_per_shard {per_shard!r} is not a "
                       "positive int")
            usable = False
        if not isinstance(files, list):
            files = []
        if not usable:
            return False
        self._special_tokens(m.get("special_tokens"), unk, pad)
        self.vocab, self.unk_id, self.pad_id = vocab, unk, pad
        self.dtype_name, self.dtype = dtype, fmt.NP_DTYPES[dtype]
        self.bpt, self.magic = BYTES_PER_TOKEN[dtype], MAGICS[dtype]
        self.template, self.n = template, len(template)
        self.sizes, self.S = list(sizes), per_shard
        self.source_files = {f: i for i, f in enumerate(files) if isinstance(f, str)}
        self.result.units = len(self.sizes)
        self.field_segments = [s for s in template if s != LITERAL_NAME]
        self._dialogue_manifest(m)  # chat / preference builds: dialogue_check
        self._length_field()
        self._round_trip_block(m)  # lossy_check
        check_rejected(m, self.files, self._read_text, self.p.add, files)  # on_bad_row
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
        self.segment_kinds = [e.get("kind") if isinstance(e, dict) else None for e in fields]
        for i, entry in enumerate(fields):
            if not isinstance(entry, dict):
                self.p.add(rel, None, f"length_fields[{i}] is not an object")
                continue
            if entry.get("index") != i or entry.get("name") != self.template[i]:
                self.p.add(rel, None, f"length_fields[{i}] is {entry.get('index')!r}/"
                           f"{entry.get('name')!r}, not {i}/{self.template[i]!r}")
            kind = entry.get("kind")
            if self.dialogue is not None:
                self._dialogue_segment(rel, i, entry)
            elif kind == "field":
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
            if top == checksums.PARTS_DIR:
                if rel not in self._part_tables():
                    self.p.add(rel, None, f"unexpected file in {top}/ (it holds the part "
                               "tables of the index files)")
                continue
            if len(parts) == 1:
                if top == MARKER:
                    self.p.add(rel, None, "ownership marker of a build that did not end: "
                               "the build is incomplete (see mintdim-beam clean)")
                elif top not in SUMMARY_FILES + INDEX_FILES + (fmt.REJECTED_INDEX,) and not (
                        top == fmt.LOSSY_INDEX and self.round_trip is not None):
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
                          and rel not in (tmp_top, REPORT_DIR, checksums.PARTS_DIR)}
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

    def _written(self) -> set:
        """The files found that a unit-build writes a checksum for (the layout reports
        any other)."""
        tops = set(SUMMARY_FILES + INDEX_FILES) | {fmt.LOSSY_INDEX, fmt.REJECTED_INDEX}
        notices = {f"{fmt.unit_dir(s)}/{fmt.EMPTY_UNIT}" for s in self.sizes}
        return {rel for rel in self.files if rel in tops or rel in notices
                or rel in self._part_tables()} | self.shard_set

    @staticmethod
    def _part_tables() -> set:
        """The part tables a unit-build may write: one per index file joined from parts."""
        return {checksums.part_table_name(name)
                for name in INDEX_FILES + (fmt.LOSSY_INDEX, fmt.REJECTED_INDEX)}

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
        elif not all(is_int(v) for v in have.values()):
            self.p.add(rel, None, f"{label}record counts {list(have.values())} are not all ints")
        elif list(have) != list(want):
            self.p.add(rel, None, f"{label}sizes are not in ascending order")



def id_bound(manifest: dict, vocab: int, problem) -> int:
    """The bound above every id of a build: our `token_ids.bound` (at least vocab_size;
    more when the vocabulary has gaps), else vocab_size (mintdim 0.2.1's builds)."""
    block = manifest.get("token_ids")
    if block is None:
        return vocab
    bound = block.get("bound") if isinstance(block, dict) else None
    if not is_int(bound) or bound < vocab:
        problem(f"token_ids.bound {bound!r} is not an int of at least vocab_size {vocab}")
        return vocab
    return bound
