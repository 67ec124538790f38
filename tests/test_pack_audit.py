"""`mintdim-beam verify` and `mintdim-beam report` on a pack-build's output: clean on a
real build (locally and through memory://), each kind of damage caught and named (the
shard file and what is wrong), and the report's totals and histogram recomputed here
from the build's own files."""
import csv
import gzip
import io
import json
import os
import random
import shutil
import struct
from pathlib import Path

import fsspec
import numpy as np
import pytest

from conftest import IN_MEMORY, byte_level_bpe, copy_to_memory_fs, sentence, without_checksums, write_jsonl
from mintdim_beam import cli, pipeline
from mintdim_beam.audit import pack_check
from mintdim_beam.audit.report import write_report
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.pack_build import finalize

EOD = "<|endoftext|>"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HEADER = 34  # MMIDIDX: magic 9, version 8, dtype 1, sequences 8, documents 8


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A real pack-build: two files with their own fields, empty documents, an EOD string
    typed inside a document, about ten shards of ~2000 tokens. The inputs are given
    relative to the build's root, so the document order (a hash of file as given and
    line) is the same wherever the temporary directory is."""
    root = tmp_path_factory.mktemp("pack_audit")
    rng = random.Random(11)
    tok = root / "tok"
    tok.mkdir()
    byte_level_bpe(tok, [sentence(rng, 5, 15) for _ in range(1500)], [EOD, "<|pad|>"], 400,
                   {"eos_token": EOD})
    rows_a = [{"text": sentence(rng, 0, 60) if i % 10 else ""} for i in range(240)]
    rows_a[7] = {"text": f"before {EOD} after"}  # stays text: no EOD id inside
    a = write_jsonl(root / "data/a.jsonl", rows_a)
    b = write_jsonl(root / "data/b.jsonl", [{"body": sentence(rng, 1, 150)} for _ in range(90)])
    out = root / "out"
    here = os.getcwd()
    os.chdir(root)
    try:
        (pipeline("pack-build")
         .source.jsonl(files=[str(a.relative_to(root)), str(b.relative_to(root))],
                       fields=[["text"], ["body"]], templates=["{text}", "{body}"])
         .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                            config=str(tok / "tokenizer_config.json"))
         .pack(eod=EOD, seed=0, shard_tokens=2000)
         .output.dir(str(out))
         .run(pipeline_options=IN_MEMORY))
    finally:
        os.chdir(here)
    return out


@pytest.fixture(autouse=True)
def _at_the_build_root(built, monkeypatch):
    """Where the build ran: its inputs, as given, are found from here."""
    monkeypatch.chdir(built.parent)


@pytest.fixture
def out(built, tmp_path) -> Path:
    """A private copy of the build to damage."""
    copy = tmp_path / "out"
    shutil.copytree(built, copy)
    return without_checksums(copy)  # the structural checks alone


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text("utf-8"))


def _write_manifest(out: Path, doc: dict) -> None:
    """As pack-build writes it: `core.formats.mintdim.json_document`."""
    (out / "manifest.json").write_text(fmt.json_document(doc), "utf-8")


def _verify(out, capsys) -> tuple[int, str]:
    code = cli.main(["verify", str(out)])
    return code, capsys.readouterr().out


def _problems(out) -> list[str]:
    result = verify_output(str(out), max_problems=1000)
    return [str(p) for p in result.problems]


def _idx(out: Path, name: str):
    """(header fields, lengths, pointers) of a shard's .idx, parsed here from the layout."""
    data = (out / f"{name}.idx").read_bytes()
    magic, version, code, count, docs = struct.unpack_from("<9sQBQQ", data)
    lengths = np.frombuffer(data, "<i4", count, HEADER).astype(np.int64)
    pointers = np.frombuffer(data, "<i8", count, HEADER + 4 * count)
    return (magic, version, code, count, docs), lengths, pointers


def _rows(out: Path, name: str) -> list[list[str]]:
    with gzip.open(out / f"{name}.csv.gz", "rt", encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _write_rows(out: Path, name: str, rows) -> None:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    (out / f"{name}.csv.gz").write_bytes(gzip.compress(text.getvalue().encode("utf-8")))


def _tokens(out: Path, name: str) -> np.ndarray:
    return np.fromfile(out / f"{name}.bin", dtype="<u2")


# ------------------------------------------------------------------ clean

def test_fresh_build_verifies(built, capsys):
    m = _manifest(built)
    assert m["pipeline"] == "pack-build" and m["dtype"] == "uint16"
    assert len(m["shards"]) >= 6  # several shards, so cross-shard checks run
    for name in ("manifest.json", "per_dataset_sequences.json"):  # written like unit-build's
        text = (built / name).read_text("utf-8")
        assert text == fmt.json_document(json.loads(text)), name
    result = verify_output(str(built))
    assert result.ok, [str(p) for p in result.problems]
    assert (result.documents, result.shards, result.tokens) == (
        m["documents"], len(m["shards"]), m["tokens"])
    code, text = _verify(built, capsys)
    assert code == 0
    assert text.splitlines()[0].startswith(f"verify {built}: OK, pack-build, "
                                           f"{m['documents']} documents, {len(m['shards'])} shards")
    inputs = [line for line in text.splitlines() if line.startswith("  input ")]
    assert len(inputs) == 2 and all(": unchanged (" in line for line in inputs)


def test_order_rule_is_the_one_pack_build_writes(built):
    assert pack_check.ORDER_RULE == finalize.ORDER_RULE == _manifest(built)["order"]


def test_eod_string_in_text_is_not_the_eod_id(built):
    """The document typed with the EOD string: its sequence holds the EOD id only last."""
    m = _manifest(built)
    eod = m["eod"]["id"]
    for entry in m["shards"]:
        rows = _rows(built, entry["name"])
        for start, end, _, src, loc in rows:
            if src.endswith("a.jsonl") and loc == "8":
                seq = _tokens(built, entry["name"])[int(start):int(end)]
                assert seq[-1] == eod and eod not in seq[:-1].tolist()
                return
    pytest.fail("the document of a.jsonl line 8 is in no shard")


def test_changed_input_is_reported_but_not_a_failure(built, capsys):
    path = Path(_manifest(built)["inputs"][0]["file"])
    before, stat = path.read_bytes(), path.stat()
    try:
        path.write_bytes(before + b"\n")
        code, text = _verify(built, capsys)
        assert code == 0
        assert f"  input {path}: changed since the build" in text
    finally:
        path.write_bytes(before)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert ": unchanged (" in _verify(built, capsys)[1]


# ------------------------------------------------------------------ damage

def test_truncated_bin(out, capsys):
    name = "shard_000001"
    data = (out / f"{name}.bin").read_bytes()
    (out / f"{name}.bin").write_bytes(data[:-4])  # two tokens: the last EOD and one more
    code, text = _verify(out, capsys)
    assert code == 1
    assert "FAILED" in text.splitlines()[0]
    problems = _problems(out)
    assert all(p.startswith(f"{name}.bin: ") for p in problems), problems
    assert any("truncated" in p and f"{len(data) - 4} bytes" in p for p in problems)
    assert any(f"bin_bytes {len(data)}" in p for p in problems)


def test_flipped_idx_magic(out, capsys):
    name = "shard_000002"
    data = bytearray((out / f"{name}.idx").read_bytes())
    data[0] ^= 0xFF
    (out / f"{name}.idx").write_bytes(bytes(data))
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  {name}.idx: not a Megatron MMIDIDX index: magic is" in text


def test_wrong_dtype_code(out, capsys):
    name = "shard_000000"
    data = bytearray((out / f"{name}.idx").read_bytes())
    assert data[17] == 8  # uint16
    data[17] = 4
    (out / f"{name}.idx").write_bytes(bytes(data))
    code, text = _verify(out, capsys)
    assert code == 1
    assert (f"  {name}.idx: dtype code 4 (int32) disagrees with manifest.json dtype uint16 "
            "(code 8)") in text
    assert len(_problems(out)) == 1  # the lengths and the .bin are still read as uint16


def test_changed_length_breaks_the_pointers(out, capsys):
    name = "shard_000001"
    data = bytearray((out / f"{name}.idx").read_bytes())
    at = HEADER + 4 * 3  # lengths[3]
    data[at:at + 4] = struct.pack("<i", struct.unpack_from("<i", data, at)[0] + 1)
    (out / f"{name}.idx").write_bytes(bytes(data))
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  {name}.idx: pointer 4 is " in text and "pointers are not consecutive" in text
    problems = _problems(out)
    assert any(p.startswith(f"{name}.bin: size ") and "lengths sum to" in p for p in problems)
    assert any(p.startswith(f"{name}.csv.gz: row 4: start,end") for p in problems)


def test_changed_lengths_in_a_consistent_idx(out, capsys):
    """Sequence 3 one token longer, 4 one shorter, pointers recomputed: the .idx is
    self-consistent, the EODs and the provenance rows no longer match it."""
    name = "shard_000003"
    (_, _, code, count, _), lengths, _ = _idx(out, name)
    lengths = lengths.copy()
    lengths[3] += 1
    lengths[4] -= 1
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1] * 2)])
    data = bytearray((out / f"{name}.idx").read_bytes())
    data[HEADER:HEADER + 12 * count] = (lengths.astype("<i4").tobytes()
                                        + pointers.astype("<i8").tobytes())
    (out / f"{name}.idx").write_bytes(bytes(data))
    code, text = _verify(out, capsys)
    assert code == 1
    problems = _problems(out)
    assert not any(p.startswith(f"{name}.idx") for p in problems), problems
    assert any(p.startswith(f"{name}.bin: sequence 3 ends with token ") for p in problems)
    assert any(p.startswith(f"{name}.bin: EOD id ") and "inside a document: sequence 3" in p
               for p in problems)
    assert any(p.startswith(f"{name}.csv.gz: row 4: start,end") for p in problems)


def test_missing_eod(out, capsys):
    name = "shard_000002"
    _, lengths, _ = _idx(out, name)
    ends = np.cumsum(lengths)
    tokens = _tokens(out, name)
    replacement = int(tokens[ends[2]])  # the first token of sequence 3: never the EOD
    tokens[ends[3] - 1] = replacement
    tokens.tofile(out / f"{name}.bin")
    code, text = _verify(out, capsys)
    assert code == 1
    eod = _manifest(out)["eod"]["id"]
    assert (f"  {name}.bin: sequence 3 ends with token {replacement}, not the EOD id {eod}"
            in text)
    assert len(_problems(out)) == 1


def test_eod_inside_a_document(out, capsys):
    name = "shard_000004"
    _, lengths, _ = _idx(out, name)
    ends = np.cumsum(lengths)
    tokens = _tokens(out, name)
    eod = _manifest(out)["eod"]["id"]
    tokens[ends[5]] = eod  # the first token of sequence 6
    tokens.tofile(out / f"{name}.bin")
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  {name}.bin: EOD id {eod} inside a document: sequence 6 at token 0 of" in text


def test_token_beyond_the_vocabulary(out, capsys):
    name = "shard_000000"
    tokens = _tokens(out, name)
    tokens[10] = 65000
    tokens.tofile(out / f"{name}.bin")
    code, text = _verify(out, capsys)
    assert code == 1
    vocab = _manifest(out)["tokenizer"]["vocab_size"]
    assert f"  {name}.bin: token 65000 at sequence " in text
    assert f"position 10 is not an id in [0, vocab_size {vocab})" in text


def test_provenance_line_altered(out, capsys):
    name = "shard_000001"
    rows = _rows(out, name)
    rows[1][4] = str(int(rows[1][4]) + 1)  # row 2 now names another line
    _write_rows(out, name, rows)
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  {name}.csv.gz: row 2: id {rows[1][2]} is not the document id " in text


def test_provenance_span_and_source_altered(out, capsys):
    name = "shard_000005"
    rows = _rows(out, name)
    rows[2][1] = str(int(rows[2][1]) - 1)
    rows[4][3] = "elsewhere.jsonl"
    _write_rows(out, name, rows)
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  {name}.csv.gz: row 3: start,end {rows[2][0]},{rows[2][1]} but sequence 2" in text
    assert f"  {name}.csv.gz: row 5: src 'elsewhere.jsonl' is not a source file" in text


def test_provenance_rows_swapped(out, capsys):
    """The documents (id, src, loc) of rows 1 and 2 exchanged, spans kept: each id still
    matches its (src, line), the order does not."""
    name = "shard_000000"
    rows = _rows(out, name)
    rows[0][2:], rows[1][2:] = rows[1][2:], rows[0][2:]
    _write_rows(out, name, rows)
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  {name}.csv.gz: row 2 (" in text and "is out of the pack order after the " \
        "previous row" in text


def test_shards_swapped_whole(out, capsys):
    """Shards 0 and 1 exchanged with everything that counts them: only the global order
    across shards is wrong."""
    for suffix in (".bin", ".idx", ".csv.gz", ".bin.index"):
        os.rename(out / f"shard_000000{suffix}", out / f"tmp{suffix}")
        os.rename(out / f"shard_000001{suffix}", out / f"shard_000000{suffix}")
        os.rename(out / f"tmp{suffix}", out / f"shard_000001{suffix}")
    m = _manifest(out)
    first, second = m["shards"][0], m["shards"][1]
    m["shards"][0] = {**second, "name": "shard_000000"}
    m["shards"][1] = {**first, "name": "shard_000001"}
    _write_manifest(out, m)
    seq = json.loads((out / "per_dataset_sequences.json").read_text())
    keys = sorted(seq)
    seq[keys[0]], seq[keys[1]] = seq[keys[1]], seq[keys[0]]
    (out / "per_dataset_sequences.json").write_text(fmt.json_document(seq), "utf-8")
    code, text = _verify(out, capsys)
    assert code == 1
    problems = _problems(out)
    assert problems == [p for p in problems if p.startswith("shard_000000.csv.gz: row 1 (")
                        or p.startswith("shard_000001.csv.gz: row 1 (")], problems
    assert any("is out of the pack order after the last row of shard_000000.csv.gz" in p
               for p in problems)


def test_missing_shard_file(out, capsys):
    (out / "shard_000003.csv.gz").unlink()
    code, text = _verify(out, capsys)
    assert code == 1
    assert ("  shard_000003.csv.gz: missing: manifest.json lists shard shard_000003"
            in text)


def test_datatrove_ends_index(out, capsys):
    name = "shard_000002"
    ends = np.fromfile(out / f"{name}.bin.index", dtype="<u8")
    _, lengths, _ = _idx(out, name)
    assert ends.tolist() == np.cumsum(lengths).tolist()
    ends[4] += 1
    ends.tofile(out / f"{name}.bin.index")
    (out / "shard_000003.bin.index").write_bytes(b"\0" * 12)
    code, text = _verify(out, capsys)
    assert code == 1
    assert (f"  {name}.bin.index: end 4 is {int(ends[4])}, but the .idx lengths of sequences "
            f"0..4 sum to {int(ends[4]) - 1}") in text
    assert "  shard_000003.bin.index: size 12 bytes, but " in text
    (out / "shard_000005.bin.index").unlink()
    assert "  shard_000005.bin.index: missing: manifest.json lists shard shard_000005" in \
        _verify(out, capsys)[1]


def test_unlisted_shard_file(out, capsys):
    shutil.copy(out / "shard_000000.bin", out / "shard_000099.bin")
    code, text = _verify(out, capsys)
    assert code == 1
    assert "  shard_000099.bin: shard file not listed in manifest.json shards" in text


def test_manifest_totals_edited(out, capsys):
    m = _manifest(out)
    docs, tokens = m["documents"], m["tokens"]
    m["documents"] += 1
    m["shards"][2]["tokens"] += 5
    m["sources"][1]["tokens"] -= 3
    _write_manifest(out, m)
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  manifest.json: documents is {docs + 1}, but the shards' .idx files hold {docs}" in text
    assert (f"  shard_000002.idx: lengths sum to {m['shards'][2]['tokens'] - 5} tokens, "
            f"manifest.json shards says {m['shards'][2]['tokens']} for shard_000002") in text
    assert (f"  manifest.json: sources[1] ('{m['sources'][1]['file']}') tokens is "
            f"{m['sources'][1]['tokens']}, but the provenance rows give "
            f"{m['sources'][1]['tokens'] + 3}") in text
    assert f"tokens is {tokens}, but its shards list {tokens + 5}" in text


def test_sequences_json_edited(out, capsys):
    path = out / "per_dataset_sequences.json"
    seq = json.loads(path.read_text())
    key = sorted(seq)[3]
    seq[key] = [seq[key][0] + 1, seq[key][1] + 1]
    del seq[sorted(seq)[4]]
    path.write_text(fmt.json_document(seq), "utf-8")
    code, text = _verify(out, capsys)
    assert code == 1
    assert f"  per_dataset_sequences.json: {key!r}: {seq[key]} but shard_000003.idx holds" in text
    assert "  per_dataset_sequences.json: shard shard_000004 has no entry" in text


def test_leftovers_of_a_build(out, capsys):
    (out / "_mintdim_build.json").write_text("{}")
    (out / "_mintdim_tmp/run").mkdir(parents=True)
    (out / "_mintdim_tmp/run/x.tok").write_bytes(b"\0\0")
    code, text = _verify(out, capsys)
    assert code == 1
    assert "  _mintdim_build.json: ownership marker of a build that did not end" in text
    assert "  _mintdim_tmp: temporary directory left behind" in text


def test_failed_build_without_manifest(out, capsys):
    (out / "manifest.json").unlink()
    (out / "PACK_BUILD_FAILED.md").write_text(finalize.failed_notice("SourceParseError: line 3"))
    code, text = _verify(out, capsys)
    assert code == 1
    assert ("  manifest.json: manifest.json is missing: the build did not complete; it failed "
            "(PACK_BUILD_FAILED.md): SourceParseError: line 3") in text


def test_bos_at_every_start(tmp_path, capsys):
    """With tokenizer bos: every sequence starts with bos_id; one that does not is named."""
    rng = random.Random(4)
    tok = tmp_path / "tok"
    tok.mkdir()
    byte_level_bpe(tok, [sentence(rng, 5, 15) for _ in range(800)], [EOD, "<|bos|>"], 300,
                   {"eos_token": EOD, "bos_token": "<|bos|>"})
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": sentence(rng, 1, 30)} for _ in range(60)])
    out = tmp_path / "out"
    (pipeline("pack-build")
     .source.jsonl(files=[str(data)], fields=[["text"]], templates=["{text}"])
     .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                        config=str(tok / "tokenizer_config.json"), bos=True)
     .pack(seed=5, shard_tokens=500)
     .output.dir(str(out))
     .run(pipeline_options=IN_MEMORY))
    m = _manifest(out)
    assert m["bos_id"] is not None and m["eod"]["source"].startswith("eos_token of ")
    assert _verify(out, capsys)[0] == 0
    name = m["shards"][1]["name"]
    _, lengths, _ = _idx(out, name)
    tokens = _tokens(out, name)
    start = int(lengths[:2].sum())  # sequence 2
    assert tokens[start] == m["bos_id"]
    tokens[start] = tokens[start + 1]
    tokens.tofile(out / f"{name}.bin")
    code, text = _verify(out, capsys)
    assert code == 1
    assert (f"  {name}.bin: sequence 2 starts with token {int(tokens[start])}, not bos_id "
            f"{m['bos_id']}") in text


# ------------------------------------------------------------------ remote

def test_verify_and_report_through_memory_url(built):
    fs = fsspec.filesystem("memory")
    root = "/pack_audit_case"
    url = f"memory://{root}"
    copy_to_memory_fs(built, url)
    try:
        result = verify_output(url)
        assert result.ok, [str(p) for p in result.problems]
        assert result.documents == _manifest(built)["documents"]
        report = write_report(url)
        md = fs.cat_file(f"{root}/report/report.md").decode("utf-8")
        assert f"- documents: {report['documents']:,};" in md
        assert verify_output(url).ok  # report/ is allowed in the output
        # damage through the non-mmap path: a missing EOD and a truncated shard
        name = "shard_000001"
        _, lengths, _ = _idx(built, name)
        tokens = np.frombuffer(fs.cat_file(f"{root}/{name}.bin"), dtype="<u2").copy()
        tokens[int(lengths[0]) - 1] = tokens[0]
        fs.pipe(f"{root}/{name}.bin", tokens.tobytes())
        data = fs.cat_file(f"{root}/shard_000004.bin")
        fs.pipe(f"{root}/shard_000004.bin", data[:-6])
        problems = [str(p) for p in verify_output(url).problems]
        assert any(p.startswith(f"{name}.bin: sequence 0 ends with token {int(tokens[0])}")
                   for p in problems), problems
        assert any(p.startswith("shard_000004.bin: size ") and "truncated" in p
                   for p in problems), problems
    finally:
        fs.rm(root, recursive=True)


# ------------------------------------------------------------------ report

def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_report(out, capsys):
    m = _manifest(out)
    assert cli.main(["report", str(out)]) == 0
    assert "report: " in capsys.readouterr().out
    report = out / "report"
    md = (report / "report.md").read_text("utf-8")
    assert (f"- documents: {m['documents']:,}; tokens: {m['tokens']:,} (EOD included); "
            f"empty documents (no token, not written): {m['empty_documents']:,}") in md
    assert f"- shards: {len(m['shards'])} (shard_tokens 2000)" in md
    assert "- dtype: uint16 (Megatron code 8)" in md
    assert f"- EOD: id {m['eod']['id']}, token `<\\|endoftext\\|>`, from pack.eod" in md
    assert "- seed: 0" in md
    assert "agree with manifest.json on every count above" in md
    assert m["empty_documents"] > 0

    # the histogram, recomputed here from the .idx files: log2 bins
    lengths = np.concatenate([_idx(out, s["name"])[1] for s in m["shards"]])
    expected = {}
    for length in lengths.tolist():
        k = length.bit_length() - 1
        docs, tokens = expected.get(k, (0, 0))
        expected[k] = (docs + 1, tokens + length)
    rows = _csv(report / "document_lengths.csv")
    low = min(expected)
    assert [(int(r["length_min"]), int(r["length_max"])) for r in rows] == [
        (1 << k, (1 << (k + 1)) - 1) for k in range(low, low + len(rows))]
    assert {k: v for k, v in ((int(r["length_min"]).bit_length() - 1,
                               (int(r["documents"]), int(r["tokens"]))) for r in rows)
            if v[0]} == expected
    assert sum(int(r["documents"]) for r in rows) == m["documents"] == len(lengths)
    assert sum(int(r["tokens"]) for r in rows) == m["tokens"]
    for r in rows:
        if int(r["documents"]):
            assert f"| {int(r['length_min']):,}-{int(r['length_max']):,} | {int(r['documents']):,} |" in md

    # per source, from the provenance rows; the manifest agrees
    sources = _csv(report / "tokens_per_source.csv")
    counted = {}
    for s in m["shards"]:
        for start, end, _, src, _ in _rows(out, s["name"]):
            docs, tokens = counted.get(src, (0, 0))
            counted[src] = (docs + 1, tokens + int(end) - int(start))
    assert [(r["file"], int(r["documents"]), int(r["tokens"]), int(r["empty_documents"]))
            for r in sources] == [
        (s["file"], *counted[s["file"]], s["empty_documents"]) for s in m["sources"]]
    assert [(r["file"], int(r["documents"]), int(r["tokens"])) for r in sources] == [
        (s["file"], s["documents"], s["tokens"]) for s in m["sources"]]
    shards = _csv(report / "tokens_per_shard.csv")
    assert [(r["shard"], int(r["documents"]), int(r["tokens"]), int(r["bin_bytes"]))
            for r in shards] == [(s["name"], s["documents"], s["tokens"], s["bin_bytes"])
                                 for s in m["shards"]]
    for name in pack_report_figures():
        assert (report / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
        assert f"]({name}.png)" in md and f"]({name}.csv)" in md
    assert verify_output(str(out)).ok  # report/ is allowed in the output


def pack_report_figures():
    from mintdim_beam.audit import pack_report

    return pack_report.FIGURES


def test_report_names_what_disagrees(out):
    m = _manifest(out)
    m["documents"] += 2
    _write_manifest(out, m)
    result = write_report(str(out))
    md = (out / "report/report.md").read_text("utf-8")
    docs = m["documents"] - 2
    line = (f"- documents (sequences in the .idx files): {docs} (measured) but manifest.json "
            f"documents says {docs + 2}")
    assert result["consistency"] == [line[2:]]
    assert line in md


# ------------------------------------------------------------------ content (issue 25)

def _equal_length_documents(out: Path, name: str):
    """Two provenance rows of shard `name` whose documents have the same length."""
    rows = _rows(out, name)
    seen = {}
    for row in rows:
        length = int(row[1]) - int(row[0])
        if length in seen and length > 2:
            return seen[length], row
        seen[length] = row
    raise AssertionError("no two documents of one length")


def test_two_swapped_documents_of_one_length_are_named_by_checksum_and_by_deep(built, tmp_path):
    """The probe's case: two equal-length documents swapped in a .bin. Every structural
    check still holds (pointers, EODs, provenance); the checksum names the file, and
    --deep without checksums names both documents by their source lines."""
    out = tmp_path / "out"
    shutil.copytree(built, out)
    name = _manifest(out)["shards"][0]["name"]
    first, second = _equal_length_documents(out, name)
    tokens = _tokens(out, name).copy()
    a, b = slice(int(first[0]), int(first[1])), slice(int(second[0]), int(second[1]))
    assert not np.array_equal(tokens[a], tokens[b])
    tokens[a], tokens[b] = tokens[b].copy(), tokens[a].copy()
    tokens.tofile(out / f"{name}.bin")
    problems = _problems(out)
    assert problems == [f"{name}.bin: content changed: sha256 " + problems[0].split("sha256 ")[1]]
    without_checksums(out)
    assert verify_output(str(out)).ok
    deep = verify_output(str(out), deep=100_000)
    named = sorted(p.what.split(" (")[0] for p in deep.problems)
    assert named == sorted([f"document {first[2]}", f"document {second[2]}"])
    assert all(p.file == f"{name}.bin" and "re-tokenized gives" in p.what for p in deep.problems)


def test_deep_verify_re_tokenizes_every_document(built, capsys):
    result = verify_output(str(built), deep=100_000)
    assert result.ok, [str(p) for p in result.problems]
    assert len(result.deep) == _manifest(built)["documents"]
    assert cli.main(["verify", str(built), "--deep"]) == 0
    assert "64 sampled documents equal their lines re-tokenized" in capsys.readouterr().out
