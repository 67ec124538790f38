"""DecideOverflows: the one sequential step of a build. Every sample longer than the
largest declared unit (and every line skipped unread) is decided in sample_id order,
because an `extend` changes the sizes the later ones see.

Why streamed: at 5% overflows a build of ten million samples has half a million
candidates. As Python objects (candidates, an outcome dict, overflow rows as dicts,
pickled into a side input and unpickled by each consumer) they took about 75 MB per
million samples in the local run. Here the candidates are one int64 table per dataset,
turned into a `Candidate` one at a time as they are decided; the overflow rows stream
to the run's scratch as JSONL (Finalize moves them into place); and what the
assignment needs travels as one small int64 array per batch.
"""
from __future__ import annotations

from typing import NamedTuple

import apache_beam as beam
import numpy as np

from mintdim_beam.core.errors.failures import PendingError
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.inputs.source import long_line_reason
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.unit_build.packed import Packed
from mintdim_beam.unit_build.units import Candidate, OverflowDecider

# Columns of a dataset's candidate table; -1 stands for None (and for the batch and j
# of a line that was never tokenized).
SID, FILE, RANGE, BATCH, J, LINE, SOURCE_LINE, TOKENS, TRAINED_KEPT, PART, LINE_BYTES, \
    TRAINED_TURNS, KEPT = range(13)
COLUMNS = 13
_CHUNK = 4096  # candidates made into objects (and rows into text) at a time


class Decided(NamedTuple):
    """A dataset's decisions as the build carries them."""
    sizes: list  # final sizes, added ones included, ascending
    abort: Candidate | None  # where the build stops, if it does
    abort_reason: str  # "overflow" | "capacity" | "long_line" (see `OverflowPlan`)
    rows_path: str  # overflow_index.jsonl's rows, in the run's scratch
    rows_sum: object  # their checksums.FileSum, taken as they were written
    by_batch: dict  # chunk key -> int64 rows (j, local line, unit, truncated): kept ones


def rows_path(dataset) -> str:
    return storage.join(dataset.scratch_path, fmt.OVERFLOW_INDEX)


def candidate_tables(candidates, long_lines, numbering) -> dict:
    """{dataset: int64 table (columns above), sorted as the decisions go: by sample_id,
    then by place in the input}. `candidates`: `overflow_candidates` output per batch;
    `long_lines`: the pending lines over --max_line_bytes and skipped dialogues. Each
    table is allocated once and filled in place (per-batch pieces joined later left
    their freed memory to the allocator, 25 MB at 3 million samples)."""
    rows: dict = {}
    for chunk_key, entries, *_ in candidates:
        rows[chunk_key[0]] = rows.get(chunk_key[0], 0) + len(entries)
    for pending in long_lines:
        rows[pending.dataset] = rows.get(pending.dataset, 0) + 1
    tables = {ds: np.full((n, COLUMNS), -1, dtype=np.int64) for ds, n in rows.items()}
    filled = dict.fromkeys(rows, 0)
    names: dict = {}  # {dataset: {sample_id: source name}} of keyed records (`records`)
    for (ds, file_pos, range_no, batch_no), entries, *given in candidates:
        line_offset, _ = numbering[(ds, file_pos, range_no)]
        j, local_sample, local_line, tokens, trained_kept, part, kept = \
            np.asarray(entries)[:, :7].T
        at = filled[ds]
        table = tables[ds][at:at + len(j)]
        filled[ds] = at + len(j)
        table[:, SID] = numbering.sample_ids((ds, file_pos, range_no), local_sample)
        table[:, LINE] = local_line
        table[:, FILE], table[:, RANGE], table[:, BATCH], table[:, J] = \
            file_pos, range_no, batch_no, j
        table[:, SOURCE_LINE] = line_offset + local_line + 1
        table[:, TOKENS], table[:, TRAINED_KEPT], table[:, PART] = tokens, trained_kept, part
        table[:, KEPT] = kept
        if given:  # keyed records: each one's own source (name, and line in column 7)
            table[:, SOURCE_LINE] = np.asarray(entries)[:, 7]
            names.setdefault(ds, {}).update(zip(table[:, SID].tolist(), given[0]))
    for pending in long_lines:
        line_offset, _ = numbering[pending.order[:3]]
        row = tables[pending.dataset][filled[pending.dataset]]
        filled[pending.dataset] += 1
        row[[SID, FILE, RANGE, LINE, SOURCE_LINE]] = (
            numbering.sample_ids(pending.order[:3], pending.local_sample), pending.file_pos, pending.range_no,
            pending.local_line, line_offset + pending.local_line + 1)
        if pending.source:  # a keyed record: its own source
            row[SOURCE_LINE] = pending.source[1]
            names.setdefault(pending.dataset, {})[int(row[SID])] = pending.source[0]
        row[LINE_BYTES] = getattr(pending, "line_bytes", -1)
        row[TRAINED_TURNS] = getattr(pending, "trained_turns", -1)
    return ({ds: table[np.lexsort(table[:, [LINE, J, BATCH, RANGE, FILE, SID]].T)]
             for ds, table in tables.items()}, names)


def _none(value: int):
    return None if value < 0 else value


def _candidates(ds: int, rows: np.ndarray, files, names=None):
    """The table's rows as `Candidate`s, as the interactive plan numbers them; `names`:
    keyed records' sources by sample_id (their files are no input's)."""
    for sid, fp, rn, bn, j, line, source_line, tokens, trained, part, nbytes, turns, kept \
            in rows.tolist():
        yield Candidate(order=(ds, fp, rn, bn, j, line), sample_id=sid,
                        token_count=_none(tokens),
                        source_file=names[sid] if names else files[fp].given,
                        source_line=source_line, line_bytes=_none(nbytes),
                        trained_kept=_none(trained), trained_turns=_none(turns),
                        part=_none(part), kept=_none(kept))


def decide_dataset(ds: int, table: np.ndarray, plan, choose, names=None) -> Decided:
    """Decide a dataset's candidates in table order, writing its overflow rows."""
    dataset = plan.dataset
    decide = OverflowDecider(dataset.sizes, choose, capacity=plan.magic,
                             empty_cut_reason=empty_cut_reason(plan))
    units = np.full(len(table), -1, dtype=np.int64)
    truncated = np.zeros(len(table), dtype=np.int64)

    def row_text():
        for lo in range(0, len(table), _CHUNK):
            text = []
            for i, cand in enumerate(_candidates(ds, table[lo:lo + _CHUNK], dataset.files,
                                                 names), lo):
                decided = decide(cand)
                if decided is None:
                    yield "".join(text).encode("utf-8")
                    return
                outcome, row = decided
                if outcome.unit is not None:
                    units[i], truncated[i] = outcome.unit, outcome.action == "truncate"
                if row is not None:
                    text.append(fmt.jsonl_row(row))
            yield "".join(text).encode("utf-8")

    path = rows_path(dataset)
    rows_sum = checksums.write_stream(path, row_text(), dataset.output_path)
    kept = np.flatnonzero((units >= 0) & (table[:, BATCH] >= 0))
    kept = kept[np.lexsort(table[kept][:, [BATCH, RANGE, FILE]].T)]
    keys = table[kept][:, [FILE, RANGE, BATCH]]
    bounds = (np.flatnonzero(np.any(np.diff(keys, axis=0), axis=1)) + 1).tolist()
    by_batch = {}
    for lo, hi in zip([0] + bounds, bounds + [len(kept)]):
        if lo < hi:
            rows = kept[lo:hi]
            by_batch[(ds, *keys[lo].tolist())] = np.stack(
                [table[rows, J], table[rows, LINE], units[rows], truncated[rows]], axis=1)
    return Decided(decide.sizes, decide.abort, decide.abort_reason, path, rows_sum, by_batch)


def empty_cut_reason(plan) -> str | None:
    """Why `truncate` skipped a dialogue record (None: the decider's default)."""
    dialogue = plan.dataset.dialogue
    if dialogue is None:
        return None
    return fmt.CUT_REASON_PREFERENCE if dialogue.kind == "preference" else fmt.CUT_REASON_CHAT


def decide_all(candidates, plans, numbering, choosers, long_lines=()) -> Packed:
    """{dataset: Decided}, packed."""
    tables, names = candidate_tables(candidates, long_lines, numbering)
    empty = np.zeros((0, COLUMNS), dtype=np.int64)
    return Packed({ds: decide_dataset(ds, tables.get(ds, empty), plans[ds], choosers[ds],
                                      names.get(ds))
                   for ds in plans})


def _abort_error(decided: Decided, plan, max_line_bytes) -> tuple[str, dict, str]:
    """(error class, kwargs, locator) of the candidate the decision stopped at."""
    cand = decided.abort
    if decided.abort_reason == "long_line":
        return "SourceParseError", {"reason": long_line_reason(cand.line_bytes, max_line_bytes)}, \
            "file_line"
    if decided.abort_reason == "capacity":
        return "TokenDTypeCapacityError", {
            "dtype": plan.token_dtype, "max_value": plan.magic, "token_count": cand.token_count,
            "vocab_size": plan.vocab_size}, "sample"
    return "UnitOverflowError", {"token_count": cand.token_count,
                                 "max_unit_size": decided.sizes[-1]}, "sample"


def abort_errors(packed: Packed, plans: dict, max_line_bytes: int | None = None):
    for ds, decided in packed.unpack().items():
        if decided.abort is not None:
            cand = decided.abort
            _, file_pos, range_no, _, _, local_line = cand.order
            # its source as the decision numbered it (a keyed record's own)
            yield PendingError(ds, file_pos, range_no, local_line,
                               *_abort_error(decided, plans[ds], max_line_bytes),
                               source=(cand.source_file, cand.source_line))


def outcomes_by_batch(packed: Packed) -> Packed:
    """{(dataset, chunk): int64 rows (j, local line, unit, truncated)}: the samples past
    the declared units that are kept, all the assignment needs of the decisions."""
    return Packed({key: rows for decided in packed.unpack().values()
                   for key, rows in decided.by_batch.items()})


class DecideOverflows(beam.PTransform):
    """Overflow candidates per batch -> one Packed {dataset: Decided}."""

    def __init__(self, plans, choosers, overflow_candidates):
        super().__init__()
        self._plans, self._choosers = plans, choosers
        self._candidates = overflow_candidates

    def expand(self, inputs):
        """`inputs`: (tokenized, numbering, long lines): the lines over --max_line_bytes
        are candidates too, skipped or stopped at in sample_id order."""
        tokenized, numbering, long_lines = inputs
        plans, choosers, candidates = self._plans, self._choosers, self._candidates
        return (tokenized
                | "OverflowCandidates" >> beam.FlatMap(lambda e: candidates(plans, e))
                | "Decide" >> ApplyToAll(
                    lambda cands, num, longs: decide_all(cands, plans, num, choosers, longs),
                    beam.pvalue.AsSingleton(numbering), beam.pvalue.AsList(long_lines)))
