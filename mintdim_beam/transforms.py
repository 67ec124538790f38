"""Our stages inside your own Beam pipeline: tokenize rows the way a build does, and
write unit-builds and pack-builds from records keyed by your own sort key
(`docs/beam.md`).

    tokenize = TokenizeRecords({"type": "hf_json", "files": ["tok.json"]},
                               fields=["q", "a"], template="Q: {q}\\nA: {a}")
    (rows | beam.Map(lambda r: ((r["file"], r["line"]), r)) | tokenize
          | WriteUnitBuild("out/", [256, 512], tokenize=tokenize, samples_per_shard=1000))

The key decides the sample ids (dense from 0 in key order) and stands for the source
in the indices: a key (str, int) is (source_file, source_line); any other key is
source_file at line 1, unless `TokenizeRecords(provenance=(file field, line field))`
names the row's own. A repeated key stops the build with `RecordKeyError`. The file
builds are these stages after our reader: the same bytes for the same rows and keys."""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.config.bad_rows import bad_rows

__all__ = ["TokenizeRecords", "WriteUnitBuild", "WritePackBuild", "record_ids", "segment_ids"]

DEFAULT_BUILD_BATCH = 1000


class TokenizeRecords(beam.PTransform):
    """Rows (dicts, or (key, dict) pairs) -> tokenized records, the ids a file build
    gives the same row.

    tokenizer: the config's tokenizer block ({"type": "hf_json" | "sentencepiece",
    "files": [path], and its options: config, pad_token, pad_id, bos, eos,
    literal_specials, engine}); fields and template: a templated row's fields and
    template; or chat: a chat or preference source block without files ({"type":
    "chat", "chat_template": ..., "format": ..., "max_turns": ...});
    provenance: (file field, line field) of each row, its source in the indices;
    documents: True for a pack-build's documents (the row's template as one plain
    text, no segments: `WritePackBuild` takes them);
    build_batch: rows encoded per call (speed only, never bytes).

    A keyed row gives (key, record); a bare row a bare record. A record is a dict:
    ids (every segment's ids back to back, as the little-endian bytes of `dtype`:
    `record_ids` / `segment_ids` give arrays), lengths (per segment), segments and
    kinds (the template's names and kinds), hash, empty_fields, unks, lossy, part,
    engine, source (a document: ids, dtype, source, engine). A row the template cannot take gives a record with `error` instead, which
    `WriteUnitBuild` reports (or skips, under on_bad_row="skip") at its key."""

    def __init__(self, tokenizer: dict, *, fields=None, template=None, chat=None,
                 documents: bool = False, provenance=None,
                 build_batch: int = DEFAULT_BUILD_BATCH, encoder_processes: int | None = None):
        super().__init__()
        from mintdim_beam.records.settings import source_block, tokenize_plan

        _check_provenance(provenance)
        self.source = source_block(fields, template, chat)
        self.tokenizer = dict(tokenizer) if isinstance(tokenizer, dict) else tokenizer
        self.build_batch = build_batch
        self.documents = documents
        if documents:  # a pack-build's documents: one plain text per row
            from mintdim_beam.records.pack import document_plan

            self.plan = document_plan(self.source, self.tokenizer, build_batch)
        else:
            self.plan = tokenize_plan(self.source, self.tokenizer, build_batch)
        self._provenance = tuple(provenance) if provenance is not None else None
        self._encoder_processes = encoder_processes

    def expand(self, rows):
        if self.documents:
            from mintdim_beam.records.pack import TokenizeDocuments

            return rows | "TokenizeDocuments" >> TokenizeDocuments(
                self.plan, self._provenance, self.build_batch)
        from mintdim_beam.records.tokenize import TokenizeRecordsStages

        return rows | "TokenizeRecords" >> TokenizeRecordsStages(
            self.plan, self._provenance, self._encoder_processes)


class WriteUnitBuild(beam.PTransform):
    """(key, record) pairs from `TokenizeRecords` -> a unit-build in `output`: the same
    shards, indices, histogram, stats and checksums as a file build of the same rows
    in key order, manifest.json last; returns a PCollection of one summary dict (as
    `run()` gives each output).

    units: the unit sizes; tokenize: the `TokenizeRecords` that made the records;
    samples_per_shard; on_overflow: "abort" | "truncate" | "skip" | "extend"
    (no prompt: nobody is there to answer); on_bad_row / max_rejected / on_lossy as
    the build's; key_buckets: the key ranges sorted apart (default: one per 50,000
    records; speed and memory only, never bytes).

    The output is checked and claimed when the transform is applied; a failure found
    by the build (a bad row, an overflow under abort, a repeated key) leaves
    UNIT_BUILD_FAILED.md in every unit dir, no manifest, and the build marked failed."""

    def __init__(self, output: str, units, *, tokenize: TokenizeRecords,
                 samples_per_shard: int = 10000, on_overflow: str = "abort",
                 on_bad_row: str = "abort", max_rejected: float | None = None,
                 on_lossy: str = "continue", key_buckets: int | None = None):
        super().__init__()
        from mintdim_beam.core.errors import TransformArgumentError
        from mintdim_beam.unit_build.launch import check_policies

        _check_sink("WriteUnitBuild", tokenize, False, key_buckets)
        if on_overflow == "prompt":
            raise TransformArgumentError(
                transform="WriteUnitBuild", argument="on_overflow='prompt'",
                problem="a pipeline cannot ask; choose abort, truncate, skip or extend")
        check_policies("continue", on_overflow, on_lossy)
        self._rows = bad_rows(on_bad_row, max_rejected)
        self._output, self._units, self._tokenize = output, units, tokenize
        self._samples_per_shard, self._on_overflow = samples_per_shard, on_overflow
        self._on_lossy, self._buckets = on_lossy, key_buckets

    def expand(self, keyed):
        from mintdim_beam.core.files.ownership import Claim, new_run_id
        from mintdim_beam.records.settings import unit_plan
        from mintdim_beam.records.write_units import WriteKeyedUnits
        from mintdim_beam.unit_build.units import fixed_chooser

        tok, run_id = self._tokenize, new_run_id()
        plan = unit_plan(tok.source, tok.tokenizer, self._output, self._units, tok.build_batch,
                         self._samples_per_shard, self._on_lossy, self._rows, run_id)
        claim = Claim(run_id)
        claim.take([(plan.dataset.output_path, plan.dataset.output_given)])
        return keyed | "WriteUnitBuild" >> WriteKeyedUnits(
            plan, fixed_chooser(self._on_overflow), claim, self._buckets)


class WritePackBuild(beam.PTransform):
    """(key, document) pairs from `TokenizeRecords(..., documents=True)` -> a pack-build
    in `output`: the same shards (.bin, .idx, .csv.gz, .bin.index), sequences file and
    checksums as a file build whose documents have these sources, manifest.json last;
    returns a PCollection of one summary dict (as the pack's `run()` gives).

    tokenize: the `TokenizeRecords(..., documents=True)` that made the documents; eod,
    seed, shard_tokens: the pack block's; on_bad_row / max_rejected as the build's;
    key_buckets as for `WriteUnitBuild`. The order hash, the document ids and the
    provenance rows take each document's source (file, line): a key (str, int), the
    provenance fields, or the key's text at line 1."""

    def __init__(self, output: str, *, tokenize: TokenizeRecords, eod: str | None = None,
                 seed: int = 0, shard_tokens: int | None = None, on_bad_row: str = "abort",
                 max_rejected: float | None = None, key_buckets: int | None = None):
        super().__init__()
        _check_sink("WritePackBuild", tokenize, True, key_buckets)
        self._rows = bad_rows(on_bad_row, max_rejected)
        self._output, self._tokenize = output, tokenize
        self._pack = (eod, seed, shard_tokens)
        self._buckets = key_buckets

    def expand(self, keyed):
        from mintdim_beam.core.files.ownership import Claim, new_run_id
        from mintdim_beam.records.pack import WriteKeyedPack, pack_plan

        tok, run_id = self._tokenize, new_run_id()
        plan = pack_plan(tok.source, tok.tokenizer, self._output, *self._pack, run_id)
        claim = Claim(run_id)
        claim.take([(plan.config.output_path, plan.config.output_given)])
        return keyed | "WritePackBuild" >> WriteKeyedPack(plan, self._rows, claim,
                                                          self._buckets)


def record_ids(record: dict):
    """A record's ids as one numpy array (every segment's, back to back)."""
    import numpy as np

    return np.frombuffer(record["ids"], dtype=record["dtype"])


def segment_ids(record: dict) -> list:
    """A record's ids as one numpy array per segment (`lengths` of them)."""
    import numpy as np

    return np.split(record_ids(record), np.cumsum(record["lengths"])[:-1])


def _check_sink(transform: str, tokenize, documents: bool, key_buckets) -> None:
    """A sink's `tokenize` (the right kind of `TokenizeRecords`) and `key_buckets`."""
    from mintdim_beam.core.errors import TransformArgumentError

    if not isinstance(tokenize, TokenizeRecords) or tokenize.documents != documents:
        made = "documents (documents=True)" if documents else "records (without documents=True)"
        raise TransformArgumentError(transform=transform,
                                     argument=f"tokenize={tokenize!r}"[:200],
                                     problem=f"it must be the TokenizeRecords that made the {made}")
    if key_buckets is not None and (type(key_buckets) is not int or key_buckets < 1):
        raise TransformArgumentError(transform=transform, argument=f"key_buckets={key_buckets!r}",
                                     problem="a positive int")


def _check_provenance(provenance) -> None:
    from mintdim_beam.core.errors import TransformArgumentError

    if provenance is None:
        return
    if (not isinstance(provenance, (list, tuple)) or len(provenance) != 2
            or not all(isinstance(f, str) and f for f in provenance)):
        raise TransformArgumentError(transform="TokenizeRecords",
                                     argument=f"provenance={provenance!r}"[:200],
                                     problem="two field names: (file field, line field)")
