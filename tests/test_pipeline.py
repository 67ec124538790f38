"""End-to-end builds on real runners: failures, deviations, determinism."""
import json
import random
from pathlib import Path

import pytest

from conftest import IN_MEMORY, MULTI_PROCESS, read_tree, run_build, sentence, write_jsonl
from mintdim_beam.core import errors

GOOD = [{"q": "hello world", "a": "the answer"}, {"q": "data tokens", "a": "units"}]


def _tok(workdir: Path, tokenizers_dir: Path, name: str = "sp.model") -> str:
    (workdir / "tok").mkdir(exist_ok=True)
    (workdir / "tok" / name).write_bytes((tokenizers_dir / name).read_bytes())
    return f"tok/{name}"


def _build(workdir, tokenizers_dir, files, **kw):
    tok = kw.pop("tok", "sp.model")
    kind = "sentencepiece" if tok.endswith(".model") else "hf_json"
    args = dict(files=files, fields=[["q", "a"]], templates=["Q: {q}\nA: {a}"],
                tokenizer=kind, tokenizer_files=[_tok(workdir, tokenizers_dir, tok)],
                sizes=[[8, 16, 64]], build_batch=[4], output="out", samples_per_shard=[3],
                on_overflow="truncate", on_template_unk="continue")
    args.update(kw)
    return run_build(workdir, **args)


BAD_LINES = [
    ('{"q": "x", oops}', errors.SourceParseError, "invalid JSON syntax"),
    ("[1, 2]", errors.SourceParseError, "JSONL row is not a JSON object"),
    ('{"q": "only q"}', errors.SampleSchemaError, "Missing fields: a"),
    ('{"q": null, "a": "x"}', errors.SampleSchemaError, "JSON type: null"),
    ('{"q": [1], "a": "x"}', errors.SampleSchemaError, "JSON type: array"),
    ('{"q": {"k": 1}, "a": "x"}', errors.SampleSchemaError, "JSON type: object"),
    (b'{"q": "caf\xe9", "a": "x"}', errors.SourceParseError, "invalid UTF-8"),
    ('{"q": "x\\ud800", "a": "y"}', errors.SourceParseError, "lone surrogate"),
]


BAD_LINE_RUNS = [(IN_MEMORY, *case) for case in BAD_LINES] + [(MULTI_PROCESS, *BAD_LINES[0])]


@pytest.mark.parametrize("options,bad,cls,reason", BAD_LINE_RUNS)
def test_bad_line_fails_with_file_and_line_and_leaves_failure_notices(
        tmp_path, tokenizers_dir, options, bad, cls, reason):
    rows = [json.dumps(GOOD[i % 2]) for i in range(30)]
    data = "\n".join(rows[:10]).encode() + b"\n\n" + (bad if isinstance(bad, bytes) else bad.encode())
    data += b"\r\n" + "\n".join(rows[10:]).encode() + b"\n" + b'{"q": 1, "a": 2, "b": oops\n'
    (tmp_path / "data").mkdir()
    (tmp_path / "data/in.jsonl").write_bytes(data)
    with pytest.raises(cls) as info:
        _build(tmp_path, tokenizers_dir, ["data/in.jsonl"], options=list(options) + ["--input_range_bytes=64"])
    text = info.value.english
    assert "File: data/in.jsonl" in text and "Line: 12" in text and reason in text
    assert "Dòng: 12" in info.value.vietnamese
    out = tmp_path / "out"
    assert not (out / "manifest.json").exists()
    assert not (out / "_mintdim_tmp").exists()
    for size in (8, 16, 64):
        notice = (out / f"unit_{size}" / "UNIT_BUILD_FAILED.md").read_text()
        assert cls.__name__ in notice


def test_overflow_abort_names_the_first_overflowing_sample(tmp_path, tokenizers_dir):
    rng = random.Random(1)
    rows = [{"q": sentence(rng, 1, 3), "a": "x"} for _ in range(20)]
    rows[7]["q"] = sentence(rng, 40, 50)
    rows[15]["q"] = sentence(rng, 40, 50)
    write_jsonl(tmp_path / "data/in.jsonl", rows)
    with pytest.raises(errors.UnitOverflowError) as info:
        _build(tmp_path, tokenizers_dir, ["data/in.jsonl"], on_overflow="abort", sizes=[[8, 16]],
               options=IN_MEMORY + ["--input_range_bytes=100"])
    assert "Sample: data/in.jsonl:8" in info.value.english
    assert "max_unit_size: 16" in info.value.english
    assert not (tmp_path / "out/manifest.json").exists()


def _corpus(path: Path, n: int, seed: int = 5):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        row = {"q": sentence(rng, 0, 12), "a": sentence(rng, 0, 30) + (" 😀 漢字" if i % 13 == 0 else "")}
        rows.append(row if i % 17 else GOOD[0])  # duplicates
        if i % 29 == 0:
            rows.append("   ")
    write_jsonl(path, rows, newline="\r\n")


@pytest.mark.slow
def test_same_bytes_on_every_runner_and_range_size(tmp_path, tokenizers_dir):
    # 30 KB (230 ranges of 128 bytes) with CRLF, blanks, duplicates and emoji: the number
    # of rows is not the point (there were 420, and each range is a bundle to run)
    _corpus(tmp_path / "data/a.jsonl", 150)
    _corpus(tmp_path / "data/b.jsonl", 60, seed=9)
    trees = {}
    for name, options in {"in_memory": IN_MEMORY,
                          "in_memory_128B": IN_MEMORY + ["--input_range_bytes=128"],
                          "multi_4KiB": MULTI_PROCESS + ["--input_range_bytes=4096"],
                          "multi_333B": MULTI_PROCESS + ["--input_range_bytes=333"]}.items():
        work = tmp_path / name
        (work / "data").mkdir(parents=True)
        for f in ("a.jsonl", "b.jsonl"):
            (work / "data" / f).write_bytes((tmp_path / "data" / f).read_bytes())
        result = _build(work, tokenizers_dir, ["data/a.jsonl", "data/b.jsonl"], options=options,
                        on_overflow="extend", sizes=[[8, 16, 32]], samples_per_shard=[7])
        trees[name] = read_tree(work / "out")
        assert result["outputs"][0]["total_samples"] == 210
    reference = trees.pop("in_memory")
    assert any(k.startswith("unit_16/shard_000003") for k in reference)
    for name, tree in trees.items():
        assert tree == reference, name


def test_extend_adds_unit_dirs_and_manifest_sizes(tmp_path, tokenizers_dir):
    rng = random.Random(2)
    rows = [{"q": sentence(rng, 1, 2), "a": "x"} for _ in range(12)]
    for i, n in ((3, 30), (6, 20), (9, 45)):
        rows[i]["q"] = sentence(rng, n, n)
    write_jsonl(tmp_path / "data/in.jsonl", rows)
    result = _build(tmp_path, tokenizers_dir, ["data/in.jsonl"], on_overflow="extend",
                    sizes=[[16]], options=IN_MEMORY + ["--input_range_bytes=50"])
    sizes = result["outputs"][0]["sizes"]
    overflow = [json.loads(l) for l in (tmp_path / "out/overflow_index.jsonl").read_text().splitlines()]
    assert [r["new_unit_size"] for r in overflow] == sizes[1:]
    assert sizes == sorted(sizes) and len(sizes) >= 2
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert manifest["units"]["sizes"] == sizes
    for size in sizes:
        assert (tmp_path / f"out/unit_{size}").is_dir()


def test_only_blank_lines_gives_an_empty_complete_build(tmp_path, tokenizers_dir):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/in.jsonl").write_bytes(b"\n  \r\n\t\r\r\n")
    result = _build(tmp_path, tokenizers_dir, ["data/in.jsonl"])
    assert result["outputs"][0]["total_samples"] == 0
    out = tmp_path / "out"
    for name in ("sample_index.jsonl", "unk_index.jsonl", "overflow_index.jsonl", "duplicate_index.jsonl"):
        assert (out / name).read_bytes() == b""
    assert (out / "histogram.json").read_text() == "{}"
    assert sorted(p.name for p in (out / "unit_8").iterdir()) == ["EMPTY_UNIT.md"]
    assert (out / "manifest.json").exists() and not (out / "_mintdim_tmp").exists()


def test_hf_truncation_in_tokenizer_json_is_ignored(tmp_path, tokenizers_dir):
    spec = json.loads((tokenizers_dir / "hf_bpe.json").read_text())
    spec["truncation"] = {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0}
    (tmp_path / "trunc").mkdir()
    (tmp_path / "trunc/hf_bpe.json").write_text(json.dumps(spec))
    rows = [{"q": "the model reads every sample", "a": "and writes shards of fixed width"}]
    for work, tok_dir in ((tmp_path / "plain", tokenizers_dir), (tmp_path / "cut", tmp_path / "trunc")):
        write_jsonl(work / "data/in.jsonl", rows)
        _build(work, tok_dir, ["data/in.jsonl"], tok="hf_bpe.json")
    plain, cut = read_tree(tmp_path / "plain/out"), read_tree(tmp_path / "cut/out")
    assert json.loads(plain["sample_index.jsonl"])["token_count"] > 4
    assert plain == cut


def test_hf_unigram_tokenizer_is_accepted(tmp_path, tokenizers_dir):
    write_jsonl(tmp_path / "data/in.jsonl", [{"q": "hello world 😀", "a": "data"}])
    result = _build(tmp_path, tokenizers_dir, ["data/in.jsonl"], tok="hf_unigram.json")
    assert result["outputs"][0]["total_samples"] == 1
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    spec = json.loads((tokenizers_dir / "hf_unigram.json").read_text())
    assert manifest["tokenizer"]["unk_id"] == spec["model"]["unk_id"]


def test_shard_cardinality_and_record_layout(tmp_path, tokenizers_dir):
    import numpy as np

    rng = random.Random(4)
    write_jsonl(tmp_path / "data/in.jsonl", [{"q": sentence(rng, 1, 3), "a": sentence(rng, 1, 3)}
                                             for _ in range(40)])
    _build(tmp_path, tokenizers_dir, ["data/in.jsonl"], sizes=[[64]], samples_per_shard=[6])
    out = tmp_path / "out"
    shards = sorted((out / "unit_64").glob("shard_*.bin"))
    width = 1 + 4 + 64  # magic, 4 segment lengths ("Q: ", q, "\\nA: ", a), payload
    counts = [len(np.fromfile(s, dtype="<u2")) // width for s in shards]
    assert counts == [6] * 6 + [4]
    rows = [json.loads(l) for l in (out / "sample_index.jsonl").read_text().splitlines()]
    records = np.concatenate([np.fromfile(s, dtype="<u2").reshape(-1, width) for s in shards])
    assert (records[:, 0] == 65535).all()
    assert records[:, 1:5].sum(axis=1).tolist() == [r["token_count"] for r in rows]
    assert [r["shard_path"] for r in rows][6] == "unit_64/shard_000001.bin"


def test_a_bad_line_in_one_dataset_leaves_no_manifest_in_any(tmp_path, tokenizers_dir):
    write_jsonl(tmp_path / "data/a.jsonl", GOOD * 5)
    write_jsonl(tmp_path / "data/b.jsonl", GOOD * 5 + ["{broken"])
    with pytest.raises(errors.SourceParseError) as info:
        _build(tmp_path, tokenizers_dir, ["data/a.jsonl", "data/b.jsonl"], output=["o1", "o2"])
    assert "File: data/b.jsonl" in info.value.english and "Line: 11" in info.value.english
    for out in ("o1", "o2"):
        assert not (tmp_path / out / "manifest.json").exists()
        assert (tmp_path / out / "unit_8" / "UNIT_BUILD_FAILED.md").exists()
