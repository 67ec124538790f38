"""Byte-compatibility with mintdim 0.2.1: every case under tests/golden was built by
the reference (tools/make_golden.py); our build of the same input must give the same
bytes. Comparison rules: every file identical, except manifest.json may carry our own
extra keys after the reference's, and EMPTY_UNIT.md (our own prose) must exist exactly
where the reference wrote one."""
import json
import shutil
from pathlib import Path

import pytest

from conftest import (BUNDLE_RETRYING, GOLDEN, GOLDEN_IN_MEMORY, MANIFEST_REFERENCE_KEYS,
                      MULTI_PROCESS, content_tree, mintdim_tree, run_build, run_golden_case)
from mintdim_beam.core import errors

CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "case.json").is_file())
# A spread of cases also built on worker processes with tiny byte ranges.
MULTI_CASES = {"shared_three_files_duplicates", "overflow_extend_shared_files",
               "line_endings_whitespace", "mapped_two_outputs", "multishard_empty_units",
               "multilingual_hf_bpe_fused_unk"}


# Cases where we depart from the reference on purpose (docs/compatibility.md, "Deliberate
# deviations"): what the reference did is kept in the case; the test checks ours.
DEVIATIONS = {
    # mintdim 0.2.1: SourceParseError at line 1. Ours (issue 30): the BOM is skipped and
    # recorded, and the build is that of the same file without it.
    "error_utf8_bom": "bom_skipped",
}


def _outputs(case: dict) -> list[str]:
    return [case["output"]] if isinstance(case["output"], str) else list(dict.fromkeys(case["output"]))


def _notices(root: Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("EMPTY_UNIT.md")}


def _run_case(name: str, golden_copy: Path, options: list[str]):
    case = json.loads((GOLDEN / name / "case.json").read_text())
    for out in _outputs(case):
        shutil.rmtree(golden_copy / name / out, ignore_errors=True)
    try:
        outcome = run_golden_case(golden_copy, name, options)
    except errors.MintDimError as exc:
        outcome = exc
    _check_case(name, golden_copy / name, outcome)


def _check_case(name: str, work: Path, outcome):
    """The build of case `name` in `work` gave `outcome` (its result, or the MintDimError
    it raised): the reference's error, or the reference's bytes."""
    case = json.loads((GOLDEN / name / "case.json").read_text())
    if DEVIATIONS.get(name) == "bom_skipped":
        _check_bom_skipped(name, work, outcome, case)
        return
    if case.get("expect_error"):
        assert isinstance(outcome, errors.MintDimError), outcome
        assert type(outcome).__name__ == case["expect_error"]
        return
    if isinstance(outcome, BaseException):
        raise outcome
    result = outcome
    for out in _outputs(case):
        expected_root, actual_root = GOLDEN / name / "expected" / out, work / out
        expected, actual = content_tree(expected_root), mintdim_tree(actual_root)
        assert sorted(actual) == sorted(expected), out
        for path in expected:
            assert actual[path] == expected[path], f"{name}: {out}/{path} differs"
        assert _notices(actual_root) == _notices(expected_root)
        manifest = json.loads((actual_root / "manifest.json").read_text())
        reference = json.loads((expected_root / "manifest.json").read_text())
        assert list(reference) == MANIFEST_REFERENCE_KEYS
        # the reference's keys first, in its order; ours after, our version first
        keys = list(manifest)
        assert keys[:len(MANIFEST_REFERENCE_KEYS)] == MANIFEST_REFERENCE_KEYS
        ours = keys[len(MANIFEST_REFERENCE_KEYS):]
        assert ours[0] == "mintdim_beam_version" and "inputs" in ours
        assert [i["file"] for i in manifest["inputs"]] == manifest["source"]["files"]
    assert len(result["outputs"]) == len(_outputs(case))


def _check_bom_skipped(name: str, work: Path, outcome, case: dict) -> None:
    """The build of a JSONL file that starts with a BOM equals the build of the same
    file without it, and the manifest records the BOM."""
    if isinstance(outcome, BaseException):
        raise outcome
    (source,) = case["files"]
    data = (work / source).read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    plain = work.parent / f"{name}_without_bom"  # a sibling: relative paths hold
    shutil.rmtree(plain, ignore_errors=True)
    (plain / source).parent.mkdir(parents=True)
    (plain / source).write_bytes(data[3:])
    run_build(plain, files=case["files"], fields=case["fields"], templates=case["templates"],
              tokenizer=case["tokenizer"]["type"], tokenizer_files=case["tokenizer"]["files"],
              sizes=case["sizes"], build_batch=case["build_batch"], output=case["output"],
              samples_per_shard=case["samples_per_shard"], options=GOLDEN_IN_MEMORY,
              on_overflow=case["on_overflow"], on_template_unk=case["on_template_unk"])
    out, reference = work / case["output"], plain / case["output"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i.get("bom") for i in manifest["inputs"]] == [True]
    expected, actual = content_tree(reference), content_tree(out)
    assert sorted(actual) == sorted(expected) and "sample_index.jsonl" in expected
    for path in expected:
        assert actual[path] == expected[path], f"{name}: {path} differs"


@pytest.mark.parametrize("name", CASES)
def test_golden_in_memory_small_ranges(name, golden_in_memory):
    """On GOLDEN_IN_MEMORY (1 KiB ranges), built once a session (test_stage reads the
    same builds)."""
    work, outcome, _ = golden_in_memory(name)
    _check_case(name, work, outcome)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MULTI_CASES & set(CASES)))
def test_golden_multi_processing_tiny_ranges(name, golden_copy):
    _run_case(name, golden_copy, MULTI_PROCESS + ["--input_range_bytes=200"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MULTI_CASES & set(CASES)))
def test_golden_portable_runner(name, golden_copy, portable_flags):
    _run_case(name, golden_copy, portable_flags + ["--input_range_bytes=300"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MULTI_CASES & set(CASES)))
def test_golden_with_injected_faults_and_retries(name, golden_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("MINTDIM_FAULTS", f"tokenize,write,finalize@{tmp_path}")
    _run_case(name, golden_copy, BUNDLE_RETRYING + ["--input_range_bytes=500"])
    assert {p.name.split("-")[0] for p in tmp_path.iterdir()} == {"tokenize", "write", "finalize"}
