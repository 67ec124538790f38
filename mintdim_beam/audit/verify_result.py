"""What `verify` returns: its problems (file, record or line, what), the counts it
measured, and the collector that keeps the first problems and folds repeated kinds.
Shared by the unit-build and pack-build verifiers."""
from __future__ import annotations

from dataclasses import dataclass, field

from mintdim_beam.core.formats import mintdim as fmt


@dataclass
class Problem:
    file: str              # relative to OUT ("" for OUT itself)
    record: int | None     # record index inside a shard, 1-based line of a .jsonl, or None
    what: str

    def where(self) -> str:
        if self.record is None:
            return self.file or "."
        unit = "line" if self.file.endswith(".jsonl") else "record"
        return f"{self.file} ({unit} {self.record})"

    def __str__(self) -> str:
        return f"{self.where()}: {self.what}"


@dataclass
class VerifyResult:
    out: str
    problems: list[Problem] = field(default_factory=list)
    # problems found, each repeated kind once (its entry says how many more like it);
    # `problems` holds the first max_problems
    problem_count: int = 0
    records: int = 0         # records in the shards
    shards: int = 0
    units: int = 0           # unit directories (manifest units.sizes)
    units_with_records: int = 0
    samples: int = 0         # sample_index rows
    tokens: int = 0          # sum of sample_index token_count
    bytes: int = 0           # shard bytes scanned
    seconds: float = 0.0
    # (file as given, status) per input the manifest records (`inputs`, ours; absent in
    # a mintdim 0.2.1 build): informational, a later change does not fail the build
    inputs: list = field(default_factory=list)
    # files whose content matched the manifest's sha256 (`checksum_check`); None: the
    # manifest records no checksums, so content is not proven
    checksummed: int | None = None
    deep: list | None = None  # `verify --deep`: the samples re-tokenized (`deep_check`)
    runner: str | None = None  # `verify --runner`: where the content was proven
    tasks: int = 0  # ... in how many tasks
    deep_unit = "records"

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def deep_text(self) -> str:
        if self.deep is None:
            return ""
        return (f", {len(self.deep)} sampled {self.deep_unit} equal their lines "
                f"re-tokenized (samples {_listing(self.deep)})")

    def content(self) -> str:
        if self.checksummed is None:
            return "content not proven (no checksums in the manifest)"
        return f"content as written (sha256 of {self.checksummed} files)"

    def on_runner(self) -> str:
        """The OK line of `verify --runner`: what was proven there, and what was not."""
        return (f"verify {self.out}: OK on {self.runner}, {self.content()} in {self.tasks} "
                f"tasks; layout and manifest checked here; the records' structure not "
                f"reread (verify without --runner reads it), {self.seconds:.2f} s")

    def summary(self) -> str:
        if self.ok and self.runner:
            return self.on_runner()
        if self.ok:
            return (f"verify {self.out}: OK, {self.records} records, {self.shards} shards, "
                    f"{self.units} units ({self.units_with_records} with records), "
                    f"{self.tokens} tokens, {fmt.format_mib(self.bytes)}, "
                    f"{self.content()}{self.deep_text()}, {self.seconds:.2f} s")
        shown = len(self.problems)
        more = f", first {shown} shown" if shown < self.problem_count else ""
        return (f"verify {self.out}: FAILED, {self.problem_count} problem"
                f"{'s' if self.problem_count != 1 else ''}{more} ({self.seconds:.2f} s)")


class Problems:
    """Keeps the first `limit` problems. A repeated kind of problem (same key) is folded
    into its first occurrence as a count, so one corrupt unit cannot flood the list."""

    def __init__(self, limit: int):
        self.limit = max(0, limit)
        self.kept: list[Problem] = []
        self.total = 0
        self._first: dict = {}
        self._more: dict = {}

    def add(self, file: str, record, what: str, key=None, count: int = 1) -> None:
        if key is not None and key in self._first:
            self._more[key] += count
            return
        problem = Problem(file, None if record is None else int(record), what)
        self.total += 1
        if key is not None:
            self._first[key] = problem
            self._more[key] = count - 1
        if len(self.kept) < self.limit:
            self.kept.append(problem)

    def finish(self) -> list[Problem]:
        for key, more in self._more.items():
            if more:
                self._first[key].what += f" (and {more} more like it)"
        return self.kept


def _listing(names: list, shown: int = 8) -> str:
    head = ", ".join(names[:shown])
    return head + (f", ... {len(names) - shown} more" if len(names) > shown else "")
