"""pack-build end to end: real JSONL files, real tiny tokenizers (a byte-level BPE with
`<|endoftext|>` as a special added token, a SentencePiece unigram model, WordLevel
tokenizers with big vocabularies) and real runners.

The output is read back with a reader written here from the MMIDIDX layout alone (not
`core.megatron`; also each shard's provenance `.csv.gz` and datatrove's `.bin.index`),
and every document is compared with a direct tokenization of its rendered line by the
tokenizers' own libraries."""
from __future__ import annotations

import csv
import gzip
import json
import os
import random
import re
import struct
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import BUNDLE_RETRYING, IN_MEMORY, MULTI_PROCESS, byte_level_bpe, sentence
from mintdim_beam import cli, pipeline
from mintdim_beam.core import errors
from mintdim_beam.core.formats.doc_order import order_keys

EOT = "<|endoftext|>"
IM_END = "<|im_end|>"
SPECIALS = [EOT, IM_END]
UNICODE = ["xin chào các bạn", "café naïve", "你好 世界", "emoji 😀 ok", "tab\there"]
MAGIC = b"MMIDIDX\x00\x00"
CODES = {8: np.dtype("<u2"), 4: np.dtype("<i4")}
OUT_FILES = {"manifest.json", "per_dataset_sequences.json"}
SHARD_FILES = ("bin", "idx", "csv.gz", "bin.index")

# the main corpus: per-file fields and templates (N lists)
FILES = ["data/a.jsonl", "data/b.jsonl"]
FIELDS = [["title", "text"], ["text"]]
TEMPLATES = ["{title}\n\n{text}", "{text}"]
SHARD_TOKENS = 300


# --- helpers ---------------------------------------------------------------------------

@contextmanager
def _cwd(path: Path):
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def _job(files, fields, templates, *, kind="hf_json", tok_files=("tok/tokenizer.json",),
         tok_options=None, pack=None, out="out"):
    """The fluent pack-build job (nothing runs before `.run`)."""
    tok_options = {"config": "tok/tokenizer_config.json"} if tok_options is None else tok_options
    job = pipeline("pack-build").source.jsonl(files=files, fields=fields, templates=templates)
    job = getattr(job.tokenizer, kind)(files=list(tok_files), **tok_options)
    pack = {"eod": EOT, "seed": 0, "shard_tokens": SHARD_TOKENS} if pack is None else pack
    return job.pack(**pack).output.dir(out)


def _run(work: Path, job, options=IN_MEMORY) -> dict:
    with _cwd(work):
        return job.run(pipeline_options=None if options is None else list(options))


def _write_lines(path: Path, lines, newline=b"\n") -> Path:
    """Raw lines (str rows are JSON-dumped dicts or kept as text; bytes kept) joined by
    `newline` (a single value or one per line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b""
    for i, line in enumerate(lines):
        if isinstance(line, dict):
            line = json.dumps(line, ensure_ascii=False)
        if isinstance(line, str):
            line = line.encode("utf-8")
        data += line + (newline[i] if isinstance(newline, list) else newline)
    path.write_bytes(data)
    return path


def _physical_lines(path: Path):
    """(1-based physical line, bytes) of each non-blank line: lines end at \\n, \\r\\n
    or a lone \\r; a blank line is empty or ASCII whitespace."""
    return [(i, raw) for i, raw in enumerate(path.read_bytes().splitlines(), 1) if raw.strip()]


def _hf_encoder(path: Path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.encode_special_tokens = True
    return lambda text: tokenizer.encode(text, add_special_tokens=False).ids


def _sp_encoder(path: Path):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(path))
    return lambda text: sp.encode(text, out_type=int)


def _expected(work: Path, files, templates, encode):
    """{(src, line): (rendered text, ids)} of the documents with tokens, and how many
    rendered texts gave no tokens, from the inputs themselves."""
    docs, empty = {}, {f: 0 for f in files}
    for i, src in enumerate(files):
        template = templates[0 if len(templates) == 1 else i]
        for line, raw in _physical_lines(work / src):
            row = json.loads(raw.decode("utf-8"))
            text = template.format(**{k: str(v) for k, v in row.items()})
            ids = list(encode(text))
            if ids:
                docs[(src, line)] = (text, ids)
            else:
                empty[src] += 1
    return docs, empty


@dataclass
class Shard:
    name: str
    code: int
    sequences: list  # token id lists, EOD included
    rows: list  # provenance (start, end, id, src, loc)

    @property
    def tokens(self) -> int:
        return sum(len(s) for s in self.sequences)


def _read_shard(out: Path, name: str, eod_id: int) -> Shard:
    """One shard by the MMIDIDX layout, checking every field against the `.bin` and the
    provenance CSV."""
    idx = (out / f"{name}.idx").read_bytes()
    assert idx[:9] == MAGIC
    (version,) = struct.unpack_from("<Q", idx, 9)
    assert version == 1
    code = idx[17]
    assert code in CODES, code
    count, docs = struct.unpack_from("<QQ", idx, 18)
    assert docs == count + 1
    at = 34
    lengths = np.frombuffer(idx, "<i4", count, at).astype(np.int64)
    at += 4 * count
    pointers = np.frombuffer(idx, "<i8", count, at)
    at += 8 * count
    documents = np.frombuffer(idx, "<i8", docs, at)
    at += 8 * docs
    assert at == len(idx), "the .idx has bytes beyond its header's counts"
    assert documents.tolist() == list(range(count + 1))
    dtype = CODES[code]
    data = (out / f"{name}.bin").read_bytes()
    assert len(data) == int(lengths.sum()) * dtype.itemsize
    assert pointers.tolist() == (np.concatenate([[0], np.cumsum(lengths)[:-1]]) * dtype.itemsize
                                 ).astype(np.int64).tolist()[:count]
    assert count > 0 and (lengths >= 2).all(), "a sequence is a non-empty document and its EOD"
    tokens = np.frombuffer(data, dtype)
    sequences = [tokens[p // dtype.itemsize:p // dtype.itemsize + n].tolist()
                 for p, n in zip(pointers.tolist(), lengths.tolist())]
    for seq in sequences:
        assert seq[-1] == eod_id and eod_id not in seq[:-1]
    # datatrove's document ends: little-endian uint64 cumulative token counts, no leading 0
    ends = np.frombuffer((out / f"{name}.bin.index").read_bytes(), "<u8")
    assert ends.tolist() == np.cumsum(lengths).tolist()
    with gzip.open(out / f"{name}.csv.gz", "rt", encoding="utf-8", newline="") as handle:
        rows = [(int(s), int(e), i, src, int(loc)) for s, e, i, src, loc in csv.reader(handle)]
    assert len(rows) == count
    for (start, end, doc_id, _, _), pointer, length in zip(rows, pointers.tolist(),
                                                            lengths.tolist()):
        assert start == pointer // dtype.itemsize and end - start == length
        assert re.fullmatch("[0-9a-f]{16}", doc_id)
    return Shard(name, code, sequences, rows)


def _read_output(out: Path, out_given: str, eod_id: int) -> list[Shard]:
    """Every shard in name order; the directory holds exactly the shards' three files,
    the sequence counts and the manifest (no scratch, no marker, no notice)."""
    entries = {p.name for p in out.iterdir()}
    assert all((out / n).is_file() for n in entries), entries
    names = sorted(n[:-4] for n in entries if n.endswith(".idx"))
    assert names == [f"shard_{i:06d}" for i in range(len(names))]
    assert entries == OUT_FILES | {f"{n}.{ext}" for n in names for ext in SHARD_FILES}
    shards = [_read_shard(out, n, eod_id) for n in names]
    counts = json.loads((out / "per_dataset_sequences.json").read_text())
    # keys: the shard prefixes, absolute (Megatron's --data-path must say exactly these)
    assert counts == {f"{os.path.abspath(out)}/{s.name}": [len(s.sequences), len(s.sequences) + 1]
                      for s in shards}
    return shards


def _documents(shards) -> dict:
    """{(src, loc): ids without the EOD}; each input line at most once over all shards."""
    found = {}
    for shard in shards:
        for row, seq in zip(shard.rows, shard.sequences):
            assert (row[3], row[4]) not in found, f"{row[3]}:{row[4]} written twice"
            found[(row[3], row[4])] = seq[:-1]
    return found


def _key(seed: int, src: str, line: int) -> int:
    return int(order_keys(seed, src, [line])[0])


def _check_order(shards, seed: int, shard_tokens: int) -> None:
    """Within a shard: sorted by (seeded key, line); shards are consecutive key ranges,
    cut between 16-bit hash buckets where the running token count crosses
    `shard_tokens` (the rule manifest.json states), recomputed here independently."""
    previous_max = -1
    per_bucket = defaultdict(int)
    placed = []  # (bucket, shard number)
    for number, shard in enumerate(shards):
        keyed = [(_key(seed, src, loc), loc) for _, _, _, src, loc in shard.rows]
        assert keyed == sorted(keyed), f"{shard.name} is not in key order"
        keys = [k for k, _ in keyed]
        assert previous_max < keys[0], f"{shard.name} overlaps the previous shard's key range"
        previous_max = keys[-1]
        for key, seq in zip(keys, shard.sequences):
            per_bucket[key >> 48] += len(seq)
            placed.append((key >> 48, number))
    before, raw = 0, {}
    for bucket in sorted(per_bucket):
        raw[bucket] = before // shard_tokens
        before += per_bucket[bucket]
    names = sorted(set(raw.values()))
    for bucket, number in placed:
        assert names.index(raw[bucket]) == number, (bucket, number)
    for number, shard in enumerate(shards):
        last = max(b for b, n in placed if n == number)
        assert shard.tokens - per_bucket[last] < shard_tokens, "a shard well above shard_tokens"


def _tree(out: Path, out_given: str) -> dict:
    """Every file's bytes; the sequence counts with the output dir taken off their keys,
    and the manifest with the output dir its build_config names."""
    tree = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    counts = json.loads(tree.pop("per_dataset_sequences.json"))
    prefix = os.path.abspath(out) + "/"
    assert all(k.startswith(prefix) for k in counts)
    tree["per_dataset_sequences.json"] = {k[len(prefix):]: v for k, v in counts.items()}
    if "manifest.json" in tree:  # its build_config names the output dir as given
        manifest = json.loads(tree["manifest.json"])
        assert manifest["build_config"]["output"] == {"dir": out_given}
        manifest["build_config"]["output"]["dir"] = "OUT"
        tree["manifest.json"] = manifest
    return tree


# --- fixtures ---------------------------------------------------------------------------

def _train_bpe(work: Path, config: dict) -> Path:
    rng = random.Random(5)
    texts = [sentence(rng, 3, 20) for _ in range(600)] + UNICODE * 5
    byte_level_bpe(work, texts, SPECIALS, 500, config)
    return work


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A working dir: tok/ (byte-level BPE, EOS <|im_end|> in its config) and data/:
    a.jsonl (LF; titles and texts, special-token strings and non-ASCII typed in text, an
    int title) and b.jsonl (CRLF, a lone CR, blank and whitespace lines, empty texts)."""
    work = tmp_path_factory.mktemp("pack")
    (work / "tok").mkdir()
    _train_bpe(work / "tok", {"eos_token": IM_END})
    rng = random.Random(11)
    a = []
    for i in range(45):
        text = sentence(rng, 3, 30)
        if i % 9 == 4:
            text = f"{text} {EOT} after the end {IM_END}"
        if i % 7 == 2:
            text += " " + UNICODE[i % len(UNICODE)]
        a.append({"title": 7 if i == 10 else sentence(rng, 1, 3), "text": text, "extra": i})
    _write_lines(work / FILES[0], a)
    b, ends = [], []
    for i in range(50):
        if i % 11 == 3:
            b.append("")
        elif i % 13 == 5:
            b.append("   \t")
        elif i % 17 == 8:
            b.append({"text": ""})  # renders to nothing: an empty document
        else:
            b.append({"text": sentence(rng, 1, 25), "id": i})
        ends.append(b"\r" if i == 20 else b"\r\n")
    _write_lines(work / FILES[1], b, ends)
    return work


@pytest.fixture(scope="module")
def reference(corpus):
    """The in-memory build of the corpus with seed 0 (out_mem)."""
    summary = _run(corpus, _job(FILES, FIELDS, TEMPLATES, out="out_mem"))
    return summary, corpus / "out_mem"


@pytest.fixture(scope="module")
def eot_id(corpus) -> int:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(corpus / "tok/tokenizer.json")).token_to_id(EOT)


# --- 1. round trip ----------------------------------------------------------------------

def test_round_trip_every_document_is_its_line_tokenized_plus_eod(corpus, reference, eot_id):
    from tokenizers import Tokenizer

    summary, out = reference
    shards = _read_output(out, "out_mem", eot_id)
    assert {s.code for s in shards} == {8}
    assert len(shards) >= 4  # several shards of about SHARD_TOKENS tokens
    expected, empty = _expected(corpus, FILES, TEMPLATES, _hf_encoder(corpus / "tok/tokenizer.json"))
    found = _documents(shards)
    assert sorted(found) == sorted(expected)  # every non-empty line exactly once, nothing else
    decoder = Tokenizer.from_file(str(corpus / "tok/tokenizer.json"))
    for where, (text, ids) in expected.items():
        assert found[where] == ids, where
        assert decoder.decode(found[where], skip_special_tokens=False) == text, where
    # the inputs do hold what the test means to exercise
    assert empty == {FILES[0]: 0, FILES[1]: 2}
    typed = [w for w, (text, _) in expected.items() if EOT in text]
    assert len(typed) == 5 and all(eot_id not in found[w] for w in typed)
    assert ("data/a.jsonl", 11) in found and expected[("data/a.jsonl", 11)][0].startswith("7\n\n")

    manifest = json.loads((out / "manifest.json").read_text())
    tokens = sum(s.tokens for s in shards)
    per_file = {f: sum(len(ids) + 1 for (src, _), (_, ids) in expected.items() if src == f)
                for f in FILES}
    assert manifest["documents"] == len(expected) and manifest["tokens"] == tokens
    assert tokens == sum(per_file.values())
    assert manifest["empty_documents"] == 2
    assert manifest["sources"] == [
        {"file": f, "documents": sum(src == f for src, _ in expected), "tokens": per_file[f],
         "empty_documents": empty[f]} for f in FILES]
    assert manifest["shards"] == [
        {"name": s.name, "documents": len(s.sequences), "tokens": s.tokens,
         "bin_bytes": (out / f"{s.name}.bin").stat().st_size} for s in shards]
    assert manifest["dtype"] == "uint16" and manifest["dtype_code"] == 8
    assert manifest["eod"] == {"id": eot_id, "token": EOT, "source": "pack.eod"}
    assert manifest["seed"] == 0 and manifest["shard_tokens"] == SHARD_TOKENS
    assert manifest["source"] == {"files": FILES, "fields": FIELDS, "templates": TEMPLATES}
    assert [i["file"] for i in manifest["inputs"]] == FILES
    assert [i["size"] for i in manifest["inputs"]] == [(corpus / f).stat().st_size for f in FILES]
    assert summary == {"output_dir": "out_mem", "documents": len(expected), "tokens": tokens,
                       "empty_documents": 2, "shards": len(shards), "dtype": "uint16",
                       "eod_id": eot_id}


def test_line_numbers_count_crlf_lone_cr_and_blank_lines(corpus, reference, eot_id):
    """Provenance lines are physical lines: counted across CRLF, a lone CR and blank or
    whitespace-only lines, which themselves give no document and no empty count."""
    _, out = reference
    found = _documents(_read_output(out, "out_mem", eot_id))
    b_lines = sorted(loc for src, loc in found if src == FILES[1])
    data = (corpus / FILES[1]).read_bytes()
    assert data.count(b"\r\n") == 49 and data.count(b"\r") == 50  # one lone CR
    physical = data.splitlines()
    assert len(physical) == 50
    blank = [i for i, raw in enumerate(physical, 1) if not raw.strip()]
    empty = [i for i, raw in enumerate(physical, 1) if raw.strip() and json.loads(raw)["text"] == ""]
    assert blank and empty
    assert b_lines == [i for i in range(1, 51) if i not in blank and i not in empty]
    for loc in (21, 22, 50):  # the lines around the lone CR, and the last one
        assert json.loads(physical[loc - 1])["id"] == loc - 1


# --- 2. ordering ------------------------------------------------------------------------

def test_documents_are_in_seeded_hash_order_and_shards_are_hash_ranges(reference, eot_id):
    _, out = reference
    _check_order(_read_output(out, "out_mem", eot_id), 0, SHARD_TOKENS)


def test_another_seed_another_order_same_documents_and_ids(corpus, reference, eot_id):
    _, out = reference
    summary = _run(corpus, _job(FILES, FIELDS, TEMPLATES, out="out_seed7",
                                pack={"eod": EOT, "seed": 7, "shard_tokens": SHARD_TOKENS}))
    first = _read_output(out, "out_mem", eot_id)
    other = _read_output(corpus / "out_seed7", "out_seed7", eot_id)
    _check_order(other, 7, SHARD_TOKENS)
    order = [(r[3], r[4]) for s in first for r in s.rows]
    order7 = [(r[3], r[4]) for s in other for r in s.rows]
    assert order != order7 and sorted(order) == sorted(order7)
    assert _documents(first) == _documents(other)
    ids = {(r[3], r[4]): r[2] for s in first for r in s.rows}
    ids7 = {(r[3], r[4]): r[2] for s in other for r in s.rows}
    assert ids == ids7 and len(set(ids.values())) == len(ids)  # stable and unique per document
    assert json.loads((corpus / "out_seed7/manifest.json").read_text())["seed"] == 7
    assert summary["documents"] == len(order)


# --- 3. the same bytes on every runner --------------------------------------------------

def _same_as_reference(corpus, reference, out_given):
    _, out = reference
    expected, actual = _tree(out, "out_mem"), _tree(corpus / out_given, out_given)
    assert sorted(actual) == sorted(expected)
    for name in expected:
        assert actual[name] == expected[name], f"{out_given}/{name} differs"


def test_same_seed_same_bytes_in_memory_again(corpus, reference):
    _run(corpus, _job(FILES, FIELDS, TEMPLATES, out="out_again"), options=None)
    _same_as_reference(corpus, reference, "out_again")


def test_multi_processing_tiny_ranges_give_the_same_bytes(corpus, reference):
    _run(corpus, _job(FILES, FIELDS, TEMPLATES, out="out_mp"),
         options=MULTI_PROCESS + ["--input_range_bytes=300"])
    _same_as_reference(corpus, reference, "out_mp")


def test_injected_retries_give_the_same_bytes(corpus, reference, tmp_path, monkeypatch):
    """Every write bundle's and the finalize step's first attempt fails; the retrying
    runner must give the bytes of a clean build (manifest included)."""
    monkeypatch.setenv("MINTDIM_FAULTS", f"write,finalize@{tmp_path}")
    _run(corpus, _job(FILES, FIELDS, TEMPLATES, out="out_retry"),
         options=BUNDLE_RETRYING + ["--input_range_bytes=300"])
    assert {p.name.split("-")[0] for p in tmp_path.iterdir()} == {"write", "finalize"}
    _same_as_reference(corpus, reference, "out_retry")


@pytest.mark.slow
def test_portable_runner_gives_the_same_bytes(corpus, reference, portable_flags):
    _run(corpus, _job(FILES, FIELDS, TEMPLATES, out="out_portable"),
         options=portable_flags + ["--input_range_bytes=300"])
    _same_as_reference(corpus, reference, "out_portable")


# --- 4. edge cases ----------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_a_document_longer_than_shard_tokens_is_written_whole(corpus, tmp_path, eot_id):
    rng = random.Random(3)
    rows = [{"text": sentence(rng, 3, 8)} for _ in range(6)]
    rows[2] = {"text": sentence(rng, 1500, 1500)}
    _write_lines(tmp_path / "long.jsonl", rows)
    _run(tmp_path, _job(["long.jsonl"], [["text"]], ["{text}"],
                        tok_files=[str(corpus / "tok/tokenizer.json")], tok_options={},
                        pack={"eod": EOT, "seed": 0, "shard_tokens": 16}))
    shards = _read_output(tmp_path / "out", "out", eot_id)
    expected, _ = _expected(tmp_path, ["long.jsonl"], ["{text}"],
                            _hf_encoder(corpus / "tok/tokenizer.json"))
    found = _documents(shards)
    assert found == {w: ids for w, (_, ids) in expected.items()}
    assert len(expected[("long.jsonl", 3)][1]) > 1000
    assert 1 <= len(shards) <= len(rows)
    _check_order(shards, 0, 16)
    long_shard = next(s for s in shards if any(r[4] == 3 for r in s.rows))
    assert max(len(seq) for seq in long_shard.sequences) == len(expected[("long.jsonl", 3)][1]) + 1


def test_shared_fields_and_templates_over_many_files(corpus, tmp_path, eot_id):
    """One fields list and one template for five files (and a sixth that is empty)."""
    rng = random.Random(4)
    files = [f"d/part{i}.jsonl" for i in range(6)]
    for i, name in enumerate(files):
        _write_lines(tmp_path / name, [{"body": sentence(rng, 2, 9), "n": j}
                                       for j in range(0 if i == 5 else 3 + i)])
    summary = _run(tmp_path, _job(files, [["body"]], ["<doc>{body}</doc>"],
                                  tok_files=[str(corpus / "tok/tokenizer.json")],
                                  tok_options={}, pack={"eod": EOT, "shard_tokens": 40}))
    shards = _read_output(tmp_path / "out", "out", eot_id)
    expected, _ = _expected(tmp_path, files, ["<doc>{body}</doc>"],
                            _hf_encoder(corpus / "tok/tokenizer.json"))
    assert _documents(shards) == {w: ids for w, (_, ids) in expected.items()}
    assert summary["documents"] == 3 + 4 + 5 + 6 + 7
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert manifest["source"]["fields"] == [["body"]] * 6
    assert manifest["source"]["templates"] == ["<doc>{body}</doc>"] * 6
    assert [s["documents"] for s in manifest["sources"]] == [3, 4, 5, 6, 7, 0]
    _check_order(shards, 0, 40)


def test_eod_defaults_to_the_eos_token_of_the_tokenizer_config(corpus, tmp_path):
    from tokenizers import Tokenizer

    im_end = Tokenizer.from_file(str(corpus / "tok/tokenizer.json")).token_to_id(IM_END)
    rows = [{"text": f"one {IM_END} two"}, {"text": "three four"}]
    _write_lines(tmp_path / "x.jsonl", rows)
    summary = _run(tmp_path, _job(["x.jsonl"], [["text"]], ["{text}"],
                                  tok_files=[str(corpus / "tok/tokenizer.json")],
                                  tok_options={"config": str(corpus / "tok/tokenizer_config.json")},
                                  pack={}))
    assert summary["eod_id"] == im_end
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert manifest["eod"] == {"id": im_end, "token": IM_END,
                               "source": f"eos_token of {corpus / 'tok/tokenizer_config.json'}"}
    assert manifest["seed"] == 0 and manifest["shard_tokens"] == 1 << 29
    shards = _read_output(tmp_path / "out", "out", im_end)
    assert len(shards) == 1
    expected, _ = _expected(tmp_path, ["x.jsonl"], ["{text}"],
                            _hf_encoder(corpus / "tok/tokenizer.json"))
    assert _documents(shards) == {w: ids for w, (_, ids) in expected.items()}


def test_sentencepiece_eos_default_empty_documents_and_typed_eos(tokenizers_dir, tmp_path):
    """SentencePiece: the model's eos_id is the EOD; texts of whitespace only give no
    tokens and are counted as empty; `</s>` typed in a text stays text."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tokenizers_dir / "sp.model"))
    rng = random.Random(8)
    rows = [{"text": sentence(rng, 2, 12)} for _ in range(20)]
    rows[3], rows[7], rows[12] = {"text": ""}, {"text": "   "}, {"text": " \t\n "}
    rows[5] = {"text": "hello </s> world <s> data"}
    _write_lines(tmp_path / "sp.jsonl", rows[:10] + ["", "  "] + rows[10:])
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok/sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    summary = _run(tmp_path, _job(["sp.jsonl"], [["text"]], ["{text}"], kind="sentencepiece",
                                  tok_files=["tok/sp.model"], tok_options={},
                                  pack={"seed": 3, "shard_tokens": 50}),
                   options=MULTI_PROCESS + ["--input_range_bytes=120"])
    eos = sp.eos_id()
    assert eos >= 0 and summary["eod_id"] == eos
    shards = _read_output(tmp_path / "out", "out", eos)
    expected, empty = _expected(tmp_path, ["sp.jsonl"], ["{text}"],
                                _sp_encoder(tokenizers_dir / "sp.model"))
    assert empty == {"sp.jsonl": 3}
    assert _documents(shards) == {w: ids for w, (_, ids) in expected.items()}
    assert ("sp.jsonl", 6) in expected and "</s>" in expected[("sp.jsonl", 6)][0]
    _check_order(shards, 3, 50)
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert manifest["empty_documents"] == 3 == summary["empty_documents"]
    assert manifest["documents"] == 17
    assert manifest["eod"] == {"id": eos, "token": sp.id_to_piece(eos),
                               "source": "the SentencePiece model's eos_id"}
    assert manifest["tokenizer"]["vocab_size"] == sp.get_piece_size()


def _word_level(path: Path, words: int) -> Path:
    """A real WordLevel tokenizer.json: [UNK], w0..w{words-1}, then <|endoftext|> as a
    special added token (vocab size words + 2)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens([AddedToken(EOT, special=True)])
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


@pytest.mark.parametrize("words,code,dtype", [(65534, 8, "uint16"), (70000, 4, "int32")])
def test_token_dtype_follows_the_vocabulary_size(tmp_path, words, code, dtype):
    tok = _word_level(tmp_path / "tok/tokenizer.json", words)
    eod = words + 1  # the last id
    rows = [{"text": f"w0 w{words - 1} w65535 w{words // 2} w1"},
            {"text": "w7 nonsense w3"}, {"text": f"w{words - 2} {EOT}"}]
    _write_lines(tmp_path / "big.jsonl", rows)
    summary = _run(tmp_path, _job(["big.jsonl"], [["text"]], ["{text}"],
                                  tok_files=["tok/tokenizer.json"], tok_options={},
                                  pack={"eod": EOT}))
    assert summary["dtype"] == dtype and summary["eod_id"] == eod
    shards = _read_output(tmp_path / "out", "out", eod)
    assert [s.code for s in shards] == [code]
    expected, _ = _expected(tmp_path, ["big.jsonl"], ["{text}"], _hf_encoder(tok))
    assert _documents(shards) == {w: ids for w, (_, ids) in expected.items()}
    assert max(max(ids) for _, ids in expected.values()) == words  # the largest word id
    assert expected[("big.jsonl", 3)][1][-1] != eod  # the typed EOD is text ([UNK] here)
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert manifest["dtype"] == dtype and manifest["dtype_code"] == code
    assert manifest["tokenizer"]["vocab_size"] == words + 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_shard_of_2000_ranges_is_written_under_ulimit_n_256(corpus, tmp_path, eot_id):
    """One shard gathers a slice of every byte range; its writer maps a bounded number
    of them at once, so 2,000 ranges fit under `ulimit -n 256` (a real rlimit on a real
    `mintdim-beam pack` process) and give the bytes of a one-range build."""
    import resource
    import subprocess
    import sys

    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "tok").mkdir(exist_ok=True)
        (tmp_path / "tok" / name).write_bytes((corpus / "tok" / name).read_bytes())
    lines = [json.dumps({"text": f"line {i:05d} of many"}) for i in range(2000)]
    width = len(lines[0]) + 1
    assert {len(line) + 1 for line in lines} == {width}
    _write_lines(tmp_path / "a.jsonl", lines)
    config = {"source": {"files": ["a.jsonl"], "fields": [["text"]], "templates": ["{text}"]},
              "tokenizer": {"type": "hf_json", "files": ["tok/tokenizer.json"],
                            "config": "tok/tokenizer_config.json"},
              "pack": {"eod": EOT, "seed": 3, "shard_tokens": 1 << 30}}
    import yaml

    (tmp_path / "many.yaml").write_text(yaml.safe_dump({**config, "output": {"dir": "many"}}))
    (tmp_path / "one.yaml").write_text(yaml.safe_dump({**config, "output": {"dir": "one"}}))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = 256 if hard == resource.RLIM_INFINITY else min(256, hard)

    def run(name: str, *flags: str, limited: bool):
        return subprocess.run(
            [sys.executable, "-m", "mintdim_beam.cli", "pack", name, *flags], cwd=tmp_path,
            capture_output=True, text=True, timeout=240,
            preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard)))
            if limited else None)

    many = run("many.yaml", f"--input_range_bytes={width}", limited=True)
    assert many.returncode == 0, many.stderr[-3000:]
    assert json.loads(many.stdout)["shards"] == 1
    one = run("one.yaml", limited=False)
    assert one.returncode == 0, one.stderr[-3000:]
    assert _tree(tmp_path / "many", "many") == _tree(tmp_path / "one", "one")
    shards = _read_output(tmp_path / "many", "many", eot_id)
    assert len(_documents(shards)) == 2000


# --- 5. configuration errors before any output ------------------------------------------

@pytest.fixture
def small(corpus, tmp_path) -> Path:
    """A working dir with one small input and the corpus tokenizer under tok/."""
    (tmp_path / "tok").mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "tok" / name).write_bytes((corpus / "tok" / name).read_bytes())
    (tmp_path / "tok/no_eos_config.json").write_text(json.dumps({"bos_token": EOT}))
    _write_lines(tmp_path / "a.jsonl", [{"title": "t", "text": "hello world"}])
    _write_lines(tmp_path / "b.jsonl", [{"title": "u", "text": "data tokens"}])
    return tmp_path


PACK_OK = {"eod": EOT, "seed": 0, "shard_tokens": 100}
CONFIG_ERRORS = {
    "seed_negative": (dict(pack={**PACK_OK, "seed": -1}), errors.PackValidationError, "seed"),
    "seed_text": (dict(pack={**PACK_OK, "seed": "x"}), errors.PackValidationError, "seed"),
    "seed_too_big": (dict(pack={**PACK_OK, "seed": 1 << 63}), errors.PackValidationError, "seed"),
    "shard_tokens_0": (dict(pack={**PACK_OK, "shard_tokens": 0}), errors.PackValidationError,
                       "shard_tokens"),
    "eod_unknown": (dict(pack={**PACK_OK, "eod": "<|nope|>"}), errors.PackValidationError,
                    "eod_unknown"),
    "no_eos_without_config": (dict(pack={"eod": None}, tok_options={}),
                              errors.PackValidationError, "no_eos"),
    "no_eos_in_config": (dict(pack={"eod": None},
                              tok_options={"config": "tok/no_eos_config.json"}),
                         errors.PackValidationError, "no_eos"),
    "two_tokenizers": (dict(tok_files=["tok/tokenizer.json", "tok/tokenizer.json"]),
                       errors.PackValidationError, "tokenizers"),
    "output_list": (dict(out=["out"]), errors.PackValidationError, "output_dir"),
    "pad_id": (dict(tok_options={"config": "tok/tokenizer_config.json", "pad_id": 0}),
               errors.PackValidationError, "tokenizer_option"),
    "pad_token": (dict(tok_options={"pad_token": EOT}), errors.PackValidationError,
                  "tokenizer_option"),
    "eos_option": (dict(tok_options={"eos": True}), errors.PackValidationError,
                   "tokenizer_option"),
    "literal_specials": (dict(tok_options={"literal_specials": "ids"}),
                         errors.PackValidationError, "tokenizer_option"),
    "fields_3_for_2": (dict(fields=[["title", "text"]] * 3), errors.FieldMappingError, None),
    "templates_3_for_2": (dict(templates=["{title}{text}"] * 3), errors.TemplateMappingError, None),
    "template_field_missing": (dict(fields=[["text"]], templates=["{title} {text}"]),
                               errors.TemplateFieldMismatchError, None),
    "field_unused": (dict(templates=["{text}"]), errors.TemplateFieldMismatchError, None),
    "missing_input": (dict(files=["a.jsonl", "nope.jsonl"]), errors.MintDimFileNotFoundError,
                      None),
    "missing_tokenizer": (dict(tok_files=["tok/nope.json"]), errors.MintDimFileNotFoundError,
                          None),
}


def _check_bilingual(error, cls) -> None:
    assert type(error) is cls
    assert error.english.startswith(f"[english] {cls.__name__}: ")
    assert error.vietnamese.startswith(f"[vietnam] {cls.__name__}: ")
    assert error.english.split(": ", 1)[1] != error.vietnamese.split(": ", 1)[1]
    assert getattr(error, "phase", None) != "build"  # a config error: the CLI's exit 2


@pytest.mark.parametrize("precreate", [False, True], ids=["absent", "empty"])
@pytest.mark.parametrize("case", sorted(CONFIG_ERRORS))
def test_config_errors_before_any_output(small, case, precreate):
    overrides, cls, rule = CONFIG_ERRORS[case]
    if precreate:
        (small / "out").mkdir()
    kw = dict(files=["a.jsonl", "b.jsonl"], fields=[["title", "text"]],
              templates=["{title}\n{text}"], pack=PACK_OK)
    kw.update(overrides)
    with pytest.raises(errors.MintDimError) as info:
        _run(small, _job(kw.pop("files"), kw.pop("fields"), kw.pop("templates"), **kw))
    _check_bilingual(info.value, cls)
    if rule is not None:
        assert info.value.kwargs["rule"] == rule
    if precreate:
        assert list((small / "out").iterdir()) == []
    else:
        assert not (small / "out").exists()


def test_samples_per_shard_is_refused_before_any_output(small):
    from mintdim_beam.pack_build.launch import run_pack

    raw = _job(["a.jsonl"], [["title", "text"]], ["{title}{text}"], pack=PACK_OK).config()
    raw["output"] = {"dir": "out", "samples_per_shard": [4]}
    with _cwd(small), pytest.raises(errors.PackValidationError) as info:
        run_pack(raw, pipeline_options=IN_MEMORY)
    _check_bilingual(info.value, errors.PackValidationError)
    assert info.value.kwargs["rule"] == "samples_per_shard"
    assert not (small / "out").exists()


def test_building_into_a_complete_output_is_refused_and_changes_nothing(corpus, reference):
    _, out = reference
    before = _tree(out, "out_mem")
    with pytest.raises(errors.OutputValidationError) as info:
        _run(corpus, _job(FILES, FIELDS, TEMPLATES, out="out_mem"))
    _check_bilingual(info.value, errors.OutputValidationError)
    assert _tree(out, "out_mem") == before


# --- 6. bad input lines -----------------------------------------------------------------

BAD_LINES = {
    "invalid_json": ('{"title": "x", oops}', errors.SourceParseError, "invalid JSON syntax"),
    "null_field": ('{"title": null, "text": "x"}', errors.SampleSchemaError, "JSON type: null"),
    "missing_field": ('{"title": "only"}', errors.SampleSchemaError, "Missing fields: text"),
    "invalid_utf8": (b'{"title": "caf\xe9", "text": "x"}', errors.SourceParseError,
                     "invalid UTF-8"),
    "not_an_object": ("[1, 2]", errors.SourceParseError, "JSONL row is not a JSON object"),
    "array_field": ('{"title": "x", "text": [1]}', errors.SampleSchemaError, "JSON type: array"),
    "lone_surrogate": ('{"title": "x\\ud800", "text": "y"}', errors.SourceParseError,
                       "lone surrogate"),
}
BAD_RUNS = [(name, IN_MEMORY) for name in sorted(BAD_LINES)] + [("invalid_json", MULTI_PROCESS)]


@pytest.mark.parametrize("name,options", BAD_RUNS,
                         ids=[f"{n}-{'mp' if o is MULTI_PROCESS else 'mem'}" for n, o in BAD_RUNS])
def test_first_bad_line_fails_the_build_and_clean_removes_it(small, name, options, capsys):
    bad, cls, reason = BAD_LINES[name]
    rows = [json.dumps({"title": f"t{i}", "text": f"hello world {i}"}) for i in range(30)]
    lines = rows[:9] + ["", "  "] + [bad] + rows[9:16] + ['{"title": 1}'] + rows[16:]
    ends = [b"\r\n" if i % 2 else b"\n" for i in range(len(lines))]
    _write_lines(small / "data/a.jsonl", lines, ends)  # bad at line 12, another at 20
    _write_lines(small / "data/b.jsonl", ["{broken", rows[0]])  # bad at line 1 of a later file
    job = _job(["data/a.jsonl", "data/b.jsonl"], [["title", "text"]], ["{title}: {text}"],
               pack=PACK_OK)
    with pytest.raises(errors.MintDimError) as info:
        _run(small, job, options=list(options) + ["--input_range_bytes=64"])
    error = info.value
    assert type(error) is cls
    assert "File: data/a.jsonl" in error.english and "Line: 12" in error.english
    assert reason in error.english and "Dòng: 12" in error.vietnamese
    out = small / "out"
    names = {p.name for p in out.iterdir()}
    assert "manifest.json" not in names and "_mintdim_tmp" not in names
    assert cls.__name__ in (out / "PACK_BUILD_FAILED.md").read_text()

    capsys.readouterr()
    with _cwd(small):
        assert cli.main(["clean", "out"]) == 0
    assert "cleaned out" in capsys.readouterr().out
    assert not out.exists() or list(out.iterdir()) == []
    # fixed input: the same directory takes a complete build again
    _write_lines(small / "data/a.jsonl", rows)
    _write_lines(small / "data/b.jsonl", rows[:2])
    summary = _run(small, job)
    assert summary["documents"] == 32 and (out / "manifest.json").is_file()


# --- 7. the command line ----------------------------------------------------------------

def _cli_config(small: Path, **pack) -> str:
    config = {"source": {"files": ["a.jsonl", "b.jsonl"], "fields": [["title", "text"]],
                         "templates": ["{title}\n{text}"]},
              "tokenizer": {"type": "hf_json", "files": ["tok/tokenizer.json"],
                            "config": "tok/tokenizer_config.json"},
              "pack": {"eod": EOT, "seed": 5, "shard_tokens": 1000, **pack},
              "output": {"dir": "out"}}
    import yaml

    (small / "pack.yaml").write_text(yaml.safe_dump(config))
    return "pack.yaml"


def test_cli_pack_prints_the_summary(small, capsys, eot_id):
    config = _cli_config(small)
    with _cwd(small):
        code = cli.main(["pack", config, "--runner=FnApiRunner"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    expected, _ = _expected(small, ["a.jsonl", "b.jsonl"], ["{title}\n{text}"],
                            _hf_encoder(small / "tok/tokenizer.json"))
    tokens = sum(len(ids) + 1 for _, ids in expected.values())
    assert summary == {"output_dir": "out", "documents": 2, "tokens": tokens,
                       "empty_documents": 0, "shards": 1, "dtype": "uint16", "eod_id": eot_id}
    shards = _read_output(small / "out", "out", eot_id)
    assert _documents(shards) == {w: ids for w, (_, ids) in expected.items()}
    assert json.loads((small / "out/manifest.json").read_text())["seed"] == 5


def test_cli_config_error_exits_2_and_build_error_exits_1(small, capsys):
    config = _cli_config(small, seed="x")
    with _cwd(small):
        assert cli.main(["pack", config]) == 2
    err = capsys.readouterr().err
    assert "[english] PackValidationError" in err and "[vietnam] PackValidationError" in err
    assert not (small / "out").exists()
    _write_lines(small / "b.jsonl", ['{"title": "u"}'])
    config = _cli_config(small)
    with _cwd(small):
        assert cli.main(["pack", config, "--runner=FnApiRunner"]) == 1
    err = capsys.readouterr().err
    assert "[english] SampleSchemaError" in err and "Line: 1" in err
    assert (small / "out/PACK_BUILD_FAILED.md").is_file()
