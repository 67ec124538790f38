"""What a build does with a row that cannot become a sample (invalid JSON, not an
object, a schema error, invalid UTF-8, a line over --max_line_bytes): `abort` (the
default, mintdim's behaviour) raises the first one; `skip` leaves it out, records it in
`rejected_index.jsonl` and stops only when more than `max_rejected` of the rows are bad,
so a wrong schema never gives a quietly empty dataset."""
from __future__ import annotations

from dataclasses import dataclass

import difflib

from mintdim_beam.core.errors.config_keys import ConfigValueError

POLICIES = ("abort", "skip")
DEFAULT_MAX_REJECTED = 0.01
# What each key holds, in words (the declared schema says the same: `schema.BAD_ROWS`).
POLICY_WHAT = "a row that cannot become a sample"
FRACTION_WHAT = ("a number from 0 to 1 (the fraction of rows that may be rejected under "
                 "on_bad_row: skip)")


@dataclass(frozen=True)
class BadRows:
    policy: str = "abort"
    max_rejected: float = DEFAULT_MAX_REJECTED  # a fraction of the dataset's rows

    @property
    def skip(self) -> bool:
        return self.policy == "skip"

    def manifest_block(self, rows: int) -> dict:
        """The policy and the rows it judged (accepted and rejected); the count of
        rejected ones is the manifest's `rejected`."""
        return {"on_bad_row": self.policy, "max_rejected": self.max_rejected, "rows": rows}


def bad_rows(on_bad_row="abort", max_rejected=None) -> BadRows:
    """The checked policy (a `ConfigValueError` before any output)."""
    on_bad_row = "abort" if on_bad_row is None else on_bad_row
    if on_bad_row not in POLICIES:
        near = difflib.get_close_matches(str(on_bad_row), POLICIES, n=1)
        raise ConfigValueError(key="on_bad_row", value=on_bad_row, expected=POLICY_WHAT,
                               allowed=list(POLICIES), suggestion=near[0] if near else None)
    max_rejected = DEFAULT_MAX_REJECTED if max_rejected is None else max_rejected
    if type(max_rejected) not in (int, float) or not 0 <= max_rejected <= 1:
        raise ConfigValueError(key="max_rejected", value=max_rejected, expected=FRACTION_WHAT)
    return BadRows(on_bad_row, float(max_rejected))


def exceeds(policy: BadRows, rejected: int, rows: int) -> bool:
    """More rows rejected than the policy allows (`rows`: accepted + rejected)."""
    return rejected > 0 and rejected > policy.max_rejected * rows
