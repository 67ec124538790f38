"""StageRecords: records of samples that fit a declared unit are written to per-batch
block files during Tokenize, and ShardWrite reads ranges of them back; outputs on
object stores and memory:// keep records in the pipeline. Both give mintdim's bytes."""
import json
import shutil
from pathlib import Path

import fsspec
import pytest

from conftest import (GOLDEN, GOLDEN_IN_MEMORY, content_tree, mintdim_tree, pieces_spy,
                      run_golden_case)
from mintdim_beam.core.files import storage
from mintdim_beam.core.errors import OutputWriteError
from mintdim_beam.core.errors.failures import WorkerFailure, recover

# Overflow samples whose records are built after the global step, among staged ones of
# the same batch and unit, across shard boundaries; and a case with many tiny shards.
CASES = ["overflow_truncate_multisegment", "overflow_extend_shared_files",
         "overflow_skip_with_duplicates", "overflow_extend_prompt", "multishard_empty_units"]

RECORDS_AFTER_THE_GLOBAL_STEP = {"overflow_truncate_multisegment", "overflow_extend_shared_files",
                                 "overflow_extend_prompt"}


@pytest.fixture
def pieces_written():
    """What ShardWrite joined, per piece (`conftest.piece_kind`)."""
    with pieces_spy() as seen:
        yield seen


def _build(name: str, golden_copy: Path, output: str, flags=()):
    return run_golden_case(golden_copy, name, GOLDEN_IN_MEMORY + list(flags), output=output)


def _expected(name: str) -> dict:
    return content_tree(GOLDEN / name / "expected" / "out")


@pytest.mark.parametrize("name", CASES)
def test_staged_records_give_the_reference_bytes(name, golden_in_memory):
    """The builds test_golden compares with the reference (made once a session): their
    records came from staged blocks."""
    work, outcome, pieces = golden_in_memory(name)
    if isinstance(outcome, BaseException):
        raise outcome
    out = work / "out"
    assert mintdim_tree(out) == _expected(name)
    assert not (out / "_mintdim_tmp").exists()  # the blocks went with the scratch dir
    kinds = set(pieces)
    assert "block" in kinds and "bytes" not in kinds
    # truncated and extended samples' records, built after the global step, were staged
    # too, in each batch's overflow block (skipped ones have none)
    assert ("overflow block" in kinds) == (name in RECORDS_AFTER_THE_GLOBAL_STEP)


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
    got = mintdim_tree(local)
    manifest = json.loads(got.pop("manifest.json"))
    expected = _expected(name)
    want = json.loads(expected.pop("manifest.json"))
    assert got == expected
    assert manifest["units"] == want["units"]  # the output dir differs, nothing else
    assert pieces_written and set(pieces_written) == {"bytes"}


@pytest.mark.parametrize("cap", [1, 2])
def test_capped_hash_buckets_give_the_same_duplicate_index(cap, golden_copy, monkeypatch):
    """A staged build groups its hash entries in at most LOCAL_HASH_BUCKETS buckets (39
    here uncapped: one per shard's worth of samples); the duplicate groups, their order
    and every other byte stay the reference's."""
    from mintdim_beam.unit_build.transforms import assign, duplicates

    name = "multishard_empty_units"
    seen, real = golden_copy / f"buckets_cap{cap}.txt", duplicates.group_rows

    def spy(element, plans):  # runs on a pickled copy: it reports through a file
        with open(seen, "a") as handle:
            handle.write(f"{element[0][1]}\n")
        return real(element, plans)

    monkeypatch.setattr(assign, "LOCAL_HASH_BUCKETS", cap)
    monkeypatch.setattr(duplicates, "group_rows", spy)
    out = golden_copy / name / f"out_cap{cap}"
    _build(name, golden_copy, f"out_cap{cap}")
    assert mintdim_tree(out) == _expected(name)
    assert (out / "duplicate_index.jsonl").read_text().count("\n") == 12
    assert set(seen.read_text().split()) == {str(b) for b in range(cap)}


def test_staging_can_be_turned_off_for_a_local_output(golden_copy, pieces_written):
    name = "overflow_truncate_multisegment"
    out = golden_copy / name / "out_unstaged"
    shutil.rmtree(out, ignore_errors=True)
    _build(name, golden_copy, "out_unstaged", ["--stage_records=off"])
    assert mintdim_tree(out) == _expected(name)
    assert pieces_written and set(pieces_written) == {"bytes"}


def test_a_missing_part_of_a_staged_block_is_an_error(tmp_path):
    path = tmp_path / "block.bin"
    path.write_bytes(b"0123456789")
    assert storage.read_range(str(path), 2, 5) == b"23456"
    with pytest.raises(OSError, match="block.bin: 4 bytes at 6, 8 expected"):
        storage.read_range(str(path), 6, 8)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_shard_is_its_pieces_joined_ranges_copied_by_the_kernel_locally(tmp_path, where):
    blocks = [tmp_path / "a.bin", tmp_path / "b.bin"]
    blocks[0].write_bytes(bytes(range(200)))
    blocks[1].write_bytes(b"xyz" * 1000)
    pieces = [b"head", (str(blocks[0]), 10, 50), (str(blocks[1]), 0, 3000), b"",
              (str(blocks[0]), 199, 1), b"tail"]
    want = b"head" + bytes(range(10, 60)) + b"xyz" * 1000 + bytes([199]) + b"tail"
    fs = fsspec.filesystem("memory")
    out = str(tmp_path / "out") if where == "local" else "memory://pieces-test/out"
    target = storage.join(out, "unit_8", "shard_000000.bin")
    try:
        storage.write_pieces_atomic(target, pieces, out)
        assert storage.read_bytes(target) == want
        # A range past the block's end: locally the kernel copy is part of writing the
        # shard, so it fails as OutputWriteError naming the output (carried by WorkerFailure).
        expected = WorkerFailure if where == "local" else OSError
        with pytest.raises(expected, match="a.bin") as info:
            storage.write_pieces_atomic(target, [(str(blocks[0]), 150, 100)], out)
        if where == "local":
            assert isinstance(recover(info.value), OutputWriteError)
        assert storage.read_bytes(target) == want  # the shard that was there is intact
    finally:
        if where == "memory":
            fs.rm("memory://pieces-test", recursive=True)
