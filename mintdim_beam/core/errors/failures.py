"""Errors found inside the pipeline: held as data until line numbers are known, then the
first one (in file and line order) is raised in a way that survives any runner.

Runners wrap worker exceptions in their own types and messages; the payload marker lets
the launcher rebuild the original error class with its bilingual text.
"""
from __future__ import annotations

import base64
import json
import logging
import re
from dataclasses import dataclass

from mintdim_beam.core.errors import MintDimError, error_from_payload

_MARKER = re.compile(r"MINTDIM-ERROR\[([A-Za-z0-9+/=]+)\]")


@dataclass(frozen=True)
class PendingError:
    """An error at (dataset, file, range, local line) whose line number is not known yet."""

    dataset: int
    file_pos: int
    range_no: int
    local_line: int
    cls: str
    kwargs: dict
    locator: str  # "file_line": kwargs get file= and line=; "sample": sample="file:line";
    # "none": the kwargs say where
    local_sample: int = -1  # the line's sample number in its range (-1: not known)
    # (source_file, source_line) a keyed record stands for (`records`): given, not
    # derived from the numbering; () for a line of an input file
    source: tuple = ()

    @property
    def order(self) -> tuple:
        return (self.dataset, self.file_pos, self.range_no, self.local_line)


@dataclass(frozen=True)
class LongLinePending(PendingError):
    """A line over --max_line_bytes: a `SourceParseError`, unless the overflow policy is
    `skip`, which drops it and indexes it (so it keeps its sample's number)."""

    line_bytes: int = 0


@dataclass(frozen=True)
class ExtraTurnsPending(PendingError):
    """A dialogue with more trained turns than `max_turns` under `on_extra_turns="skip"`:
    never an error, always skipped and indexed (it keeps its sample's number)."""

    trained_turns: int = 0


def resolve(pending: PendingError, numbering: dict, datasets) -> dict:
    """The error's payload with its real file and 1-based line number."""
    if pending.source:
        source_file, line = pending.source
    else:
        line_offset, _ = numbering[(pending.dataset, pending.file_pos, pending.range_no)]
        line = line_offset + pending.local_line + 1
        source_file = datasets[pending.dataset].files[pending.file_pos].given
    kwargs = dict(pending.kwargs)
    if pending.locator == "none":  # the error names its place itself (`RecordKeyError`)
        return {"class": pending.cls, "kwargs": kwargs}
    if pending.locator == "sample":
        kwargs["sample"] = f"{source_file}:{line}"
    else:
        kwargs["file"] = source_file
        kwargs["line"] = line
    return {"class": pending.cls, "kwargs": kwargs}


def one_line(payload: dict) -> str:
    """What is wrong with a row, in one line (for `rejected_index.jsonl` and notes)."""
    kw = payload.get("kwargs", {})
    if kw.get("reason"):
        return str(kw["reason"])
    if kw.get("problem"):
        at = kw.get("message_index")
        return str(kw["problem"]) + ("" if at is None else f" (message {at})")
    if kw.get("invalid_field") is not None:
        return (f"field {kw['invalid_field']!r} is {kw.get('invalid_type')}, not a string, "
                "number or boolean")
    if kw.get("missing_fields"):
        keys = ", ".join(kw.get("available_keys") or []) or "none"
        return f"missing field(s) {', '.join(kw['missing_fields'])} (the row has: {keys})"
    text = str(error_from_payload(payload)).split("\n", 1)[0]
    return text.split(": ", 1)[-1]


def rejected_row(pending: PendingError, numbering: dict, datasets) -> dict:
    """A row of `rejected_index.jsonl`: where the row is, its error class and why."""
    payload = resolve(pending, numbering, datasets)  # a bad row's locator is file_line
    return {"source_file": payload["kwargs"]["file"], "source_line": payload["kwargs"]["line"],
            "error": payload["class"], "reason": one_line(payload)}


class WorkerFailure(RuntimeError):
    """Raised in a worker; its message carries the original error for the launcher."""

    def __init__(self, payload: dict):
        encoded = base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")
        error = error_from_payload(payload)
        super().__init__(f"MINTDIM-ERROR[{encoded}]\n{error}")


def recover(exc: BaseException) -> MintDimError | None:
    """Find a carried MintDim error anywhere in a runner's exception text or chain."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MintDimError):
            return exc
        match = _MARKER.search(str(exc)) or _MARKER.search(repr(exc.args))
        if match:
            payload = json.loads(base64.b64decode(match.group(1)).decode("utf-8"))
            return error_from_payload(payload)
        exc = exc.__cause__ or exc.__context__
    return None


class _CarriedErrorFilter(logging.Filter):
    """Beam logs every exception a transform raises, traceback and all, before the
    launcher sees it; ours (a bad line, a full disk, an abort) are reported once, by the
    launcher, in plain words. Every other exception is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _MARKER.search(str(record.msg)):
            return False
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not _MARKER.search(str(error))


# The loggers that report a failed bundle: in the worker running it, and in the runner.
for _name in ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker",
              "apache_beam.runners.worker.bundle_processor"):
    logging.getLogger(_name).addFilter(_CarriedErrorFilter())
