"""Pack-builds of a user's records: rows -> documents' ids (`TokenizeRecords(...,
documents=True)`: the file build's renderer and plain-text encoding), and keyed
documents -> the `RangePart`s of the writing half of a pack-build
(`pack_build.graph.write_pack`), one per key range, in key order.

A range's documents go to scratch as a file's range does, their source names beside
them (`scratch.write_sources`): the order hash, the document ids and the provenance
CSV take each document's own source (file, line) where a file build takes its file's."""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import apache_beam as beam
import numpy as np

from mintdim_beam.core.errors.failures import PendingError
from mintdim_beam.records.order import (COUNTS, ERRORS, KEY_ERRORS, GroupKeyRanges, key_error,
                                        keyed_groups, placed)
from mintdim_beam.records.keys import source_of
from mintdim_beam.records.tokenize import as_keyed, error_record, UNKEYED


class DocumentPlan(NamedTuple):
    """What renders and encodes a document: the pack config of the records (one
    template, no file) and the engine chosen for the tokenizer (`engine_choice`)."""
    config: object
    engine: str
    engine_why: str


def document_plan(source: dict, tokenizer: dict, build_batch: int) -> DocumentPlan:
    """Validated as a pack-build's source and tokenizer blocks are (the pack block is
    the sink's: its EOD need not exist yet)."""
    from mintdim_beam.core.config.pack_config import resolve_pack
    from mintdim_beam.core.tokenizer.engine_choice import choose_engine
    from mintdim_beam.core.tokenizer.tokenizers import cached_tokenizer

    raw = {"source": dict(source), "tokenizer": dict(tokenizer),
           "output": {"dir": "records-documents"}}
    config = resolve_pack(raw, records=True)
    tokenizer = cached_tokenizer(config.tokenizer_kind, config.tokenizer_path,
                                 config.tokenizer_options, config.tokenizer_given)
    engine, why = choose_engine(tokenizer, config.tokenizer_options.engine, [],
                                config.tokenizer_given)
    return DocumentPlan(config, engine, why)


def pack_plan(source: dict, tokenizer: dict, output: str, eod, seed: int, shard_tokens,
              run_id: str):
    """The sink's plan: the whole pack config validated, its output checked free."""
    from mintdim_beam.core.config.pack_config import prepare_pack, resolve_pack, with_run
    from mintdim_beam.core.files.ownership import check_free

    block = {"eod": eod, "seed": seed}
    if shard_tokens is not None:
        block["shard_tokens"] = shard_tokens
    raw = {"source": dict(source), "tokenizer": dict(tokenizer), "pack": block,
           "output": {"dir": output}}
    config = with_run(resolve_pack(raw, records=True), run_id)
    check_free(config.output_path, config.output_given)
    return prepare_pack(config)


class EncodeDocumentsFn(beam.DoFn):
    """A batch of (key, row) -> one (key, {"ids", "source", "engine"}) per row, or the
    row's error record: rendered by the pack's `Renderer`, encoded as plain text."""

    def __init__(self, plan: DocumentPlan, provenance):
        self._plan, self._provenance = plan, provenance

    def setup(self):
        from mintdim_beam.core.render.document_text import Renderer
        from mintdim_beam.pack_build.tokenize import document_tokenizer

        config = self._plan.config
        self._tokenizer = document_tokenizer(config, self._plan.engine)
        self._renderer = Renderer(config.fields[0], config.templates[0])

    def process(self, pairs):
        from mintdim_beam.records.tokenize import row_source

        texts, kept = [], []
        for i, (key, row) in enumerate(pairs):
            source = row_source(row, self._provenance)
            text, error = self._renderer.text((0, 0, 0), i, row)
            if error is not None:
                yield error_record((key, source, error))
            else:
                texts.append(text)
                kept.append((key, source))
        if not texts:
            return
        ids, counts = self._tokenizer.encode_plain_flat(texts)
        ids = np.asarray(ids, dtype=np.int64)
        ends = np.cumsum(counts)
        engine = getattr(self._tokenizer, "engine_used", self._tokenizer.kind)
        raw = ids.astype("<i4").tobytes()  # bytes: Beam's coder copies them as they are
        for (key, source), end, count in zip(kept, ends.tolist(), np.asarray(counts).tolist()):
            record = {"ids": raw[(end - count) * 4:end * 4], "dtype": "<i4", "source": source,
                      "engine": engine}
            yield record if key is UNKEYED else (key, record)


class TokenizeDocuments(beam.PTransform):
    """(key, row) or bare rows -> document records and error records."""

    def __init__(self, plan: DocumentPlan, provenance, build_batch: int):
        super().__init__()
        self._plan, self._provenance, self._size = plan, provenance, build_batch

    def expand(self, rows):
        size = self._size
        return (rows
                | "Keyed" >> beam.Map(as_keyed)
                | "Batch" >> beam.BatchElements(min_batch_size=size, max_batch_size=size)
                | "Encode" >> beam.ParDo(EncodeDocumentsFn(self._plan, self._provenance)))


def eod_problem(ids: np.ndarray, eod: int) -> str:
    """Why a document cannot be written (its ids hold the EOD id), or ""; the file
    build's words (`pack_build.tokenize.document_arrays`)."""
    at = np.flatnonzero(ids == eod)
    if not at.size:
        return ""
    return (f"the document's text encodes to the EOD id {eod} (at token {int(at[0])}): "
            "written, the EOD would end it there")


class PackRangeFn(beam.DoFn):
    """One key range's documents -> its `RangePart` in scratch (tokens, table of
    (source line, length), source names), its count, and pending errors."""

    def __init__(self, plan):
        self._plan = plan

    def process(self, element):
        from mintdim_beam.core.formats.megatron import check_ids
        from mintdim_beam.pack_build import scratch
        from mintdim_beam.pack_build.tokenize import RangePart

        plan, (bucket, items) = self._plan, element
        config, key3 = plan.config, (0, bucket, 0)
        lines, lengths, names, chunks, engines = [], [], [], [], Counter()
        sample = empty = 0
        for key, records, repeated in keyed_groups(items):
            record = records[0]
            source = source_of(key, record.get("source"))
            if repeated:
                yield beam.pvalue.TaggedOutput(KEY_ERRORS, key_error(bucket, sample, key,
                                                                     source, repeated))
            elif "error" in record:
                yield beam.pvalue.TaggedOutput(ERRORS, placed(record["error"], bucket,
                                                              sample, source))
            else:
                ids = np.frombuffer(record["ids"], dtype=record["dtype"]).astype(np.int64)
                engines[record.get("engine") or ""] += 1
                problem = eod_problem(ids, plan.eod_id)
                if problem:
                    yield beam.pvalue.TaggedOutput(ERRORS, PendingError(
                        0, bucket, 0, sample, "SampleSchemaError", {"problem": problem},
                        "file_line", local_sample=sample, source=source))
                elif not ids.size:
                    empty += 1
                else:
                    if plan.bos_id is not None:
                        ids = np.concatenate([[plan.bos_id], ids])
                    lines.append(source[1])
                    names.append(source[0])
                    lengths.append(ids.size)
                    chunks.append(ids)
            sample += 1
        tokens = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
        check_ids(tokens, plan.dtype)
        out = config.output_path
        table = np.stack([np.asarray(lines, dtype=np.int64),
                          np.asarray(lengths, dtype=np.int64)], axis=1).reshape(-1, 2)
        table_path = scratch.name(config, key3, "docs.npy")
        token_path = scratch.name(config, key3, "tok")
        sources = scratch.name(config, key3, "sources")
        scratch.write_array(table_path, table, out)
        scratch.write_tokens(token_path, tokens.astype(plan.dtype), out)
        scratch.write_sources(sources, names, out)
        yield beam.pvalue.TaggedOutput(COUNTS, (key3, (sample, sample)))
        engine = engines.most_common(1)[0][0] if engines else ""
        yield RangePart(key3, bucket, len(lines), int(tokens.size), empty, table_path,
                        token_path, engine, sources)


class WriteKeyedPack(beam.PTransform):
    """(key, document record) pairs -> one summary dict, the pack written and finalized."""

    def __init__(self, plan, rows, claim, buckets: int | None):
        super().__init__()
        self._plan, self._rows, self._claim, self._buckets = plan, rows, claim, buckets

    def expand(self, keyed):
        from mintdim_beam.core.inputs.source import number_ranges
        from mintdim_beam.pack_build.graph import write_pack
        from mintdim_beam.pack_build.launch import pack_summary
        from mintdim_beam.records.write_units import KeyRanges
        from mintdim_beam.runtime.apply_to_all import ApplyToAll
        from mintdim_beam.runtime.rejected_rows import split_rejected

        p, plan, rows = keyed.pipeline, self._plan, self._rows
        made = (keyed
                | "GroupKeyRanges" >> GroupKeyRanges(self._buckets)
                | "PackRanges" >> beam.ParDo(PackRangeFn(plan)).with_outputs(
                    COUNTS, ERRORS, KEY_ERRORS, main="parts"))
        errors, rejected = split_rejected(p, made[ERRORS], {0} if rows.skip else set())
        errors = (errors, made[KEY_ERRORS]) | "WithKeyErrors" >> beam.Flatten()
        numbering = made[COUNTS] | "NumberRecords" >> ApplyToAll(
            lambda counts, gone: number_ranges([KeyRanges(0)], dict(counts), gone),
            beam.pvalue.AsList(rejected))
        done = write_pack(p, plan, rows, {
            "parts": made.parts, "numbering": numbering, "errors": errors,
            "rejected": rejected, "inputs": p | "NoInputFiles" >> beam.Create([])},
            claim=self._claim)
        given = plan.config.output_given

        def summary(out):
            import json

            from mintdim_beam.core.files import storage
            from mintdim_beam.pack_build.finalize import MANIFEST

            return pack_summary(given, json.loads(storage.read_bytes(
                storage.join(out, MANIFEST))))

        return done | "Summary" >> beam.Map(summary)


