"""StageRecords: records of samples that fit a declared unit are written to per-batch
block files during Tokenize, and ShardWrite reads ranges of them back; outputs on
object stores and memory:// keep records in the pipeline. Both give mintdim's bytes."""
import json
import shutil
from pathlib import Path

import fsspec
import pytest

from mintdim_beam.transforms import write

from conftest import GOLDEN, IN_MEMORY, content_tree, run_build

# Overflow samples whose records are built after the global step, among staged ones of
# the same batch and unit, across shard boundaries; and a case with many tiny shards.
CASES = ["overflow_truncate_multisegment", "overflow_extend_shared_files",
         "overflow_skip_with_duplicates", "overflow_extend_prompt", "multishard_empty_units"]

RECORDS_AFTER_THE_GLOBAL_STEP = {"overflow_truncate_multisegment", "overflow_extend_shared_files",
                                 "overflow_extend_prompt"}


@pytest.fixture
def pieces_written(monkeypatch):
    """What ShardWrite joined: ("block", bytes) or ("bytes", bytes) per piece."""
    seen, real = [], write.piece_bytes

    def spy(piece):
        data = real(piece)
        seen.append(("bytes" if isinstance(piece, bytes) else "block", len(data)))
        return data

    monkeypatch.setattr(write, "piece_bytes", spy)
    return seen


def _build(name: str, golden_copy: Path, output: str, flags=()):
    case = json.loads((GOLDEN / name / "case.json").read_text())
    return run_build(golden_copy / name, files=case["files"], fields=case["fields"],
                     templates=case["templates"], tokenizer=case["tokenizer"]["type"],
                     tokenizer_files=case["tokenizer"]["files"], sizes=case["sizes"],
                     build_batch=case["build_batch"], output=output,
                     samples_per_shard=case["samples_per_shard"], options=IN_MEMORY + [
                         "--input_range_bytes=1024", *flags],
                     on_overflow=case["on_overflow"], on_template_unk=case["on_template_unk"])


def _expected(name: str) -> dict:
    return content_tree(GOLDEN / name / "expected" / "out")


@pytest.mark.parametrize("name", CASES)
def test_staged_records_give_the_reference_bytes(name, golden_copy, pieces_written):
    out = golden_copy / name / "out_staged"
    shutil.rmtree(out, ignore_errors=True)
    _build(name, golden_copy, "out_staged")
    assert content_tree(out) == _expected(name)
    assert not (out / "_mintdim_tmp").exists()  # the blocks went with the scratch dir
    kinds = {kind for kind, _ in pieces_written}
    assert "block" in kinds
    # truncated and extended samples' records came as bytes (skipped ones have none)
    assert ("bytes" in kinds) == (name in RECORDS_AFTER_THE_GLOBAL_STEP)


@pytest.mark.parametrize("name", CASES)
def test_records_kept_in_the_pipeline_give_the_same_bytes(name, golden_copy, pieces_written):
    fs = fsspec.filesystem("memory")
    url = f"memory://stage-{name}/out"
    try:
        _build(name, golden_copy, url)
        base = fs._strip_protocol(url).rstrip("/")
        tree = {path[len(base) + 1:]: fs.cat_file(path) for path in fs.find(base)}
    finally:
        fs.rm(f"memory://stage-{name}", recursive=True)
    local = golden_copy / name / "from_memory"
    shutil.rmtree(local, ignore_errors=True)
    for rel, data in tree.items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
    got = content_tree(local)
    manifest = json.loads(got.pop("manifest.json"))
    expected = _expected(name)
    want = json.loads(expected.pop("manifest.json"))
    assert got == expected
    assert manifest["units"] == want["units"]  # the output dir differs, nothing else
    assert pieces_written and {kind for kind, _ in pieces_written} == {"bytes"}


def test_staging_can_be_turned_off_for_a_local_output(golden_copy, pieces_written):
    name = "overflow_truncate_multisegment"
    out = golden_copy / name / "out_unstaged"
    shutil.rmtree(out, ignore_errors=True)
    _build(name, golden_copy, "out_unstaged", ["--stage_records=off"])
    assert content_tree(out) == _expected(name)
    assert pieces_written and {kind for kind, _ in pieces_written} == {"bytes"}


def test_a_missing_part_of_a_staged_block_is_an_error(tmp_path):
    from mintdim_beam import storage

    path = tmp_path / "block.bin"
    path.write_bytes(b"0123456789")
    assert storage.read_range(str(path), 2, 5) == b"23456"
    with pytest.raises(OSError, match="block.bin: 4 bytes at 6, 8 expected"):
        storage.read_range(str(path), 6, 8)
