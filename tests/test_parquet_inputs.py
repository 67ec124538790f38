"""Inputs by format (issue 30, item 2): Parquet (found by its `PAR1` magic, read by row
groups as ranges), JSON array files, a UTF-8 BOM, and the formats we cannot read.

The same rows as Parquet, as a JSON array and as JSONL (with or without a BOM) give the
same shards and indices byte for byte, `source_file` aside (compared as in
test_compressed_inputs), on every runner and from the GCS emulator. Formats we cannot
read are refused at planning, before any output."""
import gzip
import io
import json
import random
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from conftest import IN_MEMORY, MULTI_PROCESS, gcs_emulator, read_tree, sentence
from test_compressed_inputs import _bad_build, _build, _renamed
from mintdim_beam.core import errors
from mintdim_beam.core.inputs import json_array
from mintdim_beam.core.inputs.compression import EXPECTED
from mintdim_beam.core.inputs.input_files import open_range
from mintdim_beam.core.inputs.source import RangeBatches, plan_ranges


def _rows(seed: int, count: int) -> list:
    """q/a rows: non-ASCII text, an empty answer, a duplicate, special characters."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        row = {"q": sentence(rng, 1, 12), "a": sentence(rng, 0, 30) + (" đúng 你好" if i % 7 == 0 else "")}
        if i % 50 == 3:
            row = {"q": "hello world", "a": "the answer"}
        if i % 31 == 5:
            row["a"] = 'quotes " and \\ backslash\ttab'
        rows.append(row)
    return rows


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def _parquet(path: Path, rows, row_group_size: int = 25) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), str(path), row_group_size=row_group_size)
    return path


def _write_corpus(folder: Path) -> Path:
    """a and b as JSONL, Parquet (several row groups), JSON arrays, JSONL with a BOM."""
    for name, rows in (("a", _rows(1, 240)), ("b", _rows(2, 90))):
        (folder / f"{name}.jsonl").write_bytes(_jsonl(rows))
        _parquet(folder / f"{name}.parquet", rows)
        indent = 2 if name == "a" else None  # pretty-printed and one-line arrays
        (folder / f"{name}.json").write_text(json.dumps(rows, ensure_ascii=False, indent=indent))
        (folder / f"{name}.bom.jsonl").write_bytes(b"\xef\xbb\xbf" + _jsonl(rows))
    return folder


@pytest.fixture
def corpus(tmp_path):
    return _write_corpus(tmp_path)


@pytest.fixture(scope="module")
def jsonl_build(tmp_path_factory, tokenizers_dir):
    """`tree(options)`: the build of a.jsonl and b.jsonl, once per options."""
    trees = {}

    def tree(options) -> dict:
        if tuple(options) not in trees:
            work = _write_corpus(tmp_path_factory.mktemp("jsonl"))
            _build(work, tokenizers_dir, ["a.jsonl", "b.jsonl"], "out_jsonl", options)
            trees[tuple(options)] = read_tree(work / "out_jsonl")
        return trees[tuple(options)]

    return tree


def _same_as_jsonl(folder: Path, out: str, files, expected: dict) -> dict:
    names = {f: f.split(".")[0] + ".jsonl" for f in files}
    tree = _renamed(read_tree(folder / out), names)
    assert sorted(tree) == sorted(expected)
    for rel in expected:
        assert tree[rel] == expected[rel], rel
    return json.loads((folder / out / "manifest.json").read_text())


# --- Parquet -----------------------------------------------------------------------------

def test_parquet_is_planned_by_row_groups(corpus):
    from mintdim_beam.core.config.unit_config import InputFile

    class Dataset:
        index, files = 0, (InputFile(0, "a.parquet", str(corpus / "a.parquet")),)

    ranges = plan_ranges([Dataset], range_bytes=700)
    assert len(ranges) > 3 and all(r.format == "parquet" for r in ranges)
    groups = [g for r in ranges for g in range(*r.row_groups)]
    assert groups == list(range(pq.ParquetFile(corpus / "a.parquet").num_row_groups))
    rows, counts = [], []
    for r in ranges:
        with open_range(r) as handle:
            batches = RangeBatches(handle, r, 7)
            for _, entries in batches:
                rows += [text for _, _, text, _ in entries]
        counts.append(batches.lines)
    assert rows == _rows(1, 240) and sum(counts) == 240
    (whole,) = plan_ranges([Dataset], range_bytes=1 << 30)
    assert whole.row_groups == (0, len(groups))


@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in_memory", "multi_process"])
def test_parquet_build_equals_the_jsonl_build(corpus, tokenizers_dir, jsonl_build, options):
    files = ["a.parquet", "b.parquet"]
    _build(corpus, tokenizers_dir, files, "out_parquet", options)
    manifest = _same_as_jsonl(corpus, "out_parquet", files, jsonl_build(options))
    assert [(e["file"], e["format"]) for e in manifest["inputs"]] == [
        ("a.parquet", "parquet"), ("b.parquet", "parquet")]
    lines = [json.loads(x)["source_line"] for x in
             (corpus / "out_parquet/sample_index.jsonl").read_text().splitlines()]
    assert max(lines) == 240 and min(lines) == 1  # 1-based row numbers


def test_parquet_found_by_magic_bytes_mixed_with_jsonl(corpus, tokenizers_dir, jsonl_build,
                                                      monkeypatch):
    """... and `verify --deep` re-reads the Parquet rows and the array's elements."""
    from mintdim_beam.audit.verify import verify_output

    (corpus / "a.data").write_bytes((corpus / "a.parquet").read_bytes())
    _build(corpus, tokenizers_dir, ["a.data", "b.json"], "out_mixed")
    _same_as_jsonl(corpus, "out_mixed", ["a.data", "b.json"], jsonl_build(IN_MEMORY))
    monkeypatch.chdir(corpus)
    result = verify_output(str(corpus / "out_mixed"), deep=10_000)
    assert result.ok, [str(p) for p in result.problems]
    assert len(result.deep) == result.samples == 330
    assert [status.split(" ")[0] for _, status in result.inputs] == ["unchanged", "unchanged"]


@pytest.mark.slow
def test_parquet_on_the_portable_runner(corpus, tokenizers_dir, jsonl_build, portable_flags):
    files = ["a.parquet", "b.json"]
    _build(corpus, tokenizers_dir, files, "out_portable", portable_flags)
    _same_as_jsonl(corpus, "out_portable", files, jsonl_build(IN_MEMORY))


def _remote_build(corpus: Path, tokenizers_dir: Path, root: str, fs) -> dict:
    """a.parquet and b.json built from `root` (a bucket) into it; the output's tree, its
    recorded paths swapped for the local JSONL names."""
    from mintdim_beam.unit_build.launch import launch

    fs.put_file(str(corpus / "a.parquet"), f"{root}/in/a.parquet")
    fs.put_file(str(corpus / "b.json"), f"{root}/in/b.json")
    fs.put_file(str(tokenizers_dir / "sp.model"), f"{root}/tok/sp.model")
    files = [f"{root}/in/a.parquet", f"{root}/in/b.json"]
    raw = {"source": {"files": files, "fields": [["q", "a"]], "templates": ["Q: {q}\nA: {a}"]},
           "tokenizer": {"type": "sentencepiece", "files": [f"{root}/tok/sp.model"]},
           "units": {"sizes": [[8, 16, 64]], "build_batch": [16]},
           "output": {"dir": f"{root}/out", "samples_per_shard": [20]}}
    launch(raw, "continue", "truncate", IN_MEMORY + ["--input_range_bytes=700"])
    local = corpus / ("from_" + root.split(":")[0])
    base = fs._strip_protocol(f"{root}/out")
    for path in fs.find(base):
        target = local / path[len(base) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(fs.cat_file(path))
    return _renamed(read_tree(local), {files[0]: "a.jsonl", files[1]: "b.jsonl",
                                       f"{root}/tok/sp.model": "tok/sp.model"})


def test_parquet_on_the_gcs_emulator(corpus, tokenizers_dir, jsonl_build):
    with gcs_emulator() as (root, fs):
        tree = _remote_build(corpus, tokenizers_dir, root, fs)
    expected = jsonl_build(IN_MEMORY)
    assert sorted(tree) == sorted(expected)
    for rel in expected:
        assert tree[rel] == expected[rel], rel


def test_parquet_on_the_s3_emulator(corpus, tokenizers_dir, jsonl_build, s3):
    tree = _remote_build(corpus, tokenizers_dir, *s3)
    expected = jsonl_build(IN_MEMORY)
    assert sorted(tree) == sorted(expected)
    for rel in expected:
        assert tree[rel] == expected[rel], rel


def test_null_cell_is_the_error_of_a_json_null(tmp_path, tokenizers_dir):
    rows = _rows(3, 30)
    rows[17]["a"] = None
    for kind in ("j", "p"):
        (tmp_path / kind).mkdir()
    (tmp_path / "j/n.jsonl").write_bytes(_jsonl(rows))
    _parquet(tmp_path / "p/n.parquet", rows, 8)
    found = [_bad_build(tmp_path / "j", tokenizers_dir, "n.jsonl"),
             _bad_build(tmp_path / "p", tokenizers_dir, "n.parquet")]
    assert type(found[0]) is type(found[1]) is errors.SampleSchemaError
    assert found[0].kwargs | {"file": None} == found[1].kwargs | {"file": None}
    assert found[1].kwargs["line"] == 18


def test_changed_parquet_is_noticed_per_range(tmp_path, tokenizers_dir, monkeypatch):
    from mintdim_beam.unit_build import launch as runner

    _parquet(tmp_path / "c.parquet", _rows(4, 100), 10)
    real = runner.plan_ranges

    def plan_then_change(*args, **kwargs):
        ranges = real(*args, **kwargs)
        _parquet(tmp_path / "c.parquet", _rows(5, 100), 10)
        return ranges

    monkeypatch.setattr(runner, "plan_ranges", plan_then_change)
    error = _bad_build(tmp_path, tokenizers_dir, "c.parquet")
    assert type(error) is errors.SourceChangedError and error.kwargs["file"] == "c.parquet"


def test_chat_parquet_messages_equal_the_jsonl(tmp_path, tok):
    """A list-of-structs `messages` column: a key only some messages have (`name`) is
    absent, not null, in the others, as in the JSON."""
    rng = random.Random(9)
    rows = []
    for i in range(40):
        messages = dialogue(rng, 1 + i % 3, system=i % 4 == 0)
        if i % 5 == 1:
            messages[-1]["name"] = "helper"
        rows.append({"id": i, "messages": messages})
    _write(tmp_path / "chat.jsonl", rows)
    _parquet(tmp_path / "chat.parquet", rows, 9)
    _chat(tmp_path, tok, [tmp_path / "chat.jsonl"], tmp_path / "out_jsonl",
          options=IN_MEMORY + ["--input_range_bytes=500"])
    _chat(tmp_path, tok, [tmp_path / "chat.parquet"], tmp_path / "out_parquet",
          options=MULTI_PROCESS + ["--input_range_bytes=500"])
    names = {str(tmp_path / "chat.parquet"): str(tmp_path / "chat.jsonl")}
    expected = read_tree(tmp_path / "out_jsonl")
    tree = _renamed(read_tree(tmp_path / "out_parquet"), names)
    assert sorted(tree) == sorted(expected)
    for rel in expected:
        assert tree[rel] == expected[rel], rel


# --- JSON arrays -------------------------------------------------------------------------

@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in_memory", "multi_process"])
def test_json_array_build_equals_the_jsonl_build(corpus, tokenizers_dir, jsonl_build, options):
    (corpus / "b.json.gz").write_bytes(gzip.compress((corpus / "b.json").read_bytes()))
    files = ["a.json", "b.json.gz"]
    _build(corpus, tokenizers_dir, files, "out_array", options)
    manifest = _same_as_jsonl(corpus, "out_array", files, jsonl_build(options))
    assert [e.get("format") for e in manifest["inputs"]] == ["json_array", "json_array"]


def _elements(data: bytes, block: int, monkeypatch, limit: int = 1 << 20) -> list:
    monkeypatch.setattr(json_array, "_BLOCK", block)
    return list(json_array.iter_elements(io.BytesIO(data), "f.json", limit))


@pytest.mark.parametrize("block", [1, 3, 7, 4096])
def test_json_array_decoded_over_a_small_window(monkeypatch, block):
    value = [1, 23456789, {"a": [1, 2, 3], "b": "x\u00e9y"}, "xyz", 12345678901234567890, None,
             -0.5e10, True, [], {}]
    data = ("\ufeff \n" + json.dumps(value, ensure_ascii=False, indent=1) + "\n ").encode()
    assert _elements(data, block, monkeypatch) == value
    assert _elements(b"[]", block, monkeypatch) == [] == _elements(b" [ ] ", block, monkeypatch)


@pytest.mark.parametrize("data, element, reason", [
    (b'[{"a": 1}, {"a": 2}', 2, "ends inside the array"),
    (b'[{"a": 1} {"a": 2}]', 1, "expected ','"),
    (b'[{"a": 1},]', 2, "Expecting value"),
    (b'[{"a": 1}, {"a": tru}]', 2, "Expecting"),
    (b'[{"a": 1}] {}', 2, "after the array"),
    (b'[{"a": 1}, {"a": "\xff"}]', 2, "invalid UTF-8"),
    (b'[{"a": 1}, {"a": "' + b"x" * 5000 + b'"}]', 2, "max_line_bytes"),
])
def test_malformed_json_array_names_file_and_element(monkeypatch, data, element, reason):
    with pytest.raises(errors.SourceParseError) as info:
        _elements(data, 64, monkeypatch, limit=1000)
    assert info.value.kwargs["file"] == "f.json" and info.value.kwargs["line"] == element
    assert reason in info.value.kwargs["reason"] and f"element {element}" in info.value.kwargs["reason"]


def test_json_array_nested_too_deeply_is_a_parse_error(monkeypatch):
    data = b'[{"a": 1}, ' + b"[" * 100_000 + b"]" * 100_000 + b"]"
    with pytest.raises(errors.SourceParseError) as info:
        _elements(data, 1 << 20, monkeypatch, limit=1 << 30)
    assert info.value.kwargs["line"] == 2 and "nested too deeply" in info.value.kwargs["reason"]


def test_json_array_errors_in_a_build(tmp_path, tokenizers_dir):
    (tmp_path / "objects.json").write_text('[{"q": "a", "a": "b"}, [1, 2], {"q": "c", "a": "d"}]')
    error = _bad_build(tmp_path, tokenizers_dir, "objects.json")
    assert type(error) is errors.SourceParseError and error.kwargs["line"] == 2
    assert "not an object" in error.kwargs["reason"]
    (tmp_path / "second").mkdir()
    (tmp_path / "second/broken.json").write_text('[{"q": "a", "a": "b"},\n {"q": "c", "a": "d"')
    error = _bad_build(tmp_path / "second", tokenizers_dir, "broken.json")
    assert type(error) is errors.SourceParseError
    assert (error.kwargs["file"], error.kwargs["line"]) == ("broken.json", 2)


# --- BOM ---------------------------------------------------------------------------------

def test_bom_is_skipped_and_recorded(corpus, tokenizers_dir, jsonl_build):
    from test_input_identity import _verify

    (corpus / "b.bom.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress((corpus / "b.bom.jsonl").read_bytes()))
    files = ["a.bom.jsonl", "b.bom.jsonl.zst"]
    _build(corpus, tokenizers_dir, files, "out_bom")
    manifest = _same_as_jsonl(corpus, "out_bom", files, jsonl_build(IN_MEMORY))
    assert [e.get("bom") for e in manifest["inputs"]] == [True, True]
    proc = _verify(corpus / "out_bom", corpus)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "input a.bom.jsonl: unchanged" in proc.stdout


# --- formats we cannot read --------------------------------------------------------------

def _tar(members: dict) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


_TAR = _tar({"data.jsonl": b'{"q": "a", "a": "b"}\n'})


@pytest.mark.parametrize("name, data, found", [
    ("data.tar", _TAR, "tar archive"),
    ("data.jsonl", _TAR, "tar archive"),
    ("data.tar.gz", gzip.compress(_TAR), "tar archive, gzip-compressed"),
    ("data.tar.zst", zstandard.ZstdCompressor().compress(_TAR), "tar archive, zstd-compressed"),
    ("data.arrow", b"ARROW1\x00\x00" + b"\x00" * 64, "Arrow IPC"),
    ("data.feather", b"FEA1" + b"\x00" * 64, "Feather v1"),
    ("data.lz4", b"\x04\x22\x4d\x18" + b"\x00" * 16, "lz4"),
    ("data.jsonl", b"\xff\xfe{\x00}\x00", "UTF-16"),
    ("data.parquet", b"PAR1 not really a parquet file", "Parquet file whose footer"),
], ids=["tar", "tar_named_jsonl", "tar_gz", "tar_zst", "arrow", "feather", "lz4", "utf16",
        "bad_parquet"])
def test_unreadable_formats_are_refused_before_any_output(tmp_path, tokenizers_dir, name, data, found):
    (tmp_path / name).write_bytes(data)
    error = _bad_build(tmp_path, tokenizers_dir, name)
    assert type(error) is errors.SourceFormatError, error
    assert error.kwargs["file"] == name and found in error.kwargs["found"]
    assert not (tmp_path / "out").exists()


def test_expected_formats_name_parquet_and_json_arrays():
    assert "Parquet" in EXPECTED and "JSON array" in EXPECTED and "gzip" in EXPECTED


# --- pack-build ----------------------------------------------------------------------------

def test_pack_build_reads_parquet_and_json_arrays(tmp_path):
    """A pack-build's order hashes each file's name as given: the Parquet and the JSON
    array are given the names of the JSONL files they stand for (found by their bytes),
    in a folder of their own."""
    from test_pack import EOT, IM_END, _job, _run, _train_bpe

    rng = random.Random(3)
    docs = [{"title": sentence(rng, 1, 5), "text": sentence(rng, 3, 30)} for _ in range(70)]
    for kind in ("jsonl", "formats"):
        (tmp_path / kind / "tok").mkdir(parents=True)
        _train_bpe(tmp_path / kind / "tok", {"eos_token": IM_END})
        (tmp_path / kind / "data").mkdir()
    (tmp_path / "jsonl/data/a.jsonl").write_bytes(_jsonl(docs[:40]))
    (tmp_path / "jsonl/data/b.jsonl").write_bytes(_jsonl(docs[40:]))
    _parquet(tmp_path / "formats/data/a.jsonl", docs[:40], 6)
    (tmp_path / "formats/data/b.jsonl").write_text(json.dumps(docs[40:], indent=1))
    pack = {"eod": EOT, "seed": 0, "shard_tokens": 300}
    fields, templates = [["title", "text"], ["text"]], ["{title}\n\n{text}", "{text}"]
    for kind, options in (("jsonl", IN_MEMORY), ("formats", MULTI_PROCESS)):
        _run(tmp_path / kind, _job(["data/a.jsonl", "data/b.jsonl"], fields, templates,
                                   pack=pack, out="out"), options + ["--input_range_bytes=300"])
    expected = read_tree(tmp_path / "jsonl/out")
    tree = read_tree(tmp_path / "formats/out")
    # the one file naming inputs by absolute path
    tree["per_dataset_sequences.json"] = tree["per_dataset_sequences.json"].replace(
        str(tmp_path / "formats").encode(), str(tmp_path / "jsonl").encode())
    assert sorted(tree) == sorted(expected) and len(expected) > 8
    for rel in expected:
        if rel != "manifest.json":
            assert tree[rel] == expected[rel], rel
    manifest = json.loads((tmp_path / "formats/out/manifest.json").read_text())
    reference = json.loads(expected["manifest.json"])
    assert {**manifest, "inputs": None} == {**reference, "inputs": None}
    assert [e.get("format") for e in manifest["inputs"]] == ["parquet", "json_array"]


from test_chat_pipeline import _chat, _write, dialogue, tok  # noqa: E402,F401 - fixture
from test_remote import s3  # noqa: E402,F401 - the S3 emulator fixture
