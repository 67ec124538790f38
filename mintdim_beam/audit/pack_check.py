"""The pack-build checker of `mintdim-beam verify OUT` (manifest.json says
`"pipeline": "pack-build"`): Megatron `.bin`/`.idx` shards with their gzip provenance
CSVs and datatrove `.bin.index` document ends, per_dataset_sequences.json and
manifest.json, checked from OUT's own files.

This module is the entry point (`verify_pack`, `is_pack_output`), the result and the
verifier's frame: the manifest's fields, the output's layout and the walk over the
shards. The checks of one shard's binary files are in `mintdim_beam.audit.pack_shards`,
those of the provenance rows, the pack order, per_dataset_sequences.json and the totals
in `mintdim_beam.audit.pack_provenance`; PackVerifier mixes them in.

Memory: one shard's `.idx` arrays plus one chunk of tokens and one batch of rows.
Problems are reported like the unit-build verifier's (`mintdim_beam.audit.unit_verify`):
file relative to OUT, then what; a sequence or row is named inside the text
("sequence 12", "row 13") because Problem's own record field speaks of records.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import fsspec
import numpy as np

from mintdim_beam.audit.index_check import is_int as _is_int
from mintdim_beam.audit.pack_deep import PackDeepChecks
from mintdim_beam.audit.pack_provenance import SEQUENCES, PackProvenanceChecks
from mintdim_beam.audit.pack_shards import PackShardChecks, Shard, plural
from mintdim_beam.audit.rejected_check import check_rejected
from mintdim_beam.audit.report_common import REPORT_DIR
from mintdim_beam.audit.unit_verify import Verifier
from mintdim_beam.audit.verify_result import Problems, VerifyResult
from mintdim_beam.core.files import storage
from mintdim_beam.core.files.ownership import MARKER, PACK_FAILED
from mintdim_beam.core.formats import megatron
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.pack_build.finalize import ORDER_RULE

PIPELINE = "pack-build"
SUFFIXES = (".bin", ".idx", ".csv.gz", ".bin.index")
_SHARD_FILE = re.compile(r"(shard_\d{6,})(\.bin|\.idx|\.csv\.gz|\.bin\.index)")


# ------------------------------------------------------------------------ dispatch

def is_pack_output(out: str) -> bool:
    """True when OUT is (or was meant to be) a pack-build: its manifest.json says so, or,
    without a manifest, it holds PACK_BUILD_FAILED.md or top-level Megatron shards."""
    fs, root = fsspec.core.url_to_fs(storage.resolve(out))
    root = root.rstrip("/") or "/"
    fs.invalidate_cache(root)
    manifest = root.rstrip("/") + "/" + fmt.MANIFEST
    try:
        if fs.isfile(manifest):
            with fs.open(manifest, "rb") as handle:
                doc = json.loads(handle.read().decode("utf-8"))
            return isinstance(doc, dict) and doc.get("pipeline") == PIPELINE
        if not fs.isdir(root):
            return False
        if fs.exists(root.rstrip("/") + "/" + PACK_FAILED):
            return True
        return bool(fs.glob(root.rstrip("/") + "/shard_*.idx"))
    except (OSError, ValueError):
        return False  # unreadable: the unit-build verifier reports what it finds


# ------------------------------------------------------------------------ result

@dataclass
class PackVerifyResult(VerifyResult):
    documents: int = 0       # sequences in the .idx files
    source_files: int = 0
    deep_unit = "documents"

    def summary(self) -> str:
        if self.ok and self.runner:
            return self.on_runner()
        if self.ok:
            return (f"verify {self.out}: OK, pack-build, {self.documents} documents, "
                    f"{self.shards} shards, {self.tokens} tokens, "
                    f"{self.source_files} source files, {fmt.format_mib(self.bytes)}, "
                    f"{self.content()}{self.deep_text()}, {self.seconds:.2f} s")
        return super().summary()


# ------------------------------------------------------------------------ verifier

class PackVerifier(PackDeepChecks, PackProvenanceChecks, PackShardChecks, Verifier):
    """One check of one pack-build OUT. Reuses the unit verifier's listing and reading
    (`_list`, `_path`, `_read_text`, `_inputs`), nothing of its unit checks."""

    def __init__(self, out: str, max_problems: int, deep: int = 0):
        self.out = out
        self.p = Problems(max_problems)
        self.result = PackVerifyResult(out=out)
        self.deep_samples = deep

    def run(self) -> PackVerifyResult:
        import time

        start = time.perf_counter()
        try:
            if self._list() and self._pack_manifest():
                self._pack_layout()
                listed = {s["name"] for s in self.shard_entries}
                rejected = check_rejected(  # on_bad_row
                    self.manifest, self.files, self._read_text, self.p.add,
                    self.sources)
                self._checksums(self.manifest, {n + x for n in listed for x in SUFFIXES
                                                if n + x in self.files}
                                | ({fmt.REJECTED_INDEX} if rejected is not None else set()))
                if self.runner_options is not None:
                    return self.result  # the records' structure: the local verify
                self.measured_complete = True
                self.source_docs = np.zeros(len(self.sources), dtype=np.int64)
                self.source_tokens = np.zeros(len(self.sources), dtype=np.int64)
                self.last_order = None  # (key, file_pos, line, shard name) of the last row
                shards = []
                for entry in self.shard_entries:
                    shards.append(self._shard(entry))
                self._sequences_json(shards)
                self._totals(shards)
                if self.deep_samples and self.p.total == 0:  # documents proven sound first
                    self._pack_deep(self.deep_samples)
        finally:
            self._finished(start)
        return self.result

    def _failed_reason(self) -> str:
        text = self._read_text(PACK_FAILED) or ""
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                return line.strip()[:300]
        return ""

    # ---------------------------------------------------------------- manifest
    def _pack_manifest(self) -> bool:
        rel = fmt.MANIFEST
        if rel not in self.files:
            what = "manifest.json is missing: the build did not complete"
            if PACK_FAILED in self.files:
                reason = self._failed_reason()
                what += f"; it failed ({PACK_FAILED})" + (f": {reason}" if reason else "")
            elif MARKER in self.files:
                what += f" ({MARKER} is still there: it was interrupted or is still running)"
            self.p.add(rel, None, what)
            return False
        m = self._doc(rel)
        if m is None:
            return False
        self.manifest = m
        bad = lambda what: self.p.add(rel, None, what)  # noqa: E731
        if m.get("pipeline") != PIPELINE:
            bad(f"pipeline is {m.get('pipeline')!r}, not {PIPELINE!r}")
        self._inputs(m.get("inputs"))
        usable = True

        tokenizer = m.get("tokenizer")
        vocab = tokenizer.get("vocab_size") if isinstance(tokenizer, dict) else None
        if not _is_int(vocab) or vocab <= 0:
            bad(f"tokenizer.vocab_size {vocab!r} is not a positive int")
            usable = False
        elif "id_bound" in tokenizer:  # above every id (more than vocab_size with gaps)
            if not _is_int(tokenizer["id_bound"]) or tokenizer["id_bound"] < vocab:
                bad(f"tokenizer.id_bound {tokenizer['id_bound']!r} is not an int of at least "
                    f"vocab_size {vocab}")
            else:
                vocab = tokenizer["id_bound"]
        dtype, code = m.get("dtype"), m.get("dtype_code")
        if dtype not in megatron.DTYPE_CODES:
            bad(f"dtype {dtype!r} is not one of {sorted(megatron.DTYPE_CODES)}")
            usable = False
        else:
            if code != megatron.DTYPE_CODES[dtype]:
                bad(f"dtype_code {code!r} is not {megatron.DTYPE_CODES[dtype]} (Megatron's "
                    f"code for {dtype})")
            if _is_int(vocab) and vocab > 0 and megatron.dtype_for_vocab(vocab) != dtype:
                bad(f"ids below {vocab} need dtype {megatron.dtype_for_vocab(vocab)}, "
                    f"manifest says {dtype}")
        eod = m.get("eod")
        eod_id = eod.get("id") if isinstance(eod, dict) else None
        if not _is_int(eod_id) or eod_id < 0 or (_is_int(vocab) and eod_id >= vocab):
            bad(f"eod.id {eod_id!r} is not an id in [0, vocab_size)")
            usable = False
        bos = m.get("bos_id")
        if bos is not None and (not _is_int(bos) or bos < 0 or (_is_int(vocab) and bos >= vocab)):
            bad(f"bos_id {bos!r} is neither null nor an id in [0, vocab_size)")
            usable = False
        seed = m.get("seed")
        if not _is_int(seed) or seed < 0:
            bad(f"seed {seed!r} is not a non-negative int")
            usable = False
        shard_tokens = m.get("shard_tokens")
        if not _is_int(shard_tokens) or shard_tokens <= 0:
            bad(f"shard_tokens {shard_tokens!r} is not a positive int")
        for key in ("documents", "tokens", "empty_documents"):
            if not _is_int(m.get(key)) or m.get(key) < 0:
                bad(f"{key} {m.get(key)!r} is not a non-negative int")
        if m.get("sequences", SEQUENCES) != SEQUENCES:
            bad(f"sequences is {m.get('sequences')!r}, not {SEQUENCES!r}")
        self.check_order = m.get("order") == ORDER_RULE
        if not self.check_order:
            bad(f"order {m.get('order')!r} is not the rule this verify checks "
                f"({ORDER_RULE!r}): the document order is not checked")

        sources = m.get("sources")
        if not isinstance(sources, list) or not all(
                isinstance(s, dict) and isinstance(s.get("file"), str) for s in sources):
            bad(f"sources {sources!r} is not a list of objects with a file name")
            usable = False
            sources = []
        for i, s in enumerate(sources):
            for key in ("documents", "tokens", "empty_documents"):
                if not _is_int(s.get(key)) or s.get(key) < 0:
                    bad(f"sources[{i}].{key} {s.get(key)!r} is not a non-negative int")
        files = [s["file"] for s in sources]
        if len(set(files)) != len(files):
            bad(f"sources name a file twice: {files}")
        source = m.get("source")
        given = source.get("files") if isinstance(source, dict) else None
        if given != files:
            bad(f"source.files {given!r} disagrees with the files of sources {files!r}")

        shards = m.get("shards")
        if not isinstance(shards, list) or not all(
                isinstance(s, dict) and isinstance(s.get("name"), str) for s in shards):
            bad(f"shards {shards!r} is not a list of objects with a name")
            usable = False
            shards = []
        for i, s in enumerate(shards):
            want = f"shard_{i:06d}"
            if s["name"] != want:
                bad(f"shards[{i}].name is {s['name']!r}, expected {want!r} (shards are "
                    "numbered 0, 1, ... in order)")
            for key in ("documents", "tokens", "bin_bytes"):
                if not _is_int(s.get(key)) or s.get(key) < 0:
                    bad(f"shards[{i}].{key} {s.get(key)!r} is not a non-negative int")
        if not usable:
            return False
        self.vocab, self.eod_id, self.bos_id, self.seed = vocab, eod_id, bos, seed
        self.dtype_name, self.dtype = dtype, np.dtype(dtype).newbyteorder("<")
        self.itemsize = self.bpt = self.dtype.itemsize  # bpt: what ShardChecks._chunks reads
        self.sources = files
        self.file_pos = {f: i for i, f in enumerate(files)}
        # a pack of a user's records (`transforms.WritePackBuild`): no input files
        self.records = given == [] and isinstance(source, dict) and "fields" in source
        self.shard_entries = shards
        self.result.source_files = len(files)
        return True

    # ---------------------------------------------------------------- layout
    def _pack_layout(self) -> None:
        """Every shard the manifest lists has its three files; nothing else is there but
        per_dataset_sequences.json and report/; nothing temporary is left."""
        listed = {s["name"] for s in self.shard_entries}
        for name in sorted(listed):
            for suffix in SUFFIXES:
                if name + suffix not in self.files:
                    self.p.add(name + suffix, None, f"missing: manifest.json lists shard {name}")
        if SEQUENCES not in self.files:
            self.p.add(SEQUENCES, None, "missing")
        tmp_top = storage.TMP_DIR_NAME
        if tmp_top in self.dirs or any(f.startswith(tmp_top + "/") for f in self.files):
            inside = sorted(f for f in self.files if f.startswith(tmp_top + "/"))
            self.p.add(tmp_top, None, f"temporary directory left behind by an unfinished or "
                       f"failed write ({plural(len(inside), 'file')} inside"
                       + (f", e.g. {inside[0]})" if inside else ")"))
        for rel in sorted(self.files):
            parts = rel.split("/")
            top = parts[0]
            if top in (tmp_top, REPORT_DIR) and len(parts) > 1:
                continue
            if parts[-1].endswith(".tmp"):
                self.p.add(rel, None, "temporary file (*.tmp) left behind by an unfinished or "
                           "failed write", key=("tmp", "/".join(parts[:-1])))
                continue
            if len(parts) > 1:
                self.p.add(rel, None, "unexpected file in a subdirectory of the output",
                           key=("subdir", top))
                continue
            if top in (fmt.MANIFEST, SEQUENCES, fmt.REJECTED_INDEX):  # see rejected_check
                continue
            if top == MARKER:
                self.p.add(rel, None, "ownership marker of a build that did not end: the "
                           "build is incomplete (see mintdim-beam clean)")
                continue
            if top == PACK_FAILED:
                self.p.add(rel, None, "failure notice in a build that has manifest.json")
                continue
            match = _SHARD_FILE.fullmatch(top)
            if match and match.group(1) in listed:
                continue
            if match:
                self.p.add(rel, None, f"shard file not listed in manifest.json shards "
                           f"({plural(len(listed), 'shard')} listed)")
                continue
            self.p.add(rel, None, "unexpected file in the output directory")
        for rel in sorted(d for d in self.dirs if "/" not in d):
            if rel not in (tmp_top, REPORT_DIR) and not any(
                    f.startswith(rel + "/") for f in self.files):
                self.p.add(rel, None, "unexpected directory in the output directory")

    # ---------------------------------------------------------------- one shard
    def _shard(self, entry: dict) -> Shard:
        shard = Shard(entry["name"])
        self._idx(shard, entry)
        self._bin(shard, entry)
        self._ends_index(shard)
        self._provenance(shard, entry)
        self.result.shards += 1
        return shard


def verify_pack(out: str, max_problems: int = 50, deep: int = 0,
                runner_options=None) -> PackVerifyResult:
    """Check a finished pack-build in `out` (local path or fsspec URL) from its own files;
    `deep`: also re-tokenize that many sampled documents' source lines; `runner_options`:
    prove the content on that Beam runner (`cluster_verify`)."""
    verifier = PackVerifier(out, max_problems, deep)
    verifier.runner_options = runner_options
    return verifier.run()
