"""`mintdim-beam report`: figures, plot data and ratios of real builds, recomputed here
independently from the build's own files."""
import csv
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import fsspec
import pytest

from conftest import IN_MEMORY, REPO, copy_to_memory_fs, run_build, sentence, write_jsonl
from mintdim_beam.audit.report import write_report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURES = ("samples_per_unit", "token_counts", "padding_per_unit", "unk_per_field")
GOLDEN_TRUNCATE = REPO / "tests/golden/overflow_truncate_multisegment/expected/out"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _corpus(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for i in range(60):
        q = sentence(rng, 0, 6)
        a = sentence(rng, 0, 14)
        if i % 7 == 0:
            a += " 😀 漢"  # characters the sp.model tokenizer maps to UNK
        if i % 5 == 0:
            q = "漢字 " + q
        if i % 11 == 0:
            a = sentence(rng, 40, 60)  # overflows max size 32
        rows.append(row := {"q": q, "a": a})
        if i % 9 == 0:
            rows.append(dict(row))  # an exact duplicate
        if i % 13 == 0:
            rows.append("  ")  # a blank line, no sample_id
    rows += [{"q": "hello world", "a": "the answer"}] * 3
    write_jsonl(path, rows)


def _build(workdir: Path, tokenizers_dir: Path, on_overflow: str, seed: int = 3) -> Path:
    (workdir / "tok").mkdir(parents=True, exist_ok=True)
    shutil.copy(tokenizers_dir / "sp.model", workdir / "tok/sp.model")
    _corpus(workdir / "data/in.jsonl", seed)
    run_build(workdir, files=["data/in.jsonl"], fields=[["q", "a"]], templates=["question {q} answer {a}"],
              tokenizer="sentencepiece", tokenizer_files=["tok/sp.model"], sizes=[[8, 16, 32]],
              build_batch=[8], output="out", samples_per_shard=[5], options=IN_MEMORY,
              on_overflow=on_overflow, on_template_unk="continue")
    return workdir / "out"


@pytest.fixture(scope="module")
def truncated_build(tmp_path_factory, tokenizers_dir) -> Path:
    return _build(tmp_path_factory.mktemp("report_truncate"), tokenizers_dir, "truncate")


@pytest.fixture(scope="module")
def skipped_build(tmp_path_factory, tokenizers_dir) -> Path:
    return _build(tmp_path_factory.mktemp("report_skip"), tokenizers_dir, "skip", seed=4)


def _expected(out: Path) -> dict:
    """The report's figures recomputed from scratch with plain json."""
    stats = json.loads((out / "stats.json").read_text())
    samples = _rows(out / "sample_index.jsonl")
    overflow = _rows(out / "overflow_index.jsonl")
    kept = {r["sample_id"]: r["token_count"] for r in samples}
    truncated = [r for r in overflow if r["action"] == "truncate"]
    cut = sum(r["token_count"] - kept[r["sample_id"]] for r in truncated)
    written_tokens = sum(r["token_count"] for r in samples)
    pad = sum(r["unit_size"] - r["token_count"] for r in samples)
    payload = sum(r["unit_size"] for r in samples)
    skipped = sum(r["action"] == "skip" for r in overflow)
    n = stats["total_samples"]
    return {
        "padding_ratio": pad / payload if payload else None,
        "truncation_ratio": cut / (written_tokens + cut) if written_tokens + cut else None,
        "tokens_cut": cut,
        "truncated_samples": len(truncated),
        "skipped_samples": skipped,
        "skip_rate": skipped / (len(samples) + skipped) if samples or skipped else None,
        "duplicate_rate": stats["duplicate_samples"] / n if n else None,
        "duplicate_groups": stats["duplicate_groups"],
        "unk_token_rate": stats["unk_tokens"] / stats["total_tokens"] if stats["total_tokens"] else None,
        "unk_sample_rate": stats["samples_with_unk"] / n if n else None,
    }


def _check_report(out: Path, dest: Path, result: dict) -> None:
    stats = json.loads((out / "stats.json").read_text())
    histogram = json.loads((out / "histogram.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    segments = json.loads((out / "length_field.json").read_text())["sequence_template"]

    for name in FIGURES:
        png = (dest / f"{name}.png").read_bytes()
        assert png.startswith(PNG_SIGNATURE) and len(png) > 1000, name
        assert (dest / f"{name}.csv").stat().st_size > 0, name
    assert not [p for p in dest.iterdir() if p.name.startswith("_")]  # no scratch left behind

    per_unit = _csv(dest / "samples_per_unit.csv")
    assert [int(r["unit_size"]) for r in per_unit] == manifest["units"]["sizes"]
    assert sum(int(r["samples"]) for r in per_unit) == stats["total_samples"]
    assert {r["unit_size"]: int(r["samples"]) for r in per_unit if int(r["samples"])} == histogram

    counts = _csv(dest / "token_counts.csv")
    assert sum(int(r["samples"]) for r in counts) == stats["total_samples"]
    assert sum(int(r["token_count"]) * int(r["samples"]) for r in counts) == stats["total_tokens"]
    assert counts == sorted(counts, key=lambda r: int(r["token_count"]))

    padding = _csv(dest / "padding_per_unit.csv")
    assert sum(int(r["tokens"]) for r in padding) == stats["total_tokens"]
    for row in padding:
        size, records, tokens, pad = (int(row[k]) for k in ("unit_size", "records", "tokens", "pad_slots"))
        assert pad == records * size - tokens
        if records:
            assert float(row["padding_fraction"]) == pytest.approx(pad / (records * size))
        else:
            assert row["padding_fraction"] == ""

    unk = _csv(dest / "unk_per_field.csv")
    assert sum(int(r["unk_tokens"]) for r in unk) == stats["unk_tokens"]
    assert [r["segment_name"] for r in unk] == segments
    by_index = Counter(i for r in _rows(out / "unk_index.jsonl") for i in r["unk_field_indices"])
    assert {int(r["segment_index"]): int(r["unk_tokens"]) for r in unk if int(r["unk_tokens"])} == by_index

    for key, value in _expected(out).items():
        assert result[key] == (pytest.approx(value) if isinstance(value, float) else value), key
    assert result["samples_per_unit"] == {int(k): v for k, v in
                                          ((r["unit_size"], int(r["samples"])) for r in per_unit)}
    assert result["consistency"] == []

    text = (dest / "report.md").read_text(encoding="utf-8")
    for name in FIGURES:
        assert f"]({name}.png)" in text and f"]({name}.csv)" in text, name
    assert manifest["tokenizer"]["path"] in text
    for source in manifest["source"]["files"]:
        assert source in text
    assert f"samples_per_shard: {manifest['output']['samples_per_shard']}" in text


def test_report_of_a_truncating_build_with_unks_and_duplicates(truncated_build):
    out = truncated_build
    stats = json.loads((out / "stats.json").read_text())
    # The corpus exercises every figure.
    assert stats["unk_tokens"] > 0 and stats["duplicate_groups"] > 0
    assert any(r["action"] == "truncate" for r in _rows(out / "overflow_index.jsonl"))
    result = write_report(str(out))
    dest = out / "report"
    assert result["dest"] == str(dest)
    _check_report(out, dest, result)
    assert 0 < result["truncation_ratio"] < 1 and result["skip_rate"] == 0
    assert result["unk_token_rate"] > 0 and result["duplicate_rate"] > 0
    text = (dest / "report.md").read_text(encoding="utf-8")
    total_pad = sum(int(r["pad_slots"]) for r in _csv(dest / "padding_per_unit.csv"))
    assert f"({total_pad:,} / " in text  # the padding ratio with its denominator


def test_report_of_a_skipping_build(skipped_build, tmp_path):
    out = skipped_build
    skipped = [r for r in _rows(out / "overflow_index.jsonl") if r["action"] == "skip"]
    assert skipped
    dest = tmp_path / "elsewhere"
    result = write_report(str(out), str(dest))
    _check_report(out, dest, result)
    stats = json.loads((out / "stats.json").read_text())
    assert result["skip_rate"] == len(skipped) / (stats["total_samples"] + len(skipped))
    assert result["truncation_ratio"] == 0 and result["tokens_cut"] == 0
    assert not (out / "report").exists()


def test_cli_report_exits_0_and_writes_into_out_report(skipped_build, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(skipped_build, out, ignore=shutil.ignore_patterns("report"))
    proc = subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "report", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert str(out / "report" / "report.md") in proc.stdout
    for name in FIGURES:
        assert (out / "report" / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
    proc = subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "report", str(out),
                           "--dest", str(tmp_path / "d")], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d" / "report.md").exists()


def test_cli_report_without_manifest_exits_1(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "stats.json").write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "report", str(tmp_path / "half")],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 1
    assert "manifest.json" in proc.stderr and "MintDimFileNotFoundError" in proc.stderr
    assert not (tmp_path / "half" / "report").exists()


def test_report_of_golden_truncate_output(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(GOLDEN_TRUNCATE, out)
    result = write_report(str(out))
    _check_report(out, out / "report", result)
    overflow = _rows(out / "overflow_index.jsonl")
    kept = {r["sample_id"]: r["token_count"] for r in _rows(out / "sample_index.jsonl")}
    max_size = max(json.loads((out / "manifest.json").read_text())["units"]["sizes"])
    assert overflow and all(r["action"] == "truncate" for r in overflow)
    assert all(kept[r["sample_id"]] == max_size for r in overflow)  # truncated to max(sizes)
    cut = sum(r["token_count"] - max_size for r in overflow)
    total_tokens = json.loads((out / "stats.json").read_text())["total_tokens"]
    assert result["tokens_cut"] == cut
    assert result["truncation_ratio"] == cut / (total_tokens + cut)
    assert result["truncated_samples_cut_ratio"] == cut / sum(r["token_count"] for r in overflow)
    assert f"({cut:,} / {total_tokens + cut:,})" in (out / "report/report.md").read_text()
    # Unit 16 received no record: it is listed with 0 and no padding fraction.
    assert result["samples_per_unit"][16] == 0 and result["units"][0]["padding_fraction"] is None


def test_report_reads_and_writes_fsspec_urls():
    fs = fsspec.filesystem("memory")
    base = "memory://report_test/out"
    copy_to_memory_fs(GOLDEN_TRUNCATE, base)
    try:
        result = write_report(base)
        assert result["dest"] == f"{base}/report"
        for name in FIGURES:
            assert fs.cat(f"{base}/report/{name}.png").startswith(PNG_SIGNATURE)
        assert b"samples_per_unit.png" in fs.cat(f"{base}/report/report.md")
        assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{base}/report", detail=False)) == sorted(
            [f"{n}.{e}" for n in FIGURES for e in ("png", "csv")] + ["report.md"])
    finally:
        fs.rm("memory://report_test", recursive=True)
