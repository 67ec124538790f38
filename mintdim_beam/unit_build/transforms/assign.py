"""AssignUnit: each sample's unit (the overflow decisions applied, `decide.py`), its rank
within the unit and so its shard, without ever grouping a whole unit.

Ranks come from per-(batch, unit) counts turned into prefix sums: a small side input.
"""
from __future__ import annotations

import itertools
import operator
from collections import Counter

import apache_beam as beam
import numpy as np

from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.render.template import EDGE_NAMES
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.runtime.progress import tally
from mintdim_beam.unit_build.packed import Packed
from mintdim_beam.unit_build.transforms.duplicates import hash_ref, hashes_path, write_hash_rows
from mintdim_beam.unit_build.transforms.spill import SpilledBatch, load
from mintdim_beam.unit_build.transforms.stage import (BlockRange, block_path, block_sections,
                                                      overflow_path, segment_gather, unit_records)
from mintdim_beam.unit_build.units import Candidate, Truncation, assign_declared

HASHES = "hashes"
INDEX_PARTS = "index_parts"
STATS = "stats"
LOCAL_HASH_BUCKETS = 64
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


def hash_buckets(raw: bytes, buckets: int) -> np.ndarray:
    """Bucket of each 32-byte digest in `raw`: its first 48 bits modulo `buckets`."""
    prefixes = np.zeros((len(raw) // 32, 8), dtype=np.uint8)
    prefixes[:, 2:] = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 32)[:, :6]
    return (prefixes.view(">u8")[:, 0] % np.uint64(buckets)).astype(np.int64)


def hash_bucket_count(samples: int, samples_per_shard: int, staged: bool) -> int:
    """Buckets a dataset's hash entries are grouped in: one per shard's worth of samples,
    so each group stays small and a cluster spreads them; a staged (local) build caps
    them at `LOCAL_HASH_BUCKETS`: each batch sends one reference per bucket it has
    entries in, so uncapped the references grow as samples squared (1.2 million of them
    at 10 million samples), while a capped group holds at most samples / 64 rows."""
    buckets = -(-samples // samples_per_shard)
    return min(buckets, LOCAL_HASH_BUCKETS) if staged else buckets


def declared_units(plans, element):
    """(dataset, chunk) -> Counter of declared units, for samples that fit them."""
    chunk_key, batch = element
    if isinstance(batch, SpilledBatch):
        return chunk_key, Counter(batch.declared)
    plan = plans[chunk_key[0]]
    units = assign_declared(plan.dataset.sizes, batch["lengths"].sum(axis=1))
    counts = Counter(units[units > 0].tolist())
    return chunk_key, counts


def overflow_candidates(plans, element):
    """Samples longer than the largest declared size: the only order-dependent ones.
    One element per batch that has any: (chunk key, int64 rows of (j, local sample,
    local line, token count, trained tokens a truncation keeps or -1, part or -1, tokens
    a truncation keeps)). One array, not a tuple per sample: the decision reads
    them as a side input, which Beam weighs object by object (0.05 s of the step for
    5,000 candidates as tuples)."""
    chunk_key, batch = element
    if isinstance(batch, SpilledBatch):
        yield from batch.candidates
        return
    plan = plans[chunk_key[0]]
    totals = batch["lengths"].sum(axis=1)
    js = np.nonzero(totals > plan.dataset.sizes[-1])[0]
    if len(js):
        trained_kept = np.full(len(js), -1, dtype=np.int64)  # -1: not a dialogue
        rule = truncation_rule(plan)
        full = batch["lengths"][js]
        kept = rule.cut(full, plan.dataset.sizes[-1])  # what truncation would keep
        if rule.trained:  # and leave to train on
            trained_kept = rule.trained_tokens(kept)
            if rule.mode == "even":  # a pair cut to the same tokens holds no preference
                starts = token_starts(plan, batch)[js]
                same = [_same_completions(rule, batch["tokens"], start, f, k)
                        for start, f, k in zip(starts.tolist(), full, kept)]
                trained_kept[np.asarray(same, dtype=bool)] = 0
        parts = batch["parts"][js] if "parts" in batch else np.full(len(js), -1)
        columns = [js, batch["samples"][js], batch["lines"][js], totals[js], trained_kept,
                   parts, kept.sum(axis=1)]
        if "sources" not in batch:
            yield chunk_key, np.stack(columns, axis=1).astype(np.int64)
            return
        # keyed records (`records.order`): each one's source line, and names beside
        columns.append(batch["source_lines"][js])
        yield (chunk_key, np.stack(columns, axis=1).astype(np.int64),
               [batch["sources"][j] for j in js.tolist()])


def remap_unks(details, full, kept, tails=None):
    """A sample's UNK (positions, segment indices, surfaces) after its segments were cut
    to `kept` tokens each (from `full`): positions move with their segment; a segment
    that keeps its last `tails` tokens (an EOS, never an UNK) keeps its UNKs before them."""
    old_starts, new_starts = np.cumsum(full) - full, np.cumsum(kept) - kept
    heads = kept if tails is None else kept - tails
    out = ([], [], [])
    for position, segment, surface in zip(*details):
        offset = position - old_starts[segment]
        if offset < heads[segment]:
            out[0].append(int(new_starts[segment] + offset))
            out[1].append(segment)
            out[2].append(surface)
    return out


def truncation_rule(plan) -> Truncation:
    """The dataset's `Truncation`: JSONL records from the end, chat records by whole
    turns, preference pairs evenly; the bos / eos ids always kept."""
    segments = plan.template.segments
    protected = tuple(i for i, s in enumerate(segments)
                      if s.kind == "literal" and s.name in EDGE_NAMES)
    if plan.dataset.dialogue is None:
        return Truncation("tail", protected)
    trained = tuple(i for i, s in enumerate(segments) if s.kind == "trained")
    tails = tuple(len(plan.appended_ids.get(i, ())) for i in range(len(segments)))
    mode = "even" if plan.dataset.dialogue.kind == "preference" else "turns"
    return Truncation(mode, protected, trained, tails)


def token_starts(plan, batch) -> np.ndarray:
    """Where each sample's tokens start in `batch["tokens"]`: a staged batch holds only
    the samples past the declared units (`StageRecords`), the others' are in its block."""
    totals = batch["lengths"].sum(axis=1)
    if batch.get("staged", False):
        totals = np.where(assign_declared(plan.dataset.sizes, totals) == 0, totals, 0)
    return np.cumsum(totals) - totals


def _same_completions(rule: Truncation, tokens, start: int, full, kept) -> bool:
    """Whether a pair's two completions, cut to `kept`, are the same tokens."""
    tails = rule.segment_tails(full[None, :], kept[None, :])
    index = segment_gather(np.asarray([start]), full[None, :], kept[None, :], tails)
    ends = np.cumsum(kept)
    chosen, rejected = rule.trained
    return bool(np.array_equal(tokens[index][ends[chosen] - kept[chosen]:ends[chosen]],
                               tokens[index][ends[rejected] - kept[rejected]:ends[rejected]]))


def number_candidates(candidates, datasets, numbering) -> dict:
    """Per-batch raw candidates -> {dataset: [Candidate]} with sample ids and lines."""
    by_ds: dict = {}
    for chunk_key, entries, *_ in candidates:
        ds, file_pos, range_no, _ = chunk_key
        line_offset, _ = numbering[(ds, file_pos, range_no)]
        source_file = datasets[ds].files[file_pos].given
        ids = numbering.sample_ids((ds, file_pos, range_no), entries[:, 1]).tolist()
        by_ds.setdefault(ds, []).extend(
            Candidate(order=chunk_key + (j, local_line), sample_id=sample_id,
                      token_count=token_count, source_file=source_file,
                      source_line=line_offset + local_line + 1,
                      trained_kept=None if trained_kept < 0 else trained_kept,
                      part=None if part < 0 else part, kept=None if kept < 0 else kept)
            for sample_id, (j, _, local_line, token_count, trained_kept, part, kept, *_)
            in zip(ids, entries.tolist()))
    return by_ds


def _unit_offsets(counts, packed_outcomes: Packed):
    """(dataset, chunk) -> {unit: number of earlier samples in that unit}."""
    per_chunk: dict = {}
    for chunk_key, counter in counts:
        per_chunk.setdefault(chunk_key, Counter()).update(counter)
    for chunk_key, kept in packed_outcomes.unpack().items():  # (j, line, unit, truncated)
        per_chunk.setdefault(chunk_key, Counter()).update(kept[:, 2].tolist())
    offsets, running = {}, {}
    for chunk_key in sorted(per_chunk):
        ds = chunk_key[0]
        totals = running.setdefault(ds, Counter())
        offsets[chunk_key] = dict(totals)
        totals.update(per_chunk[chunk_key])
    return offsets


class AssignFn(beam.DoFn):
    def __init__(self, plans: dict):
        self._plans = plans

    def process(self, element, packed_outcomes, offsets, numbering):
        chunk_key, batch = element
        batch = load(batch)  # a spilled batch comes back from the scratch dir here
        ds, file_pos, range_no, _ = chunk_key
        plan = self._plans[ds]
        dataset = plan.dataset
        line_offset, _ = numbering[(ds, file_pos, range_no)]
        # Each record of a user's pipeline brings its own source (`records.order`).
        sources = batch.get("sources")
        if sources is None:
            file_json = fmt.json_string(dataset.files[file_pos].given)
            file_jsons = None
        else:
            quoted = {name: fmt.json_string(name) for name in set(sources)}  # once a name
            file_jsons = list(map(quoted.__getitem__, sources))
        lengths, tokens = batch["lengths"].copy(), batch["tokens"]  # inputs are shared: copy
        totals = lengths.sum(axis=1)
        declared = assign_declared(dataset.sizes, totals)
        units = declared.copy()
        # Staged batches (StageRecords) carry the tokens of the overflow samples only:
        # the others' records are in the batch's block already.
        staged = batch.get("staged", False)
        inline = declared == 0 if staged else np.ones(len(units), dtype=bool)
        inline_totals = np.where(inline, totals, 0)
        starts = np.cumsum(inline_totals) - inline_totals  # where each one's tokens start
        keep = totals.copy()
        kept = packed_outcomes.unpack().get(chunk_key)  # rows (j, line, unit, truncated)
        outcomes = {} if kept is None else {(j, line): (unit, cut)
                                            for j, line, unit, cut in kept.tolist()}
        truncated = []
        for j in np.nonzero(units == 0)[0].tolist():
            unit, cut = outcomes.get((j, int(batch["lines"][j])), (None, False))
            if unit is None:
                continue  # skipped (or after an abort): no record, no rows, not counted
            units[j] = unit
            if cut:
                keep[j] = unit
                truncated.append(j)
        full, tails = lengths, None
        if truncated:
            rule = truncation_rule(plan)
            lengths = lengths.copy()
            lengths[truncated] = rule.cut(lengths[truncated], keep[truncated])
            keep[truncated] = lengths[truncated].sum(axis=1)  # a cut may leave room unused
            tails = rule.segment_tails(full, lengths)
            if not rule.plain:  # segments cut apart: UNK positions move with them
                unks = dict(batch["unks"])
                for j in truncated:
                    if j in unks:
                        unks[j] = remap_unks(unks[j], full[j], lengths[j],
                                             None if tails is None else tails[j])
                batch = {**batch, "unks": unks}

        # Rank within the unit = earlier batches' count (prefix sum) + order in this batch.
        written = np.nonzero(units > 0)[0]
        chunk_offsets = offsets.get(chunk_key, {})
        ranks = np.zeros(len(units), dtype=np.int64)
        members_by_unit = {}
        for unit in np.unique(units[written]).tolist():
            members = np.nonzero(units == unit)[0]
            members_by_unit[unit] = members
            ranks[members] = chunk_offsets.get(unit, 0) + np.arange(len(members))
        shards = ranks // dataset.samples_per_shard

        idx = written.tolist()
        sample_id_arr = numbering.sample_ids((ds, file_pos, range_no), batch["samples"])
        line_arr = (line_offset + 1 + batch["lines"] if sources is None
                    else batch["source_lines"])
        sample_ids, lines = sample_id_arr.tolist(), line_arr.tolist()
        unit_l, keep_l, shard_l = units.tolist(), keep.tolist(), shards.tolist()
        digests, empty, unks = batch["digests"], batch["empty"], batch["unks"]
        shard_name = fmt.shard_name
        parts = batch["parts"].tolist() if "parts" in batch else None  # split dialogues
        # The written samples' columns, then one map over them (indexing nine lists per
        # row in a comprehension cost more than formatting the row).
        pick = (lambda values: [values[j] for j in idx]) if len(idx) < len(units) else list
        units_w = pick(unit_l)
        sample_rows = list(map(
            fmt.sample_row, pick(sample_ids), pick(digests), pick(keep_l), units_w,
            itertools.repeat(file_json) if file_jsons is None else pick(file_jsons), pick(lines),
            map(shard_name, units_w, pick(shard_l)),
            map(empty.get, idx), itertools.repeat(None) if parts is None else pick(parts)))
        unk_rows, unk_samples, unk_tokens = [], 0, 0
        for j in sorted(unks):
            if not unit_l[j]:
                continue
            positions, fields, chars = unks[j]
            kept = [k for k, p in enumerate(positions) if p < keep_l[j]]  # after truncation
            if kept:
                unk_rows.append(fmt.unk_row(sample_ids[j], digests[j],
                                            file_json if file_jsons is None else file_jsons[j],
                                            lines[j],
                                            [positions[k] for k in kept], [fields[k] for k in kept],
                                            [chars[k] for k in kept],
                                            None if parts is None else parts[j]))
                unk_samples += 1
                unk_tokens += len(kept)
        lossy = batch.get("lossy") or {}  # {j: (kinds, the row's fields)}: encode_batch
        lossy_js = [j for j in sorted(lossy) if unit_l[j]]  # written records only
        found = [lossy[j] for j in lossy_js]
        lossy_rows = list(map(
            fmt.lossy_row, [sample_ids[j] for j in lossy_js],
            itertools.repeat(file_json) if file_jsons is None else [file_jsons[j] for j in lossy_js],
            [lines[j] for j in lossy_js], map(_SECOND, found),
            itertools.repeat(None) if parts is None else [parts[j] for j in lossy_js]))
        # One count over every kind of the batch (a Counter.update per row cost 0.2 s a
        # 100k build where nearly every sample is lossy).
        lossy_kinds = Counter(itertools.chain.from_iterable(map(_FIRST, found)))
        lossy_segments = sum(lossy_kinds.values())
        # Hash entries travel in buckets (`hash_bucket_count`), not one element per sample:
        # ((dataset, bucket), (raw digests, sample ids, file, lines)); for a staged (local)
        # dataset the batch's entries go to one scratch file, sorted by bucket, and only
        # `hash_ref`s (batch, rows) wait for the group-by.
        if idx:
            buckets = hash_bucket_count(numbering.totals[ds], dataset.samples_per_shard, staged)
            raw = bytes.fromhex("".join([digests[j] for j in idx]))  # decoded once
            bucket_of = hash_buckets(raw, buckets)
            order = np.argsort(bucket_of, kind="stable")
            sorted_buckets, by_bucket = bucket_of[order], written[order]
            firsts = np.flatnonzero(np.diff(sorted_buckets, prepend=-1)).tolist()
            raw = np.frombuffer(raw, dtype="V32")[order].tobytes()  # in bucket order
            sids, rows_at = sample_id_arr[by_bucket], line_arr[by_bucket]
            if sources is not None:
                names = np.asarray(sources, dtype=object)[by_bucket]
            if staged:
                write_hash_rows(hashes_path(dataset, chunk_key), raw, sids, rows_at,
                                dataset.output_path)
            for first, end in zip(firsts, firsts[1:] + [len(by_bucket)]):
                key = (ds, int(sorted_buckets[first]))
                if staged:
                    yield beam.pvalue.TaggedOutput(HASHES, (key, hash_ref(
                        file_pos, range_no, chunk_key[3], first, end)))
                else:  # the file's position, or each keyed record's source name
                    where = file_pos if sources is None else names[first:end]
                    yield beam.pvalue.TaggedOutput(HASHES, (key, (
                        raw[first * 32:end * 32], sids[first:end], where, rows_at[first:end])))

        # Record pieces keyed by (unit, shard); a batch's samples of one shard are
        # contiguous. A run of staged samples is a range of the block; the others'
        # records are built here and travel as bytes (Beam's coder copies them as they
        # are, the writer joins them).
        if staged:
            block = block_path(dataset, chunk_key)
            sections = block_sections(plan, declared)
            # The overflow samples' records (built here, after the decisions) go to a
            # second block of the batch, so only references wait for the shard writers.
            overflow_block, overflow_records, overflow_at = overflow_path(dataset, chunk_key), [], 0
        for unit, members in members_by_unit.items():
            member_shards, member_ranks = shards[members], ranks[members]
            from_block = ~inline[members]
            bounds = np.flatnonzero(np.diff(member_shards) | np.diff(from_block)) + 1
            width = fmt.record_bytes(unit, plan.n_segments, plan.bytes_per_token)
            if from_block.any():  # each staged sample's place among its unit's in the block
                block_index = np.cumsum(declared == unit) - 1
            for part in np.split(np.arange(len(members)), bounds):
                key = ds, unit, int(member_shards[part[0]])
                rank, js = int(member_ranks[part[0]]), members[part]
                if from_block[part[0]]:
                    yield key, (rank, BlockRange(
                        block, sections[unit] + int(block_index[js[0]]) * width, len(js) * width))
                    continue
                records = unit_records(plan, unit, tokens, starts[js], keep[js], lengths[js],
                                       full[js], None if tails is None else tails[js]).tobytes()
                if not staged:
                    yield key, (rank, records)
                    continue
                yield key, (rank, BlockRange(overflow_block, overflow_at, len(records)))
                overflow_records.append(records)
                overflow_at += len(records)
        if staged and overflow_records:
            storage.write_atomic(overflow_block, b"".join(overflow_records), dataset.output_path)

        tally(assigned=len(units))
        if sample_rows:
            yield beam.pvalue.TaggedOutput(INDEX_PARTS, ("sample", chunk_key, "".join(sample_rows)))
        if unk_rows:
            yield beam.pvalue.TaggedOutput(INDEX_PARTS, ("unk", chunk_key, "".join(unk_rows)))
        if lossy_rows:
            yield beam.pvalue.TaggedOutput(INDEX_PARTS, ("lossy", chunk_key, "".join(lossy_rows)))
        if idx:
            counts = np.unique(units[written], return_counts=True)
            yield beam.pvalue.TaggedOutput(STATS, (ds, {
                "total_samples": len(idx), "total_tokens": int(keep[written].sum()),
                "samples_with_unk": unk_samples, "unk_tokens": unk_tokens,
                "unit_distribution": dict(zip(counts[0].tolist(), counts[1].tolist())),
                "segments_checked": len(idx) * plan.literal_ids.count(None),  # field segments
                "lossy_segments": lossy_segments, "lossy_samples": len(lossy_rows),
                "lossy_kinds": dict(lossy_kinds),
                "engines": batch.get("engines") or {}}))


class UnitOffsets(beam.PTransform):
    """Per-(batch, unit) counts -> prefix sums: each batch's first rank per unit."""

    def __init__(self, plans):
        super().__init__()
        self._plans = plans

    def expand(self, tokenized_and_outcomes):
        tokenized, outcomes = tokenized_and_outcomes  # outcomes: `outcomes_by_batch`
        plans = self._plans
        return (tokenized
                | "CountDeclaredUnits" >> beam.Map(lambda e: declared_units(plans, e))
                | "PrefixSums" >> ApplyToAll(_unit_offsets, beam.pvalue.AsSingleton(outcomes)))


class AssignUnits(beam.PTransform):
    """Tokenized batches -> keyed shard pieces, index row parts, hashes and stats."""

    def __init__(self, plans, outcomes, offsets, numbering):
        super().__init__()
        self._plans = plans
        self._sides = (outcomes, offsets, numbering)  # outcomes: `outcomes_by_batch`

    def expand(self, tokenized):
        outcomes, offsets, numbering = self._sides
        out = tokenized | "Assign" >> beam.ParDo(
            AssignFn(self._plans), beam.pvalue.AsSingleton(outcomes),
            beam.pvalue.AsSingleton(offsets), beam.pvalue.AsSingleton(numbering),
        ).with_outputs(HASHES, INDEX_PARTS, STATS, main="pieces")
        return {"pieces": out.pieces, HASHES: out[HASHES], INDEX_PARTS: out[INDEX_PARTS],
                STATS: out[STATS]}
