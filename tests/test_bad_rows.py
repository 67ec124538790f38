"""`on_bad_row`: rows that cannot become samples, left out and accounted for (`skip`), or
the build stopped with every bad row named (`abort`, the default).

The proof of dense, runner-independent ids: a corpus with bad rows built under `skip`
gives the same shards and indices, byte for byte, as its clean twin (the bad lines made
blank: blank lines take no sample id and keep every line number) built under `abort`.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from conftest import (IN_MEMORY, MULTI_PROCESS, byte_level_bpe, cli, read_tree, sentence,
                      write_jsonl)
from mintdim_beam import errors, pipeline

TEMPLATE = "question {q} answer {a}"
LONG = 1000  # --max_line_bytes of these builds
# line number (1-based) -> (the bad line, the error class it is rejected with)
BAD = {
    4: (b'{"q": "x", ', "SourceParseError"),
    9: (b"[1, 2]", "SourceParseError"),
    15: (b'{"q": "only a question"}', "SampleSchemaError"),
    24: (b'{"q": null, "a": "y"}', "SampleSchemaError"),
    30: (b'{"q": "\xff\xfe", "a": "z"}', "SourceParseError"),
    37: (b'{"q": "' + b"long " * 300 + b'", "a": "b"}', "SourceParseError"),
    41: (b'{"q": "\\ud800", "a": "lone surrogate"}', "SourceParseError"),
}
ROWS = 70  # good rows; the bad ones sit between them


def _lines(rng, clean: bool) -> list[bytes]:
    out, good = [], iter([json.dumps({"q": sentence(rng, 2, 9), "a": sentence(rng, 1, 12)})
                          .encode() for _ in range(ROWS)])
    while len(out) < ROWS + len(BAD):
        line = len(out) + 1
        out.append((b"" if clean else BAD[line][0]) if line in BAD else next(good))
    return out


def _corpus(work: Path, tokenizers_dir: Path, clean: bool) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(tokenizers_dir / "hf_bpe.json", work / "tok.json")
    (work / "data.jsonl").write_bytes(b"\n".join(_lines(random.Random(5), clean)) + b"\n")
    return work


def _job(out="out"):
    return (pipeline("unit-build")
            .source.jsonl(files=["data.jsonl"], fields=[["q", "a"]], templates=[TEMPLATE])
            .tokenizer.hf_json(files=["tok.json"])
            .units(sizes=[[8, 16, 32]], build_batch=[6])
            .output.dir(out, samples_per_shard=[10]))


def _build(work: Path, options=IN_MEMORY, out="out", **policy) -> dict:
    previous = os.getcwd()
    os.chdir(work)
    try:
        return _job(out).run(on_overflow="truncate", on_template_unk="abort",
                             pipeline_options=list(options) + [f"--max_line_bytes={LONG}"],
                             **policy)
    finally:
        os.chdir(previous)


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "rejected_index.jsonl").read_text().splitlines()]


def _ours_aside(tree: dict) -> dict:
    """The build's files but the two that say it skipped rows."""
    return {k: v for k, v in tree.items() if k not in ("manifest.json", "rejected_index.jsonl")}


@pytest.fixture(scope="module")
def clean_build(tmp_path_factory, tokenizers_dir) -> Path:
    work = _corpus(tmp_path_factory.mktemp("clean"), tokenizers_dir, clean=True)
    _build(work)
    return work / "out"


@pytest.fixture(scope="module")
def skipped_build(tmp_path_factory, tokenizers_dir) -> Path:
    work = _corpus(tmp_path_factory.mktemp("bad"), tokenizers_dir, clean=False)
    result = _build(work, on_bad_row="skip", max_rejected=0.2)
    assert result["outputs"][0]["rejected_rows"] == len(BAD)
    return work / "out"


def test_skip_gives_the_clean_twins_bytes_and_lists_every_bad_row(skipped_build, clean_build):
    assert _ours_aside(read_tree(skipped_build)) == _ours_aside(read_tree(clean_build))
    rows = _rows(skipped_build)
    assert [(r["source_file"], r["source_line"], r["error"]) for r in rows] == [
        ("data.jsonl", line, cls) for line, (_, cls) in sorted(BAD.items())]
    reasons = {r["source_line"]: r["reason"] for r in rows}
    assert "invalid JSON syntax" in reasons[4] and "not a JSON object" in reasons[9]
    assert "missing field(s) a" in reasons[15] and "'q' is null" in reasons[24]
    assert "invalid UTF-8" in reasons[30] and f"--max_line_bytes {LONG}" in reasons[37]
    assert "surrogate" in reasons[41] and all("\n" not in r for r in reasons.values())
    manifest = json.loads((skipped_build / "manifest.json").read_text())
    assert manifest["rejected"] == len(BAD)
    assert manifest["bad_rows"] == {"on_bad_row": "skip", "max_rejected": 0.2,
                                    "rows": ROWS + len(BAD)}
    ids = [json.loads(x)["sample_id"] for x in
           (skipped_build / "sample_index.jsonl").read_text().splitlines()]
    assert sorted(ids) == list(range(ROWS))  # dense over the rows kept
    assert "rejected" not in json.loads((clean_build / "manifest.json").read_text())
    assert not (clean_build / "rejected_index.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["multi_process", "portable"])
def test_skip_gives_the_same_bytes_on_every_runner(tmp_path, tokenizers_dir, skipped_build,
                                                   runner, request):
    options = (MULTI_PROCESS + ["--input_range_bytes=333"] if runner == "multi_process"
               else request.getfixturevalue("portable_flags") + ["--input_range_bytes=500"])
    work = _corpus(tmp_path, tokenizers_dir, clean=False)
    _build(work, options, on_bad_row="skip", max_rejected=0.2)
    mine, first = read_tree(work / "out"), read_tree(skipped_build)
    assert _ours_aside(mine) == _ours_aside(first)
    assert mine["rejected_index.jsonl"] == first["rejected_index.jsonl"]


def test_verify_and_report_read_the_rejected_rows(skipped_build, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(skipped_build, copy)
    ok = cli(tmp_path, "verify", "out")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = cli(tmp_path, "report", "out")
    assert report.returncode == 0, report.stderr
    text = (copy / "report" / "report.md").read_text()
    assert "## Rejected rows" in text and f"{len(BAD)} of {ROWS + len(BAD)} rows" in text
    assert "| data.jsonl | 4 | SourceParseError | invalid JSON syntax" in text
    shutil.rmtree(copy / "report")
    lines = (copy / "rejected_index.jsonl").read_text().splitlines(keepends=True)
    (copy / "rejected_index.jsonl").write_text("".join(lines[1:]))  # a row lost
    bad = cli(tmp_path, "verify", "out")
    assert bad.returncode != 0
    assert f"{len(BAD) - 1} rows but manifest.json counts {len(BAD)} rejected" in bad.stdout
    (copy / "rejected_index.jsonl").write_text("".join(reversed(lines)))  # out of order
    assert "is not after the row before it" in cli(tmp_path, "verify", "out").stdout
    # a good line listed as rejected: --deep reads it again (inputs from the build's dir)
    forged = "".join([lines[0].replace('"source_line": 4', '"source_line": 5')] + lines[1:])
    (copy / "rejected_index.jsonl").write_text(forged)
    manifest = json.loads((copy / "manifest.json").read_text())  # its sum made to agree
    manifest["checksums"]["files"]["rejected_index.jsonl"] = {
        "bytes": len(forged.encode()), "sha256": hashlib.sha256(forged.encode()).hexdigest()}
    (copy / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2))
    deep = cli(skipped_build.parent, "verify", str(copy), "--deep")
    assert "data.jsonl line 5 is listed as rejected but reads and renders as a sample" in \
        deep.stdout, deep.stdout


def test_abort_raises_the_first_and_names_the_others(tmp_path, tokenizers_dir):
    work = _corpus(tmp_path, tokenizers_dir, clean=False)
    with pytest.raises(errors.SourceParseError) as info:
        _build(work)
    assert info.value.kwargs["line"] == 4
    (note,) = info.value.__notes__
    assert f"found {len(BAD) - 1} more bad row(s)" in note
    assert "data.jsonl:9: SourceParseError: JSONL row is not a JSON object" in note
    assert "... and 1 more" in note and "on_bad_row: skip" in note
    assert not (work / "out" / "manifest.json").exists()


def test_more_bad_rows_than_max_rejected_stop_the_build(tmp_path, tokenizers_dir):
    work = _corpus(tmp_path, tokenizers_dir, clean=False)
    with pytest.raises(errors.TooManyRejectedError) as info:
        _build(work, on_bad_row="skip")  # default max_rejected: 1% of the rows
    kwargs = info.value.kwargs
    assert (kwargs["rejected"], kwargs["rows"], kwargs["max_rejected"]) == (
        len(BAD), ROWS + len(BAD), 0.01)
    assert kwargs["first"][0].startswith("data.jsonl:4: SourceParseError")
    assert "Quá nhiều dòng" in info.value.vietnamese
    assert not (work / "out" / "manifest.json").exists()
    assert not (work / "out" / "rejected_index.jsonl").exists()


@pytest.mark.parametrize("policy, problem", [
    ({"on_bad_row": "skipp"}, "Key: on_bad_row"),
    ({"on_bad_row": "skip", "max_rejected": 2}, "Key: max_rejected"),
    ({"on_bad_row": "skip", "max_rejected": "1%"}, "Key: max_rejected"),
])
def test_a_bad_policy_is_a_config_error_before_any_output(tmp_path, tokenizers_dir, policy,
                                                          problem):
    work = _corpus(tmp_path, tokenizers_dir, clean=True)
    with pytest.raises(errors.ConfigValueError) as info:
        _build(work, **policy)
    assert problem in str(info.value) and "Invalid config value" in str(info.value)
    if policy["on_bad_row"] == "skipp":
        assert info.value.kwargs["suggestion"] == "skip"
    assert not (work / "out").exists()


def test_the_config_key_and_the_flag(tmp_path, tokenizers_dir):
    work = _corpus(tmp_path, tokenizers_dir, clean=False)
    config = json.loads(json.dumps(_job("out")._raw))
    config.update(on_overflow="truncate", on_template_unk="abort", on_bad_row="skip",
                  max_rejected=0.01)
    (work / "build.json").write_text(json.dumps(config))
    refused = cli(work, "build", "build.json", f"--max_line_bytes={LONG}")
    assert refused.returncode != 0 and "TooManyRejectedError" in refused.stderr
    shutil.rmtree(work / "out")
    done = cli(work, "build", "build.json", "--max_rejected", "0.5", f"--max_line_bytes={LONG}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"][0]["rejected_rows"] == len(BAD)
    config["on_bad_row"] = "abort"
    (work / "abort.json").write_text(json.dumps({**config, "output": {
        "dir": "out2", "samples_per_shard": [10]}}))
    stopped = cli(work, "build", "abort.json", f"--max_line_bytes={LONG}")
    assert stopped.returncode == 1 and f"found {len(BAD) - 1} more bad row(s)" in stopped.stderr


def test_deeply_nested_json_is_a_parse_error_at_its_line(tmp_path, tokenizers_dir):
    work = _corpus(tmp_path, tokenizers_dir, clean=True)
    lines = (work / "data.jsonl").read_bytes().split(b"\n")
    lines[2] = b"[" * 200_000 + b"]" * 200_000
    (work / "data.jsonl").write_bytes(b"\n".join(lines))
    previous = os.getcwd()
    os.chdir(work)
    try:
        with pytest.raises(errors.SourceParseError) as info:
            _job().run(on_overflow="truncate", on_template_unk="abort",
                       pipeline_options=list(IN_MEMORY))
    finally:
        os.chdir(previous)
    assert info.value.kwargs["line"] == 3 and "nested too deeply" in info.value.kwargs["reason"]


# --- chat and pack-build ---------------------------------------------------------------

CHAT_BAD = {
    3: {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}]},
    6: {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                     {"role": "assistant", "content": "c"}]},
    10: {"conversation": []},
}


def test_skip_leaves_out_messy_dialogues(tmp_path, tokenizers_dir):
    from test_chat_pipeline import SPECIALS, dialogue
    from test_chat_pipeline import sentence as chat_sentence

    rng = random.Random(7)
    tok = tmp_path / "tok"
    tok.mkdir()
    byte_level_bpe(tok, [chat_sentence(rng, 5, 20) for _ in range(800)], SPECIALS, 500, {
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    rows = [{"messages": dialogue(rng, 1 + i % 2, i % 3 == 0)} for i in range(24)]
    trees = {}
    for name, clean in (("bad", False), ("clean", True)):
        good = iter(rows)
        lines = [("" if clean else json.dumps(CHAT_BAD[n])) if n in CHAT_BAD
                 else json.dumps(next(good)) for n in range(1, len(rows) + len(CHAT_BAD) + 1)]
        (tmp_path / name).mkdir()
        (tmp_path / name / "chat.jsonl").write_text("\n".join(lines) + "\n")
        previous = os.getcwd()
        os.chdir(tmp_path / name)
        try:
            (pipeline("unit-build")
             .source.chat(files=["chat.jsonl"], format="messages", chat_template="chatml",
                          max_turns=2)
             .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                                config=str(tok / "tokenizer_config.json"))
             .units(sizes=[[32, 64, 128]], build_batch=[5])
             .output.dir("out", samples_per_shard=[8])
             .run(on_overflow="truncate", on_template_unk="abort",
                  on_bad_row="skip" if not clean else "abort", max_rejected=0.2,
                  pipeline_options=list(IN_MEMORY)))
        finally:
            os.chdir(previous)
        trees[name] = read_tree(tmp_path / name / "out")
    assert _ours_aside(trees["bad"]) == _ours_aside(trees["clean"])
    rejected = [json.loads(x) for x in trees["bad"]["rejected_index.jsonl"].splitlines()]
    assert [(r["source_line"], r["error"]) for r in rejected] == [
        (3, "SampleSchemaError"), (6, "SampleSchemaError"), (10, "SampleSchemaError")]
    assert "assistant" in rejected[0]["reason"] and "messages" in rejected[2]["reason"]


def test_pack_build_skips_bad_rows_like_the_clean_twin(tmp_path, tokenizers_dir):
    from test_pack import EOT, IM_END, _train_bpe

    (tmp_path / "tok").mkdir()
    tok = _train_bpe(tmp_path / "tok", {"eos_token": IM_END})
    outs = {}
    for name, clean in (("bad", False), ("clean", True)):
        work = tmp_path / name
        work.mkdir()
        shutil.copytree(tok, work / "tok")
        (work / "data.jsonl").write_bytes(b"\n".join(_lines(random.Random(9), clean)) + b"\n")
        previous = os.getcwd()
        os.chdir(work)
        try:
            (pipeline("pack-build")
             .source.jsonl(files=["data.jsonl"], fields=[["q", "a"]], templates=[TEMPLATE])
             .tokenizer.hf_json(files=["tok/tokenizer.json"], config="tok/tokenizer_config.json")
             .pack(eod=EOT, seed=3, shard_tokens=400).output.dir("out")
             .run(pipeline_options=list(IN_MEMORY) + [f"--max_line_bytes={LONG}"],
                  **({} if clean else {"on_bad_row": "skip", "max_rejected": 0.2})))
        finally:
            os.chdir(previous)
        outs[name] = work / "out"
    bad, clean = read_tree(outs["bad"]), read_tree(outs["clean"])
    shards = [k for k in clean if k.endswith((".bin", ".idx"))]
    assert shards and all(bad[k] == clean[k] for k in shards)
    rows = [json.loads(x) for x in bad["rejected_index.jsonl"].splitlines()]
    assert [(r["source_line"], r["error"]) for r in rows] == [
        (line, cls) for line, (_, cls) in sorted(BAD.items())]
    manifest = json.loads(bad["manifest.json"])
    assert manifest["rejected"] == len(BAD) and manifest["documents"] == ROWS
    verified = cli(outs["bad"].parent, "verify", "out")
    assert verified.returncode == 0, verified.stdout
    assert cli(outs["bad"].parent, "report", "out").returncode == 0
    assert "## Rejected rows" in (outs["bad"] / "report" / "report.md").read_text()


def test_a_parquet_row_is_rejected_by_its_row_number(tmp_path, tokenizers_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(3)
    rows = [{"q": sentence(rng, 2, 6), "a": sentence(rng, 1, 6)} for _ in range(30)]
    rows[6]["a"], rows[19]["q"] = None, None
    shutil.copy(tokenizers_dir / "hf_bpe.json", tmp_path / "tok.json")
    # Parquet under the corpus's usual name: inputs are told apart by their first bytes
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data.jsonl", row_group_size=8)
    _build(tmp_path, MULTI_PROCESS + ["--input_range_bytes=1"], on_bad_row="skip",
           max_rejected=0.1)
    assert [(r["source_file"], r["source_line"], r["error"]) for r in _rows(tmp_path / "out")] == [
        ("data.jsonl", 7, "SampleSchemaError"), ("data.jsonl", 20, "SampleSchemaError")]
    kept = [json.loads(x) for x in (tmp_path / "out/sample_index.jsonl").read_text().splitlines()]
    assert sorted(r["sample_id"] for r in kept) == list(range(28))
    assert sorted(r["source_line"] for r in kept) == [n for n in range(1, 31) if n not in (7, 20)]
