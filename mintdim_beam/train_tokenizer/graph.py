"""The train-tokenizer pipeline graph:

Ranges -> CountWords -> SumCounts (a CombinePerKey per table part) -> WriteTable; beside
them line counts -> numbering, bad rows -> FirstError, report rows and the unigram
sample (CombineGlobally of the smallest hashes), all into FinishCounting, which writes
`counted.json` into the run's scratch: the launcher trains from it."""
from __future__ import annotations

from dataclasses import asdict

import apache_beam as beam

from mintdim_beam.core.config.bad_rows import BadRows
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.inputs.input_files import entries_by_dataset
from mintdim_beam.core.inputs.source import number_ranges
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.runtime.faults import BundleFaults, maybe_fail
from mintdim_beam.runtime.first_error import FirstError
from mintdim_beam.runtime.options import is_single_process, max_line_bytes
from mintdim_beam.runtime.planned_ranges import INPUTS, Ranges
from mintdim_beam.runtime.rejected_rows import finish_rejected, split_rejected
from mintdim_beam.train_tokenizer import table
from mintdim_beam.train_tokenizer.count import (COUNTS, ERRORS, REPORT, REPORT_ROWS, SAMPLE,
                                                TALLY, TALLY_KEYS, CountWordsFn, SmallestOf,
                                                SumCounts)

COUNTED = "counted.json"
REPORT_TEXT = "report_text.jsonl"
SAMPLE_TEXT = "unigram_sample.txt"  # kept in the output: the trainer's whole input
TABLE_DIR = "words"


class WriteTablePartFn(beam.DoFn):
    """(part, summed counts) -> the part written to the scratch (`table.write_part`)."""

    def __init__(self, config):
        self._config = config
        self._faults = BundleFaults("write")

    def start_bundle(self):
        self._faults.start_bundle()

    def process(self, element):
        part, counts = element
        config = self._config
        folder = storage.join(config.scratch_path, TABLE_DIR)
        written = table.write_part(part, counts, folder, config.output_path)
        self._faults.check(part)
        yield written


def _lines(items) -> str:
    return "".join(fmt.jsonl_row({"text": text}) for _, text in items)


def finish_counting(config, rows: BadRows, parts, error, report, sample, tallies, rejected,
                    numbering, inputs) -> str:
    """The first bad row fails the run; else the report rows, the sample, the rejected
    rows and `counted.json` (parts, tallies, inputs) go to the scratch. Returns its path."""
    if error is not None:
        raise WorkerFailure(error)
    scratch, out = config.scratch_path, config.output_path
    doc: dict = {"tallies": {k: sum(t[i] for t in tallies) for i, k in enumerate(TALLY_KEYS)},
                 "parts": [asdict(p) for p in sorted(parts, key=lambda p: p.part)],
                 "inputs": entries_by_dataset(inputs).get(0, []),
                 "report_rows": len(report), "held_out": config.holdout > 0}
    if rows.skip:  # stops here when more rows were bad than max_rejected allows
        text, keys = finish_rejected(rows, rejected, numbering, [config], 0)
        storage.write_text_atomic(storage.join(scratch, fmt.REJECTED_INDEX), text, out)
        doc.update(keys)
    storage.write_text_atomic(storage.join(scratch, REPORT_TEXT), _lines(report), out)
    if config.trainer.counts_words_with == "sample":
        storage.write_text_atomic(storage.join(scratch, SAMPLE_TEXT),
                                  "".join(f"{line}\n" for _, line in sample), out)
        doc["sample_sentences"] = len(sample)
    path = storage.join(scratch, COUNTED)
    storage.write_text_atomic(path, fmt.json_document(doc), out)
    maybe_fail("finalize", "train")
    return path


def expand_train_tokenizer(p, config, ranges, rows: BadRows = BadRows()):
    """Add the counting to pipeline `p`; returns the path of `counted.json`."""
    planned = p | "Ranges" >> Ranges(ranges, spread=not is_single_process(p.options))
    counted = planned["ranges"] | "CountWords" >> beam.ParDo(
        CountWordsFn(config, max_line_bytes(p.options))).with_outputs(
            COUNTS, ERRORS, REPORT, SAMPLE, TALLY, main="words")
    errors, rejected = split_rejected(p, counted[ERRORS], {0} if rows.skip else set())
    numbering = counted[COUNTS] | "NumberLines" >> ApplyToAll(
        lambda counts, gone: number_ranges([config], dict(counts), gone),
        beam.pvalue.AsList(rejected))
    parts = (counted.words
             | "SumCounts" >> beam.CombinePerKey(SumCounts())
             | "WriteTable" >> beam.ParDo(WriteTablePartFn(config)))
    report = counted[REPORT] | "ReportRows" >> beam.CombineGlobally(SmallestOf(REPORT_ROWS))
    size = max(config.trainer.sample_size, 1)
    sample = counted[SAMPLE] | "SampleSentences" >> beam.CombineGlobally(SmallestOf(size))
    # (a side input read straight from a multi-output ParDo gets every output's elements
    # on the BundleBasedDirectRunner: a plain Map in between, as `ApplyToAll` does)
    tallies = counted[TALLY] | "Tallies" >> beam.Map(lambda t: t)
    error = errors | "FirstError" >> FirstError({0: config}, numbering)
    return parts | "FinishCounting" >> ApplyToAll(
        lambda written, err, rep, smp, tallies, gone, num, inputs: finish_counting(
            config, rows, written, err, rep, smp, tallies, gone, num, inputs),
        beam.pvalue.AsSingleton(error), beam.pvalue.AsSingleton(report),
        beam.pvalue.AsSingleton(sample), beam.pvalue.AsList(tallies),
        beam.pvalue.AsList(rejected), beam.pvalue.AsSingleton(numbering),
        beam.pvalue.AsList(planned[INPUTS]))
