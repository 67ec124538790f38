"""Unit assignment and overflow rules, without Beam."""
import numpy as np
import pytest

from mintdim_beam.unit_build.units import (Candidate, assign_declared, decide_overflows,
                                           fixed_chooser, scripted_chooser, smallest_fit,
                                           truncated_lengths)


def cands(*token_counts):
    return [Candidate(order=(i,), sample_id=i, token_count=t, source_file="f.jsonl",
                      source_line=i + 1) for i, t in enumerate(token_counts)]


def test_smallest_fit_and_declared_assignment():
    sizes = (4, 8, 16)
    assert [smallest_fit(sizes, t) for t in (0, 4, 5, 16, 17)] == [4, 4, 8, 16, None]
    assert assign_declared(sizes, np.array([0, 4, 5, 16, 17])).tolist() == [4, 4, 8, 16, 0]


def test_extend_adds_running_maxima_in_sample_order():
    plan = decide_overflows((8,), cands(20, 12, 30, 25, 31), fixed_chooser("extend"))
    assert plan.sizes == [8, 20, 30, 31]
    assert [(o.action, o.unit, o.max_unit_size) for o in
            (plan.outcomes[(i,)] for i in range(5))] == [
        ("extend", 20, 8), ("fit", 20, 20), ("extend", 30, 20), ("fit", 30, 30),
        ("extend", 31, 30)]
    assert [r.get("new_unit_size") for r in plan.overflow_rows] == [20, 30, 31]
    assert [r["max_unit_size"] for r in plan.overflow_rows] == [8, 20, 30]


def test_truncate_skip_and_abort():
    truncated = decide_overflows((8,), cands(9, 10), fixed_chooser("truncate"))
    assert {o.unit for o in truncated.outcomes.values()} == {8}
    assert [r["action"] for r in truncated.overflow_rows] == ["truncate", "truncate"]
    skipped = decide_overflows((8,), cands(9), fixed_chooser("skip"))
    assert skipped.outcomes[(0,)].unit is None and skipped.overflow_rows[0]["action"] == "skip"
    aborted = decide_overflows((8,), cands(9, 10), fixed_chooser("abort"))
    assert aborted.abort.sample_id == 0 and not aborted.overflow_rows
    assert decide_overflows((8,), cands(9), fixed_chooser("prompt")).abort is not None


def test_scripted_choices_mix_actions_and_custom_sizes():
    script = {0: ("extend", 50), 2: ("skip", None)}
    plan = decide_overflows((8,), cands(20, 40, 60), scripted_chooser(script))
    assert plan.sizes == [8, 50]
    assert plan.outcomes[(1,)].action == "fit" and plan.outcomes[(1,)].unit == 50
    assert plan.outcomes[(2,)].unit is None


def test_truncated_lengths_cut_from_the_end():
    lengths = np.array([3, 0, 4, 5])
    assert truncated_lengths(lengths, 6).tolist() == [3, 0, 3, 0]
    assert truncated_lengths(lengths, 12).tolist() == [3, 0, 4, 5]
    assert truncated_lengths(lengths, 2).tolist() == [2, 0, 0, 0]
    rows = np.array([lengths, lengths, [1, 1, 1, 1]])
    assert truncated_lengths(rows, np.array([6, 2, 3])).tolist() == [
        [3, 0, 3, 0], [2, 0, 0, 0], [1, 1, 1, 0]]  # many samples at once, row by row


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError):
        fixed_chooser("sometimes")
