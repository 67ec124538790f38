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

from mintdim_beam.core.config.schema import OVERFLOW_POLICIES as POLICIES
from mintdim_beam.core.config.schema import TEMPLATE_UNK_POLICIES  # noqa: F401 - declared there


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
    kept: int | None = None  # tokens `truncate` keeps (`Truncation`); None: the largest unit


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

    empty_cut_reason = "no trained tokens left after truncation"

    def __init__(self, declared, choose: Chooser, capacity: int | None = None,
                 empty_cut_reason: str | None = None):
        self.sizes = sorted(declared)
        if empty_cut_reason is not None:
            self.empty_cut_reason = empty_cut_reason
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
            row.update(action="skip", reason=self.empty_cut_reason)
        elif action == "truncate":  # to the smallest unit that holds what the cut keeps
            unit = max_size if cand.kept is None else smallest_fit(sizes, cand.kept)
            outcome = Outcome("truncate", unit, max_size)
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


@dataclass(frozen=True)
class Truncation:
    """How `truncate` cuts a record to fit the largest unit. The ends always survive:

    - "tail" (JSONL templates): from the end, segment by segment (mintdim's rule), with
      the `protected` segments (the `bos` / `eos` ids) kept whole: the content is cut,
      not the ends. Without protected segments, exactly mintdim 0.2.1's cut.
    - "turns" (chat records): the longest prefix that ends with a whole trained turn
      (its end-of-turn text included) and fits; everything after it is dropped, the
      protected segments kept. No whole trained turn fits: nothing to train on (the
      record is skipped by the decision).
    - "even" (preference pairs): the context kept (cut from the end if it alone is too
      long), both completions cut to one common length, the largest that fits; each
      completion keeps its last `tails` tokens (its EOS) when cut.

    Segments are indices into the dataset's template; `tails` has one count per segment."""

    mode: str = "tail"
    protected: tuple = ()
    trained: tuple = ()
    tails: tuple = ()

    @property
    def plain(self) -> bool:
        """mintdim's own rule: every kept token is a prefix of the record's payload."""
        return self.mode == "tail" and not self.protected

    def cut(self, lengths: np.ndarray, keep) -> np.ndarray:
        """Segment lengths of the rows of `lengths` cut to `keep` tokens each (at most)."""
        keep = np.broadcast_to(np.asarray(keep, dtype=np.int64), lengths.shape[:1])
        guard = np.zeros(lengths.shape[1], dtype=bool)
        guard[list(self.protected)] = True
        if self.mode == "even":
            return self._even(lengths, keep)
        ends = np.where(guard, lengths, 0)
        budget = keep - ends.sum(axis=1)
        body = np.where(guard, 0, lengths)
        if self.mode == "turns":
            out = self._turns(body, budget)
        else:
            out = truncated_lengths(body, np.maximum(budget, 0))
        out = out + ends
        short = budget < 0  # the ends alone do not fit: mintdim's cut, ends and all
        if short.any():
            out[short] = truncated_lengths(lengths[short], keep[short])
        return out.astype(lengths.dtype)

    def _turns(self, body: np.ndarray, budget: np.ndarray) -> np.ndarray:
        out = np.zeros_like(body)
        trained = np.asarray(self.trained, dtype=np.int64)
        cums = np.cumsum(body, axis=1)
        for row in range(len(body)):
            fits = trained[cums[row, trained] <= budget[row]]
            if len(fits):
                last = int(fits[-1])
                out[row, :last + 1] = body[row, :last + 1]
        return out

    def _even(self, lengths: np.ndarray, keep: np.ndarray) -> np.ndarray:
        trained = np.zeros(lengths.shape[1], dtype=bool)
        trained[list(self.trained)] = True
        out = truncated_lengths(np.where(trained, 0, lengths), keep)  # the context first
        room = keep - out.sum(axis=1)
        for row in range(len(lengths)):
            completions = lengths[row][trained]
            cap = _common_cap(completions, int(room[row]))
            out[row][trained] = np.minimum(completions, cap)
        return out

    def trained_tokens(self, kept: np.ndarray) -> np.ndarray:
        return kept[:, list(self.trained)].sum(axis=1)

    def segment_tails(self, full: np.ndarray, kept: np.ndarray) -> np.ndarray | None:
        """Tokens each cut segment keeps from its end (None: every segment keeps a
        prefix)."""
        if not any(self.tails):
            return None
        tails = np.asarray(self.tails, dtype=np.int64)[None, :]
        return np.where(kept < full, np.minimum(tails, kept), 0)


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
