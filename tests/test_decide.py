"""DecideOverflows streams its candidates (an int64 table, one `Candidate` at a time) and
writes the overflow rows to scratch: the decisions, rows and sizes must be those of
the in-memory `decide_overflows` on the same candidates, whatever the policy."""
import json
from types import SimpleNamespace

import numpy as np
import pytest

from mintdim_beam.unit_build.transforms.assign import number_candidates
from mintdim_beam.unit_build.transforms.decide import decide_all
from mintdim_beam.unit_build.units import decide_overflows, fixed_chooser, scripted_chooser
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.config.unit_config import InputFile
from mintdim_beam.core.errors.failures import ExtraTurnsPending, LongLinePending
from mintdim_beam.core.inputs.source import Numbering

SIZES = (8, 16)


def _plan(tmp_path):
    files = (InputFile(0, "a.jsonl", "a.jsonl"), InputFile(1, "b.jsonl", "b.jsonl"))
    dataset = SimpleNamespace(sizes=SIZES, files=files, output_path=str(tmp_path), dialogue=None,
                              scratch_path=str(tmp_path / "_mintdim_tmp" / "run"))
    return SimpleNamespace(dataset=dataset, magic=65535)


def _inputs(seed: int):
    """Per-batch candidate arrays over two files and several ranges, in no order, some
    split dialogue parts (one sample_id, several records) and some without trained
    tokens left; the numbering; two long lines and a skipped dialogue."""
    rng = np.random.default_rng(seed)
    numbering = Numbering({(0, 0, 0): (0, 0), (0, 0, 1): (40, 30), (0, 1, 0): (0, 60)}, {})
    candidates = []
    for file_pos, range_no, batch_no in [(0, 1, 0), (0, 0, 1), (0, 0, 0), (0, 1, 2), (1, 0, 0)]:
        n = int(rng.integers(1, 6))
        j = np.sort(rng.choice(10, n, replace=False))
        local_sample = j // 2  # pairs of records share a sample: split dialogue parts
        part = np.where(rng.random(n) < 0.5, j % 2, -1)
        kept = np.where(rng.random(n) < 0.5, rng.integers(1, 17, n), -1)  # what a cut keeps
        rows = np.stack([j, local_sample, j, rng.integers(17, 60, n),
                         rng.choice([-1, 0, 3], n), part, kept], axis=1).astype(np.int64)
        candidates.append(((0, file_pos, range_no, batch_no), rows))
    long_lines = [LongLinePending(0, 0, 1, 9, "SourceParseError", {}, "file_line",
                                  local_sample=9, line_bytes=5000),
                  LongLinePending(0, 1, 0, 3, "SourceParseError", {}, "file_line",
                                  local_sample=1, line_bytes=7000),
                  ExtraTurnsPending(0, 0, 0, 11, "", {}, "sample", local_sample=11,
                                    trained_turns=4)]
    return candidates, numbering, long_lines


def _reference(candidates, numbering, long_lines, plan, chooser):
    """The in-memory decision, candidates numbered as the interactive plan numbers them."""
    from mintdim_beam.unit_build.units import Candidate

    cands = number_candidates(candidates, {0: plan.dataset}, numbering).get(0, [])
    for p in long_lines:
        line_offset, sample_offset = numbering[p.order[:3]]
        cands.append(Candidate(order=(0, p.file_pos, p.range_no, -1, -1, p.local_line),
                               sample_id=sample_offset + p.local_sample, token_count=None,
                               source_file=plan.dataset.files[p.file_pos].given,
                               source_line=line_offset + p.local_line + 1,
                               line_bytes=getattr(p, "line_bytes", None),
                               trained_turns=getattr(p, "trained_turns", None)))
    return decide_overflows(SIZES, cands, chooser, capacity=plan.magic)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", ["truncate", "skip", "extend", "abort", "scripted"])
def test_the_streamed_decision_is_the_in_memory_one(policy, seed, tmp_path):
    plan = _plan(tmp_path)
    candidates, numbering, long_lines = _inputs(seed)
    if policy == "scripted":  # the prompt's answers: mixed, with custom sizes
        chooser = scripted_chooser({sid: [("extend", 64), ("skip", None), ("truncate", None)][
            sid % 3] for sid in range(100)})
    else:
        chooser = fixed_chooser(policy)
    if policy != "skip":  # lines over --max_line_bytes are decided under skip only
        long_lines = long_lines[2:]
    want = _reference(candidates, numbering, long_lines, plan, chooser)
    got = decide_all(candidates, {0: plan}, numbering, {0: chooser}, long_lines).unpack()[0]

    assert got.sizes == want.sizes
    assert got.abort == want.abort and got.abort_reason == want.abort_reason
    with open(got.rows_path, encoding="utf-8") as handle:
        assert handle.read() == "".join(fmt.jsonl_row(r) for r in want.overflow_rows)
    kept = {(key + (j, line)): (unit, bool(cut)) for key, rows in got.by_batch.items()
            for j, line, unit, cut in rows.tolist()}
    assert kept == {order: (o.unit, o.action == "truncate")
                    for order, o in want.outcomes.items()
                    if o.unit is not None and order[3] >= 0}
    if policy == "abort":
        assert got.abort is not None and not kept
    if policy in ("truncate", "skip"):  # every candidate decided, in sample_id order
        sample_ids = [json.loads(line)["sample_id"] for line in open(got.rows_path)]
        assert sample_ids == sorted(sample_ids) and len(sample_ids) == len(want.overflow_rows) > 3


def test_no_candidates_still_writes_an_empty_overflow_index(tmp_path):
    plan = _plan(tmp_path)
    got = decide_all([], {0: plan}, {}, {0: fixed_chooser("abort")}).unpack()[0]
    assert got.abort is None and got.by_batch == {} and list(got.sizes) == list(SIZES)
    assert open(got.rows_path).read() == ""
