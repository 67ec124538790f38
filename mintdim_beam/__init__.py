"""mintdim-beam: instruction, chat and pretraining JSONL to fixed-width training shards,
as Apache Beam pipelines.

The package by capability: `core/` (config, templates, tokenizers, the on-disk format,
inputs, storage, errors), `read/` (UnitReader: shards into training batches), `build/`
(the unit-build on Beam), `audit/` (verify, report, plan); `api` (the fluent builder)
and `cli` (the `mintdim-beam` command) on top."""
from mintdim_beam.api import pipeline
from mintdim_beam.core.quiet_imports import drop_beam_import_warning
from mintdim_beam.core.version import __version__
from mintdim_beam.read import UnitReader  # numpy, imported when a reader is made

drop_beam_import_warning()  # every entry point (API, command, pipelines/) imports us first

__all__ = ["pipeline", "UnitReader", "__version__"]
