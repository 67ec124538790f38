"""The transforms' arguments as the config the file builds validate: the same checks,
the same error classes (English and Vietnamese), raised when the transform is made or
applied, before any output exists. A user's records have no files: the source block
takes a placeholder that the arity rules count and no dataset keeps
(`unit_config.resolve_datasets(records=True)`)."""
from __future__ import annotations

import copy
import dataclasses

from mintdim_beam.core.config.prepare import RECORDS

# Sizes for a plan that only tokenizes (`TokenizeRecords`): units are the sink's.
_TOKENIZE_ONLY_SIZES = [1]


def source_block(fields=None, template=None, chat=None) -> dict:
    """The config's `source` for templated fields (`fields`, `template`) or a chat or
    preference source (`chat`: the source block's keys, `type` among them)."""
    from mintdim_beam.core.errors import PipelineValidationError

    if chat is not None:
        if fields is not None or template is not None:
            raise PipelineValidationError(missing=[
                "TokenizeRecords: either fields and template, or chat, not both"])
        if not isinstance(chat, dict):
            raise PipelineValidationError(missing=["chat (a dict of the source block's keys)"])
        block = copy.deepcopy(chat)
        block.setdefault("type", "chat")
        block["files"] = [RECORDS]
        return block
    if fields is None or template is None:
        raise PipelineValidationError(missing=["fields and template (or chat)"])
    return {"files": [RECORDS], "fields": [list(fields) if isinstance(fields, (list, tuple))
                                            else fields],
            "templates": [template]}


def raw_config(source: dict, tokenizer: dict, output: str, sizes, build_batch: int,
               samples_per_shard: int) -> dict:
    """One dataset's config in the seed's shape."""
    return {"source": copy.deepcopy(source), "tokenizer": copy.deepcopy(tokenizer),
            "units": {"sizes": [list(sizes) if isinstance(sizes, (list, tuple)) else sizes],
                      "build_batch": [build_batch]},
            "output": {"dir": [output], "samples_per_shard": [samples_per_shard]}}


def tokenize_plan(source: dict, tokenizer: dict, build_batch: int):
    """The plan that renders and tokenizes (no units, no output: nothing is written)."""
    from mintdim_beam.core.config.prepare import prepare
    from mintdim_beam.core.config.unit_config import resolve_datasets

    raw = raw_config(source, tokenizer, "records-tokenize", _TOKENIZE_ONLY_SIZES, build_batch, 1)
    dataset, = resolve_datasets(raw, records=True)
    return prepare(dataset)


def unit_plan(source: dict, tokenizer: dict, output: str, sizes, build_batch: int,
              samples_per_shard: int, on_lossy: str, rows, run_id: str):
    """The sink's plan: the whole config validated, its output checked free."""
    from mintdim_beam.core.config.prepare import prepare
    from mintdim_beam.core.config.unit_config import resolve_datasets
    from mintdim_beam.core.files.ownership import check_free

    raw = raw_config(source, tokenizer, output, sizes, build_batch, samples_per_shard)
    dataset, = resolve_datasets(raw, records=True)
    dataset = dataclasses.replace(dataset, run_id=run_id)
    check_free(dataset.output_path, dataset.output_given)
    return dataclasses.replace(prepare(dataset), on_lossy=on_lossy, bad_rows=rows)
