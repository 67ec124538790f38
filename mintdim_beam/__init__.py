"""mintdim-beam: instruction, chat and pretraining JSONL to fixed-width training shards,
as Apache Beam pipelines.

The package by capability, one floor on another: `core/` (configuration, inputs,
rendering, tokenizers, the binary formats, storage and ownership, errors; no Beam),
`read/` (UnitReader, PackReader and their blends: shards into training batches),
`runtime/` (what the pipelines run on: options, launching and signals, progress, helper
encoders), `unit_build/`, `pack_build/` and `train_tokenizer/` (the three Beam
pipelines, side by side), `audit/` (verify, report, plan), `export/` (builds written for
other trainers' readers), `records/` (a user's Beam records into our builds, behind the
public `transforms`);
`api` (the fluent builder), `cli` (the `mintdim-beam` command) and `errors` (the
errors' stable public path) on top."""
from mintdim_beam.api import pipeline
from mintdim_beam.core.errors import MintDimError
from mintdim_beam.core.quiet_imports import drop_beam_import_warning
from mintdim_beam.core.version import __version__
from mintdim_beam.read import (BlendedPackReader, BlendedUnitReader, PackReader,  # numpy
                               UnitReader)

drop_beam_import_warning()  # every entry point (API, command, pipelines/) imports us first

__all__ = ["pipeline", "PackReader", "UnitReader", "BlendedPackReader", "BlendedUnitReader",
           "MintDimError", "__version__"]
