"""CONFIG files (YAML or JSON, local or remote) that mirror the Python API."""
from __future__ import annotations

import json

from mintdim_beam.core.errors import MintDimFileNotFoundError, PipelineValidationError
from mintdim_beam.core.files import storage

KEYS = ("source", "tokenizer", "units", "output", "on_overflow", "on_template_unk", "on_lossy",
        "on_bad_row", "max_rejected")
PACK_KEYS = ("source", "tokenizer", "pack", "output", "on_bad_row", "max_rejected")


def load_config(path: str, keys=KEYS) -> dict:
    """The config's mapping; `keys` are the top-level keys its command knows."""
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
    unknown = sorted(set(doc) - set(keys))
    if unknown:
        raise PipelineValidationError(missing=[f"known keys only in {path}: unknown {', '.join(unknown)}"])
    return doc
