"""Unit assignment and overflow policies: pure rules, no I/O and no Beam.

Only samples longer than the largest declared size ("candidates") can depend on
earlier samples, through sizes added by `extend`; they are few, so they are decided
sequentially in sample_id order and everything else is decided independently.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

POLICIES = ("prompt", "abort", "truncate", "skip", "extend")
TEMPLATE_UNK_POLICIES = ("prompt", "abort", "continue")


def smallest_fit(sizes, token_count: int) -> int | None:
    index = bisect_left(sizes, token_count)
    return sizes[index] if index < len(sizes) else None


def assign_declared(sizes, token_counts: np.ndarray) -> np.ndarray:
    """Unit per sample for declared sizes; 0 where the sample overflows."""
    table = np.asarray(list(sizes) + [0], dtype=np.int64)
    return table[np.searchsorted(np.asarray(sizes, dtype=np.int64), token_counts, side="left")]


# Named tuples, not dataclasses: thousands of these are made, pickled into a side input
# and unpickled by each consumer, and tuples do all three several times faster.
class Candidate(NamedTuple):
    order: tuple  # sorts like sample_id
    sample_id: int
    token_count: int | None  # None for a line too long to read (see `line_bytes`)
    source_file: str
    source_line: int
    line_bytes: int | None = None  # set for a line over --max_line_bytes, never tokenized
    trained_kept: int | None = None  # dialogues: trained tokens left if truncated to the max
    trained_turns: int | None = None  # set for a dialogue skipped for its extra turns
    part: int | None = None  # which record of a split dialogue (`on_extra_turns="split"`)


class Outcome(NamedTuple):
    action: str  # "fit" | "truncate" | "skip" | "extend"
    unit: int | None  # None for skip
    max_unit_size: int  # largest size known when decided


@dataclass
class OverflowPlan:
    outcomes: dict  # order -> Outcome
    sizes: list  # final sizes, added ones included, ascending
    overflow_rows: list  # rows of overflow_index.jsonl in sample_id order
    abort: Candidate | None  # the first overflow, when the policy is to abort
    # why it stopped: "overflow" (the policy), "capacity" (an extend the token dtype
    # cannot store) or "long_line" (a line over --max_line_bytes, not skipped)
    abort_reason: str = "overflow"


Chooser = Callable[[Candidate, int], tuple[str, int | None]]


class FixedChooser:
    """The non-interactive policies; `prompt` without a TTY behaves as `abort`."""

    def __init__(self, policy: str):
        if policy not in POLICIES:
            raise ValueError(f"unknown on_overflow policy {policy!r}")
        self.policy = policy

    def __call__(self, cand: Candidate, max_size: int):
        if self.policy == "extend":
            return "extend", cand.token_count
        if self.policy in ("truncate", "skip"):
            return self.policy, None
        return "abort", None


def fixed_chooser(policy: str) -> Chooser:
    return FixedChooser(policy)


def skips_long_lines(choose: Chooser) -> bool:
    """Only `skip` drops a line over --max_line_bytes: it cannot be truncated or extended
    unread, and the prompt's planning pass reports it as a bad line first."""
    return getattr(choose, "policy", None) == "skip"


def scripted_chooser(script: dict) -> Chooser:
    """Decisions made ahead (interactive prompt), keyed by sample_id."""
    def choose(cand: Candidate, max_size: int):
        action, new_size = script[cand.sample_id]
        return action, new_size
    return choose


class OverflowDecider:
    """Decides candidates one at a time, in sample_id order, keeping only the sizes
    (`extend` adds some) and where it stopped: a build of millions of samples streams
    its candidates through it instead of holding them all. `capacity`: the largest
    value the token dtype stores; an extend past it stops the build (its lengths would
    wrap)."""

    def __init__(self, declared, choose: Chooser, capacity: int | None = None):
        self.sizes = sorted(declared)
        self.abort: Candidate | None = None
        self.abort_reason = "overflow"
        self._choose, self._capacity = choose, capacity

    def _stop(self, cand: Candidate, reason: str) -> None:
        self.abort, self.abort_reason = cand, reason

    def __call__(self, cand: Candidate) -> tuple[Outcome, dict | None] | None:
        """(outcome, overflow row or None); None when the build stops at `cand`."""
        sizes = self.sizes
        if cand.trained_turns is not None:  # on_extra_turns="skip": never an error
            return Outcome("skip", None, sizes[-1]), extra_turns_row(cand, sizes[-1])
        if cand.line_bytes is not None:
            if not skips_long_lines(self._choose):
                return self._stop(cand, "long_line")
            return Outcome("skip", None, sizes[-1]), long_line_row(cand, sizes[-1])
        fit = smallest_fit(sizes, cand.token_count)
        if fit is not None:  # fits a size added by an earlier extend
            return Outcome("fit", fit, sizes[-1]), None
        max_size = sizes[-1]
        action, new_size = self._choose(cand, max_size)
        if action == "abort":
            return self._stop(cand, "overflow")
        row = {"sample_id": cand.sample_id, "source_file": cand.source_file,
               "source_line": cand.source_line, "token_count": cand.token_count,
               "max_unit_size": max_size, "action": action}
        if action == "truncate" and cand.trained_kept == 0:
            # A record with nothing left to train on is no training data: skipped.
            outcome = Outcome("skip", None, max_size)
            row.update(action="skip", reason="no trained tokens left after truncation")
        elif action == "truncate":
            outcome = Outcome("truncate", max_size, max_size)
        elif action == "skip":
            outcome = Outcome("skip", None, max_size)
        elif action == "extend":
            if new_size is None or new_size < cand.token_count:
                raise ValueError("extend needs a new size >= token_count")
            if self._capacity is not None and new_size > self._capacity:
                return self._stop(cand, "capacity")
            if new_size not in sizes:
                insort(sizes, new_size)
            outcome = Outcome("extend", new_size, max_size)
            row["new_unit_size"] = new_size
        else:
            raise ValueError(f"unknown overflow action {action!r}")
        if cand.part is not None:
            row["part"] = cand.part
        return outcome, row


def decide_overflows(declared, candidates, choose: Chooser,
                     capacity: int | None = None) -> OverflowPlan:
    """Decide every candidate in sample_id order (`OverflowDecider`), all in memory: for
    the interactive prompt's plan and for tests; the build streams them."""
    decide = OverflowDecider(declared, choose, capacity)
    outcomes, rows = {}, []
    # Split dialogues give several records with one sample_id: `order` keeps them apart.
    for cand in sorted(candidates, key=lambda c: (c.sample_id, c.order)):
        decided = decide(cand)
        if decided is None:
            break
        outcomes[cand.order] = decided[0]
        if decided[1] is not None:
            rows.append(decided[1])
    return OverflowPlan(outcomes, decide.sizes, rows, decide.abort, decide.abort_reason)


def extra_turns_row(cand: Candidate, max_size: int) -> dict:
    """The overflow row of a dialogue skipped for having more trained turns than
    `max_turns` (`on_extra_turns="skip"`): never tokenized, so no token count."""
    return {"sample_id": cand.sample_id, "source_file": cand.source_file,
            "source_line": cand.source_line, "token_count": None, "max_unit_size": max_size,
            "action": "skip", "trained_turns": cand.trained_turns}


def kept_lengths(lengths: np.ndarray, keep, trained=None, even=False) -> np.ndarray:
    """Segment lengths after truncating rows of `lengths` to `keep` tokens each: from the
    end, segment by segment (mintdim's rule); or, with `even` (preference pairs), the
    untrained segments kept and the trained ones (both completions) cut to one common
    length, the largest that fits."""
    if not even:
        return truncated_lengths(lengths, keep)
    keep = np.broadcast_to(np.asarray(keep), lengths.shape[:1])
    out = truncated_lengths(np.where(trained, 0, lengths), keep)  # the context first
    room = keep - out.sum(axis=1)
    for row in range(len(lengths)):
        completions = lengths[row][trained]
        cap = _common_cap(completions, int(room[row]))
        out[row][trained] = np.minimum(completions, cap)
    return out


def _common_cap(lengths: np.ndarray, room: int) -> int:
    """The largest L with sum(min(length, L)) <= room."""
    low, high = 0, int(lengths.max(initial=0))
    while low < high:
        mid = (low + high + 1) // 2
        if int(np.minimum(lengths, mid).sum()) <= room:
            low = mid
        else:
            high = mid - 1
    return low


def long_line_row(cand: Candidate, max_size: int) -> dict:
    """The overflow row of a skipped over-long line: never tokenized, so its token count
    is null and its size in bytes is added last (other rows keep mintdim's keys)."""
    return {"sample_id": cand.sample_id, "source_file": cand.source_file,
            "source_line": cand.source_line, "token_count": None, "max_unit_size": max_size,
            "action": "skip", "line_bytes": cand.line_bytes}


def truncated_lengths(lengths: np.ndarray, keep) -> np.ndarray:
    """Segment lengths after keeping the first `keep` payload tokens. Also for many
    samples at once: rows of `lengths`, with one `keep` per row."""
    ends = np.minimum(np.cumsum(lengths, axis=-1), np.asarray(keep)[..., None])
    starts = np.concatenate((np.zeros_like(ends[..., :1]), ends[..., :-1]), axis=-1)
    return (ends - starts).astype(lengths.dtype)
