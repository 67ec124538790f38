"""Run a train-tokenizer: validate on the launcher (every config error before any
output), claim the output directory, count on the runner and wait, then train from the
summed table here and write the tokenizer, its config, the report rows and the manifest
last. What only the counted corpus shows (no text, no room in the vocabulary, nothing a
`min_frequency` lets through, a tie at the alphabet's cut, a count past the trainer's
32 bits) leaves the directory as it was and exits as a config error does; any other
failure leaves `TRAIN_TOKENIZER_FAILED.md` and no manifest.

Why the launcher trains: the trainers (`tokenizers`' `BpeTrainer`, `SentencePieceTrainer`)
are one-process algorithms over the word table (or unigram's sample), whose size grows
with the distinct words, not with the corpus; the corpus-sized work, reading and
counting, runs on the workers. A launch that does not wait (`--no_wait`) is refused."""
from __future__ import annotations

import json
import os
import shutil
import tempfile

from mintdim_beam.core.config.bad_rows import bad_rows
from mintdim_beam.core.errors import PipelineValidationError
from mintdim_beam.core.errors import train as train_errors
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.files.ownership import Claim, Heartbeat, check_free, new_run_id, release
from mintdim_beam.core.inputs.planned import PlannedRanges, forget_loaded, store_lists
from mintdim_beam.core.inputs.source import plan_ranges
from mintdim_beam.runtime.failure_notices import leave_failure_notices
from mintdim_beam.runtime.frozen_heap import frozen_heap
from mintdim_beam.runtime.progress import progress_interval, say
from mintdim_beam.runtime.run_shape import RunShape, shown_progress
from mintdim_beam.runtime.sampler_period import short_sampler_period
from mintdim_beam.runtime.signals import failed_build, received
from mintdim_beam.train_tokenizer import outputs
from mintdim_beam.train_tokenizer.config import resolve_train, with_run
from mintdim_beam.train_tokenizer.graph import COUNTED, REPORT_TEXT, SAMPLE_TEXT

# Raised from what was counted, before anything is written: the directory is left as it
# was and the command exits 2, as for a config error.
BEFORE_OUTPUT = (train_errors.TrainEmptyCorpusError, train_errors.TrainerVocabSizeError,
                 train_errors.TrainerMinFrequencyError, train_errors.TrainerAlphabetTieError,
                 train_errors.TrainerCountOverflowError, train_errors.TrainerValidationError)


def log(message: str) -> None:
    say(f"[train-tokenizer] {message}")


def _failure_notices(config, reason: str, claim: Claim) -> None:
    leave_failure_notices(config.output_path, config.output_given, reason, outputs.FAILED,
                          outputs.failed_notice(reason), outputs.MANIFEST, claim, log)


def on_storage(config, ranges):
    """The per-file lists in the scratch, only references in the graph (as the builds)."""
    scratch = config.scratch_path
    stored = store_lists(config, ("files", "fields", "templates"), scratch)
    return stored, PlannedRanges(ranges, lambda _: scratch)


def run_train(raw: dict, pipeline_options=None, on_bad_row: str = "abort",
              max_rejected: float | None = None) -> dict:
    """Count, train and write; returns the summary (rows, words, vocabulary, files)."""
    rows = bad_rows(on_bad_row, max_rejected)
    received.clear()
    run_id = new_run_id()
    config = with_run(resolve_train(raw), run_id)
    check_free(config.output_path, config.output_given)
    run = RunShape(pipeline_options)
    options = run.beam_options()
    from mintdim_beam.runtime.options import waits

    if not waits(options):
        raise PipelineValidationError(missing=[
            "a launch that waits (no --no_wait): train-tokenizer trains on the launcher from "
            "the counts the job sums"])
    progress_interval()
    run.check_paths([("input", f.given, f.path) for f in config.files]
                    + [("output", config.output_given, config.output_path)])
    ranges = plan_ranges([config], run.range_bytes, defer=True)
    claim = Claim(run_id)
    claim.take([(config.output_path, config.output_given)])
    log(f"start output={config.output_given} files={len(config.files)} "
        f"trainer={config.trainer.type} vocab_size={config.trainer.vocab_size} "
        f"runner={run.runner} run={run_id}")
    try:
        import apache_beam as beam

        from mintdim_beam.train_tokenizer.graph import expand_train_tokenizer

        p = beam.Pipeline(options=options)
        expand_train_tokenizer(p, *on_storage(config, ranges), rows)
        with frozen_heap(), short_sampler_period(), \
                shown_progress(run, ranges, "train-tokenizer"), Heartbeat([config.output_path]):
            p.run().wait_until_finish()
            counted = _counted(config, run)
            summary = _train_and_write(config, counted)
    except BEFORE_OUTPUT as exc:
        _undo(config, claim)
        log(f"stopped: {type(exc).__name__}")
        raise
    except BaseException as exc:
        error = failed_build(exc, lambda reason: _failure_notices(config, reason, claim), log)
        if error is not None:
            raise error from None
        raise
    finally:
        forget_loaded()
    log(f"done output={config.output_given} vocabulary={summary['vocab_size']} "
        f"words={summary['distinct_words']} rows={summary['rows_trained']}")
    return summary


def _undo(config, claim: Claim) -> None:
    """Nothing of the run stays: its scratch, then its marker (and directories it made)."""
    try:
        storage.remove_tree(storage.tmp_dir(config.output_path))
    finally:
        claim.undo()


def _counted(config, run) -> dict:
    path = storage.join(config.scratch_path, COUNTED)
    try:
        return json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        raise run.missing_output(config.output_given, path) from None


def _local(paths: list[str], work: str) -> list[str]:
    """Local copies of scratch files (the paths themselves on a local disk)."""
    local = []
    for i, path in enumerate(paths):
        if not storage.is_url(path):
            local.append(path)
            continue
        target = os.path.join(work, f"{i:05d}")
        with storage.open_read(path) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
        local.append(target)
    return local


def _train(config, counted: dict, work: str) -> tuple[bytes, dict]:
    spec = config.trainer
    scratch = config.scratch_path
    if spec.type == "bpe":
        from mintdim_beam.train_tokenizer.train_hf import train_bpe

        parts = _local([p["path"] for p in counted["parts"]], work)
        alphabet = {c for p in counted["parts"] for c in p["chars"]}
        text, engine = train_bpe(spec, parts, alphabet)
        return text.encode("utf-8"), engine
    from mintdim_beam.train_tokenizer.train_sp import train_sentencepiece

    if spec.type == "sentencepiece_bpe":
        parts, sample = _local([p["path"] for p in counted["parts"]], work), None
    else:
        parts, sample = [], _local([storage.join(scratch, SAMPLE_TEXT)], work)[0]
    return train_sentencepiece(spec, parts, sample, [f.given for f in config.files])


def _train_and_write(config, counted: dict) -> dict:
    tallies = counted["tallies"]
    occurrences = sum(p["occurrences"] for p in counted["parts"])
    empty = (counted.get("sample_sentences", 0) == 0 if config.trainer.type ==
             "sentencepiece_unigram" else occurrences == 0)
    if tallies["trained"] == 0 or empty:
        raise train_errors.TrainEmptyCorpusError(files=[f.given for f in config.files],
                                                 rows=tallies["rows"],
                                                 held_out=tallies["held_out"])
    with tempfile.TemporaryDirectory(prefix="mintdim-train-") as work:
        data, engine = _train(config, counted, work)
    log(f"trained: {engine['why']}")
    out, scratch = config.output_path, config.scratch_path
    name = outputs.tokenizer_file(config)
    sums = {name: checksums.write(storage.join(out, name), data, out)}
    sums[outputs.CONFIG_FILE] = checksums.write_text(
        storage.join(out, outputs.CONFIG_FILE),
        json.dumps(outputs.tokenizer_config_doc(config), ensure_ascii=False, indent=2) + "\n",
        out)
    copied = [REPORT_TEXT] + (["rejected_index.jsonl"] if "rejected" in counted else []) + (
        [SAMPLE_TEXT] if config.trainer.type == "sentencepiece_unigram" else [])
    for copy in copied:
        sums[copy] = checksums.write(storage.join(out, copy),
                                     storage.read_bytes(storage.join(scratch, copy)), out)
    counted["report_file"] = REPORT_TEXT
    card = outputs.card(config, data)
    doc = outputs.manifest_doc(config, counted, engine, card, sums)
    storage.write_text_atomic(storage.join(out, outputs.MANIFEST), fmt.json_document(doc), out)
    storage.remove_tree(storage.tmp_dir(out))
    release(out)
    return {"output_dir": config.output_given, "tokenizer": name,
            "vocab_size": card["vocab_size"], "rows_trained": tallies["trained"],
            "rows_held_out": tallies["held_out"], "distinct_words": doc["words"]["distinct"],
            "engine": engine["name"], "reserved_ids": len(card["reserved_ids"])}
