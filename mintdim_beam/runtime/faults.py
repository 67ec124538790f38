"""Test-only fault injection: make the first attempt of every bundle fail, so a runner
that retries bundles (the BundleBasedDirectRunner does, up to 4 attempts; Dataflow and
Flink do too) must produce the same bytes as a clean build.

Enabled by MINTDIM_FAULTS="stage[,stage...]@DIR" with stages `tokenize`, `write` and
`finalize` (which fails after writing the manifest, before removing the temporary parts);
DIR holds one marker per failed first attempt, so the failure happens once per element
across processes. Unset in normal runs: then `maybe_fail` is one dict lookup.
"""
from __future__ import annotations

import hashlib
import os

ENV = "MINTDIM_FAULTS"


class InjectedFault(RuntimeError):
    """A deliberate first-attempt failure (never raised unless MINTDIM_FAULTS is set)."""


def _config():
    spec = os.environ.get(ENV)
    if not spec or "@" not in spec:
        return None
    stages, directory = spec.split("@", 1)
    return set(stages.split(",")), directory


class BundleFaults:
    """At most one injected failure per bundle attempt: only a bundle's first element
    may fail, so a retried bundle (same first element, marker present) then succeeds."""

    def __init__(self, stage: str):
        self.stage = stage
        self._first = True

    def start_bundle(self) -> None:
        self._first = True

    def check(self, key, before_raise=None) -> None:
        if self._first:
            self._first = False
            maybe_fail(self.stage, key, before_raise)


def maybe_fail(stage: str, key, before_raise=None) -> None:
    """Fail the first attempt of `stage` on `key`; later attempts pass."""
    config = _config()
    if config is None or stage not in config[0]:
        return
    token = f"{stage}:{key!r}"
    marker = os.path.join(config[1], f"{stage}-{hashlib.sha1(token.encode()).hexdigest()}")
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # a retry: this element already failed once
    os.close(fd)
    if before_raise is not None:
        before_raise()
    raise InjectedFault(f"injected first-attempt failure in {stage} for {key!r}")
