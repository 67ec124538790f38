"""`pipeline("unit-read")` against mintdim 0.2.1's own batches and errors
(`tests/golden_read/`, made by `tools/make_read_golden.py` with the reference): the same
arrays, spans, accumulation flags and error classes, read after read; the mask differs
only where the reference drops a target because it equals `pad_id`."""
import json
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pytest

from mintdim_beam import pipeline
from mintdim_beam.core import errors
from mintdim_beam.core.errors import error_from_payload
from mintdim_beam.read.unit_read.config import validate

GOLDEN = Path(__file__).parent / "golden_read"
SCENARIOS = sorted(p.name for p in GOLDEN.iterdir() if (p / "scenario.json").exists())
CASES = json.loads((GOLDEN / "errors.json").read_text())
QA = "../golden/qa_sp_bpe_multi/expected/out"
QA_TEMPLATE = ["token_template", "question", "token_template", "context", "token_template",
               "answer"]


def _reader(entries, template, target):
    return (pipeline("unit-read").queue(entries=entries).layout(sequence_template=template)
            .target(fields=target["fields"], index=target["index"],
                    ignore_id=target["ignore_id"]))


@pytest.mark.parametrize("name", SCENARIOS)
def test_same_batches_as_mintdim_read_after_read(name, monkeypatch):
    monkeypatch.chdir(GOLDEN)
    case = json.loads((GOLDEN / name / "scenario.json").read_text())
    arrays = np.load(GOLDEN / name / "batches.npz")
    reader = _reader(case["entries"], case["sequence_template"], case["target"])
    pad, ignore = case["pad_id"], case["target"]["ignore_id"]
    dropped = 0
    for i, want in enumerate(case["batches"]):
        got = reader.read()
        assert [[s.path, s.start, s.count] for s in got.source_spans] == want["source_spans"], i
        assert (got.accum_index, got.should_step) == (want["accum_index"], want["should_step"])
        for key in ("input_ids", "target_ids", "target_mask"):
            assert str(getattr(got, key).dtype) == want["dtypes"][key]
        np.testing.assert_array_equal(got.input_ids, arrays[f"input_ids_{i}"])
        np.testing.assert_array_equal(got.target_ids, arrays[f"target_ids_{i}"])
        theirs, ours = arrays[f"target_mask_{i}"], got.target_mask
        # The reference's mask is ours minus targets equal to pad_id (or ignore_id) ...
        np.testing.assert_array_equal(ours & (got.target_ids != pad) & (got.target_ids != ignore),
                                      theirs)
        # ... and that is the only difference.
        assert (got.target_ids[ours & ~theirs] == pad).all()
        dropped += int((ours & ~theirs).sum())
    if name == "pad_is_eos":
        assert dropped > 0  # the deviation is exercised: EOS targets are trained here
    else:
        assert dropped == 0


def _call(case):
    if case["call"] == "raw":
        return validate(case["queue"], case["layout"], case["target"])
    p = pipeline("unit-read")
    if case["queue"] is not None:
        p = p.queue(**case["queue"])
    if case["layout"] is not None:
        p = p.layout(**case["layout"])
    if case["target"] is not None:
        p = p.target(**case["target"])
    if case["read_twice"]:
        p.read()
    return p.read()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_same_error_class_and_component_as_mintdim(case, monkeypatch):
    monkeypatch.chdir(GOLDEN)
    with pytest.raises(Exception) as info:
        _call(case)
    error = info.value
    assert type(error).__name__ == case["error"], str(error)
    if case["component"] is not None:
        assert error.component == case["component"]
    if isinstance(error, errors.MintDimError):
        assert error.english.startswith(f"[english] {case['error']}: ")
        assert error.vietnamese.startswith(f"[vietnam] {case['error']}: ")
        assert error.english.split(": ", 1)[1] != error.vietnamese.split(": ", 1)[1]
        copy = error_from_payload(json.loads(json.dumps(error.to_payload())))
        assert type(copy) is type(error) and str(copy) == str(error)


def test_validation_errors_list_the_rules_in_both_languages(monkeypatch):
    monkeypatch.chdir(GOLDEN)
    with pytest.raises(errors.UnitReadValidationError) as info:
        _reader([{"path": f"{QA}/unit_128", "unit": 0, "batch": 1, "accum": 1}], QA_TEMPLATE,
                {"fields": ["answer"], "index": [5], "ignore_id": -100}).read()
    error = info.value
    assert error.component == "queue.entries[0].unit" and "got 0" in error.problem
    assert "unit, batch, and accum must be positive integers" in error.rules
    assert "unit, batch và accum phải là số nguyên dương" in error.vietnamese


def _copy_build(tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(GOLDEN / QA, out)
    return out


def test_a_corrupt_record_names_the_shard_and_row(tmp_path):
    out = _copy_build(tmp_path)
    shard = out / "unit_128" / "shard_000001.bin"
    record = 1 + 6 + 128
    data = bytearray(shard.read_bytes())
    data[37 * record * 2:37 * record * 2 + 2] = b"\x07\x00"  # row 37's magic
    shard.write_bytes(bytes(data))
    reader = _reader([{"path": str(out / "unit_128"), "unit": 128, "batch": 50, "accum": 1}],
                     QA_TEMPLATE, {"fields": ["answer"], "index": [5], "ignore_id": -100})
    reader.read()  # shard 0 is intact
    with pytest.raises(errors.UnitReadShardError) as info:
        reader.read()
    assert info.value.path == str(shard)
    assert "record 37 has magic 7" in info.value.problem


def test_a_shard_rewritten_between_reads_is_read_again(tmp_path):
    out = _copy_build(tmp_path)
    shard = out / "unit_256" / "shard_000000.bin"
    reader = _reader([{"path": str(shard), "unit": 256, "batch": 4, "accum": 1}], QA_TEMPLATE,
                     {"fields": ["answer"], "index": [5], "ignore_id": -100})
    first = reader.read().input_ids
    record = (1 + 6 + 256) * 2
    data = bytearray(shard.read_bytes())
    rows = [data[i * record:(i + 1) * record] for i in range(len(data) // record)]
    shard.write_bytes(b"".join(reversed(rows)))  # same size, new identity
    second = reader.read()  # rows 4..7 of the new file: the old rows 44..41
    new = np.frombuffer(shard.read_bytes(), dtype=np.uint16).reshape(-1, 1 + 6 + 256)
    np.testing.assert_array_equal(second.input_ids, new[4:8, 7:].astype(np.int64))
    assert not np.array_equal(first, second.input_ids[:4])


def test_urls_read_like_local_paths(monkeypatch):
    """A unit directory on an fsspec filesystem gives the same batches (spans name the
    URLs); memory:// stands in for gs:// and s3:// (same code path, byte ranges)."""
    monkeypatch.chdir(GOLDEN)
    fs = fsspec.filesystem("memory")
    fs.put(str(GOLDEN / QA), "/ur/out", recursive=True)
    target = {"fields": ["answer"], "index": [5], "ignore_id": -100}
    local = _reader([{"path": f"{QA}/unit_128", "unit": 128, "batch": 16, "accum": 3}],
                    QA_TEMPLATE, target)
    remote = _reader([{"path": "memory://ur/out/unit_128", "unit": 128, "batch": 16,
                       "accum": 3}], QA_TEMPLATE, target)
    for _ in range(16):
        a, b = local.read(), remote.read()
        for key in ("input_ids", "target_ids", "target_mask"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
        assert [(s.start, s.count) for s in a.source_spans] == \
            [(s.start, s.count) for s in b.source_spans]
        assert all(s.path.startswith("memory://ur/out/unit_128/shard_") for s in b.source_spans)
        assert (a.accum_index, a.should_step) == (b.accum_index, b.should_step)
    fs.rm("/ur", recursive=True)
