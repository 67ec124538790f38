"""The reader's argument and state checks: each value an int in a stated range, or a
`ReaderArgumentError` (an argument) / `ReaderStateError` (a loaded state) that says the
range in both languages. Ints only: a bool, a float (`3.0`) or a string (`"3"`) is
refused rather than converted, since converting would hide a state or config that was
written by something else than the reader."""
from __future__ import annotations

import numbers

from mintdim_beam.core.errors import ReaderArgumentError, ReaderStateError
from mintdim_beam.core.errors.base import num

INT64_MAX = (1 << 63) - 1


def is_int(value) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def int_range(lo: int, hi: int | None, why: tuple[str, str] = ("", "")) -> tuple[str, str]:
    """`an int in lo..hi` in English and Vietnamese (thousands separated), plus `why`."""
    en = f"an int in {num(lo, ',')}..{num(hi, ',')}" if hi is not None else f"an int >= {num(lo, ',')}"
    vi = (f"một số nguyên trong khoảng {num(lo, '.')}..{num(hi, '.')}" if hi is not None
          else f"một số nguyên >= {num(lo, '.')}")
    return (f"{en} ({why[0]})" if why[0] else en), (f"{vi} ({why[1]})" if why[1] else vi)


def shown(value) -> str:
    """The value as given, with its type visible (`'3'`, `3.0`, `True`)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def argument(name: str, value, lo: int, hi: int | None, why: tuple[str, str] = ("", "")) -> int:
    if not is_int(value) or value < lo or (hi is not None and value > hi):
        en, vi = int_range(lo, hi, why)
        raise ReaderArgumentError(argument=name, value=shown(value), allowed=en, allowed_vi=vi)
    return int(value)


def state_value(key: str, state: dict, lo: int, hi: int | None,
                why: tuple[str, str] = ("", "")) -> int:
    value = state.get(key, _MISSING)
    if not is_int(value) or value < lo or (hi is not None and value > hi):
        en, vi = int_range(lo, hi, why)
        raise ReaderStateError(key=key, found="missing" if value is _MISSING else shown(value),
                               allowed=en, allowed_vi=vi)
    return int(value)


_MISSING = object()
