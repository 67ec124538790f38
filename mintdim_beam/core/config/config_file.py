"""CONFIG files (YAML or JSON, local or remote) that mirror the Python API."""
from __future__ import annotations

import json

from mintdim_beam.core.config.schema import (PACK_BUILD, TRAIN_TOKENIZER, UNIT_BUILD, Block,
                                            check_keys, check_run_options)
from mintdim_beam.core.errors import MintDimFileNotFoundError, PipelineValidationError
from mintdim_beam.core.files import storage

# The declared schemas of each command's config (`schema`): every block, every key.
KEYS = UNIT_BUILD
PACK_KEYS = PACK_BUILD
TRAIN_KEYS = TRAIN_TOKENIZER


def load_config(path: str, keys: Block = KEYS) -> dict:
    """The config's mapping; `keys` is the schema of its command's config: an unknown
    key in any block, or a run option's bad value, is refused here."""
    resolved = storage.resolve(path)
    if not storage.is_file(resolved):
        raise MintDimFileNotFoundError(context="config", missing_file=path)
    text = storage.read_bytes(resolved).decode("utf-8")
    try:
        if path.endswith(".json"):
            doc = json.loads(text)
        else:
            import yaml

            doc = yaml.safe_load(text)
    except Exception as exc:
        raise PipelineValidationError(missing=[f"a readable config in {path} ({exc})"]) from None
    if not isinstance(doc, dict):
        raise PipelineValidationError(missing=[f"a mapping at the top of {path}"])
    check_keys(doc, keys)
    check_run_options(doc, keys)
    return doc
