"""`verify --deep`: re-tokenize a sample of the source lines and compare each with its
record in the shards, token for token.

Checksums prove the files are what the build wrote; this proves what the build wrote
is what its inputs and tokenizer give. The manifest's `build_config` (ours, from 0.2.0)
is rebuilt with the same code the build uses (`resolve_datasets`, `prepare`), the
sampled lines are read with the build's own line reader, rendered and encoded by the
build's `render_entries` and `BatchEncoder`, cut by its `Truncation` where the overflow
index says the record was truncated, and compared with the record read back through
`read.build`. The sample is evenly spaced over sample_index.jsonl (its first and last
rows included), so it is the same on every run.

It needs the inputs and the tokenizer where the build found them (paths as given,
relative ones from the current directory), unchanged since: otherwise it says why it
cannot compare, which fails the check."""
from __future__ import annotations

import json
import re
from collections import defaultdict

import numpy as np

from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt

DEFAULT_SAMPLES = 64
_UNIT = re.compile(rb'"unit_size": (\d+)')
NO_LIMIT = 1 << 40  # lines the build accepted are never over its own --max_line_bytes


class DeepChecks:
    """Mixin of the unit verifier. Reads: p, out, manifest, S, n, result. Sets
    result.deep (the samples re-tokenized, as "sample_id" or "sample_id/part")."""

    def _deep(self, count: int) -> None:
        self.result.deep = []
        plan = self._deep_plan()
        if plan is None:
            return
        picked = self._deep_rows(count)
        if not picked:
            return
        truncated = self._truncated()
        rejected = self._deep_rejected(count)
        wanted = {(row["source_file"], row["source_line"]) for _, _, row in picked}
        fresh = _retokenize(plan, {f for f, _ in wanted | rejected}, wanted | rejected, self.p,
                            rejected)
        for where in sorted(rejected - fresh.bad):  # on_bad_row: skip
            self.p.add(fmt.REJECTED_INDEX, None, f"{where[0]} line {where[1]} is listed as "
                       "rejected but reads and renders as a sample now")
        from mintdim_beam.read.build import open_build
        from mintdim_beam.unit_build.transforms.assign import truncation_rule

        build, rule = open_build(self.out), truncation_rule(plan)
        for number, ordinal, row in picked:
            part = row.get("part")
            name = str(row["sample_id"]) + ("" if part is None else f"/{part}")
            where = (fmt.SAMPLE_INDEX, number)
            key = (row["source_file"], row["source_line"], part or 0)
            if key not in fresh:
                if (row["source_file"], row["source_line"]) not in fresh.lines:
                    continue  # the reader said why
                self.p.add(*where, f"sample {name}: {row['source_file']} line "
                           f"{row['source_line']} gives no such record now")
                continue
            lengths, tokens, digest = fresh[key]
            if digest != row.get("hash"):
                self.p.add(*where, f"sample {name}: {row['source_file']} line "
                           f"{row['source_line']} renders to other text now (its sha256 is "
                           f"not the row's hash)")
                continue
            cut_to = truncated.get((row["sample_id"], part))
            if cut_to is not None:
                lengths, tokens = _cut(rule, lengths, tokens, cut_to)
            record = build.records(int(row["unit_size"]), np.asarray([ordinal]))[0]
            stored = record[1:1 + len(lengths)].astype(np.int64)
            payload = record[1 + len(lengths):1 + len(lengths) + int(stored.sum())]
            place = (row["shard_path"], ordinal % self.S)
            if not np.array_equal(stored, lengths):
                self.p.add(*place, f"sample {name} ({row['source_file']} line "
                           f"{row['source_line']}): segment lengths {stored.tolist()}, its "
                           f"line re-tokenized gives {lengths.tolist()}")
            elif not np.array_equal(payload.astype(np.int64), tokens):
                at = int(np.flatnonzero(payload.astype(np.int64) != tokens)[0])
                self.p.add(*place, f"sample {name} ({row['source_file']} line "
                           f"{row['source_line']}): token {at} is {int(payload[at])}, its "
                           f"line re-tokenized gives {int(tokens[at])}")
            self.result.deep.append(name)

    def _deep_plan(self):
        from mintdim_beam.core.config.prepare import prepare
        from mintdim_beam.core.config.unit_config import resolve_datasets

        return rebuild_problem(self.manifest, self.p,
                               lambda config: prepare(resolve_datasets(config)[0]))

    def _deep_rows(self, count: int) -> list:
        """[(line number in sample_index.jsonl, ordinal in its unit, row)], evenly spaced."""
        path = storage.join(self.out, fmt.SAMPLE_INDEX)
        with storage.open_read(path) as handle:
            total = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
        if total == 0:
            return []
        wanted = set(np.linspace(0, total - 1, min(count, total)).round().astype(int).tolist())
        seen, picked = defaultdict(int), []
        with storage.open_read(path) as handle:
            for number, line in enumerate(handle):
                match = _UNIT.search(line)
                unit = int(match.group(1)) if match else -1
                if number in wanted:
                    picked.append((number + 1, seen[unit], json.loads(line)))
                seen[unit] += 1
        return picked

    def _deep_rejected(self, count: int) -> set:
        """Up to `count` rows of rejected_index.jsonl, evenly spaced, as (file, line):
        each must still fail to become a sample. Lines over --max_line_bytes are read
        without the limit here, so they are left out."""
        rel = fmt.REJECTED_INDEX
        if rel not in self.files:
            return set()
        rows = [json.loads(line) for line in
                storage.read_bytes(storage.join(self.out, rel)).decode("utf-8").splitlines()]
        rows = [r for r in rows if "--max_line_bytes" not in str(r.get("reason"))]
        if not rows:
            return set()
        chosen = np.linspace(0, len(rows) - 1, min(count, len(rows))).round().astype(int)
        return {(rows[i]["source_file"], rows[i]["source_line"]) for i in set(chosen.tolist())}

    def _truncated(self) -> dict:
        """{(sample_id, part): the largest unit it was cut to} from overflow_index.jsonl."""
        out = {}
        with storage.open_read(storage.join(self.out, fmt.OVERFLOW_INDEX)) as handle:
            for line in handle:
                row = json.loads(line)
                if row.get("action") == "truncate":
                    out[(row["sample_id"], row.get("part"))] = int(row["max_unit_size"])
        return out


def rebuild_problem(manifest: dict, problems, make_plan):
    """The build's plan, `make_plan(manifest["build_config"])`; None (and a problem) when
    it cannot be rebuilt here, or the inputs are not what the build read."""
    from mintdim_beam.core.errors import MintDimError
    from mintdim_beam.core.inputs.input_files import recorded_status

    config = manifest.get("build_config")
    if not isinstance(config, dict):
        problems.add(fmt.MANIFEST, None, "--deep: no build_config in the manifest (a build by "
                     "mintdim 0.2.1 or by mintdim-beam before 0.2.0): its lines cannot be "
                     "re-tokenized")
        return None
    if (config.get("source") or {}).get("files") == []:
        problems.add(fmt.MANIFEST, None, "--deep: a build of the records of your own Beam "
                     "pipeline (mintdim_beam.transforms) has no input files to re-read: "
                     "verify it without --deep")
        return None
    for entry in manifest.get("inputs") or []:
        status = recorded_status(entry)
        if not status.startswith("unchanged"):
            problems.add(fmt.MANIFEST, None, f"--deep: input {entry.get('file')!r} is "
                         f"{status}: its lines cannot be compared with the records")
            return None
    try:
        return make_plan(config)
    except (MintDimError, OSError) as exc:
        text = getattr(exc, "english", None) or str(exc)
        problems.add(fmt.MANIFEST, None, "--deep: the build's config cannot be rebuilt here: "
                     + " ".join(text.split())[:300])
        return None


class _Fresh(dict):
    """{(file as given, line, part): (segment lengths, tokens, sha256)}; `lines`: the
    (file, line) pairs that were read and rendered without error."""

    def __init__(self):
        super().__init__()
        self.lines = set()
        self.bad = set()  # the expected bad rows that are bad rows still


def _retokenize(plan, files: set, wanted: set, problems, rejected: set = frozenset()) -> _Fresh:
    """Read, render and encode the `wanted` (file, line) pairs as the build does; of the
    `rejected` ones (rows the build left out) an error is expected, not reported."""
    from mintdim_beam.core.inputs.input_files import open_range
    from mintdim_beam.core.inputs.source import RangeBatches, plan_ranges
    from mintdim_beam.core.render.render_batch import layout_for, render_entries
    from mintdim_beam.core.tokenizer.encode_batch import BatchEncoder
    from mintdim_beam.core.tokenizer.tokenizers import cached_tokenizer

    dataset = plan.dataset
    tokenizer = cached_tokenizer(dataset.tokenizer_kind, dataset.tokenizer_path,
                                 dataset.tokenizer_options)
    encoder, layout = BatchEncoder(plan, tokenizer), layout_for(plan)
    fresh = _Fresh()
    for byte_range in plan_ranges([dataset], NO_LIMIT):
        given = dataset.files[byte_range.file_pos].given
        if given not in files:
            continue
        lines = {line - 1 for f, line in wanted if f == given}
        entries = []
        with open_range(byte_range) as handle:
            for _, batch in RangeBatches(handle, byte_range, 4096, NO_LIMIT):
                entries += [e for e in batch if e[1] in lines]
        batch, errors = render_entries(layout, byte_range.key + (0,), entries)
        for error in errors:
            if (given, error.local_line + 1) in rejected:
                fresh.bad.add((given, error.local_line + 1))
                continue
            problems.add(given, None, f"--deep: line {error.local_line + 1} no longer renders "
                         f"({error.cls}: {error.kwargs})")
        if batch is None:
            continue
        encoded = encoder.encode(batch["texts"])
        ends = np.cumsum(encoded.lengths.sum(axis=1))
        parts = batch.get("parts", np.zeros(len(batch["lines"]), dtype=np.int64))
        for i, (line, part) in enumerate(zip(batch["lines"].tolist(), parts.tolist())):
            start = int(ends[i] - encoded.lengths[i].sum())
            fresh[(given, line + 1, part)] = (encoded.lengths[i].astype(np.int64),
                                              encoded.tokens[start:int(ends[i])].astype(np.int64),
                                              batch["digests"][i])
            fresh.lines.add((given, line + 1))
    return fresh


def _cut(rule, lengths: np.ndarray, tokens: np.ndarray, keep: int):
    """The record `truncate` writes for these full segments, as the build cuts it."""
    from mintdim_beam.unit_build.transforms.stage import segment_gather

    full = lengths[None, :]
    kept = rule.cut(full, keep)
    tails = rule.segment_tails(full, kept)
    index = segment_gather(np.asarray([0]), full, kept, tails)
    return kept[0].astype(np.int64), tokens[index]
