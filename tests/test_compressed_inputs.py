"""gzip and zstd inputs are read transparently (found by their magic bytes, one range per
file): a compressed build equals the build of the same text uncompressed byte for byte,
`source_file` aside. Other formats are refused before any output; a corrupt stream is
a SourceParseError naming the file."""
import bz2
import gzip
import json
import random
import sys
from pathlib import Path

import fsspec
import pytest
import zstandard

from conftest import IN_MEMORY, MULTI_PROCESS, read_tree, run_build, sentence
from mintdim_beam.audit.plan import token_histograms
from mintdim_beam.unit_build.launch import launch
from mintdim_beam.core import errors


def _text(seed: int, rows: int = 240) -> bytes:
    """JSONL with every line ending (\\n, \\r\\n, lone \\r), blank and whitespace lines,
    a duplicate, and non-ASCII text."""
    rng = random.Random(seed)
    endings = [b"\n", b"\r\n", b"\r"]
    out = []
    for i in range(rows):
        row = {"q": sentence(rng, 1, 12), "a": sentence(rng, 0, 30) + (" đúng" if i % 7 == 0 else "")}
        if i % 50 == 3:
            row = {"q": "hello world", "a": "the answer"}
        out.append(json.dumps(row, ensure_ascii=False).encode() + rng.choice(endings))
        if i % 17 == 0:
            out.append(rng.choice([b"\n", b"   \r\n", b"\t\r"]))
    return b"".join(out)


def _tok(workdir: Path, tokenizers_dir: Path) -> str:
    (workdir / "tok").mkdir(exist_ok=True)
    (workdir / "tok" / "sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    return "tok/sp.model"


def _build(workdir: Path, tokenizers_dir: Path, files, out: str, options=IN_MEMORY):
    return run_build(workdir, files=files, fields=[["q", "a"]], templates=["Q: {q}\nA: {a}"],
                     tokenizer="sentencepiece", tokenizer_files=[_tok(workdir, tokenizers_dir)],
                     sizes=[[8, 16, 64]], build_batch=[16], output=out, samples_per_shard=[20],
                     options=list(options) + ["--input_range_bytes=700"],
                     on_overflow="truncate", on_template_unk="continue")


def _renamed(tree: dict, names: dict) -> dict:
    """The tree with each recorded file name swapped for the plain file's."""
    out = {}
    for rel, data in tree.items():
        if rel.endswith((".jsonl", ".json")):
            text = data.decode("utf-8")
            for given, plain in names.items():
                text = text.replace(json.dumps(given), json.dumps(plain))
            data = text.encode("utf-8")
        out[rel] = data
    return out


def _zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def _write_corpus(folder: Path) -> Path:
    """Two plain files, each also as multi-member gzip and as multi-frame zstd."""
    texts = {"a": _text(1), "b": _text(2, 90)}
    for name, data in texts.items():
        (folder / f"{name}.jsonl").write_bytes(data)
        cut = len(data) // 3 + 5  # members and frames split mid-line
        (folder / f"{name}.jsonl.gz").write_bytes(gzip.compress(data[:cut]) + gzip.compress(data[cut:]))
        (folder / f"{name}.jsonl.zst").write_bytes(_zst(data[:cut]) + _zst(data[cut:]))
    return folder


@pytest.fixture
def corpus(tmp_path):
    return _write_corpus(tmp_path)


@pytest.fixture(scope="module")
def plain_build(tmp_path_factory, tokenizers_dir):
    """`tree(options)`: the build of the plain a.jsonl and b.jsonl with `options`, made
    once for the module (the compressed and misnamed copies are compared with it)."""
    trees = {}

    def tree(options) -> dict:
        if tuple(options) not in trees:
            work = _write_corpus(tmp_path_factory.mktemp("plain"))
            _build(work, tokenizers_dir, ["a.jsonl", "b.jsonl"], "out_plain", options)
            trees[tuple(options)] = read_tree(work / "out_plain")
        return trees[tuple(options)]

    return tree


@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in_memory", "multi_process"])
def test_gzip_and_zstd_builds_equal_the_plain_build(corpus, tokenizers_dir, plain_build, options):
    plain = plain_build(options)
    assert b'"source_line": ' in plain["sample_index.jsonl"]
    for files in (["a.jsonl.gz", "b.jsonl.zst"], ["a.jsonl.zst", "b.jsonl.gz"]):
        out = "out_" + "_".join(f.rsplit(".", 1)[-1] for f in files)
        _build(corpus, tokenizers_dir, files, out, options)
        names = {f: f.rsplit(".", 1)[0] for f in files}
        assert _renamed(read_tree(corpus / out), names) == plain, files
        manifest = json.loads((corpus / out / "manifest.json").read_text())
        assert [(e["file"], e["compression"]) for e in manifest["inputs"]] == [
            (f, "gzip" if f.endswith(".gz") else "zstd") for f in files]


def test_found_by_magic_bytes_not_by_name(corpus, tokenizers_dir, plain_build):
    (corpus / "gz_named_plain.jsonl").write_bytes((corpus / "a.jsonl.gz").read_bytes())
    (corpus / "plain_named_gz.jsonl.gz").write_bytes((corpus / "b.jsonl").read_bytes())
    _build(corpus, tokenizers_dir, ["gz_named_plain.jsonl", "plain_named_gz.jsonl.gz"], "out_odd")
    names = {"gz_named_plain.jsonl": "a.jsonl", "plain_named_gz.jsonl.gz": "b.jsonl"}
    assert _renamed(read_tree(corpus / "out_odd"), names) == plain_build(IN_MEMORY)


def test_crlf_inside_gzip_numbers_physical_lines(tmp_path, tokenizers_dir):
    rows = [b'{"q": "one", "a": "x"}', b"", b'{"q": "two", "a": "y"}', b"  ",
            b'{"q": "three", "a": "z"}']
    (tmp_path / "crlf.jsonl.gz").write_bytes(gzip.compress(b"\r\n".join(rows) + b"\r\n"))
    _build(tmp_path, tokenizers_dir, ["crlf.jsonl.gz"], "out")
    index = [json.loads(line) for line in (tmp_path / "out/sample_index.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["source_file"], r["source_line"]) for r in index] == [
        (0, "crlf.jsonl.gz", 1), (1, "crlf.jsonl.gz", 3), (2, "crlf.jsonl.gz", 5)]


def _bad_build(tmp_path, tokenizers_dir, name, options=IN_MEMORY):
    with pytest.raises(errors.MintDimError) as info:
        _build(tmp_path, tokenizers_dir, [name], "out", options)
    assert not (tmp_path / "out" / "manifest.json").exists()
    return info.value


@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in_memory", "multi_process"])
def test_corrupt_gzip_is_a_parse_error_naming_the_file(tmp_path, tokenizers_dir, options):
    data = _text(3, 12000)  # over 1 MiB: the damage is met after a first block of lines
    packed = bytearray(gzip.compress(data))
    packed[len(packed) * 3 // 4] ^= 0xFF
    (tmp_path / "bad.jsonl.gz").write_bytes(bytes(packed))
    error = _bad_build(tmp_path, tokenizers_dir, "bad.jsonl.gz", options)
    assert type(error) is errors.SourceParseError
    assert error.kwargs["file"] == "bad.jsonl.gz"
    assert "gzip" in error.kwargs["reason"]
    assert 1 < error.kwargs["line"] <= len(data.splitlines())


@pytest.mark.parametrize("suffix", ["gz", "zst"])
def test_truncated_stream_is_a_parse_error(tmp_path, tokenizers_dir, suffix):
    data = _text(4, 3000)
    packed = gzip.compress(data) if suffix == "gz" else _zst(data)
    name = f"cut.jsonl.{suffix}"
    (tmp_path / name).write_bytes(packed[:len(packed) * 2 // 3])
    error = _bad_build(tmp_path, tokenizers_dir, name)
    assert type(error) is errors.SourceParseError and error.kwargs["file"] == name
    assert "ends early" in error.kwargs["reason"]


@pytest.mark.parametrize("name, packed, found", [
    ("data.jsonl.bz2", bz2.compress(b'{"q": "a", "a": "b"}\n'), "bzip2"),
    ("data.jsonl.xz", __import__("lzma").compress(b'{"q": "a", "a": "b"}\n'), "xz"),
    ("data.zip", b"PK\x03\x04" + b"\0" * 40, "zip"),
], ids=["bzip2", "xz", "zip"])
def test_other_formats_are_refused_before_any_output(tmp_path, tokenizers_dir, name, packed, found):
    (tmp_path / name).write_bytes(packed)
    error = _bad_build(tmp_path, tokenizers_dir, name)
    assert type(error) is errors.SourceFormatError
    assert error.kwargs["file"] == name and found in error.kwargs["found"]
    assert "gzip" in error.kwargs["expected"] and "zstd" in error.kwargs["expected"]
    assert not (tmp_path / "out").exists()


def test_zstd_without_zstandard_says_what_to_install(tmp_path, tokenizers_dir, monkeypatch):
    (tmp_path / "data.jsonl.zst").write_bytes(_zst(_text(5, 20)))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if it were not installed
    error = _bad_build(tmp_path, tokenizers_dir, "data.jsonl.zst")
    assert type(error) is errors.SourceFormatError and "zstandard" in error.kwargs["found"]
    assert not (tmp_path / "out").exists()


def test_plan_histograms_of_compressed_inputs_equal_plain(corpus, tokenizers_dir):
    def raw(files):
        return {"source": {"files": files, "fields": [["q", "a"]],
                           "templates": ["Q: {q}\nA: {a}"]},
                "tokenizer": {"type": "sentencepiece", "files": [str(tokenizers_dir / "sp.model")]},
                "units": {"sizes": [[8, 16, 64]], "build_batch": [16]},
                "output": {"dir": str(corpus / "unused"), "samples_per_shard": [20]}}

    plain = token_histograms(raw([str(corpus / "a.jsonl")]), IN_MEMORY)[1]
    packed = token_histograms(raw([str(corpus / "a.jsonl.gz"), ]), IN_MEMORY)[1]
    zst = token_histograms(raw([str(corpus / "a.jsonl.zst")]), IN_MEMORY + ["--input_range_bytes=500"])[1]
    assert plain == packed == zst and sum(plain[0].values()) > 200


def test_gzip_on_memory_filesystem_equals_local(corpus, tokenizers_dir):
    _build(corpus, tokenizers_dir, ["a.jsonl"], "out_plain")
    fs = fsspec.filesystem("memory")
    fs.pipe_file("memory://gzcase/in/a.jsonl.gz", (corpus / "a.jsonl.gz").read_bytes())
    fs.pipe_file("memory://gzcase/tok/sp.model", (tokenizers_dir / "sp.model").read_bytes())
    raw = {"source": {"files": ["memory://gzcase/in/a.jsonl.gz"], "fields": [["q", "a"]],
                      "templates": ["Q: {q}\nA: {a}"]},
           "tokenizer": {"type": "sentencepiece", "files": ["memory://gzcase/tok/sp.model"]},
           "units": {"sizes": [[8, 16, 64]], "build_batch": [16]},
           "output": {"dir": "memory://gzcase/out", "samples_per_shard": [20]}}
    try:
        launch(raw, "continue", "truncate", IN_MEMORY)
        local = corpus / "from_memory"
        for path in fs.find("/gzcase/out"):
            target = local / path[len("/gzcase/out/"):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fs.cat_file(path))
    finally:
        fs.rm("/gzcase", recursive=True)
    tree = _renamed(read_tree(local), {"memory://gzcase/in/a.jsonl.gz": "a.jsonl",
                                       "memory://gzcase/tok/sp.model": "tok/sp.model"})
    plain = read_tree(corpus / "out_plain")
    assert sorted(tree) == sorted(plain)
    for rel in plain:
        assert tree[rel] == plain[rel], rel


def test_interactive_survey_reports_a_corrupt_gzip(tmp_path, tokenizers_dir):
    from test_input_identity import run_survey_child

    (tmp_path / "sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(_text(6, 500))[:-40])
    found = run_survey_child(tmp_path, "cut.jsonl.gz", "plain")
    assert found["error"] == "SourceParseError" and found["kwargs"]["file"] == "cut.jsonl.gz"
    assert "ends early" in found["kwargs"]["reason"]
