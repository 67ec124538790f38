"""`mintdim-beam verify`: clean on real builds and on every golden output, and each kind of
damage is caught and named (file, record or line, what)."""
import hashlib
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import pytest

from conftest import REPO, copy_to_memory_fs, run_build, sentence, without_checksums, write_jsonl
from mintdim_beam import cli
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.audit.verify_result import Problem, VerifyResult
from mintdim_beam.core import errors
from mintdim_beam.core.formats import mintdim as fmt

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_OUTPUTS = sorted(p for p in GOLDEN.glob("*/expected/*") if p.is_dir())
SIZES = [8, 16, 32]
PER_SHARD = 4
TEMPLATE = "question {q} answer {a}"  # literals free of UNK for the tiny model
N_SEGMENTS = 4  # "question ", q, " answer ", a


def _rows(n: int, seed: int = 3):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a = sentence(rng, 40, 60) if i % 19 == 5 else sentence(rng, 0, 25)  # 40+: truncated
        if i % 7 == 0:
            a += " 😀 漢"  # UNK for the tiny SentencePiece model
        rows.append({"q": sentence(rng, 0, 6), "a": a})
        if i % 11 == 0:
            rows.append({"q": "hello world", "a": "the answer"})  # duplicates
    return rows


def _build(workdir: Path, tokenizers_dir: Path, rows, out: str = "out", on_overflow="truncate"):
    (workdir / "tok").mkdir(parents=True, exist_ok=True)
    (workdir / "tok/sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    write_jsonl(workdir / "data/in.jsonl", rows)
    run_build(workdir, files=["data/in.jsonl"], fields=[["q", "a"]], templates=[TEMPLATE],
              tokenizer="sentencepiece", tokenizer_files=["tok/sp.model"], sizes=[SIZES],
              build_batch=[16], output=out, samples_per_shard=[PER_SHARD],
              on_overflow=on_overflow, on_template_unk="continue")
    return workdir / out


@pytest.fixture(scope="module")
def built(tmp_path_factory, tokenizers_dir) -> Path:
    """One real build, several shards per unit, UNKs, duplicates and truncated samples."""
    return _build(tmp_path_factory.mktemp("verify_build"), tokenizers_dir, _rows(160))


@pytest.fixture
def out(built, tmp_path) -> Path:
    """A private copy of the build to damage."""
    copy = tmp_path / "out"
    shutil.copytree(built, copy)
    return without_checksums(copy)  # the structural checks alone


def _index(out: Path, name=fmt.SAMPLE_INDEX):
    return [json.loads(line) for line in (out / name).read_text("utf-8").splitlines()]


def _cli(out: Path, capsys) -> tuple[int, str]:
    code = cli.main(["verify", str(out)])
    return code, capsys.readouterr().out


def _only(result: VerifyResult, file: str) -> list[Problem]:
    return [p for p in result.problems if p.file == file]


def _shard_with_records(out: Path, unit: int, at_least: int = 2) -> Path:
    width = (1 + N_SEGMENTS + unit) * 2
    for shard in sorted((out / fmt.unit_dir(unit)).glob("shard_*.bin")):
        if shard.stat().st_size >= at_least * width:
            return shard
    raise AssertionError(f"no shard of unit_{unit} with {at_least} records")


# ------------------------------------------------------------------ clean builds

def test_fresh_build_verifies_with_counts(built):
    stats = json.loads((built / fmt.STATS).read_text())
    assert 0 < stats["samples_with_unk"] < stats["total_samples"]
    assert stats["duplicate_groups"] > 0
    assert json.loads((built / fmt.OVERFLOW_INDEX).read_text().splitlines()[0])["action"] == "truncate"
    for unit in SIZES[:3]:  # the build is what the damage tests need: several shards a unit
        assert len(list((built / fmt.unit_dir(unit)).glob("shard_*.bin"))) >= 3
    result = verify_output(str(built))
    assert result.ok, [str(p) for p in result.problems]
    assert result.problems == [] and result.problem_count == 0
    assert result.records == result.samples == stats["total_samples"]
    assert result.tokens == stats["total_tokens"]
    assert result.units == len(SIZES)
    assert result.shards == len(list(built.glob("unit_*/shard_*.bin")))


def test_cli_exits_0_with_a_one_line_summary(built):
    proc = subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "verify", str(built)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    # the summary, then the inputs the build came from (run from another directory
    # here, so its relative input path is not found: informational, still exit 0)
    assert lines[1:] == ["  input data/in.jsonl: not found (relative paths are looked up "
                         "from the current directory)"]
    stats = json.loads((built / fmt.STATS).read_text())
    assert f"{stats['total_samples']} records" in lines[0] and " shards" in lines[0]
    assert f"{len(SIZES)} units" in lines[0] and lines[0].endswith(" s")


@pytest.mark.parametrize("golden", GOLDEN_OUTPUTS,
                         ids=[str(p.relative_to(GOLDEN)) for p in GOLDEN_OUTPUTS])
def test_every_golden_output_verifies(golden):
    result = verify_output(str(golden))
    assert result.ok, [str(p) for p in result.problems]
    assert result.records == json.loads((golden / fmt.STATS).read_text())["total_samples"]


def test_golden_outputs_are_all_found():
    assert len(GOLDEN_OUTPUTS) >= 25


def test_verify_reads_fsspec_urls(built):
    fs = fsspec.filesystem("memory")
    root = "/verify_url_case"
    copy_to_memory_fs(built, f"memory://{root}")
    try:
        result = verify_output(f"memory://{root}")
        assert result.ok, [str(p) for p in result.problems]
        # the same damage as test_flipped_magic, through the non-mmap path
        rel = _shard_with_records(built, 16).relative_to(built).as_posix()
        data = bytearray(fs.cat_file(f"{root}/{rel}"))
        width = (1 + N_SEGMENTS + 16) * 2
        data[width:width + 2] = (7).to_bytes(2, "little")
        fs.pipe(f"{root}/{rel}", bytes(data))
        problems = _only(verify_output(f"memory://{root}"), rel)
        assert [(p.record, "magic" in p.what) for p in problems] == [(None, False), (1, True)]
        assert problems[0].what.startswith("content changed: sha256")
    finally:
        fs.rm(root, recursive=True)


# ------------------------------------------------------------------ damage

def test_flipped_magic(out, capsys):
    shard = _shard_with_records(out, 16)
    data = np.fromfile(shard, dtype="<u2")
    data[1 + N_SEGMENTS + 16] = 12  # record 1, slot 0
    data.tofile(shard)
    rel = shard.relative_to(out).as_posix()
    result = verify_output(str(out))
    assert not result.ok
    problems = _only(result, rel)
    assert len(problems) == 1
    assert problems[0].record == 1
    assert "slot 0 is 12, not the magic 65535" in problems[0].what
    code, text = _cli(out, capsys)
    assert code == 1 and rel in text and "magic" in text


def test_truncated_shard(out, capsys):
    shard = _shard_with_records(out, 32)
    data = shard.read_bytes()
    shard.write_bytes(data[:-3])
    rel = shard.relative_to(out).as_posix()
    result = verify_output(str(out))
    problems = _only(result, rel)
    assert problems, [str(p) for p in result.problems]
    assert "is not a whole number of records" in problems[0].what
    assert f"size {len(data) - 3} bytes" in problems[0].what
    code, text = _cli(out, capsys)
    assert code == 1 and rel in text and "whole number of records" in text


def test_shard_copied_from_another_unit(out, capsys):
    source, target = out / fmt.shard_name(16, 0), out / fmt.shard_name(32, 0)
    shutil.copyfile(source, target)
    rel = fmt.shard_name(32, 0)
    result = verify_output(str(out))
    problems = _only(result, rel)
    assert problems, [str(p) for p in result.problems]
    assert "not a whole number of records" in problems[0].what
    assert "looks like a shard of unit_16" in problems[0].what
    # and the rows of unit_32 no longer find their records
    assert any(p.file == fmt.SAMPLE_INDEX and "unit_32" in p.what for p in result.problems)
    code, text = _cli(out, capsys)
    assert code == 1 and rel in text


def test_shard_copied_over_a_unit_whose_width_it_divides(tmp_path, tokenizers_dir):
    """unit_8 records are 13 slots, unit_21 ones 26: the copy passes the size check and is
    caught by its contents (a magic where a pad or token belongs) and the row join."""
    rng = random.Random(4)
    rows = [{"q": sentence(rng, 0, 2), "a": sentence(rng, 0, 12)} for _ in range(80)]
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok/sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    write_jsonl(tmp_path / "data/in.jsonl", rows)
    run_build(tmp_path, files=["data/in.jsonl"], fields=[["q", "a"]],
              templates=[TEMPLATE], tokenizer="sentencepiece",
              tokenizer_files=["tok/sp.model"], sizes=[[8, 21, 64]], build_batch=[16],
              output="out", samples_per_shard=[4], on_overflow="truncate",
              on_template_unk="continue")
    out = tmp_path / "out"
    assert verify_output(str(out)).ok
    shutil.copyfile(out / fmt.shard_name(8, 0), out / fmt.shard_name(21, 0))
    rel = fmt.shard_name(21, 0)
    result = verify_output(str(out))
    whats = " | ".join(p.what for p in _only(result, rel))
    assert "not pad_id" in whats or "not below vocab_size" in whats, whats
    assert "looks like a shard of unit_8" in whats
    assert any(p.file == fmt.SAMPLE_INDEX and "unit_21" in p.what for p in result.problems)


def test_deleted_sample_index_line(out, capsys):
    lines = (out / fmt.SAMPLE_INDEX).read_text("utf-8").splitlines(keepends=True)
    gone = json.loads(lines[20])
    unit = gone["unit_size"]
    records = sum(1 for line in lines if json.loads(line)["unit_size"] == unit)
    (out / fmt.SAMPLE_INDEX).write_text("".join(lines[:20] + lines[21:]), "utf-8")
    result = verify_output(str(out))
    whats = [p.what for p in _only(result, fmt.SAMPLE_INDEX)]
    assert f"unit_{unit} has {records - 1} sample_index rows but {records} records in its shards" in whats
    # the record left without a row is named too, in its shard
    assert any("has no sample_index.jsonl row" in p.what and p.file.startswith(f"unit_{unit}/")
               for p in result.problems)
    assert any(p.file == fmt.STATS and "total_samples" in p.what for p in result.problems)
    code, text = _cli(out, capsys)
    assert code == 1 and fmt.SAMPLE_INDEX in text


def test_edited_token_count_in_sample_index(out, capsys):
    lines = (out / fmt.SAMPLE_INDEX).read_text("utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if json.loads(line)["token_count"] >= 12)
    row = json.loads(lines[at])
    row["token_count"] -= 1
    lines[at] = fmt.jsonl_row(row)
    (out / fmt.SAMPLE_INDEX).write_text("".join(lines), "utf-8")
    result = verify_output(str(out))
    problems = [p for p in _only(result, fmt.SAMPLE_INDEX) if "segment lengths" in p.what]
    assert len(problems) == 1
    assert problems[0].record == at + 1  # 1-based line
    assert problems[0].what.startswith(f"token_count {row['token_count']} but its record")
    assert f"summing to {row['token_count'] + 1}" in problems[0].what
    code, text = _cli(out, capsys)
    assert code == 1 and f"{fmt.SAMPLE_INDEX} (line {at + 1})" in text


def test_edited_stats_total_tokens(out, capsys):
    stats = json.loads((out / fmt.STATS).read_text())
    right = stats["total_tokens"]
    stats["total_tokens"] = right + 5
    (out / fmt.STATS).write_text(fmt.json_document(stats), "utf-8")
    result = verify_output(str(out))
    assert [(p.file, p.record, p.what) for p in result.problems] == [
        (fmt.STATS, None, f"total_tokens is {right + 5} but the sum of sample_index.jsonl "
                          f"token_count gives {right}")]
    code, text = _cli(out, capsys)
    assert code == 1 and "stats.json: total_tokens" in text


@pytest.mark.parametrize("leftover,named", [
    ("_mintdim_tmp/x.tmp", "_mintdim_tmp"),
    ("unit_16/abc.tmp", "unit_16/abc.tmp"),
    ("abc.tmp", "abc.tmp"),
])
def test_leftover_temporary_file(out, capsys, leftover, named):
    (out / leftover).parent.mkdir(parents=True, exist_ok=True)
    (out / leftover).write_bytes(b"partial")
    result = verify_output(str(out))
    assert [p.file for p in result.problems] == [named]
    assert "temporary" in result.problems[0].what
    if named == "_mintdim_tmp":
        assert "_mintdim_tmp/x.tmp" in result.problems[0].what
    code, text = _cli(out, capsys)
    assert code == 1 and named in text


def test_empty_tmp_dir_and_unexpected_files(out):
    (out / "_mintdim_tmp").mkdir()
    (out / "notes.txt").write_text("x")
    (out / "unit_16/extra.bin").write_bytes(b"")
    (out / "report").mkdir()
    (out / "report/report.md").write_text("# report")  # allowed: `mintdim-beam report`
    files = sorted(p.file for p in verify_output(str(out)).problems)
    assert files == ["_mintdim_tmp", "notes.txt", "unit_16/extra.bin"]


def test_unit_directory_not_in_manifest(out):
    shutil.copytree(out / "unit_16", out / "unit_20")
    problems = verify_output(str(out)).problems
    assert [(p.file, "not listed in manifest.json units.sizes" in p.what) for p in problems] == [
        ("unit_20", True)]


def test_empty_unit_notice_must_match_shards(out):
    (out / fmt.unit_dir(16) / fmt.EMPTY_UNIT).write_text(fmt.empty_unit_notice(16))
    problems = verify_output(str(out)).problems
    assert [p.file for p in problems] == [f"unit_16/{fmt.EMPTY_UNIT}"]


def test_shard_name_must_be_the_one_the_build_writes(out):
    """`shard_0000001.bin` is shard 1 by number but not by name: it is not that shard."""
    (out / fmt.shard_name(16, 1)).rename(out / "unit_16/shard_0000001.bin")
    problems = verify_output(str(out)).problems
    assert ("unit_16/shard_0000001.bin", "unexpected file in unit_16/") in [
        (p.file, p.what) for p in problems]
    assert any(p.file == fmt.shard_name(16, 1) and "numbered 0.." in p.what for p in problems)


def test_shard_numbers_past_six_digits_are_shard_names(out):
    """`fmt.shard_name` writes 7 digits from shard 1,000,000 on: such a file is a shard
    (here one out of sequence), not an unexpected file."""
    (out / fmt.shard_name(16, 1)).rename(out / fmt.shard_name(16, 1_000_000))
    problems = [(p.file, p.what) for p in verify_output(str(out)).problems]
    assert "unit_16/shard_1000000.bin" == fmt.shard_name(16, 1_000_000)
    assert not any("unexpected" in what for _, what in problems)
    assert any(file == fmt.shard_name(16, 1) and "numbered 0.." in what
               for file, what in problems)


def test_gap_in_shard_numbering(out):
    (out / fmt.shard_name(16, 1)).unlink()
    result = verify_output(str(out))
    gap = [p for p in result.problems if p.file == fmt.shard_name(16, 1)]
    assert gap and "numbered 0.." in gap[0].what


def test_short_middle_shard(out):
    shard = out / fmt.shard_name(16, 0)
    width = (1 + N_SEGMENTS + 16) * 2
    shard.write_bytes(shard.read_bytes()[:-width])  # drop its last whole record
    problems = _only(verify_output(str(out)), fmt.shard_name(16, 0))
    assert problems and f"holds {PER_SHARD - 1} records" in problems[0].what


def test_unk_position_that_is_not_unk(out):
    rows = _index(out, fmt.UNK_INDEX)
    samples = {r["sample_id"]: r for r in _index(out)}
    at = next(i for i, r in enumerate(rows)
              if r["unk_positions"][0] > 0 and r["unk_positions"][0] - 1 not in r["unk_positions"])
    rows[at]["unk_positions"][0] -= 1
    assert rows[at]["unk_positions"][0] < samples[rows[at]["sample_id"]]["token_count"]
    (out / fmt.UNK_INDEX).write_text("".join(fmt.jsonl_row(r) for r in rows), "utf-8")
    problems = _only(verify_output(str(out)), fmt.UNK_INDEX)
    assert any(p.record == at + 1 and "not unk_id" in p.what for p in problems), problems


def test_unk_token_in_payload_without_unk_row(out):
    samples = _index(out)
    unk_ids = {r["sample_id"] for r in _index(out, fmt.UNK_INDEX)}
    manifest = json.loads((out / fmt.MANIFEST).read_text())
    unk_id = manifest["tokenizer"]["unk_id"]
    # the k-th row of a unit is record k % S of shard k // S
    per_unit: dict = {}
    for row in samples:
        k = per_unit.setdefault(row["unit_size"], 0)
        per_unit[row["unit_size"]] += 1
        if row["sample_id"] not in unk_ids and row["token_count"] > 0:
            break
    assert row["sample_id"] not in unk_ids
    unit, shard = row["unit_size"], out / row["shard_path"]
    data = np.fromfile(shard, dtype="<u2")
    data[(k % PER_SHARD) * (1 + N_SEGMENTS + unit) + 1 + N_SEGMENTS] = unk_id
    data.tofile(shard)
    problems = _only(verify_output(str(out)), row["shard_path"])
    assert [(p.record, "unk_id" in p.what) for p in problems] == [(k % PER_SHARD, True)]


def test_duplicate_member_with_a_wrong_hash(out):
    groups = _index(out, fmt.DUPLICATE_INDEX)
    groups[0]["hash"] = "0" * 64
    (out / fmt.DUPLICATE_INDEX).write_text("".join(fmt.jsonl_row(g) for g in groups), "utf-8")
    problems = _only(verify_output(str(out)), fmt.DUPLICATE_INDEX)
    assert problems and problems[0].record == 1 and "not the group's" in problems[0].what


def test_histogram_disagreeing_with_shards(out):
    histogram = json.loads((out / fmt.HISTOGRAM).read_text())
    histogram["16"] += 1
    (out / fmt.HISTOGRAM).write_text(fmt.json_document(histogram), "utf-8")
    problems = verify_output(str(out)).problems
    assert [p.file for p in problems] == [fmt.HISTOGRAM] and "'16'" in problems[0].what


def test_record_counts_must_be_ints(out):
    """59.0 == 59 in Python, but a float is not the count the build writes."""
    histogram = json.loads((out / fmt.HISTOGRAM).read_text())
    (out / fmt.HISTOGRAM).write_text(fmt.json_document({k: float(v) for k, v in histogram.items()}))
    stats = json.loads((out / fmt.STATS).read_text())
    stats["unit_distribution"] = {k: float(v) for k, v in stats["unit_distribution"].items()}
    (out / fmt.STATS).write_text(fmt.json_document(stats))
    problems = verify_output(str(out)).problems
    assert [(p.file, "are not all ints" in p.what) for p in problems] == [
        (fmt.HISTOGRAM, True), (fmt.STATS, True)]


def test_manifest_disagreeing_with_length_field(out):
    doc = json.loads((out / fmt.LENGTH_FIELD).read_text())
    doc["pad_token_id"] += 1
    (out / fmt.LENGTH_FIELD).write_text(fmt.json_document(doc), "utf-8")
    problems = verify_output(str(out)).problems
    assert [p.file for p in problems] == [fmt.LENGTH_FIELD]
    assert "pad_token_id" in problems[0].what and "tokenizer.pad_id" in problems[0].what


def test_missing_manifest_is_an_incomplete_build(out, capsys):
    (out / fmt.MANIFEST).unlink()
    result = verify_output(str(out))
    assert [(p.file, p.what) for p in result.problems] == [
        (fmt.MANIFEST, "manifest.json is missing: the build did not complete")]
    code, text = _cli(out, capsys)
    assert code == 1 and "did not complete" in text


def test_failed_build_is_reported_as_failed(tmp_path, tokenizers_dir):
    rows = [json.dumps(r) for r in _rows(20)] + ['{"q": "x", oops}']
    with pytest.raises(errors.SourceParseError):
        _build(tmp_path, tokenizers_dir, rows)
    result = verify_output(str(tmp_path / "out"))
    assert len(result.problems) == 1
    what = result.problems[0].what
    assert what.startswith("manifest.json is missing: the build did not complete; it failed")
    assert fmt.FAILED_UNIT in what and "unit_8" in what


def test_what_no_build_wrote_is_refused_at_once_with_exit_2(tmp_path, capsys):
    """`verify` and `report` on a folder no build wrote (a missing one, a file, an empty
    folder, a folder of other things with a nested manifest) answer "not a mintdim-beam
    output" and exit 2, without walking it."""
    from mintdim_beam.audit.not_a_build import NotABuildError

    (tmp_path / "empty").mkdir()
    other = tmp_path / "other"
    for i in range(8):
        (other / f"project_{i}" / "unit_8").mkdir(parents=True)
        (other / f"project_{i}" / "manifest.json").write_text("{}")
    (other / "notes.txt").write_text("not a build")
    (tmp_path / "file.jsonl").write_text("{}\n")
    cases = {"nothing": "it does not exist", "file.jsonl": "it is a file",
             "empty": "it is empty",
             "other": "9 entries no build writes (notes.txt, project_0, project_1, "
                      "project_2, project_3, and 4 more)"}
    for name, says in cases.items():
        with pytest.raises(NotABuildError) as info:
            verify_output(str(tmp_path / name))
        assert str(info.value) == f"{tmp_path / name} is not a mintdim-beam output: " + (
            says if name != "other" else "it holds no manifest.json, no _mintdim_build.json "
                                         f"and no failure notice, and {says}")
        assert cli.main(["verify", str(tmp_path / name)]) == 2
        assert "is not a mintdim-beam output" in capsys.readouterr().out
        assert cli.main(["report", str(tmp_path / name)]) == 2
        assert "is not a mintdim-beam output" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report").exists()  # report wrote nothing



def test_max_problems_keeps_the_first(out):
    for shard in out.glob("unit_*/shard_*.bin"):
        shard.write_bytes(shard.read_bytes()[:-1])
    result = verify_output(str(out), max_problems=3)
    assert len(result.problems) == 3 and result.problem_count > 3
    assert "first 3 shown" in result.summary()


def test_cli_max_problems(out, capsys):
    for shard in out.glob("unit_*/shard_*.bin"):
        shard.write_bytes(shard.read_bytes()[:-1])
    code = cli.main(["verify", str(out), "--max-problems", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1 and "FAILED" in lines[0] and "first 2 shown" in lines[0]
    assert len([l for l in lines if l.startswith("  unit_")]) == 2
    assert lines[-1].startswith("  ... and ") and lines[-1].endswith("more (--max-problems)")


@pytest.fixture(scope="module")
def extended(tmp_path_factory, tokenizers_dir) -> Path:
    """A build whose long samples were extended to their own token count."""
    return _build(tmp_path_factory.mktemp("verify_extend"), tokenizers_dir, _rows(60),
                  on_overflow="extend")


def _extend_row(out: Path) -> dict:
    return next(row for row in _index(out, fmt.OVERFLOW_INDEX) if row["action"] == "extend")


def test_extended_build_verifies(extended):
    assert _extend_row(extended) and verify_output(str(extended)).ok


def test_extended_sample_must_keep_its_overflow_rows_token_count(extended, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(extended, out)
    sid = _extend_row(out)["sample_id"]
    rows = _index(out)
    for row in rows:
        if row["sample_id"] == sid:
            row["token_count"] -= 1
    (out / fmt.SAMPLE_INDEX).write_text("".join(fmt.jsonl_row(r) for r in rows), "utf-8")
    assert any(p.file == fmt.SAMPLE_INDEX and "extended sample has token_count" in p.what
               for p in verify_output(str(out)).problems)


def test_extend_to_a_size_smaller_than_the_sample_is_reported(extended, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(extended, out)
    rows = _index(out, fmt.OVERFLOW_INDEX)
    row = next(r for r in rows if r["action"] == "extend")
    row["new_unit_size"] = row["token_count"] - 1
    (out / fmt.OVERFLOW_INDEX).write_text("".join(fmt.jsonl_row(r) for r in rows), "utf-8")
    assert any(p.file == fmt.OVERFLOW_INDEX and "does not hold" in p.what
               for p in verify_output(str(out)).problems)


def test_a_leftover_ownership_marker_means_the_build_did_not_end(out):
    from mintdim_beam.core.files.ownership import MARKER

    (out / MARKER).write_text('{"run_id": "r", "state": "running"}')
    problems = verify_output(str(out)).problems
    assert [(p.file, "build that did not end" in p.what) for p in problems] == [(MARKER, True)]


# ------------------------------------------------------------------ content (issue 25)

def test_every_file_is_recorded_with_the_sha256_it_was_written_with(built):
    import hashlib

    block = json.loads((built / fmt.MANIFEST).read_text())["checksums"]
    files = sorted(p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file())
    assert block["algorithm"] == "sha256"
    assert sorted(block["files"]) == [f for f in files if f != fmt.MANIFEST]
    joined = 0
    for name, entry in block["files"].items():
        data = (built / name).read_bytes()
        if "parts" not in entry:
            assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            continue
        # joined from parts: the table's rows tile the file, each with its bytes' sha256
        joined += 1
        assert entry == {"bytes": len(data), "parts": f"checksums/{name[:-6]}.parts.jsonl"}
        rows = [json.loads(line) for line in (built / entry["parts"]).read_text().splitlines()]
        assert len(rows) > 1 and rows[0]["start"] == 0
        assert sum(r["bytes"] for r in rows) == len(data)
        for row in rows:
            piece = data[row["start"]:row["start"] + row["bytes"]]
            assert row["sha256"] == hashlib.sha256(piece).hexdigest()
    assert joined  # the fixture's build has several batches
    result = verify_output(str(built))
    assert result.checksummed == len(block["files"])
    assert f"content as written (sha256 of {len(block['files'])} files)" in result.summary()


def test_a_changed_byte_of_a_joined_index_names_its_part(built, tmp_path):
    """sample_index.jsonl is joined from parts no step rereads: verify checks it part
    by part against its table and names the part a changed byte falls in; a changed
    table is named by its own sum."""
    out = tmp_path / "out"
    shutil.copytree(built, out)
    rows = [json.loads(line) for line in
            (out / "checksums/sample_index.parts.jsonl").read_text().splitlines()]
    path = out / fmt.SAMPLE_INDEX
    data = bytearray(path.read_bytes())
    at = rows[1]["start"] + 3
    data[at] = ord("X") if data[at] != ord("X") else ord("Y")
    path.write_bytes(bytes(data))
    found = [(p.file, p.what) for p in verify_output(str(out)).problems]
    assert (fmt.SAMPLE_INDEX, f"content changed: sha256 "
            f"{hashlib.sha256(bytes(data[rows[1]['start']:rows[1]['start'] + rows[1]['bytes']])).hexdigest()[:16]}..., "
            f"in part 2 of {len(rows)} (bytes {rows[1]['start']}..{rows[1]['start'] + rows[1]['bytes']}): "
            f"the part table records {rows[1]['sha256'][:16]}...") in found
    table = out / "checksums/sample_index.parts.jsonl"
    table.write_text(table.read_text().replace(rows[0]["sha256"], "0" * 64))
    files = [p.file for p in verify_output(str(out)).problems]
    assert "checksums/sample_index.parts.jsonl" in files


def test_a_token_changed_to_another_valid_id_is_named_by_checksum_and_by_deep(
        built, tmp_path, monkeypatch):
    """The probe's first case: one payload token becomes another id of the vocabulary.
    The structure holds; the checksum names the shard; --deep (run where the build ran,
    here without the checksums) names the sample, its line and the token."""
    out = tmp_path / "out"
    shutil.copytree(built, out)
    shard = _shard_with_records(out, 16)
    data = np.fromfile(shard, dtype="<u2")
    at = 1 + N_SEGMENTS  # the first record's first payload token
    data[at] = 5 if data[at] != 5 else 6
    data.tofile(shard)
    rel = shard.relative_to(out).as_posix()
    result = verify_output(str(out))
    assert [(p.file, p.what.split(":")[0]) for p in result.problems] == [(rel, "content changed")]
    without_checksums(out)
    assert verify_output(str(out)).ok  # what verify proved before checksums
    monkeypatch.chdir(built.parent)  # the build's relative paths
    deep = verify_output(str(out), deep=10_000)
    assert [(p.file, p.record) for p in deep.problems] == [(rel, 0)]
    assert "token 0 is" in deep.problems[0].what and "data/in.jsonl line" in deep.problems[0].what


def test_deep_verify_re_tokenizes_a_truncated_build_with_unks(built, monkeypatch, capsys):
    """Every record of the SentencePiece build (UNKs, duplicates, samples truncated to the
    largest unit) equals its line re-tokenized; the command prints what it compared."""
    monkeypatch.chdir(built.parent)
    result = verify_output(str(built), deep=10_000)
    assert result.ok, [str(p) for p in result.problems]
    assert len(result.deep) == result.samples
    assert cli.main(["verify", str(built), "--deep", "--deep-samples", "5"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "5 sampled records equal their lines re-tokenized (samples 0, " in line


def test_deep_verify_needs_the_inputs_the_build_read(built, tmp_path, monkeypatch):
    work = tmp_path / "work"
    shutil.copytree(built.parent, work)
    monkeypatch.chdir(work)
    rows = (work / "data/in.jsonl").read_text(encoding="utf-8").splitlines()
    (work / "data/in.jsonl").write_text("\n".join(rows[1:]) + "\n", encoding="utf-8")
    result = verify_output(str(work / built.name), deep=8)
    assert [p.file for p in result.problems] == [fmt.MANIFEST]
    assert "--deep: input 'data/in.jsonl' is changed" in result.problems[0].what


def test_deep_verify_of_a_mintdim_build_says_it_cannot(golden_output=GOLDEN_OUTPUTS[0]):
    result = verify_output(str(golden_output), deep=8)
    assert [p.what.split(":")[0] for p in result.problems] == ["--deep"]
    assert "no build_config in the manifest" in result.problems[0].what
