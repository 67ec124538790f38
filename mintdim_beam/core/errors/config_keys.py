"""Config errors that say what kind of problem they are, beyond the seed's "Pipeline
configuration is incomplete" (which stays the error of a MISSING key, with the seed's
text): a key no block of that kind has (`ConfigUnknownKeyError`) and a value a key does
not allow (`ConfigValueError`), each with a "did you mean" when a known name is close.

Both are subclasses of `PipelineValidationError`: before these classes existed an unknown
key or a bad policy name was a `PipelineValidationError`, and code that catches that for
"the config is wrong" keeps catching them. Their heading and text are their own."""
from __future__ import annotations

from typing import Any

from mintdim_beam.core.errors.base import JSON_SCALARS
from mintdim_beam.core.errors.seed import PipelineValidationError


def _shown(value: Any) -> Any:
    """A JSON value kept as given; anything else by its repr (payloads stay JSON)."""
    if isinstance(value, JSON_SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        return [_shown(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _shown(v) for k, v in value.items()}
    return repr(value)


class ConfigUnknownKeyError(PipelineValidationError):
    """Raised before any output for a key its block does not have (a typo, a key of
    another source or tokenizer type, a key of the other command); names the key as the
    config writes it (`output.sampels_per_shard`, `on_overflw`), the nearest known key
    and every known key of that block."""

    def __init__(self, *, key: str, known: list[str], suggestion: str | None = None,
                 note: str = ""):
        kw = {"key": str(key), "known": [str(k) for k in known],
              "suggestion": None if suggestion is None else str(suggestion), "note": str(note)}
        en = ["Unknown config key.", f"Key: {kw['key']}"]
        vi = ["Khoá cấu hình không tồn tại.", f"Khoá: {kw['key']}"]
        if kw["suggestion"] is not None:
            en.append(f"Did you mean: {kw['suggestion']}?")
            vi.append(f"Có phải ý bạn là: {kw['suggestion']}?")
        if kw["note"]:
            en.append(f"Note: {kw['note']}")
            vi.append(f"Ghi chú: {kw['note']}")
        en.append(f"Known keys here: {', '.join(kw['known'])}")
        vi.append(f"Các khoá hợp lệ ở đây: {', '.join(kw['known'])}")
        self._set(kw, en, vi)


class ConfigValueError(PipelineValidationError):
    """Raised before any output for a value a key does not allow: a policy, format or
    kind that is not one of its names (all listed, the nearest first as a suggestion),
    or a value of the wrong shape (`expected` says which)."""

    def __init__(self, *, key: str, value: Any, expected: str, allowed: list | None = None,
                 suggestion: str | None = None):
        kw = {"key": str(key), "value": _shown(value), "expected": str(expected),
              "allowed": None if allowed is None else [str(a) for a in allowed],
              "suggestion": None if suggestion is None else str(suggestion)}
        en = ["Invalid config value.", f"Key: {kw['key']}", f"Value: {kw['value']!r}",
              f"Expected: {kw['expected']}"]
        vi = ["Giá trị cấu hình không hợp lệ.", f"Khoá: {kw['key']}",
              f"Giá trị: {kw['value']!r}", f"Cần: {kw['expected']}"]
        if kw["allowed"] is not None:
            en.append(f"Allowed values: {', '.join(kw['allowed'])}")
            vi.append(f"Các giá trị hợp lệ: {', '.join(kw['allowed'])}")
        if kw["suggestion"] is not None:
            en.append(f"Did you mean: {kw['suggestion']}?")
            vi.append(f"Có phải ý bạn là: {kw['suggestion']}?")
        self._set(kw, en, vi)
