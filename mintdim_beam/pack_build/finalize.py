"""Stage 5: after every shard exists, the first bad line (if any) fails the build, and
so does an input without a single document (`PackEmptyError`); otherwise
`per_dataset_sequences.json` (keys: each shard's prefix, an absolute path or the
output URL joined with its name: exactly what Megatron's `--data-path` must say) and then
`manifest.json` (with the sha256 of every shard file, `core.files.checksums`) are written,
scratch removed and the output released. A failed build never gets a manifest."""
from __future__ import annotations

from mintdim_beam.core.config.bad_rows import BadRows
from mintdim_beam.core.config.pack_config import pack_raw
from mintdim_beam.core.errors import PackEmptyError
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.files.ownership import release
from mintdim_beam.core.formats import megatron
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.inputs import file_list
from mintdim_beam.core.version import __version__
from mintdim_beam.runtime.faults import maybe_fail
from mintdim_beam.runtime.rejected_rows import finish_rejected

MANIFEST = "manifest.json"
SEQUENCES = "per_dataset_sequences.json"
ORDER_RULE = ("documents sorted by splitmix64(blake2b-64('order:<seed>' NUL src) xor "
              "line * 0x9E3779B97F4A7C15), then file position, then line; shards cut "
              "between buckets of the hash's top 16 bits where the running token count "
              "crosses shard_tokens")


def manifest_doc(plan, shards, parts, inputs) -> dict:
    config = plan.config
    docs_per_file = [0] * len(config.files)
    empty_per_file = [0] * len(config.files)
    used: dict = {}  # what encoded the documents: the planned engine, or `tokenizers`
    keyed = not config.files  # records of a user's pipeline: no files to count by
    for part in parts:
        if not keyed:
            docs_per_file[part.file_pos] += part.docs
            empty_per_file[part.file_pos] += part.empty
        used[part.engine] = used.get(part.engine, 0) + part.docs + part.empty
    tokens_per_file = [0] * len(config.files)
    for shard in shards:
        for file_pos, tokens in () if keyed else shard.tokens_per_file:
            tokens_per_file[file_pos] += tokens
    return {
        "pipeline": "pack-build",
        "mintdim_beam_version": __version__,
        "format": "megatron-mmidx",
        "source": {"files": [f.given for f in config.files],
                   "fields": [list(f) for f in config.fields],
                   "templates": [t.raw for t in config.templates]},
        "tokenizer": {"type": config.tokenizer_kind, "file": config.tokenizer_given,
                      "config": config.config_given, "vocab_size": plan.vocab_size,
                      "id_bound": plan.id_bound,
                      "engine": {"name": plan.engine, "why": plan.engine_why,
                                 "used": dict(sorted(used.items()))}},
        "dtype": plan.dtype,
        "dtype_code": megatron.DTYPE_CODES[plan.dtype],
        "eod": {"id": plan.eod_id, "token": plan.eod_token, "source": plan.eod_source},
        "bos_id": plan.bos_id,
        "seed": config.seed,
        "shard_tokens": config.shard_tokens,
        "order": ORDER_RULE,
        "documents": sum(s.documents for s in shards),
        "tokens": sum(s.tokens for s in shards),
        "empty_documents": sum(part.empty for part in parts),
        "sources": [{"file": f.given, "documents": docs_per_file[i], "tokens": tokens_per_file[i],
                     "empty_documents": empty_per_file[i]} for i, f in enumerate(config.files)],
        "shards": [{"name": s.name, "documents": s.documents, "tokens": s.tokens,
                    "bin_bytes": s.bin_bytes} for s in shards],
        "sequences": SEQUENCES,
        "inputs": inputs,
        "build_config": pack_raw(config),  # what `verify --deep` rebuilds
        # directories and patterns as written (when any); source.files lists their files
        **({"source_entries": entries} if (entries := file_list.entries_block(config.files))
           else {}),
    }


def finalize(shards, error, parts, plan, inputs, rows=BadRows(), rejected=(), numbering=None,
             claim=None):
    """Finalize as the module says; with a `claim` (a user's pipeline, no launcher
    waiting) the build's own error (found before anything is written) leaves its
    notices here before it is raised; a failed write is left to the runner's retry."""
    state = {"writing": False}  # set once this attempt writes: a retry may then succeed
    if claim is None:
        return _finalize(shards, error, parts, plan, inputs, rows, rejected, numbering, state)
    try:
        return _finalize(shards, error, parts, plan, inputs, rows, rejected, numbering, state)
    except WorkerFailure as exc:
        if state["writing"]:  # a failed write, not the build's verdict: the runner retries
            raise
        from mintdim_beam.core.errors.failures import recover
        from mintdim_beam.core.files.ownership import PACK_FAILED
        from mintdim_beam.runtime.failure_notices import leave_failure_notices

        found = recover(exc)
        reason = f"{type(found or exc).__name__}: {found or exc}"
        config = plan.config
        leave_failure_notices(config.output_path, config.output_given, reason, PACK_FAILED,
                              failed_notice(reason), MANIFEST, claim, _warn)
        raise


def _warn(message: str) -> None:
    import logging

    logging.getLogger("mintdim_beam").warning("[pack-build] %s", message)


def _finalize(shards, error, parts, plan, inputs, rows, rejected, numbering, state):
    if error is not None:
        raise WorkerFailure(error)
    config = plan.config
    if rows.skip:  # stops here when more rows were bad than max_rejected allows
        rejected_text, rejected_keys = finish_rejected(rows, rejected, numbering, {0: config}, 0)
    if not shards:
        raise WorkerFailure(PackEmptyError(files=[f.given for f in config.files],
                                           empty=sum(p.empty for p in parts)).to_payload())
    state["writing"] = True  # every check of the build's own errors is above
    out = config.output_path
    shards = sorted(shards, key=lambda s: s.shard)
    counts = {storage.join(out, s.name): (s.documents, s.documents + 1) for s in shards}
    storage.write_text_atomic(storage.join(out, SEQUENCES),
                              fmt.json_document(megatron.sequences_json(counts)), out)
    doc = manifest_doc(plan, shards, parts, inputs)
    sums = {name: summed for s in shards for name, summed in s.sums}
    if rows.skip:
        sums[fmt.REJECTED_INDEX] = checksums.write_text(
            storage.join(out, fmt.REJECTED_INDEX), rejected_text, out)
        doc.update(rejected_keys)
    # every shard file, as written; per_dataset_sequences.json names the output by its
    # absolute path (as Megatron's --data-path must), so verify checks it against the
    # shards instead
    doc["checksums"] = checksums.manifest_block(sums)
    storage.write_text_atomic(storage.join(out, MANIFEST), fmt.json_document(doc), out)
    maybe_fail("finalize", "pack")
    storage.remove_tree(storage.tmp_dir(out))
    release(out)
    return out


def failed_notice(reason: str) -> str:
    return ("# pack-build failed\n\n"
            f"{reason}\n\n"
            "This directory holds no manifest.json: its shards are not a complete build.\n"
            "Run `mintdim-beam clean` on it, fix the cause, and build again.\n")
