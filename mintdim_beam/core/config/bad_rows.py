"""What a build does with a row that cannot become a sample (invalid JSON, not an
object, a schema error, invalid UTF-8, a line over --max_line_bytes): `abort` (the
default, mintdim's behaviour) raises the first one; `skip` leaves it out, records it in
`rejected_index.jsonl` and stops only when more than `max_rejected` of the rows are bad,
so a wrong schema never gives a quietly empty dataset."""
from __future__ import annotations

from dataclasses import dataclass

POLICIES = ("abort", "skip")
DEFAULT_MAX_REJECTED = 0.01


@dataclass(frozen=True)
class BadRows:
    policy: str = "abort"
    max_rejected: float = DEFAULT_MAX_REJECTED  # a fraction of the dataset's rows

    @property
    def skip(self) -> bool:
        return self.policy == "skip"

    def manifest_block(self, rejected: int, rows: int) -> dict:
        return {"on_bad_row": self.policy, "max_rejected": self.max_rejected,
                "rejected": rejected, "rows": rows}


def bad_rows(on_bad_row="abort", max_rejected=None) -> BadRows:
    """The checked policy (a `ConfigValueError` before any output)."""
    from mintdim_beam.core.config.schema import BAD_ROWS, check_choice
    from mintdim_beam.core.errors.config_keys import ConfigValueError

    on_bad_row = "abort" if on_bad_row is None else on_bad_row
    check_choice("on_bad_row", on_bad_row, POLICIES, BAD_ROWS["on_bad_row"].what)
    max_rejected = DEFAULT_MAX_REJECTED if max_rejected is None else max_rejected
    if type(max_rejected) not in (int, float) or not 0 <= max_rejected <= 1:
        raise ConfigValueError(key="max_rejected", value=max_rejected,
                               expected=BAD_ROWS["max_rejected"].what)
    return BadRows(on_bad_row, float(max_rejected))


def exceeds(policy: BadRows, rejected: int, rows: int) -> bool:
    """More rows rejected than the policy allows (`rows`: accepted + rejected)."""
    return rejected > 0 and rejected > policy.max_rejected * rows
