"""The base of every error: bilingual text kept as two blocks, keyword-only arguments
kept as JSON values (`exc.kwargs`), and a payload that rebuilds the same class on the
other side of a process boundary (pickling goes the same way)."""
from __future__ import annotations

from typing import Any

ERROR_CLASSES: dict[str, type["MintDimError"]] = {}

JSON_SCALARS = (str, int, float, bool, type(None))


def bullets(items) -> str:
    """Render items as ``• item`` lines."""
    return "\n".join(f"• {item}" for item in items)


def num(n: int, sep: str) -> str:
    """Format an int with a thousands separator (``,`` English, ``.`` Vietnamese)."""
    return f"{n:,}".replace(",", sep)


def strs(items) -> list[str]:
    return [str(x) for x in items]


def spaced(label: str, items) -> str:
    """``label: a b c`` (no trailing space when empty)."""
    return f"{label}: {' '.join(items)}".rstrip()


class MintDimError(Exception):
    """Base class of every MintDim error (bilingual message, picklable)."""

    kwargs: dict[str, Any]
    english: str
    vietnamese: str

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if not cls.__name__.startswith("_"):
            ERROR_CLASSES[cls.__name__] = cls

    def _set(self, kwargs: dict[str, Any], english: list[str], vietnamese: list[str]) -> None:
        """Store kwargs and join the message parts with blank lines."""
        name = type(self).__name__
        self.kwargs = kwargs
        self.english = f"[english] {name}: " + "\n\n".join(english)
        self.vietnamese = f"[vietnam] {name}: " + "\n\n".join(vietnamese)
        Exception.__init__(self, str(self))

    def _arity(self, kwargs: dict[str, Any], en: tuple[str, str, str], vi: tuple[str, str, str]) -> None:
        """Shared "Received N input files but M <things>" message (mapping errors)."""
        n, m = list(kwargs.values())[:2]
        self._set(
            kwargs,
            [f"Received {n} input files but {m} {en[0]}.", "MintDim supports:", bullets(en[1:])],
            [f"Nhận {n} file đầu vào nhưng có {m} {vi[0]}.", "MintDim hỗ trợ:", bullets(vi[1:])],
        )

    def __str__(self) -> str:
        return f"{self.english}\n\n{self.vietnamese}"

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{type(self).__name__}({args})"

    def to_payload(self) -> dict[str, Any]:
        """``{"class": name, "kwargs": kwargs}`` (JSON-serialisable), and the error's
        notes (`add_note`: what else the build found) when it has any."""
        payload = {"class": type(self).__name__, "kwargs": dict(self.kwargs)}
        if getattr(self, "__notes__", None):
            payload["notes"] = list(self.__notes__)
        return payload

    def __reduce__(self):
        return (error_from_payload, (self.to_payload(),))


def error_from_payload(payload: dict[str, Any]) -> MintDimError:
    """Rebuild the error described by ``MintDimError.to_payload()``."""
    name = payload.get("class")
    cls = ERROR_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown MintDim error class in payload: {name!r}")
    error = cls(**payload.get("kwargs", {}))
    for note in payload.get("notes", ()):
        error.add_note(str(note))
    return error
